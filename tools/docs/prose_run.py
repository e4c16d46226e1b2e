"""Prose of cronwrap(1) about running jobs: the description, slots, catch-up, retries, hooks,
monitoring, and the notes under each administrative command.
"""

from __future__ import annotations

from datetime import timedelta

from cronwrap import commands, errors, stdio
from cronwrap.admin import CRONTAB_MAX
from cronwrap.model import DURATION_BUCKETS, FORMAT_VERSION
from cronwrap.process import supervise
from cronwrap.read import monitoring as monitor, picture, serve
from cronwrap.read.why import VERDICT_MEANINGS
from cronwrap.redact import deadline, redactor as redact
from cronwrap.run import catchup, retry, runlog

from tools.docs.facts import (
    ALIASES, Block, EARLY, FINAL, HOOK_KILL, Example, LATE_GRACE, ORPHAN_GRACE, PING_RETRIES,
    PING_TIMEOUT, PING_WAIT, TOLERANCE, duration_text, duration_words, signal_names, size_text)


DESCRIPTION: tuple[Block, ...] = (
    "`cronwrap run` goes in front of the command of a crontab line. It takes a local lock so "
    "that the job never overlaps itself, claims the firing's slot in a ledger so that the job "
    "runs once per slot even when duplicate entries or several hosts fire it, ends the job's "
    "whole process tree at a hard timeout as timeout(1) would, keeps a bounded copy of its "
    "output and records the run. With `--schedule` it knows the job's slots, so it can record "
    "and catch up slots that never ran and run a given day's slot by hand. It can retry "
    "transient failures, run hooks and ping a monitoring service. `cronwrap status`, `history` "
    "and `logs` read the record back, `explain` shows when a schedule fires, and `wrap` and "
    "`lint` adopt an existing crontab.",
    "*COMMAND* is executed directly (execvp(3): the argument vector is preserved, there is no "
    "shell); a job that needs a shell says so with `-- sh -c '...'`. A script without a `#!` "
    "line is run by /bin/sh, as execvp(3) and timeout(1) do. The options of `run` end at `--` "
    "or at the first word that is not an option.",
    "By default the job's output passes through as it comes, so a prefixed crontab line mails "
    "and redirects exactly as before, and a copy is kept for `cronwrap logs`. With `--output "
    "on-failure` the output is only captured and, when the run did not succeed, the captured "
    "copy (standard error merged into it, bounded as described under FILES) is written to "
    "standard output after the job has ended, as chronic(1) does.",
    "The job is its whole process tree. Its keeper makes itself the child subreaper of the job "
    "and starts it in a process group of its own (in a session of its own where the system has "
    "no subreaper), so descendants that left the job's process group are still found. The "
    "keeper leaves cronwrap's process group; when cronwrap has a controlling terminal (run by "
    "hand) the keeper starts a session of its own, so that the terminal's signals and job "
    "control reach the job only as cronwrap forwards them. Under cron there is no terminal, and "
    "no session is started: setsid(2) costs milliseconds where the kernel's scheduler "
    "autogroups are on. At `--timeout` every process of the tree gets `--signal` (and CONT, "
    "so that a stopped process can act on it); `--kill-after` later, KILL goes to whatever is left; with "
    "`--kill-after 0` the main process is never sent KILL, as with timeout(1). When the main "
    "process exits by itself, descendants it left running are ended the same way: `--signal`, "
    f"then KILL after `--kill-after`, or {ORPHAN_GRACE} when that is 0; the run log's `finish` "
    "event counts them (`orphans`). `--leave-orphans` leaves them running.",
    f"{signal_names(supervise.FORWARDED_SIGNALS)} sent to cronwrap are forwarded to the whole "
    "job, and cronwrap goes on supervising it: every signal that would otherwise end the "
    "wrapper and leave its job running without a timeout. A job that handles one and exits "
    f"by itself returns its own status. {signal_names(supervise.IGNORED_SIGNALS)} are ignored "
    "while the job runs: job control must not stop the wrapper of a job that runs on. A "
    "signal that was already ignored when cronwrap started (`nohup`, `&` in a script) stays "
    "ignored, by cronwrap and by the job, as under timeout(1): a re-run started with `nohup` "
    "over SSH survives the hangup. VTALRM is cronwrap's own (it times the matching of "
    "`--redact` patterns) and is neither forwarded nor fatal.",
    "Supervision never waits for the output. The job's life belongs to its keeper, a process "
    "of its own that cronwrap forks before the job starts (shown as cronwrap-keeper by ps "
    "-e): it spawns the job, times it out, forwards signals, ends and reaps its tree, and "
    "ends it when the wrapper itself dies. The wrapper reads, captures, redacts and passes on "
    "the output and renews the lease: a job that prints what is slow to redact, or a reader "
    "that stalls, slows the output, never the timeout, a KILL or a signal.",
    "As PID 1 of a container (`docker run`, a Kubernetes entrypoint, `unshare --pid --fork`) "
    "cronwrap is the init of its job: it and its keeper reap every process re-parented to "
    "them, the keeper finds the "
    "job's tree through its own /proc or, when the container shares the host's /proc, by "
    "translating the host's process IDs to the container's, and keeps the exit statuses of "
    "timeout(1). When it exits, the kernel ends whatever is left in the container, "
    "`--leave-orphans` included.",
    "The job's output reaches cronwrap's own standard output and error without ever blocking "
    "the wrapper: a reader slower than the job makes the job wait on its writes, as it would "
    "without cronwrap, while timeouts, signals and the lease go on. Once the job has ended, "
    f"output that a stalled reader does not take for {duration_text(stdio.FLUSH_STALL)} "
    f"({duration_text(stdio.FLUSH_STALL_STOPPED)} after a timeout or a forwarded signal) is "
    "dropped and counted (`output_dropped` in the `finish` event); the captured copy keeps "
    "it. When the reader goes away (`| head -1`), the job's pipe is closed, so its next write "
    "fails with SIGPIPE as it would without cronwrap. Any other write error (a full disk, "
    "`> /dev/full`) ends the passing on of that stream and nothing else "
    "(`passthrough_error`). Standard input, output or error closed by the caller (`2>&-`) "
    "are opened on /dev/null.",
    "When nothing runs (the job is running, or its slot already ran), cronwrap says why on "
    "standard error only when that is a terminal: from cron, the message would only make mail. "
    "The run log always records a `skip` event. Two messages are always written: the duplicate "
    "of a manual run (`--date`, `--at`), and the warning about a firing that matches no slot of "
    "`--schedule` (see SLOTS), which cron then mails.",
    "Settings come from the command line, the environment (`CRONWRAP_`*OPTION*) and the "
    "configuration file, cronwrap.toml(5), in this order of precedence: command line > "
    "environment > its `[jobs.`*NAME*`]` table > its `[defaults]` table > built-in default.",
    "Every command takes `--help`; `cronwrap --version` prints the version.",
)


