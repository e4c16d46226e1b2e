"""cronwrap.crontab: parsing, wrap/unwrap round trips, and lint findings. Pure: no I/O."""

from __future__ import annotations

import shlex
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwrap import crontab
from cronwrap.crontab import (
    LINT_CODES,
    NAME_RE,
    Blank,
    Comment,
    EnvAssignment,
    Finding,
    Invalid,
    Job,
    derive_name,
    diff,
    format_finding,
    has_errors,
    lint,
    parse,
    split_percent,
    unwrap,
    wrap,
)
from cronwrap.crontab.daemon import CronDaemon, cron_daemon
from cronwrap.crontab.shell import backgrounds, basename, percent_index, unescape_percent
from cronwrap.errors import UsageError

from tests.unit.crontab_corpus import SYSTEM_CRONTAB, SYSTEM_LINES, USER_CRONTAB, USER_LINES

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)
CRONWRAP = "/usr/local/bin/cronwrap"
EXTRA = ("--timeout", "25m", "--key", "%Y-%m-%d", "--db", "postgresql://cw@db/ledger?x=1&y=2")
SHELLS = {"sh", "bash"}


def jobs(text: str, system: bool = False) -> list[Job]:
    return [e for e in parse(text, system=system) if isinstance(e, Job)]


def sh_words(command: str) -> list[str] | None:
    """The words sh sees for a crontab command: cron's % rule first, then shell quoting."""
    cmd, _ = split_percent(command)
    try:
        return shlex.split(unescape_percent(cmd))
    except ValueError:
        return None


def codes(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings}


def only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, findings
    return matching[0]


def lint_text(text: str, **kwargs) -> list[Finding]:
    kwargs.setdefault("system_zone", "UTC")
    kwargs.setdefault("now", NOW)
    return lint(text, **kwargs)


# --------------------------------------------------------------------------------------------
# corpus


def test_corpus_is_big_and_varied():
    assert len(USER_LINES) + len(SYSTEM_LINES) >= 50
    kinds = {type(e) for e in parse(USER_CRONTAB)}
    assert {Blank, Comment, EnvAssignment, Job} <= kinds
    assert len(jobs(USER_CRONTAB)) >= 50


@pytest.mark.parametrize(("text", "system"), [(USER_CRONTAB, False), (SYSTEM_CRONTAB, True)])
def test_parse_keeps_every_byte(text, system):
    assert "\n".join(e.text for e in parse(text, system=system)) == text


@pytest.mark.parametrize(("text", "system"), [(USER_CRONTAB, False), (SYSTEM_CRONTAB, True)])
def test_round_trip_whole_file(text, system):
    wrapped = wrap(text, cronwrap=CRONWRAP, extra_args=EXTRA, system=system)
    assert wrapped != text
    assert unwrap(wrapped) == text
    assert unwrap(wrapped, system=system) == text


@pytest.mark.parametrize(
    ("line", "system"),
    [(line, False) for line in USER_LINES] + [(line, True) for line in SYSTEM_LINES],
)
def test_round_trip_line_by_line(line, system):
    for extra in ((), EXTRA):
        wrapped = wrap(line, extra_args=extra, system=system)
        assert unwrap(wrapped) == line
        assert wrap(wrapped, extra_args=extra, system=system) == wrapped


@pytest.mark.parametrize(("text", "system"), [(USER_CRONTAB, False), (SYSTEM_CRONTAB, True)])
def test_wrap_is_idempotent(text, system):
    once = wrap(text, cronwrap=CRONWRAP, extra_args=EXTRA, system=system)
    assert wrap(once, cronwrap=CRONWRAP, extra_args=EXTRA, system=system) == once


def starts_daemon(job: Job) -> bool:
    return job.is_reboot or backgrounds(split_percent(job.command)[0], "sh")


@pytest.mark.parametrize(("text", "system"), [(USER_CRONTAB, False), (SYSTEM_CRONTAB, True)])
def test_every_job_is_wrapped_and_non_jobs_are_untouched(text, system):
    before = parse(text, system=system)
    after = parse(wrap(text, system=system), system=system)
    for old, new in zip(before, after, strict=True):
        if isinstance(old, Job) and old.problem is None and not starts_daemon(old):
            assert new.command.startswith("cronwrap run -n "), old.text
            assert new.text[: new.command_start] == old.text[: old.command_start]
        else:
            assert new.text == old.text


