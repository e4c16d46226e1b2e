"""``cronwrap step KEY -- CMD``: a part of a job that runs once per slot, under the slot's fence.

Called by a job that ``cronwrap run`` started: the run is found through the job's environment
(``CRONWRAP_LEDGER``, ``CRONWRAP_RUN_ID``, ``CRONWRAP_RUN_KEY``, ``CRONWRAP_FENCE``,
``CRONWRAP_STEPS_FROM``: run/jobenv.py). One transaction starts the step (``Ledger.begin_step``:
``model.step_action`` decides from the run row and the step as recorded, and the record is
written only while the run's fence is this attempt's); the command runs with the job's
environment, as a child of this process, in the job's process group, so that the keeper's
signals reach it; its end is recorded over this attempt's start of the step only.

Exit statuses: the command's own (128+N when a signal N ended it; 126, 127 when it could not
be started); 0 without running it when the step already succeeded in this slot; 123
(``EXIT_SUPERSEDED``) when the slot is no longer this attempt's — taken over by another
attempt, ended, or its lease ran out — before the command started or while it ran; 125 for
a mistake (outside a cronwrap run, a bad key, the ledger unreachable). ``--done`` only asks:
0 done, 1 not.
"""

from __future__ import annotations

import os
import signal
import time

from cronwrap.errors import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SIGNAL_BASE, \
    EXIT_SUPERSEDED, UsageError
from cronwrap.ledger.url import open_ledger
from cronwrap.model import (STEP_DONE, STEP_FENCED, STEP_GONE, STEP_LAPSED, STEP_RUN, Run,
                            Status, Step, iso, job_host)
from cronwrap.paths import resolve_dirs
from cronwrap.record import TYPE_CHECKING
from cronwrap.stdio import warn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cronwrap.ledger.base import Ledger

MAX_KEY = 200
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)


