"""Honest progress: no step of a run is silent for long, bars end at 100 %, no false ETA."""

from __future__ import annotations

import os
import re
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


def test_a_long_phase_without_a_count_speaks_less_and_less_often(monkeypatch, capsys):
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(progress, "HEARTBEAT_MAX_SECONDS", 0.8)
    with progress.showing_progress(True), progress.phase("planted wait"):
        time.sleep(2.4)
    lines = capsys.readouterr().err.splitlines()
    said = [line for line in lines if "planted wait:" in line and "done in" not in line]
    # Intervals 0.2, 0.4, 0.8, 0.8 …: about 4 lines in 2.4 s, where a fixed 0.2 s gave 12.
    assert 2 <= len(said) <= 6, lines
    assert all("so far (this step has no count to show)" in line for line in said), said
    assert len(set(said)) == len(said), "no line repeats another"
    assert lines[-1].startswith("geomlens: planted wait: done in")


@pytest.mark.parametrize("raised", [ValueError("planted"), KeyboardInterrupt()], ids=repr)
def test_a_phase_left_by_an_exception_does_not_say_done(raised, capsys):
    # Ctrl-C during `geomlens sae train` printed "SAE at …: done in 0.0005 s" above
    # "interrupted; no SAE was cached.": the phase read as finished when nothing was.
    with (
        pytest.raises(type(raised)),
        progress.showing_progress(True),
        progress.phase("planted step", announce=True),
    ):
        raise raised
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["geomlens: planted step …"], lines


def test_a_counted_phase_reports_the_count_its_target_and_an_eta(monkeypatch, capsys):
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.2)
    with (
        progress.showing_progress(True),
        progress.phase("capturing"),
        progress.counting("captured", 1000, "tokens") as count,
    ):
        for _ in range(10):
            count.add(50)
            time.sleep(0.1)
    said = [line for line in capsys.readouterr().err.splitlines() if "of 1,000 tokens" in line]
    assert said, "the count is reported"
    assert all("captured (" in line and "left" in line for line in said), said


def test_the_eta_is_the_average_rate_since_the_count_began():
    count = progress.Count("captured", 1000, "tokens")
    count.started = 100.0
    count.add(250)  # 250 tokens in the first 10 s: 25 per second, 750 left → 30 s
    assert count.eta(now=110.0) == pytest.approx(30.0)
    assert count.words(now=110.0) == "250 of 1,000 tokens captured (25 %), about 30 s left"
    count.add(750)
    assert count.eta(now=120.0) is None, "done: no time left to guess"
    assert progress.Count("read", None, "rows").eta() is None, "no target, no ETA"


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
    assert "geomlens: plan: load the model, run its 2 analyses" in text, "the plan comes first"
    assert "passes planned: 1." in text or "pass planned: 1." in text
    for line in text.splitlines():  # no count above its target
        counted = re.search(r": ([\d,]+) of ([\d,]+) ", line)
        if counted:
            done, total = (int(g.replace(",", "")) for g in counted.groups())
            assert done <= total, line


def test_a_count_never_passes_its_target():
    """A last batch that overshoots the target is counted up to it: never "5,868 of 5,000"."""
    count = progress.Count("content tokens read", 5000, "")
    count.add(4975)
    count.add(893)
    assert count.done == 5000
    assert count.words().startswith("5,000 of 5,000") and "(100 %)" in count.words()


def test_an_inner_step_adds_to_the_open_count_rather_than_opening_its_own():
    """SAE training counts tokens trained on; the chunks it reads inside must not alternate a
    second count (with another target) with it."""
    assert not progress.counted()
    with progress.counting("token activations read and trained on", 100, ""):
        assert progress.counted()
    assert not progress.counted()


def test_a_loop_over_sites_inside_a_phase_gives_a_fixed_count(monkeypatch, capsys):
    """Computing an analysis's results loops over its sites: its progress lines count sites
    against one fixed target (never "no count to show"), and never past it."""
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.2)
    sites = [f"blocks.{n}.hook_resid_post" for n in range(4)]
    with progress.showing_progress(True), progress.phase("resolution: computing its results"):
        for _ in progress.each(sites, "sites finished"):
            for _ in progress.each(["task"] * 3, "tasks finished"):  # inner loops add nothing
                time.sleep(0.12)
    lines = [line for line in capsys.readouterr().err.splitlines() if "so far" in line]
    assert lines and all(re.search(r"\d of 4 sites finished", line) for line in lines), lines
    assert not any("no count to show" in line or "tasks finished" in line for line in lines)
    counts = [int(re.search(r"(\d) of 4", line).group(1)) for line in lines]
    assert counts == sorted(counts) and max(counts) <= 4


def test_two_loops_in_one_phase_keep_one_target(monkeypatch, capsys):
    """linearization-effect finalizes two conditions, each looping over its sites: the phase's
    count keeps the first loop's target (a second loop adds none), never 2 then 6."""
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.2)
    with progress.showing_progress(True), progress.phase("linearization-effect: computing"):
        for _ in progress.each(["a", "b"], "sites finished"):
            time.sleep(0.3)
        for _ in progress.each(list(range(6)), "sites finished"):
            time.sleep(0.1)
    targets = set(re.findall(r"\d of (\d) sites", capsys.readouterr().err))
    assert targets == {"2"}, targets
