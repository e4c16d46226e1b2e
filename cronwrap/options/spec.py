"""``run``'s options, defined once, and the ``JobSpec`` they build.

The option table below drives the lean ``run`` parser in cli.py, ``cronwrap run --help``, the
man page and the documentation test: a new option is added here and nowhere else. Every option
can also come from the environment as ``CRONWRAP_<NAME>`` (``--kill-after`` →
``CRONWRAP_KILL_AFTER``). Precedence: command line > environment > built-in default.
No I/O here except reading an ``--env-file``: the note ``build_spec`` gives when a time limit
is too large to keep goes to the ``warn`` its caller passes.
"""

from __future__ import annotations

import math
import os
import signal as _signal

from cronwrap.errors import UsageError
from cronwrap.model import ALNUM, SCOPES, Status, valid_name
from cronwrap.options.durations import DurationTooLarge, parse_duration
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from re import Pattern
    from typing import Any, Callable, Mapping

_ENV_CHARS = ALNUM | frozenset("_")


def small_number(text: str, digits: int = 7) -> bool:
    """ASCII digits only: str.isdigit() also accepts '²' and '①', which int() refuses."""
    return 0 < len(text) <= digits and text.isascii() and text.isdigit()


def _utf8(text: str) -> bool:
    """False for text holding undecodable bytes from argv (surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _utf8_bytes(text: str) -> str:
    """In an ASCII locale (LC_ALL=C with PYTHONUTF8=0) a name's non-ASCII bytes arrive from
    argv as surrogate escapes; read as UTF-8 they are the name the ledger knows (``café``).
    Anything else is left as it is (and refused if it is not text)."""
    if _utf8(text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8")
    except UnicodeError:
        return text


def valid_env_key(text: str) -> bool:
    return bool(text) and not text[0].isdigit() and _ENV_CHARS.issuperset(text)


# -- value parsers: (text, label) -> value ---------------------------------------------------

def job_name(text: str, label: str) -> str:
    """Any printable name of at most 128 characters: quotes and Unicode are plain data in the
    ledger, and names that are not also safe file names get an escaped form on disk
    (paths.file_name), so a name can never become a path outside cronwrap's directories."""
    text = _utf8_bytes(text)
    if not text or len(text) > 128 or not text.isprintable() or text != text.strip() \
            or not _utf8(text):
        raise UsageError(f"{label}: {text!r} is not a job name (1-128 printable characters, no "
                         "leading or trailing space; e.g. settle, backup.db, nightly-report)")
    return text


def host_name(text: str, label: str) -> str:
    if not text or len(text) > 255 or any(c.isspace() or not c.isprintable() for c in text):
        raise UsageError(f"{label}: {text!r} is not a host name (printable, no spaces, at most 255)")
    return text


def duration(text: str, label: str) -> float:
    return parse_duration(text, label)


def window(text: str, label: str) -> float:
    """An age or a window (--catchup-window, --keep-logs): a unit is required, since a bare
    number would be seconds where a person means hours or days (0, none, needs none)."""
    return parse_duration(text, label, unit_required=True)


def time_limit(text: str, label: str) -> float:
    """A duration where 0 means none (--timeout, --kill-after, --wait-timeout). One too large
    to keep (over ten years, 1e400, inf) is ``math.inf``: GNU timeout runs without a timeout
    then, so build_spec stores 0 (none) and says so, where other durations refuse it."""
    try:
        return parse_duration(text, label)
    except DurationTooLarge:
        return math.inf


def positive_duration(text: str, label: str) -> float:
    value = parse_duration(text, label)
    if value < 1:
        raise UsageError(f"{label}: {text!r} is too short (at least 1s)")
    return value


def signal_number(text: str, label: str) -> int:
    """A signal name or number; 0 (as GNU timeout takes it) sends nothing at the timeout."""
    value = text.strip().upper()
    if small_number(value, 3) and int(value) < _signal.NSIG:
        return int(value)
    name = value if value.startswith("SIG") else "SIG" + value
    number = getattr(_signal.Signals, name, None) if name.isalnum() else None
    if number is None:
        raise UsageError(f"{label}: {text!r} is not a signal (examples: TERM, INT, HUP, KILL, "
                         "9, or 0 for none)")
    return int(number)


