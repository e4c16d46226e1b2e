"""Prose of cronwrap.toml(5): the configuration file's format, keys and validation.
"""

from __future__ import annotations

from cronwrap import errors
from cronwrap.options import config, spec

from tools.docs.facts import (
    Block, ETC_CONFIG, Example, USER_CONFIG, XDG_CONFIG, choices, size_text)


NOT_KEYS = tuple(config.NOT_KEYS)  # run options that are not config keys


VALUE_SYNTAX = {
    spec.job_name: "a job name",
    spec.host_name: "a string: printable, no blanks, at most 255 characters",
    spec.duration: "a duration (`\"30s\"`, `\"1.5m\"`, `\"2h\"`, `\"1d\"`, or a number of "
                   "seconds)",
    spec.window: "a duration with its unit (`\"6h\"`, `\"30d\"`; a bare number other than 0 "
                 "is refused)",
    spec.positive_duration: "a duration of at least 1 s",
    spec.time_limit: "a duration, as for `timeout`; 0, or one over ten years (`1e400`, "
                     "`\"inf\"`), means none",
    spec.signal_number: "a signal name or number: `\"TERM\"`, `\"SIGINT\"`, `9`",
    spec.exit_code: "an exit status, 0 to 255 (a number, or a string holding one)",
    spec.path: "a string: an absolute path, or one starting with `~/`",
    spec.absolute_path: "a string: an absolute path, or one starting with `~/`",
    spec.ledger_url: "a string: `\"sqlite:///PATH\"`, `\"postgresql://...\"` or libpq "
                     "`keyword=value` pairs (`\"service=cronwrap\"`)",
    spec.text_value: "a string",
    spec.count: "a whole number, 0 or more",
    spec.retry_codes: "a string of exit statuses (1 to 255), ranges and the word `timeout`, "
                      "separated by commas: `\"75,timeout\"`, `\"64-78\"`; a single status may "
                      "be a number",
    spec.exit_codes: "a string of exit statuses (0 to 255) and ranges, separated by commas: "
                     "`\"0,24\"`, `\"1-3\"`; a single status may be a number",
    spec.factor: "a number of at least 1: `3`, `1.5`",
    spec.size: "a size: `\"512M\"`, `\"1.5G\"`, `\"800K\"` (binary units), or a number of "
               "bytes; 0 means none",
    spec.redact_patterns: "a string, or an array of strings: each a regular expression "
                          "(Python re syntax), `[\"ACME-[0-9]{6}\", \"internal-[a-z]+\"]`",
    spec.command_text: "a string",
    spec.ping_url: "a string",
    spec.flag: "`true` or `false` (the strings `\"yes\"`, `\"no\"`, `\"on\"`, `\"off\"`, "
               "`\"1\"` and `\"0\"` are accepted too)",
}


# Options whose value is a string with a meaning of its own (text_value): say which.
TEXT_SYNTAX = {
    "schedule": "a string: a 5-field cron expression or an alias, `\"30 1 * * *\"`, "
                "`\"@daily\"`",
    "tz": "a string: a zone name, `\"Asia/Shanghai\"`",
    "key": "a string: a strftime(3) template, `\"%Y-%m-%d\"`",
    "date": "a string: `\"YYYY-MM-DD\"`",
    "at": "a string: an ISO 8601 time, `\"2026-10-28T01:30\"`",
}


def value_syntax(opt: spec.Option) -> str:
    if choices(opt):
        return "one of the strings " + ", ".join(f"`\"{c}\"`" for c in choices(opt))
    if opt.parse is spec.text_value and opt.name in TEXT_SYNTAX:
        return TEXT_SYNTAX[opt.name]
    if opt.parse not in VALUE_SYNTAX:
        raise KeyError(f"--{opt.name}: VALUE_SYNTAX does not say how its value is written")
    return VALUE_SYNTAX[opt.parse]


def config_key(opt: spec.Option) -> str:
    """``kill-after`` (also ``kill_after``)."""
    return f"`{opt.name}`" + (f" (or `{opt.attr}`)" if opt.attr != opt.name else "")


TOML_DESCRIPTION: tuple[Block, ...] = (
    "`cronwrap run` reads its settings from the command line, from the environment "
    "(`CRONWRAP_`*OPTION*, e.g. `CRONWRAP_TIMEOUT`) and from one TOML file. The file sets "
    "defaults for every job in its "
    "`[defaults]` table and for one job in its `[jobs.`*NAME*`]` table, so that crontab lines "
    "stay short. Only `cronwrap run` reads it; the administrative commands (`status`, "
    "`history`, ...) take their ledger from `--db` or `CRONWRAP_DB`.",
    "Precedence, highest first: the command line, the environment, the job's "
    "`[jobs.`*NAME*`]` table, the `[defaults]` table, the built-in default. The environment "
    "sits above the file, so a variable set on a crontab line overrides a shared file. The job "
    "is found by its name: `-n`, else `CRONWRAP_NAME`, else the command's basename without "
    "extension.",
)


