"""Prose of cronwrap(1) about what a job leaves behind: ledger, locks, files, exit statuses,
the variables a job and a hook see, and the examples.
"""

from __future__ import annotations

from cronwrap import errors, model
from cronwrap.crontab.daemon import DAEMON_MEANINGS, DAEMON_VARIABLE
from cronwrap.model import FORMAT_VERSION, STATUS_MEANINGS, Status
from cronwrap.options import config
from cronwrap.process import locks
from cronwrap.run import attempt, runlog, tables
from cronwrap.schedule import table
from cronwrap.schedule.zones import ZONE_VARIABLES

from tools.docs.facts import (
    Block, ETC_CONFIG, Example, HOME_DIRS, LEDGER_FILE, ORPHAN_GRACE, OUTPUT_FILE, ROOT_DIRS,
    SKIP_EXIT, UNRECORDED_FILE, USER_CONFIG, USER_DIRS, XDG_CONFIG, XDG_DIRS, duration_text,
    every_one_said, placeholders, sentence, size_text)


STATUSES = every_one_said(Status, STATUS_MEANINGS)


ENVIRONMENT_READ: tuple[Block, ...] = (
    ("`CRONWRAP_HOME`", "When set, the ledger, the logs and the locks all live under it "
                        "(see FILES)."),
    ("`CRONWRAP_DB`", "Ledger URL, as `--db`; also read by the administrative commands."),
    ("`CRONWRAP_CONFIG`", "The configuration file `run` reads, instead of the ones searched "
                          "by default; it must exist. Empty: unset; /dev/null: no "
                          "configuration file. See cronwrap.toml(5)."),
    ("`CRONWRAP_HOST`", "Host identity written to the ledger, as `--host` (default: the "
                        "hostname)."),
    (", ".join(f"`{name}`" for name in ZONE_VARIABLES),
     "The default zone of `--schedule` and of `explain`, in this order. Without `--schedule`, "
     "`TZ` (or the system zone) is the zone of `CRONWRAP_SCHEDULED_AT` and "
     "`CRONWRAP_BIZ_DATE`."),
    (f"`{DAEMON_VARIABLE}`",
     "Which cron daemon runs this host's crontabs, for `lint` (`W012`, `I002`): "
     + "; ".join(f"`{name}`, {meaning}" for name, (meaning, _) in DAEMON_MEANINGS.items())
     + ". Unset, `lint` tells from dpkg's record of the `cron` package (Debian's cron), else "
     "from a `crond` program that is not busybox's (cronie), and otherwise does not know. "
     "A name not in this list is exit 125."),
    ("`HOME`, `XDG_STATE_HOME`, `XDG_CONFIG_HOME`",
     "Where the ledger, logs, locks and the user's configuration file are when "
     "`CRONWRAP_HOME` and `CRONWRAP_CONFIG` are not set (see FILES)."),
    ("`PGPASSWORD`, `PGPASSFILE` and the other libpq variables",
     "Read by the PostgreSQL driver for what a `postgresql://` URL does not say, so the "
     "password can stay out of crontab lines. PGSERVICE, PGSERVICEFILE and PGSYSCONFDIR name "
     "a service and where its file is, as for psql."),
    ("`LC_ALL`, `LC_CTYPE`, `LANG`",
     "The charset of what cronwrap writes for a person. Every command works in every locale: "
     "in one whose charset is not UTF-8 (ISO-8859-1, or `LC_ALL=C` with `PYTHONUTF8=0`), what "
     "the charset lacks is written in ASCII (see `history`). What a program reads stays exact "
     "and UTF-8: `wrap`'s crontab, `--json`, `--format prometheus`, `--check`; `logs` copies the "
     "job's own bytes. A job "
     "name typed in such a terminal names the same job (under `LC_ALL=C` its bytes are read "
     "as UTF-8), and the job sees it in `CRONWRAP_JOB` in the locale's charset, as UTF-8 "
     "where that charset lacks it."),
    ("`CRONWRAP_DEBUG`", "When set to a non-empty value, an internal error prints its "
                         "traceback."),
    ("`CRONWRAP_FAILPOINT`", "A testing aid of the test suite, never for production: set to "
                             "*PHASE* (`before_claim`, `after_claim`, `after_spawn`, "
                             "`after_exit`), it makes the wrapper stop itself with SIGSTOP at "
                             "that phase."),
)