def exit_code(text: str, label: str) -> int:
    if not small_number(text, 3) or int(text) > 255:
        raise UsageError(f"{label}: {text!r} is not an exit status (0-255)")
    return int(text)


def exit_codes(text: str, label: str) -> frozenset[int]:
    """``0,24`` or ``1-3,24``: exit statuses 0-255, comma-separated, ranges allowed."""
    codes: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not (small_number(first, 3) and (not dash or small_number(last, 3))) \
                or int(first) > 255 or (dash and not int(first) <= int(last) <= 255):
            raise UsageError(f"{label}: {part.strip()!r} is not an exit status 0-255 or a range "
                             "of them (example: 0,24 or 1-3)")
        codes.update(range(int(first), int(last if dash else first) + 1))
    return frozenset(codes)


def factor(text: str, label: str) -> float:
    """A plain number of at least 1 (``1.5``, ``3``): a multiple of a duration."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 1 or value > 1e6:
        raise UsageError(f"{label}: {text!r} is not a factor of at least 1 (examples: 1.5, 3)")
    return value


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text: str, label: str) -> int:
    """A number of bytes, with a binary unit: 512M, 1.5G, 800K, 2T (KiB, MiB... and KB, MB...
    mean the same); a bare number is bytes; 0 means none."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1:] if value[-1:] in ("K", "M", "G", "T") else ""
    number = value[:len(value) - len(unit)]
    try:
        amount = float(number) if number.replace(".", "", 1).isdigit() else math.nan
    except ValueError:
        amount = math.nan
    if not math.isfinite(amount) or amount * _SIZE_UNITS[unit] >= 1 << 60:
        raise UsageError(f"{label}: {text!r} is not a size (examples: 512M, 1.5G, 800K; 0 for "
                         "none)")
    return int(amount * _SIZE_UNITS[unit])


REPEAT_SEPARATOR = "\n"


def redact_patterns(text: str, label: str) -> tuple[Pattern[bytes], ...]:
    """One regular expression per line (``--redact``, repeatable), compiled: a pattern that
    does not compile is refused before anything runs."""
    from cronwrap.redact.redactor import compile_pattern

    patterns = []
    for line in text.split(REPEAT_SEPARATOR):
        if not line:
            raise UsageError(f"{label}: an empty pattern would match everywhere; give a "
                             "regular expression (example: 'ACME-[0-9]{6}')")
        try:
            patterns.append(compile_pattern(line, label))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return tuple(patterns)


def choice(*choices: str) -> Callable[[str, str], str]:
    def parse(text: str, label: str) -> str:
        if text not in choices:
            raise UsageError(f"{label}: {text!r} is not one of {', '.join(choices)}")
        return text
    parse.choices = choices  # type: ignore[attr-defined]
    return parse


def path(text: str, label: str) -> str:
    """A path as a string (the run path never imports pathlib: paths.Dirs), ``~`` expanded,
    ``.``, ``..`` and doubled slashes folded (``os.path.normpath``)."""
    if not text or "\0" in text:
        raise UsageError(f"{label}: {text!r} is not a path")
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):  # ~user for a user that does not exist
        raise UsageError(f"{label}: {text!r}: no such user for '~'; give an absolute path")
    return os.path.normpath(expanded)


def absolute_path(text: str, label: str) -> str:
    """A path other commands look for later (--log-dir: recorded in the ledger, read by logs
    and prune): relative to what would be a guess, since cron starts jobs in $HOME."""
    value = path(text, label)
    if not os.path.isabs(value):
        raise UsageError(f"{label}: {text!r} is a relative path; give an absolute one (or ~/…)")
    return value