@pytest.mark.parametrize(("text", "system"), [(USER_CRONTAB, False), (SYSTEM_CRONTAB, True)])
def test_wrapped_lines_read_as_cronwrap_run_then_the_original(text, system):
    wrapped = wrap(text, cronwrap=CRONWRAP, extra_args=EXTRA, system=system)
    for old, new in zip(jobs(text, system), jobs(wrapped, system), strict=True):
        if new.text == old.text:
            assert old.problem or starts_daemon(old), old.text
            continue
        if new.command.endswith(" -- " + old.command):
            # a simple command follows byte for byte (even one sh would reject)
            head = sh_words(new.command[: -len(old.command)])
            rest = sh_words(old.command)
        else:
            words = sh_words(new.command)
            head, rest = words[: words.index("--") + 1], words[words.index("--") + 1 :]
            assert_compound(old.command, new.command, rest)
        expected = [CRONWRAP, "run", "-n", head[3]]
        if not old.is_reboot:
            expected += ["--schedule", old.schedule]
        assert head == [*expected, *EXTRA, "--"], new.text
        assert NAME_RE.fullmatch(head[3])
        if rest is not None:
            assert sh_words(new.command)[len(head) :] == rest


def assert_compound(original: str, wrapped: str, rest: list[str]):
    # the %-stdin part is cron's, not the shell's: it stays byte for byte, outside the quotes
    assert split_percent(wrapped)[1] == split_percent(original)[1]
    cmd = unescape_percent(split_percent(original)[0])
    shell, flag, inner, *tail = rest
    assert (basename(shell), flag) in {("sh", "-c"), ("bash", "-c")}
    assert cmd.startswith(inner) and inner.strip()
    assert tail == shlex.split(cmd[len(inner) :])  # only trailing redirections stay outside


def test_names_are_unique_within_a_file():
    names = [j.command.split()[3] for j in jobs(wrap(USER_CRONTAB))]
    assert len(names) == len({n.lower() for n in names})
    assert {"settle", "settle-2", "settle-3"} <= set(names)


# --------------------------------------------------------------------------------------------
# wrap: the rule, line by line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "30 1 * * * /usr/local/bin/settle.sh >> /var/log/settle.log 2>&1",
            "30 1 * * * cronwrap run -n settle --schedule '30 1 * * *' -- "
            "/usr/local/bin/settle.sh >> /var/log/settle.log 2>&1",
        ),
        (
            "*/5 * * * * cd /x && ./y.sh >> /var/log/y.log 2>&1",
            "*/5 * * * * cronwrap run -n y --schedule '*/5 * * * *' -- "
            "/bin/sh -c 'cd /x && ./y.sh' >> /var/log/y.log 2>&1",
        ),
        (
            "0 0 * * * a | b < in",
            "0 0 * * * cronwrap run -n a --schedule '0 0 * * *' -- /bin/sh -c 'a | b < in'",
        ),
        (
            "@daily echo 'it'\\''s' > /tmp/x%stdin",
            "@daily cronwrap run -n echo --schedule @daily -- "
            "/bin/sh -c 'echo '\\''it'\\''\\'\\'''\\''s'\\''' > /tmp/x%stdin",
        ),
        (
            "0 0 * * * sh -c 'a; b'",
            "0 0 * * * cronwrap run -n sh --schedule '0 0 * * *' -- "
            "/bin/sh -c 'sh -c '\\''a; b'\\'''",
        ),
    ],
)
def test_wrap_shapes(line, expected):
    assert wrap(line) == expected
    assert unwrap(expected) == line


def test_crontab_shell_runs_compound_commands():
    text = "SHELL=/bin/bash\n0 0 * * * cd /x && ./y\n"
    assert "-- /bin/bash -c 'cd /x && ./y'" in wrap(text)
    assert unwrap(wrap(text)) == text


def test_compound_commands_under_an_unknown_shell_are_left_alone():
    text = "SHELL=/usr/bin/fish\n0 0 * * * cd /x; and ./y\n0 1 * * * /usr/bin/simple\n"
    wrapped = wrap(text).split("\n")
    assert wrapped[1] == "0 0 * * * cd /x; and ./y"
    assert wrapped[2].startswith("0 1 * * * cronwrap run -n simple")


