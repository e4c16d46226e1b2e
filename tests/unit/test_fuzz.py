"""Hostile input, fuzzed with hypothesis: every parser returns a value or a ``CronwrapError``.

Never another exception (that would be an "internal error" for the person at the terminal),
and where a value comes back it is the right one. The last section runs the real executable
with nasty argv: never a traceback, and exit 125 or a real status.

The inputs that broke cronwrap when this file was written are kept as explicit examples.
"""

from __future__ import annotations

import math
import os
import re
import resource
import signal
import subprocess
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from cronwrap import crontab, model, schedule
from cronwrap.errors import CronwrapError, UsageError
from cronwrap.options import config, durations, runargs, spec
from cronwrap.run import firing
from cronwrap.run.catchup import plan_firing, plan_manual

from tests.conftest import cronwrap_argv

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

UTC = timezone.utc
VALUED = [o for o in spec.OPTIONS if not o.is_flag and o.name != "env-file"]  # env-file: below
FLAGS = [o for o in spec.OPTIONS if o.is_flag]


def build(given: dict, environ: dict | None = None) -> spec.JobSpec:
    return spec.build_spec(["true"], given, environ or {}, lambda: "host", warn=lambda note: None)


# Text that is near a valid value as well as arbitrary text: numbers with suffixes, names,
# cron fields, zones, dates, URLs, and characters that break naive parsers.
NEAR = st.one_of(
    st.text(),
    st.text(alphabet="0123456789.smhdSMHD -+e_,:TZ/%*", max_size=12),
    st.from_regex(r"\A-?[0-9]{1,4}(\.[0-9]{0,3})?[smhd]?\Z"),
    st.sampled_from(["0", "-1", "1e3", "inf", "nan", "1h30m", "30 5m", "1.5.5", "٣", "0x10",
                     "TERM", "SIGKILL", "sigterm", "9", "65", "0", "KILL ", " HUP", "SIGRTMIN",
                     "skip", "wait", "replace", "allow", "flock", "pid", "none", "all", "latest",
                     "quiet", "on-failure", "fail", "run-unrecorded", "75,timeout", "1-255",
                     "255-1", "0", "256", ",", "timeout,", "sqlite:///", "sqlite:///x.db",
                     "postgresql://u:p@h/db", "dbname=x", "a=b c", "http://", "https://h/x",
                     "http://[::1", "ftp://h/x", "@daily", "@reboot", "* * * * *", "61 * * * *",
                     "Europe/Berlin", "Mars/Base", "../../etc/passwd", "%Y-%m-%d", "%", "%%",
                     "2026-02-30", "2026-10-28T01:30", "yesterday", "\x00", "a\nb", " ", "",
                     "²", "①", "1²", "~no-such-user-cronwrap/x", "~", "0001-01-01",
                     "9999-12-31T23:59", "\udcff%Y"]),
)


# -- every option of run ---------------------------------------------------------------------

@FUZZ
@given(st.sampled_from(VALUED), NEAR, st.booleans())
def test_every_run_option_value_is_a_value_or_a_clean_error(opt, text, from_env):
    try:
        job = build({}, {opt.env: text}) if from_env else build({opt.name: text})
    except CronwrapError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return
    value = getattr(job, opt.attr)
    if opt.parse in (spec.duration, spec.window, spec.time_limit):
        assert isinstance(value, float) and 0 <= value <= 10 * 365 * 86400
    elif opt.parse in (spec.count, spec.exit_code):
        assert isinstance(value, int) and value >= 0
    elif opt.parse is spec.signal_number:
        assert 0 <= value < signal.NSIG
    elif opt.parse is spec.job_name:
        assert value == text and value.isprintable()
    # what only the runner can check (a schedule needs its zone) is checked before a run
    try:
        firing.resolve_timing(job, {})
    except CronwrapError:
        pass


@FEW
@given(st.sampled_from(FLAGS), st.text(max_size=6))
def test_flags_from_the_environment_are_booleans_or_a_clean_error(opt, text):
    try:
        job = build({}, {opt.env: text})
    except UsageError:
        return
    assert getattr(job, opt.attr) in (True, False)