EXIT_STATUS: tuple[Block, ...] = (
    "`cronwrap run` exits with:",
    ("the command's own status", "when the job ran and exited (also with `--preserve-status` "
                                 "after a timeout)."),
    (f"`{errors.EXIT_TIMEOUT}`", "The job timed out and ended after the first signal."),
    (f"`{errors.EXIT_KILLED}`", "The job timed out and needed KILL (128+9, as timeout(1))."),
    (f"`{errors.EXIT_CRONWRAP}`", "cronwrap's own failure: an invalid option, value or "
                                  "configuration file, an unsafe path, a ledger that cannot be "
                                  "reached under `--on-db-error fail`."),
    (f"`{errors.EXIT_NOT_EXECUTABLE}`", "The command was found but could not be executed."),
    (f"`{errors.EXIT_NOT_FOUND}`", "The command was not found."),
    (f"`{errors.EXIT_SIGNAL_BASE}`+*N*", "The job was ended by signal *N*."),
    (f"`{errors.EXIT_SUPERSEDED}`", "The run's lease was lost: another host took its slot "
                                    "over, and that run's record stands. The job was ended "
                                    "(`killed`, `lease_lost`), or ran to its end while this "
                                    "wrapper was stopped; its end is kept among the slot's "
                                    "attempts (`history`) and in the run log."),
    (f"`--skip-exit-code` (default {SKIP_EXIT})",
     "Nothing ran: the job is running, or its slot is already claimed or done."),
    "When one firing runs several slots (catch-up), it exits with the status of the first run "
    "that did not exit 0, otherwise with the last run's; a retried slot counts with its last "
    "attempt. Once the job has run, a failure to record its end never changes the status.",
    "`--success-exit` and `--warning-exit` change only what is recorded (`succeeded`, "
    "`warning`), never this status: cron's view of the line stays the command's own.",
    "The ledger records the same number: a run's `exit_code` (in `history`, `status`, their "
    "`--json`, the run log, Prometheus and `--check`) is the status cronwrap returned for it, "
    f"{errors.EXIT_TIMEOUT} or {errors.EXIT_KILLED} for a timeout (the job's own with "
    "`--preserve-status`) and 128+*N* for a signal; `signal` and `timed_out` are kept beside "
    "it.",
    "The administrative commands exit with 0, or with "
    f"{errors.EXIT_CRONWRAP} on an invalid option or argument, an unusable ledger or an unsafe "
    "path; `cronwrap lint` exits with 1 when it found an error.",
)


CHECK_STATUS: tuple[Block, ...] = (
    f"`cronwrap status --check` exits with {errors.CHECK_OK} (OK), {errors.CHECK_WARNING} "
    f"(WARNING), {errors.CHECK_CRITICAL} (CRITICAL) or {errors.CHECK_UNKNOWN} (UNKNOWN), the "
    "Nagios plugin convention (see MONITORING).",
)


FILES_LAYOUT: tuple[Block, ...] = (
    ("`CRONWRAP_HOME` set", f"The ledger is `{HOME_DIRS.ledger_file}`, the logs are in "
                            f"`{HOME_DIRS.logs}/`, the locks in `{HOME_DIRS.locks}/`."),
    ("root", f"`{ROOT_DIRS.ledger_file}`, `{ROOT_DIRS.logs}/`, `{ROOT_DIRS.locks}/`."),
    ("other users",
     f"`{USER_DIRS.ledger_file}` (`{XDG_DIRS.ledger_file}` when `XDG_STATE_HOME` is set), "
     f"`{USER_DIRS.logs}/`, and `{USER_DIRS.locks}/` for the locks: not `$XDG_RUNTIME_DIR`, "
     "which cron does not set, so that a job run by hand locks where cron's firing does."),
    "Below, *STATE*, *LOGS* and *LOCKS* stand for these three; `--log-dir` replaces *LOGS* and "
    "`--lock-file` a job's lock file.",
)