def test_zone_lines_add_nothing():
    text = "CRON_TZ=Asia/Shanghai\n0 2 * * * /usr/bin/x\n"
    assert wrap(text).split("\n")[1] == "0 2 * * * cronwrap run -n x --schedule '0 2 * * *' -- /usr/bin/x"


def test_extra_args_are_quoted_and_percent_escaped():
    line = wrap("0 2 * * * /usr/bin/x", extra_args=EXTRA)
    assert "--key \\%Y-\\%m-\\%d" in line
    assert "'postgresql://cw@db/ledger?x=1&y=2'" in line
    assert percent_index(line) is None  # cron sees no stdin in the options
    assert sh_words(jobs(line)[0].command)[6:13] == [*EXTRA, "--"]


@pytest.mark.parametrize("arg", ["%", "a\\%b", "100%", "%%", "--", "it's", "x y", ""])
def test_awkward_extra_args_survive_cron_and_sh(arg):
    line = wrap("0 2 * * * /usr/bin/x", extra_args=("--on-failure", arg))
    words = sh_words(jobs(line)[0].command)
    assert words[6:9] == ["--on-failure", arg, "--"]
    assert unwrap(line) == "0 2 * * * /usr/bin/x"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cronwrap": "/usr/bin/python3"}, "ending in /cronwrap"),
        ({"extra_args": "--timeout 5m"}, "list of words"),
        ({"extra_args": ("--on-failure", "a\nb")}, "line break"),
        ({"extra_args": ("--schedule=@daily",)}, "itself"),
        ({"extra_args": ("-n", "x")}, "itself"),
    ],
)
def test_bad_wrap_arguments(kwargs, message):
    with pytest.raises(UsageError, match=message):
        wrap("0 0 * * * /bin/true", **kwargs)


def test_already_wrapped_lines_keep_their_names_and_reserve_them():
    text = (
        "0 0 * * * /usr/local/bin/cronwrap run -n settle --timeout 5m -- /opt/settle.sh\n"
        "0 1 * * * /opt/settle.sh\n"
    )
    wrapped = wrap(text).split("\n")
    assert wrapped[0] == text.split("\n")[0]
    assert " run -n settle-2 " in wrapped[1]


def test_invalid_lines_are_left_for_lint():
    text = "61 * * * * /bin/x\n0 5 * *\n@fortnightly /bin/y\n@Daily /bin/z\n"
    assert wrap(text) == text
    no_user = "0 0 * * * /usr/bin/x arg\n"
    assert wrap(no_user, system=True) == no_user


def test_unwrap_leaves_hand_written_cronwrap_lines():
    text = (
        "0 0 * * * cronwrap run -n nightly --schedule '0 0 * * *' -- /opt/settle.sh\n"
        "0 0 * * * cronwrap run -n settle --schedule '0 1 * * *' -- /opt/settle.sh\n"
        "0 0 * * * cronwrap run -n settle -- a && b\n"
        "0 0 * * * cronwrap status --check\n"
    )
    assert unwrap(text) == text


def test_diff_shows_the_change():
    before = "0 0 * * * /bin/x"
    out = diff(before, wrap(before))
    assert out.startswith("--- a/crontab\n+++ b/crontab\n")
    assert "-0 0 * * * /bin/x\n\\ No newline at end of file\n" in out
    assert "+0 0 * * * cronwrap run -n x" in out
    assert diff(before, before) == ""


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("/usr/local/bin/settle.sh >> /var/log/settle.log 2>&1", "settle"),
        ("cd /srv && ./run.sh", "run"),
        ("/usr/bin/php /var/www/artisan schedule:run", "artisan"),
        ("python3 -m app.jobs", "app.jobs"),
        ("test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )",
         "cron.daily"),
        ("FOO=1 nice -n 5 timeout 10m /opt/bin/étude.py", "etude"),
        ("/usr/bin/flock -n /tmp/l /usr/local/bin/poll", "poll"),
        ("if [ -f /x ]; then exit 0; fi", "exit"),
        ("$HOME/bin/backup.sh", "backup"),
        ("A=1 /usr/bin/env", "env"),
        ("'/opt/my tools/--weird--.sh'", "weird"),
        (">/dev/null", "job"),
        ("☃", "job"),
        ("x" * 300, "x" * 120),
    ],
)
def test_derive_name(command, name):
    assert derive_name(command) == name
    assert NAME_RE.fullmatch(derive_name(command))


# --------------------------------------------------------------------------------------------
# parsing details