@FEW
@given(st.dictionaries(st.sampled_from([o.name for o in VALUED]), NEAR, max_size=6))
def test_combinations_of_options_are_a_value_or_a_clean_error(given):
    try:
        job = build(given)
        timing = firing.resolve_timing(job, {})
    except CronwrapError:
        return
    if timing.schedule is not None and job.date is None and job.at is None:
        now = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
        try:
            plan_firing(timing.schedule, now, key_template=job.key, last_seen=now - timedelta(days=3),
                        known_keys=frozenset().intersection, policy=job.catchup,
                        window=job.catchup_window, max_catchup=job.max_catchup)
        except CronwrapError:
            pass


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1))
@example("/opt/My Scripts/Nightly Backup.sh")
def test_a_given_name_is_used_whatever_the_command_is_called(program):
    assume("\0" not in program)
    job = spec.build_spec([program, "arg"], {"name": "backup"}, {}, lambda: "host",
                          warn=pytest.fail)
    assert job.name == "backup" and job.command == [program, "arg"]


NAME_TEXT = st.one_of(st.text(min_size=1, max_size=130),
                      st.sampled_from(["../x", "a/b", ".", "..", "/abs", "x/", "%", "%2F", "a%2Fb",
                                       "~root", "-", "\\", "CON", "x" * 128, "ü" * 128]))


@FUZZ
@given(NAME_TEXT)
def test_a_job_name_is_refused_or_becomes_one_safe_file_name(name):
    from cronwrap.paths import file_name

    try:
        job = build({"name": name})
    except UsageError:
        assert not name.isprintable() or name != name.strip() or len(name) > 128 or not name
        return
    on_disk = file_name(job.name)
    assert on_disk not in ("", ".", "..") and "/" not in on_disk and "\0" not in on_disk
    assert len((on_disk + ".lock").encode()) <= 255
    assert (on_disk == name) == model.valid_name(name)  # plain names stay readable in ls


@FUZZ
@given(NAME_TEXT, NAME_TEXT)
def test_different_job_names_never_share_a_file_name(a, b):
    from cronwrap.paths import file_name

    assume(a != b)
    assert file_name(a) != file_name(b)


@pytest.mark.parametrize("name", ["a\0b", "\0", "x\n", "tab\t", "", " x", "x ", "x" * 129])
def test_a_name_that_is_no_name_is_refused(name):
    with pytest.raises(UsageError, match="is not a job name"):
        build({"name": name})
    with pytest.raises(UsageError, match="is not a job name"):
        build({}, {"CRONWRAP_NAME": name})


INT_OPTIONS = ["skip-exit-code", "retries", "max-catchup", "max-attempts", "alert-after",
               "signal", "retry-on"]


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(INT_OPTIONS),
       st.sampled_from(["²", "³", "¹", "①", "1²", "⁷⁵"]) | st.just("9" * 5000))
@example("skip-exit-code", "²")
def test_digits_that_int_refuses_are_a_clean_error(name, text):
    try:
        build({name: text})
    except CronwrapError:
        pass


@pytest.mark.parametrize("name", ["lock-file", "log-dir", "env-file"])
def test_a_path_under_an_unknown_users_home_is_a_clean_error(name):
    try:
        build({name: "~no-such-user-cronwrap/x"})
    except CronwrapError:
        pass


# -- durations and signals -------------------------------------------------------------------

@FUZZ
@given(NEAR)
def test_parse_duration_is_a_number_of_seconds_or_a_clean_error(text):
    try:
        value = durations.parse_duration(text, "--x")
    except UsageError as exc:
        assert str(exc).startswith("--x: ")
        return
    assert math.isfinite(value) and 0 <= value <= 10 * 365 * 86400


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# What durations._part reads by hand, as the regular expression it stands for
DURATION_PART = re.compile(r"((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)([smhd]?)")


@FUZZ
@given(st.text(alphabet="0123456789.eE+-smhdx _\u0663", max_size=10), st.integers(0, 3))
@example("2.5e2m", 0)
@example("1.e5s", 0)
@example("1e+", 0)
@example(".5", 0)
def test_a_duration_part_is_read_as_its_pattern_reads_it(text, pos):
    match = DURATION_PART.match(text, pos) if pos <= len(text) else None
    expected = None if match is None else (*match.groups(), match.end())
    assert durations._part(text, pos) == expected


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 999), st.sampled_from(["", ".5", ".25"]),
                          st.sampled_from(list(UNITS))), min_size=1, max_size=3),
       st.booleans())