FILES_ENTRIES: tuple[Block, ...] = (
    (f"`$CRONWRAP_CONFIG`, `{USER_CONFIG}`, `{ETC_CONFIG}`",
     f"The configuration file `run` reads, the first that exists (`{XDG_CONFIG}` when "
     "`XDG_CONFIG_HOME` is set); see cronwrap.toml(5)."),
    (placeholders(f"STATE/{LEDGER_FILE}"), "The embedded SQLite ledger (WAL mode), unless `--db` "
                                           "names another."),
    (placeholders(f"LOGS/{runlog.EVENTS_FILE}"),
     "The structured run log: one JSON object per line, each written with a single O_APPEND "
     "write, with the fields " + ", ".join(f"`{f}`" for f in runlog.EVENT_FIELDS) + " (those "
     "that apply to its event, listed below), and some of each event's own. `format` is the "
     f"version of cronwrap's machine formats ({FORMAT_VERSION}; the rows of `status --json`, "
     "`history --json` and `/api/*` carry it too; cronwrap/schemas/ holds their JSON "
     "Schemas); `level` is `info`, `warning` or `error` (a finish takes its run's: error when "
     "it failed), and `msg` the event in a few words. Once larger than "
     f"{size_text(runlog.EVENTS_MAX_BYTES)} it is rotated to `{runlog.EVENTS_FILE}.1` ... "
     f"`{runlog.EVENTS_FILE}.{runlog.EVENTS_KEEP_FILES}`; rotated files older than "
     "`--keep-logs` are removed."),
    (placeholders(str(OUTPUT_FILE)),
     "The captured output (standard output and error, as they came) of one attempt at a run, "
     f"bounded: the first {size_text(runlog.HEAD_LIMIT)}, a line saying how many bytes were "
     f"omitted, then the last {size_text(runlog.TAIL_LIMIT)}, so a runaway job fills neither "
     f"the disk nor the wrapper's memory. Its last {size_text(runlog.ERROR_TAIL)} also go into "
     "the ledger row, which `history` shows for the latest failed run. A job's files older "
     "than `--keep-logs` are removed after its runs: its directory is looked through once "
     f"its oldest file is {round((runlog.TIDY_LATE - 1) * 100)}% past `--keep-logs` (within "
     "7.2 hours under 30d), not at every firing, and `.oldest` in it carries that file's "
     "date."),
    (placeholders("STATE/outbox/"),
     "Results that could not be recorded, one JSON file per run, waiting for the next "
     "invocation on this host to deliver them (see LEDGER). An entry names its ledger by a "
     "hash of the URL, never the URL itself."),
    (placeholders(f"STATE/{config.CACHE_FILE}"),
     "What the last config file a firing read holds, as parsed, with that file's text: the "
     "next firing of the same text reads it instead of parsing the file again (a changed "
     "file is parsed again; its values are checked every time). Safe to remove."),
    (placeholders(f"STATE/{tables.FOLDER}/NAME"),
     "The job's slot table: the fire times of its `--schedule` around its last firing (the "
     "two slots at or before it and a day of slots after it, at least "
     f"{table.MIN_AHEAD}), with each one's UTC offset and zone abbreviation, as the schedule "
     "engine computed them. The job's next firings read their slots from it instead of "
     "loading the engine (cronsim and zoneinfo: about a third of a firing's start), and a "
     "firing whose question leaves it loads the engine and keeps a new one. A table is used "
     "only with the expression, `--tz`, `CRON_TZ`, `TZ`, system zone and `PYTHONTZPATH` it "
     "was made with, and while the zone's file in the tz database, cronsim and cronwrap are "
     "the files that made it (an updated tzdata is read at the next firing). A manual run "
     "reads and keeps none. Safe to remove."),
    (placeholders("STATE/serve/HOST-PORT.token"),
     "The token `serve` made at start (when not given `--token-file`), for its user to read "
     "while it runs: a new 0600 file, never written through a link, removed when `serve` "
     "ends."),
    (placeholders("LOCKS/NAME.lock"),
     "The job's lock file (see LOCKING), only ever locked, never written. It stays when the "
     "lock is released: removing a flock file races with a new holder."),
    (placeholders(f"LOCKS/{locks.HOLDERS}/DEV-INODE"),
     "Who holds a lock file (device and inode of the file): the PID and start time of the "
     "wrapper and of the job, the boot ID and the PID namespace. cronwrap's own record, "
     "rewritten whole by each holder."),
    "Directories cronwrap creates are mode 0700 and must belong to the user running it and not "
    "be writable by group or others; files are created 0600 and opened with O_NOFOLLOW and "
    "O_NONBLOCK, and a symlink, a file owned by another user, a world-writable file or "
    "anything but a regular file (a FIFO, which would block the wrapper) is refused. A file "
    "cronwrap writes (the ledger and SQLite's -wal, -shm and -journal next to it, the run log, "
    "captured output, outbox entries) must have one name: one with other hard links is "
    "refused, as a write would go through to the other name. The "
    "parent of an explicit `--lock-file` or `sqlite:///` path may be shared only if it is "
    "sticky, like /tmp. `status`, `history` and `logs` open the SQLite ledger read-only, so "
    "they work on a full or read-only file system. An outbox entry that cannot be read back "
    "as a result is moved to *STATE*`/outbox/bad/`, said once, and never stops a job.",
)


