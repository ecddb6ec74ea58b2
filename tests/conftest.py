"""Fixtures only; the shared helpers live in tests/helpers.py."""

from pathlib import Path

import pytest


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"