def test_valid_durations_mean_what_they_say(parts, bare_last):
    text = "".join(f"{n}{frac}{unit}" for n, frac, unit in parts)
    expected = sum((n + float(frac or 0)) * UNITS[unit] for n, frac, unit in parts)
    if expected > 10 * 365 * 86400:
        with pytest.raises(UsageError):
            durations.parse_duration(text + "7" if bare_last else text)
    elif bare_last:  # "1h30": a number after a unit has a unit of its own, or is refused
        with pytest.raises(UsageError, match="has no unit"):
            durations.parse_duration(text + "7")
    else:
        assert durations.parse_duration(text) == pytest.approx(expected)
        assert durations.parse_duration(f"  {text} ") == pytest.approx(expected)


@FUZZ
@given(NEAR)
def test_signal_number_is_a_signal_or_a_clean_error(text):
    try:
        number = spec.signal_number(text, "--signal")
    except UsageError:
        return
    assert 0 <= number < signal.NSIG


@pytest.mark.parametrize("sig", list(signal.Signals), ids=lambda s: s.name)
def test_every_signal_name_and_number_parses_to_itself(sig):
    for text in (sig.name, sig.name[3:], sig.name.lower(), sig.name[3:].lower(), str(int(sig)),
                 f" {sig.name[3:]} "):
        assert spec.signal_number(text, "-s") == int(sig), text


# -- schedules, zones and key templates ------------------------------------------------------

FIELD = st.one_of(
    st.just("*"), st.integers(0, 70).map(str),
    st.builds(lambda a, b: f"{a}-{b}", st.integers(0, 60), st.integers(0, 60)),
    st.builds(lambda a, b: f"{a}/{b}", st.sampled_from(["*", "0", "5", "1-30"]), st.integers(0, 70)),
    st.builds(lambda a, b: f"{a},{b}", st.integers(0, 59), st.integers(0, 59)),
    st.sampled_from(["L", "LW", "5L", "1#2", "6#5", "MON-FRI", "sun", "JAN", "dec-feb", "?", "15W",
                     "L-3", ",", "1,", "-", "/", "*/", "7", "0-7", "31", "29", "30-31", "FRI#3"]),
    st.text(max_size=3),
)


def valid_field(low: int, high: int, extra: list[str]) -> st.SearchStrategy[str]:
    n = st.integers(low, high)
    return st.one_of(
        st.just("*"), n.map(str), st.integers(1, max(1, (high - low) // 2)).map(lambda k: f"*/{k}"),
        st.tuples(n, n).map(lambda ab: f"{min(ab)}-{max(ab)}"),
        st.tuples(n, n, n).map(lambda abc: ",".join(map(str, sorted(set(abc))))),
        st.tuples(n, n, st.integers(1, 7)).map(lambda t: f"{min(t[:2])}-{max(t[:2])}/{t[2]}"),
        st.sampled_from(extra) if extra else st.just("*"))


VALID_EXPR = st.tuples(
    valid_field(0, 59, []), valid_field(0, 23, []), valid_field(1, 31, ["L", "15W", "LW", "L-2"]),
    valid_field(1, 12, ["JAN", "FEB-APR", "dec"]), valid_field(0, 7, ["MON-FRI", "5L", "1#2", "SUN"]),
).map(" ".join)
EXPR = st.one_of(
    VALID_EXPR, VALID_EXPR,
    st.lists(FIELD, min_size=5, max_size=5).map(" ".join),
    st.lists(FIELD, min_size=0, max_size=7).map(lambda fs: "\t ".join(fs)),
    st.sampled_from(list(schedule.ALIASES) + ["@reboot", "@REBOOT", "@Daily", "@x", "@", ""]),
    st.text(max_size=20),
)
ZONES = ["UTC", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Asia/Kathmandu",
         "Pacific/Chatham", "America/St_Johns", "Pacific/Kiritimati", "Africa/Casablanca"]
ZONE_TEXT = st.one_of(
    st.sampled_from(ZONES), st.text(max_size=24),
    st.sampled_from(["../../etc/passwd", "/etc/localtime", ":UTC", ":/usr/share/zoneinfo/UTC",
                     "", " ", "America", "posixrules", "Factory", "EST5EDT", "zone.tab",
                     "tzdata.zi", "leapseconds", "Europe/../UTC", "UTC\x00", "utc", "GMT+5",
                     "/", ".", "..", "Etc/GMT-14"]))
WHEN = st.datetimes(min_value=datetime(1971, 1, 2), max_value=datetime(2200, 1, 1),
                    timezones=st.just(UTC))


@FUZZ
@given(st.one_of(st.none(), ZONE_TEXT),
       st.dictionaries(st.sampled_from(["CRON_TZ", "TZ"]), ZONE_TEXT, max_size=2),
       st.one_of(st.none(), ZONE_TEXT))
def test_resolve_zone_is_a_zone_or_a_clean_error(name, environ, system_zone):
    try:
        zone, zone_name = schedule.resolve_zone(name, environ, system_zone)
    except UsageError:
        return
    assert isinstance(zone, ZoneInfo) and zone_name


@FUZZ
@given(EXPR, st.sampled_from(ZONES), WHEN)
def test_schedules_parse_to_consistent_fire_times_or_a_clean_error(expr, zone_name, t):
    try:
        cron = schedule.expand(expr)
        sched = schedule.Schedule.parse(expr, ZoneInfo(zone_name), zone_name)
    except UsageError:
        return
    assert len(cron.split()) == 5
    try:
        before = sched.prev_at_or_before(t)
        after = sched.next_after(t)
    except UsageError:  # "does not fire within 50 years" of t
        return
    assert before <= t < after
    assert sched.next_after(before) == after  # nothing fires in (before, t]
    assert sched.prev_at_or_before(after) == after
    slot, skew = sched.slot_for_firing(t)
    assert slot is None or (slot <= t + timedelta(seconds=5) and math.isfinite(skew))
    explained = schedule.explain(expr, sched.zone, zone_name, "UTC", t, 3)
    assert all(a < b for a, b in zip(explained.next, explained.next[1:]))
    assert not explained.next or explained.next[0] == after


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["30 1 * * *", "0 0 1 1 *", "* * * * *", "0 0 29 2 1"]),
       st.sampled_from(["UTC", "Pacific/Kiritimati", "Etc/GMT+12"]),
       st.sampled_from([("date", "0001-01-01"), ("date", "9999-12-31"), ("at", "0001-01-01T00:00"),
                        ("at", "9999-12-31T23:59"), ("at", "0001-01-01T00:00+14:00"),
                        ("at", "9999-12-31T23:59-12:00")]))
