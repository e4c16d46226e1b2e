"""JobSpec, the settings the whole core reads, has one typed field per option of spec.OPTIONS
(issue 21 §1): declared as annotations a type checker reads, checked here against the table."""

from __future__ import annotations

import pytest

from cronwrap.errors import UsageError
from cronwrap.options import spec
from cronwrap.options.spec import OPTIONS, JobSpec


def test_jobspec_declares_one_field_per_option_in_the_order_of_the_table():
    declared = list(vars(JobSpec).get("__annotations__", {}))
    assert declared == ["command", *(o.attr for o in OPTIONS), "env_extra"]
    assert JobSpec._fields == tuple(declared)


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_each_field_is_typed_as_its_option_parser_returns(opt):
    """``| None`` exactly where the value can be None: no default in the table, and none
    filled in by build_spec (``name``, ``host``)."""
    field = vars(JobSpec).get("__annotations__", {}).get(opt.attr)
    returns = opt.parse.__annotations__["return"]  # as written: every parser declares it
    built = spec.build_spec(["true"], {}, {}, lambda: "host", warn=pytest.fail)
    can_be_none = getattr(built, opt.attr) is None
    assert field == returns + (" | None" if can_be_none else ""), (
        f"JobSpec.{opt.attr} is {field}, but --{opt.name}'s parser returns {returns}")


def test_crontab_escaping_in_a_key_is_kept_and_noted_with_its_source():
    notes: list[str] = []
    built = spec.build_spec(["true"], {}, {"CRONWRAP_KEY": r"\%Y-\%m-\%d"}, lambda: "host",
                            warn=notes.append)
    assert built.key == r"\%Y-\%m-\%d"
    assert notes == [r"CRONWRAP_KEY '\%Y-\%m-\%d': '\%' is how a crontab line writes '%'; in a "
                     "shell or the config file write '%' (these run keys will hold a backslash)"]
    spec.build_spec(["true"], {"key": "%Y-%m-%d"}, {}, lambda: "host", warn=pytest.fail)


def test_a_relative_log_dir_is_refused_wherever_it_comes_from():
    with pytest.raises(UsageError, match=r"^--log-dir: 'logs' is a relative path; give an "
                                         r"absolute one \(or ~/…\)$"):
        spec.build_spec(["true"], {"log-dir": "logs"}, {}, lambda: "host", warn=pytest.fail)
    with pytest.raises(UsageError, match=r"^CRONWRAP_LOG_DIR: 'logs' is a relative path"):
        spec.build_spec(["true"], {}, {"CRONWRAP_LOG_DIR": "logs"}, lambda: "host",
                        warn=pytest.fail)
    built = spec.build_spec(["true"], {"log-dir": "/var/log/cw"}, {}, lambda: "host",
                            warn=pytest.fail)
    assert str(built.log_dir) == "/var/log/cw"
