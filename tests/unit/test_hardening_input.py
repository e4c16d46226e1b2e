"""Input hardening from issue 11, unit by unit: durations, time limits, signal 0, URL and
connection-string redaction, and one-line config errors. Pure: no I/O but temporary files."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cronwrap.errors import ConfigError, UsageError
from cronwrap.options import config, runargs, spec
from cronwrap.options.durations import SMALLEST, TEN_YEARS, DurationTooLarge, parse_duration
from cronwrap.redact import redactor as redact
from cronwrap.run import hooks

LIMITS = [o for o in spec.OPTIONS if o.parse is spec.time_limit]
OTHER_DURATIONS = [o for o in spec.OPTIONS
                   if o.parse in (spec.duration, spec.window, spec.positive_duration)]


def build(given: dict, environ: dict | None = None) -> tuple[spec.JobSpec, list[str]]:
    notes: list[str] = []
    job = spec.build_spec(["true"], given, environ or {}, lambda: "host", warn=notes.append)
    return job, notes


# -- 21: exponents, ASCII digits only ----------------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [
    ("1e-3", 0.001), ("2.34e+5d", 2.34e5 * 86400 if 2.34e5 * 86400 <= TEN_YEARS else None),
    ("1E2m", 6000.0), ("1e2", 100.0), (".5e1s", 5.0), ("5.e-1", 0.5), ("1e0h30m", 5400.0),
    ("0e9", 0.0), ("0.0e-400", 0.0), ("1e-400", SMALLEST), ("1e-12m", SMALLEST),
])
def test_exponent_notation_means_what_strtod_reads(text, seconds):
    if seconds is None:
        with pytest.raises(DurationTooLarge):
            parse_duration(text)
    else:
        assert parse_duration(text) == pytest.approx(seconds)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=0, max_value=TEN_YEARS))
@example(5e-324)
@example(1e-9)
def test_every_float_python_writes_reads_back(value):
    assert parse_duration(repr(value)) == (max(value, SMALLEST) if value else 0.0)


NON_ASCII_DIGITS = [c for c in map(chr, range(0x80, 0x10000)) if unicodedata.digit(c, None) is not None]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(NON_ASCII_DIGITS), st.sampled_from(["{}", "1{}", "{}e2", "1e{}", "1.{}m"]))
def test_digits_float_reads_but_gnu_does_not_are_refused(digit, shape):
    with pytest.raises(UsageError, match="is not a duration"):
        parse_duration(shape.format(digit), "--timeout")


@pytest.mark.parametrize("text", ["nan", "NaN", "-nan", "1_000", "1_0e2", "0x1p3", "1e", "e3",
                                  "1e+", "1e2.5", "-1", "+1", "1ee2", "inf5", "infinityd"])
def test_what_float_reads_but_is_no_duration_is_refused(text):
    with pytest.raises(UsageError, match="is not a duration"):
        parse_duration(text, "--timeout")


# -- 22: too large to keep -------------------------------------------------------------------

@pytest.mark.parametrize("text", ["1e400", "inf", "INF", "Infinity", "3651d", "9" * 400,
                                  "315360001", "1e309m"])
def test_a_duration_too_large_is_its_own_error(text):
    with pytest.raises(DurationTooLarge, match=r"^--lease: .* is too large \(at most ten years"):
        parse_duration(text, "--lease")
    assert parse_duration("3650d") == TEN_YEARS


def test_the_limits_are_timeout_kill_after_wait_timeout_and_max_cpu():
    assert [o.name for o in LIMITS] == ["wait-timeout", "timeout", "kill-after", "max-cpu"]


@pytest.mark.parametrize("opt", LIMITS, ids=lambda o: o.name)
@pytest.mark.parametrize("text", ["1e400", "inf", "4000d"])
def test_a_limit_too_large_is_none_and_said_once(opt, text):
    job, notes = build({opt.name: text})
    assert getattr(job, opt.attr) == 0.0
    assert notes == [f"--{opt.name} {text}: too large; running without a {opt.name}"]
    job, notes = build({}, {opt.env: f" {text} "})
    assert getattr(job, opt.attr) == 0.0 and notes == [
        f"{opt.env} {text}: too large; running without a {opt.name}"]


@pytest.mark.parametrize("opt", OTHER_DURATIONS, ids=lambda o: o.name)
@pytest.mark.parametrize("text", ["1e400", "inf", "4000d"])
def test_other_durations_too_large_are_refused(opt, text):
    with pytest.raises(UsageError, match=f"^--{opt.name}: .* is too large"):
        build({opt.name: text})


def test_a_limit_within_ten_years_is_kept_and_says_nothing():
    job, notes = build({"timeout": "3650d", "kill-after": "1e-400", "wait-timeout": "2.5e1"})
    assert (job.timeout, job.kill_after, job.wait_timeout, notes) == (TEN_YEARS, SMALLEST, 25.0, [])


def test_a_config_file_with_a_huge_limit_loads_and_the_note_names_its_line(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[jobs.settle]\ntimeout = "inf"\n')
    loaded = config.load_config(path)
    merged = config.merge({}, {}, loaded, "settle")
    notes: list[str] = []
    job = spec.build_spec(["x"], merged.values, {}, lambda: "h", merged.labels,
                          warn=notes.append)
    assert job.timeout == 0.0
    assert notes == [f"{path}:2: [jobs.settle] timeout inf: too large; running without a timeout"]


# -- 20: signal 0 ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["0", "00", " 0 "])
def test_signal_0_is_accepted(text):
    assert spec.signal_number(text, "--signal") == 0


@pytest.mark.parametrize("text", ["SIG0", "-0", "0x0", "\u0660"])
def test_other_spellings_of_0_are_not(text):
    with pytest.raises(UsageError, match="or 0 for none"):
        spec.signal_number(text, "--signal")


# -- 20, 22, 23: the help says so --------------------------------------------------------------

def test_run_help_documents_signal_0_huge_limits_and_flock():
    text = " ".join(runargs.run_help().split())
    assert "0 sends none, so only --kill-after ends the job" in text
    assert "too large to keep (over ten years, 1e400, inf) also means none" in text
    assert "0, or a value too large to keep (over ten years), waits forever, unlike flock -w 0" in text
    assert "flock -w N is --overlap wait --wait-timeout N" in text
    assert "flock -n (and flock -w 0) is the default --overlap skip" in text
    assert "1e-3" in text


# -- 14: URLs and connection strings never show a secret -----------------------------------------

@pytest.mark.parametrize(("url", "shown"), [
    ("https://ops:hunter2/x@127.0.0.1:1/uuid", "https://***@127.0.0.1:1/uuid"),
    ("https://u:p?w#d@h/x", "https://***@h/x"),
    ("https://u:p@h:1/a@b", "https://***@b"),  # an @ after the host: too much hidden, never too little
    ("https://TOKEN@hc-ping.com/x", "https://***@hc-ping.com/x"),
    ("https://hc-ping.com/x", "https://hc-ping.com/x"),
    ("no scheme@x", "no scheme@x"),
])
def test_redact_hides_everything_before_the_last_at(url, shown):
    assert hooks.redact(url) == shown


@pytest.mark.parametrize(("url", "sent", "user"), [
    ("https://ops:hunter2/x@127.0.0.1:1/uuid", "https://127.0.0.1:1/uuid/start", "ops:hunter2/x"),
    ("http://u:pa?ss@h/x?create=1", "http://h/x/start?create=1", "u:pa?ss"),
    ("http://u:p%40w@h/x", "http://h/x/start", "u:p@w"),
    ("https://h/x?email=a@b", "https://h/x/start?email=a@b", None),
    ("http://[::1]:8080/x", "http://[::1]:8080/x/start", None),
])
def test_a_ping_sends_its_user_info_as_a_header_wherever_the_password_has_a_slash(url, sent, user):
    import base64

    assert redact.parse_ping_url(url) == url
    plain, headers = hooks.credentials(hooks.ping_url(url, "start"))
    assert plain == sent
    expected = {} if user is None else {
        "Authorization": "Basic " + base64.b64encode(user.encode()).decode()}
    assert headers == expected


@pytest.mark.parametrize("url", ["https://ops:hunter2@", "http://h:port/x", "http://h:99999/",
                                 "http://[::1/x", "https://@/x", "http://a@b@/x"])
def test_a_ping_url_without_a_host_and_numeric_port_is_refused_without_its_secret(url):
    with pytest.raises(UsageError, match="is not an http:// or https:// URL") as info:
        redact.parse_ping_url(url, "--ping")
    assert "hunter2" not in str(info.value)


def test_ledger_urls_use_the_one_url_redaction():
    from cronwrap.ledger.postgres import redact_dsn

    assert redact_dsn("postgresql://u:p@ss:w/rd@host/db") == "postgresql://***@host/db"
    assert redact_dsn("postgresql://u@h/db?password=S3cret&x=1") == \
        "postgresql://***@h/db?password=***&x=1"
    assert redact_dsn("host=db password='a b' user=app") == "host=db password=*** user=app"


@pytest.mark.parametrize(("dsn", "label"), [
    ("pass=S3cret", "ledger pass=***: "),
    ("host=x S3cret", "ledger host=***: "),
    ("password='S3cret", "ledger password=***: "),
    ("host=x password=S3=cret=x port='a b' S3cret", "ledger host=*** password=*** port=***: "),
    ("postgresql://u:S3cret@[bad", "ledger postgresql://***@[bad: "),
    ("postgresql://h/db?password=S3cret&x", "ledger postgresql://h/db?password=***&x: "),
])
def test_an_invalid_connection_string_names_keywords_never_values(dsn, label):
    import psycopg
    from psycopg import conninfo

    from cronwrap.ledger.postgres import _invalid_dsn

    with pytest.raises(psycopg.Error) as parse_error:
        conninfo.conninfo_to_dict(dsn)
    message = str(_invalid_dsn(dsn, parse_error.value))
    assert message.startswith(label) and "S3cret" not in message, message
    assert ": invalid connection string: " in message and "\n" not in message


# -- 16: config errors are one printable line --------------------------------------------------

def config_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        config.load_config(path)
    message = str(info.value)
    assert message.startswith(str(path)) and message.isprintable(), message
    return message.removeprefix(str(path))


@pytest.mark.parametrize("nesting", [
    "a = " + "[" * 5000 + "]" * 5000, "a = " + "[" * 5000, "a = " + "{b = " * 3000 + "1" + "}" * 3000,
    "[defaults]\nlease = " + "[" * 5000 + "]" * 5000,
])
def test_deep_nesting_is_a_config_error(tmp_path, nesting):
    assert config_error(tmp_path, nesting + "\n").startswith(": arrays or inline tables nested "
                                                             "too deeply")


@pytest.mark.parametrize(("text", "quoted"), [
    ('[jobs."a\\nb"]\n', '[jobs."a\\nb"]'),
    ('[jobs."a\\u0007b"]\ntimeout = 1\n', '[jobs."a\\x07b"]'),
    ('jobs = {"x\\ty" = {}}\n', '[jobs."x\\ty"]'),
    ('[jobs."\\u2028"]\n', '[jobs."\\u2028"]'),
])
def test_names_from_the_file_are_escaped(tmp_path, text, quoted):
    assert quoted in config_error(tmp_path, text)


def test_a_job_that_is_no_table_is_named_escaped(tmp_path):
    assert config_error(tmp_path, '[jobs]\n"ok" = 3\n') == ":2: [jobs.ok] must be a table " \
        "(followed by key = value lines)"


def test_a_config_path_that_is_not_printable_is_refused(tmp_path):
    import os

    path = tmp_path / "a\nb.toml"
    path.write_text("")
    path.chmod(0o644)
    with pytest.raises(ConfigError) as info:
        config.find_config({"CRONWRAP_CONFIG": str(path)}, os.geteuid())
    assert str(info.value).isprintable() and "a\\nb.toml" in str(info.value)
    with pytest.raises(ConfigError) as info:
        config.find_config({"CRONWRAP_CONFIG": str(tmp_path / "x\ny")}, os.geteuid())
    assert str(info.value).startswith("CRONWRAP_CONFIG=") and str(info.value).isprintable()


def test_shown_escapes_only_what_is_not_printable():
    assert config.shown("/etc/cronwrap/config.toml") == "/etc/cronwrap/config.toml"
    assert config.shown("it's\n") == "it's\\n"
    assert config.shown("caf\u00e9\x00") == "caf\u00e9\\x00"


# -- issue 22 §7: a bare number after a unit; windows need a unit -------------------------------

@pytest.mark.parametrize(("text", "hint"), [
    ("1h30", "did you mean 1h30m?"), ("2d12", "did you mean 2d12h?"),
    ("1m30", "did you mean 1m30s?"), ("1s5", "e.g. 1m30s"), ("1h30m5", "did you mean 1h30m5s?"),
])
def test_a_bare_number_after_a_unit_is_refused_with_a_hint(text, hint):
    with pytest.raises(UsageError, match=f"^--timeout: '{text}': the number after .* has no "
                                         f"unit; give each part its own {re.escape(f'({hint})')}$"):
        parse_duration(text, "--timeout")


def test_a_bare_number_alone_is_seconds_unless_a_unit_is_required():
    assert parse_duration("90", "--timeout") == 90.0
    assert parse_duration("1h30m") == 5400.0
    with pytest.raises(UsageError, match=r"^--max-age: '26' needs a unit: 26s, 26m, 26h or 26d "):
        parse_duration("26", "--max-age", unit_required=True)
    with pytest.raises(UsageError, match=r"needs a unit: 1.5s, 1.5m"):
        parse_duration("1.5", "--since", unit_required=True)
    assert parse_duration("0", "--since", unit_required=True) == 0.0  # none needs no unit
    assert parse_duration("26h", "--max-age", unit_required=True) == 26 * 3600.0
    with pytest.raises(UsageError, match=r"examples: 90m, 12h, 7d"):
        parse_duration("x", "--since", unit_required=True)


WINDOWS = [o for o in spec.OPTIONS if o.parse is spec.window]


def test_the_windows_of_run_are_the_catchup_window_and_keep_logs():
    assert {o.name for o in WINDOWS} == {"catchup-window", "keep-logs"}


@pytest.mark.parametrize("opt", WINDOWS, ids=lambda o: o.name)
def test_a_window_without_a_unit_is_refused_from_every_source(opt, tmp_path):
    with pytest.raises(UsageError, match=f"^--{opt.name}: '26' needs a unit"):
        build({opt.name: "26"})
    with pytest.raises(UsageError, match=f"^{opt.env}: '26' needs a unit"):
        build({}, {opt.env: "26"})
    file = tmp_path / "config.toml"
    file.write_text(f"[defaults]\n{opt.name} = 26\n")
    with pytest.raises(ConfigError, match=f"config.toml:2: \\[defaults\\] {opt.name}: '26' needs a unit"):
        config.load_config(file)
    assert build({opt.name: "26h"})[0].asdict()[opt.attr] == 26 * 3600.0