@example("30 1 * * *", "UTC", ("date", "0001-01-01"))
def test_manual_slots_at_the_ends_of_the_calendar_are_a_clean_error(expr, zone, option):
    kind, value = option
    job = build({"schedule": expr, "tz": zone, kind: value})
    try:
        timing = firing.resolve_timing(job, {})
        plan_manual(timing.schedule, date=job.date, at=job.at, key_template=job.key)
    except CronwrapError:
        pass


KEY_TEXT = st.one_of(
    st.text(max_size=30),
    st.lists(st.sampled_from(["%Y", "%m", "%d", "%H", "%M", "%%", "%", "%E", "%O", "%-d", "%:z",
                              "%Q", "%f", "%G", "%V", "%j", "%s", "%c", "'", "\"", "/", "..", "ü",
                              "-", " ", "\\", ";--"]), max_size=8).map("".join))


@FUZZ
@given(KEY_TEXT, WHEN, st.sampled_from(ZONES))
@example("%0%%%f:%D", datetime(2000, 1, 1, 0, 0, 0, 4087, tzinfo=timezone.utc), "UTC")
def test_key_templates_are_accepted_only_when_they_give_usable_keys(template, slot, zone):
    try:
        schedule.validate_key_template(template)
    except UsageError:
        return
    try:
        key = schedule.run_key(slot.astimezone(ZoneInfo(zone)), template)
    except UsageError:
        return
    assert key and len(key) <= schedule.MAX_KEY_LENGTH
    assert not any(c in key for c in "\0\n\r")


def test_a_key_template_that_is_not_utf8_is_a_clean_error():
    try:
        schedule.validate_key_template("\udcff%Y-%m-%d")
    except CronwrapError:
        pass


# -- env files -------------------------------------------------------------------------------

MARKER = "S3cr3t-V4lue"


def file_text(text: str) -> str:
    """``text`` as a file can hold it. st.text() draws lone surrogates, and only U+DC80-U+DCFF
    stand for bytes (an undecodable byte, under surrogateescape); any other one is written as
    U+FFFD, so that every example can be written. A fresh clone's run once drew U+D800."""
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" and not "\udc80" <= c <= "\udcff"
                   else c for c in text)


def file_bytes(text: str) -> bytes:
    return file_text(text).encode("utf-8", "surrogateescape")


