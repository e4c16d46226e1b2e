"""Parse, wrap, unwrap and lint crontab text.

Pure text processing: every function takes the crontab as a string and returns a string or a
list of findings; the clock (``now``) and the system zone are arguments. The only data read
from disk is the tz database, through ``zoneinfo``. Schedules are read by the one schedule
engine, :mod:`cronwrap.schedule`.

Modules: ``entries`` (lines as entries: jobs, assignments, comments), ``shell`` (cron's ``%``
rule, quoting, a small sh lexer), ``names`` (job names), ``wrap`` (wrap and unwrap), ``lint``
(the checks and ``LINT_CODES``, the registry of what they report).
"""

from __future__ import annotations

from cronwrap.crontab.entries import (
    Blank,
    Comment,
    Entry,
    EnvAssignment,
    Invalid,
    Job,
    Problem,
    Token,
    is_system_crontab,
    parse,
)
from cronwrap.crontab.lint import (
    LINT_CODES,
    Finding,
    LintCode,
    Severity,
    format_finding,
    has_errors,
    lint,
)
from cronwrap.crontab.names import NAME_RE, derive_name
from cronwrap.crontab.shell import split_percent
from cronwrap.crontab.wrap import diff, unwrap, wrap
from cronwrap.schedule import ALIASES

__all__ = [
    "ALIASES",
    "Blank",
    "Comment",
    "EnvAssignment",
    "Entry",
    "Finding",
    "Invalid",
    "Job",
    "LINT_CODES",
    "LintCode",
    "NAME_RE",
    "Problem",
    "Severity",
    "Token",
    "derive_name",
    "diff",
    "format_finding",
    "has_errors",
    "is_system_crontab",
    "lint",
    "parse",
    "split_percent",
    "unwrap",
    "wrap",
]
