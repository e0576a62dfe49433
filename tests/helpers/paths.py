"""Where the repository's folders are, wherever a test file sits under tests/."""

from pathlib import Path

#: The repository root (the folder holding src/, docs/, tutorials/, scripts/).
REPO = Path(__file__).resolve().parents[2]