def read_env(data: bytes) -> dict[str, str]:
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    try:
        return spec.read_env_file(Path(f.name))
    finally:
        os.unlink(f.name)


ENV_LINE = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,8}\Z"), st.text(max_size=12)),
    st.builds(lambda k, v: f"export {k} = '{v}'", st.from_regex(r"\A[A-Z_]{1,5}\Z"), st.text(max_size=8)),
    st.sampled_from(["", "# comment", "   ", "=x", "1A=x", "A B=c", "A", "A=\x00", "export", "é=1",
                     f"{MARKER}", f"bad line {MARKER}", f"X Y={MARKER}", f"={MARKER}"]),
    st.text(max_size=20),
)


@FUZZ
@given(st.one_of(st.binary(max_size=200),
                 st.lists(ENV_LINE, max_size=8).map(lambda ls: file_bytes("\n".join(ls)))))
@example(file_bytes(f"A=1\n\ud800\n{MARKER} \udcff\n"))
def test_env_files_give_variables_or_an_error_that_never_shows_a_value(data):
    try:
        env = read_env(data)
    except UsageError as exc:
        assert MARKER not in str(exc)  # the line is named, never shown
        assert "\n" not in str(exc)
        return
    for key, value in env.items():
        assert spec.valid_env_key(key) and "\0" not in value


SAFE_VALUE = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"),
                                   blacklist_characters="\x85"), max_size=16)


@FUZZ
@given(st.dictionaries(st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,10}\Z"), SAFE_VALUE, max_size=6),
       st.sampled_from(["\n", "\r\n"]))
def test_env_file_values_round_trip(env, newline):
    def plain(v: str) -> bool:
        return v == v.strip() and not (len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"")
    assume(all(plain(v) for v in env.values()))
    text = newline.join(f"{k}={v}" for k, v in env.items()) + newline
    assert read_env(text.encode()) == env


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["\u2028", "\u2029", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85"]))
@example("\u2028")
def test_env_file_values_keep_unicode_line_separators(separator):
    assert read_env(f"A=x{separator}B=y\n".encode()) == {"A": f"x{separator}B=y"}


# -- config files ----------------------------------------------------------------------------

TOML_KEY = st.one_of(st.sampled_from([o.name for o in spec.OPTIONS if o.name != "env-file"]),
                     st.sampled_from([o.attr for o in spec.OPTIONS]),
                     st.sampled_from(["name", "command", "timeot", "x"]),
                     st.from_regex(r"\A[a-z_-]{1,10}\Z"))
TOML_VALUE = st.one_of(
    NEAR.map(lambda v: '"' + v.replace("\\", "\\\\").replace('"', '\\"')
             .replace("\n", "\\n").replace("\x00", "\\u0000") + '"'),
    st.integers(-5, 10**6).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["true", "false", "[1, 2]", "{a = 1}", "1979-05-27", "07:32:00", "'lit'",
                     '"""multi\nline"""', "inf", "nan", "0x1F", "1_000"]),
)
TOML_LINE = st.one_of(
    st.builds(lambda k, v: f"{k} = {v}", TOML_KEY, TOML_VALUE),
    st.sampled_from(["[defaults]", "[jobs.settle]", '[jobs."db.backup"]', "[jobs]", "[other]",
                     "[[defaults]]", "[jobs.'../x']", "[jobs.a.b]", "", "# comment", "jobs = 3",
                     "timeout = '5m'", "[defaults", "x =", '[jobs."a\\nb"]', '[jobs."\\u0007"]',
                     'jobs = {"x\\ty" = 1}', '"\\u2028" = 1', "a = " + "[" * 3000]),
    st.text(max_size=15),
)


def load(text: str) -> config.Config:
    with tempfile.NamedTemporaryFile("wb", delete=False, suffix=".toml") as f:
        f.write(file_bytes(text))
    try:
        return config.load_config(Path(f.name))
    finally:
        os.unlink(f.name)


@FUZZ
@given(st.lists(TOML_LINE, max_size=10).map("\n".join))
@example('[defaults]\ntimeout = "\ud800"\nschedule = "\udcff%Y"')
def test_config_files_load_or_give_a_clean_error(text):
    try:
        loaded = load(text)
    except CronwrapError as exc:
        assert str(exc).isprintable(), str(exc)  # one line, whatever the file holds
        return
    for job in (None, "settle", "db.backup"):
        merged = config.merge({}, {}, loaded, job)
        try:
            spec.build_spec(["true"], merged.values, {}, lambda: "host", merged.labels,
                            warn=lambda note: None)
        except CronwrapError:
            pass