RUN_OPTIONS_INTRO: tuple[Block, ...] = (
    "*DURATION* is a number of seconds, fractions and exponents allowed, with an optional "
    "suffix `s`, `m`, `h` or `d` (`30`, `1.5m`, `2h`, `1d`, `1e-3`, `2.5e2m`; compound forms "
    "such as `1h30m` too, where every part needs its suffix: `1h30` is refused, with a hint "
    "to write `1h30m`); `0` means none, and a positive value never rounds down to it. An age "
    "or a window (`--catchup-window`, `--keep-logs`, and `status`'s `--since`, `--max-age` and "
    "`--warn-duration`, `prune`'s `--older-than`) needs a suffix: `--max-age 26` is refused "
    "(write `26h`), since a bare number there would be seconds. A "
    "duration over ten years (`4000d`, `1e400`, `inf`) is refused, except by `--timeout`, "
    "`--kill-after` and `--wait-timeout`, which then run without that limit, as GNU timeout "
    "does, and say so once on standard error. "
    "Every option can also be set in the environment, in the variable named with it, and in "
    "the configuration file (see cronwrap.toml(5)); the command line wins. An invalid value is "
    f"a one-line error and exit status {errors.EXIT_CRONWRAP} before anything runs.",
)


# The marks of the history picture that are not ASCII, in words: groff has no glyph for some
# (✗, ▶) and a terminal without UTF-8 (-Tascii) none for any.
MARK_NAMES = {"✓": "a check mark", "✗": "a cross", "·": "a dot", "○": "a circle",
              "▶": "a triangle"}


def mark_words() -> str:
    """``a check mark for succeeded, ..., `T` for timeout``: every mark picture.MARKS draws."""
    words = []
    for status in FINAL:
        mark = picture.MARKS[status][0]
        if not mark.isascii() and mark not in MARK_NAMES:
            raise KeyError(f"{mark!r}: the history picture draws it for {status}, but "
                           "MARK_NAMES does not say what it looks like")
        words.append(f"{MARK_NAMES.get(mark, f'`{mark}`')} for {status}")
    return ", ".join(words)


MARK_WORDS = mark_words()


def ascii_marks() -> str:
    """``+`` for a check mark, ...: what the history picture draws where the locale's charset
    lacks its marks (stdio.ASCII_LOOKALIKES)."""
    return ", ".join(f"`{stdio.ASCII_LOOKALIKES[mark]}` for {MARK_NAMES[mark]}"
                     for mark, _ in picture.MARKS.values() if not mark.isascii())


LOCALE_NOTE = (
    "In a locale whose charset is not UTF-8 (ISO-8859-1, or `LC_ALL=C` with `PYTHONUTF8=0`) "
    "what the charset lacks is written in ASCII: the picture's marks as " + ascii_marks()
    + ", the sparkline's bars as `" + "".join(stdio.ASCII_LOOKALIKES[b] for b in picture.BARS)
    + "`, dashes as `-`, an ellipsis as `...` (`+` ends a word cut to fit a table's column), "
    "and any other character as `?`."
)


CRONTAB_INPUT = (
    f"*FILE* (or standard input, `-`) must be UTF-8 text of at most {size_text(CRONTAB_MAX)}, "
    f"some 15,000 lines: a larger input (/dev/zero, an endless pipe) is refused with exit "
    f"status {errors.EXIT_CRONWRAP} after reading that much, and nothing is written."
)


