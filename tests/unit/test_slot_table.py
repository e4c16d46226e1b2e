"""A slot table answers every query of a firing exactly as the engine it was made from: the
same slots, shown the same way (offset, DST, abbreviation), the same run keys and the same
catch-up plans, inside its stretch and beyond it (where it goes on in the engine), on the
zones and expressions whose DST edges the engine's own tests pin (test_schedule_engine.py).
And inside its stretch it does not load the engine at all: the table is what a firing reads."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwrap.run.catchup import plan_firing
from cronwrap.schedule import Schedule, SlotTable, run_key, tabulate
from cronwrap.schedule.table import AHEAD_SECONDS, BEHIND, MIN_AHEAD

UTC = timezone.utc
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago",
         "Asia/Kolkata", "Pacific/Chatham", "Africa/Casablanca", "America/Havana",
         "Europe/Dublin"]
EXPRESSIONS = ["* * * * *", "*/7 1,2 * * SUN", "30 2 * * *", "0 */2 * * *", "15 0 * * *",
               "0 0 1 * *", "0 9 * * 1-5", "59 23 31 12 *", "0 2 29 2 *", "*/20 0-3 * * *",
               "0,30 1 * * *"]
TEMPLATES = [None, "%Y-%m-%d", "%Y-%m-%dT%H %Z%z"]
# Around DST changes of the zones above (2026), and a plain day.
MOMENTS = [datetime(2026, 3, 8, 6, 30, tzinfo=UTC), datetime(2026, 3, 29, 0, 40, tzinfo=UTC),
           datetime(2026, 4, 4, 14, 50, tzinfo=UTC), datetime(2026, 4, 5, 2, 10, tzinfo=UTC),
           datetime(2026, 9, 6, 3, 20, tzinfo=UTC), datetime(2026, 10, 25, 0, 55, tzinfo=UTC),
           datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 7, 14, 12, 0, tzinfo=UTC)]


def engine(expr: str, zone: str) -> Schedule:
    return Schedule.parse(expr, ZoneInfo(zone), zone)


def kept(schedule: Schedule, now: datetime) -> SlotTable:
    """The table a firing at ``now`` keeps, as the next firing reads it back."""
    table = SlotTable.from_data(tabulate(schedule, now, (schedule.zone_name, None, None)).data())
    assert table is not None and not table.engine_loaded
    return table


def shown(t: datetime | None) -> tuple[object, ...] | None:
    if t is None:
        return None
    return (t.timestamp(), t.isoformat(), t.strftime("%Y-%m-%d %H:%M %Z %z"), t.utcoffset(),
            t.dst(), t.tzname())


def plan_shown(plan) -> tuple[object, ...]:
    return ([(r.run_key, shown(r.scheduled_at), r.trigger) for r in plan.runs],
            [(m.run_key, shown(m.scheduled_at), m.status, m.reason) for m in plan.marks],
            plan.warnings, plan.skew_seconds, plan.matched)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zone=st.sampled_from(ZONES), expr=st.sampled_from(EXPRESSIONS),
       moment=st.sampled_from(MOMENTS), made=st.integers(-3 * 86400, 3 * 86400),
       asked=st.integers(-2 * 86400, 3 * 86400))
def test_a_table_answers_every_query_as_the_engine(zone, expr, moment, made, asked):
    schedule = engine(expr, zone)
    table = kept(schedule, moment + timedelta(seconds=made))
    t = moment + timedelta(seconds=asked)
    edges = (table.first, *table.instants[:2], *table.instants[-2:])  # where a stretch ends
    for when in [t] + [datetime.fromtimestamp(edge + d, UTC) for edge in edges
                       for d in (-3601, -61, -60, -1, 0, 1, 59, 60, 3600)]:
        assert shown(table.prev_at_or_before(when)) == shown(schedule.prev_at_or_before(when))
        assert shown(table.next_after(when)) == shown(schedule.next_after(when))
        slot, skew = table.slot_for_firing(when)
        expected, expected_skew = schedule.slot_for_firing(when)
        assert (shown(slot), skew) == (shown(expected), expected_skew)
    later = t + timedelta(hours=30)
    assert [shown(s) for s in table.slots_between(t, later)] == \
        [shown(s) for s in schedule.slots_between(t, later)]
    assert [shown(s) for s in table.slots_between(t - timedelta(hours=30), t, reverse=True)] \
        == [shown(s) for s in schedule.slots_between(t - timedelta(hours=30), t, reverse=True)]
    for s in schedule.slots_between(t - timedelta(hours=3), t + timedelta(hours=3)):
        assert shown(table.local(s.astimezone(UTC))) == shown(schedule.local(s.astimezone(UTC)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zone=st.sampled_from(ZONES), expr=st.sampled_from(EXPRESSIONS),
       moment=st.sampled_from(MOMENTS), made=st.integers(-2 * 86400, 0),
       late=st.integers(-10, 200), back=st.integers(0, 40), template=st.sampled_from(TEMPLATES),
       policy=st.sampled_from(["none", "latest", "all"]), known=st.integers(0, 7))
def test_a_firing_plans_from_a_table_as_from_the_engine(zone, expr, moment, made, late, back,
                                                         template, policy, known):
    """Catch-up plans (runs, marks, run keys, warnings, skew) of a firing at a slot of the
    schedule, ``late`` seconds after it, that last saw the slot ``back`` slots earlier."""
    schedule = engine(expr, zone)
    own = schedule.prev_at_or_before(moment)
    now = own + timedelta(seconds=late)
    earlier = list(islice(schedule.slots_between(own - timedelta(days=400),
                                                 own - timedelta(seconds=1), reverse=True),
                          back + 1))
    last_seen = earlier[-1] if earlier else None
    keys = {run_key(s, template) for s in earlier[::max(1, known)]} if known else set()
    abandoned = {run_key(earlier[1], template): earlier[1]} if len(earlier) > 1 else None
    table = kept(schedule, now + timedelta(seconds=made))
    plans = [plan_firing(s, now, key_template=template, last_seen=last_seen,
                         known_keys=keys.intersection, policy=policy, window=86400.0 * 2,
                         max_catchup=3, abandoned=abandoned, cron_tz_ignored_in=None)
             for s in (schedule, table)]
    assert plan_shown(plans[1]) == plan_shown(plans[0])


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("expr", ["* * * * *", "30 2 * * *", "*/7 1,2 * * SUN"])
def test_a_firing_inside_the_stretch_reads_only_the_table(zone, expr):
    """The next day's firings of a job, each on its slot, a few seconds late, catch-up
    looking back to the slot before: none of them loads the engine (which the table would
    have done for any query beyond its stretch). The table holds a day of slots ahead."""
    schedule = engine(expr, zone)
    for moment in MOMENTS:
        made = schedule.prev_at_or_before(moment) + timedelta(seconds=3)
        table = kept(schedule, made)
        assert len(table.instants) >= BEHIND + MIN_AHEAD or table.instants[-1] - \
            made.timestamp() > AHEAD_SECONDS
        fired = 0
        for slot in schedule.slots_between(made, made + timedelta(days=8)):
            slot = slot.astimezone(UTC)  # arithmetic in UTC: a fall-back night's walls repeat
            if not table.lasting(slot):
                break
            before = schedule.prev_at_or_before(slot - timedelta(seconds=1))
            plan = plan_firing(table, slot + timedelta(seconds=4), key_template=None,
                               last_seen=before, known_keys=frozenset().intersection,
                               policy="latest", window=0.0, max_catchup=1)
            table.next_after(plan.runs[-1].scheduled_at)  # the retry deadline's question
            assert [shown(r.scheduled_at) for r in plan.runs] == [shown(schedule.local(slot))] \
                and plan.matched
            fired += 1
            if fired == 30:
                break
        assert fired and not table.engine_loaded, (zone, expr, moment)


def test_a_query_beyond_the_stretch_goes_on_in_the_engine():
    schedule = engine("0 * * * *", "Europe/Berlin")
    made = datetime(2026, 3, 28, 12, 0, 3, tzinfo=UTC)
    table = kept(schedule, made)
    assert table.next_after(made).isoformat() == "2026-03-28T14:00:00+01:00"
    assert not table.engine_loaded
    far = made + timedelta(days=3)
    assert shown(table.next_after(far)) == shown(schedule.next_after(far))
    assert table.engine_loaded and table.engine() == schedule


def test_what_is_not_a_table_is_refused():
    table = tabulate(engine("0 * * * *", "UTC"), datetime(2026, 1, 1, tzinfo=UTC),
                     ("UTC", None, None))
    data = table.data()
    assert SlotTable.from_data(data) is not None
    broken = [None, (), data[:6], (*data[:4], data[4][::-1], *data[5:]),
              (*data[:4], data[4][:-1], *data[5:]), (*data[:3], data[4][0], *data[4:]),
              (*data[:6], bytes([9]) * len(data[4])), (*data[:5], (("x", 0, "UTC"),), data[6])]
    assert [SlotTable.from_data(b) for b in broken] == [None] * len(broken)