def test_a_config_value_int_refuses_is_a_clean_error():
    try:
        load('[defaults]\nretries = "²"\n')
    except CronwrapError:
        pass


# -- crontab text ----------------------------------------------------------------------------

CRON_WORD = st.one_of(
    st.sampled_from(["/usr/bin/backup.sh", "echo", "cd /tmp", "&&", "||", ";", "|", ">", ">>",
                     "2>&1", "/var/log/x.log", "<", "'quoted arg'", '"dq $HOME"', "%", "\\%",
                     "a%b", "$(date +\\%F)", "`id`", "&", "(", ")", "{", "}", "sh -c 'x'", "bash",
                     "-c", "VAR=1", "run", "--", "-n", "x", "\\", "#", "'", '"', "\t", "ü", "if",
                     "then", "fi", "exec", "nice", "timeout 5", "<<EOF", "2>/dev/null", "&>"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=6))
CRON_LINE = st.one_of(
    st.builds(lambda s, c: f"{s} {c}", EXPR, st.lists(CRON_WORD, max_size=8).map(" ".join)),
    st.builds(lambda s, u, c: f"{s} {u} {c}", EXPR, st.sampled_from(["root", "nobody", "-", "1"]),
              st.lists(CRON_WORD, max_size=6).map(" ".join)),
    st.sampled_from(["", "# comment", "  # indented", "SHELL=/bin/bash", "SHELL=/usr/bin/fish",
                     "CRON_TZ=Europe/Berlin", "TZ=Asia/Shanghai", "CRON_TZ=Mars/Base", 'MAILTO=""',
                     "PATH=/usr/bin", 'X = "a b"', "\r", "=x", "*=x", "@reboot /bin/true"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=30))
CRONTAB = st.builds(lambda ls, end: "\n".join(ls) + end, st.lists(CRON_LINE, max_size=8),
                    st.sampled_from(["", "\n", "\r\n"]))
NOW = datetime(2026, 1, 15, tzinfo=UTC)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CRONTAB, st.booleans())
def test_crontab_lint_wrap_and_unwrap_never_fail_and_round_trip(text, system):
    lines = text.count("\n") + 1
    for finding in crontab.lint(text, system=system, system_zone="Europe/Berlin", now=NOW):
        assert 1 <= finding.line <= lines
    wrapped = crontab.wrap(text, system=system, cronwrap="/usr/local/bin/cronwrap")
    assert crontab.wrap(wrapped, system=system, cronwrap="/usr/local/bin/cronwrap") == wrapped
    if "cronwrap" not in text:
        assert crontab.unwrap(wrapped, system=system) == text
        if not system:  # unwrap() without a mode reads a line as a user line first
            assert crontab.unwrap(wrapped) == text
    crontab.lint(wrapped, system=system, system_zone="UTC", now=NOW)


@FEW
@given(st.text(max_size=200))
def test_crontab_functions_take_any_text(text):
    crontab.lint(text, system=False, system_zone="UTC", now=NOW)
    assert crontab.unwrap(crontab.wrap(text)) == text or "cronwrap" in text


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from([" ", "\t", "\r", "\n", "\\", "'", '"', "#", "$", "a",
                                           "é", "%"]), st.text(max_size=3)), max_size=30)
       .map("".join))
@example("a\\")
@example('"a\\')
@example('"\\x\\"\\\\"')
@example("'a'\"b\"c d")
@example('""')
def test_crontab_words_split_as_shlex_splits_them(text):
    """The linear split of crontab words (issue 20 §6: shlex is quadratic in a long word)."""
    import shlex

    from cronwrap.crontab.shell import split_words

    try:
        expected = shlex.split(text)
    except ValueError:
        with pytest.raises(ValueError):
            split_words(text)
    else:
        assert split_words(text) == expected


# -- the run command line --------------------------------------------------------------------

ARG = st.one_of(
    st.sampled_from(["--", "-n", "--name", "-s", "--timeout", "--force", "--force=1", "-nfoo",
                     "--timeout=", "--timeout=5", "-", "--x", "---", "-ss", "-s9", "--name=a=b",
                     "--schedule", "*", "--lease", "-n=", "--preserve-status"]),
    st.text(max_size=8))


