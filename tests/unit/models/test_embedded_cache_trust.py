"""The embedded-LM cache is evidence, not fact: a manifest claiming another model or another
GGUF, or a folder missing its weights, is refused naming the folder with the right advice, and
nothing of it reaches a result's provenance; a dequantisation killed with SIGKILL leaves
nothing the next run does not remove. Tiny stand-ins: a few-byte "GGUF" and a fake dense save.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geomlens.models import embedded_lms
from geomlens.models.embedded_lms import EMBEDDED_LMS, MANIFEST, resolve_embedded


def stand_in(tmp_path: Path) -> embedded_lms.EmbeddedLM:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF stand-in\n")
    return dataclasses.replace(EMBEDDED_LMS["smollm2-135m-instruct"], locate_chunks=lambda: [gguf])


def fake_dense(gguf: Path, out: Path) -> None:
    out.mkdir(parents=True)
    (out / "config.json").write_text('{"model_type": "llama"}')
    (out / "model.safetensors").write_bytes(b"weights")
    (out / "tokenizer_config.json").write_text("{}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(embedded_lms.CACHE_ENV, str(folder))
    monkeypatch.setattr(embedded_lms, "_save_dense", fake_dense)
    return folder


def test_a_verified_folder_is_used_and_its_manifest_is_the_provenance(tmp_path, cache):
    lm = stand_in(tmp_path)
    resolved = resolve_embedded(lm)
    sha = hashlib.sha256(b"GGUF stand-in\n").hexdigest()
    assert resolved.model_source["gguf_sha256"] == sha
    assert resolved.model_source["name"] == lm.name


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "gemma-3-270m"), ("gguf_sha256", "0" * 64), ("quantisation", "F16")],
)
def test_a_false_manifest_is_refused_naming_the_folder(tmp_path, cache, field, value):
    lm = stand_in(tmp_path)
    folder = Path(resolve_embedded(lm).source)
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, field: value}))
    with pytest.raises(OSError) as error:  # was trusted and copied into provenance
        resolve_embedded(lm)
    message = str(error.value)
    assert "\n" not in message and str(folder) in message and field in message
    assert f"delete {folder}" in message


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda f: (f / "model.safetensors").unlink(), "model.safetensors missing"),
        (lambda f: (f / "config.json").write_text("{not json"), "config.json is not a JSON"),
        (lambda f: (f / MANIFEST).write_text("{not json"), "cannot be read"),
    ],
    ids=["no weights", "config not JSON", "manifest not JSON"],
)
def test_a_damaged_cache_folder_is_named_with_the_right_advice(tmp_path, cache, damage, said):
    lm = stand_in(tmp_path)
    folder = Path(resolve_embedded(lm).source)
    damage(folder)
    with pytest.raises(OSError) as error:
        resolve_embedded(lm)
    message = str(error.value)
    assert said in message and str(folder) in message and "dequantise it anew" in message
    for wrong in ("save_pretrained", "token ids", "Expecting"):
        assert wrong not in message


CHILD = """
import sys, time
from pathlib import Path
import dataclasses
from geomlens.models import embedded_lms

gguf = Path(sys.argv[1])
lm = dataclasses.replace(embedded_lms.EMBEDDED_LMS["smollm2-135m-instruct"], locate_chunks=lambda: [gguf])

def slow_dense(gguf, out):
    out.mkdir(parents=True)
    (out / "model.safetensors").write_bytes(b"x" * 1_000_000)  # half-written weights
    (out.parent / "READY").write_text("")
    time.sleep(600)

embedded_lms._save_dense = slow_dense
embedded_lms.resolve_embedded(lm)
"""


def test_a_dequantisation_killed_with_sigkill_leaves_nothing_a_rerun_keeps(tmp_path, cache):
    lm = stand_in(tmp_path)
    env = {**os.environ, embedded_lms.CACHE_ENV: str(cache)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "tiny.gguf")], env=env)
    deadline = time.monotonic() + 120
    while not list(cache.glob(".*/READY")) and time.monotonic() < deadline:
        assert child.poll() is None, "the child died before staging"
        time.sleep(0.1)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert list(cache.glob(".*/READY")), "the child never staged"  # the staging was left
    resolved = resolve_embedded(lm)  # a later run
    # As a clean run leaves it: the folder and its lock file, nothing hidden.
    names = sorted(p.name for p in cache.iterdir())
    folder = Path(resolved.source)
    assert names == [folder.name, folder.name + ".lock"], names