COMMAND_NOTES: dict[str, tuple[Block, ...]] = {
    "status": (
        "The table has one row per job: when its last run started, its status and exit code, "
        "how long it took, its last success, its next due slot (with `--schedule`), the runs "
        "holding a live lease right now (*HOST*`:`*PID*, lease left, fence) and its health "
        "(see MONITORING). With one *NAME* and no other output option it shows that job's runs "
        "in the `--since` window instead, as `history` does.",
        "`--json`: an array of jobs, each with `job`, `schedule`, `tz`, `last_run` (a run as in "
        "`history --json`, or null), `last_success_at`, `next_due_at`, `running` (runs holding a "
        "live lease, with `lease_left_s`), `missed`, `late`, `counts` (runs by status in the "
        "window), `health`, `why` (its few words), `paused` and `pause` (the pause in force: "
        "`job`, `until`, `reason`, `paused_by`, `paused_at`; or null), `first_seen` and "
        "`last_seen`. `--check`, `--format prometheus` and "
        "`--textfile` are described under MONITORING.",
    ),
    "history": (
        "Above the table, a picture of the runs: one mark per slot, oldest on the left ("
        + MARK_WORDS + "), under it a sparkline of their durations scaled to the longest, and a "
        "legend with the counts. Below the table, the last lines of output of the newest run "
        "that failed, timed out or was killed (its `error_tail`). " + LOCALE_NOTE,
        "Every attempt at a slot is kept: a retry, and a takeover of an attempt whose runner "
        "died or was stopped, leave the attempt before them on the record. A slot whose job "
        "ran more than once has `*` after its attempt number, and its earlier attempts are "
        "listed under it: status (a taken-over attempt is `abandoned (superseded)` unless its "
        "wrapper came back to record its own end, as a job that ran to its end while its "
        "wrapper was stopped does), host, start, duration, exit code and fence. Attempts "
        "before a ledger was upgraded to keep them are not known.",
        "`--json`: an array of runs, newest first, each with `run_id`, `job`, `run_key`, "
        "`scheduled_at`, `trigger`, `status`, `skip_reason`, `attempt`, `host`, `pid`, "
        "`started_at`, `finished_at`, `duration_ms`, `exit_code`, `signal`, `fence` and a few "
        "more; times in ISO 8601 with offset, unknown values null. Its `attempts` lists every "
        "attempt kept, oldest first, the run's latest last: `attempt`, `status`, `reason` "
        "(`superseded`: its slot was taken over; `lease_lost`), `host`, `fence`, `started_at`, "
        "`finished_at`, `duration_ms`, `exit_code`, `signal`.",
    ),
    "logs": (
        "The captured output of the run (standard output and error as they came, bounded as "
        "described under FILES); the newest run that is not a skip by default. `--follow` "
        "keeps printing until the run ends, or until it is abandoned (its runner died and its "
        "lease expired), which it then says on standard error. `--attempt` *K* prints an "
        "earlier attempt of the run (each attempt has its own file, on the host that ran it: "
        "`history` names the host).",
        "The output is read only from the log directories configured on this host "
        "(`CRONWRAP_LOG_DIR`, `log-dir` in the configuration file's `[jobs.`*NAME*`]` or "
        "`[defaults]`, and the default *LOGS*), as *NAME*`/`*RUN_ID*`.`*ATTEMPT*`.log`: never "
        "the path a ledger row names, never through a symlink, and only a regular file. For a "
        "job run with `--log-dir` *DIR* on its crontab line, use `CRONWRAP_LOG_DIR=`*DIR*.",
        "Bytes are copied as they are when standard output is a pipe or a file. On a terminal, "
        "control characters other than newline, tab and CRLF are shown as escapes such as "
        "`\\x1b`, so a job's output cannot retitle or clear the terminal; `--raw` prints them "
        "as they are. `status`, `history`, `status --check` and `unlock` always escape them.",
    ),
    "why": (
        "One short story of one slot: the schedule and its zone; whether the time asked is one "
        "of its fire times (a time that is not: the fire times on either side, and the story of "
        "the slot before it; a date: that day's first slot, or that the schedule does not fire "
        "that day); what DST does that day (as `explain` says it); then what the ledger has "
        "for the slot's run key: its run, how it ended and on which host, after how many "
        "attempts; or why it was skipped; or that it was missed: recorded missed by a later "
        "firing, or no row at all (no host's firing reached the ledger). This host's run log "
        "adds what is recorded nowhere else: a firing of the slot skipped as a duplicate or "
        "because the job's lock was busy, an off-slot firing that fell back to it, retries, a "
        "lost lease, an end spooled to the outbox. The schedule is the one the job's firings "
        "recorded in the ledger (else the configuration file's `[jobs.`*NAME*`]`). It reads "
        "only, and never writes to the ledger. `--json` prints one object (`format` "
        f"{FORMAT_VERSION}; cronwrap/schemas/why.json) whose `story` holds the lines and whose "
        "`verdict` is one of: " + "; ".join(f"`{word}`, {meaning}"
                                           for word, meaning in VERDICT_MEANINGS.items()) + ".",
    ),
    "unlock": (
        "The rows become `abandoned`, and the next claim of their slot takes them over (see "
        "LEDGER). Then one line about the job's local lock on this host: held (flock) by the "
        "wrapper and job PIDs, held as a PID lock by a live holder, free, or free after "
        "removing the holder record of a holder that is gone (for `--lock pid`, that releases "
        "the lock). A lock a live process holds is never broken. Inspecting creates no file "
        "and follows no symlink.",
    ),
    "serve": (
        "A web dashboard of the ledger the other commands read (`--db`, `CRONWRAP_DB`, the "
        "configuration file, else the embedded one), so pointed at the fleet's PostgreSQL it "
        "shows the fleet. `/`: every job, critical first, with its health, last run (status, "
        "exit code, duration, host, when), next due slot, the runs holding a lease now (host, "
        "lease left) and a strip of its last slots as `status` *NAME* draws them; under a "
        "failing job's health, the last line of its last failure's output (the redacted tail "
        "the ledger keeps). `?health=critical`|`warning`|`ok` (the links above the table) keeps "
        "the jobs of that health, `?q=`*TEXT* those whose shown name holds *TEXT* (any case), "
        "`?host=`*HOST* that host's rows of host jobs (sent by a plain form). "
        "It reloads itself every 30 seconds and needs no JavaScript. `/jobs/`*NAME*: while the "
        "job is not ok, its last failure (how it ended, when, where, and the last 40 lines of "
        "its output, found as for a run's page); its runs, 50 a page, newest first, with their "
        "start times in the job's zone (its schedule's, else UTC) beside how long ago; a chart "
        "of their durations by slot (a run without one by its start), with missed slots marked "
        "and late ones shaded; its schedule in words with its next fire times and the notes of "
        "`explain` (DST). `/jobs/`*NAME*`/runs/`*ID*: what happened, in words (status and why: "
        "exit status, timeout, signal, lost lease, a skip's reason; how long, host, attempt, "
        "trigger, slot, in the job's zone), then its captured output, read as `logs` reads it "
        "(only from this host's log directories), else the ledger's tail of it, then every "
        "field of the run and its events from this host's run log, folded. Colours follow the "
        "browser's `prefers-color-scheme` (light or dark); on a narrow screen (40em, a phone) "
        "each job of `/` is a card of its name, health, last run and next due. A host job's "
        "rows are *NAME*`@`*HOST*; "
        "`?host=`*HOST* on `/`, `/metrics` and `/api/status` keeps that host's rows of host "
        "jobs only, and `/jobs/`*NAME*`?host=`*HOST* (or `/api/jobs/`*NAME*`/history?host=`"
        "*HOST*) is that host's runs of a host job.",
        "`/metrics`: the Prometheus text of `status --format prometheus`, one scrape target for "
        "every host of a shared ledger. `/api/status`: the JSON of `status --json`; "
        f"`/api/jobs/`*NAME*`/history?limit=`*N*: that of `history --json`, *N* from 1 to "
        f"{serve.HISTORY_MAX} (default {serve.HISTORY_LIMIT}; more is refused with 400, not cut "
        "short); older runs with "
        "`&before=`*RUN_ID*, the last `run_id` of an answer, which its `Link: rel=\"next\"` "
        "header gives. The job's page is paged the same way (`?before=`*RUN_ID*, links "
        "*newer* and *older*), so any page reads a few hundred rows, however long the job's "
        "history; the `?page=`*N* links of earlier versions lead to its newest runs. Counts "
        f"and missed slots are over `status`'s default window, {duration_words(serve.SINCE)}. "
        "`/healthz`: 200 when the ledger answers. A ledger that does not answer within "
        f"{duration_words(timedelta(seconds=serve.LEDGER_DEADLINE))}, or cannot be reached, "
        "gives a 503 page that says so; the next request tries again.",
        "Every request needs a token, on loopback too: another user of the host is a client "
        "like any other. With `--token-file` *FILE*, its token (the file must be a regular "
        "file of the user running `serve`, not a symlink, with no permission for group or "
        "others: `chmod 600`); otherwise a token made at start, kept while `serve` runs in "
        "*STATE*`/serve/`*HOST*`-`*PORT*`.token` (a 0700 directory of the user, a 0600 file, "
        "never written through a link; removed when `serve` ends), and printed once in the "
        "line `open http://`*HOST*`:`*PORT*`/?token=`*TOKEN*. A request sends it as "
        "`Authorization: Bearer` *TOKEN* (scripts, `curl -H`, Prometheus), or once as "
        "`?token=`*TOKEN*: the answer is a redirect to the same page without it that sets a "
        "cookie (HttpOnly, SameSite=Strict, Path=/; not Secure, since `serve` speaks plain "
        "HTTP), so a person opens the printed URL in a browser and goes on without the token "
        "in any address. Anything else is answered 401. A token made at start changes at "
        "every start: for a scraper or a proxy, give `--token-file`, and under a service "
        "manager, whose journal keeps what `serve` prints, give it too (its token is never "
        "printed). `--no-auth` serves without a token, only on loopback: it is refused "
        "(exit status 125) for an address or name beyond 127.0.0.0/8 and ::1, and for a name "
        "such as `localhost` that resolves to one (the sockets bound are checked); every page "
        "then says so, and so does `/healthz`.",
        "Read-only: no endpoint writes, and any method but GET and HEAD is answered 405. A "
        "request with a body (`Content-Length` above 0, or chunked) is answered 413 as soon as "
        "its header ends, with or without a token, and the body is never read. An unknown job "
        f"or run is 404. It listens on {commands.default('serve', 'listen')} by default, on "
        "every address *HOST* "
        "resolves to. Idle and slow clients cannot take it: a connection must send a "
        "request's header within 10 seconds of opening or of its last answer (however slowly "
        "it trickles), and a new connection is always accepted while others only wait for "
        "their header: beyond 20 such connections from one address, or 100 in all, the oldest "
        "waiting one is closed, never one being answered. Tokens are compared in constant "
        "time; neither the token nor a database password appears in a page, an error or a "
        "log. Every job name, host, output line and argument is escaped; pages carry a "
        "Content-Security-Policy that allows no script (and forms only to the dashboard "
        "itself: the filter's GET form), and no page loads anything from elsewhere. The HTTP server is waitress, installed with cronwrap.",
        "Under systemd, run it as a service of a user that can read the ledger (for "
        "PostgreSQL, its password in that user's ~/.pgpass), with a token file, restarted on "
        "failure:",
        Example("[Service]\nUser=cronwrap-web\nExecStart=/usr/local/bin/cronwrap serve "
                "--listen 127.0.0.1:8080 --token-file /etc/cronwrap/serve.token "
                "--db postgresql://monitor@db.internal/cronwrap\n"
                "Restart=on-failure\nNoNewPrivileges=yes\nProtectSystem=strict"),
        "Prometheus sends the token from a file: in its `scrape_configs`, `authorization: "
        "{credentials_file: /etc/prometheus/cronwrap.token}` (the file holding the same "
        "token; `bearer_token_file` in Prometheus before 2.26).",
        "Behind a reverse proxy, keep it on loopback and let the proxy do TLS and logins. "
        "Pages link relatively, so a sub-path works when the proxy strips it; a proxy that "
        "decodes an encoded `/` in a job name still reaches its page. The proxy sends the "
        "token. nginx:",
        Example("location /cron/ {\n    proxy_pass http://127.0.0.1:8080/;\n"
                "    proxy_set_header Authorization \"Bearer TOKEN\";\n}"),
    ),
    "explain": (
        "The warnings cover the day-of-month/day-of-week rule (OR when both are restricted, AND "
        "when one starts with `*`), steps that restart every hour, day or month (`*/7` minutes), "
        "fire times that a DST change in the next year skips or repeats and what cron does "
        "then, and a zone other than this host's (the crontab line must fire at the host-clock "
        "time it prints). `--json`: `expression`, `tz`, `next` (ISO 8601 times), `warnings` and "
        "`cron` (the expression with an alias expanded).",
    ),
    "wrap": (
        "Every job line of a user crontab, /etc/crontab or a /etc/cron.d file becomes "
        "*CRON_FIELDS* *CRONWRAP* `run -n` *NAME* `--schedule` *'EXPR'* [*OPTIONS*] `--` "
        "*COMMAND*: the name is derived from the command (made unique with `-2`, `-3`, ...), "
        "`--schedule` carries the line's own expression, and the options given after `--` on "
        "the `wrap` command line (checked as `run` checks them) are added to every line. A "
        "command that needs a shell (pipes, `&&`, `$(...)`, globs) becomes *SHELL* `-c` "
        "*'COMMAND'*, with the crontab's SHELL (default /bin/sh); redirections at the end of "
        "the line stay outside, applied by cron to cronwrap. Environment lines, comments, "
        "blank lines and `%` handling are kept byte for byte. Daemon starters are left alone, "
        "byte for byte: `@reboot` lines and commands that start something in the background "
        "(`&`; `&&` and `>&2` do not count), since cronwrap ends what a job leaves running "
        "when its command exits and would kill the daemon within seconds; with "
        "`--leave-orphans` after `--` (or `CRONWRAP_LEAVE_ORPHANS=1` above the line) they are "
        "wrapped too, `@reboot` lines without `--schedule`. Lines already wrapped are left "
        "alone, so wrapping twice changes nothing. `--unwrap` restores the lines `wrap` wrote to their original text exactly.",
        CRONTAB_INPUT + " The crontab is written out in UTF-8, as it was read, whatever the "
        "locale.",
    ),
    "lint": (
        "One line per finding: *FILE*`:`*LINE*`:`*COLUMN*`:` *SEVERITY*`:` *CODE* *message* "
        "`— fix:` *fix* (`- fix:` where the locale's charset has no dash). " + CRONTAB_INPUT
        + " The codes:",
    ),
    "prune": (
        "Ledger rows finished longer than `--older-than` ago go, except each job's newest "
        "`--keep-last`, running rows (and so abandoned ones), and slots inside the catch-up "
        "window of a job that catches up; then the captured output of the removed runs, and "
        "any captured output and rotated run log in the default log directory older than the "
        "cutoff. The same is done in each job's own log directory (its recorded `--log-dir`, "
        "`CRONWRAP_LOG_DIR`, `log-dir` in the configuration file) when cronwrap would use that "
        "directory itself; there only `NAME/RUN_ID.ATTEMPT.log` and `events.jsonl.N` regular "
        "files are removed, never through a symlink.",
    ),
    "db init": (
        "Prints `ledger ready`. A PostgreSQL schema is created under an advisory lock, so "
        "several hosts may run it at once.",
    ),
}