def ledger_url(text: str, label: str) -> str:
    """``sqlite:///PATH``, a ``postgresql://`` (or ``postgres://``) URI, or a libpq connection
    string: ``keyword=value`` pairs separated by blanks, values quoted as libpq quotes them
    (``host=/run/postgresql options='-c search_path=cw'``, ``service=cronwrap``). Only the
    form is checked here, on every firing and without psycopg; libpq parses the rest where
    the connection is made (ledger/postgres.py), and an error there names no value."""
    if not _utf8(text):
        raise UsageError(f"{label}: the URL is not valid UTF-8 text")
    if text.startswith("sqlite:///") and len(text) > len("sqlite:///"):
        return text
    if text.startswith(("postgresql://", "postgres://")) or _starts_with_keyword(text):
        return text
    # The value may be a password: its length, never its text.
    raise UsageError(f"{label}: expected sqlite:///PATH, postgresql://… or libpq keyword=value "
                     f"pairs (got a value of {len(text)} characters that is none of them)")


def _starts_with_keyword(text: str) -> bool:
    """libpq reads a connection string from its first ``keyword =`` (blanks allowed around
    the ``=``); a keyword is a word of ASCII letters, digits and ``_``."""
    keyword, equals, _ = text.lstrip().partition("=")
    keyword = keyword.rstrip()
    return bool(equals) and keyword.isascii() and keyword.isidentifier()


def text_value(text: str, label: str) -> str:
    """Checked later, where its meaning is known (a schedule needs its zone)."""
    if not text.strip() or "\0" in text or "\n" in text:
        raise UsageError(f"{label}: {text!r} is empty or holds a NUL or newline")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{label}: {text!r} is not valid UTF-8 text") from None
    return text


def count(text: str, label: str) -> int:
    if not small_number(text) or int(text) > 1_000_000:
        raise UsageError(f"{label}: {text!r} is not a count (0, 1, 2, …)")
    return int(text)


def retry_codes(text: str, label: str = "--retry-on") -> frozenset[int | str]:
    """``75``, ``75,111``, ``1-255``, ``75,timeout``: exit statuses (1-255, ranges allowed) and
    the word ``timeout``."""
    members: set[int | str] = set()
    for part in text.split(","):
        word = part.strip().lower()
        if word == Status.TIMEOUT:
            members.add(Status.TIMEOUT.value)
            continue
        low, sep, high = word.partition("-")
        first, last = _exit_code(low), _exit_code(high) if sep else _exit_code(low)
        if first is None or last is None or first > last:
            raise UsageError(f"{label}: {part.strip()!r} is not an exit status 1-255, a range "
                             "such as 64-78, or 'timeout' (example: 75,timeout)")
        members.update(range(first, last + 1))
    return frozenset(members)


def _exit_code(text: str) -> int | None:
    if not (0 < len(text) <= 3 and text.isascii() and text.isdigit()):
        return None  # '²'.isdigit() is True, but int('²') fails
    return int(text) if 1 <= int(text) <= 255 else None


def command_text(text: str, label: str) -> str:
    if not text.strip() or "\0" in text:
        raise UsageError(f"{label}: a hook is a shell command; got an empty one")
    return text


def ping_url(text: str, label: str) -> str:
    from cronwrap.redact.redactor import parse_ping_url

    return parse_ping_url(text, label)


