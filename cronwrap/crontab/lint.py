"""``cronwrap lint``: the classic crontab mistakes, one finding each, from a registry of codes.

``LINT_CODES`` is the one list of what lint can report; the checks take each finding's
severity and standard fix from it, and the docs (README, ``cronwrap.1``) are generated from
it. What a schedule does (DST changes, the day rule, the host's clock, how close its firings
come) comes from the schedule engine's notes, the same ones ``cronwrap explain`` words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, NamedTuple
from zoneinfo import ZoneInfo

from cronwrap.crontab.entries import (
    Entry,
    EnvAssignment,
    Invalid,
    Job,
    Problem,
    looks_like_field,
    parse,
    with_env,
)
from cronwrap.crontab.daemon import CronDaemon
from cronwrap.crontab.names import derive_name
from cronwrap.crontab.shell import (
    ASSIGNMENT,
    BLANKS,
    BUILTINS,
    RESERVED,
    Tok,
    basename,
    command_words,
    lex,
    option_words,
    percent_index,
    simple_commands,
    split_percent,
    unquote,
)
from cronwrap.crontab.wrap import is_cronwrap, leaves_orphans, starts_daemon
from cronwrap.errors import UsageError
from cronwrap.schedule import (
    REBOOT,
    ALIASES,
    DstNote,
    Schedule,
    day_rule,
    dst_notes,
    find_zone,
    host_clock,
    shortest_gap,
    zone_key,
    zone_setting,
)

Severity = Literal["error", "warning", "info"]


class LintCode(NamedTuple):
    """What a lint code means: its severity, a one-line summary (the docs' words), and its
    standard fix. A finding may carry a more specific fix (the field's range, the hours
    to avoid), where the line tells more than the code."""

    severity: Severity
    summary: str
    fix: str


LINT_CODES: dict[str, LintCode] = {
    "E001": LintCode(
        "error", "A bad schedule field (value out of range, bad step or name), with its column.",
        "use the field's range (minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or "
        "jan-dec, day-of-week 0-7 or sun-sat), '*', a list (1,15), a range (1-5) or a step "
        "(*/10)"),
    "E002": LintCode(
        "error", "Missing fields or command, or a sixth field (cron has no seconds).",
        "a job line is: minute hour day-of-month month day-of-week [user] command"),
    "E003": LintCode(
        "error", "An unknown `@alias`.", f"use one of {' '.join([REBOOT, *ALIASES])}"),
    "E004": LintCode(
        "error", "A bad user field in /etc/crontab or /etc/cron.d.",
        "insert the user, e.g. root, after the five schedule fields"),
    "E005": LintCode(
        "error", "An unescaped `%`: cron ends the command there and feeds the rest to its "
        "standard input (write `\\%`).", "write \\% for a percent sign"),
    "E006": LintCode(
        "error", "`CRON_TZ` or `TZ` names no known zone.",
        "use a tz database name such as Europe/Berlin or UTC"),
    "W001": LintCode(
        "warning", "A relative command path (cron starts jobs in the home directory), or a "
        "program looked up in cron's short default PATH.",
        "use an absolute path, or set PATH=… at the top of the crontab"),
    "W002": LintCode(
        "warning", "Day-of-month and day-of-week both restricted: cron runs on days matching "
        "either.", "keep one of them '*' and test the other in the command, e.g. "
        "[ \"$(date +\\%u)\" = 1 ] && …"),
    "W003": LintCode(
        "warning", "A fire time inside a DST gap in the next year (a fixed time runs once, "
        "right after the jump; other schedules lose the runs in the gap).",
        "schedule it outside the hour the clocks change, or set CRON_TZ=UTC and give UTC times"),
    "W004": LintCode(
        "warning", "A fire time inside a DST overlap in the next year (a fixed time runs "
        "once, at the first occurrence; other schedules run twice).",
        "schedule it outside the hour the clocks change, or set CRON_TZ=UTC and give UTC times"),
    "W005": LintCode(
        "warning", "Runs more often than hourly with no lock or timeout: it may overlap itself.",
        "wrap it with cronwrap run --timeout (overlapping runs are skipped by default); "
        "cronwrap wrap does the whole file"),
    "W006": LintCode(
        "warning", "Output neither redirected nor mailed to a MAILTO: it ends in a local "
        "mailbox.", "append >> /var/log/NAME.log 2>&1, set MAILTO=, or wrap with cronwrap"),
    "W007": LintCode(
        "warning", "`MAILTO=\"\"` and no redirection: the output is discarded.",
        "append >> /var/log/NAME.log 2>&1, or wrap with cronwrap (keeps a log)"),
    "W008": LintCode(
        "warning", "The same command on two lines.",
        "delete one line, or give both the same cronwrap -n if they are one job"),
    "W009": LintCode(
        "warning", "`TZ` set without `CRON_TZ`: cron schedules in the system zone while "
        "cronwrap would read `--schedule` in `TZ`.",
        "add CRON_TZ=ZONE if the times are meant in ZONE, else remove TZ"),
    "W010": LintCode(
        "warning", "The last line has no newline at the end (some crons ignore it).",
        "end the file with a newline"),
    "W011": LintCode(
        "warning", "An `@reboot` line without `--schedule`, or a command that backgrounds "
        "something (`&`), under `cronwrap run` without `--leave-orphans`: the daemon it "
        "starts is ended as a leftover when the command exits.",
        "unwrap the line (cronwrap wrap --unwrap), or add --leave-orphans to its cronwrap run "
        "options"),
    "W012": LintCode(
        "warning", "`CRON_TZ` on a host whose cron ignores it (Debian's and Ubuntu's `cron`): "
        "cron fires the lines below at their times in the system zone, cronwrap reads their "
        "`--schedule` in `CRON_TZ`.",
        "remove CRON_TZ and give the times in the system zone, or run cronie, which honours "
        "CRON_TZ"),
    "I001": LintCode(
        "info", "A day field starting with `*` makes cron require both day fields to match "
        "(AND).", "make sure both must match; write the days without '*' for OR"),
    "I002": LintCode(
        "info", "`CRON_TZ` differs from the system zone: what the times are on this host's "
        "clock (not reported where cron ignores `CRON_TZ`: W012).",
        "nothing to fix if that is meant and this host's cron honours CRON_TZ (cronie does, "
        "Debian's cron does not: set CRONWRAP_CRON_DAEMON if lint cannot tell)"),
}

_DEFAULT_PATH = "/usr/bin:/bin"  # cron's PATH when the crontab sets none (cronie, Debian)
# Programs that bound a run or keep two runs apart ("chronic-style" wrappers count too).
_GUARDS = frozenset(
    "flock timeout cronwrap run-one run-this-one chronic cronic lckdo setlock solo lockrun "
    "lockf timelimit with-lock-ex".split()
)
_LOG_SINKS = frozenset("logger systemd-cat tee mail mailx sendmail s-nail".split())
_UTC_ZONE = ZoneInfo("UTC")


@dataclass(frozen=True)
class Finding:
    """One lint finding. ``line`` and ``column`` are 1-based; ``column`` may be unknown."""

    line: int
    column: int | None
    severity: Severity
    code: str
    message: str
    fix: str


def _finding(code: str, line: int, column: int | None, message: str,
             fix: str | None = None) -> Finding:
    """A finding of ``code``, its severity and (unless ``fix`` says more) fix from LINT_CODES."""
    known = LINT_CODES[code]
    return Finding(line, column, known.severity, code, message, fix or known.fix)


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def format_finding(finding: Finding, filename: str) -> str:
    """``crontab:3:1: error: E001 bad minute field '61' — fix: use 0-59, …`` (one line)."""
    where = f"{filename}:{finding.line}:"
    if finding.column is not None:
        where += f"{finding.column}:"
    text = f"{where} {finding.severity}: {finding.code} {finding.message}"
    if finding.fix:
        text += f" — fix: {finding.fix}"
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)  # one line on a terminal, whatever the input


@dataclass
class _LintState:
    system_zone: str
    now: datetime
    daemon: CronDaemon | None = None  # None: cronwrap cannot tell which cron runs the file
    seen: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Facts:
    """What the checks need to know about one valid job, worked out once."""

    job: Job
    env: Mapping[str, str]
    cmd: str  # the command before its %-stdin part, as written
    toks: list[Tok] | None
    schedule: Schedule | None  # in the job's zone (UTC when that is unknown); None: @reboot
    zone: str | None  # the zone its schedule is read in; None if unknown
    zone_source: str | None  # "CRON_TZ", "TZ" or None for the system zone


def lint(
    text: str, *, system: bool = False, system_zone: str, now: datetime,
    daemon: CronDaemon | None = None,
) -> list[Finding]:
    """The classic crontab mistakes in ``text``, in line order; never raises on any text.

    ``system_zone`` is the host's zone name (``UTC``, ``Europe/Berlin``); ``now`` starts the
    one-year window searched for DST transitions (a naive ``now`` is taken as UTC);
    ``daemon`` the cron that runs the file (None: unknown), which decides what ``CRON_TZ``
    does. The codes are those of ``LINT_CODES``.
    """
    if find_zone(system_zone) is None:
        raise UsageError(f"system zone {system_zone!r} is not a known time zone (e.g. UTC)")
    state = _LintState(system_zone, now if now.tzinfo else now.replace(tzinfo=timezone.utc),
                       daemon)
    entries = parse(text, system=system)
    findings: list[Finding] = []
    for entry, env in with_env(entries):
        findings.extend(_lint_entry(entry, env, state))
    findings.extend(_check_last_newline(text, entries))
    return findings


def _lint_entry(entry: Entry, env: dict[str, str], state: _LintState) -> Iterable[Finding]:
    if isinstance(entry, EnvAssignment):
        return _check_env(entry, env, state)
    if isinstance(entry, Invalid | Job) and entry.problem:
        return [_problem_finding(entry.number, entry.problem)]
    if isinstance(entry, Job):
        facts = _facts(entry, env, state.system_zone)
        return [f for check in _JOB_CHECKS for f in check(facts, state)]
    return []


def _problem_finding(line: int, problem: Problem) -> Finding:
    return _finding(problem.code, line, problem.column, problem.message, problem.fix)


def _facts(job: Job, env: Mapping[str, str], system_zone: str) -> _Facts:
    cmd, _ = split_percent(job.command)
    source, name = zone_setting(env) or (None, system_zone)
    zone = find_zone(name)
    schedule = None
    if job.expression is not None:
        try:
            schedule = Schedule.parse(job.expression, zone or _UTC_ZONE, name)
        except UsageError:
            pass  # cron syntax that cronsim reads always fires; lint must never raise
    return _Facts(job, env, cmd, lex(cmd), schedule, name if zone else None, source)


def _col(facts: _Facts, offset: int) -> int:
    """Column of ``offset`` within the command field."""
    return facts.job.command_start + offset + 1


# --- checks on environment lines and on the file ---------------------------------------------


def _check_env(entry: EnvAssignment, env: dict[str, str], state: _LintState) -> list[Finding]:
    zone = zone_key(entry.value) if entry.name in ("CRON_TZ", "TZ") else None
    if zone is None:
        return []
    if find_zone(zone) is None:
        return [_finding("E006", entry.number, entry.value_column,
                         f"{entry.name}={entry.value!r} is not a known time zone")]
    if entry.name == "TZ" and not env.get("CRON_TZ") and zone != state.system_zone:
        return [_finding("W009", entry.number, 1,
                         f"TZ={zone} without CRON_TZ: cron schedules the lines below in the "
                         f"system zone ({state.system_zone}), but cronwrap reads their "
                         f"--schedule in {zone}, so its slots would not match the firings",
                         f"add CRON_TZ={zone} if the times are meant in {zone}, else remove TZ")]
    daemon = state.daemon
    if entry.name == "CRON_TZ" and zone != state.system_zone and daemon is not None and \
            not daemon.honours_cron_tz:
        return [_finding("W012", entry.number, 1,
                         f"CRON_TZ={zone} is ignored by this host's cron ({daemon.label}; "
                         f"{daemon.evidence}): it fires the lines below at their times in the "
                         f"system zone ({state.system_zone}), but cronwrap reads their "
                         f"--schedule in {zone}, so its slots would not match the firings",
                         f"remove CRON_TZ and give the times in {state.system_zone}, or run "
                         "cronie, which honours CRON_TZ")]
    return []


def _check_last_newline(text: str, entries: list[Entry]) -> list[Finding]:
    last = entries[-1]
    if text.endswith("\n") or not isinstance(last, Job | Invalid):
        return []
    return [_finding("W010", last.number, None,
                     "the last line has no newline at the end: some crons ignore such a line")]


# --- checks on job lines ------------------------------------------------------------------


def _first_word(facts: _Facts) -> tuple[str, int] | None:
    """The program the command starts with (after assignments) and its offset."""
    if facts.toks is None:
        match = re.search(r"[^ \t]+", facts.cmd)
        return (match.group(), match.start()) if match else None
    for words in simple_commands(facts.toks)[:1]:
        for tok in words:
            if not ASSIGNMENT.match(tok.text):
                return unquote(tok.text), tok.start
    return None


def _check_command_word(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    first = _first_word(facts)
    if first is None:
        return
    word, offset = first
    line, column = facts.job.number, _col(facts, offset)
    if len(facts.job.fields) == 5 and looks_like_field(word):
        yield _finding("E002", line, column,
                       f"the command starts with {word!r}: a sixth schedule field? cron has "
                       "five (no seconds)", "remove the extra field")
    elif _relies_on_lookup(word):
        finding = _path_finding(facts, word, line, column)
        if finding:
            yield finding


def _relies_on_lookup(word: str) -> bool:
    expands = word.startswith(("/", "~")) or "$" in word or "`" in word
    return bool(word) and not expands and word not in BUILTINS | RESERVED


def _path_finding(facts: _Facts, word: str, line: int, column: int) -> Finding | None:
    if "/" in word:
        return _finding("W001", line, column,
                        f"relative path {word!r}: cron starts jobs in the owner's home "
                        "directory", "use an absolute path")
    if "PATH" in facts.env:
        return None  # the file chose its PATH; whether the program is on it needs the disk
    hint = " (a system crontab line in a user crontab?)" if word == "root" else ""
    return _finding("W001", line, column,
                    f"{word!r} is looked up in cron's default PATH ({_DEFAULT_PATH}), which "
                    f"has no /usr/local/bin{hint}")


def _check_percent(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    index = percent_index(facts.job.command)
    if index is None:
        return
    yield _finding("E005", facts.job.number, _col(facts, index),
                   "unescaped %: cron ends the command here and sends the rest to its standard "
                   "input (date +%Y must be written date +\\%Y in a crontab)")


def _check_days(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    rule = day_rule(facts.schedule) if facts.schedule else None
    if rule is None:
        return
    fields, line = facts.job.fields, facts.job.number
    if rule.either:
        dom, dow = fields[2], fields[4]
        yield _finding("W002", line, dom.column,
                       f"day-of-month {dom.text!r} and day-of-week {dow.text!r} are both set: "
                       "cron runs the job on days matching EITHER (0 0 1-7 * 1 runs on the "
                       "1st-7th and on every Monday)")
    for index in rule.starred:
        tok = fields[index]
        yield _finding("I001", line, tok.column,
                       f"{tok.text!r} starts with '*', so cron requires day-of-month AND "
                       "day-of-week to match, unlike the usual OR rule")


def _check_overlap(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    if facts.schedule is None or _is_guarded(facts):
        return
    gap = shortest_gap(facts.schedule)
    if gap is None:
        return
    yield _finding("W005", facts.job.number, facts.job.fields[0].column,
                   f"runs as often as every {gap} min with no lock or timeout: it may overlap "
                   f"itself if a run takes longer than {gap} min",
                   f"wrap it with cronwrap run --timeout {gap}m (overlapping runs are skipped "
                   "by default); cronwrap wrap does the whole file")


def _is_guarded(facts: _Facts) -> bool:
    return any(basename(word) in _GUARDS for word in command_words(facts.cmd))


def _check_output(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    if is_cronwrap(facts.job.command) or _redirected(facts):
        return
    mailto = facts.env.get("MAILTO")
    line, column = facts.job.number, facts.job.command_start + 1
    if mailto is None:
        yield _finding("W006", line, column,
                       "output is neither redirected nor sent by MAILTO: it goes to the "
                       "owner's local mailbox, where it is usually lost")
    elif not mailto.strip():
        yield _finding("W007", line, column,
                       'MAILTO="" and no redirection: the output is silently discarded')


def _redirected(facts: _Facts) -> bool:
    toks = facts.toks
    if toks is None:
        return ">" in facts.cmd
    for k, tok in enumerate(toks):
        if tok.kind != "op":
            continue
        if tok.text in (">", ">>", ">|"):
            return True
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if tok.text in ("|", "|&") and nxt and basename(unquote(nxt.text)) in _LOG_SINKS:
            return True
    return False


def _check_orphans(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    """A daemon starter under ``cronwrap run``, which ends what its command leaves running."""
    words, body_start = option_words(facts.cmd)
    options = [unquote(word) for word in words]
    if options[1:2] != ["run"] or basename(options[0]) != "cronwrap" or \
            leaves_orphans(options, facts.env):
        return
    command = facts.cmd if body_start is None else facts.cmd[body_start:]
    # An @reboot line with a --schedule catches up that schedule's slot after the host was
    # off (README, "Hosts that were off"): a job that ends, not a daemon starter.
    scheduled = "CRONWRAP_SCHEDULE" in facts.env or any(
        option == "--schedule" or option.startswith("--schedule=") for option in options)
    reboot = facts.job.is_reboot and not scheduled
    if not starts_daemon(reboot, command, facts.env):
        return
    what = "an @reboot line without --schedule" if reboot else \
        "a command that backgrounds a process (&)"
    yield _finding("W011", facts.job.number, facts.job.command_start + 1,
                   f"{what} under cronwrap run without --leave-orphans: cronwrap ends what the "
                   "command leaves running when it exits, so a daemon it starts is killed "
                   "within seconds")


def _check_duplicate(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    job = facts.job
    key = (job.user.text if job.user else "", job.command.strip(BLANKS + "\r"))
    if key not in state.seen:
        state.seen[key] = (job.number, job.schedule)
        return
    first, schedule = state.seen[key]
    if schedule == job.schedule:
        why = f"line {first} runs the same command on the same schedule: it runs twice"
    else:
        why = (f"line {first} runs the same command ({schedule}): cronwrap wrap names them "
               f"{derive_name(job.command)} and {derive_name(job.command)}-2, separate jobs")
    yield _finding("W008", job.number, job.command_start + 1, why)


# --- time zones and DST: the engine's notes, in lint's words --------------------------------


def _check_dst(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    if facts.schedule is None or facts.zone is None:
        return
    for note in dst_notes(facts.schedule, state.now):
        yield _dst_finding(facts, facts.schedule, note)


def _dst_finding(facts: _Facts, schedule: Schedule, note: DstNote) -> Finding:
    start, end = note.span
    span, fire = f"{start:%H:%M}–{end:%H:%M}", note.hit[0]
    if note.transition.forward:
        code, what = "W003", f"clocks jump from {start:%H:%M} to {end:%H:%M}"
        effect = (f"{fire:%H:%M} does not exist; cron runs the job once, right after the jump"
                  if schedule.fixed_time else f"the runs in {span} do not happen")
    else:
        code, what = "W004", f"clocks go back from {end:%H:%M} to {start:%H:%M}"
        effect = (f"{fire:%H:%M} happens twice; cron runs the job once, at the first"
                  if schedule.fixed_time else f"the runs in {span} happen twice")
    return _finding(code, facts.job.number, facts.job.fields[0].column,
                    f"on {note.day.isoformat()} in {facts.zone} {what}: {effect}",
                    f"schedule it outside {span}, or set CRON_TZ=UTC and give UTC times")


def _check_zone(facts: _Facts, state: _LintState) -> Iterable[Finding]:
    if facts.zone_source != "CRON_TZ" or facts.schedule is None or facts.zone is None:
        return
    daemon = state.daemon
    if daemon is not None and not daemon.honours_cron_tz:
        return  # W012 on the CRON_TZ line says what happens instead
    clock = host_clock(facts.schedule, state.system_zone, state.now)
    if clock is None:
        return
    if facts.schedule.fixed_time:
        shift = clock.day_shift
        day = "" if shift == 0 else " (the day before)" if shift < 0 else " (the day after)"
        said = f"{clock.first:%H:%M} {facts.zone} is {clock.on_host:%H:%M} {clock.host} here{day}"
    else:
        said = f"the schedule is read in {facts.zone}, not in the system zone {state.system_zone}"
    fix = None if daemon is None else \
        f"nothing to fix if that is meant: {daemon.label} honours CRON_TZ, as cronwrap does"
    yield _finding("I002", facts.job.number, facts.job.fields[0].column, said, fix)


_JOB_CHECKS: tuple[Callable[[_Facts, _LintState], Iterable[Finding]], ...] = (
    _check_command_word,
    _check_percent,
    _check_days,
    _check_dst,
    _check_zone,
    _check_overlap,
    _check_output,
    _check_duplicate,
    _check_orphans,
)