SLOTS: tuple[Block, ...] = (
    "Every firing claims a slot in the ledger before it runs the job. A slot has a run key, "
    "unique per job, so a slot runs once however many firings claim it.",
    ("without `--schedule`",
     "A firing's slot is the minute it fired in, and its run key that minute in UTC "
     "(`2026-10-28T01:30:00Z`): cron's own granularity, and the rule Kubernetes uses to name a "
     "CronJob's Jobs. Duplicate crontab entries, several hosts, or a person who runs the job "
     "by hand in the minute cron did, run it once."),
    ("with `--schedule` *EXPR*",
     f"*EXPR* is a 5-field cron expression or one of {ALIASES}, read in `--tz` (default: "
     "`CRON_TZ`, then `TZ`, then the system zone, then UTC; a variable naming no zone is an "
     "error, never a silent fallback). A firing belongs to the latest fire time at or before "
     f"its clock (up to {EARLY} early), provided it is at most {TOLERANCE} late, so hosts "
     "firing the same minute a few seconds apart all claim one slot. The run key is the "
     "slot's instant in UTC, or `--key` *TEMPLATE*, strftime(3) of the slot in its zone: "
     "`%Y-%m-%d` runs the job once per local day, whichever of its fire times comes first. A "
     "template without a `%` directive, or one that repeats a year apart, is refused. "
     "`@reboot` is not a schedule (see CATCH-UP for `@reboot` lines). Six fields are refused "
     "(a sixth would be seconds)."),
    ("`--scope fleet`, `--scope host`",
     "A fleet job (the default) has one slot per fire time across every host that shares the "
     "ledger: the same crontab line on many hosts runs once. A host job (`--scope host`: log "
     "cleanup, local backups) has one slot per fire time on each host: every host runs it, and "
     "each host's runs are a job of their own to the ledger, with their own overlap, slots, "
     "catch-up, missed slots, takeover and health, shown as *NAME*`@`*HOST* (*HOST*: "
     "`--host`). `status --host` *HOST* shows only that host's rows of host jobs; `history`, "
     "`logs` and `unlock` read one host's runs of a host job: `--host`, by default this "
     "host's when it has any, else the only host's, else they ask for `--host` (exit 125). "
     "Its Prometheus series carry a `host` label; `status --json` rows carry `scope` and "
     "`host`. A job that changes scope starts a new history."),
    "A firing that matches no slot of `--schedule` (the host's clock is off, the crontab line "
    "fires at another time than *EXPR* in `--tz`, cron reads the crontab in another zone, an "
    "`@reboot` line, a person running the job by hand) is warned about on standard error and "
    "in the run log (`warning`), and falls back to the most recent slot, with trigger "
    "`catchup`, whatever `--catchup` says; only when that slot is older than "
    "`--catchup-window` is it recorded `skipped` (`too_late`) instead. `cronwrap explain` "
    "prints when a schedule fires on this host's clock. Debian's and Ubuntu's cron ignores "
    "`CRON_TZ` (it fires every line in the system zone; cronie honours it): when `CRON_TZ` "
    "gave `--schedule` its zone and the firing is on time for *EXPR* read in the system zone, "
    "the warning names `CRON_TZ` as the likely cause instead of the host's clock, and "
    "`cronwrap lint` warns on such a `CRON_TZ` line (`W012`, see `CRONWRAP_CRON_DAEMON`).",
    "Time zones follow cronie's cron.c. A fixed-time job (neither the minute nor the hour "
    "field starts with `*`) whose time a spring-forward skips runs once, right after the jump; "
    "one whose time a fall-back repeats runs once, at the first occurrence. A wildcard job "
    "follows real time: no runs in the skipped hour, two in the repeated one. `cronwrap explain` "
    "and `cronwrap lint` name the transitions of the next year that touch a schedule.",
    "A slot that has had its run is not run again: a later firing of it is skipped with reason "
    "`duplicate` (a `skip` event in the run log; no new row) and exits with "
    "`--skip-exit-code`. Exceptions: a slot whose run failed, timed out or was killed is claimed "
    "again while its attempts are fewer than `--max-attempts` (see RETRIES); a manual run "
    "claims any slot that has not succeeded (a `warning` counts as done); `--force` runs even "
    "a slot that succeeded. A slot "
    "whose run holds a live lease is never taken, not even with `--force`.",
    "Manual runs: `--date` *YYYY-MM-DD* runs the schedule's first fire time on that day in its "
    "zone, `--at` *TIMESTAMP* the fire time given (ISO 8601; without an offset, in the "
    "schedule's zone; a time that is not a fire time is an error naming the nearest ones). The "
    "run has trigger `manual`, and the job sees the slot's time in `CRONWRAP_SCHEDULED_AT` and "
    "`CRONWRAP_BIZ_DATE`, never the time it started. A manual run does not count as the job's "
    "last seen slot for catch-up, and never changes what the job's firings recorded. A slot "
    "that has not come yet (a year typo such as `--date 2027-01-05`, an `--at` later than now, "
    "a range that reaches past now) is refused with one line and exit status "
    f"{errors.EXIT_CRONWRAP}, since running it now would use up that slot; `--force` runs it. "
    "Its retries (see RETRIES) must end within the schedule's interval counted from when it "
    "began.",
    "Without `--schedule`, a manual run uses the schedule, zone and key template the ledger "
    "recorded when cron fired the job (or the job's `[jobs.`*NAME*`]` table); `--tz` and "
    "`--key` still override them. A job with no recorded schedule needs `--schedule` "
    f"(exit status {errors.EXIT_CRONWRAP}, one line, nothing run).",
    "Ranges: *FROM*`..`*TO* (whole days for `--date`, times for `--at`, both ends included) runs "
    "every slot of the schedule in the range, oldest first, each as its own manual run with its "
    "own run key and row; slots sharing a run key run once. Slots that already succeeded are "
    "skipped and listed (unless `--force`); a slot another host is running is skipped, not "
    "run twice. The range stops at the first slot that does not succeed and exits with that "
    "run's status; `--keep-going` runs the rest and exits with the first failure's status. A "
    "range of more than `--max-slots` slots is refused before anything runs.",
    "`--dry-run` prints what a firing would do — each slot, and whether it would run, run "
    "again, take over an abandoned run, be skipped (and why), or be recorded `missed` or "
    "`skipped` (`too_late`) by catch-up — and claims, runs and writes nothing: the ledger is "
    "read only, no lock is taken, no event logged; it exits with 0.",
)


