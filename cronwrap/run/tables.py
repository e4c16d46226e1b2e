"""The slot tables a job's firings keep in STATE/slots (schedule/table.py says why): read
when a firing resolves its schedule, made anew after a firing that needed the engine.

A table is kept with what made it: its format and the interpreter's (marshal's), the zone's
settings, and the identity (inode, size, modification time) of each file that decided its
slots: the zone's file in the tz database, cronsim, the engine's modules and the
interpreter. A table any of them no longer matches is not used: ``tzdata`` updated, cronsim
or cronwrap upgraded, another ``--tz``, ``CRON_TZ``, ``TZ`` or system zone, or another
``PYTHONTZPATH`` (zoneinfo's search path) each make the next firing load the engine, and
keep a new table. Tables are read and written as cronwrap's own files are (paths.keep).
"""

from __future__ import annotations

import os
import sys

from cronwrap.errors import PathError
from cronwrap.paths import ensure_private_dir, file_name, keep, read_kept
from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule.table import SlotTable, tabulate

if TYPE_CHECKING:
    from datetime import datetime

    from cronwrap.schedule.instants import Slots
    from cronwrap.schedule.table import ZoneInputs

FOLDER = "slots"  # in STATE: a table per job, by its name (paths.file_name)
_FORMAT = ("cronwrap slot table 1", sys.version)
_LIMIT = 1 << 20  # a table of MAX_AHEAD slots is ~10 kB
#: The modules whose code decides a slot: cronsim's reading of the fields, and the engine.
_ENGINE = ("cronsim.cronsim", "cronwrap.schedule.cron", "cronwrap.schedule.zones",
           "cronwrap.schedule.slots", "cronwrap.schedule.instants", "cronwrap.schedule.table")

Signature = tuple[int, int, int] | None


def _signature(path: str) -> Signature:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


class TableStore:
    """The table of job ``name`` in ``state``: ``find`` it for a schedule, ``refresh`` it
    after the firing when the firing needed the engine or the table runs out."""

    def __init__(self, state: str, name: str) -> None:
        self.path = os.path.join(state, FOLDER, file_name(name))
        self.inputs: ZoneInputs | None = None  # what the firing asked ``find`` for

    def find(self, expr: str, inputs: ZoneInputs) -> SlotTable | None:
        """The table of ``expr`` in the zone ``inputs`` name; None when there is none that
        still holds (then the firing loads the engine)."""
        self.inputs = inputs
        found = read_kept(self.path, _LIMIT, _key())
        if found is None or len(found) != 2:
            return None
        sources, data = found
        if type(data) is not tuple or data[:2] != (expr, inputs) or type(sources) is not tuple:
            return None
        for source in sources:
            if type(source) is not tuple or len(source) != 2 or type(source[0]) is not str \
                    or _signature(source[0]) != source[1]:
                return None
        return SlotTable.from_data(data)

    def refresh(self, schedule: Slots, now: datetime) -> None:
        """After a firing at ``now``: keep a new table when this one needed the engine (no
        table, one that no longer held, a query beyond it) or runs out soon."""
        if self.inputs is None or isinstance(schedule, SlotTable) \
                and not schedule.engine_loaded and schedule.lasting(now):
            return
        folder = os.path.dirname(self.path)
        try:  # a table is ~2 ms to make for a minutely job: not for a folder it cannot go in
            if not os.access(ensure_private_dir(folder), os.W_OK):
                return
        except PathError:
            return
        zone_file = _zone_file(schedule.zone_name)
        if zone_file is None:  # the zone is not a file (the tzdata package's): no table
            return
        table = tabulate(schedule, now, self.inputs)
        files = [zone_file, sys.executable,
                 *(getattr(sys.modules.get(name), "__file__", None) or "" for name in _ENGINE)]
        sources = tuple((path, _signature(path)) for path in files)
        keep(self.path, _key(), sources, table.data())


def _key() -> tuple[str, str, str | None]:
    """What a table must match besides its schedule and files: its format, the interpreter's
    (marshal's), and zoneinfo's search path as the environment sets it."""
    return (*_FORMAT, os.environ.get("PYTHONTZPATH"))


def _zone_file(key: str) -> str | None:
    """The file of the tz database zoneinfo read the zone ``key`` from (its search)."""
    import zoneinfo

    for folder in zoneinfo.TZPATH:
        path = os.path.join(folder, key)
        if os.path.isfile(path):
            return path
    return None