def flag(text: str, label: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise UsageError(f"{label}: {text!r} is not a boolean (1/0, true/false, yes/no)")


# -- the table -----------------------------------------------------------------------------

class Option(Record):
    """One option of ``run``. name: the long name without dashes, also the JobSpec field
    (with '-' -> '_'); parse(text, label) -> value; metavar None: a flag without a value.
    repeat: given more than once, its values are kept, one per line (REPEAT_SEPARATOR), as
    a list in the config file and one per line in the environment."""

    name: str
    help: str
    group: str
    parse: Callable[[str, str], Any]
    metavar: str | None
    default: Any
    short: str | None
    repeat: bool
    _defaults = dict(parse=flag, metavar=None, default=None, short=None, repeat=False)

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "CRONWRAP_" + self.attr.upper()

    @property
    def is_flag(self) -> bool:
        return self.metavar is None


OUTPUT_MODES = ("passthrough", "on-failure", "quiet")
MAX_SLOTS = 100  # --max-slots: an accidental ten-year --date range is refused before it runs
OVERLAPS = ("skip", "wait", "replace", "allow")
LOCKS = ("flock", "pid", "none")

OPTIONS: tuple[Option, ...] = (
    Option("name", "Job name (default: the command's basename without extension): up to 128 "
           "printable characters; names that are not plain file names are escaped on disk.",
           "Identity", job_name, "NAME", short="n"),
    Option("host", "Host identity written to the ledger (default: the hostname).",
           "Identity", host_name, "NAME"),
    Option("scope", "fleet: one run per slot across every host that shares the ledger (the "
           "crontab line on many hosts runs once); host: one run per slot on each host (log "
           "cleanup, local backups), each host's runs with their own overlap, catch-up, missed "
           "slots and health, shown as NAME@HOST.", "Identity", choice(*SCOPES), "fleet|host",
           "fleet"),
    Option("overlap", "What to do while another run of this job is running: skip it, wait "
           "for it, replace it (end it as a timeout would), or allow both.", "Overlap",
           choice(*OVERLAPS), "skip|wait|replace|allow", "skip"),
    Option("wait-timeout", "With --overlap wait: give up (and skip) after this long; 0, or a "
           "value too large to keep (over ten years), waits forever, unlike flock -w 0, which "
           "does not wait. flock -w N is --overlap wait --wait-timeout N; flock -n (and "
           "flock -w 0) is the default --overlap skip.", "Overlap", time_limit, "DURATION", 0.0),
    Option("lock", "Local lock: a kernel flock held for the job's whole life (released by the "
           "kernel when every holder dies), a PID file checked by PID and start time, or none.",
           "Overlap", choice(*LOCKS), "flock|pid|none", "flock"),
    Option("lock-file", "Lock file path (default: NAME.lock in cronwrap's private lock "
           "directory).", "Overlap", path, "PATH"),
    Option("skip-exit-code", "Exit status when nothing ran because the job is running or the "
           "slot is already claimed or done.", "Overlap", exit_code, "N", 0),
    Option("timeout", "Hard timeout for the whole process tree (GNU syntax: 30, 1.5m, 2h, 1d, "
           "1e-3); 0 means none. A value too large to keep (over ten years, 1e400, inf) also "
           "means none, as in GNU timeout, and cronwrap says so on stderr.", "Timeout",
           time_limit, "DURATION", 0.0),
    Option("kill-after", "After the timeout signal, send KILL to whatever is left this much "
           "later; 0, or a value too large to keep (said on stderr), never sends KILL to the "
           "main process.", "Timeout", time_limit, "DURATION", 0.0),
    Option("signal", "Signal sent at the timeout (name or number); 0 sends none, so only "
           "--kill-after ends the job (exit 137), and a job that ends by itself after the "
           "timeout exits 124, as with GNU timeout.", "Timeout", signal_number, "SIG",
           int(_signal.SIGTERM), short="s"),
    Option("preserve-status", "Exit with the job's own status even when it timed out or went "
           "over a limit (instead of 124/137, or 143/137).", "Timeout", default=False),
    Option("leave-orphans", "Leave descendants running when the main process exits (default: "
           "end them as a timeout would, and log it).", "Timeout", default=False),
    Option("max-memory", "End the job's whole tree (TERM, then KILL after --kill-after, or "
           "5s) when its resident memory, summed over its processes, goes over this size "
           "(512M, 1.5G); recorded killed, reason memory; exit 143 (137 when KILL was "
           "needed). Checked every 0.5s; 0 means none.", "Limits", size, "SIZE", 0),
    Option("max-cpu", "End the job's whole tree as --max-memory does when the CPU time "
           "(user + system) of its processes, the ended ones included, goes over this "
           "(GNU syntax: 90, 5m); recorded killed, reason cpu. 0 means none.", "Limits",
           time_limit, "DURATION", 0.0),
    Option("success-exit", "Exit statuses recorded `succeeded`, comma-separated, ranges "
           "allowed (rsync's vanished files: 0,24). 0 is always one, as with systemd's "
           "SuccessExitStatus=. cronwrap still exits with the job's own status.", "Outcome",
           exit_codes, "CODES", frozenset({0})),
    Option("warning-exit", "Exit statuses recorded `warning` (done, but look at it: health "
           "warning, --on-warning instead of --on-failure, no retry, no catch-up). Never 0 nor "
           "one of --success-exit.", "Outcome", exit_codes, "CODES"),
    Option("min-duration", "A run that ends with a success status faster than this is "
           "recorded `warning` with reason too_fast (a backup that succeeds in two seconds has "
           "usually done nothing); 0 means no minimum.", "Outcome", duration, "DURATION", 0.0),
    Option("slow-factor", "status and --check flag the job as `slow` (a warning) when its "
           "last run took more than this many times the 95th percentile of its recent "
           "successful durations (at least 5 among its last 50); default off.", "Outcome",
           factor, "F"),
    Option("memory-factor", "status and --check flag the job as a `warning` when its last "
           "run's peak memory was more than this many times the 95th percentile of its recent "
           "successful runs' peaks (at least 5 among its last 50); default off.", "Outcome",
           factor, "F"),
    Option("schedule", "The job's cron expression (5 fields, or @hourly @daily @midnight "
           "@weekly @monthly @yearly @annually): a firing maps to the slot at or just before "
           "its clock, so hosts seconds apart claim one slot; missed slots can be caught up.",
           "Slots", text_value, "EXPR"),
    Option("tz", "Zone of --schedule (default: CRON_TZ, then TZ, then the system zone).",
           "Slots", text_value, "ZONE"),
    Option("key", "Run key template: strftime of the slot in its zone, e.g. %Y-%m-%d for once "
           "per day (default: the slot's instant in UTC).", "Slots", text_value, "TEMPLATE"),
    Option("date", "Run the slot of this day by hand (the schedule's first fire time that day "
           "in its zone); the job sees that slot's time. FROM..TO runs every slot of those "
           "days, oldest first, each its own run. Without --schedule, the schedule, zone and "
           "key cron recorded for the job are used.", "Slots", text_value,
           "YYYY-MM-DD[..YYYY-MM-DD]"),
    Option("at", "Run the slot at this time by hand (ISO 8601; without an offset, in the "
           "schedule's zone); FROM..TO runs every slot in between, both ends included. "
           "Without --schedule, as --date.", "Slots", text_value, "TIMESTAMP[..TIMESTAMP]"),
    Option("force", "Run even if this slot already ran, successfully or not (for a person "
           "re-running by hand), or, with --date/--at, is still in the future (refused "
           "without it: a typo would use up that slot). A slot held by a live run is never "
           "taken.",
           "Slots", default=False),
    Option("keep-going", "With a --date/--at range: run the remaining slots after one that did "
           "not succeed, and exit with the first failure's status (default: stop there).",
           "Slots", default=False),
    Option("max-slots", "A --date/--at range of more slots than this is refused before "
           "anything runs.", "Slots", count, "N", MAX_SLOTS),
    Option("dry-run", "Print what this firing would do — each slot, and whether it would run, "
           "be skipped (and why) or be recorded missed by catch-up — and claim, run and "
           "write nothing; exit 0.", "Slots", default=False),
    Option("catchup", "Slots that never ran (host down, cron stopped): none records them "
           "missed; latest runs only the newest; all runs them oldest first. Each runs with "
           "its own key and original time.", "Catch-up", choice("none", "latest", "all"),
           "none|latest|all", "none"),
    Option("catchup-window", "Missed slots older than this are recorded skipped (too_late) "
           "instead; 0 means no limit. A unit is required (6h, 2d).", "Catch-up", window,
           "DURATION", 0.0),
    Option("max-catchup", "At most this many catch-up runs per firing (the rest are recorded "
           "missed).", "Catch-up", count, "N", 10),
    Option("db", "Ledger: sqlite:///PATH (default: the embedded ledger.db), a postgresql:// "
           "URI, or a libpq connection string of keyword=value pairs (host=/run/postgresql "
           "dbname=cronwrap, service=cronwrap) for several hosts.", "Ledger", ledger_url, "URL"),
    Option("lease", "Lease of a claimed slot; renewed every lease/3 while the job runs. A "
           "runner that cannot renew it for a whole lease ends its job (lease_lost).",
           "Ledger", positive_duration, "DURATION", 120.0),
    Option("db-wait", "How long a PostgreSQL server that is full (too many connections), "
           "starting up, shutting down or not answering is waited for, with jittered "
           "exponential backoff, before --on-db-error applies; errors that waiting cannot cure "
           "(authentication, an unknown database) fail at once.", "Ledger", duration,
           "DURATION", 60.0),
    Option("on-db-error", "When the ledger cannot be reached before the run (after --db-wait): "
           "fail (exit 125, run nothing) or run-unrecorded (run under the local lock only, and "
           "say so in the run log).", "Ledger", choice("fail", "run-unrecorded"),
           "fail|run-unrecorded", "fail"),
    Option("output", "passthrough: the job's output as it comes (default); on-failure: only "
           "when the run did not succeed (like chronic); quiet: captured only.", "Output",
           choice(*OUTPUT_MODES), "passthrough|on-failure|quiet", "passthrough"),
    Option("timestamps", "Also record when each line of the job's output came (to the "
           "millisecond, in RUN_ID.ATTEMPT.times beside the captured output), for cronwrap "
           "logs --timestamps; the captured output itself stays exactly the job's.", "Output",
           default=False),
    Option("log-dir", "Directory for the run log and captured output, an absolute path "
           "(default: logs/ in cronwrap's state directory).", "Output", absolute_path, "DIR"),
    Option("keep-logs", "Remove captured output and rotated run logs older than this (a "
           "unit is required: 30d).", "Output", window, "DURATION", 30 * 86400.0),
    Option("redact", "Also hide what this regular expression (Python re syntax) matches in "
           "each line of the job's output, wherever cronwrap keeps or sends it (captured "
           "output, the ledger's error tail, hooks, pings), as it hides secrets it knows. A "
           "pattern that could take exponential time is refused, and patterns run under a CPU "
           "budget (see REDACTION). Repeatable; a list in the config file, one pattern per line "
           "in the environment.",
           "Output", redact_patterns, "REGEX", repeat=True),
    Option("env-file", "Read KEY=VALUE lines into the job's environment (for cron's short "
           "PATH). Values are never logged.", "Environment", path, "PATH"),
    Option("jitter", "Sleep a random time up to this long before starting, to spread load.",
           "Environment", duration, "DURATION", 0.0),
    Option("retries", "Run a failed slot again up to N times in this invocation: any failure "
           "or timeout but exit 126 and 127 (the command cannot run), or with --retry-on only "
           "those; never past the schedule's next slot (a manual run: never longer after its "
           "start than the schedule's interval).", "Retries", count, "N", 0),
    Option("retry-delay", "Base of the exponential backoff between attempts (full jitter: "
           "a random delay up to base x 2^(attempt-1)).", "Retries", duration, "DURATION", 10.0),
    Option("retry-max-delay", "Cap of the backoff between attempts.", "Retries", duration,
           "DURATION", 600.0),
    Option("retry-on", "Exit statuses that --retries retries, comma-separated, ranges "
           "allowed; 'timeout' is a member (e.g. 75,timeout: EX_TEMPFAIL and timeouts). "
           "Default: every failure and timeout but 126 and 127.", "Retries", retry_codes,
           "CODES"),
    Option("max-attempts", "Attempts per slot across invocations (default 1: a later firing "
           "of a failed slot runs nothing); with N, a later firing of the same slot (another "
           "host, a second crontab entry) runs it again while attempts remain.", "Retries",
           count, "N"),
    Option("on-failure", "Shell command run (by /bin/sh -c) when a slot's run did not succeed, "
           "with the run's environment plus CRONWRAP_STATUS, CRONWRAP_EXIT_CODE, "
           "CRONWRAP_DURATION_MS and CRONWRAP_OUTPUT_TAIL.", "Hooks", command_text, "CMD"),
    Option("on-success", "Shell command run when a slot's run succeeded (same environment).",
           "Hooks", command_text, "CMD"),
    Option("on-warning", "Shell command run when a slot's run was recorded `warning` (same "
           "environment; --on-failure does not run for it).", "Hooks", command_text, "CMD"),
    Option("hook-timeout", "A hook is killed after this long; its failure never changes the "
           "job's exit status.", "Hooks", positive_duration, "DURATION", 60.0),
    Option("alert-after", "Run --on-failure only from the N-th failed slot in a row on "
           "(CRONWRAP_ALERT=failing), and once more (CRONWRAP_ALERT=recovered) when the job "
           "succeeds again.", "Hooks", count, "N", 1),
    Option("ping", "healthchecks.io-style URL: pinged at start (URL/start) and at the end "
           "(URL/EXIT_CODE, with the output tail); never blocks or changes the job.", "Hooks",
           ping_url, "URL"),
)
BY_LONG = {o.name: o for o in OPTIONS}
BY_SHORT = {o.short: o for o in OPTIONS if o.short}


def duration_text(seconds: float) -> str:
    """A duration in the syntax a user types: 0, 45s, 2m, 30d."""
    for suffix, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds / size:g}{suffix}"
    return f"{seconds:g}s" if seconds else "0"


