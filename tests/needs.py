"""What a test needs from the machine: missing, it is skipped on a developer's machine and
fails under CI=true, where nothing is ever skipped."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(message: str, what: str) -> NoReturn:
    """``what`` (e.g. "PostgreSQL tests") cannot run here, for the reason ``message``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: {what} are never skipped)")
    pytest.skip(message)