TOML_FILES: tuple[Block, ...] = (
    "cronwrap reads the first of these that exists, and only that one (files are not merged):",
    ("`$CRONWRAP_CONFIG`", "When set and not empty. It must exist; `CRONWRAP_CONFIG=/dev/null` "
                           "means no file at all."),
    (f"`{USER_CONFIG}`", f"The user's file; `{XDG_CONFIG}` when `XDG_CONFIG_HOME` is set to an "
                         "absolute path."),
    (f"`{ETC_CONFIG}`", "The system's file, for every user."),
    "The file must be a regular file that belongs to the user running cronwrap or to root, "
    "and must not be writable by group or others (it names shell commands that cronwrap runs: "
    "hooks). Otherwise every `cronwrap run` fails with exit status "
    f"{errors.EXIT_CRONWRAP} and says why. A file that holds a database password should be "
    "mode 0600; PGPASSWORD or ~/.pgpass keep the password out of it.",
)


TOML_FORMAT: tuple[Block, ...] = (
    ("`[defaults]`", "Settings for every job."),
    ("`[jobs.`*NAME*`]`", "Settings for the job called *NAME* (letters, digits, `.`, `_`, `-`; "
                          "starting with a letter or digit; at most 128). A name with a dot is "
                          "quoted: `[jobs.\"db.backup\"]`."),
    ("`[watch]`", "Settings of `cronwrap watch`, under its options' names: `interval`, "
                  "`grace` (durations with a unit), and the notifiers `notify`, "
                  "`notify-webhook`, `notify-mail` (each a string or an array of strings). "
                  "Notifiers on `watch`'s command line replace the file's. Watchers that share "
                  "a ledger should share these: each notifier is known by what it sends to, "
                  "and each alert goes once to each."),
    "Nothing else may be at the top level. A key is the long name of a `run` option without "
    "its dashes (`timeout`, `kill-after`); a `-` may also be written `_` (`kill_after`), but "
    "not both in one table. " + " ".join(
        f"`{k}` is not a key: {config.NOT_KEYS[k]}." for k in NOT_KEYS) + " "
    "A value is a TOML string, number or boolean, as the key says; a list is one string with "
    "commas (`retry-on = \"75,timeout\"`). Relative paths are refused, since cron starts jobs "
    "in the home directory.",
)


TOML_VALIDATION: tuple[Block, ...] = (
    "The file is read and checked on every firing, before anything runs, with the same "
    "checks as the command line, so a mistake fails at once rather than on the night the "
    "setting is needed. Every error is one line that names the file, the line and the key, "
    "with exit status "
    f"{errors.EXIT_CRONWRAP}. Errors are:",
    ("a file that is not valid TOML or not UTF-8", "with the line of the TOML error."),
    (f"a file larger than {size_text(config.CONFIG_MAX)}", "no configuration file is that "
                                                            "large: it is not read to its end."),
    ("an unknown key", "with the closest known one: `unknown key 'timeot' in [defaults] (did "
                       "you mean 'timeout'?)`."),
    ("a key outside a table", "it belongs under `[defaults]` or `[jobs.`*NAME*`]`."),
    ("an unknown table", "only `[defaults]`, `[jobs.`*NAME*`]` and `[watch]` exist."),
    ("an invalid job name", "in `[jobs.`*NAME*`]`."),
    ("a key set twice", "as `kill-after` and `kill_after`."),
    ("a bad value", "of the wrong TOML type (an array, a table, a date, a boolean for a key "
                    "that takes a value), a relative path, or one the option's own check "
                    "refuses: `[defaults] timeout: '1x' is not a duration`."),
)


TOML_EXAMPLE = Example(
    f"# {ETC_CONFIG}\n"
    "[defaults]\n"
    "db = \"postgresql://cronwrap@db.internal/cronwrap\"\n"
    "timeout = \"1h\"\n"
    "kill-after = \"30s\"\n"
    "output = \"on-failure\"\n"
    "on-failure = \"/usr/local/bin/notify-ops\"\n"
    "alert-after = 2\n"
    "\n"
    "[jobs.settle]\n"
    "schedule = \"30 1 * * *\"\n"
    "tz = \"Asia/Shanghai\"\n"
    "timeout = \"25m\"\n"
    "catchup = \"latest\"\n"
    "catchup-window = \"6h\"\n"
    "retries = 2\n"
    "retry-on = \"75,timeout\"\n"
    "ping = \"https://hc-ping.com/YOUR-UUID\"\n"
    "\n"
    "[jobs.\"db.backup\"]\n"
    "schedule = \"@daily\"\n"
    "overlap = \"wait\"\n"
    "keep_logs = \"90d\"\n"
    "\n"
    "[watch]\n"
    "notify-webhook = \"https://chat.example.org/hooks/SECRET\"\n"
    "notify-mail = [\"ops@example.org\"]")


TOML_EXAMPLE_USE: tuple[Block, ...] = (
    "With that file, the crontab lines stay short (on a host whose zone is Asia/Shanghai: "
    "cron fires a line at its host's time, and `cronwrap explain` prints what a schedule's "
    "times are on this host's clock):",
    Example("30 1 * * * /usr/local/bin/cronwrap run -n settle -- /usr/local/bin/settle.sh\n"
            "0 0 * * * /usr/local/bin/cronwrap run -n db.backup -- /usr/local/bin/backup.sh"),
    "and `CRONWRAP_TIMEOUT=2h` on a crontab line, or `--timeout 2h`, still overrides the file. "
    "`cronwrap status` and the other administrative commands do not read the file: give them "
    "the same ledger with `--db` or `CRONWRAP_DB`.",
)
