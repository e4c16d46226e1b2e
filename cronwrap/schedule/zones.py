"""Time zones: which zone a schedule is read in, UTC offsets, and DST transitions.

Pure but for :func:`system_zone_name`, which reads a file. Instants are whole epoch seconds;
a "wall" is a naive datetime, what a local clock shows. zoneinfo is imported when a zone is
first loaded (:func:`find_zone`): its import (with ``sysconfig``, for its search path, and
``struct``) is ~2.4 ms that a firing reading its slots from its table does without.
"""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from zoneinfo import ZoneInfo

UTC = timezone.utc
DAY = 86400
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_ONE_MINUTE = timedelta(minutes=1)
_ZONE_EXAMPLES = "examples: UTC, Europe/Berlin, Asia/Shanghai"
#: The variables that give a schedule its zone, in the order cron and cronwrap read them.
ZONE_VARIABLES = ("CRON_TZ", "TZ")


# --- naming a zone -----------------------------------------------------------------------


def system_zone_name() -> str | None:
    """The host's zone name, or None when it cannot be told.

    The ``/etc/localtime`` symlink target comes first because that is what libc (and cron)
    read; ``/etc/timezone`` is Debian's older, sometimes stale, copy. This is the only
    function of the schedule package that touches the file system.
    """
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    try:
        with open("/etc/timezone", encoding="utf-8") as handle:
            return handle.readline().strip() or None
    except OSError:
        return None


def find_zone(name: str) -> ZoneInfo | None:
    """The zone called ``name``, or None when the tz database has none by that name."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # ValueError: "", "../x", NUL
        return None


def load_zone(name: str, option: str = "--tz") -> ZoneInfo:
    """The zone called ``name``; a UsageError naming ``option`` when there is none."""
    zone = find_zone(name)
    if zone is None:
        raise UsageError(f"{option}: {name!r} is not a time zone ({_ZONE_EXAMPLES})")
    return zone


def zone_key(value: str) -> str | None:
    """The zone a TZ-style value names; None when unset or naming the system zone's file.

    ``:Europe/Berlin`` and ``:/usr/share/zoneinfo/Europe/Berlin`` are POSIX spellings of
    ``Europe/Berlin``; ``TZ=:/etc/localtime`` names the system zone.
    """
    key = value.strip().lstrip(":")
    if key.startswith("/"):
        return key.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in key else None
    return key or None


def zone_setting(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The variable that sets the schedule's zone (``CRON_TZ``, else ``TZ``) and the key it
    names; None when neither does (an empty variable counts as unset)."""
    for variable in ZONE_VARIABLES:
        key = zone_key(environ.get(variable, ""))
        if key:
            return variable, key
    return None


def resolve_zone(
    name: str | None, environ: Mapping[str, str], system_zone: str | None
) -> tuple[ZoneInfo, str]:
    """The schedule's zone and its name: ``--tz``, else ``CRON_TZ``, else ``TZ``, else the
    system zone, else UTC. An invalid variable is an error naming it, because silently
    falling back would fire the job at the wrong hour.
    """
    return choose_zone(name, zone_setting(environ), system_zone)


def choose_zone(
    name: str | None, setting: tuple[str, str] | None, system_zone: str | None
) -> tuple[ZoneInfo, str]:
    """:func:`resolve_zone` from what it reads: ``--tz``, the variable that sets the zone
    and its key (:func:`zone_setting`), and the system zone's name."""
    if name is not None:
        return load_zone(name.strip(), "--tz"), name.strip()
    if setting is not None:
        variable, key = setting
        return load_zone(key, variable), key
    host = find_zone(system_zone) if system_zone else None
    if system_zone and host is not None:
        return host, system_zone
    return load_zone("UTC"), "UTC"  # an unreadable host setting is not the user's mistake


# --- offsets and walls -------------------------------------------------------------------


def wall_of(epoch: int, zone: ZoneInfo | timezone) -> datetime:
    """What a clock in ``zone`` shows at ``epoch``."""
    return datetime.fromtimestamp(epoch, zone).replace(tzinfo=None)


