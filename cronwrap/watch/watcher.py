"""``cronwrap watch``: every ``--interval``, the jobs as ``status`` sees them (report.job_reports
over the ledger every command reads), their breaches (alerts.breaches), and each transition and
notification once across every watcher of the ledger (ARCHITECTURE.md §3, alerts).

One evaluation: read the reports, the failing streaks of the jobs whose last run failed and
the alerts the ledger holds; open the breaches no watcher has opened, close the open alerts
whose breach is gone; then claim and send each notification due (an open alert's, to each
notifier that has not had it; a closed alert's ``recovered``, to each that had its opening),
recording each sent or failed (retried after a backoff, by whichever watcher comes first).
A watcher that dies holding a claim loses it when its lease ends: at least once.
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from datetime import datetime, timedelta, timezone

from cronwrap.errors import CronwrapError, UsageError
from cronwrap.model import BAD_STATUSES, AlertState, JobSummary, Status, job_host
from cronwrap.options import spec
from cronwrap.options.durations import format_duration
from cronwrap.read import report
from cronwrap.read.reads import config, ledger as open_ledger, ledger_url
from cronwrap.record import TYPE_CHECKING
from cronwrap.schedule import system_zone_name
from cronwrap.redact.redactor import Redactor, secret_values, url as redact_url
from cronwrap.run.policy import failure_streak
from cronwrap.stdio import warn, write_utf8
from cronwrap.textsafe import safe_text
from cronwrap.watch import alerts as found
from cronwrap.watch.notify import Notifier

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cronwrap.ledger import base
    from cronwrap.read.report import JobReport

WINDOW = timedelta(days=7)  # status's default --since: the counts the reports carry
RECENT = timedelta(days=1)  # a closed alert's `recovered` is sent within a day of its closing
FORGET = timedelta(days=7)  # closed alerts older than this are deleted
SEND_LEASE = 120.0  # seconds a watcher holds a send it claimed (SEND_TIMEOUT and some)
BACKOFF = (30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)  # between tries of a failed send
KINDS = ("notify", "notify-webhook", "notify-mail")


def watch(interval: str, grace: str | None, notify: list[str] | None,
          notify_webhook: list[str] | None, notify_mail: list[str] | None, once: bool,
          dry_run: bool, db: str | None) -> int:
    settings = WatchSettings.of({"interval": interval, "grace": grace, "notify": notify,
                                 "notify-webhook": notify_webhook, "notify-mail": notify_mail})
    if not settings.notifiers and not dry_run:
        raise UsageError("watch: no notifier: give --notify COMMAND, --notify-webhook URL or "
                         "--notify-mail ADDRESS (or notify… in the config file's [watch]), or "
                         "--dry-run to see what it would send")
    url = ledger_url(db)
    watcher = Watcher(lambda: open_ledger(url), settings.notifiers, settings.grace, dry_run)
    label = redact_url(url) if url else "the embedded SQLite ledger"
    if once:
        watcher.evaluate(now())
        return 0
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: stop.set())
    warn(f"watch: every {format_duration(settings.interval)}, ledger {label}, notifiers: "
         + (", ".join(n.shown for n in settings.notifiers) or "none (--dry-run)"))
    while not stop.is_set():
        try:
            watcher.evaluate(now())
        except CronwrapError as exc:  # the ledger is away: say so, and look again next time
            warn(f"watch: {exc}")
        stop.wait(settings.interval)
    return 0


def now() -> datetime:
    return datetime.now(timezone.utc)


class WatchSettings:
    """The command line over the config file's [watch] table: ``interval``, ``grace`` (None:
    each job's own, a tenth of its period), the notifiers (those of the command line, else
    the config file's)."""

    def __init__(self, interval: float, grace: float | None, notifiers: list[Notifier]):
        self.interval, self.grace, self.notifiers = interval, grace, notifiers

    @classmethod
    def of(cls, given: dict[str, str | list[str] | None]) -> WatchSettings:
        loaded = config()
        table = loaded.watch if loaded is not None else {}
        given_notifiers = any(given[kind] for kind in KINDS)

        def value(key: str) -> tuple[str | list[str] | None, str]:
            if key in KINDS and given_notifiers or key not in KINDS and given[key] is not None:
                return given[key], f"--{key}"
            if key in table and loaded is not None:
                return table[key], loaded.watch_where(key)
            return given[key], f"--{key}"

        interval, label = value("interval")
        seconds = spec.window(str(interval), label)
        if seconds <= 0:
            raise UsageError(f"{label}: {interval!r}: give a time between evaluations (e.g. 30s)")
        grace_text, grace_label = value("grace")
        grace = spec.window(str(grace_text), grace_label) if grace_text is not None else None
        notifiers = []
        for kind in KINDS:
            targets, where = value(kind)
            for target in [targets] if isinstance(targets, str) else targets or []:
                notifiers.append(Notifier(kind.removeprefix("notify-") if "-" in kind
                                          else kind, _target(kind, target, where)))
        return cls(seconds, grace, notifiers)


