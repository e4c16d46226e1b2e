"""The TOML config: where it is found, what it may hold, errors with file/line/key, precedence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronwrap.errors import ConfigError, UsageError
from cronwrap.options import spec
from cronwrap.options.config import (BUILT_IN, CLI_SOURCE, Config, _Locator, find_config, job_name_of,
                             load_config, merge)


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o644)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}:"), message
    return message.removeprefix(f"{path}:")


SAMPLE = """\
# settings for every job on this host
[defaults]
timeout = 300
kill_after = "30s"
preserve-status = true
lease = 1.5

[jobs.settle]
timeout = "25m"
output = "on-failure"

[jobs."db.backup"]
lock = "pid"
force = "yes"
"""


# -- find_config -------------------------------------------------------------------------------

def test_explicit_path_wins(tmp_path):
    path = write(tmp_path, "")
    env = {"CRONWRAP_CONFIG": str(path), "XDG_CONFIG_HOME": str(tmp_path)}
    assert find_config(env, os.geteuid()) == str(path)


def test_explicit_path_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"CRONWRAP_CONFIG=.*nope\.toml: no such file"):
        find_config({"CRONWRAP_CONFIG": str(tmp_path / "nope.toml")}, os.geteuid())


def test_dev_null_means_no_settings(tmp_path):
    path = find_config({"CRONWRAP_CONFIG": os.devnull}, os.geteuid())
    assert path == os.devnull
    config = load_config(path)
    assert config.defaults == {} and config.jobs == {}


def test_xdg_config_home_is_honoured(tmp_path):
    (tmp_path / "xdg" / "cronwrap").mkdir(parents=True)
    path = write(tmp_path / "xdg" / "cronwrap", "")
    env = {"CRONWRAP_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": "/nonexistent"}
    assert find_config(env, os.geteuid()) == str(path)


def test_home_dot_config_is_the_default_user_file(tmp_path):
    (tmp_path / ".config" / "cronwrap").mkdir(parents=True)
    path = write(tmp_path / ".config" / "cronwrap", "")
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": "relative/ignored"}
    assert find_config(env, os.geteuid()) == str(path)


def test_no_file_anywhere(tmp_path):
    if Path("/etc/cronwrap/config.toml").exists():
        pytest.skip("this machine has an /etc/cronwrap/config.toml")
    assert find_config({"HOME": str(tmp_path)}, os.geteuid()) is None


def test_a_file_others_can_write_is_refused(tmp_path):
    path = write(tmp_path, "")
    path.chmod(0o664)
    with pytest.raises(ConfigError, match="writable by other users.*: run chmod go-w"):
        find_config({"CRONWRAP_CONFIG": str(path)}, os.geteuid())


def test_a_file_of_another_user_is_refused(tmp_path):
    path = write(tmp_path, "")
    if os.geteuid() == 0:
        os.chown(path, 54321, -1)
        euid = 0
    else:
        euid = os.geteuid() + 1  # neither the file's owner nor root
    with pytest.raises(ConfigError, match="belongs to uid .*owned by you or root"):
        find_config({"CRONWRAP_CONFIG": str(path)}, euid)


# -- load_config -------------------------------------------------------------------------------

def test_values_are_raw_text_keyed_by_option_name(tmp_path):
    config = load_config(write(tmp_path, SAMPLE))
    assert config.defaults == {"timeout": "300", "kill-after": "30s", "preserve-status": True,
                               "lease": "1.5"}
    assert config.jobs == {"settle": {"timeout": "25m", "output": "on-failure"},
                           "db.backup": {"lock": "pid", "force": True}}


def test_lines_are_recorded_for_every_key(tmp_path):
    config = load_config(write(tmp_path, SAMPLE))
    assert config.lines[(None, "timeout")] == 3
    assert config.lines[(None, "kill-after")] == 4
    assert config.lines[("settle", "output")] == 10
    assert config.lines[("db.backup", "force")] == 14
    assert config.where("settle", "timeout") == f"{config.path}:9 [jobs.settle]"
    assert config.where("db.backup", "lock") == f'{config.path}:13 [jobs."db.backup"]'


def test_every_key_is_an_option_name():
    names = {o.name for o in spec.OPTIONS}
    assert {"timeout", "kill-after", "lease", "output", "lock", "force"} <= names


def test_unknown_key_names_line_table_and_a_suggestion(tmp_path):
    message = error_of(tmp_path, "[defaults]\ntimeout = 5\n\n\n\n\ntimeuot = 7\n")
    assert message == "7: unknown key 'timeuot' in [defaults] (did you mean 'timeout'?)"


def test_unknown_key_without_a_close_match(tmp_path):
    assert error_of(tmp_path, "[jobs.x]\nzzzzqqq = 1\n") == "2: unknown key 'zzzzqqq' in [jobs.x]"


def test_bad_value_names_line_table_and_key(tmp_path):
    text = "[defaults]\ntimeout = 5\n" + "\n" * 5 + "[jobs.settle]\n# a comment\n\ntimeout = \"5x\"\n"
    message = error_of(tmp_path, text)
    assert message.startswith("11: [jobs.settle] timeout: '5x' is not a duration (examples:")


def test_the_underscore_spelling_is_reported_as_written(tmp_path):
    message = error_of(tmp_path, '[defaults]\nkill_after = "soon"\n')
    assert message.startswith("2: [defaults] kill_after: 'soon' is not a duration")


def test_both_spellings_of_one_key_are_an_error(tmp_path):
    message = error_of(tmp_path, '[defaults]\nkill_after = "1s"\nkill-after = "2s"\n')
    assert "sets 'kill-after' twice" in message


def test_values_are_checked_with_the_options_own_parser(tmp_path):
    assert "'LOUD' is not one of" in error_of(tmp_path, '[defaults]\noutput = "LOUD"\n')
    assert "is not a signal" in error_of(tmp_path, '[defaults]\nsignal = "NOPE"\n')
    assert "is not a boolean" in error_of(tmp_path, '[defaults]\nforce = "maybe"\n')
    assert "too short" in error_of(tmp_path, "[defaults]\nlease = 0.5\n")


def test_paths_in_the_file_must_be_absolute(tmp_path):
    assert error_of(tmp_path, '[defaults]\nlog-dir = "logs"\n') == \
        "2: [defaults] log-dir: 'logs' is a relative path; give an absolute one (or ~/…)"
    assert error_of(tmp_path, '[defaults]\nenv-file = "x.env"\n') == \
        "2: [defaults] env-file: 'x.env' is a relative path; the config file needs an absolute one (or ~/…)"
    config = load_config(write(tmp_path, '[defaults]\nlog-dir = "~/logs"\nlock-file = "/run/x"\n'))
    assert config.defaults == {"log-dir": "~/logs", "lock-file": "/run/x"}


def test_a_boolean_for_an_option_with_a_value_is_an_error(tmp_path):
    assert error_of(tmp_path, "[defaults]\ntimeout = true\n") == \
        "2: [defaults] timeout: expected a value (DURATION), not true"


def test_arrays_tables_and_dates_are_not_values(tmp_path):
    assert "not an array" in error_of(tmp_path, "[defaults]\ntimeout = [1, 2]\n")
    assert "not a date or time" in error_of(tmp_path, "[defaults]\ntimeout = 2026-01-01\n")
    assert error_of(tmp_path, "[defaults.timeout]\nx = 1\n").startswith("1: [defaults] timeout")


def test_ints_and_floats_become_their_text(tmp_path):
    config = load_config(write(tmp_path, "[defaults]\ntimeout = 90\nkill-after = 2.5\n"
                                         "skip-exit-code = 3\n"))
    assert config.defaults == {"timeout": "90", "kill-after": "2.5", "skip-exit-code": "3"}


def test_flags_become_booleans_however_written(tmp_path):
    config = load_config(write(tmp_path, '[defaults]\nforce = "on"\npreserve-status = false\n'
                                         "leave-orphans = 1\n"))
    assert config.defaults == {"force": True, "preserve-status": False, "leave-orphans": True}


def test_command_and_name_are_not_config_keys(tmp_path):
    assert "'command' is not a config key in [jobs.a]: the command comes after --" in \
        error_of(tmp_path, '[jobs.a]\ncommand = "/bin/true"\n')
    assert "'name' is not a config key" in error_of(tmp_path, '[defaults]\nname = "x"\n')


def test_job_names_must_be_valid(tmp_path):
    message = error_of(tmp_path, '[defaults]\n[jobs." padded"]\ntimeout = 1\n')
    assert message.startswith("2: [jobs.\" padded\"]: name: ' padded' is not a job name"), message


def test_any_printable_job_name_has_a_section(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[jobs."../o\'brien ü"]\ntimeout = 1\n')
    path.chmod(0o600)
    assert load_config(path).jobs == {"../o'brien ü": {"timeout": "1"}}


def test_only_defaults_and_jobs_tables(tmp_path):
    assert error_of(tmp_path, "[default]\ntimeout = 1\n").startswith(
        "1: unknown table or key 'default' at the top level (did you mean 'defaults'?)")
    assert error_of(tmp_path, "timeout = 1\n[defaults]\n") == \
        "1: 'timeout' is outside any table: put it under [defaults] (every job) or [jobs.NAME] (one job)"
    assert "must be a table" in error_of(tmp_path, "[jobs]\nsettle = 5\n")
    assert "must be tables" in error_of(tmp_path, "jobs = 5\n")


def test_inline_tables_and_dotted_keys_are_located(tmp_path):
    assert error_of(tmp_path, '[jobs]\n\nsettle = { timeout = "5x" }\n').startswith(
        "3: [jobs.settle] timeout: '5x'")
    assert error_of(tmp_path, '\njobs.settle.timeout = "5x"\n').startswith("2: [jobs.settle]")


def test_a_multiline_string_does_not_confuse_the_line_finder():
    text = '[defaults]\nkey = """\ntimeout = "x"\n"""\ntimeout = "5x"\n'
    locator = _Locator(Path("c.toml"), text)
    assert locator.line(("defaults", "timeout")) == 5
    assert locator.line(("defaults", "key")) == 2


def test_invalid_toml_names_its_line(tmp_path):
    assert error_of(tmp_path, '[defaults]\ntimeout = 5\nlease =\n').startswith(
        "3: not valid TOML: ")


def test_unreadable_and_non_utf8_files(tmp_path):
    with pytest.raises(ConfigError, match="missing.toml: No such file"):
        load_config(tmp_path / "missing.toml")
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"[defaults]\n# caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_config_error_is_a_usage_error_with_exit_125():
    assert issubclass(ConfigError, UsageError) and ConfigError.exit_code == 125


def test_a_secret_value_is_not_repeated_in_the_error(tmp_path):
    message = error_of(tmp_path, '[defaults]\ndb = "mysql://admin:hunter2@db/x"\n')
    assert "hunter2" not in message and message.startswith("2: [defaults] db: expected")


# -- merge -------------------------------------------------------------------------------------

FIVE_LEVELS = """\
[defaults]
timeout = "1m"
kill-after = "1s"
signal = "INT"
lease = "5m"