def offset_at(epoch: float, zone: ZoneInfo) -> int:
    """The zone's UTC offset in seconds at ``epoch``."""
    offset = datetime.fromtimestamp(epoch, zone).utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


@lru_cache(maxsize=8192)
def steady_offset(zone: ZoneInfo, day: date) -> int | None:
    """The zone's UTC offset in seconds all through local ``day``; None if it changes."""
    midnight = datetime(day.year, day.month, day.day, tzinfo=zone)
    after = midnight + timedelta(days=1)
    points = (midnight, midnight.replace(fold=1), midnight + timedelta(hours=12), after,
              after.replace(fold=1))
    offsets = {p.utcoffset() for p in points}
    only = offsets.pop()
    return int(only.total_seconds()) if not offsets and only is not None else None


def first_valid_minute_after(wall: datetime, zone: ZoneInfo) -> int:
    """The instant of the first existing wall minute after ``wall`` (a skipped wall time)."""
    probe = wall.replace(second=0, microsecond=0)
    for _ in range(2 * 24 * 60):
        probe += _ONE_MINUTE
        epoch = int(probe.replace(tzinfo=zone).timestamp())
        if wall_of(epoch, zone) == probe:
            return epoch
    raise ValueError(f"no valid wall time within two days after {wall} in {zone.key}")


def local_to_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """A naive wall time read the way cron reads it: a repeated time means its first
    occurrence, a skipped time means the first minute after the jump."""
    aware = wall.replace(tzinfo=zone, fold=0)
    if aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall:
        return aware.astimezone(zone)
    return datetime.fromtimestamp(first_valid_minute_after(wall, zone), zone)


# --- transitions -------------------------------------------------------------------------


class Transition(tuple[int, int, int]):
    """A change of the zone's UTC offset: ``(at, before, after)``. A tuple made by hand:
    a ``typing.NamedTuple``'s class is built with ``eval`` at import, ~0.6 ms of every
    scheduled firing, which never uses it (explain and lint do)."""

    __slots__ = ()

    def __new__(cls, at: int, before: int, after: int) -> Transition:
        return super().__new__(cls, (at, before, after))

    def __repr__(self) -> str:
        return f"Transition(at={self[0]}, before={self[1]}, after={self[2]})"

    @property
    def at(self) -> int:
        """Epoch seconds of the first instant with the new offset."""
        return self[0]

    @property
    def before(self) -> int:
        """The offset before, in seconds."""
        return self[1]

    @property
    def after(self) -> int:
        """The offset after, in seconds."""
        return self[2]

    @property
    def forward(self) -> bool:
        """Clocks spring forward: the walls between ``wall_before`` and ``wall_after``
        do not exist (else they happen twice)."""
        return self.after > self.before

    @property
    def wall_before(self) -> datetime:
        """The wall time the clocks change *from*."""
        return wall_of(self.at + self.before, UTC)

    @property
    def wall_after(self) -> datetime:
        """The wall time the clocks change *to*."""
        return wall_of(self.at + self.after, UTC)

    def walls(self) -> Iterator[datetime]:
        """The whole wall minutes that do not exist, or happen twice, ascending."""
        low, high = sorted((self.at + self.before, self.at + self.after))
        first = low - low % 60 + (60 if low % 60 else 0)
        return (wall_of(w, UTC) for w in range(first, high, 60))


@lru_cache(maxsize=512)
def transitions(zone: ZoneInfo, first: date, days: int) -> tuple[Transition, ...]:
    """The zone's offset changes in the ``days`` after ``first`` (UTC midnight). Stepping a
    day at a time and bisecting where the offset differs keeps a year's scan to ~400 offset
    look-ups."""
    start = (first.toordinal() - EPOCH_ORDINAL) * DAY
    found = []
    previous = offset_at(start, zone)
    for k in range(1, days + 1):
        current = offset_at(start + k * DAY, zone)
        if current != previous:
            low, high = start + (k - 1) * DAY, start + k * DAY
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if offset_at(middle, zone) == previous else (low, middle)
            found.append(Transition(high, previous, current))
        previous = current
    return tuple(found)