CATCHUP: tuple[Block, ...] = (
    "With `--schedule`, each firing asks the ledger for the newest scheduled slot it has seen "
    "for the job and the run keys it knows; the slots in between that have no row were missed "
    "(the host was down, cron was stopped, the crontab line was missing). The first firing of "
    "a job never invents a backlog. What happens to them is `--catchup`:",
    ("`none` (the default)", "They are recorded `missed`; only the firing's own slot runs."),
    ("`latest`", "The newest of them runs, the others are recorded `missed`."),
    ("`all`", "They run oldest first, at most `--max-catchup` of them; the rest are recorded "
              "`missed`."),
    "With any policy, missed slots older than `--catchup-window` are recorded `skipped` with "
    "reason `too_late` instead. Catch-up runs come before the firing's own slot, all under the "
    "one local lock, each with its own run key, trigger `catchup` and its original time in "
    "`CRONWRAP_SCHEDULED_AT`. Slots that share a run key (`--key %Y-%m-%d` on an hourly "
    f"schedule) count once. At most {catchup.MAX_MARKS} missed slots are recorded per firing; "
    "older ones are counted in a warning, never recorded. A firing that finds the local lock "
    "busy records only its own slot as `skipped`, and catches up nothing.",
    "Until a firing records them, `status` counts slots that passed without any firing as "
    "late (see MONITORING).",
    "A host that was off: keep the job's real line, and add an `@reboot` line that runs the "
    "same job with the same `--schedule`. Its firing matches no slot, so it runs the most recent "
    "slot (trigger `catchup`) when that slot has no run yet, and is a `duplicate` otherwise; "
    "with `--catchup latest` it also runs the newest older missed slot, with `all` the older "
    "missed slots oldest first. Each boot writes the no-slot warning to standard error, and a "
    "slot run this way leaves the job's health at `warning` (its firing was far from its slot) "
    "until the next regular run.",
    "A slot whose runner died has a row (`abandoned`, once its lease expired): the next firing "
    "of the job with a schedule, on any host, runs it again before its own slot when it is "
    "inside `--catchup-window` (trigger `takeover`, its own `CRONWRAP_SCHEDULED_AT`, attempt + "
    "1, a new fence), whatever `--catchup` says. The delay is at most one schedule interval + "
    "`--lease`; a manual run with `--date` takes it over sooner. Until then the job is "
    "`critical`.",
)