def test_parse_entries():
    text = (
        "  # comment\n"
        'MAILTO = "ops@example.com"\n'
        "*=x\n"
        "0 0 * * * a=b\n"
        "17 *\t* * *\troot    cd / && run-parts --report /etc/cron.hourly\n"
    )
    user = parse(text)
    assert isinstance(user[0], Comment)
    assert (user[1].name, user[1].value) == ("MAILTO", "ops@example.com")
    assert isinstance(user[2], EnvAssignment)  # cron tries an assignment first, as we do
    assert isinstance(user[3], Job) and user[3].command == "a=b"
    system = parse(text, system=True)[4]
    assert system.user.text == "root"
    assert system.command == "cd / && run-parts --report /etc/cron.hourly"
    assert system.schedule == "17 * * * *"
    assert isinstance(parse("0 0 * *")[0], Invalid)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("a%b%c", ("a", "%b%c")),
        ("a\\%b%c", ("a\\%b", "%c")),
        ("a\\\\%b", ("a\\\\", "%b")),  # the backslash is escaped, so the % is not
        ("plain", ("plain", "")),
    ],
)
def test_split_percent(command, expected):
    assert split_percent(command) == expected


def test_system_crontab_paths():
    assert crontab.is_system_crontab("/etc/crontab")
    assert crontab.is_system_crontab("/etc/cron.d/php")
    assert not crontab.is_system_crontab("/var/spool/cron/crontabs/alice")


# --------------------------------------------------------------------------------------------
# lint


@pytest.mark.parametrize(
    ("text", "code", "line", "column", "severity"),
    [
        ("MAILTO=a\n0 25 * * * /bin/x >/dev/null\n", "E001", 2, 3, "error"),
        ("0 0 L * * /bin/x\n", "E001", 1, 5, "error"),
        ("0 0 * foo * /bin/x\n", "E001", 1, 7, "error"),
        ("0 0 31 2 * /bin/x\n", "E001", 1, 5, "error"),
        ("0 5 * *\n", "E002", 1, 8, "error"),
        ("0 0 * * * * /bin/x\n", "E002", 1, 11, "error"),
        ("@fortnightly /bin/x\n", "E003", 1, 1, "error"),
        ("0 0 * * * /bin/date +%Y-%m-%d > /tmp/d\n", "E005", 1, 22, "error"),
        ("CRON_TZ=Mars/Olympus\n", "E006", 1, 9, "error"),
        ("0 0 * * * ./run.sh\n", "W001", 1, 11, "warning"),
        ("0 0 * * * cronwrap run -n x -- /bin/x\n", "W001", 1, 11, "warning"),
        ("0 0 * * * FOO=1 backup.sh\n", "W001", 1, 17, "warning"),
        ("0 0 1-7 * 1 /bin/x\n", "W002", 1, 5, "warning"),
        ("0 0 */2 * 1 /bin/x\n", "I001", 1, 5, "info"),
        ("0 0 1 * */2 /bin/x\n", "I001", 1, 9, "info"),
        ("*/5 * * * * /bin/x > /dev/null\n", "W005", 1, 1, "warning"),
        ("0 0 * * * /bin/x\n", "W006", 1, 11, "warning"),
        ('MAILTO=""\n\n0 0 * * * /bin/x\n', "W007", 3, 11, "warning"),
        ("0 0 * * * /bin/x >/dev/null\n1 1 * * * /bin/x >/dev/null\n", "W008", 2, 11, "warning"),
        ("TZ=Asia/Tokyo\n", "W009", 1, 1, "warning"),
        ("0 0 * * * /bin/x > /dev/null", "W010", 1, None, "warning"),
    ],
)
def test_lint_finds(text, code, line, column, severity):
    finding = only(lint_text(text), code)
    assert (finding.line, finding.column, finding.severity) == (line, column, severity)
    assert finding.message and finding.fix


