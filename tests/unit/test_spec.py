"""JobSpec, the settings the whole core reads, has one typed field per option of spec.OPTIONS
(issue 21 §1): declared as annotations a type checker reads, checked here against the table."""

from __future__ import annotations

import pytest

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
