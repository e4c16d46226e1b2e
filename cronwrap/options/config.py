"""The TOML config file: ``[defaults]`` and ``[jobs.NAME]``, merged under the command line.

Keys are ``run``'s long option names (``timeout``, ``kill-after``; ``kill_after`` is accepted
and normalised), so the option table in spec.py is the only list of settings. Values are
checked with each option's own parser when the file is loaded, so a typo fails every firing
at once with the file, line and key, instead of the night the job needs the setting.

Precedence (ARCHITECTURE.md §8): command line > environment (``CRONWRAP_<NAME>``) > ``[jobs.NAME]`` >
``[defaults]`` > built-in. The environment sits above the job's section: a variable set on a
crontab line overrides a shared file. ``merge`` returns one mapping of option name to raw
value in the shape ``spec.build_spec`` takes as ``given``, plus where each value came from.

Every error is one line that names the file (and the line where known); anything from the
file that a message quotes has its non-printable characters escaped as ``repr`` does.

This runs on every firing when a config file exists: tomllib only, difflib on errors only.
A firing keeps what tomllib made of the file's text in a cache beside the ledger
(``CACHE_FILE``), and the next firing of the same text reads that instead: importing
tomllib and parsing five jobs was ~10 ms of each firing's start (34 M instructions, more than
the floor wrapper's own work). The checks of the values are made every time.
"""

from __future__ import annotations

import os
import stat
import sys

from cronwrap.errors import ConfigError, UsageError
from cronwrap.model import valid_name
from cronwrap.options import spec
from cronwrap.paths import keep, read_kept
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any, Mapping

ETC_CONFIG = "/etc/cronwrap/config.toml"
CACHE_FILE = "config.cache"  # in STATE: the parse of the last config file a firing read
# What a cache entry must match besides the text: marshal's format, and tomllib's reading of
# TOML, are the interpreter's.
_CACHE_KEY = ("cronwrap config cache 1", sys.version)
NOT_KEYS = {
    "command": "the command comes after -- on the crontab line",
    "name": "a job's settings go in its own [jobs.NAME] section",
}
WATCH = "\0watch"  # the [watch] table's place in Config.lines, beside [jobs.NAME]'s
# `cronwrap watch`'s keys: the notifiers take a string or an array of strings
WATCH_KEYS = ("interval", "grace", "notify", "notify-webhook", "notify-mail")
CLI_SOURCE = "command line"
BUILT_IN = "built-in default"


class Config(Record):
    """A loaded config file. ``defaults`` and ``jobs[NAME]`` map option names to raw values
    (``str``, or ``bool`` for a flag), already checked by the option's parser. ``lines`` maps
    ``(job name or None for [defaults], option name)`` to the line the value is on."""

    path: str | None
    defaults: dict[str, str | bool]
    jobs: dict[str, dict[str, str | bool]]
    lines: dict[tuple[str | None, str], int]
    watch: dict[str, str | list[str]]  # [watch]: `cronwrap watch`'s settings, checked by it
    _defaults = dict(path=None)
    _factories = dict(defaults=dict, jobs=dict, lines=dict, watch=dict)

    def where(self, job: str | None, key: str) -> str:
        """``/etc/cronwrap/config.toml:12 [jobs.settle]``: the source of one setting."""
        return f"{self.path}:{self.lines.get((job, key), 0)} {table_label(job)}"

    def watch_where(self, key: str) -> str:
        """``/etc/cronwrap/config.toml:30: [watch] notify-webhook``."""
        return f"{self.path}:{self.lines.get((WATCH, key), 0)}: [watch] {key}"


class MergedSettings(Record):
    """``values``: option name -> raw value, the ``given`` mapping for ``spec.build_spec``
    (every level but the built-in defaults, which build_spec applies itself).
    ``sources``: option name -> where its value came from ("command line", "CRONWRAP_TIMEOUT",
    "/etc/cronwrap/config.toml:12 [jobs.settle]"). ``labels``: option name -> the label to put
    in front of an error about that value ("--timeout", "CRONWRAP_TIMEOUT",
    "/etc/cronwrap/config.toml:12: [jobs.settle] timeout")."""

    values: dict[str, str | bool]
    sources: dict[str, str]
    labels: dict[str, str]

    def source(self, key: str) -> str:
        return self.sources.get(key, BUILT_IN)

    def label(self, key: str) -> str:
        return self.labels.get(key, f"--{key}")


# -- finding the file --------------------------------------------------------------------------