# one sample crontab (text, system) per code: together they report every code there is
CODE_SAMPLES = {
    "E001": ("61 * * * * /bin/x\n", False),
    "E002": ("0 5 * *\n", False),
    "E003": ("@fortnightly /bin/x\n", False),
    "E004": ("0 0 * * * /usr/bin/x arg\n", True),
    "E005": ("0 0 * * * /bin/date +%Y > /tmp/d\n", False),
    "E006": ("CRON_TZ=Mars/Olympus\n", False),
    "W001": ("0 0 * * * ./run.sh\n", False),
    "W002": ("0 0 1-7 * 1 /bin/x\n", False),
    "W003": ("CRON_TZ=Europe/Berlin\n30 2 * * * /bin/x\n", False),
    "W004": ("CRON_TZ=Europe/Berlin\n30 2 * * * /bin/x\n", False),
    "W005": ("*/5 * * * * /bin/x\n", False),
    "W006": ("0 0 * * * /bin/x\n", False),
    "W007": ('MAILTO=""\n0 0 * * * /bin/x\n', False),
    "W008": ("0 0 * * * /bin/x\n1 1 * * * /bin/x\n", False),
    "W009": ("TZ=Asia/Tokyo\n", False),
    "W010": ("0 0 * * * /bin/x", False),
    "W011": ("@reboot cronwrap run -n a -- /opt/a\n", False),
    "W012": ("CRON_TZ=Asia/Kolkata\n0 2 * * * /bin/x\n", False),  # under DEBIAN_CRON
    "I001": ("0 0 */2 * 1 /bin/x\n", False),
    "I002": ("CRON_TZ=Asia/Shanghai\n0 2 * * * /bin/x\n", False),
}


DEBIAN_CRON = CronDaemon("debian", False, "test")
SAMPLE_DAEMONS = {"W012": DEBIAN_CRON}  # the daemon a sample needs (default: unknown)


def test_the_registry_holds_exactly_the_codes_lint_reports():
    assert sorted(CODE_SAMPLES) == sorted(LINT_CODES)
    samples = [(text, system, SAMPLE_DAEMONS.get(code))
               for code, (text, system) in CODE_SAMPLES.items()]
    reported = {f.code for text, system, daemon in [*samples, (USER_CRONTAB, False, None),
                                                    (SYSTEM_CRONTAB, True, None)]
                for f in lint_text(text, system=system, daemon=daemon)}
    assert reported == set(LINT_CODES)
    for code, (text, system) in CODE_SAMPLES.items():
        finding = only(lint_text(text, system=system, daemon=SAMPLE_DAEMONS.get(code)), code)
        assert finding.severity == LINT_CODES[code].severity
        assert finding.fix  # the registry's standard fix, or a more specific one


@pytest.mark.parametrize("code", sorted(LINT_CODES))
def test_each_code_is_documented_in_one_line(code):
    entry = LINT_CODES[code]
    assert entry.severity == {"E": "error", "W": "warning", "I": "info"}[code[0]]
    assert entry.summary.endswith(".") and "\n" not in entry.summary + entry.fix
    assert entry.fix and not entry.fix.endswith(".")


def test_lint_system_user_field():
    findings = lint_text("0 0 * * * /usr/bin/x arg\n", system=True)
    assert (only(findings, "E004").line, only(findings, "E004").column) == (1, 11)


def test_lint_dst_gap_and_overlap():
    text = "CRON_TZ=Europe/Berlin\n30 2 * * * /bin/x > /dev/null\n"
    findings = lint_text(text)
    gap, overlap = only(findings, "W003"), only(findings, "W004")
    assert gap.line == overlap.line == 2
    assert "2026-03-29" in gap.message and "02:30 does not exist" in gap.message
    assert "2026-10-25" in overlap.message and "02:30 happens twice" in overlap.message
    # the system zone counts too, and hours outside the change are fine
    assert codes(lint_text("0 2 * * * /bin/x >/dev/null\n", system_zone="America/New_York")) >= {
        "W003"
    }
    assert not codes(lint_text(text.replace("30 2", "30 4"))) & {"W003", "W004"}
    assert not codes(lint_text(text.replace("30 2", "30 *"))) & {"W003", "W004"}
    every_quarter = lint_text(text.replace("30 2", "*/15 2"))
    assert "the runs in 02:00–03:00 do not happen" in only(every_quarter, "W003").message
    assert "the runs in 02:00–03:00 happen twice" in only(every_quarter, "W004").message


def test_lint_zone_differs():
    text = "CRON_TZ=Asia/Shanghai\n0 2 * * * /bin/x > /dev/null\n"
    finding = only(lint_text(text), "I002")
    assert finding.message == "02:00 Asia/Shanghai is 18:00 UTC here (the day before)"
    assert "I002" not in codes(lint_text(text, system_zone="Asia/Shanghai"))


