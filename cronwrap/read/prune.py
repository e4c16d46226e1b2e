"""``cronwrap prune``: ledger rows and log files past their retention.

Rows go first (the ledger decides which: never a running run, never a slot inside its job's
catch-up window, always each job's newest ``--keep-last``); then the captured output of the
removed runs, then any output file and rotated run log older than the cutoff.

Files are removed in cronwrap's log directory (every job's subdirectory) and in each job's
own log directory: the ones this host's operator configured (``CRONWRAP_LOG_DIR``, ``log-dir``
in the config file) and the one the job's firings recorded in the ledger (its ``--log-dir``).
Anyone who can write a shared ledger chooses what it records, so a job's own directory is
used only as far as cronwrap trusts a directory it uses itself (``paths.check_dir``: a real
directory owned by this user, not writable by others), and in it only cronwrap's own names
are removed, never through a symlink: the regular files ``NAME/RUN_ID.ATTEMPT.log`` of the
jobs that use it, and rotated run logs ``events.jsonl.N``. A ledger row's ``log_path`` is
removed only inside the log directory or such a trusted one.
"""

from __future__ import annotations

import json
import math
import os
import stat
from datetime import datetime, timezone

from cronwrap.errors import PathError
from cronwrap.model import job_host
from cronwrap.paths import check_dir, file_name
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.run.runlog import EVENTS_FILE, OUTPUT_SUFFIXES, prune_event_logs, prune_outputs

if TYPE_CHECKING:
    from typing import Callable, Container, Iterable

    from cronwrap.ledger import base

    # directory -> job -> names of removed rows' output files there
    OwnDirs = dict[str, dict[str, set[str]]]


class Pruned(Record):
    runs: int
    files: int


def _none(job: str) -> list[str]:
    return []


def prune(ledger: base.Ledger, log_dir: str, age: float, keep_last: int, now: float,
          configured: Callable[[str], Iterable[str]] = _none) -> Pruned:
    """``configured(job)``: the log directories this host's operator set for ``job``."""
    own = _own_log_dirs(ledger, log_dir, configured, now)  # first: a bad config removes nothing
    removed = ledger.prune(datetime.fromtimestamp(now - age, timezone.utc), keep_last)
    files = 0
    for _, job, path in removed:
        if path and _remove_inside(log_dir, path):
            files += 1
        elif path:
            _mark_row_output(own, job_host(job)[0], path)
    files += _prune_default(log_dir, age, now)
    files += sum(_prune_own(directory, jobs, now - age) for directory, jobs in own.items())
    return Pruned(len(removed), files)


def _own_log_dirs(ledger: base.Ledger, log_dir: str,
                 configured: Callable[[str], Iterable[str]], now: float) -> OwnDirs:
    """Every job's own log directories besides ``log_dir``, and the jobs that use each; not
    yet trusted: that is checked when one is opened."""
    default = os.path.abspath(log_dir)
    own: OwnDirs = {}
    for summary in ledger.summaries(datetime.fromtimestamp(now, timezone.utc)):
        job = job_host(summary.job)[0]  # on disk a host's share of a job is the job
        for directory in [*map(os.path.abspath, configured(job)),
                          *_recorded(ledger, summary.job)]:
            if directory != default:
                own.setdefault(directory, {}).setdefault(job, set())
    return own


def _recorded(ledger: base.Ledger, job: str) -> list[str]:
    """The job's --log-dir as its firings recorded it; a relative one meant the job's working
    directory, unknown here."""
    info = ledger.job_info(job)
    try:
        value = json.loads(info.settings).get("log_dir") if info and info.settings else None
    except (ValueError, AttributeError):  # not a JSON object: not written by cronwrap
        return []
    if isinstance(value, str) and os.path.isabs(value) and "\0" not in value:
        return [os.path.normpath(value)]
    return []


def _mark_row_output(own: OwnDirs, job: str, path: str) -> None:
    """A removed row's output in one of its job's own directories goes whatever its age."""
    job_dir, name = os.path.split(os.path.abspath(path))
    directory, sub = os.path.split(job_dir)
    if sub == file_name(job) and job in own.get(directory, {}):
        own[directory][job].update((name, name.removesuffix(".log") + ".times"))


def _prune_default(log_dir: str, age: float, now: float) -> int:
    try:
        job_dirs = [e.path for e in os.scandir(log_dir) if e.is_dir(follow_symlinks=False)]
    except OSError:
        job_dirs = []
    files = sum(prune_outputs(d, age, now)[0] for d in job_dirs)
    prune_event_logs(log_dir, age, now)
    return files


def _prune_own(directory: str, jobs: dict[str, set[str]], before: float) -> int:
    """Output files of ``jobs`` (and rotated run logs, not counted, as in the log directory)
    modified before ``before``, in a directory cronwrap would use itself."""
    fd = _open_trusted(directory)
    if fd is None:
        return 0
    try:
        _remove_files(fd, _is_rotated_log, before)
        return sum(_prune_job_dir(fd, job, names, before) for job, names in jobs.items())
    finally:
        os.close(fd)


def _prune_job_dir(dir_fd: int, job: str, names: set[str], before: float) -> int:
    fd = _open_trusted(file_name(job), dir_fd)
    if fd is None:
        return 0
    try:
        return _remove_files(fd, _is_output_name, before, names)
    finally:
        os.close(fd)


def _open_trusted(name: str, dir_fd: int | None = None) -> int | None:
    """The directory opened without following a symlink, if cronwrap would use it itself."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        check_dir(name, os.fstat(fd))
    except PathError:
        os.close(fd)
        return None
    return fd


def _remove_files(dir_fd: int, wanted: Callable[[str], bool], before: float,
                  always: Container[str] = ()) -> int:
    """Regular files of the directory named as ``wanted`` accepts, modified before ``before``
    or named in ``always``; never through a symlink."""
    with os.scandir(dir_fd) as entries:
        names = [e.name for e in entries if wanted(e.name)]
    return sum(_remove_file(dir_fd, n, math.inf if n in always else before) for n in names)


def _remove_file(dir_fd: int, name: str, before: float) -> int:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or info.st_mtime >= before:
            return 0
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        return 0
    return 1


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _is_output_name(name: str) -> bool:
    """``RUN_ID.ATTEMPT.log``, as runlog.output_path names a run's captured output, and its
    ``--timestamps`` record ``RUN_ID.ATTEMPT.times``."""
    run_id, _, rest = name.partition(".")
    attempt, _, suffix = rest.partition(".")
    return _digits(run_id) and _digits(attempt) and "." + suffix in OUTPUT_SUFFIXES


def _is_rotated_log(name: str) -> bool:
    """``events.jsonl.N``: a rotated run log (never the current one)."""
    prefix = EVENTS_FILE + "."
    return name.startswith(prefix) and _digits(name[len(prefix):])


def _remove_inside(log_dir: str, path: str) -> int:
    root = os.path.realpath(log_dir)
    target = os.path.realpath(path)
    if os.path.commonpath([root, target]) != root or os.path.islink(path):
        return 0
    try:
        os.unlink(target)
        return 1
    except OSError:
        return 0