def default_text(opt: Option) -> str | None:
    """An option's default as a user would type it (None: a flag, or none): for run --help
    and the docs."""
    if opt.is_flag or opt.default is None:
        return None
    if opt.parse in (duration, window, positive_duration, time_limit):
        return duration_text(opt.default)
    if opt.parse is signal_number:
        return _signal.Signals(opt.default).name.removeprefix("SIG")
    if isinstance(opt.default, (set, frozenset)):  # --retry-on: as it is typed, 75,timeout
        return ",".join(str(x) for x in sorted(opt.default, key=lambda x: (isinstance(x, str), x)))
    return str(opt.default)


class JobSpec(Record):
    """One invocation's settings: the command plus one field per option, in the table's order,
    typed as its parser returns (``| None`` where the table has no default and build_spec
    does not fill one in); defaults from the table. tests/unit/test_spec.py fails when a field
    and the table disagree. env_extra holds the --env-file values and is never printed."""

    command: list[str]
    name: str
    host: str
    scope: str
    overlap: str
    wait_timeout: float
    lock: str
    lock_file: str | None
    skip_exit_code: int
    timeout: float
    kill_after: float
    signal: int
    preserve_status: bool
    leave_orphans: bool
    max_memory: int
    max_cpu: float
    success_exit: frozenset[int]
    warning_exit: frozenset[int] | None
    min_duration: float
    slow_factor: float | None
    memory_factor: float | None
    schedule: str | None
    tz: str | None
    key: str | None
    date: str | None
    at: str | None
    force: bool
    keep_going: bool
    max_slots: int
    dry_run: bool
    catchup: str
    catchup_window: float
    max_catchup: int
    db: str | None
    lease: float
    db_wait: float
    on_db_error: str
    output: str
    timestamps: bool
    log_dir: str | None
    keep_logs: float
    redact: tuple[Pattern[bytes], ...] | None
    env_file: str | None
    jitter: float
    retries: int
    retry_delay: float
    retry_max_delay: float
    retry_on: frozenset[int | str] | None
    max_attempts: int | None
    on_failure: str | None
    on_success: str | None
    on_warning: str | None
    hook_timeout: float
    alert_after: int
    ping: str | None
    env_extra: dict[str, str]
    _defaults = {o.attr: o.default for o in OPTIONS}
    _factories = dict(env_extra=dict)

    def __repr__(self) -> str:
        return super().__repr__().split(", env_extra=")[0] + ")"


