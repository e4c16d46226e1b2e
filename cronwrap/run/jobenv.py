"""The environment a job runs with: cronwrap's own, ``--env-file``'s lines, and what the job
needs to know about its run. JOB_VARIABLES is the registry the docs are made from."""

from __future__ import annotations

import sys

from cronwrap.model import job_host
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime
    from typing import Callable

    from cronwrap.model import Run

JOB_VARIABLES = {
    "CRONWRAP_JOB": "the job name",
    "CRONWRAP_RUN_ID": "the ledger id of this run, as `history` and `logs` show it; 0 for a run "
                       "the ledger does not record (`--on-db-error run-unrecorded`)",
    "CRONWRAP_RUN_KEY": "the slot's run key: its instant in UTC (`2026-10-28T01:30:00Z`), or "
                        "`--key` applied to it; without `--schedule`, the minute the firing "
                        "fell in",
    "CRONWRAP_SCHEDULED_AT": "the slot's time, ISO 8601 with offset, in the schedule's zone "
                             "(without `--schedule`: the firing's minute in the local zone). A "
                             "catch-up or manual run gets its slot's original time, never the "
                             "time it started",
    "CRONWRAP_BIZ_DATE": "the date of `CRONWRAP_SCHEDULED_AT`, `YYYY-MM-DD`",
    "CRONWRAP_ATTEMPT": "1, 2, ...: how many times this slot has been claimed (a retry, a "
                        "takeover and a `--force` re-run count)",
    "CRONWRAP_TRIGGER": "why the run started: `schedule` (a firing, for its own slot), "
                        "`catchup` (a missed slot run late, or a firing that matched no slot), "
                        "`takeover` (a slot whose runner died, run again by a later firing) "
                        "or `manual` (`--date`, `--at`)",
    "CRONWRAP_FENCE": "a fencing token: it strictly increases with every claim of this job, so "
                      "downstream writes can reject a smaller one (0 for an unrecorded run)",
    "CRONWRAP_HOST": "the host identity used in the ledger (`--host`)",
    "CRONWRAP_LEDGER": "the ledger this run is recorded in (`--db`, or `sqlite:///PATH` of the "
                       "embedded one), for `cronwrap step`. A password in the URL is passed "
                       "as given (the job is the same user), and cronwrap never prints it; "
                       "prefer `~/.pgpass` or a service file to a password in the URL",
    "CRONWRAP_STEPS_FROM": "the fence from which `cronwrap step` counts a step done: 0, or "
                           "under `run --force` the fence of the forced run's first attempt, "
                           "so a forced re-run does every step again and its retries keep "
                           "what it did",
}


def job_environment(environ: dict[str, str], extra: dict[str, str], run: Run, host: str,
                    local: Callable[[datetime], datetime] | None, ledger: str = "",
                    steps_from: int = 0) -> dict[str, str]:
    """``environ`` + ``extra`` (--env-file) + JOB_VARIABLES for ``run``; ``local``: a time as
    the schedule's zone shows it, or None for the local zone; ``ledger``: its URL
    (CRONWRAP_LEDGER)."""
    slot = run.scheduled_at
    scheduled = None if slot is None else local(slot) if local else slot.astimezone()
    values = (job_host(run.job)[0], str(run.run_id), run.run_key,
              scheduled.isoformat() if scheduled else "",
              scheduled.date().isoformat() if scheduled else "",
              str(run.attempt), run.trigger, str(run.fence), host, ledger, str(steps_from))
    return {**environ, **exec_values(extra), **exec_values(dict(zip(JOB_VARIABLES, values)))}


def exec_values(values: dict[str, str]) -> dict[str, str]:
    """``values`` as exec can hand them over in this locale: a value its charset cannot
    encode (``café`` in an ASCII locale: LC_ALL=C with PYTHONUTF8=0) goes as its UTF-8 bytes,
    carried in surrogate escapes, which exec passes through; the others as they are."""
    encoding = sys.getfilesystemencoding()
    out = {}
    for key, value in values.items():
        try:
            value.encode(encoding, "surrogateescape")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "surrogateescape").decode(encoding, "surrogateescape")
        out[key] = value
    return out
