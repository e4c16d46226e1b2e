"""Simulated hosts: a cronwrap with its own CRONWRAP_HOST and CRONWRAP_HOME (so its own local
locks and logs), as if on another machine, all sharing one ledger (CRONWRAP_DB)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import CW, job_holder


class Host(CW):
    def __init__(self, root: Path, name: str, dsn: str) -> None:
        super().__init__(root / name)
        self.name, self.dsn = name, dsn

    def env(self, extra=None):
        env = super().env(extra)
        env.setdefault("CRONWRAP_HOST", self.name)
        env.setdefault("CRONWRAP_DB", self.dsn)
        return env

    def events(self) -> list[dict]:
        path = self.home / "logs" / "events.jsonl"
        return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []

    def lock_holder(self, job: str) -> list[int]:
        """WRAPPER_PID WRAPPER_START JOB_PID JOB_START, once the job has been spawned"""
        return job_holder(self.home, job)


def kill_runner(host: Host, job: str, sig: int) -> None:
    """Signal a runner at once: its wrapper and its job's process group."""
    pid, _, job_pid, _ = host.lock_holder(job)
    os.kill(pid, sig)
    try:
        os.killpg(job_pid, sig)
    except ProcessLookupError:  # the wrapper's keeper, seeing it gone, has ended the job first
        pass