class Here:
    """The run this process is a part of, from the job's environment."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        def number(name: str) -> int:
            text = environ.get(name, "")
            if not text.isascii() or not text.isdigit():
                raise UsageError(f"step: {name} is {text!r}, not a number: run it from a job "
                                 "that cronwrap run started, with the environment it was given")
            return int(text)

        if "CRONWRAP_RUN_ID" not in environ:
            raise UsageError("step: not inside a run of cronwrap (CRONWRAP_RUN_ID is not set): "
                             "call cronwrap step from the command of a cronwrap run")
        self.run_id = number("CRONWRAP_RUN_ID")
        self.fence = number("CRONWRAP_FENCE")
        self.since = number("CRONWRAP_STEPS_FROM") if environ.get("CRONWRAP_STEPS_FROM") else 0
        self.run_key = environ.get("CRONWRAP_RUN_KEY", "")
        self.job = environ.get("CRONWRAP_JOB", "")
        self.host = environ.get("CRONWRAP_HOST") or os.uname().nodename
        # A wrapper older than cronwrap step exports no CRONWRAP_LEDGER: its job's step tries
        # the ledger cronwrap's own settings name (CRONWRAP_DB, else the embedded one); the
        # run id and run key must then be found there, or the step fails with one line.
        self.ledger = environ.get("CRONWRAP_LEDGER") or environ.get("CRONWRAP_DB") or None

    @property
    def recorded(self) -> bool:
        """False for a run the ledger does not record (--on-db-error run-unrecorded)."""
        return self.run_id > 0 and self.fence > 0

    def open(self) -> Ledger:
        return open_ledger(self.ledger, resolve_dirs(dict(os.environ)), exiting=True)

    def check(self, run: Run | None) -> None:
        if run is not None and job_host(run.job)[0] != self.job:
            raise UsageError(f"step: run {self.run_id} of the ledger is job "
                             f"{job_host(run.job)[0]!r}, not CRONWRAP_JOB {self.job!r}: the "
                             "environment names another run")


def step(key: str, command: list[str] | None, force: bool, done: bool) -> int:
    if not key or len(key) > MAX_KEY or not key.isprintable():
        shown = f"{key[:40]!r}{'…' if len(key) > 40 else ''}"
        raise UsageError(f"step: the key {shown} must be 1 to {MAX_KEY} printable characters "
                         "(e.g. batch-0003)")
    if done and (command or force):
        raise UsageError("step --done only asks whether the step is done: give no command "
                         "and no --force")
    if not done and not command:
        raise UsageError(f"step {key}: no command: cronwrap step KEY -- COMMAND [ARG...]")
    here = Here(os.environ)
    if done:
        return asked(here, key)
    assert command is not None
    if not here.recorded:
        warn(f"step {key}: this run is not recorded in the ledger (--on-db-error "
             "run-unrecorded): running it without a record")
        return run_command(command)[0]
    ledger = here.open()
    begun = ledger.begin_step(here.run_id, here.run_key, here.fence, key, here.host,
                              os.getpid(), force, here.since)
    here.check(begun.run)
    if begun.action != STEP_RUN:
        ledger.close()
        return refused(key, begun.action, begun.run, begun.step, here.fence)
    run = begun.run
    assert run is not None
    ledger.idle()  # no server connection while the command runs
    started = time.monotonic()
    status, sig = run_command(command)
    duration_ms = round((time.monotonic() - started) * 1000)
    recorded, now = ledger.end_step(run, key, Status.SUCCEEDED if status == 0 else Status.FAILED,
                                    None if sig else status, sig, duration_ms)
    ledger.close()
    if not recorded or now is None or now.fence != run.fence or now.status != Status.RUNNING:
        if now is not None and now.fence != run.fence:
            why = f"taken over by attempt {now.attempt} on {now.host or '?'} (fence {now.fence})"
        else:
            why = "ended" if now is None else f"ended ({now.status})"
        warn(f"step {key}: slot {run.run_key} was {why} while the step ran (exit {status}); "
             f"its end was {'recorded' if recorded else 'not recorded'}: stopping this attempt "
             f"(exit {EXIT_SUPERSEDED})")
        return EXIT_SUPERSEDED
    return status


def asked(here: Here, key: str) -> int:
    """``--done``: 0 when the step succeeded in this slot (counting from CRONWRAP_STEPS_FROM)."""
    if not here.recorded:
        return 1
    ledger = here.open()
    try:
        run, found = ledger.step_state(here.run_id, here.run_key, key)
    finally:
        ledger.close()
    here.check(run)
    return 0 if found is not None and found.status == Status.SUCCEEDED \
        and found.fence >= here.since else 1


def refused(key: str, action: str, run: Run | None, found: Step | None, fence: int) -> int:
    """The one line, and the exit status, of a step that is not run."""
    if action == STEP_DONE:
        assert found is not None
        warn(f"step {key}: already succeeded in this slot (attempt {found.attempt} on "
             f"{found.host or '?'}, ended {iso(found.finished_at) or '?'}): not run again "
             "(--force runs it)")
        return 0
    if action == STEP_GONE or run is None:
        raise UsageError(f"step {key}: the ledger has no run {os.environ.get('CRONWRAP_RUN_ID')} "
                         f"with run key {os.environ.get('CRONWRAP_RUN_KEY', '')!r} (pruned, or "
                         "CRONWRAP_LEDGER names another ledger)")
    if action == STEP_LAPSED:
        warn(f"step {key}: refused: the lease of slot {run.run_key} has run out (its wrapper "
             f"could not renew it) and another attempt may take it over: exit {EXIT_SUPERSEDED}")
        return EXIT_SUPERSEDED
    assert action == STEP_FENCED
    why = (f"taken over by attempt {run.attempt} on {run.host or '?'} (fence {run.fence}, "
           f"now {run.status})" if run.fence != fence else f"ended ({run.status})")
    warn(f"step {key}: refused: slot {run.run_key} is no longer this attempt's, it was {why}: "
         f"exit {EXIT_SUPERSEDED}")
    return EXIT_SUPERSEDED


def run_command(argv: list[str]) -> tuple[int, int | None]:
    """Run ``argv`` (no shell) with this environment, passing on the signals a person or the
    keeper sends to this process; its exit status (128+N for signal N) and the signal."""
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ)
    except FileNotFoundError:
        warn(f"step: {argv[0]}: command not found")
        return EXIT_NOT_FOUND, None
    except OSError as exc:
        warn(f"step: {argv[0]}: {exc.strerror}")
        return EXIT_NOT_EXECUTABLE, None

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    while True:
        try:
            _, wait_status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            return EXIT_NOT_FOUND, None
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        return EXIT_SIGNAL_BASE + sig, sig
    return os.waitstatus_to_exitcode(wait_status), None
