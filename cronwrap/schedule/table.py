"""A stretch of a schedule's fire times, as the engine computed them, kept for the firings
that follow (ARCHITECTURE.md §9).

A scheduled firing that loads the engine loads cronsim and zoneinfo with it: their imports
alone were 0.39x the floor wrapper's whole run (37.9 M instructions of 97.9 M, callgrind;
bench/results.md), which put such a firing at 1.55–1.69x the floor against a budget of 1.3x.
So a firing keeps the slots around its own (``tabulate``: the two at or before it and a day
of them after it) in STATE, and the next firings of the job read their slots from that
table instead. The engine stays the only thing that decides a fire time: a table holds only
what it answered, with each slot's UTC offset, DST and zone abbreviation as the zone gave
them, and every query that leaves the table's stretch goes on in the engine, loaded then
(:meth:`SlotTable.engine`). run/tables.py keeps the tables, and throws one away when the
expression, the zone's settings, the zone's file, cronsim or this engine's code changed.

Pure: no I/O (the files are run/tables.py's); every time is an argument.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from itertools import islice
from operator import lt

from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule.instants import UTC, Slots, epoch

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cronwrap.schedule.slots import Schedule

    #: What names a schedule's zone: --tz, the variable that sets it and its key, the system
    #: zone's name (zones.choose_zone).
    ZoneInputs = tuple[str | None, tuple[str, str] | None, str | None]
    #: A table as it is kept: expr, zone inputs, zone name, first, instants, zones, codes.
    TableData = tuple[str, ZoneInputs, str, int, tuple[int, ...],
                      tuple[tuple[int, int | None, str | None], ...], bytes]

#: The slots a table holds at or before the firing that makes it: its own and the one before
#: (the newest slot the next firing's catch-up looks back to).
BEHIND = 2
#: After it: a day of slots, and at least MIN_AHEAD, at most MAX_AHEAD (``* * * * *``: 1,440).
AHEAD_SECONDS = 86400
MIN_AHEAD = 16
MAX_AHEAD = 2000
#: A firing that finds fewer slots than this after it in its table makes the table anew.
LEFT = 3


class Offset(tzinfo):
    """A zone as it is at one slot: its UTC offset, DST and abbreviation there (a slot of a
    table is shown exactly as the engine's zone shows it: ``isoformat``, ``strftime``)."""

    __slots__ = ("_offset", "_dst", "_name")

    def __init__(self, offset: int, dst: int | None, name: str | None) -> None:
        self._offset = timedelta(seconds=offset)
        self._dst = None if dst is None else timedelta(seconds=dst)
        self._name = name

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return self._offset

    def dst(self, dt: datetime | None) -> timedelta | None:
        return self._dst

    def tzname(self, dt: datetime | None) -> str | None:
        return self._name

    def fromutc(self, dt: datetime) -> datetime:
        return dt + self._offset

    def __repr__(self) -> str:
        return f"Offset({self._offset}, {self._name!r})"


class SlotTable(Slots):
    """The fire times of ``expr`` in the zone ``zone_name`` (named by ``inputs``) in the
    stretch after ``first`` up to the last of ``instants``: every fire time in it, in epoch
    seconds, ascending, each shown in the zone ``zones[codes[k]]``. Queries inside the
    stretch are answered from it; the rest go on in the engine."""

    __slots__ = ("expr", "zone_name", "inputs", "first", "instants", "zones", "codes", "_engine")
    expr: str
    zone_name: str
    inputs: ZoneInputs
    first: int
    instants: tuple[int, ...]
    zones: tuple[Offset, ...]
    codes: bytes
    _engine: Schedule | None

    @classmethod
    def from_data(cls, data: object) -> SlotTable | None:
        """The table ``data`` (as :meth:`data` gives it) holds; None when it is not one."""
        if not isinstance(data, tuple) or len(data) != 7:
            return None
        expr, inputs, zone_name, first, instants, zones, codes = data
        if not (type(expr) is str and type(zone_name) is str and type(first) is int
                and type(instants) is tuple and instants and type(codes) is bytes
                and len(codes) == len(instants) and type(zones) is tuple
                and set(map(type, instants)) == {int} and first < instants[0]
                and all(map(lt, instants, instants[1:]))):  # ascending: ~50 µs for a day's
            return None
        try:
            made = tuple(Offset(*zone) for zone in zones)
        except (TypeError, ValueError, OverflowError):
            return None
        if max(codes) >= len(made):
            return None
        return cls(expr, zone_name, inputs, first, instants, made, codes, None)

    def data(self) -> TableData:
        zones = tuple((int(z._offset.total_seconds()),
                       None if z._dst is None else int(z._dst.total_seconds()), z._name)
                      for z in self.zones)
        return (self.expr, self.inputs, self.zone_name, self.first, self.instants, zones,
                self.codes)

    def engine(self) -> Schedule:
        """The engine's Schedule of this table (loaded, with cronsim and zoneinfo, when a
        query first leaves the table's stretch)."""
        if self._engine is None:
            from cronwrap.schedule.slots import Schedule
            from cronwrap.schedule.zones import choose_zone

            zone, zone_name = choose_zone(*self.inputs)
            object.__setattr__(self, "_engine", Schedule.parse(self.expr, zone, zone_name))
        assert self._engine is not None
        return self._engine

    @property
    def engine_loaded(self) -> bool:
        return self._engine is not None

    def lasting(self, now: datetime) -> bool:
        """Whether the table still holds LEFT slots after ``now``."""
        return len(self.instants) - _count_to(self.instants, epoch(now)) >= LEFT

    def _instants(self, t: datetime, reverse: bool) -> Iterator[int]:
        when, instants = epoch(t), self.instants
        last = instants[-1]
        if when < self.first or (when > last if reverse else when >= last):
            yield from self.engine()._instants(t, reverse)
            return
        k = _count_to(instants, when)
        if reverse:
            yield from reversed(instants[:k])
            yield from self.engine()._instants(datetime.fromtimestamp(self.first, UTC), True)
        else:
            yield from instants[k:]
            yield from self.engine()._instants(datetime.fromtimestamp(last, UTC), False)

    def _index(self, instant: float) -> int | None:
        k = _count_to(self.instants, instant) - 1
        return k if k >= 0 and self.instants[k] == instant else None

    def _at(self, instant: int) -> datetime:
        k = self._index(instant)
        if k is None:
            return self.engine()._at(instant)
        return datetime.fromtimestamp(instant, self.zones[self.codes[k]])

    def elsewhere(self, zone_name: str) -> Schedule | None:
        return self.engine().elsewhere(zone_name)

    def local(self, t: datetime) -> datetime:
        k = self._index(epoch(t))
        if k is None:
            return self.engine().local(t)
        return t.astimezone(self.zones[self.codes[k]])


def _count_to(instants: tuple[int, ...], when: float) -> int:
    """How many of ``instants`` (ascending) are at or before ``when``: bisect's
    ``bisect_right``, for the few searches of a firing without loading bisect and its C
    half (~0.2 ms of a firing's start)."""
    low, high = 0, len(instants)
    while low < high:
        middle = (low + high) // 2
        if when < instants[middle]:
            high = middle
        else:
            low = middle + 1
    return low


def tabulate(schedule: Slots, now: datetime, inputs: ZoneInputs) -> SlotTable:
    """The table a firing at ``now`` keeps: BEHIND slots at or before ``now``, and the slots
    of the day after it (MIN_AHEAD to MAX_AHEAD of them), as ``schedule`` (read in the zone
    ``inputs`` name: the engine, or a table, which answers as the engine did) gives them."""
    behind = list(islice(schedule._instants(now, True), BEHIND))
    when = epoch(now)
    ahead: list[int] = []
    for instant in schedule._instants(now, False):
        if len(ahead) >= MAX_AHEAD or (len(ahead) >= MIN_AHEAD and instant > when + AHEAD_SECONDS):
            break
        ahead.append(instant)
    instants = (*reversed(behind), *ahead)
    # Nothing fires in (first, instants[0]): the stretch starts just before the oldest slot.
    first = behind[-1] - 1 if behind else int(when)
    kinds: dict[tuple[int, int | None, str | None], int] = {}
    codes = []
    for instant in instants:
        shown = schedule._at(instant)
        offset, dst = shown.utcoffset(), shown.dst()
        assert offset is not None
        kind = (int(offset.total_seconds()), None if dst is None else int(dst.total_seconds()),
                shown.tzname())
        codes.append(kinds.setdefault(kind, len(kinds)))
    zones = tuple(Offset(*kind) for kind in kinds)
    return SlotTable(schedule.expr, schedule.zone_name, inputs, first, instants, zones,
                     bytes(codes), None)