def test_lint_warns_where_cron_ignores_cron_tz_and_no_longer_says_it_reads_it():
    text = "CRON_TZ=Asia/Kolkata\n0 2 * * * /bin/x > /dev/null\n"
    finding = only(lint_text(text, daemon=DEBIAN_CRON), "W012")
    assert (finding.line, finding.column) == (1, 1)
    assert finding.message.startswith("CRON_TZ=Asia/Kolkata is ignored by this host's cron "
                                      "(Debian's cron; test): it fires the lines below at "
                                      "their times in the system zone (UTC)")
    assert finding.fix == "remove CRON_TZ and give the times in UTC, or run cronie, which " \
                          "honours CRON_TZ"
    assert "I002" not in codes(lint_text(text, daemon=DEBIAN_CRON))
    assert "W012" not in codes(lint_text(text, daemon=DEBIAN_CRON, system_zone="Asia/Kolkata"))
    cronie = only(lint_text(text, daemon=CronDaemon("cronie", True, "test")), "I002")
    assert "cronie honours CRON_TZ" in cronie.fix
    unknown = only(lint_text(text), "I002")
    assert "Debian's cron does not" in unknown.fix and "as cron does" not in unknown.fix


def test_the_cron_daemon_is_told_by_the_variable_dpkg_or_crond(tmp_path):
    assert cron_daemon({}, str(tmp_path)) is None
    crond = tmp_path / "usr/sbin/crond"
    crond.parent.mkdir(parents=True)
    (tmp_path / "busybox").write_text("")
    crond.symlink_to(tmp_path / "busybox")
    assert cron_daemon({}, str(tmp_path)) is None  # busybox's crond: not cronie
    crond.unlink()
    crond.write_text("")
    assert cron_daemon({}, str(tmp_path)) == ("cronie", True, "/usr/sbin/crond")
    dpkg = tmp_path / "var/lib/dpkg/info/cron.list"
    dpkg.parent.mkdir(parents=True)
    dpkg.write_text("/usr/sbin/cron\n")
    found = cron_daemon({}, str(tmp_path))
    assert found is not None and found.name == "debian" and not found.honours_cron_tz
    told = cron_daemon({"CRONWRAP_CRON_DAEMON": " Cronie "}, str(tmp_path))
    assert told == ("cronie", True, "CRONWRAP_CRON_DAEMON=cronie")
    with pytest.raises(UsageError, match="CRONWRAP_CRON_DAEMON='vixie'.*one of: debian, cronie"):
        cron_daemon({"CRONWRAP_CRON_DAEMON": "vixie"}, str(tmp_path))


def test_lint_guards_and_redirections_silence_warnings():
    text = (
        "PATH=/usr/local/bin:/usr/bin:/bin\n"
        "*/5 * * * * flock -n /tmp/l /opt/x.sh >> /var/log/x.log 2>&1\n"
        "*/5 * * * * /usr/local/bin/cronwrap run -n y -- /opt/y.sh\n"
        "0 * * * * /opt/z.sh 2>&1 | logger -t z\n"
        "0 0 * * * backup.sh >/dev/null\n"
    )
    assert lint_text(text) == []


def test_lint_clean_corpus_lines_have_no_errors_after_wrap():
    findings = lint_text(wrap(SYSTEM_CRONTAB, cronwrap=CRONWRAP, system=True), system=True)
    assert not has_errors(findings)
    assert not codes(findings) & {"W005", "W006", "W007"}


def test_format_finding():
    finding = Finding(3, 1, "error", "E001", "bad minute field '61'", "use 0-59")
    assert format_finding(finding, "crontab") == (
        "crontab:3:1: error: E001 bad minute field '61' — fix: use 0-59"
    )
    no_column = Finding(4, None, "warning", "W010", "no newline\r", "")
    assert format_finding(no_column, "-") == "-:4: warning: W010 no newline?"


def test_has_errors():
    assert has_errors(lint_text("61 * * * * /bin/x\n"))
    assert not has_errors(lint_text("0 0 * * * /bin/x\n"))


def test_lint_rejects_a_bad_system_zone():
    with pytest.raises(UsageError):
        lint("", system_zone="Nowhere/Else", now=NOW)


@pytest.mark.parametrize(
    ("value", "zone"),
    [(":Europe/Berlin", "Europe/Berlin"), (":/usr/share/zoneinfo/Europe/Berlin", "Europe/Berlin"),
     (":/etc/localtime", None), ("", None)],
)
def test_posix_spellings_of_zones(value, zone):
    findings = lint_text(f"CRON_TZ={value}\n30 2 * * * /bin/x > /dev/null\n")
    assert "E006" not in codes(findings)
    assert ("W003" in codes(findings)) == (zone is not None)