RETRIES: tuple[Block, ...] = (
    "`--retries` *N* runs a slot again, up to *N* more times within the same invocation, when "
    "its run failed or timed out, except with exit status "
    f"{' or '.join(map(str, sorted(retry.CANNOT_RUN)))} (the command cannot run: another "
    "attempt would fail the same way). With `--retry-on` only its statuses are retried, and a "
    f"timeout only when it lists `timeout` (`--retry-on {retry.EX_TEMPFAIL},timeout`: "
    "EX_TEMPFAIL and timeouts). A "
    "run that was killed (by a signal, or `lease_lost`) is never retried. Before each retry "
    "cronwrap sleeps a random time between 0 and `--retry-delay` x 2^(*k*-1) for the *k*th "
    "retry, capped by `--retry-max-delay` (exponential backoff with full jitter), and logs a "
    "`retry` event. A retry that would not end before the schedule's next slot (its delay "
    "plus `--timeout`, or the last attempt's duration) is not made (`retry_skipped`): the next "
    "firing is the better retry. A manual run (`--date`, `--at`) re-runs a slot whose next "
    "slot is long past: its retries must end within the schedule's interval counted from when "
    "its first attempt began, and one that would not is not made, said on standard error and "
    "in the run log (`retry_skipped`). Each attempt claims the slot again, with attempt + 1 "
    "(`CRONWRAP_ATTEMPT`) and a new fence, and keeps its own output file.",
    "`--max-attempts` *N* (default 1 + `--retries`) caps the claims of one slot across "
    "invocations: a later firing of the same slot (a duplicate entry, another host, a person "
    "in the same minute) claims a failed, timed-out or killed run again while it has had fewer "
    "than *N* attempts, whatever its exit status; at *N* it is a `duplicate`. Manual runs are "
    "not capped. The slot's exit status, hooks and finish ping are those of its last attempt.",
)


