from __future__ import annotations

import os
import time
from pathlib import Path

import pytest


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or before the read
        return False


def same_minute(margin: float = 8.0) -> None:
    """Tests that need two firings in one minute (one slot) start early in a minute."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.1)


@pytest.fixture
def script(tmp_path: Path):
    """Write an executable shell script and return its path."""
    def make(name: str, body: str) -> str:
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + body)
        os.chmod(path, 0o755)
        return str(path)
    return make