def test_lint_takes_naive_now_as_utc():
    text = "CRON_TZ=Europe/Berlin\n30 2 * * * /bin/x > /dev/null\n"
    assert lint_text(text, now=NOW.replace(tzinfo=None)) == lint_text(text)


# --------------------------------------------------------------------------------------------
# daemon starters: wrap leaves them alone, lint warns when they are wrapped (W011)

DAEMON_LINES = [
    "@reboot /opt/agent/start-agent",
    "@reboot root /opt/agent/start-agent",  # read as a user crontab: still @reboot
    "* * * * * /opt/agent/start-agent &",
    "* * * * * /opt/a & /opt/b",
    "* * * * * (/opt/a &)",
    "* * * * * { /opt/a & } >> /var/log/a 2>&1",
    "* * * * * nohup /opt/a > /dev/null 2>&1 &",
    "* * * * * /opt/a &> /dev/null",  # POSIX sh: /opt/a in the background, then > /dev/null
    "* * * * * sh -c '/opt/a &'",
    "* * * * * /opt/a &\t# start it",
]
NOT_DAEMONS = [
    "* * * * * /opt/a && /opt/b",
    "* * * * * /opt/a >&2",
    "* * * * * /opt/a 2>&1 | logger",
    "* * * * * /opt/a '&' \\& \"&\"",
    "* * * * * /opt/a # &",
    "* * * * * echo $(/opt/a &)",  # inside a word: sh waits for the substitution
    "* * * * * /opt/a |& logger",
]


@pytest.mark.parametrize("line", DAEMON_LINES)
def test_wrap_leaves_daemon_starters_byte_for_byte(line):
    text = f"MAILTO=x\n{line}\r\n"
    assert wrap(text) == text
    assert wrap(text, extra_args=("--timeout", "5m")) == text


@pytest.mark.parametrize("line", NOT_DAEMONS)
def test_and_and_redirections_and_quoted_ampersands_are_no_background(line):
    wrapped = wrap(line)
    assert wrapped.startswith("* * * * * cronwrap run -n ")
    assert unwrap(wrapped) == line
    assert "W011" not in codes(lint_text(wrapped))


def test_and_greater_is_a_redirection_only_under_bash_and_zsh():
    line = "* * * * * /opt/a &> /dev/null"
    for shell, wrapped in (("/bin/bash", True), ("/usr/bin/zsh", True), ("/bin/sh", False),
                           ("/bin/dash", False)):
        text = f"SHELL={shell}\n{line}"
        assert (wrap(text) != text) == wrapped, shell
    assert wrap("* * * * * bash -c '/opt/a &> /dev/null'") != "* * * * * bash -c '/opt/a &> /dev/null'"


@pytest.mark.parametrize("line", DAEMON_LINES)
def test_with_leave_orphans_daemon_starters_are_wrapped_and_round_trip(line):
    wrapped = wrap(line, extra_args=("--leave-orphans",))
    assert "cronwrap run -n " in wrapped and "--leave-orphans --" in wrapped
    assert unwrap(wrapped) == line
    assert "W011" not in codes(lint_text(wrapped))
    text = f"CRONWRAP_LEAVE_ORPHANS=yes\n{line}"
    assert wrap(text) != text and unwrap(wrap(text)) == text


@pytest.mark.parametrize("line", DAEMON_LINES)
def test_lint_warns_about_a_daemon_starter_under_cronwrap_run(line):
    wrapped = wrap(line, extra_args=("--leave-orphans",)).replace(" --leave-orphans", "")
    finding = only(lint_text(wrapped), "W011")
    assert finding.severity == "warning" and finding.line == 1
    assert finding.column == jobs(wrapped)[0].command_start + 1
    assert "--leave-orphans" in finding.message and "unwrap" in finding.fix
    assert "--leave-orphans" in finding.fix
    assert "W011" not in codes(lint_text(line))  # not wrapped: nothing ends the daemon
    assert "W011" not in codes(lint_text("CRONWRAP_LEAVE_ORPHANS=1\n" + wrapped))


