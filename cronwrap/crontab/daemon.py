"""Which cron daemon runs this host's crontabs, as far as it matters to cronwrap: whether it
reads a line's times in ``CRON_TZ``.

cronie does (crontab(5): "CRON_TZ specifies the time zone specific for the cron table");
Debian's and Ubuntu's ``cron`` does not: it "will only handle tasks in a single timezone"
(cron(8)), the system zone, and only passes ``CRON_TZ`` on to the job's environment.

Told cheaply, without running anything and without reading /proc: ``CRONWRAP_CRON_DAEMON``
when set (a container whose crontab is run by another host's daemon, a host where the guess
is wrong); else dpkg's record of the ``cron`` package (Debian's cron conflicts with cronie,
bcron and systemd-cron, so when it is installed it is the daemon); else a ``crond`` program
that is not busybox's (cronie's name on Fedora, RHEL, SUSE and Arch). Anything else is
unknown, and said so. Only ``lint`` asks; ``run`` never does (its off-slot warning names
``CRON_TZ`` from the firing's own time instead).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

#: The environment variable that names the daemon, overriding what the files say.
DAEMON_VARIABLE = "CRONWRAP_CRON_DAEMON"

#: The daemons cronwrap knows, by the name ``CRONWRAP_CRON_DAEMON`` takes: what each does
#: with ``CRON_TZ`` (the docs' words) and whether it honours it.
DAEMON_MEANINGS: dict[str, tuple[str, bool]] = {
    "debian": ("Debian's and Ubuntu's `cron` (package `cron`, `/usr/sbin/cron`): ignores "
               "`CRON_TZ` and fires every line at its times in the system zone", False),
    "cronie": ("cronie (`crond`; Fedora, RHEL, SUSE, Arch): reads the times of the lines "
               "below `CRON_TZ` in that zone, as cronwrap does", True),
}

_DPKG_CRON = "var/lib/dpkg/info/cron.list"  # dpkg's file list of the installed cron package
_CROND = ("usr/sbin/crond", "usr/bin/crond")


class CronDaemon(NamedTuple):
    """The host's cron daemon: its name (a key of DAEMON_MEANINGS), whether it reads times
    in ``CRON_TZ``, and how cronwrap knows (for the messages)."""

    name: str
    honours_cron_tz: bool
    evidence: str

    @property
    def label(self) -> str:
        return "Debian's cron" if self.name == "debian" else self.name


def cron_daemon(environ: Mapping[str, str], root: str = "/") -> CronDaemon | None:
    """This host's cron daemon, or None when cronwrap cannot tell. ``root``: where the file
    system starts (tests). A ``CRONWRAP_CRON_DAEMON`` that names no known daemon is an
    error naming the ones it may."""
    given = environ.get(DAEMON_VARIABLE, "").strip().lower()
    if given:
        if given not in DAEMON_MEANINGS:
            raise UsageError(f"{DAEMON_VARIABLE}={given!r} is not a cron daemon cronwrap knows "
                             f"(one of: {', '.join(DAEMON_MEANINGS)}); unset it to let "
                             "cronwrap tell")
        return _daemon(given, f"{DAEMON_VARIABLE}={given}")
    if os.path.exists(os.path.join(root, _DPKG_CRON)):
        return _daemon("debian", f"dpkg has the cron package installed (/{_DPKG_CRON})")
    for crond in _CROND:
        path = os.path.join(root, crond)
        if os.path.isfile(path) and os.path.basename(os.path.realpath(path)) == "crond":
            return _daemon("cronie", f"/{crond}")  # busybox's crond is a link to busybox
    return None


def _daemon(name: str, evidence: str) -> CronDaemon:
    return CronDaemon(name, DAEMON_MEANINGS[name][1], evidence)
