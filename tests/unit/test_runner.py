"""The runner's policy in-process (issue 14 §2): retries, retry limits, alert streaks,
catch-up, lost leases and date ranges, against the in-memory SQLite ledger and a fake
supervisor; nothing is spawned, nothing sleeps, the clock is an argument."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest

from cronwrap import runner
from cronwrap.invocation import LocalLock
from cronwrap.hooks import HookResult
from cronwrap.model import Reason, Status
from cronwrap.ledger.sqlite import SqliteLedger
from cronwrap.spec import build_spec
from cronwrap.supervise import Outcome

T0 = datetime(2026, 10, 28, 10, 0, 5, tzinfo=timezone.utc).timestamp()  # 5 s into a minute


class KeptLedger(SqliteLedger):
    """The in-memory ledger, kept across the firings of one test (run() closes its ledger)."""

    def __init__(self, clock) -> None:
        super().__init__(None, clock=clock)

    def close(self) -> None:
        pass


class FakeSupervisor:
    """Ends each job as the next outcome says, after writing its output to the capture."""

    def __init__(self, world: Fake, spec, on_output, on_spawn, passthrough) -> None:
        self.world, self.spec, self.on_output = world, spec, on_output

    def run(self) -> Outcome:
        self.world.envs.append(self.spec.env)
        code, extra = self.world.outcomes.pop(0)
        self.on_output(2, f"exit {code}\n".encode())
        return Outcome(exit_code=code, signal=None, timed_out=False, killed=False,
                       spawn_error=None, duration=0.5, **extra)

    def request_stop(self, reason: str) -> None:
        pass


class Fake:
    """A World whose clock, sleep, supervisor and hooks are recorded."""

    def __init__(self, outcomes: list) -> None:
        self.now = T0
        self.outcomes = [o if isinstance(o, tuple) else (o, {}) for o in outcomes]
        self.sleeps: list[float] = []
        self.hooks: list[tuple[str, str | None]] = []
        self.envs: list[dict] = []
        self.ledger = KeptLedger(lambda: self.now)

    def world(self) -> runner.World:
        def run_hook(command, env, timeout):
            self.hooks.append((command, env.get("CRONWRAP_ALERT")))
            return HookResult(0, False, 0.0, "")

        return runner.World(
            clock=lambda: self.now, monotonic=lambda: self.now, sleep=self.sleeps.append,
            rng=random.Random(7), open_ledger=lambda inv: self.ledger,
            take_lock=lambda inv: LocalLock(), run_hook=run_hook,
            supervisor=lambda *args: FakeSupervisor(self, *args))

    def fire(self, tmp_path, *options: str) -> int:
        environ = {"CRONWRAP_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        given = {}
        args = list(options)
        while args:
            name = args.pop(0).removeprefix("--")
            given[name] = True if not args or args[0].startswith("--") else args.pop(0)
        spec = build_spec(["job"], {"name": "j", **given}, environ, lambda: "h", warn=pytest.fail)
        return runner.run(spec, environ, world=self.world())

    def runs(self) -> list:
        return self.ledger.runs("j", 100)


def events(tmp_path) -> list[dict]:
    lines = (tmp_path / "logs" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_transient_failure_is_retried_with_backoff_until_it_succeeds(tmp_path):
    fake = Fake([75, 75, 0])
    assert fake.fire(tmp_path, "--retries", "3", "--retry-delay", "10") == 0
    (run,) = fake.runs()
    assert (run.status, run.attempt, run.exit_code) == (Status.SUCCEEDED, 3, 0)
    assert len(fake.sleeps) == 2 and 0 <= fake.sleeps[0] <= 10 and 0 <= fake.sleeps[1] <= 20
    assert [e["event"] for e in events(tmp_path)].count("retry") == 2


def test_a_status_not_in_retry_on_is_final(tmp_path):
    fake = Fake([3])
    assert fake.fire(tmp_path, "--retries", "3") == 3
    assert fake.sleeps == [] and fake.runs()[0].status == Status.FAILED


def test_a_retry_that_would_run_past_the_next_slot_is_not_made(tmp_path):
    fake = Fake([75])
    code = fake.fire(tmp_path, "--schedule", "* * * * *", "--retries", "2", "--retry-delay",
                     "600", "--timeout", "50")
    assert code == 75 and fake.sleeps == []
    skipped = [e for e in events(tmp_path) if e["event"] == "retry_skipped"]
    assert skipped and skipped[0]["reason"] == "would run past the next slot"


def test_alert_after_hooks_fire_from_the_nth_failure_and_once_on_recovery(tmp_path):
    fake = Fake([1, 1, 1, 0, 0])
    for _ in range(5):
        fake.fire(tmp_path, "--alert-after", "2", "--on-failure", "page", "--on-success", "ok")
        fake.now += 60  # the next minute: the next slot
    assert fake.hooks == [("page", "failing"), ("page", "failing"), ("page", "recovered"),
                          ("ok", None)]


def test_catchup_runs_missed_slots_oldest_first_with_their_own_times(tmp_path):
    fake = Fake([0, 0, 0, 0])
    fake.now = T0 - 3 * 3600
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC")
    fake.now = T0
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC", "--catchup", "all")
    seen = [(e["CRONWRAP_SCHEDULED_AT"], e["CRONWRAP_TRIGGER"]) for e in fake.envs]
    assert seen == [("2026-10-28T07:00:00+00:00", "schedule"),
                    ("2026-10-28T08:00:00+00:00", "catchup"),
                    ("2026-10-28T09:00:00+00:00", "catchup"),
                    ("2026-10-28T10:00:00+00:00", "schedule")]


def test_a_missed_slot_is_recorded_without_catch_up(tmp_path):
    fake = Fake([0, 0])
    fake.now = T0 - 2 * 3600
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC")
    fake.now = T0
    fake.fire(tmp_path, "--schedule", "0 * * * *", "--tz", "UTC")
    assert [r.status for r in fake.runs()] == [Status.SUCCEEDED, Status.MISSED, Status.SUCCEEDED]


def test_a_lost_lease_is_recorded_killed(tmp_path):
    fake = Fake([(143, {"stop_reason": Reason.LEASE_LOST})])
    fake.fire(tmp_path)
    (run,) = fake.runs()
    assert (run.status, run.skip_reason) == (Status.KILLED, Reason.LEASE_LOST)


@pytest.mark.parametrize("keep_going, ran, code", [(False, 2, 4), (True, 3, 4)])
def test_a_date_range_stops_at_a_failure_unless_keep_going(tmp_path, keep_going, ran, code):
    fake = Fake([0, 4, 0])
    options = ["--schedule", "30 1 * * *", "--tz", "UTC", "--date", "2026-10-01..2026-10-03"]
    assert fake.fire(tmp_path, *options, *(["--keep-going"] if keep_going else [])) == code
    assert len(fake.envs) == ran
