"""The exception hierarchy and the exit statuses it maps to.

Exit statuses follow coreutils ``timeout`` (124-127) and the Nagios plugin convention for
``status --check``. Every error message says what was wrong and what to do about it.
"""

from __future__ import annotations

EXIT_SUPERSEDED = 123  # the lease was lost: another runner took the slot over
EXIT_TIMEOUT = 124
EXIT_CRONWRAP = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
EXIT_SIGNAL_BASE = 128
EXIT_KILLED = EXIT_SIGNAL_BASE + 9

CHECK_OK = 0
CHECK_WARNING = 1
CHECK_CRITICAL = 2
CHECK_UNKNOWN = 3


class CronwrapError(Exception):
    """Root of every error cronwrap reports to a person; ``exit_code`` is the exit status."""

    exit_code: int = EXIT_CRONWRAP  # a class attribute: each subclass names its status


class UsageError(CronwrapError):
    """An option, argument, environment variable or config value is invalid."""


class ConfigError(UsageError):
    """The config file is unreadable or holds an unknown key or a bad value."""


class LedgerError(CronwrapError):
    """The ledger could not be opened, read or written. ``connection_lost``: the connection
    broke (the server restarted, the network): the next call reconnects, so one retry of an
    uncommitted operation is worth it; a busy or damaged ledger is not retried.
    ``unreachable``: no connection could be made, after waiting as long as allowed: another
    try now would only wait again."""

    connection_lost = False
    unreachable = False


class LockError(CronwrapError):
    """A lock file could not be created or opened safely."""


class PathError(CronwrapError):
    """A directory or file cronwrap must use is unsafe (symlink, foreign owner, world-writable)."""
