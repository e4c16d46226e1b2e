"""Every command's arguments and options, declared once (``run``'s: spec.OPTIONS).

``COMMANDS`` is the one declaration of the command line: admin.py builds its typer app from it,
``lean_command`` below runs the read commands from it without typer, and tools/docs renders
the man page and README's reference from it. A command is added here, with the function it
calls, and nowhere else.

The read commands (``status``, ``history``, ``logs``, ``explain``) are an operator's most
frequent, and typer's parameter machinery alone costs more than ``status`` may (~200 ms,
bench/results.md, issue 15): cli.py tries ``lean_command`` first. It runs a command line it
fully understands; anything else (``--help``, an unknown option, a missing argument, a
number out of range) goes to typer, built from the same table, so every help text and error
is typer's own. Importing this module costs a few records: no typer, no command's body.
"""

from __future__ import annotations

from importlib import import_module

from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

TEXT, FLAG = "text", "flag"
REQUIRED = ...  # the default of a parameter that must be given (typer's own spelling)


class Param(Record):
    """One argument or option of a command; ``dest`` is the keyword its function takes.

    names: the option's spellings (``("--follow", "-f")``); none for an argument.
    metavar: what its value is called in help and the man page; None for a flag.
    kind: TEXT, FLAG, or ``(low, high)``: a whole number in that range (high None: no limit).
    default: its value when not given; REQUIRED: it must be given.
    many: an argument that takes every remaining word (a list; None when there is none).
    off: a flag's negative spelling (``--user`` beside ``--system``); its value is then
    True, False, or None when neither is given."""

    dest: str
    help: str
    names: tuple[str, ...]
    metavar: str | None
    kind: str | tuple[int, int | None]
    default: Any
    many: bool
    off: str | None
    _defaults = dict(names=(), metavar=None, kind=TEXT, default=None, many=False, off=None)

    @property
    def is_argument(self) -> bool:
        return not self.names

    @property
    def is_flag(self) -> bool:
        return self.kind == FLAG

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


class Command(Record):
    """A command: its name (``db init`` for a sub-command), help, parameters and the function
    (``module:name``) that runs it with one keyword per parameter. lean: run by
    ``lean_command`` when it understands the command line. rest: the keyword that gets the
    words typer leaves (``wrap``'s run options after ``--``; ``run``'s whole command line)."""

    name: str
    help: str
    params: tuple[Param, ...]
    function: str
    lean: bool
    rest: str | None
    _defaults = dict(lean=False, rest=None)

    def call(self, values: dict[str, object]) -> int:
        module, _, name = self.function.partition(":")
        result: int = getattr(import_module(module), name)(**values)
        return result

    @property
    def summary(self) -> str:
        """The help's first clause, for lists of commands: never cut inside a parenthesis."""
        ends = [i for i in (self.help.find(mark) for mark in (": ", "; ", " (", ". "))
                if i > 0]
        return self.help[:min(ends)] if ends else self.help.rstrip(".")

    def param(self, dest: str) -> Param:
        return next(p for p in self.params if p.dest == dest)


def argument(dest: str, metavar: str, help: str, **more: Any) -> Param:
    return Param(dest, help, (), metavar, **more)


def option(names: str, dest: str, metavar: str | None, help: str, **more: Any) -> Param:
    """``names``: the spellings, blank-separated (``"--follow -f"``); metavar None: a flag."""
    more.setdefault("kind", TEXT if metavar else FLAG)
    if more["kind"] == FLAG:
        more.setdefault("default", False)
    return Param(dest, help, tuple(names.split()), metavar, **more)


SUMMARY = "Make crontab jobs trustworthy: no overlaps, hard timeouts, one run per slot, a ledger."
GROUPS = {"db": "The ledger's schema."}  # commands of two words: the first word's help

JOB = argument("name", "NAME", "Job name.", default=REQUIRED)
DB = option("--db", "db", "URL", "Ledger URL (default: CRONWRAP_DB, then db in the config "
            "file, then the embedded SQLite ledger).")
JSON_RUNS = option("--json", "as_json", None, "Print a JSON array of runs, newest first, each "
                   "with its attempts (\"attempts\": every attempt the ledger kept, oldest "
                   "first: status, reason, host, fence, start, end, exit code).")
HOST = option("--host", "host", "HOST", "The runs of a host-scoped job (--scope host) on HOST "
              "(default: this host's, by the identity its runs write: CRONWRAP_HOST, host in "
              "the config file, the hostname; else the job's only host's). A fleet job's runs "
              "are every host's: --host is refused for it.")