@FUZZ
@given(st.lists(ARG, max_size=10))
def test_run_argv_parses_to_options_and_a_command_or_a_clean_error(argv):
    assume("-h" not in argv and "--help" not in argv)
    try:
        given, command = runargs.parse_run_args(argv)
    except UsageError as exc:
        assert str(exc).startswith("run: ")
        return
    assert set(given) <= set(spec.BY_LONG)
    for name, value in given.items():
        assert (value is True) == spec.BY_LONG[name].is_flag
        assert value is True or isinstance(value, str)
    assert command == argv[len(argv) - len(command):]  # the command is the tail, untouched


@FEW
@given(st.lists(st.text(max_size=6), max_size=5))
def test_everything_after_double_dash_is_the_command(words):
    given, command = runargs.parse_run_args(["-n", "x", "--", *words])
    assert given == {"name": "x"} and command == words


# -- the real executable with nasty argv -----------------------------------------------------

def run_real(args: list, tmp_path: Path, env: dict | None = None, limit_memory: bool = False):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
    environ["CRONWRAP_HOME"] = str(tmp_path / "home")
    environ.update(env or {})

    def cap() -> None:  # a runaway read fails fast instead of eating the machine
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run([*cronwrap_argv(), *args], env=environ, capture_output=True, timeout=60,
                          preexec_fn=cap if limit_memory else None)


def assert_clean(proc, allowed=(125,)) -> None:
    err = proc.stderr.decode(errors="replace")
    assert "Traceback" not in err and "internal error" not in err, err[-800:]
    assert proc.returncode in allowed, (proc.returncode, err[-800:])


NASTY = [
    ["run"], ["run", "--"], ["run", "-n"], ["run", "--name="], ["run", "-n", "", "--", "true"],
    ["run", "--timeout=5x", "--", "true"], ["run", "--timeout", "inf", "--", "true"],
    ["run", "--timeout", "nan", "--", "true"], ["run", "--timeout", "1e309", "--", "true"],
    ["run", "--timeout", "9" * 400, "--", "true"], ["run", "--lease", "-1", "--", "true"],
    ["run", "--signal", "0", "--", "true"], ["run", "--signal", "99999999999999999999", "--", "true"],
    ["run", "--signal", "SIGRTMAX+1", "--", "true"], ["run", "--retry-on", ",,,", "--", "true"],
    ["run", "--retry-on", "1-" + "9" * 400, "--", "true"], ["run", "--force=yes", "--", "true"],
    ["run", "--max-catchup", "99999999999999999999", "--", "true"],
    ["run", "--ping", "http://[::1", "--", "true"], ["run", "--db", "mysql://x", "--", "true"],
    ["run", "--db", "sqlite:///", "--", "true"], ["run", "--db", "sqlite:///dev/null", "--", "true"],
    ["run", "--lock-file", "/", "--", "true"], ["run", "--lock-file", "/dev/null", "--", "true"],
    ["run", "--env-file", "/", "--", "true"], ["run", "--env-file", "/nonexistent", "--", "true"],
    ["run", "-n", "x", "--schedule", "@reboot", "--", "true"],
    ["run", "-n", "x", "--schedule", "*/" + "9" * 300 + " * * * *", "--tz", "UTC", "--", "true"],
    ["run", "-n", "x", "--schedule", "* * * * *", "--tz", "../../../etc/passwd", "--", "true"],
    ["run", "-n", "x", "--schedule", "@daily", "--key", "%", "--", "true"],
    ["run", "-n", "x", "--schedule", "@daily", "--at", "9999-99-99", "--", "true"],
    ["run", "-n", "x", "--schedule", "@daily", "--date", "2026-02-30", "--", "true"],
    ["run", "-n", "x", "--date", "2026-01-01", "--", "true"],
    [b"run", b"-n", b"\xff\xfe", b"--", b"true"], [b"run", b"-n", b"x", b"--host", b"h\xff", b"--", b"true"],
    [b"run", b"-n", b"x", b"--schedule", b"\xff * * * *", b"--", b"true"],
    [b"run", b"-n", b"x", b"--schedule", b"@daily", b"--tz", b"\xff", b"--", b"true"],
    [b"run", b"-n", b"x", b"--ping", b"http://x/\xff", b"--", b"true"],
    ["explain", "61 * * * *"], ["explain", "* * * * *", "--count", "-1"],
    ["explain", "* * * * *", "--tz", "\u202e"], ["status", "--since", "forever"],
    ["history", "x", "--limit", "0"], ["logs", "x", "abc"], ["prune", "--older-than", "-1d"],
    ["wrap", "/nonexistent"], ["lint", "/dev/null/x"], ["--frobnicate"], ["frobnicate"],
]