def build_spec(command: list[str], given: Mapping[str, str | bool], environ: Mapping[str, str],
               default_host: Callable[[], str], labels: Mapping[str, str] | None = None, *,
               warn: Callable[[str], None]) -> JobSpec:
    """Merge given values (by option name: the command line, or config.merge's result, with
    ``labels`` naming where each came from) over ``CRONWRAP_*`` variables. ``warn`` gets one
    line for each time limit too large to keep, which runs as none, and one for a --key
    holding crontab's escape ``\\%``."""
    values: dict[str, Any] = {}
    where: dict[str, str] = {}
    for opt in OPTIONS:
        if opt.name in given:
            raw, label = given[opt.name], (labels or {}).get(opt.name, f"--{opt.name}")
        elif opt.env in environ:
            raw, label = environ[opt.env], opt.env
        else:
            continue
        value = raw if raw is True else opt.parse(str(raw), label)
        if value == math.inf:
            warn(f"{label} {str(raw).strip()}: too large; running without a {opt.name}")
            value = 0.0
        values[opt.attr], where[opt.attr] = value, label
    if not command:
        raise UsageError("run: no command given (usage: cronwrap run [OPTIONS] -- COMMAND [ARG…])")
    if "name" not in values:
        values["name"] = default_name(command)
    if "host" not in values:
        values["host"] = default_host()
    if values.get("env_file"):
        values["env_extra"] = read_env_file(values["env_file"])
    if "\\%" in (values.get("key") or ""):
        warn(crontab_escape_note(where["key"], values["key"]))
    values["success_exit"] = values.get("success_exit", frozenset()) | {0}
    check_exit_sets(values["success_exit"], values.get("warning_exit") or frozenset(), labels)
    return JobSpec(command=list(command), **values)