def _target(kind: str, target: str, label: str) -> str:
    if not target or not target.strip():
        raise UsageError(f"{label}: empty: give a {'command' if kind == 'notify' else kind[7:]}")
    if kind == "notify-webhook" and not target.startswith(("http://", "https://")):
        scheme = target.partition(":")[0][:20]  # the rest may hold a token: never shown
        raise UsageError(f"{label}: {scheme!r}…: not an http:// or https:// URL")
    if kind == "notify-mail" and ("@" not in target or any(c.isspace() for c in target)
                                  or target.startswith("-")):
        raise UsageError(f"{label}: {target!r} is not a mail address (user@example.org)")
    return target


class Watcher:
    def __init__(self, ledger: Callable[[], base.Ledger], notifiers: Sequence[Notifier],
                 grace: float | None, dry_run: bool = False) -> None:
        self.open_ledger = ledger
        self.notifiers = list(notifiers)
        self.grace = grace
        self.dry_run = dry_run
        # who claims a send: this process, by host, pid and a random part (pids are reused)
        self.id = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.redactor = Redactor(secret_values(dict(os.environ)))

    def evaluate(self, at: datetime) -> None:
        ledger = self.open_ledger()
        try:
            self._evaluate(ledger, at)
        finally:
            ledger.close()

    def _evaluate(self, ledger: base.Ledger, at: datetime) -> None:
        reports = report.job_reports(ledger, at - WINDOW, None, at)
        reports += configured_only(reports, at)
        streaks = {r.summary.job: streak for r in reports if (streak := _streak(ledger, r))}
        present = {a.key: a for a in found.breaches(reports, at, self.grace, streaks)}
        held = ledger.alerts(at - RECENT)
        known = {s.alert.key for s in held}
        # a paused job's alerts stay as they are: neither told again nor said recovered
        paused = {r.summary.job for r in reports if r.pause is not None}
        opened = [a for key, a in present.items() if key not in known]
        closed = [s.alert.key for s in held if s.closed_at is None
                  and s.alert.key not in present and s.alert.job not in paused]
        if self.dry_run:
            for alert in opened:
                _say(f"would open: {alert.text}")
            for key in closed:
                _say(f"would close: {key}")
            return
        if opened or closed:
            ledger.record_alerts(opened, closed, self.id, at - FORGET)
            held = ledger.alerts(at - RECENT)
        for state in held:
            if state.alert.job in paused:
                continue
            for notifier in self.notifiers:
                self._send_due(ledger, state, notifier, at)

    def _send_due(self, ledger: base.Ledger, state: AlertState, notifier: Notifier,
                  at: datetime) -> None:
        alert = state.alert
        if state.closed_at is None:
            phase, message = alert.kind, alert
            if (notifier.id, phase) in state.sent:
                return
        else:
            phase, message = found.RECOVERED, found.recovered(alert, at)
            if (notifier.id, alert.kind) not in state.sent or (notifier.id, phase) in state.sent:
                return  # never told it opened (it cleared first): nothing to tell
        tries = ledger.claim_send(alert.key, notifier.id, phase, self.id, SEND_LEASE)
        if tries is None:
            return  # sent, being sent, or waiting for its next try: another watcher's or ours
        error = notifier.send(message, at, self.redactor)
        retry = BACKOFF[min(tries, len(BACKOFF) - 1)]
        ledger.send_result(alert.key, notifier.id, phase, self.id, error, retry)
        what = f"{phase} of {message.text.partition(':')[0]} via {notifier.shown}"
        if error is None:
            _say(f"sent {what}")
        else:
            warn(safe_text(f"watch: could not send {what} (try {tries + 1}): {error}; trying "
                           f"again in {format_duration(retry)}"))


def configured_only(reports: list[JobReport], at: datetime) -> list[JobReport]:
    """The jobs of the config file's [jobs.NAME] tables with a schedule that the ledger has
    never seen: each as if it last fired when the file was last written, so that its first
    slot after that, passed with no firing, is late (a crontab line never added, or lost)."""
    loaded = config()
    if loaded is None or loaded.path is None:
        return []
    seen = {job_host(r.summary.job)[0] for r in reports}
    written = datetime.fromtimestamp(os.stat(loaded.path).st_mtime, timezone.utc)
    out = []
    for name, values in loaded.jobs.items():
        expr = values.get("schedule")
        if name in seen or not isinstance(expr, str):
            continue
        zone = values.get("tz")
        summary = JobSummary(job=name, schedule=expr,
                             tz=zone if isinstance(zone, str) else system_zone_name() or "UTC",
                             key_template=None, first_seen=None, last_seen=None,
                             last_slot=written, last_run=None, last_success_at=None,
                             running=[], counts={})
        out.append(report.JobReport(summary=summary, health="ok", why="configured", now=at))
    return out


def _streak(ledger: base.Ledger, rep: JobReport) -> tuple[int, int] | None:
    """For a job whose last run failed: its failed slots in a row (policy.failure_streak), and
    the run id of the first of them, which names the streak."""
    last = rep.summary.last_run
    if last is None or last.status not in BAD_STATUSES:
        return None
    needed = int(report.setting(rep.summary, "alert_after") or 1)
    runs = ledger.runs(rep.summary.job, needed + 21)
    count = failure_streak(runs)
    ended = [r for r in runs if r.status in (Status.SUCCEEDED, *BAD_STATUSES)][:count]
    return (count, ended[-1].run_id) if ended else None


def _say(line: str) -> None:
    write_utf8(safe_text(line) + "\n")
