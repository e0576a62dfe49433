"""An SAE cache entry killed with SIGKILL while it was being written leaves a staging folder;
the next run removes it, and the cache ends as a clean run leaves it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from geomlens.sae.cache import publish_folder

CHILD = """
import sys, time
from pathlib import Path
from geomlens.sae.cache import publish_folder

def slow(staging):
    (staging / "sae_weights.safetensors").write_bytes(b"x" * 100_000)
    (staging / "READY").write_text("")
    time.sleep(600)

publish_folder(Path(sys.argv[1]), slow, {"model": "m"})
"""


def test_a_publish_killed_with_sigkill_leaves_nothing_the_next_run_keeps(tmp_path):
    cache = tmp_path / "sae"
    entry = cache / "m__site__0123456789abcdef"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(entry)], env=dict(os.environ))
    deadline = time.monotonic() + 120
    while not list(cache.glob(".*/READY")) and time.monotonic() < deadline:
        assert child.poll() is None, "the child died before staging"
        time.sleep(0.1)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert list(cache.glob(".*/READY"))  # what the kill left
    publish_folder(entry, lambda staging: (staging / "cfg.json").write_text("{}"), {"model": "m"})
    dirs = sorted(p.name for p in cache.iterdir() if p.is_dir())
    assert dirs == [entry.name], dirs
    assert sorted(p.name for p in entry.iterdir()) == ["cfg.json", "geomlens_cache_key.json"]