def find_config(environ: Mapping[str, str], euid: int | None = None) -> str | None:
    """``$CRONWRAP_CONFIG`` (which must exist), else the user's file, else ``/etc``'s, else None.

    The user's file is ``$XDG_CONFIG_HOME/cronwrap/config.toml`` (default ``~/.config``). A
    file found must belong to ``euid`` or root and be writable by its owner only: it names
    shell commands (hooks) that cronwrap runs. An empty ``CRONWRAP_CONFIG`` counts as unset;
    ``CRONWRAP_CONFIG=/dev/null`` means no config at all."""
    euid = os.geteuid() if euid is None else euid
    explicit = environ.get("CRONWRAP_CONFIG")
    if explicit:
        path = os.path.expanduser(explicit)
        info = _stat(path)
        if info is None:
            raise ConfigError(f"CRONWRAP_CONFIG={shown(explicit)}: no such file (unset the "
                              f"variable to use ~/.config/cronwrap/config.toml or {ETC_CONFIG})")
        _check_trusted(path, info, euid)
        return path
    for candidate in (_user_config(environ), ETC_CONFIG):
        if candidate is None:
            continue
        info = _stat(candidate)
        if info is not None:
            _check_trusted(candidate, info, euid)
            return candidate
    return None


def _user_config(environ: Mapping[str, str]) -> str | None:
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec says to ignore a relative value
        return os.path.join(xdg, "cronwrap", "config.toml")
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".config", "cronwrap", "config.toml") if os.path.isabs(home) \
        else None


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ConfigError(f"{shown(path)}: {exc.strerror}") from None


def _check_trusted(path: str, info: os.stat_result, euid: int) -> None:
    if stat.S_ISCHR(info.st_mode) and str(path) == os.devnull:
        return
    if not str(path).isprintable():  # every message names the file: it must fit on a line
        raise ConfigError(f"{shown(path)}: a config file's path must be printable text: rename "
                          "the file, or point CRONWRAP_CONFIG at another")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: not a regular file")
    if info.st_uid not in (euid, 0):
        raise ConfigError(f"{path} belongs to uid {info.st_uid}: cronwrap runs the hooks a config "
                          "file names, so it reads only one owned by you or root")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"{path} is writable by other users, and cronwrap runs the hooks it "
                          f"names: run chmod go-w {path}")


# -- loading it --------------------------------------------------------------------------------

def load_config(path: str, cache: str | None = None) -> Config:
    """Read and check ``path``; ``ConfigError`` (exit 125) names file, line and key. With
    ``cache`` (a firing's: STATE/``CACHE_FILE``), the parse of the same text is read from it,
    and a new parse kept in it."""
    text = _read(path)
    data = _cached(cache, text) if cache else None
    if data is None:
        data = _parse_toml(text, path)
        if cache:
            _keep(cache, text, data)
    config = Config(path=path)
    where = _Locator(path, text)
    for top, value in data.items():
        if top == "defaults":
            _load_section(config, None, value, where)
        elif top == "jobs":
            if not isinstance(value, dict):
                raise ConfigError(f"{where.line_of(('jobs',))}: 'jobs' must be tables, "
                                  "one [jobs.NAME] per job")
            for name, section in value.items():
                _load_job(config, name, section, where)
        elif top == "watch":
            _load_watch(config, value, where)
        elif top.replace("_", "-") in spec.BY_LONG:
            raise ConfigError(f"{where.line_of((top,))}: {top!r} is outside any table: put it "
                              "under [defaults] (every job) or [jobs.NAME] (one job)")
        else:
            raise ConfigError(f"{where.line_of((top,))}: unknown table or key {top!r} at the top "
                              f"level{_did_you_mean(top, ('defaults', 'jobs'))}; the file holds "
                              "[defaults] and [jobs.NAME] tables only")
    return config