RUN_LOG_EVENTS = [(str(event), sentence(meaning))
                  for event, meaning in every_one_said(model.Event, model.EVENT_MEANINGS)]


LOCKING: tuple[Block, ...] = (
    "Before it claims its slot, `cronwrap run` takes a local lock on *LOCKS*`/`*NAME*`.lock` "
    "(or `--lock-file`), so two firings of a job on one host never both run it. The lock file "
    "is opened read-only and only ever locked: cronwrap never writes or truncates it, so it "
    "may be the job's own script (the `flock -n \"$0\"` habit) or any file; one with other "
    "hard links, or that is not a regular file, is refused. Who holds it is kept in "
    "cronwrap's own record, " + placeholders(f"LOCKS/{locks.HOLDERS}/") + ": the PID of the "
    "wrapper and of the job's main process, each with its start time (so that a PID reused by "
    "another process is never taken for the holder), the boot ID and the PID namespace. "
    "`--lock none` and `--overlap allow` take no local lock.",
    ("`--lock flock` (the default)",
     "A kernel lock (flock(2)), held for as long as any process of the job lives. cronwrap "
     "hands the locked descriptor to the job, as flock(1) does, and the kernel releases the "
     "lock only when the last process holding it is gone. If the wrapper itself is killed "
     "(SIGKILL, the OOM killer), the job's keeper (the process that supervises it) sends "
     "`--signal` and CONT to every process of the job's tree, and KILL after `--kill-after` "
     f"({ORPHAN_GRACE} when that is 0) to every one of them still alive, even one that has "
     "left the session since: a job never outlives a wrapper "
     "that can no longer enforce its timeout or renew its lease (GNU timeout uses "
     "PR_SET_PDEATHSIG, which reaches only the direct child). Until then the survivors keep "
     "the inherited descriptor, so the next firing skips. The job's standard output and error "
     "have no reader any more: its next write there fails (SIGPIPE). Descendants left "
     "running with `--leave-orphans` keep the lock until they exit or close the descriptor."),
    ("`--lock pid`",
     "The holder record is the lock, read and written under a brief flock of the lock file so "
     "that two firings never both take it. Its holder is alive while the wrapper or the job's "
     "main process lives with the recorded start time. A lock whose processes are dead, whose "
     "PID now belongs to another process (the start time differs), or that was taken before "
     "the last boot, is stale: it is taken over and a `stale_lock` event is logged. A holder "
     "in another PID namespace cannot be checked from here and is treated as alive. The "
     "descriptor is not handed to the job."),
    ("`--lock none`", "No local lock: only the ledger keeps firings apart."),
    "While another run of the job is live, `--overlap` decides:",
    ("`skip` (the default)",
     "The firing records a `skipped` run with reason `overlap` (for the same slot it reports a "
     "`duplicate` instead) and exits with `--skip-exit-code`."),
    ("`wait`",
     "The firing waits for the lock, and for live runs of the job in the ledger, up to "
     "`--wait-timeout` (0: forever, unlike `flock -w 0`, which does not wait: that is "
     "`--overlap skip`), then claims its slot; when it gives up it skips as above. A firing of the same slot as the run it waited for finds that slot done and "
     "skips as a `duplicate`."),
    ("`replace`",
     "The firing sends `--signal` to the wrapper that holds the lock on this host, which "
     "forwards it to its job and records the run as `killed`; after `--kill-after` (10 s when "
     "that is 0) it sends KILL to that wrapper and to its job's process group; then it takes "
     "the lock and claims its slot. A run on another host is not replaced: the firing skips. "
     "Replacing a run of the same slot ends it and runs that slot again."),
    ("`allow`",
     "No local lock and no overlap check. Each firing still needs its own slot, so a second "
     "firing of the same slot is a `duplicate`."),
    "`--jitter` sleeps before the ledger is opened and the lock taken (a sleeping firing holds "
    "no connection); the firing's slot is the one it fired for.",
)