HOOKS: tuple[Block, ...] = (
    "How a run's end is recorded: an exit status of `--success-exit` (0 always is) is "
    "`succeeded`, one of `--warning-exit` is `warning`, any other is `failed`; a timeout, a "
    "signal or a command that could not be started is never a success, whatever its status. "
    "A run that ends with a success status (after `--success-exit`) in less than "
    "`--min-duration` is recorded `warning` with reason `too_fast` (a `warning` event in the "
    "run log says how long it took); a warning exit stays a warning of its own, and a failure "
    "a failure. "
    "A `warning` is done: it is not retried, catch-up does not run its slot again, a "
    "`--date`/`--at` range goes on past it, and a manual run of its slot needs `--force`. "
    "cronwrap still exits with the job's own status: only the record changes.",
    "`--on-failure`, `--on-success` and `--on-warning` are shell commands, run by `/bin/sh -c` after a slot's "
    "last attempt, in a session of their own with standard input from /dev/null and their "
    "output captured (the end of it is reported on cronwrap's standard error when the hook "
    "fails). A hook gets the "
    "job's environment plus the variables listed under ENVIRONMENT (Seen by hooks), and is "
    "ended after "
    f"`--hook-timeout` (TERM to its process group, KILL {HOOK_KILL} later). A `hook` event "
    "records its exit status and duration; its failure never changes cronwrap's exit status. "
    "A skip runs no hook; each catch-up run has its own.",
    "`--alert-after` *N* (greater than 1) makes `--on-failure` wait for *N* failed slots in a "
    "row (failed, timed out or killed, counted in the ledger; a retried slot counts once): it "
    "runs with `CRONWRAP_ALERT=failing` on the *N*th and every further failure, and once "
    "more, with `CRONWRAP_ALERT=recovered`, on the first success after such a streak, "
    "instead of `--on-success`, so the channel that was alerted hears that it is resolved. "
    "A `warning` runs `--on-warning` (never `--on-failure`), and neither counts in a streak "
    "nor ends one: a job that fails and warns by turns has not recovered.",
    "`--ping` *URL* follows healthchecks.io: *URL*`/start` (GET) when each attempt starts, "
    "then after the slot's last attempt *URL*`/0` on success or *URL*`/`*STATUS* with "
    "cronwrap's exit status (`/fail` when a run that did not succeed has status 0; a "
    "`warning` is done and pings *URL*`/0`, since a ping service knows no warning), POSTing "
    f"the output tail (the last {size_text(runlog.ERROR_TAIL)}). A query string "
    "(`?create=1`) is kept; `user:password@` becomes a Basic authorization header and is "
    "never logged. Every ping carries the run's ID as `rid=`*UUID* (a new UUID for each run, "
    "the same on all of its pings, retries included), so healthchecks.io pairs each start "
    "with its own end when runs overlap; once the server answers with a `Ping-Body-Limit` "
    "header, later pings POST at most that many bytes of the tail. "
    f"Each ping has a {PING_TIMEOUT} timeout and {PING_RETRIES} retries on "
    "connection errors, timeouts and 5xx answers, in a thread of its own; before exiting "
    f"cronwrap waits at most {PING_WAIT} in all for pings still in flight, then gives up and "
    "logs `ping_failed`. A skip pings nothing.",
)


REDACTION: tuple[Block, ...] = (
    "Secrets in a job's output are replaced by `***` before anything of it is kept or sent: "
    "the captured output (so `logs` and `--output on-failure`), the ledger's error tail "
    "(`history`, `status`), hooks' `CRONWRAP_OUTPUT_TAIL` and pings' bodies. The text "
    "around them is kept (`postgresql://app:***@db/x`, `password=***`). Found:",
    ("the job's environment", "the value of every variable of the job's environment "
     "(`--env-file` included) whose name holds "
     + ", ".join(f"`{part}`" for part in redact.SECRET_NAME_PARTS)
     + f", when it is at least {redact.MIN_SECRET} characters long"),
    ("assignments and headers", "passwords in URLs (*scheme*`://`*user*`:`*PASSWORD*`@`, "
     "the password running to the URL's last `@`, as cronwrap's own messages read a URL), "
     "values after `password`, `passwd`, `pwd`, `passphrase`, `secret`, `token`, `api_key`, "
     "`access_key`, `private_key` or `credential` (any case, with `=`, `:`, `=>` or `:=`: "
     "connection strings, JSON, YAML, headers, code; a value in quotes is hidden to its "
     "closing quote, spaces included, any other to the next space, quote, `,`, `;` or `&`), "
     "`Authorization:` values and bearer tokens"),
    ("command lines", "`--password`, `--passwd`, `--pass` or `--passphrase` followed by a "
     "value (after a space or `=`); `-p`*PASSWORD* on the command line of mysql, mariadb and "
     "their tools (mysqldump, mysqladmin...: a command whose name begins with `mysql` or "
     "`mariadb`, the option among its first 12 words; `-p` alone, which makes mysql ask, and "
     "`-P`, the port, are not values); `-u`, `-U`, `--user` or `--proxy-user` *user*`:`"
     "*PASSWORD* on a curl command line, likewise"),
    ("token shapes", "AWS access key IDs (`AKIA`..., `ASIA`...), GitHub (`ghp_`..., "
     "`github_pat_`...), GitLab (`glpat-`...) and Slack (`xoxb-`..., `xapp-`...) tokens, "
     "JWTs, and the body of PEM private key blocks (the BEGIN and END lines are kept)"),
    ("`--redact` *REGEX*", "whatever the operator's patterns match (Python re syntax, "
     "matched against each line of the output's bytes on its own, without its newline: `^` "
     "and `$` are the line's ends, and a match never spans lines; repeatable)"),
    "The built-in patterns take time in proportion to the output, whatever it holds: each "
    "starts with a fixed text and reads a bounded stretch from it. A value is hidden up to "
    f"{redact.MAX_VALUE} characters, a token up to 255, a JWT for its first 7 KiB (enough to "
    f"make it useless); no match is longer than {size_text(redact.CARRY)}.",
    "A `--redact` pattern that could take exponential time on a line it does not match is "
    "refused before anything runs (exit status 125, one line): a repetition (`*`, `+`, "
    "`{m,n}`) that may run more than once and holds an inner repetition that can begin with "
    "what follows it in the round or the next round (`(a+)+`, `(a*)*`, `(x+x+)+y`, "
    "`(\\w+\\s?)+`), or two alternatives that can match the same text (`(a|a)*`, `(a|aa)*`). "
    "`(\\d+,)*`, `([a-z]+\\.)+` and `(a|ab)*c` are fine. The fix is a possessive inner "
    "repetition (`a++`), an atomic group (`(?>...)`), or a pattern where each character can "
    "be matched one way only.",
    "No check finds every slow pattern (`\\s*\\s*\\s*$` is polynomial), so the "
    f"operator's patterns also run under a CPU-time budget: {duration_text(deadline.STEP)} of "
    "CPU for one pattern on one line (cut between that and twice that), after which the rest "
    "of the line, from where the pattern's scan stood, is hidden and marked "
    f"`{redact.OVERRUN_MARK.decode()}`; and {duration_text(deadline.TOTAL)} of CPU for all "
    "the patterns over the whole run, after which the rest of the output is hidden and marked "
    f"`{redact.SPENT_MARK.decode().strip()}`. CPU time, not the wall clock: a busy machine "
    "never hides a line that a quiet one would show.",
    "Each of standard output and error is redacted as a stream: whole lines are kept as they "
    "come, and a partial last line is held back until it ends (once it is "
    f"{size_text(2 * redact.CARRY)} long, all but its last {size_text(redact.CARRY)} are "
    "passed on), so a secret split between two writes is still found whole. Only what is "
    f"kept is redacted: the first {size_text(runlog.HEAD_LIMIT)} as the job writes them and "
    f"the last {size_text(runlog.TAIL_LIMIT)} when it has ended; the part in between, never "
    "kept, costs nothing. At each cut of the capture the bytes beyond it are looked at too, "
    "so a secret that straddles a cut is hidden, and output without secrets is kept exactly.",
    "What passes through to cronwrap's own standard output and error (`--output "
    "passthrough`, the default) is the job's output exactly as it wrote it: cron's mail and "
    "the redirections of the crontab line are unchanged, as without cronwrap. Hooks get the "
    "job's own environment as it is (a hook that posts to a chat needs its token); only what "
    "cronwrap adds to it (`CRONWRAP_OUTPUT_TAIL`) is redacted.",
)


