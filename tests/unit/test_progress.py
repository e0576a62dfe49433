"""Honest progress: no step of a run is silent for long, bars end at 100 %, no false ETA."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from geomlens import progress

#: The acceptance bound: no phase longer than this passes without a progress line.
LONGEST_SILENCE = 10.0


def _stamped_output(command: list[str], env: dict[str, str]) -> tuple[int, list[tuple[float, str]]]:
    """Run ``command``; every piece of output it writes, standard output and error (a line, or a
    bar redrawn after a carriage return), with the time it arrived."""
    process = subprocess.Popen(command, stderr=subprocess.STDOUT, stdout=subprocess.PIPE, env=env)
    pieces: list[tuple[float, str]] = [(time.monotonic(), "<start>")]

    def read() -> None:
        buffer = b""
        while chunk := process.stdout.read1(4096):
            buffer += chunk
            *done, buffer = buffer.replace(b"\r", b"\n").split(b"\n")
            stamp = time.monotonic()
            pieces.extend((stamp, line.decode(errors="replace")) for line in done if line.strip())

    reader = threading.Thread(target=read)
    reader.start()
    code = process.wait(timeout=1200)
    reader.join()
    return code, pieces


def _longest_gap(pieces: list[tuple[float, str]]) -> tuple[float, str]:
    """The longest silence from the first line to the last (importing torch comes before
    geomlens can print anything, and the interpreter's exit after it has said everything)."""
    pieces = pieces[1:]
    gaps = [(b[0] - a[0], f"after {a[1]!r}, before {b[1]!r}") for a, b in zip(pieces, pieces[1:])]
    return max(gaps)


def test_a_long_phase_keeps_saying_it_is_running(monkeypatch, capsys):
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.2)
    with progress.showing_progress(True), progress.phase("planted wait"):
        time.sleep(1.0)
    lines = capsys.readouterr().err.splitlines()
    still = [line for line in lines if "planted wait: still running" in line]
    assert len(still) >= 3, lines
    assert lines[-1].startswith("geomlens: planted wait: done in")


def test_a_quick_phase_and_a_quiet_run_print_nothing(capsys):
    with progress.showing_progress(True), progress.phase("instant"):
        pass
    with progress.showing_progress(False), progress.phase("hidden", announce=True):
        pass
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_report_is_never_silent_for_more_than_ten_seconds(tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [
        sys.executable, "-m", "geomlens", "report", "--quick", "--out", str(tmp_path),
        "--analysis", "activation-stats", "--analysis", "resolution",
    ]  # fmt: skip
    code, pieces = _stamped_output(command, env)
    assert code == 0, "\n".join(text for _, text in pieces[-20:])
    gap, where = _longest_gap(pieces)
    assert gap <= LONGEST_SILENCE, f"{gap:.1f} s without a progress line, {where}"
    text = "\n".join(line for _, line in pieces)
    assert "pass 1 of" in text and "drawing the figures" in text
    assert "pass/s" not in text, "no bar counting passes (its ETA would be false)"
