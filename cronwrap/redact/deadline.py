"""A CPU-time budget for work that may run away: the operator's ``--redact`` patterns, which no
static check can prove fast (redact.Guard is the contract; redact.py stays pure and is given
one).

Python's ``re`` checks for signals while it matches, so a SIGVTALRM whose handler raises ends a
runaway match. The timer is ITIMER_VIRTUAL: the process's CPU time in user mode, not the wall
clock, so a loaded machine never cuts a line short. It ticks every ``step`` seconds of CPU; a
tick that finds ``mark`` where the previous tick left it ends the work (one step of it, a line
for one pattern, has run for ``step`` to 2 × ``step``), and so does the tick that finds the
budget's ``total`` used up, counting every ``run``.

Signals are handled only in the main thread: elsewhere ``run`` has no deadline within a call,
and its total still ends later calls. Each ``run`` installs its handler and timer and puts
back what was there before; a tick already on its way when the timer is stopped finds the
handler disarmed and does nothing (``signal.signal`` runs pending handlers before it changes
one, so none reaches the previous handler in a single-threaded process).
"""

from __future__ import annotations

import signal
import time

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType
    from typing import Callable

# CPU seconds one pattern may take on one line (a tick: cut between 1 and 2 ticks). A match
# holds the interpreter, so this is also how long it can keep the supervisor's keeper thread
# waiting: within the 50 ms a TERM may be late (bench/, term_lateness). A line is at most
# ~16 KiB (redact.py), which an ordinary pattern reads in well under a millisecond.
STEP = 0.02
TOTAL = 2.0  # CPU seconds the patterns may take over a whole run, all lines and streams


class _Stop(BaseException):
    """Raised by the tick inside the work; BaseException, so no ``except Exception`` in it
    swallows the deadline."""


class CpuBudget:
    """``run(work)`` calls ``work()`` under this budget: True when it finished, False when a
    tick stopped it. ``mark`` is the work's progress: it bumps it at each step."""

    def __init__(self, step: float = STEP, total: float = TOTAL) -> None:
        self.step, self.total = step, total
        self.used = 0.0  # CPU seconds of every run so far
        self.mark = 0
        self._seen = -1
        self._armed = False
        self._started = 0.0

    @property
    def spent(self) -> bool:
        return self.used >= self.total

    def run(self, work: Callable[[], None]) -> bool:
        if self.spent:
            return False
        self._started = time.process_time()
        try:
            previous = signal.signal(signal.SIGVTALRM, self._tick)
        except ValueError:  # not the main thread: no deadline within this call
            work()
            self.used += time.process_time() - self._started
            return True
        try:
            return self._armed_run(work)
        finally:
            self.used += time.process_time() - self._started
            signal.signal(signal.SIGVTALRM, signal.SIG_DFL if previous is None else previous)

    def _armed_run(self, work: Callable[[], None]) -> bool:
        self._seen = self.mark
        first = max(min(self.step, self.total - self.used), 1e-6)
        old = signal.setitimer(signal.ITIMER_VIRTUAL, first, self.step)
        self._armed = True
        try:
            try:
                work()
            finally:
                self._armed = False
        except _Stop:  # raised once at most (the tick disarms first), wherever it landed above
            return False
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, *old)
        return True

    def _tick(self, signum: int, frame: FrameType | None) -> None:
        if not self._armed:
            return
        if self.used + time.process_time() - self._started >= self.total or self.mark == self._seen:
            self._armed = False  # one stop per run: the unwinding is not interrupted again
            raise _Stop
        self._seen = self.mark