CONFIG_MAX = 1 << 20  # a config file is a few KiB: /dev/zero is refused, not read to the end


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(CONFIG_MAX + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    if len(raw) > CONFIG_MAX:
        raise ConfigError(f"{path}: more than {CONFIG_MAX >> 20} MiB, which no config file is: "
                          "give the config file itself")
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def _parse_toml(text: str, path: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        raise ConfigError(f"{path}: arrays or inline tables nested too deeply to read (a "
                          "setting is a string, number or boolean: remove the nesting)") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        head, sep, tail = message.rpartition(" (at line ")
        if sep:
            line = tail.split(",", 1)[0]
        else:
            head, line = message.removesuffix(" (at end of document)"), str(text.count("\n") + 1)
        raise ConfigError(f"{path}:{line}: not valid TOML: {shown(head)}") from None


def _cached(cache: str, text: str) -> dict[str, Any] | None:
    """The parse of ``text`` kept in ``cache``; None when it holds another text, another
    interpreter's, or nothing cronwrap wrote."""
    found = read_kept(cache, 4 * CONFIG_MAX, _CACHE_KEY)
    if found is None or len(found) != 2:
        return None
    source, data = found
    return data if source == text and isinstance(data, dict) else None


def _keep(cache: str, text: str, data: dict[str, Any]) -> None:
    """Keep the parse of ``text`` for the next firing. A file marshal cannot keep (a TOML
    date, which the checks refuse anyway) is parsed again next time."""
    keep(cache, _CACHE_KEY, text, data)


def _load_job(config: Config, name: str, section: Any, where: _Locator) -> None:
    try:
        spec.job_name(name, "name")
    except UsageError as exc:
        raise ConfigError(f"{where.line_of(('jobs', name))}: {table_label(name)}: {exc}") from None
    if not isinstance(section, dict):
        raise ConfigError(f"{where.line_of(('jobs', name))}: {table_label(name)} must be a "
                          "table (followed by key = value lines)")
    _load_section(config, name, section, where)


def _load_section(config: Config, job: str | None, section: Any, where: _Locator) -> None:
    table = ("defaults",) if job is None else ("jobs", job)
    if not isinstance(section, dict):
        raise ConfigError(f"{where.line_of(table)}: 'defaults' must be a table "
                          "([defaults] followed by key = value lines)")
    values: dict[str, str | bool] = {}
    for raw_key, value in section.items():
        key, line = raw_key.replace("_", "-"), where.line_of((*table, raw_key))
        if key in values:
            raise ConfigError(f"{line}: {table_label(job)} sets {key!r} twice "
                              f"({raw_key!r} and another spelling)")
        values[key] = _check_value(job, raw_key, key, value, line)
        config.lines[(job, key)] = where.line((*table, raw_key))
    if job is None:
        config.defaults = values
    else:
        config.jobs[job] = values


def _load_watch(config: Config, section: Any, where: _Locator) -> None:
    """[watch]: strings (a notifier: a string or an array of them), checked by watch itself
    with the file, line and key named."""
    if not isinstance(section, dict):
        raise ConfigError(f"{where.line_of(('watch',))}: 'watch' must be a table ([watch] "
                          "followed by key = value lines)")
    for raw_key, value in section.items():
        key, line = raw_key.replace("_", "-"), where.line_of(("watch", raw_key))
        if key not in WATCH_KEYS:
            raise ConfigError(f"{line}: unknown key {raw_key!r} in [watch]"
                              f"{_did_you_mean(key, WATCH_KEYS)}")
        many = key.startswith("notify")
        if isinstance(value, list) and many and all(isinstance(v, str) for v in value):
            config.watch[key] = list(value)
        elif isinstance(value, str):
            config.watch[key] = value
        else:
            raise ConfigError(f"{line}: [watch] {raw_key}: expected a string"
                              + (" or an array of strings" if many else ""))
        config.lines[(WATCH, key)] = where.line(("watch", raw_key))


def _check_value(job: str | None, raw_key: str, key: str, value: Any, line: str) -> str | bool:
    if key in NOT_KEYS:
        raise ConfigError(f"{line}: {raw_key!r} is not a config key in {table_label(job)}: "
                          f"{NOT_KEYS[key]}")
    opt = spec.BY_LONG.get(key)
    if opt is None:
        names = [o.name for o in spec.OPTIONS if o.name not in NOT_KEYS]
        raise ConfigError(f"{line}: unknown key {raw_key!r} in {table_label(job)}"
                          f"{_did_you_mean(key, names)}")
    label = f"{line}: {table_label(job)} {raw_key}"
    if isinstance(value, bool):
        if not opt.is_flag:
            raise ConfigError(f"{label}: expected a value ({opt.metavar}), not {str(value).lower()}")
        return value
    if isinstance(value, list) and opt.repeat and all(isinstance(v, str) for v in value):
        text = spec.REPEAT_SEPARATOR.join(value)  # redact = ["...", "..."]
    elif isinstance(value, (int, float)):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        kind = "a table" if isinstance(value, dict) else "an array" if isinstance(value, list) \
            else "a date or time"
        raise ConfigError(f"{label}: expected a string, number or boolean, not {kind} (lists "
                          "are written as one comma-separated string)")
    try:
        parsed = opt.parse(text, label)
    except UsageError as exc:
        raise ConfigError(str(exc)) from None
    if opt.parse is spec.path and not os.path.isabs(parsed):
        # cron starts jobs in $HOME: relative to what would be a guess either way
        raise ConfigError(f"{label}: {text!r} is a relative path; the config file needs an "
                          "absolute one (or ~/…)")
    return parsed if opt.is_flag else text


def _did_you_mean(word: str, choices: Any) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def table_label(job: str | None) -> str:
    """``[jobs.settle]``, ``[jobs."db.backup"]``; a name's control characters escaped."""
    if job is None:
        return "[defaults]"
    bare = valid_name(job) and "." not in job
    return f"[jobs.{job}]" if bare else f'[jobs."{shown(job)}"]'


def shown(text: object) -> str:
    """``text`` fit for one line of a message: non-printable characters escaped as repr()
    escapes them (``a\\nb``), printable text as it is."""
    text = str(text)
    return text if text.isprintable() else repr(text)[1:-1]


class _Locator:
    """Line numbers for tables and keys, which tomllib does not give: a scan of the text for
    ``[table]`` headers and ``key = value`` lines. Good enough for hand-written files; a key
    it cannot place (inside an inline table, say) is reported at its table's line."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.index: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        in_multiline = False
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if in_multiline or not stripped or stripped.startswith("#"):
                in_multiline ^= _toggles_multiline(line)
                continue
            if stripped.startswith("[") and not stripped.startswith("[["):
                table = _dotted(stripped[1:])
                self.index.setdefault(table, number)
            elif "=" in stripped:
                self.index.setdefault((*table, *_dotted(stripped.split("=", 1)[0])), number)
            in_multiline = _toggles_multiline(line)

    def line(self, keys: tuple[str, ...]) -> int:
        """The line of the deepest of ``keys``' prefixes found in the file."""
        for end in range(len(keys), 0, -1):
            if keys[:end] in self.index:
                return self.index[keys[:end]]
        return 1

    def line_of(self, keys: tuple[str, ...]) -> str:
        """``path:N``, to begin an error message."""
        return f"{self.path}:{self.line(keys)}"


def _toggles_multiline(line: str) -> bool:
    return (line.count('"""') + line.count("'''")) % 2 == 1


def _dotted(text: str) -> tuple[str, ...]:
    """``jobs . "db.backup"`` -> ("jobs", "db.backup"); stops at an unquoted ``]``."""
    parts, current, quote, i = [], "", None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(text):
                i += 1
                current += text[i]
            else:
                current += c
        elif c in "\"'":
            quote = c
        elif c == ".":
            parts.append(current)
            current = ""
        elif c == "]":
            break
        elif not c.isspace():
            current += c
        i += 1
    return (*parts, current)


# -- merging the levels ------------------------------------------------------------------------

def job_name_of(cli_given: Mapping[str, str | bool], environ: Mapping[str, str],
                command: list[str]) -> str | None:
    """The job name as build_spec will settle it (``-n``, ``CRONWRAP_NAME``, the command's
    basename), to pick the ``[jobs.NAME]`` section; None when there is no command yet."""
    name = cli_given.get("name") or environ.get(spec.BY_LONG["name"].env)
    if isinstance(name, str):
        try:
            return spec.job_name(name, "name")
        except UsageError:
            return None  # build_spec reports it
    return spec.default_name(command) if command else None


def merge(cli_given: Mapping[str, str | bool], environ: Mapping[str, str],
          config: Config | None, job_name: str | None) -> MergedSettings:
    """Command line > ``CRONWRAP_<NAME>`` > ``[jobs.job_name]`` > ``[defaults]``.

    The result's ``values`` goes to ``spec.build_spec`` as ``given``; keys absent from it take
    the built-in default there. Environment values are included (raw text), since build_spec
    would otherwise rank every config value above the environment."""
    values: dict[str, str | bool] = {}
    sources: dict[str, str] = {}
    labels: dict[str, str] = {}
    job = config.jobs.get(job_name, {}) if config and job_name else {}
    for opt in spec.OPTIONS:
        key = opt.name
        if key in cli_given:
            values[key], sources[key], labels[key] = cli_given[key], CLI_SOURCE, f"--{key}"
        elif opt.env in environ:
            values[key], sources[key], labels[key] = environ[opt.env], opt.env, opt.env
        elif config is not None and (key in job or key in config.defaults):
            section = job_name if key in job else None
            values[key] = job[key] if key in job else config.defaults[key]
            sources[key] = config.where(section, key)
            line = config.lines.get((section, key), 0)
            labels[key] = f"{config.path}:{line}: {table_label(section)} {key}"
    for key, value in cli_given.items():  # anything the table does not know stays as given
        if key not in values:
            values[key], sources[key], labels[key] = value, CLI_SOURCE, f"--{key}"
    return MergedSettings(values=values, sources=sources, labels=labels)