HOSTS = option("--host", "host", "HOST", "Only the rows of host-scoped jobs (--scope host) "
               "for this host; fleet jobs, which belong to no one host, are left out.")
CRONTAB = argument("file", "FILE", "Crontab file, or - for standard input.", default="-")
PAUSE_HOST = option("--host", "host", "HOST", "Only this host's firings of a host-scoped job "
                    "(--scope host: its runs on HOST, NAME@HOST); without it, every host's.")
SYSTEM = option("--system", "system", None, "The file has a user field (/etc/crontab, "
                "/etc/cron.d/*); default: from its path.", off="--user", default=None)

COMMANDS: tuple[Command, ...] = (
    Command("run", "Run a job: lock, claim its slot, supervise, record (see: cronwrap run "
            "--help).", (), "cronwrap.cli:run_command", rest="args"),
    Command("status", "One row per job: last run, status, duration, last success, next due, "
            "running runs, health.", (
                argument("names", "NAME", "Jobs to show (default: all); one NAME shows its "
                         "runs.", many=True),
                option("--since", "since", "DURATION", "Window for counts and history, a "
                       "duration with a unit (e.g. 7d, 12h).", default="7d"),
                option("--json", "as_json", None, "Print a JSON array of jobs (as --format "
                       "json; with another --format it is refused)."),
                option("--format", "output_format", "FORMAT", "table, json or prometheus (text "
                       "exposition format).", default="table"),
                option("--textfile", "textfile", "FILE", "Write the Prometheus metrics to this "
                       "file atomically (node_exporter textfile collector)."),
                option("--check", "check", None, "Nagios/Icinga plugin: one line plus perfdata; "
                       "exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."),
                option("--max-age", "max_age", "DURATION", "With --check: CRITICAL when a job "
                       "has not succeeded for this long (a unit is required: 26h)."),
                option("--warn-duration", "warn_duration", "DURATION", "With --check: WARNING "
                       "when a run has been running longer than this (a unit is required: 2h)."),
                HOSTS, DB), "cronwrap.read.reads:status", lean=True),
    Command("history", "The runs of one job, newest first; a job the ledger does not know is "
            "an error (exit 125). A slot whose job ran more than once (a retry, or a takeover "
            "of an attempt whose runner died or was stopped) is marked with *, its earlier "
            "attempts listed under it.", (
        JOB,
        option("--limit", "limit", "N", "At most this many runs.", kind=(1, 100000), default=20),
        JSON_RUNS, HOST, DB), "cronwrap.read.reads:history", lean=True),
    Command("logs", "Print the captured output of a run, read only from this host's log "
            "directories (CRONWRAP_LOG_DIR, log-dir in the config file, the default): never "
            "from a path the ledger names, never through a symlink.", (
                JOB,
                argument("run_id", "RUN_ID", "Run id (default: the last run).",
                         kind=(1, 2**62)),
                option("--last", "last", None, "The last run (the default)."),
                option("--attempt", "attempt", "K", "Attempt K of the run (default: its "
                       "latest; cronwrap history NAME lists a slot's attempts). Its output is "
                       "read on the host that ran it.", kind=(1, 2**31 - 1)),
                option("--follow -f", "follow", None, "Keep printing while the run is running; "
                       "stop when it ends or is abandoned (its lease expired)."),
                option("--raw", "raw", None, "Copy the output byte for byte to a terminal too "
                       "(there, control characters are otherwise shown escaped, e.g. \\x1b; "
                       "piped output is always exact)."),
                option("--timestamps -t", "timestamps", None, "Begin each line with the time "
                       "it came (UTC, 2026-12-05T01:30:00.123Z), for a run captured with run "
                       "--timestamps."),
                HOST, DB), "cronwrap.read.reads:logs", lean=True),
    Command("why", "Why a slot of a job ran or did not, in a few lines: whether the schedule "
            "fires then (its zone, what DST does that day), whether a host fired it, whether "
            "it was skipped and why (overlap, paused, too late; a duplicate firing, from this "
            "host's run log), how its run ended, or that it was missed. Reads only: the "
            "ledger's row and attempts of the slot, its pauses, this host's run log.", (
                JOB,
                option("--at", "at", "WHEN", "The slot: a time as run --at reads it "
                       "(2026-10-28T01:30 in the job's zone, or with an offset or Z; not a fire "
                       "time: the slot before it is told) or a date as run --date reads it "
                       "(2026-10-28: that day's first slot). Default: the next slot."),
                option("--json", "as_json", None, "Print a JSON object (its \"story\" is the "
                       "lines printed; \"verdict\": upcoming, ran, running, abandoned, "
                       "skipped, missed, no_slot)."),
                HOST, DB), "cronwrap.read.reads:why", lean=True),
    Command("unlock", "Expire the leases of a job's running runs, for an operator who knows "
            "the holder is dead; and tell who holds the job's local lock on this host (wrapper "
            "and job PIDs, alive or gone). A lock a live process holds is never broken; a PID "
            "lock whose holder is gone is released (its holder record is removed).", (
                JOB,
                option("--lock-file", "lock_file", "PATH", "The job's lock file, when its "
                       "crontab line gives --lock-file (default: CRONWRAP_LOCK_FILE, lock-file "
                       "in the config file, else NAME.lock in cronwrap's lock directory)."),
                HOST, DB), "cronwrap.admin:unlock"),
    Command("pause", "Pause a job: until resume (or --until), each of its scheduled and catch-up "
            "firings records its slot skipped (reason paused) and runs nothing: no hook, no "
            "ping, exit 0. A manual run (run --date/--at, a person's) still runs. On a shared "
            "(PostgreSQL) ledger the whole fleet's firings pause; on SQLite, this host's. "
            "status, --check (OK), the metrics (cronwrap_paused) and serve say so. A job the "
            "ledger has not seen yet may be paused (a note says so: check the name). Pausing "
            "a paused job replaces its pause. Hosts still on a release before pauses (b9ec9f4 "
            "and older) do not read them: their firings run.", (
                JOB,
                option("--until", "until", "WHEN", "Resume by itself then: a time (ISO 8601, "
                       "e.g. 2026-12-05T06:00 in this host's zone, or with an offset or Z) or a "
                       "duration from now with a unit (90m, 12h, 2d); one already past is "
                       "refused. Default: until cronwrap resume."),
                option("--reason", "reason", "TEXT", "Why, for whoever looks: status, --check "
                       "and serve show it."),
                PAUSE_HOST, DB), "cronwrap.admin:pause"),
    Command("resume", "End a job's pause: its next firing runs. Slots skipped while it was "
            "paused stay skipped (catch-up does not run them; run --date/--at does). A job "
            "that is not paused is said so, exit 0.", (JOB, PAUSE_HOST, DB),
            "cronwrap.admin:resume"),
    Command("step", "Inside a job cronwrap runs: run COMMAND as step KEY of the job's slot, "
            "once per slot whatever the attempts. A step that succeeded in an earlier attempt "
            "of the slot (on any host) is not run again: one line on stderr, exit 0. The step "
            "is recorded in the ledger (status, exit, start, end, attempt, host: history and "
            "serve show it) and fenced: once the slot is no longer this attempt's (taken "
            "over, ended, or its lease ran out) it refuses with one line, exit 123, so a "
            "superseded attempt stops instead of doing the work twice. Otherwise COMMAND's "
            "own exit status (no shell). Outside a cronwrap run: exit 125.", (
                argument("key", "KEY", "The step's name within the slot (1-200 printable "
                         "characters, e.g. batch-0003).", default=REQUIRED),
                argument("command", "COMMAND", "The command and its arguments, after --.",
                         many=True),
                option("--force", "force", None, "Run it even if it already succeeded in "
                       "this slot."),
                option("--done", "done", None, "Only ask: exit 0 if step KEY succeeded in "
                       "this slot, 1 if not; run nothing."),
            ), "cronwrap.run.step:step", lean=True),
    Command("explain", "The next fire times of a schedule, and what a person should know "
            "about it.", (
                argument("expression", "EXPRESSION", "A cron expression (5 fields or @daily "
                         "etc.), quoted.", default=REQUIRED),
                option("--tz", "tz", "ZONE", "Zone of the expression (default: CRON_TZ, TZ, the "
                       "system zone)."),
                option("--count", "count", "N", "How many fire times to show.",
                       kind=(0, 1000), default=5),
                option("--from", "start", "TIME", "Start after this time (ISO 8601; default: "
                       "now)."),
                option("--json", "as_json", None, 'Print {"expression", "tz", "next", '
                       '"warnings"}.'),
            ), "cronwrap.read.reads:explain", lean=True),
    Command("wrap", "Print a crontab with every job prefixed by cronwrap run (options after -- "
            "are added to each); warn on stderr for each line it wraps that lint reports an "
            "error for.", (
                CRONTAB,
                option("--diff", "show_diff", None, "Print a unified diff instead of the new "
                       "crontab."),
                option("--unwrap", "undo", None, "Restore the lines wrap wrote to their "
                       "original text."),
                option("--cronwrap", "cronwrap_path", "PATH", "Path of cronwrap in the lines "
                       "(default: this one's, by the absolute path it was started with)."),
                SYSTEM), "cronwrap.admin:wrap", rest="extra"),
    Command("lint", "Report a crontab's classic mistakes, one line each; exit 1 when there "
            "are errors.", (CRONTAB, SYSTEM), "cronwrap.admin:lint"),
    Command("prune", "Retention: old ledger rows and log files; never a running run, nor a "
            "slot inside its catch-up window. Files go in cronwrap's log directory and in each "
            "job's own: its --log-dir as the ledger recorded it, CRONWRAP_LOG_DIR, log-dir in "
            "the config file; such a directory only if cronwrap would use it itself (a real "
            "directory of yours, not writable by others), and in it only cronwrap's own files "
            "(NAME/RUN_ID.ATTEMPT.log and .times, events.jsonl.N), never through a symlink. The ledger's "
            "statistics, which its query planner reads, are refreshed (ANALYZE) in the same "
            "transaction: run it from time to time even if nothing is old.", (
                option("--older-than", "older_than", "DURATION", "Remove runs and log files "
                       "older than this (a unit is required: 90d).", default=REQUIRED),
                option("--keep-last", "keep_last", "N", "Always keep each job's newest N runs.",
                       kind=(0, None), default=0),
                DB), "cronwrap.admin:prune"),
    Command("serve", "A read-only web dashboard of the ledger: the jobs (/), a job's runs "
            "(/jobs/NAME), one run (/jobs/NAME/runs/ID), why a slot ran or not "
            "(/jobs/NAME/why?at=WHEN), /metrics for Prometheus, /api/status, "
            "/api/jobs/NAME/history and /api/jobs/NAME/why as JSON, /healthz. Every request needs a token "
            "(Authorization: Bearer TOKEN, or ?token=TOKEN once, which sets a cookie), on "
            "loopback too, unless --no-auth.", (
                option("--listen", "listen", "HOST:PORT", "HOST:PORT to listen on (every "
                       "address HOST resolves to); port 0: any free port (the line printed at "
                       "start names it).", default="127.0.0.1:8080"),
                option("--token-file", "token_file", "PATH", "A file (yours, mode 0600, not a "
                       "symlink) holding the token every request must send (Authorization: "
                       "Bearer TOKEN). Default: a token made at start, kept in "
                       "STATE/serve/HOST-PORT.token while serve runs, and printed in a URL to "
                       "open once in a browser (?token=TOKEN)."),
                option("--no-auth", "no_auth", None, "Serve without a token: anyone who can "
                       "connect reads every job's output. Only on loopback addresses (checked "
                       "on the sockets bound), and every page says so."),
                DB), "cronwrap.admin:serve"),
    Command("watch", "Tell people when a job does not run, fails, hangs or warns: every "
            "--interval, each job whose schedule the ledger knows is judged as status judges "
            "it, and each breach (late, failing, stuck, warning) is sent once to each notifier, "
            "and once more when it clears (recovered), however many watchers share the ledger.", (
                option("--interval", "interval", "DURATION", "Time between evaluations (a "
                       "unit is required).", default="30s"),
                option("--grace", "grace", "DURATION", "How long after a slot its run may "
                       "still start before the slot is late, and how long past its --timeout "
                       "a run may go (default: a tenth of the job's period, at least 5s, at "
                       "most 10m)."),
                option("--notify", "notify", "COMMAND", "Run this shell command for each "
                       "alert, with CRONWRAP_ALERT (late, failing, stuck, warning, recovered), "
                       "CRONWRAP_JOB, CRONWRAP_HOST, CRONWRAP_ALERT_TEXT, CRONWRAP_ALERT_DETAIL, "
                       "CRONWRAP_ALERT_KEY, CRONWRAP_SCHEDULED_AT and CRONWRAP_RUN_ID; exit 0 "
                       "means delivered. Repeatable.", many=True),
                option("--notify-webhook", "notify_webhook", "URL", "POST each alert as JSON "
                       "(text, kind, job, host, scope, summary, detail, slot, run_id, alert, at; "
                       "text is what Slack- and Mattermost-compatible incoming webhooks show); "
                       "a 2xx answer means delivered. Repeatable.", many=True),
                option("--notify-mail", "notify_mail", "ADDRESS", "Mail each alert through "
                       "the local sendmail (sendmail -oi -t, as cron's own mail goes). "
                       "Repeatable.", many=True),
                option("--once", "once", None, "Evaluate once, send what is due and exit (for "
                       "cron itself, and for tests)."),
                option("--dry-run", "dry_run", None, "Print the alerts it would open and close; "
                       "claim and send nothing."),
                DB), "cronwrap.watch.watcher:watch"),
    Command("completion", "Print the completion script of a shell (bash: source <(cronwrap "
            "completion bash)); it completes commands, options, the values of options with "
            "fixed choices, and job names from the ledger.", (
                argument("shell", "SHELL", "bash, zsh or fish.", default=REQUIRED),
                option("--cword", "cword", "N", "What the script runs: print the completions of "
                       "word N of WORDS, one a line.", kind=(0, 1000)),
                argument("words", "WORDS", "With --cword: the command line being completed, "
                         "after --.", many=True),
            ), "cronwrap.read.complete:completion", lean=True),
    Command("db init", "Create the ledger schema, or bring it to this release's (an empty "
            "database also gets one on first use); re-creates the ledger's functions.",
            (DB,), "cronwrap.admin:db_init"),
    Command("db upgrade", "Apply this release's migrations to an existing ledger, once, before "
            "the hosts are upgraded: run never migrates a PostgreSQL ledger, and wrappers of "
            "older releases keep working on the upgraded schema. It refreshes the ledger's "
            "statistics (ANALYZE) whether or not anything was migrated.", (DB,),
            "cronwrap.admin:db_upgrade"),
)
BY_NAME = {command.name: command for command in COMMANDS}