[jobs.settle]
timeout = "2m"
kill-after = "2s"
signal = "HUP"

[jobs.other]
lease = "9m"
"""


def test_precedence_across_all_five_levels(tmp_path):
    config = load_config(write(tmp_path, FIVE_LEVELS))
    cli = {"timeout": "4m"}
    environ = {"CRONWRAP_TIMEOUT": "3m", "CRONWRAP_KILL_AFTER": "3s", "PATH": "/bin"}
    merged = merge(cli, environ, config, "settle")
    assert merged.values == {"timeout": "4m", "kill-after": "3s", "signal": "HUP", "lease": "5m"}
    assert merged.source("timeout") == CLI_SOURCE
    assert merged.source("kill-after") == "CRONWRAP_KILL_AFTER"
    assert merged.source("signal") == f"{config.path}:10 [jobs.settle]"
    assert merged.source("lease") == f"{config.path}:5 [defaults]"
    assert merged.source("output") == BUILT_IN

    job = spec.build_spec(["/bin/settle.sh"], merged.values, environ, lambda: "h1",
                          warn=pytest.fail)
    assert (job.timeout, job.kill_after, job.signal, job.lease) == (240.0, 3.0, 1, 300.0)
    assert job.output == "passthrough"  # the built-in default
    assert job.name == "settle"


def test_the_environment_overrides_the_jobs_own_section(tmp_path):
    # The subtlety: a job section is more specific, yet ARCHITECTURE.md §8 ranks the environment above it.
    config = load_config(write(tmp_path, FIVE_LEVELS))
    merged = merge({}, {"CRONWRAP_SIGNAL": "TERM"}, config, "settle")
    assert merged.values["signal"] == "TERM"
    assert merged.source("signal") == "CRONWRAP_SIGNAL"


def test_config_values_are_not_outranked_by_build_specs_own_environment_lookup(tmp_path):
    # merge passes environment values through, so build_spec's given > environment order
    # cannot put the config file above the environment.
    config = load_config(write(tmp_path, FIVE_LEVELS))
    environ = {"CRONWRAP_LEASE": "7m"}
    merged = merge({}, environ, config, "settle")
    assert spec.build_spec(["x"], merged.values, environ, lambda: "h",
                           warn=pytest.fail).lease == 420.0


def test_another_jobs_section_does_not_apply(tmp_path):
    config = load_config(write(tmp_path, FIVE_LEVELS))
    assert merge({}, {}, config, "settle").values["lease"] == "5m"
    assert merge({}, {}, config, "other").values["lease"] == "9m"
    assert merge({}, {}, config, "unknown").values["timeout"] == "1m"
    assert merge({}, {}, config, None).values["timeout"] == "1m"


def test_no_config_is_command_line_over_environment():
    merged = merge({"force": True}, {"CRONWRAP_TIMEOUT": "10"}, None, "x")
    assert merged.values == {"force": True, "timeout": "10"}


def test_labels_say_where_to_look_when_a_value_is_bad(tmp_path):
    config = load_config(write(tmp_path, FIVE_LEVELS))
    merged = merge({"timeout": "4m"}, {"CRONWRAP_KILL_AFTER": "x"}, config, "settle")
    assert merged.label("timeout") == "--timeout"
    assert merged.label("kill-after") == "CRONWRAP_KILL_AFTER"
    assert merged.label("signal") == f"{config.path}:10: [jobs.settle] signal"
    assert merged.label("output") == "--output"


def test_flags_keep_their_booleans_through_build_spec(tmp_path):
    config = load_config(write(tmp_path, "[defaults]\npreserve-status = true\nforce = false\n"))
    merged = merge({}, {}, config, "x")
    job = spec.build_spec(["x"], merged.values, {}, lambda: "h", warn=pytest.fail)
    assert job.preserve_status is True and job.force is False


def test_command_line_keys_outside_the_table_pass_through():
    assert merge({"future-option": "1"}, {}, None, "x").values == {"future-option": "1"}


def test_job_name_of_follows_build_spec():
    assert job_name_of({"name": "settle"}, {"CRONWRAP_NAME": "env"}, ["/bin/x.sh"]) == "settle"
    assert job_name_of({}, {"CRONWRAP_NAME": "env"}, ["/bin/x.sh"]) == "env"
    assert job_name_of({}, {}, ["/usr/local/bin/settle.sh"]) == "settle"
    assert job_name_of({}, {}, []) is None
    assert job_name_of({"name": " bad"}, {}, ["x"]) is None
    assert job_name_of({"name": "../odd but fine"}, {}, ["x"]) == "../odd but fine"


def test_config_is_a_record_with_empty_defaults():
    config = Config()
    assert config.defaults == {} and config.jobs == {} and config.path is None


def test_loading_a_good_file_imports_nothing_heavy(tmp_path):
    path = write(tmp_path, SAMPLE)
    code = ("import sys; from pathlib import Path; from cronwrap.options import config; "
            f"c = config.load_config(Path({str(path)!r})); config.merge({{}}, {{}}, c, 'settle'); "
            "print(sorted(m for m in ('difflib', 'typer', 'rich', 'dataclasses') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# -- the parse kept for the next firing (config.CACHE_FILE, issue 24 §1) ----------------------

def test_a_kept_parse_is_read_for_the_same_text_and_only_for_it(tmp_path):
    path = write(tmp_path, SAMPLE)
    cache = tmp_path / "state" / "config.cache"
    first = load_config(path, str(cache))
    assert cache.exists() and oct(cache.stat().st_mode & 0o777) == "0o600"
    assert oct(cache.parent.stat().st_mode & 0o777) == "0o700"
    assert load_config(path, str(cache)) == first == load_config(path)
    # The cache is read, not the file parsed again: a kept parse that differs from the text's
    # (made here by hand) is what comes back while the text is the same...
    import marshal

    key, text, data = marshal.loads(cache.read_bytes())
    cache.write_bytes(marshal.dumps((key, text, {"defaults": {"timeout": "7"}})))
    assert load_config(path, str(cache)).defaults == {"timeout": "7"}
    # ...and a changed text is parsed again, and kept
    write(tmp_path, SAMPLE.replace("timeout = 300", "timeout = 301"))
    assert load_config(path, str(cache)).defaults["timeout"] == "301"
    assert marshal.loads(cache.read_bytes())[1] == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("damage", ["garbage", "another interpreter", "not a dict", "symlink",
                                    "another user's"])
def test_a_cache_cronwrap_cannot_trust_is_parsed_around(tmp_path, damage):
    import marshal

    path = write(tmp_path, SAMPLE)
    cache = tmp_path / "config.cache"
    text = path.read_text(encoding="utf-8")
    if damage == "garbage":
        cache.write_bytes(b"\x00not marshal")
    elif damage == "another interpreter":
        cache.write_bytes(marshal.dumps((("cronwrap config cache 1", "2.7"), text, {})))
    elif damage == "not a dict":
        load_config(path, str(cache))
        key, _, _ = marshal.loads(cache.read_bytes())
        cache.write_bytes(marshal.dumps((key, text, ["a list"])))
    elif damage == "symlink":
        (tmp_path / "elsewhere").write_bytes(b"")
        cache.symlink_to(tmp_path / "elsewhere")
    else:
        if os.geteuid() != 0:
            pytest.skip("making a file of another user needs root")
        cache.write_bytes(b"")
        os.chown(cache, 65534, 65534)
    cache.chmod(0o600) if not cache.is_symlink() else None
    assert load_config(path, str(cache)) == load_config(path)
    if damage == "symlink":
        assert (tmp_path / "elsewhere").read_bytes() == b"", "written through the link"


def test_a_file_the_cache_cannot_keep_is_still_refused_every_time(tmp_path):
    path = write(tmp_path, "[defaults]\ntimeout = 2024-01-01\n")
    cache = tmp_path / "config.cache"
    for _ in range(2):
        with pytest.raises(ConfigError, match="not a date or time"):
            load_config(path, str(cache))
    assert not cache.exists()


def test_a_state_directory_that_cannot_be_made_only_costs_the_parse(tmp_path):
    path = write(tmp_path, SAMPLE)
    (tmp_path / "state").write_text("a file where the directory would be\n")
    assert load_config(path, str(tmp_path / "state" / "config.cache")) == load_config(path)
    assert (tmp_path / "state").read_text() == "a file where the directory would be\n"