MONITORING: tuple[Block, ...] = (
    "Health, as `status` shows it: `critical` when slots of the schedule passed without any "
    f"firing (more than {LATE_GRACE} ago: late), or when the last run failed, timed out, was "
    "killed or was recorded `missed`, or when a run is `abandoned` (not yet taken over); "
    "`warning` when the "
    "last run was recorded `warning` (the reason, `too_fast`, or the exit status, is shown), "
    "when the job has `--slow-factor` *F* and its last run took more than *F* times the 95th "
    "percentile of the successful runs before it (at least 5 among its last 50: `slow`), "
    "when the job has `--memory-factor` *F* and its last run's peak memory was more than *F* "
    "times the 95th percentile of those runs' peaks (`memory: peak …`), "
    "or when the last run's firing was more than "
    f"{LATE_GRACE} away from its slot (the host's clock, zone or crontab line is off; an "
    "`@reboot` catch-up counts too); `ok` otherwise. Health describes the present: slots "
    "recorded `missed` earlier in the window stay counted (`missed`, *NAME*`_missed`, "
    "`cronwrap_missed_slots`), but once a later run went well the job is `ok` again. A paused "
    "job (`cronwrap pause`) is `ok`, its why \"paused until \u2026\" with the reason, and none "
    "of its slots is late.",
    "`status --check` is a Nagios/Icinga plugin: it prints one line, *CRONWRAP* *STATE* `-` "
    "*counts*`:` *reasons* `|` *perfdata*, and exits "
    f"{errors.CHECK_OK} OK, {errors.CHECK_WARNING} WARNING, {errors.CHECK_CRITICAL} CRITICAL "
    f"or {errors.CHECK_UNKNOWN} UNKNOWN (no job matches). A job is CRITICAL when its last run "
    "failed, timed out, was killed or missed, when it has late slots or an abandoned run, or "
    "when it has "
    "not succeeded within `--max-age` (a `warning` is not a success: a job that has only "
    "warned for longer than that is CRITICAL); WARNING when a run has been running longer than "
    "`--warn-duration`, or longer than the 95th percentile of its recent successful "
    "durations (when it has 5 or more among its last 50), or when `status` says `warning`. A "
    "paused job is OK whatever its last run or `--max-age`, named in the line with its pause. The "
    "perfdata has, per job, *NAME*`_duration`, *NAME*`_missed` and *NAME*`_since_success`. "
    "An invalid option or an unreadable ledger exits "
    f"{errors.EXIT_CRONWRAP}, as every command does, not {errors.CHECK_UNKNOWN}.",
    "`status --format prometheus` prints the Prometheus text format. Every series names "
    f"its job with the label `{monitor.LABEL}`, never `job`, which Prometheus gives the scrape "
    "target (a scraped `job` label becomes `exported_job`). Gauges: "
    + ", ".join(f"`{name}`" for name, kind, _ in monitor.FAMILIES if kind == monitor.GAUGE)
    + " (`cronwrap_runs_in_window` counts the runs in the `--since` window, by `status`, and "
    f"goes down as they leave it). The counter `{monitor.RUNS_TOTAL}` (by `status`) counts "
    "every end the ledger records for the job: each finished attempt (a retried slot counts "
    "each attempt), skip and missed slot, counted by the ledger as it writes them, whichever "
    "host and release writes them. Nothing takes from it (`prune`, a retry or a takeover "
    "rewriting a row), so `increase()` and `rate()` hold over any range; every status is there "
    "from 0; it counts from the first time a cronwrap of this release writes to the ledger. "
    f"The histogram `{monitor.DURATION_HISTOGRAM}` has the duration of each attempt that ran, "
    "counted the same way, in buckets (`le`, seconds) of "
    + ", ".join(f"{b:g}" for b in DURATION_BUCKETS) + " and `+Inf`. "
    "`--textfile` *FILE* writes the same to *FILE* atomically (a temporary file in its "
    "directory, then a rename), mode "
    f"{monitor.TEXTFILE_MODE:04o}, for the node_exporter textfile collector; it refuses a "
    "symlink. Run it from cron every minute.",
)
