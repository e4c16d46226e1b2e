"""The lease of a claimed run, renewed while its job runs (ARCHITECTURE.md §3 steps 4 and 5)."""

from __future__ import annotations

import threading
import time

from cronwrap.errors import LedgerError
from cronwrap.model import Reason, Run
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from cronwrap.ledger import base
    from cronwrap.run.invocation import Supervising


class Heartbeat:
    """Renews the lease every lease/3; ends the job when the lease is lost.

    Lost means: a renewal matched no row (another runner took the slot over), or no renewal
    succeeded for a whole lease by this wrapper's monotonic clock (the ledger unreachable,
    this wrapper SIGSTOPped). The second check runs in a watchdog thread of its own, so a
    renewal stuck on a server that stopped answering cannot delay it. A renewal counts from
    when it was sent: the database computed the new lease no earlier than that.

    The renewing thread starts the watchdog at what would have been the watchdog's first
    look, before its own first renewal: a job that ends sooner (most cron jobs) costs one
    thread, not two (~0.35 ms of a firing, issue 24). Neither depends on the wrapper's main
    thread, which may be stuck on the job's output.
    """

    def __init__(self, ledger: base.Ledger, run: Run, lease: float,
                 supervisor: Supervising) -> None:
        self.ledger, self.run_row, self.lease, self.supervisor = ledger, run, lease, supervisor
        self.stopped = threading.Event()
        self.lost = False
        self.last_ok = self.claimed = time.monotonic()
        self.look_every = min(lease / 10, 1.0)  # the watchdog's
        self.threads = [threading.Thread(target=self._renew, daemon=True, name="cronwrap-lease"),
                        threading.Thread(target=self._watch, daemon=True, name="cronwrap-watch")]

    def start(self) -> None:
        self.threads[0].start()  # the renewer, which starts the watchdog

    def _renew(self) -> None:
        if self.stopped.wait(self.look_every):
            return
        self.threads[1].start()
        wait = max(self.claimed + self.lease / 3 - time.monotonic(), 0.0)  # from the claim
        while not self.stopped.wait(wait):
            wait = self.lease / 3
            sent = time.monotonic()
            try:
                # a full server is waited for until the next renewal is due: the lease
                # has room for two more tries, and the watchdog ends the job past it
                if not self.ledger.heartbeat(self.run_row, self.lease, wait=self.lease / 3):
                    return self._lose()  # the row is another runner's now
                self.last_ok = max(self.last_ok, sent)
            except LedgerError:
                pass  # the watchdog decides when the lease must have expired

    def _watch(self) -> None:
        while not self.stopped.wait(self.look_every):
            if time.monotonic() - self.last_ok >= self.lease:
                return self._lose()

    def _lose(self) -> None:
        if not self.lost and not self.stopped.is_set():
            self.lost = True
            self.supervisor.request_stop(Reason.LEASE_LOST)

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            if thread.is_alive():
                thread.join(timeout=1.0)  # a renewal stuck on the network is a daemon thread