@pytest.mark.parametrize("args", NASTY, ids=lambda a: " ".join(map(repr, a))[:60])
def test_nasty_argv_is_a_clean_error(tmp_path, args):
    assert_clean(run_real(args, tmp_path), allowed=(0, 1, 125))


@pytest.mark.parametrize("variable, value", [
    ("CRONWRAP_TIMEOUT", "5x"), ("CRONWRAP_FORCE", "maybe"), ("CRONWRAP_NAME", "a\nb"),
    ("CRONWRAP_DB", "nope"), ("CRONWRAP_CONFIG", "/nonexistent.toml"), ("CRONWRAP_CONFIG", "/"),
    ("CRONWRAP_SCHEDULE", "@yearly @daily"), ("CRONWRAP_LEASE", "0"), ("CRON_TZ", "Nowhere/City"),
])
def test_nasty_environment_is_a_clean_error(tmp_path, variable, value):
    args = {"CRON_TZ": ["--schedule", "@daily", "--"], "CRONWRAP_NAME": ["--"]}.get(
        variable, ["-n", "x", "--"])
    proc = run_real(["run", *args, "true"], tmp_path, env={variable: value})
    assert_clean(proc)
    assert len(proc.stderr.decode().strip().splitlines()) == 1


def test_a_named_job_whose_script_name_has_spaces_runs(tmp_path):
    folder = tmp_path / "My Scripts"
    folder.mkdir()
    job = folder / "Nightly Backup.sh"
    job.write_text("#!/bin/sh\necho backed up\n")
    job.chmod(0o755)
    proc = run_real(["run", "-n", "backup", "--", str(job)], tmp_path)
    assert_clean(proc, allowed=(0,))
    assert proc.stdout == b"backed up\n"


def test_a_job_with_a_non_utf8_argument_runs_and_is_recorded(tmp_path):
    proc = run_real([b"run", b"-n", b"raw", b"--", b"sh", b"-c", b'printf "%s" "$1"', b"sh",
                     b"caf\xe9"], tmp_path)
    assert_clean(proc, allowed=(0,))
    assert proc.stdout == b"caf\xe9"


# Each of these once gave an "internal error" (found by this file, since fixed).
ONCE_BROKEN = [
    ["run", "-n", "x", "--skip-exit-code", "²", "--", "true"],  # '²'.isdigit(), int('²') fails
    ["run", "-n", "x", "--retries", "9" * 5000, "--", "true"],  # int() stops at 4300 digits
    ["run", "-n", "x", "--schedule", "30 1 * * *", "--date", "0001-01-01", "--", "true"],
    ["run", "-n", "x", "--schedule", "30 1 * * *", "--at", "9999-12-31T23:59", "--", "true"],
    ["explain", "0 0 1 1 *", "--from", "9999-12-31T00:00"],  # the ends of the calendar
    ["run", "-n", "x", "--lock-file", "~no-such-user-cronwrap/x.lock", "--", "true"],
    [b"run", b"-n", b"x", b"--schedule", b"@daily", b"--key", b"\xff%Y", b"--", b"true"],
    [b"status", b"\xff"], [b"history", b"\xff"], [b"logs", b"\xff"], [b"unlock", b"\xff"],
    [b"run", b"-n", b"x", b"--db", b"postgresql://u:p@\xff/db", b"--", b"true"],  # not UTF-8
    ["history", "x", "--limit", "9" * 30], ["logs", "x", "9" * 30],  # past SQLite's integers
    ["run", "-n", "x", "--env-file", "/dev/zero", "--", "true"],  # an endless "file"
]


@pytest.mark.parametrize("args", ONCE_BROKEN, ids=lambda a: " ".join(map(repr, a))[:60])
def test_argv_that_once_broke_cronwrap_is_a_clean_error(tmp_path, args):
    assert_clean(run_real(args, tmp_path, limit_memory=True), allowed=(0, 1, 125))


def test_a_missing_command_whose_path_is_not_utf8_is_127_and_recorded(tmp_path):
    proc = run_real([b"run", b"-n", b"nf", b"--", b"/nonexistent/caf\xe9/job"], tmp_path)
    assert_clean(proc, allowed=(127,))
