"""What a firing asks of a schedule, and the arithmetic of instants it needs: the queries of
:class:`Slots` (a firing's slot, the slots before it, the next one), written once over two
primitives that the engine (``slots.Schedule``) and the kept table (``table.SlotTable``)
each provide.

Light on purpose: nothing here loads cronsim or zoneinfo, so a firing that finds its slots in
the table loads neither (ARCHITECTURE.md §9).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

UTC = timezone.utc

#: How late a firing may be and still belong to the slot before it (cron's start delay, a
#: loaded host, a host clock a little off). Capped by the schedule itself: a firing always
#: belongs to the latest slot at or before it, so it can never reach past the next slot.
DEFAULT_TOLERANCE = timedelta(seconds=90)
#: How early a firing may be and still belong to the slot after it. Cron never fires early by
#: its own clock, so this only absorbs a clock stepped between cron's wake-up and ours; it is
#: kept far below one minute so ``* * * * *`` firings never jump to the next minute.
EARLY_TOLERANCE = timedelta(seconds=5)


def epoch(t: datetime) -> float:
    """``t``'s instant in epoch seconds; a ValueError for a naive datetime."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"a timezone-aware datetime is required, got {t!r}")
    return t.timestamp()


def shifted(t: datetime, seconds: float) -> datetime:
    """``t`` moved by real ``seconds``, in UTC. (Arithmetic on an aware datetime moves its
    wall clock, which is wrong across a DST change, so do it in UTC.)"""
    return t.astimezone(UTC) + timedelta(seconds=seconds)


def seconds_between(later: datetime, earlier: datetime) -> float:
    """Real seconds from ``earlier`` to ``later`` (subtraction within one zone ignores DST)."""
    return epoch(later) - epoch(earlier)


class Frozen(Record):
    """A Record (no dataclass code generation at import: this is the ``run`` hot path)
    whose fields cannot be reassigned."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")


class Slots(Frozen):
    """The fire times of a cron expression in a zone, as a firing queries them. A subclass
    has ``expr`` (as given) and ``zone_name``, and gives the two primitives: ``_instants``
    (fire instants after or at/before a time, lazily) and ``_at`` (an instant as the zone
    shows it), and ``local`` and ``elsewhere``."""

    __slots__ = ()
    expr: str
    zone_name: str

    def _instants(self, t: datetime, reverse: bool) -> Iterator[int]:
        """Fire instants strictly after ``t`` ascending, or at/before ``t`` descending."""
        raise NotImplementedError

    def _at(self, instant: int) -> datetime:
        """The fire instant ``instant`` in the schedule's zone."""
        raise NotImplementedError

    def local(self, t: datetime) -> datetime:
        """``t`` as a clock in the schedule's zone shows it."""
        raise NotImplementedError

    def elsewhere(self, zone_name: str) -> Slots | None:
        """The same expression read in the zone ``zone_name``; None when there is none."""
        raise NotImplementedError

    def _never(self, t: datetime) -> UsageError:
        return UsageError(f"--schedule: {self.expr!r} does not fire within 50 years of {t.isoformat()}")

    def slots_after(self, t: datetime) -> Iterator[datetime]:
        """All fire times strictly after ``t``, ascending, lazily."""
        return (self._at(i) for i in self._instants(t, reverse=False))

    def next_after(self, t: datetime) -> datetime:
        """The first fire time strictly after ``t``."""
        for instant in self._instants(t, reverse=False):
            return self._at(instant)
        raise self._never(t)

    def prev_at_or_before(self, t: datetime) -> datetime:
        """The last fire time at or before ``t``."""
        for instant in self._instants(t, reverse=True):
            return self._at(instant)
        raise self._never(t)

    def slots_between(
        self, start: datetime, end: datetime, *, reverse: bool = False
    ) -> Iterator[datetime]:
        """Fire times ``s`` with ``start < s <= end``, ascending (descending with ``reverse``).

        Lazy: a year of ``* * * * *`` is 525,600 slots, so callers take what they need.
        """
        low, high = epoch(start), epoch(end)
        if reverse:
            for instant in self._instants(end, reverse=True):
                if instant <= low:
                    return
                yield self._at(instant)
            return
        for instant in self._instants(start, reverse=False):
            if instant > high:
                return
            yield self._at(instant)

    def slots_in(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Fire times ``s`` with ``start <= s <= end``, ascending (fire times are whole
        minutes, so a second before ``start`` excludes nothing of the range)."""
        return self.slots_between(shifted(start, -1), end)

    def slot_for_firing(
        self, t: datetime, tolerance: timedelta = DEFAULT_TOLERANCE
    ) -> tuple[datetime | None, float]:
        """The slot a firing at ``t`` belongs to, and the firing's skew in seconds.

        The rule: the latest slot ``s`` with ``s <= t + min(tolerance, EARLY_TOLERANCE)``,
        provided ``t - s <= tolerance``. So a firing up to ``tolerance`` (default 90 s) late
        or up to 5 s early maps to its slot, and hosts firing the same minute a few seconds
        apart all claim one slot. Because the *latest* such slot wins, the late window is
        in effect capped at the gap to the next slot minus 5 s: a ``* * * * *`` firing at
        12:00:40 is 12:00's, one at 12:00:56 is 12:01's.

        Skew is ``t - slot`` (positive: late). When no slot qualifies the slot is None and
        the skew is measured from the nearest fire time, before or after, for the warning.
        """
        early = min(tolerance, EARLY_TOLERANCE)
        slot = self.prev_at_or_before(shifted(t, early.total_seconds()))
        skew = seconds_between(t, slot)
        if skew <= tolerance.total_seconds():
            return slot, skew
        ahead = seconds_between(t, self.next_after(t))
        return None, ahead if -ahead < skew else skew
