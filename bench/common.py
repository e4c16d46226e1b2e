"""Helpers shared by bench/run.py and its rows in bench/fleet.py (the bench's own Python:
no psycopg here; PostgreSQL is reached through pgtool.py, run by the venv's Python)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent


def timed(argv: list[str], env: dict[str, str], **kw) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return (time.perf_counter() - start) * 1000


def timed_usage(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms of the process and the children it waited for, from wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    proc.returncode = 0  # reaped here: Popen must not wait for it again
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(values: list[float], unit: str = "ms") -> str:
    return (f"median {statistics.median(values):.1f} {unit}, p95 {pct(values, 95):.1f}, "
            f"max {max(values):.1f}")


def pg_url(database: str, user: str | None = None, host: str | None = None,
           port: int | str | None = None) -> str:
    """A URL for ``database`` on the server of the PG* environment, else 127.0.0.1:5432.

    The password, if any, stays in PGPASSWORD (libpq reads it): never in a URL or the table.
    ``user``, ``host``, ``port``: another role (the rows under a connection limit), another
    address (PgBouncer in front of the same server)."""
    host = host or os.environ.get("PGHOST") or "127.0.0.1"
    port = port or os.environ.get("PGPORT") or "5432"
    user = user or os.environ.get("PGUSER") or "postgres"
    return f"postgresql://{quote(user, safe='')}@{quote(host, safe='')}:{port}/{database}"


class PgSession:
    """One autocommit connection through bench/pgtool.py (bench's own Python may lack psycopg)."""

    def __init__(self, python: str, url: str) -> None:
        self.proc = subprocess.Popen([python, str(HERE / "pgtool.py"), "shell", url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def query(self, sql: str, *params) -> list[list]:
        self.proc.stdin.write(json.dumps({"sql": sql, "params": list(params)}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"pgtool ended (exit {self.proc.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{sql.split()[0]}: {answer['error']}")
        return answer["rows"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def wait_for_minute(latest_second: float) -> None:
    """Return at once if the minute is at most ``latest_second`` old, else at the next minute."""
    into = time.time() % 60
    if into > latest_second:
        print(f"    waiting {60 - into:.0f} s for the start of a minute", flush=True)
        time.sleep(60 - into + 0.2)


def read_events(home: Path) -> list[dict]:
    path = home / "logs" / "events.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


def event_time(event: dict) -> float:
    from datetime import datetime

    return datetime.fromisoformat(event["ts"]).timestamp()


def run_with_usage(argv: list[str], env: dict[str, str], on_spawn=None,
                   on_exit=None) -> tuple[int, float, float, float, str]:
    """(exit status, launch time, wall ms, CPU ms of the process, stderr)."""
    launched = time.time()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if on_spawn is not None:
        on_spawn(proc.pid)
    err = proc.stderr.read()
    if on_exit is not None:
        on_exit(proc.pid)  # before the PID is reaped and free for reuse
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    return (proc.returncode, launched, wall, (usage.ru_utime + usage.ru_stime) * 1000,
            err.decode(errors="replace"))


class ConnectionSampler(threading.Thread):
    """Counts the server connections of one role every ``interval`` s, from a session of its
    own (a superuser's: it is not counted, and no role limit keeps it out)."""

    def __init__(self, session: PgSession, role: str, interval: float = 0.05) -> None:
        super().__init__(daemon=True, name=f"sampler-{role}")
        self.session, self.role, self.interval = session, role, interval
        self.samples: list[tuple[float, int]] = []  # (epoch seconds, connections)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            ((n,),) = self.session.query(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", self.role)
            self.samples.append((time.time(), n))

    def stop(self) -> None:
        self.done.set()
        self.join()
        self.session.close()

    @property
    def peak(self) -> int:
        return max((n for _, n in self.samples), default=0)

    def peak_between(self, start: float, end: float) -> int | None:
        """The most connections seen from ``start`` to ``end``; None without a sample there."""
        seen = [n for t, n in self.samples if start <= t <= end]
        return max(seen) if seen else None