def default(command: str, dest: str) -> Any:
    """A parameter's default, for code that must agree with it (serve's windows)."""
    return BY_NAME[command].param(dest).default


def lean_command(args: Sequence[str]) -> int | None:
    """Run ``args`` if they name a lean command and this parser understands all of them;
    None: leave them to typer."""
    command = BY_NAME.get(args[0]) if args else None
    if command is None or not command.lean:
        return None
    values = parse(command, args[1:])
    return None if values is None else command.call(values)


def parse(command: Command, words: Sequence[str]) -> dict[str, object] | None:
    """The keyword arguments of ``command``'s function for ``words``, or None when typer
    should answer (``--help``, a mistake: typer says what is wrong)."""
    by_name = {name: p for p in command.params
               for name in (*p.names, *([p.off] if p.off else []))}
    values = {p.dest: None if p.required else p.default for p in command.params}
    missing = {p.dest for p in command.params if p.required and not p.is_argument}
    given: list[str] = []
    rest = list(words)
    while rest:
        token = rest.pop(0)
        if token == "--":  # the rest are arguments, as typer takes them
            given += rest
            break
        if not token.startswith("-") or token == "-":
            given.append(token)
            continue
        name, equals, text = token.partition("=") if token.startswith("--") else (token, "", "")
        param = by_name.get(name)
        if param is None or (param.is_flag and equals):
            return None
        missing.discard(param.dest)
        if param.is_flag:
            values[param.dest] = name != param.off
            continue
        if not equals:
            if not rest or rest[0].startswith("-"):
                return None
            text = rest.pop(0)
        value = _value(text, param.kind)
        if value is None:
            return None
        values[param.dest] = value
    return None if missing else _positionals(command, given, values)


def _positionals(command: Command, given: list[str],
                 values: dict[str, object]) -> dict[str, object] | None:
    for param in command.params:
        if not param.is_argument:
            continue
        if param.many:
            values[param.dest], given = (given or None), []
        elif given:
            value = _value(given.pop(0), param.kind)
            if value is None:
                return None
            values[param.dest] = value
        elif param.required:
            return None  # typer's message names it
    return None if given else values


def _value(text: str, kind: str | tuple[int, int | None]) -> object | None:
    if isinstance(kind, str):  # TEXT: a flag takes no value
        return text
    low, high = kind
    try:
        number = int(text)
    except ValueError:
        return None
    return number if low <= number and (high is None or number <= high) else None