@pytest.mark.parametrize(("line", "what"), [
    ("@reboot /usr/local/bin/cronwrap run -n agent -- /opt/agent/start-agent",
     "an @reboot line without --schedule"),
    ("@reboot cronwrap run -n a --schedule '@daily' -- /opt/a &", "(&)"),
    ("* * * * * cronwrap run -n a /opt/a &", "backgrounds a process (&)"),
    ("* * * * * cronwrap run -n a -- /bin/bash -c '/opt/a & wait' >> log 2>&1", "(&)"),
    ("* * * * * 'cronwrap' run -n a -- /opt/a & /opt/b", "(&)"),
])
def test_lint_reads_hand_written_cronwrap_lines(line, what):
    assert what in only(lint_text(line), "W011").message


@pytest.mark.parametrize("line", [
    "@reboot cronwrap run -n a --leave-orphans -- /opt/a",
    # the README's catch-up line for a host that was off: a job of its own, not a daemon
    "@reboot /usr/local/bin/cronwrap run -n settle --schedule '30 1 * * *' --tz Asia/Shanghai "
    "--catchup latest --catchup-window 6h -- /usr/local/bin/settle.sh",
    "@reboot cronwrap run -n a --schedule='@daily' -- /opt/a",
    "CRONWRAP_SCHEDULE=@daily\n@reboot cronwrap run -n a -- /opt/a",
    "@reboot cronwrap run --leave-orphans -n a /opt/a",
    "* * * * * cronwrap run -n a -- /opt/a && /opt/b",
    "* * * * * cronwrap status &",  # not cronwrap run
    "@reboot /opt/cronwrap-like run -n a -- /opt/a",
])
def test_lint_leaves_safe_cronwrap_lines_alone(line):
    assert "W011" not in codes(lint_text(line))


# --------------------------------------------------------------------------------------------
# properties

COMMAND_CHARS = "ab/ .'\"\\%$()&|;<>#`{}=\t12-~*é"
FRAGMENTS = [
    "0 0 * * * ", "*/5 * * * * ", "@daily ", "@reboot ", "30 2 1 * 1 ", "root ", "CRON_TZ=",
    "TZ=Europe/Berlin", "MAILTO=\"\"", "SHELL=/bin/bash", "Asia/Shanghai", "\n", "%", "\\%",
    "cd /x && ", "./y.sh", " >> log 2>&1", " | logger", "'", '"', "$(", ")", "flock ", "`",
    "cronwrap run -n x -- ", " -- ", "sh -c '", "\t", "  ", "#", "L", "61", "mon-fri", "*/0",
]
crontab_like = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=st.text() | crontab_like, system=st.booleans())
def test_lint_never_raises(text, system):
    findings = lint(text, system=system, system_zone="Europe/Berlin", now=NOW)
    assert all(isinstance(f, Finding) for f in findings)
    for finding in findings:
        assert "\n" not in format_finding(finding, "crontab")


@settings(max_examples=200, deadline=None)
@given(
    schedule=st.sampled_from(["0 0 * * * ", "@reboot ", "*/5\t* * * *  ", " @hourly "]),
    command=st.text(alphabet=COMMAND_CHARS, min_size=1, max_size=40),
    shell=st.sampled_from(["", "SHELL=/bin/bash\n", "SHELL=/usr/bin/fish\n"]),
)
def test_round_trip_of_generated_lines(schedule, command, shell):
    text = shell + schedule + command
    wrapped = wrap(text, extra_args=("--key", "%F"))
    assert unwrap(wrapped) == text
    assert wrap(wrapped, extra_args=("--key", "%F")) == wrapped


@settings(max_examples=200, deadline=None)
@given(text=st.text() | crontab_like, system=st.booleans())
def test_wrap_and_unwrap_never_raise(text, system):
    wrapped = wrap(text, system=system)
    assert isinstance(unwrap(wrapped), str)
    assert isinstance(unwrap(text), str)


@settings(max_examples=200, deadline=None)
@given(text=st.text() | st.lists(st.sampled_from(FRAGMENTS + ["&", " & ", "&&", "@reboot "]),
                                 max_size=30).map("".join))
def test_wrap_never_writes_a_line_lint_warns_w011_about(text):
    wrapped = wrap(text)
    changed = {n for n, (a, b) in enumerate(zip(text.split("\n"), wrapped.split("\n")), 1)
               if a != b}
    assert not changed & {f.line for f in lint_text(wrapped) if f.code == "W011"}
