"""JobSpec, the settings the whole core reads, has one typed field per option of spec.OPTIONS
(issue 21 §1): declared as annotations a type checker reads, checked here against the table."""

from __future__ import annotations

import pytest

from cronwrap import spec
from cronwrap.spec import OPTIONS, JobSpec


def test_jobspec_has_one_field_per_option_in_the_order_of_the_table():
    assert JobSpec._fields == ("command", *(o.attr for o in OPTIONS), "env_extra")


def returns(parse) -> str:
    """The return annotation of an option's parser, as written."""
    return parse.__annotations__["return"]


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_each_field_is_typed_as_its_option_parser_returns(opt):
    """``| None`` exactly where the value can be None: no default in the table, and none
    filled in by build_spec."""
    field = JobSpec.__annotations__[opt.attr]
    built = spec.build_spec(["true"], {}, {}, lambda: "host")
    can_be_none = getattr(built, opt.attr) is None
    assert field == returns(opt.parse) + (" | None" if can_be_none else ""), (
        f"JobSpec.{opt.attr}: {field}, but --{opt.name}'s parser returns {returns(opt.parse)}")


def test_every_parser_declares_what_it_returns():
    missing = [o.name for o in OPTIONS if "return" not in o.parse.__annotations__]
    assert not missing