LEDGER: tuple[Block, ...] = (
    "The ledger holds one row per slot of a job that ran or was recorded. The embedded SQLite "
    "ledger serves one host. For several hosts carrying the same crontab, give them one "
    "PostgreSQL ledger: `--db postgresql://`*USER*`@`*HOST*`/`*DATABASE* (or `CRONWRAP_DB`, or "
    "`db` in the configuration file). Any libpq connection string works too: *keyword*`=`*value* "
    "pairs separated by blanks, a value holding blanks in single quotes (`host=/run/postgresql "
    "dbname=cronwrap options='-c search_path=cronwrap'`), or `service=`*NAME* for a section of "
    "pg_service.conf. cronwrap adds its session settings (statement_timeout, "
    "idle_in_transaction_session_timeout, TimeZone=UTC, TCP keepalives, connect_timeout, "
    "application_name cronwrap) only where the connection string, its service or a PG* "
    "variable sets none; the operator's own `options` come after cronwrap's, so their `-c` "
    "settings win. Its schema is created on first use under an advisory lock, "
    "or by `cronwrap db init`. The password never appears in output, logs or errors (it is "
    "shown as `***`); PGPASSWORD or a ~/.pgpass file keep it out of crontab lines.",
    "Upgrading cronwrap keeps every recorded run: the ledger's schema is numbered (SQLite "
    "`PRAGMA user_version`, PostgreSQL `cronwrap_meta.schema_version`), and the first "
    "`cronwrap run` or `cronwrap db init` of a newer release applies the missing migrations in "
    "one transaction (on PostgreSQL under the advisory lock). `status`, `history` and `logs` "
    "never migrate: they read an older or a newer ledger as it is. A ledger written by a newer "
    "release is refused by `run` and `db init` with one line and exit status "
    f"{errors.EXIT_CRONWRAP}; nothing runs and nothing is written. Hosts sharing a PostgreSQL "
    "ledger should be upgraded together: once one has migrated it, the others refuse it until "
    "they are upgraded.",
    "A claim is one transaction: it locks the job's row, skips when another slot of the job "
    "holds a live lease (unless `--overlap allow`), inserts the slot's row if it is new, and "
    "takes it "
    "if it is new or claimable, with `locked_until` = now + `--lease` by the database's clock, "
    "attempt + 1 and the job's next fence value. The wrapper renews the lease every lease/3 "
    "while the job runs. Every later update of the row (renewal, finish, outbox delivery) "
    "must match the claim: its id, fence, job, run key and claimer (host, PID and start "
    "time), so a wrapper whose slot was taken over, or whose ledger was recreated or "
    "restored under it, cannot touch another run's record. A connection the server ended "
    "before the claim (idle_session_timeout, a restart) is opened again once and the read "
    "retried.",
    "A run's status is one of:",
    *((f"`{status}`", meaning) for status, meaning in STATUSES),
    "A firing of the same runner (same host name, boot ID and PID namespace) claims an "
    "abandoned row at once when its wrapper process is gone (PID and start time no longer "
    "match), without waiting for the lease; any other firing, such as a container that shares "
    "the host name, waits for the lease to expire. `cronwrap unlock` *NAME* expires the "
    "leases of a job's running rows, for an operator who knows the holder is dead.",
    "On PostgreSQL a claim is one call of the server-side function "
    "`cronwrap_claim_unless_paused` (which answers a paused job's firing itself and leaves "
    "every other to `cronwrap_claim`, the function older releases call; both created again "
    "by every migration and by `cronwrap db init`), one round trip; a renewal and a "
    "finish are one statement "
    "each. Once the job is claimed the wrapper closes its connection: each renewal and the "
    "finish connect for their own statement, so a running job holds no server connection. "
    "A connection that fails because the server or a pooler is full, starting up, shutting "
    "down, refusing or resetting is tried again with full-jitter exponential backoff for up "
    "to `--db-wait`, then `--on-db-error` applies; a wrong password or an unknown database "
    "fails at once. A renewal waits until the next one is due, a finish up to "
    f"{duration_text(attempt.FINISH_DB_WAIT)} before the outbox.",
    "PgBouncer in transaction pooling mode, with its default settings, works: cronwrap sends "
    "no `options` startup parameter (its session settings are set inside each transaction "
    "with set_config(..., true)), keeps no session state between transactions and uses no "
    "server-side prepared statement; point `--db` at PgBouncer's port.",
    "Takeover: the next claim of an abandoned slot, from any host, takes it with attempt + 1 "
    "and a larger fence. A holder that was only paused (a stopped VM, a network partition) "
    "finds its lease lost at its next renewal, or by its own clock once a whole lease passed "
    "without one; it ends its job and records nothing over the new runner: its attempt's "
    "end is kept among the slot's attempts (`history`), beside the new runner's. So a slot may run "
    "twice, the first time partially: a job should be idempotent, keyed by "
    "`CRONWRAP_RUN_KEY`, and may reject writes that carry a fence smaller than one it has "
    "seen (`CRONWRAP_FENCE`).",
    "Once the job has run, a failure to record its end never changes cronwrap's exit status: "
    f"the record is tried {attempt.FINISH_RETRIES} times, then spooled to *STATE*`/outbox/`, "
    "and every later invocation on this host delivers what waits there before it claims "
    "anything (a `spooled` and an `outbox_delivered` event). The delivery must match the claim "
    "like any update, so a slot taken over in the meantime keeps its new runner's record. A "
    "result that can be neither recorded nor spooled (a full disk) is said on standard error "
    "and in an `unrecorded` event; the exit status is still the job's.",
    "A ledger that cannot be reached before the run is cronwrap's own failure (exit status "
    f"{errors.EXIT_CRONWRAP}, nothing runs) under `--on-db-error fail`, the default: no run "
    "without a claim. Under `--on-db-error run-unrecorded` the job runs under the local lock "
    "only, as run 0 with fence 0, a `ledger_unreachable` event is logged, and its output goes "
    "to " + placeholders(str(UNRECORDED_FILE)) + ".",
)


