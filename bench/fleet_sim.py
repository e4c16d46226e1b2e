"""Firings of the fleet row of bench/run.py that are not exec'd processes, and its takeover probe.

    python fleet_sim.py sim CONFIG OUT      fork a firing for each entry of CONFIG, every minute
    python fleet_sim.py probe CONFIG OUT    take over the slots read from stdin (JSON list)

Run with bench/.venv's python: the installed cronwrap, nothing patched.

sim: a fork server. It imports cronwrap (and psycopg) once, then at each firing's time forks a
child that runs cronwrap's own ``cli.main(["run", "-n", JOB, "--lease", L, "--", COMMAND])``
with the simulated host's environment (CRONWRAP_HOME, CRONWRAP_HOST, CRONWRAP_DB): the whole
``cronwrap run`` — parser, lock, ledger, claim, the job as a real child process, heartbeats,
finish, outbox, run log — less the interpreter's start-up and imports, which are most of a
firing's CPU (psycopg's import alone is ~100 ms: ARCHITECTURE.md §9). A 2-core machine can fork ~1,000 of
these a minute; it cannot exec that many. The server stays single-threaded (it forks), reaps
children with wait4 and appends one JSON line per firing to OUT:

    {"host", "job", "minute", "due", "launched", "pid", "exit", "wall_ms", "cpu_ms", "stderr"}

(exit: as ``os.waitstatus_to_exitcode``; stderr: the last 400 bytes the firing wrote there).

CONFIG: {"url", "lease", "minutes": [epoch s], "entries": [{"host", "job", "duration",
"offset", "every", "phase", "home"}]}: each entry fires at the minutes i (0, 1, ...) where
(i + phase) % every is 0, + its offset (seconds); duration 0 runs ``true``, else ``sleep
DURATION``.

probe: {"url", "host", "lease", "interval", "deadline"}; stdin: [{"job", "run_key",
"scheduled_at"}]. The slots of a host that died in the middle of its runs: each is claimed
every ``interval`` s, a firing's ledger calls each time (``PostgresLedger(url)``, ``claim``,
``finish`` of the claimed run, ``close``), until the claim succeeds (the holder's lease must
expire first) or ``deadline``. A new ``cronwrap run`` could not do this: its slot is the
minute it fires in, not the dead host's. One JSON line per slot: {"job", "run_key",
"claimed_at", "took_over", "fence", "attempts", "errors", "last_error", "finish", "tries":
[[epoch s, seconds, skip reason or "claimed"], …]}.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import time
from datetime import datetime

from cronwrap.errors import LedgerError
from cronwrap.ledger.postgres import PostgresLedger
from cronwrap.model import ClaimRequest, Finish, JobInfo
from cronwrap.process import procs

DB_WAIT = 60.0  # --db-wait's default, passed on if the ledger takes it


class Output:
    def __init__(self, path: str) -> None:
        self.file = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, record: dict) -> None:
        with self.lock:
            self.file.write(json.dumps(record) + "\n")


def open_ledger(url: str) -> PostgresLedger:
    """``PostgresLedger(url)``, with --db-wait's default if this cronwrap's ledger takes it as
    an argument (as runner.open_ledger passes it)."""
    params = inspect.signature(PostgresLedger).parameters
    extra = {name: DB_WAIT for name in ("db_wait", "wait") if name in params}
    return PostgresLedger(url, **extra)


def request(job: str, host: str, run_key: str, scheduled_at: datetime, lease: float) -> ClaimRequest:
    pid, pid_start = procs.self_identity()
    return ClaimRequest(job=JobInfo(job), run_key=run_key, scheduled_at=scheduled_at,
                        trigger="schedule", host=host, pid=pid, pid_start=pid_start, lease=lease,
                        overlap_skip=True, force=False,
                        is_gone=lambda p, s: not procs.is_alive(p, s))


def done(duration_ms: int) -> Finish:
    return Finish(status="succeeded", duration_ms=duration_ms, exit_code=0, signal=None,
                  timed_out=False, error_tail=None, log_path=None)


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def close(ledger: PostgresLedger | None) -> None:
    if ledger is not None:
        try:
            ledger.close()
        except Exception:
            pass


WARM = ("cronwrap.cli", "cronwrap.run.runner", "cronwrap.options.spec", "cronwrap.process.supervise",
        "cronwrap.process.locks", "cronwrap.run.runlog", "cronwrap.run.outbox", "cronwrap.run.hooks",
        "cronwrap.ledger.postgres", "psutil")


def warm_up() -> None:
    """Import what a firing imports, once, before any fork."""
    import importlib

    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def child(config: dict, entry: dict, err_path: str) -> None:
    """In the forked child: be one ``cronwrap run`` of ``entry``; never returns."""
    code = 70
    try:
        from cronwrap import cli

        os.environ.update(CRONWRAP_HOME=entry["home"], CRONWRAP_HOST=entry["host"],
                          CRONWRAP_DB=config["url"])
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        command = ["sleep", str(entry["duration"])] if entry["duration"] else ["true"]
        code = cli.main(["run", "-n", entry["job"], "--lease", f"{config['lease']:g}s", "--",
                         *command])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def simulate(config: dict, out: Output, err_dir: str) -> None:
    warm_up()
    plan = sorted((m + e["offset"], i, n, e) for i, m in enumerate(config["minutes"])
                  for n, e in enumerate(config["entries"]) if (i + e["phase"]) % e["every"] == 0)
    running: dict[int, dict] = {}
    for count, (due, minute, _, entry) in enumerate(plan):
        while time.time() < due:
            reap(running, out, block=False)
            time.sleep(min(0.01, max(0.0, due - time.time())))
        err_path = os.path.join(err_dir, f"{count}.err")
        rec = {"host": entry["host"], "job": entry["job"], "minute": minute, "due": due,
               "launched": time.time(), "err": err_path, "t0": time.perf_counter()}
        pid = os.fork()
        if pid == 0:
            child(config, entry, err_path)
        rec["pid"] = pid
        running[pid] = rec
    while running:
        reap(running, out, block=True)


def reap(running: dict[int, dict], out: Output, block: bool) -> None:
    while running:
        pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
        if pid == 0:
            return
        rec = running.pop(pid, None)
        if rec is None:
            continue
        rec["wall_ms"] = (time.perf_counter() - rec.pop("t0")) * 1000
        rec["exit"] = os.waitstatus_to_exitcode(status)
        rec["cpu_ms"] = (usage.ru_utime + usage.ru_stime) * 1000
        err = rec.pop("err")
        try:
            with open(err, "rb") as f:
                rec["stderr"] = f.read()[-400:].decode(errors="replace")
            os.unlink(err)
        except OSError:
            rec["stderr"] = ""
        out.write(rec)
        if block:
            return


def take_over(config: dict, slot: dict, out: Output) -> None:
    rec = {"job": slot["job"], "run_key": slot["run_key"], "claimed_at": None, "attempts": 0,
           "errors": 0, "last_error": None, "finish": None, "tries": []}
    scheduled_at = datetime.fromisoformat(slot["scheduled_at"])
    try:
        while time.time() < config["deadline"]:
            tried = time.monotonic()
            rec["attempts"] += 1
            ledger = None
            try:
                ledger = open_ledger(config["url"])
                claim = ledger.claim(request(slot["job"], config["host"], slot["run_key"],
                                             scheduled_at, config["lease"]))
                rec["tries"].append([round(time.time(), 3), round(time.monotonic() - tried, 3),
                                     claim.skip_reason or "claimed"])
                if claim.run is not None:
                    rec.update(claimed_at=time.time(), took_over=claim.took_over,
                               fence=claim.run.fence)
                    recorded = ledger.finish(claim.run, done(1))
                    rec["finish"] = "recorded" if recorded else "lease_lost"
                    return
            except LedgerError as exc:
                rec["errors"] += 1
                rec["last_error"] = one_line(exc)
                if rec["claimed_at"] is not None:
                    rec["finish"] = "error"
                    return
            finally:
                close(ledger)
            time.sleep(max(0.0, tried + config["interval"] - time.monotonic()))
    finally:
        out.write(rec)


def probe(config: dict, out: Output) -> None:
    print("ready", flush=True)
    slots = json.loads(sys.stdin.readline())
    threads = [threading.Thread(target=take_over, args=(config, s, out)) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> int:
    mode, config_path, out_path = sys.argv[1:4]  # sim: a directory for stderr files follows
    with open(config_path) as f:
        config = json.load(f)
    out = Output(out_path)
    if mode == "sim":
        simulate(config, out, sys.argv[4])
    else:
        probe(config, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