def crontab_escape_note(label: str, key: str) -> str:
    """``--key '\\%Y-\\%m-\\%d'`` pasted from a crontab line into a shell: cron turns ``\\%`` into
    ``%``, a shell does not, and the run keys would hold backslashes. It still runs: a key
    with a backslash is a key, and refusing would break a line that works."""
    return (f"{label} '{key}': '\\%' is how a crontab line writes '%'; in a shell or the config "
            "file write '%' (these run keys will hold a backslash)")


def check_exit_sets(success: frozenset[int], warning: frozenset[int],
                    labels: Mapping[str, str] | None) -> None:
    """An exit status is a success or a warning, never both; 0 is always a success."""
    both = sorted(success & warning)
    if both:
        label = (labels or {}).get("warning-exit", "--warning-exit")
        raise UsageError(f"{label}: {', '.join(map(str, both))} "
                         f"{'is' if len(both) == 1 else 'are'} also a success (0 always is, "
                         "and --success-exit); give each exit status one meaning")


def default_name(command: list[str]) -> str:
    base = command[0].rstrip("/").rsplit("/", 1)[-1]
    stem = base.split(".", 1)[0] if not base.startswith(".") else base
    if not valid_name(stem):
        raise UsageError(f"cannot derive a job name from {command[0]!r}: give -n NAME")
    return stem


def read_env_file(file: str) -> dict[str, str]:
    """KEY=VALUE lines; blank lines, ``#`` comments and a leading ``export`` are allowed."""
    try:
        import stat

        info = os.stat(file)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
            raise UsageError(f"--env-file {file}: not a regular file of at most 1 MiB")
        with open(file, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"--env-file {file}: {reason}") from None
    env: dict[str, str] = {}
    # '\n' only: str.splitlines() also splits at \x0b, \x0c, U+2028… inside a value
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key = key.strip()
        if not sep or not valid_env_key(key) or "\0" in value:
            # the line may hold a secret: name the line, never echo it
            raise UsageError(f"--env-file {file}:{number}: expected KEY=VALUE with KEY a variable name")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key] = value
    return env