EXAMPLES: tuple[Block, ...] = (
    "A crontab line before and after (use the full path: cron's PATH is short). A crontab "
    "line cannot be continued with a backslash; a long line is fine, or the settings go into "
    "cronwrap.toml(5):",
    Example("# before\n"
            "30 1 * * * /usr/local/bin/settle.sh >> /var/log/settle.log 2>&1\n"
            "# after\n"
            "30 1 * * * /usr/local/bin/cronwrap run -n settle --schedule '30 1 * * *' "
            "--tz Asia/Shanghai --timeout 25m --kill-after 30s --catchup latest "
            "--catchup-window 6h -- /usr/local/bin/settle.sh >> /var/log/settle.log 2>&1"),
    "The same job on a host that may have been off, caught up at boot:",
    Example("@reboot /usr/local/bin/cronwrap run -n settle --schedule '30 1 * * *' "
            "--tz Asia/Shanghai --catchup latest --catchup-window 6h -- /usr/local/bin/settle.sh"),
    "A pipeline needs a shell; mail only when it fails:",
    Example("0 * * * * /usr/local/bin/cronwrap run -n sync --timeout 50m --output on-failure "
            "-- sh -c 'rsync -a /srv/src/ /srv/dst/'"),
    "Three hosts, one run per slot:",
    Example("30 1 * * * CRONWRAP_DB=postgresql://cronwrap@db.internal/cronwrap "
            "/usr/local/bin/cronwrap run -n settle --schedule '30 1 * * *' -- "
            "/usr/local/bin/settle.sh"),
    "Is it running, did it run, how long did it take; then the runs of one job:",
    Example("cronwrap status\ncronwrap status settle --since 30d"),
    "Why did it fail:",
    Example("cronwrap logs settle --last\ncronwrap history settle --limit 5"),
    "The status and exit code of the last run, for a script:",
    Example("cronwrap history settle --limit 1 --json | jq -r '.[0] | \"\\(.status) "
            "\\(.exit_code)\"'"),
    "Run the slot of 28 October again by hand (it runs if that slot did not succeed; "
    "`--force` runs it anyway):",
    Example("cronwrap run -n settle --schedule '30 1 * * *' --tz Asia/Shanghai "
            "--date 2026-10-28 -- /usr/local/bin/settle.sh"),
    "When does a schedule fire, and what should I know about it:",
    Example("cronwrap explain '30 2 * * *' --tz Europe/Berlin --count 3"),
    "Retry a flaky download, alert after two failed nights, ping healthchecks.io:",
    Example("0 3 * * * /usr/local/bin/cronwrap run -n rates --schedule '0 3 * * *' "
            "--retries 3 --retry-delay 30s --retry-on 75,timeout --timeout 10m --alert-after 2 "
            "--on-failure '/usr/local/bin/notify \"$CRONWRAP_JOB: $CRONWRAP_STATUS\"' "
            "--ping https://hc-ping.com/YOUR-UUID -- /usr/local/bin/fetch-rates.sh"),
    "Monitoring: a Nagios/Icinga check, and Prometheus metrics every minute:",
    Example("cronwrap status --check --max-age 26h settle\n"
            "* * * * * /usr/local/bin/cronwrap status --textfile "
            "/var/lib/prometheus/node-exporter/cronwrap.prom"),
    "Wrap a crontab, look at the change, install it; undo it:",
    Example("crontab -l | cronwrap wrap - -- --timeout 1h > /tmp/new.crontab\n"
            "crontab -l | cronwrap wrap --diff - -- --timeout 1h\n"
            "crontab /tmp/new.crontab\n"
            "crontab -l | cronwrap wrap --unwrap - | crontab -"),
    "Find the classic mistakes of a system crontab:",
    Example("cronwrap lint /etc/crontab"),
    "Keep 90 days of history, and at least the last 20 runs of each job:",
    Example("cronwrap prune --older-than 90d --keep-last 20"),
)
