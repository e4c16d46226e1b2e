"""The ledger contract (ARCHITECTURE.md §3), run on every back end with one injected clock."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

from cronwrap.model import ClaimRequest, Finish, JobInfo, Mark, Reason

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
_pids = itertools.count(1000)


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def backend(request, tmp_path):
    return request.param


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ledger(backend, clock, tmp_path, request):
    if backend == "sqlite":
        from cronwrap.ledger.sqlite import SqliteLedger

        led = SqliteLedger(tmp_path / "ledger.db", clock=clock)
    elif backend == "memory":
        from cronwrap.ledger.sqlite import SqliteLedger

        led = SqliteLedger(None, clock=clock)
    else:
        from cronwrap.ledger.postgres import PostgresLedger

        led = PostgresLedger(request.getfixturevalue("pg_dsn"), clock=clock)
    yield led
    led.close()


BOOT = "6f1c-boot-a"
PID_NS = 4026531836


def req(key="k1", job="settle", host="h1", **kw) -> ClaimRequest:
    defaults = dict(job=job if isinstance(job, JobInfo) else JobInfo(job), run_key=key, scheduled_at=datetime.fromtimestamp(T0, timezone.utc),
                    trigger="schedule", host=host, pid=next(_pids), pid_start=1, lease=60.0,
                    boot_id=BOOT, pid_ns=PID_NS)
    defaults.update(kw)
    return ClaimRequest(**defaults)


def done(status="succeeded", code=0) -> Finish:
    return Finish(status=status, duration_ms=5, exit_code=code, signal=None, timed_out=False,
                  error_tail="tail", log_path=None)


def test_first_claim_runs_with_attempt_1_and_fence_1(ledger):
    claim = ledger.claim(req())
    assert claim.run is not None and claim.skip_reason is None
    assert (claim.run.status, claim.run.attempt, claim.run.fence) == ("running", 1, 1)
    assert claim.run.locked_until - claim.run.started_at == timedelta(seconds=60)


def test_same_slot_twice_is_a_duplicate(ledger):
    first = ledger.claim(req())
    second = ledger.claim(req(host="h2"))
    assert second.run is None and second.skip_reason == Reason.DUPLICATE
    assert second.blocking.run_id == first.run.run_id


def test_live_run_of_another_slot_means_overlap_skip_recorded(ledger):
    running = ledger.claim(req("k1")).run
    claim = ledger.claim(req("k2"))
    assert claim.skip_reason == Reason.OVERLAP and claim.blocking.run_id == running.run_id
    row = ledger.runs("settle")[0]
    assert (row.run_key, row.status, row.skip_reason) == ("k2", "skipped", "overlap")


def test_overlap_allowed_runs_both(ledger):
    ledger.claim(req("k1"))
    assert ledger.claim(req("k2", overlap_skip=False)).run is not None


def test_skipped_slot_is_claimable_later(ledger):
    first = ledger.claim(req("k1")).run
    ledger.claim(req("k2"))
    ledger.finish(first, done())
    again = ledger.claim(req("k2"))
    assert again.run is not None and again.run.run_key == "k2"


def test_finish_needs_the_claims_fence(ledger):
    run = ledger.claim(req()).run
    assert not ledger.finish(run.replace(fence=run.fence + 1), done())
    assert ledger.finish(run, done())
    assert not ledger.finish(run, done("failed", 1))  # already finished
    row = ledger.get_run("settle", run.run_id)
    assert (row.status, row.exit_code, row.error_tail) == ("succeeded", 0, "tail")


def test_heartbeat_extends_the_lease(ledger, clock):
    run = ledger.claim(req()).run
    clock.advance(50)
    assert ledger.heartbeat(run, 60)
    clock.advance(50)  # 100 s after the claim: alive only thanks to the heartbeat
    assert ledger.claim(req(host="h2")).skip_reason == Reason.DUPLICATE
    assert not ledger.heartbeat(run.replace(fence=run.fence + 1), 60)


def test_expired_lease_is_taken_over_and_fences_the_old_runner(ledger, clock):
    old = ledger.claim(req()).run
    clock.advance(61)
    assert ledger.runs("settle")[0].shown_status(datetime.fromtimestamp(clock.t, timezone.utc)) == "abandoned"
    claim = ledger.claim(req(host="h2"))
    assert claim.took_over and claim.run.attempt == 2 and claim.run.fence > old.fence
    assert claim.run.host == "h2"
    assert not ledger.heartbeat(old, 60)
    assert not ledger.finish(old, done())
    assert ledger.finish(claim.run, done("failed", 3))
    assert ledger.get_run("settle", old.run_id).exit_code == 3


def test_this_hosts_dead_wrapper_is_abandoned_at_once(ledger):
    dead = ledger.claim(req("k1", host="h1")).run
    gone = lambda pid, start: pid == dead.pid  # noqa: E731
    other = ledger.claim(req("k2", host="h1", is_gone=gone)).run
    assert other is not None  # the dead wrapper's run no longer counts as an overlap
    ledger.finish(other, done())
    claim = ledger.claim(req("k1", host="h1", is_gone=gone))
    assert claim.took_over and claim.run.attempt == 2


def test_another_hosts_process_is_not_judged_locally(ledger):
    ledger.claim(req("k1", host="h1"))
    claim = ledger.claim(req("k2", host="h2", is_gone=lambda pid, start: True))
    assert claim.skip_reason == Reason.OVERLAP


@pytest.mark.parametrize("other", [dict(pid_ns=PID_NS + 1),  # a container with the same name
                                   dict(boot_id="6f1c-boot-b"),  # after a reboot
                                   dict(boot_id="", pid_ns=0)])  # an identity it cannot tell
def test_same_host_name_in_another_namespace_waits_for_the_lease(ledger, clock, other):
    held = ledger.claim(req("k1", host="h1")).run
    assert (held.boot_id, held.pid_ns) == (BOOT, PID_NS)
    everything_gone = lambda pid, start: True  # noqa: E731  (its PIDs mean nothing here)
    assert ledger.claim(req("k1", host="h1", is_gone=everything_gone, **other)).skip_reason \
        == Reason.DUPLICATE
    assert ledger.claim(req("k2", host="h1", is_gone=everything_gone, **other)).skip_reason \
        == Reason.OVERLAP
    clock.advance(61)  # the lease, and only the lease, ends it
    claim = ledger.claim(req("k1", host="h1", is_gone=everything_gone, **other))
    assert claim.took_over and claim.run.fence > held.fence


@pytest.mark.parametrize("change", [dict(job="another"), dict(run_key="k9"), dict(host="h9"),
                                    dict(pid=1), dict(pid_start=999)])
def test_updates_match_the_claim_not_only_id_and_fence(ledger, change):
    """A ledger recreated or restored under a running job can give another run the same id
    and fence: heartbeat and finish must not touch it."""
    run = ledger.claim(req()).run
    stranger = run.replace(**change)
    assert not ledger.heartbeat(stranger, 60)
    assert not ledger.finish(stranger, done("failed", 9))
    assert ledger.get_run("settle", run.run_id).status == "running"
    assert ledger.heartbeat(run, 60) and ledger.finish(run, done())


def test_succeeded_slot_runs_again_only_with_force(ledger):
    run = ledger.claim(req()).run
    ledger.finish(run, done())
    assert ledger.claim(req()).skip_reason == Reason.DUPLICATE
    forced = ledger.claim(req(force=True))
    assert forced.run.attempt == 2 and forced.run.fence == run.fence + 1


def test_a_warning_slot_is_done_like_a_succeeded_one(ledger):
    """--warning-exit and --min-duration record `warning`: no retry by --max-attempts, a
    manual run needs --force (PostgreSQL: cronwrap_claim(), since schema version 4)."""
    run = ledger.claim(req()).run
    ledger.finish(run, done("warning", 1))
    assert ledger.claim(req(max_attempts=3)).skip_reason == Reason.DUPLICATE
    assert ledger.claim(req(trigger="manual")).skip_reason == Reason.DUPLICATE
    assert ledger.preview(req(trigger="manual")).skip_reason == Reason.DUPLICATE
    forced = ledger.claim(req(trigger="manual", force=True)).run
    assert forced.attempt == 2


def test_failed_slot_is_retryable_by_attempts_or_by_hand(ledger):
    run = ledger.claim(req()).run
    ledger.finish(run, done("failed", 1))
    assert ledger.claim(req()).skip_reason == Reason.DUPLICATE
    retry = ledger.claim(req(max_attempts=3)).run
    assert retry.attempt == 2
    ledger.finish(retry, done("timeout", 124))
    manual = ledger.claim(req(trigger="manual")).run
    assert manual.attempt == 3 and manual.trigger == "manual"


def test_live_lease_is_never_stolen_even_with_force(ledger):
    ledger.claim(req())
    assert ledger.claim(req(force=True, host="h2")).skip_reason == Reason.DUPLICATE


def test_record_skip_records_a_new_slot_or_reports_the_duplicate(ledger):
    assert ledger.record_skip(req("k1"), Reason.OVERLAP).skip_reason == Reason.OVERLAP
    row = ledger.runs("settle")[0]
    assert (row.status, row.skip_reason) == ("skipped", "overlap")
    assert ledger.record_skip(req("k1"), Reason.OVERLAP).skip_reason == Reason.DUPLICATE


def test_fence_strictly_increases_across_slots_and_hosts(ledger, clock):
    fences = []
    for i in range(5):
        run = ledger.claim(req(f"k{i}", host=f"h{i % 3}")).run
        fences.append(run.fence)
        ledger.finish(run, done())
    assert fences == sorted(set(fences)) and len(fences) == 5


def test_fences_are_per_job(ledger):
    a = ledger.claim(req("k", job="a")).run
    b = ledger.claim(req("k", job="b")).run
    assert a.fence == b.fence == 1


def test_a_host_s_share_of_a_job_is_a_job_of_its_own(ledger):
    """--scope host: each host's runs are a ledger job (model.ledger_job), with their own
    slots and fences; jobs_named finds the job and every share, and nothing else: not a
    job whose name only starts with it, nor one with LIKE's wildcards where it has letters."""
    from cronwrap.model import ledger_job

    web1, web2 = ledger_job("clean_up", "web1"), ledger_job("clean_up", "web2")
    for job, host in [(web1, "web1"), (web2, "web2"), ("clean_up-old", "h"), ("cleanXup", "h"),
                      (ledger_job("cleanXup", "web1"), "web1"), ("clean_up", "h")]:
        claim = ledger.claim(req(job=job, host=host))
        assert claim.run is not None, job  # one slot key, yet every share claims it
        assert claim.run.fence == 1
    assert ledger.jobs_named("clean_up") == ["clean_up", web1, web2]
    assert ledger.jobs_named("clean") == []
    assert ledger.jobs_named("cleanXup") == ["cleanXup", ledger_job("cleanXup", "web1")]
    assert ledger.claim(req(job=web1, host="web1")).skip_reason == "duplicate"


def test_runs_newest_first_and_summaries(ledger, clock):
    for i, status in enumerate(["succeeded", "failed", "timeout"]):
        run = ledger.claim(req(f"k{i}")).run
        clock.advance(1)
        ledger.finish(run, done(status, i))
    runs = ledger.runs("settle")
    assert [r.run_key for r in runs] == ["k2", "k1", "k0"]
    assert [r.run_key for r in ledger.runs("settle", limit=1)] == ["k2"]
    since = datetime.fromtimestamp(T0 - 10, timezone.utc)
    (summary,) = ledger.summaries(since)
    assert summary.job == "settle" and summary.last_run.run_key == "k2"
    assert summary.counts == {"succeeded": 1, "failed": 1, "timeout": 1}
    assert summary.last_success_at == datetime.fromtimestamp(T0 + 1, timezone.utc)
    assert ledger.summaries(since, ["other"]) == []
    later = datetime.fromtimestamp(T0 + 3600, timezone.utc)
    assert ledger.summaries(later)[0].counts == {}


def test_runs_page_by_run_id(ledger, clock):
    """Keyset pages (serve's): the runs below an id, newest first, and the runs just above
    one, oldest first; another job's runs in between are never on them."""
    for i in range(7):
        ledger.finish(ledger.claim(req(f"k{i}")).run, done())
        ledger.claim(req(f"k{i}", job="other"))
        clock.advance(1)
    ids = [r.run_id for r in ledger.runs("settle")]
    assert len(ids) == 7 and ids == sorted(ids, reverse=True)
    assert [r.run_id for r in ledger.runs("settle", 3, before=ids[2])] == ids[3:6]
    assert [r.run_id for r in ledger.runs("settle", 3, before=ids[-1])] == []
    assert [r.run_id for r in ledger.runs_after("settle", ids[5], 3)] == ids[4:1:-1]
    assert [r.run_id for r in ledger.runs_after("settle", ids[1], 3)] == [ids[0]]
    assert {r.job for r in ledger.runs_after("settle", 0, 10)} == {"settle"}
    with pytest.raises(ValueError):
        ledger.runs("settle", 3, since=datetime.fromtimestamp(T0, timezone.utc), before=ids[0])


def test_a_skip_is_not_the_last_run(ledger):
    run = ledger.claim(req("k1")).run
    ledger.finish(run, done("failed", 2))
    ledger.record_skip(req("k2"), Reason.OVERLAP)
    (summary,) = ledger.summaries(datetime.fromtimestamp(0, timezone.utc))
    assert summary.last_run.run_key == "k1" and summary.counts == {"failed": 1, "skipped": 1}


def test_unlock_expires_running_leases(ledger):
    run = ledger.claim(req()).run
    (released,) = ledger.unlock("settle")
    assert released.run_id == run.run_id
    claim = ledger.claim(req(host="h2"))
    assert claim.took_over and claim.run.attempt == 2


def test_names_with_quotes_and_unicode_are_plain_data(ledger):
    job = "o'brien\"; DROP TABLE runs; --ü"
    run = ledger.claim(req("k'1", job=job)).run
    assert ledger.get_run(job, run.run_id).job == job
    assert ledger.summaries(datetime.fromtimestamp(0, timezone.utc))[0].job == job


def test_slot_history_and_marks(ledger, clock):
    since = datetime.fromtimestamp(T0 - 3600, timezone.utc)
    empty = ledger.slot_history("settle", since)
    assert (empty.last_slot, empty.known({"m1"}), empty.abandoned) == (None, set(), {})
    slot = datetime.fromtimestamp(T0 - 60, timezone.utc)
    marks = [Mark("m1", slot, "missed", None), Mark("m2", slot, "skipped", "too_late")]
    assert ledger.record_marks(req("k0"), marks) == 2
    assert ledger.record_marks(req("k0"), marks) == 0  # a slot with a row keeps it
    history = ledger.slot_history("settle", since)
    assert history.last_slot == slot and not history.abandoned
    assert history.known({"m1", "m2", "m3", "k'; --"}) == {"m1", "m2"} == \
        ledger.known_keys("settle", {"m2", "m1"})
    assert ledger.known_keys("settle", set()) == set() == ledger.known_keys("other", {"m1"})
    many = {f"k{i}" for i in range(5000)} | {"m1"}  # one statement, whatever the count
    assert ledger.known_keys("settle", many) == {"m1"}
    ledger.claim(req("later", scheduled_at=slot + timedelta(hours=1)))
    ledger.claim(req("by-hand", trigger="manual", scheduled_at=slot + timedelta(days=9),
                     overlap_skip=False))
    history = ledger.slot_history("settle", since)
    assert history.last_slot == slot + timedelta(hours=1) and not history.abandoned
    clock.advance(61)  # both leases expire: their runners are gone
    assert ledger.slot_history("settle", since).abandoned == {
        "later": slot + timedelta(hours=1), "by-hand": slot + timedelta(days=9)}
    rows = {r.run_key: r for r in ledger.runs("settle")}
    assert (rows["m2"].status, rows["m2"].skip_reason) == ("skipped", "too_late")
    claim = ledger.claim(req("m1", trigger="catchup", overlap_skip=False))  # still runnable
    assert claim.run.trigger == "catchup" and claim.run.attempt == 1


def test_prune_keeps_running_rows_recent_rows_and_the_catchup_window(ledger, clock):
    old = datetime.fromtimestamp(T0, timezone.utc)
    for i in range(6):
        run = ledger.claim(req(f"k{i}", scheduled_at=old + timedelta(hours=i))).run
        clock.advance(3600)
        ledger.finish(run, done())
    ledger.claim(req("live", job="other"))  # running: never pruned
    catchup = JobInfo("windowed", settings='{"catchup": "latest", "catchup_window": 5184000.0}')
    for i in range(3):  # slots a month old at prune time, inside the 60-day catch-up window
        run = ledger.claim(req(f"w{i}", job=catchup, scheduled_at=datetime.fromtimestamp(clock.t - 3600 * i, timezone.utc))).run
        ledger.finish(run, done())
    clock.advance(86400 * 30)
    cutoff = datetime.fromtimestamp(clock.t - 86400, timezone.utc)
    removed = ledger.prune(cutoff, keep_last=2)
    assert sorted(job for _, job, _ in removed) == ["settle"] * 4
    assert [r.run_key for r in ledger.runs("settle")] == ["k5", "k4"]
    assert len(ledger.runs("other")) == 1
    assert ledger.prune(cutoff, keep_last=0) and len(ledger.runs("other")) == 1
    assert len(ledger.runs("windowed")) == 3


def test_tallies_count_every_end_and_never_go_down(ledger, clock):
    """Each finished attempt (a retried slot counts each), skip and missed slot, counted as the
    row is written; a retry, a rewrite and prune take nothing from the counts."""
    slot = datetime.fromtimestamp(T0, timezone.utc)
    first = ledger.claim(req("k1")).run
    ledger.claim(req("k2"))  # skipped: overlap
    ledger.finish(first, done("failed", 1).replace(duration_ms=70_000))  # 60 s < d <= 120 s
    again = ledger.claim(req("k1", max_attempts=3)).run  # the same row, attempt 2
    ledger.finish(again, done().replace(duration_ms=1_000))  # exactly the 1 s bound
    ledger.record_marks(req("k0"), [Mark("k0", slot - timedelta(hours=1), "missed", None)])
    late = ledger.claim(req("k3")).run
    ledger.finish(late, done().replace(duration_ms=200_000_000))  # beyond the last bound
    ledger.claim(req("live", job="other"))  # running: not an end
    tally = ledger.tallies()["settle"]
    assert tally.ends == {"failed": 1, "succeeded": 2, "skipped": 1, "missed": 1}
    assert (tally.timed, tally.duration_ms) == (3, 200_071_000)
    assert tally.buckets == {1_000: 1, 120_000: 1}  # the longest is only in +Inf
    assert "other" not in ledger.tallies() and ledger.tallies(["other"]) == {}
    clock.advance(86400 * 30)
    assert ledger.prune(datetime.fromtimestamp(clock.t, timezone.utc), keep_last=0)
    assert ledger.runs("settle") == []
    assert ledger.tallies(["settle"])["settle"].ends == tally.ends


def _attempts(ledger, clock, run):
    now = datetime.fromtimestamp(clock.t, timezone.utc)
    return [(a.attempt, a.status, a.reason, a.host, a.fence, a.exit_code)
            for a in ledger.attempts([ledger.get_run(run.job, run.run_id)], now)[run.run_id]]


def test_every_attempt_of_a_slot_is_kept(ledger, clock):
    """A takeover keeps the attempt it replaced (abandoned, superseded: its end unknown), a
    retry keeps the attempt it follows with its end, and the row's latest comes last."""
    first = ledger.claim(req("k1")).run
    assert _attempts(ledger, clock, first) == [(1, "running", None, "h1", first.fence, None)]
    clock.advance(61)
    second = ledger.claim(req("k1", host="h2")).run
    assert not ledger.finish(first, done())
    assert ledger.finish(second, done("failed", 3))
    third = ledger.claim(req("k1", host="h3", max_attempts=3)).run
    assert ledger.finish(third, done())
    kept = ledger.attempts([ledger.get_run("settle", first.run_id)],
                           datetime.fromtimestamp(clock.t, timezone.utc))[first.run_id]
    assert [(a.attempt, a.status, a.reason, a.host, a.fence, a.exit_code) for a in kept] == [
        (1, "abandoned", "superseded", "h1", first.fence, None),
        (2, "failed", None, "h2", second.fence, 3),
        (3, "succeeded", None, "h3", third.fence, 0)]
    assert kept[0].started_at == first.started_at and kept[0].finished_at is None
    assert kept[1].finished_at is not None and kept[1].duration_ms == 5
    assert ledger.attempts([], datetime.fromtimestamp(clock.t, timezone.utc)) == {}


def test_a_superseded_runner_keeps_its_attempts_real_end_and_nothing_else(ledger, clock):
    """The stopped wrapper's job ran to its end: its end is kept over the abandoned record,
    at its start + duration; the row stays its new runner's, and the end of an attempt
    another fence holds is never written over."""
    first = ledger.claim(req("k1")).run
    clock.advance(61)
    second = ledger.claim(req("k1", host="h2")).run
    end = done().replace(duration_ms=90_000)
    assert not ledger.finish(first, end)
    ledger.record_superseded(first, end)
    ledger.record_superseded(first, end)  # a retry writes the same
    assert ledger.get_run("settle", first.run_id).status == "running"  # h2's, untouched
    assert _attempts(ledger, clock, first) == [
        (1, "succeeded", "superseded", "h1", first.fence, 0),
        (2, "running", None, "h2", second.fence, None)]
    kept = ledger.attempts([ledger.get_run("settle", first.run_id)],
                           datetime.fromtimestamp(clock.t, timezone.utc))[first.run_id][0]
    assert kept.finished_at == first.started_at + timedelta(seconds=90)
    ledger.record_superseded(first.replace(fence=second.fence + 7), done("failed", 9))
    assert _attempts(ledger, clock, first)[0][1:] == ("succeeded", "superseded", "h1",
                                                      first.fence, 0)
    ledger.record_superseded(first, done("killed", 137).replace(skip_reason="lease_lost"))
    assert _attempts(ledger, clock, first)[0][1:3] == ("killed", "lease_lost")


def test_prune_takes_a_runs_attempts_with_it(ledger, clock):
    first = ledger.claim(req("k1")).run
    clock.advance(61)
    ledger.finish(ledger.claim(req("k1", host="h2")).run, done())
    clock.advance(86400 * 30)
    assert ledger.prune(datetime.fromtimestamp(clock.t, timezone.utc), keep_last=0)
    ledger.record_superseded(first, done())  # its row is gone: nothing to keep it for
    assert ledger.runs("settle") == []


# -- the contract as an abstract base class ------------------------------------------------

def test_every_back_end_is_the_contract_and_one_without_an_operation_cannot_be_built(ledger):
    from cronwrap.ledger.base import Ledger

    assert isinstance(ledger, Ledger) and not type(ledger).__abstractmethods__
    operations = {name for name in vars(Ledger) if not name.startswith("_")}
    assert Ledger.__abstractmethods__ == operations
    for missing in operations:
        partial = type("Partial", (Ledger,), {name: lambda self, *a, **kw: None
                                              for name in operations - {missing}})
        with pytest.raises(TypeError, match=f"abstract method.*{missing}"):
            partial()


def test_each_operation_says_what_a_caller_must_handle():
    """Its docstring names what LedgerError means for it (idle raises nothing)."""
    from cronwrap.ledger.base import Ledger

    for name in Ledger.__abstractmethods__:
        doc = getattr(Ledger, name).__doc__ or ""
        assert ":raises LedgerError:" in doc or "Raises nothing" in doc, name


# -- pauses (expansion 3): both back ends answer a paused firing alike -------------------------

def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, timezone.utc)


def test_a_paused_jobs_firing_is_recorded_skipped_paused_and_takes_nothing(ledger):
    pause = ledger.pause("settle", None, "maintenance", "ops1")
    assert (pause.job, pause.until, pause.reason, pause.paused_by, pause.paused_at) == \
        ("settle", None, "maintenance", "ops1", at(0))
    claim = ledger.claim(req("k1", job=JobInfo("settle", "0 1 * * *", "UTC")))
    assert claim.run is None and claim.skip_reason == Reason.PAUSED
    assert claim.pause == pause
    assert (claim.blocking.run_key, claim.blocking.status, claim.blocking.skip_reason,
            claim.blocking.attempt, claim.blocking.fence) == ("k1", "skipped", "paused", 0, None)
    (row,) = ledger.runs("settle")
    assert (row.run_id, row.trigger, row.status, row.skip_reason) == \
        (claim.blocking.run_id, "schedule", "skipped", "paused")
    info = ledger.job_info("settle")  # the job is recorded as a claim records it
    assert (info.schedule, info.tz) == ("0 1 * * *", "UTC")
    assert ledger.slot_history("settle", at(-3600)).last_slot == at(0)
    # a catch-up or takeover firing is paused too; the slot's existing row is the answer
    again = ledger.claim(req("k1", trigger="catchup", host="h2"))
    assert again.skip_reason == Reason.PAUSED and again.blocking.run_id == row.run_id
    assert len(ledger.runs("settle")) == 1
    assert ledger.preview(req("k2")).skip_reason == Reason.PAUSED
    assert ledger.pauses() == {"settle": pause}


def test_a_manual_run_of_a_paused_job_goes_ahead(ledger):
    ledger.pause("settle", None, None, "ops1")
    claim = ledger.claim(req("2027-01-14", trigger="manual"))
    assert claim.run is not None and claim.run.status == "running" and claim.pause is None


def test_a_pause_ends_at_its_until_by_the_ledgers_clock_and_resume_ends_it_at_once(
        ledger, clock):
    ledger.pause("settle", at(600), "deploy", "ops1")
    assert ledger.claim(req("k1")).skip_reason == Reason.PAUSED
    clock.advance(600)  # until is exclusive: at its instant the job runs again
    claim = ledger.claim(req("k2"))
    assert claim.run is not None and claim.run.run_key == "k2"
    ledger.finish(claim.run, done())
    ledger.pause("settle", None, None, "ops1")
    assert ledger.claim(req("k3")).skip_reason == Reason.PAUSED
    removed = ledger.resume("settle")
    assert removed is not None and removed.until is None and ledger.pauses() == {}
    assert ledger.resume("settle") is None
    ledger.finish(ledger.claim(req("k4")).run, done())
    # the slot skipped while paused stays claimable (run --date/--at, or a firing of it)
    assert ledger.claim(req("k3", trigger="manual")).run is not None


def test_pausing_again_replaces_the_pause(ledger, clock):
    ledger.pause("settle", at(60), "first", "ops1")
    clock.advance(5)
    second = ledger.pause("settle", None, "second", "ops2")
    assert ledger.pauses() == {"settle": second}
    assert (second.until, second.reason, second.paused_by, second.paused_at) == \
        (None, "second", "ops2", at(5))


def test_a_pause_covers_its_own_job_and_name_at_host_never_another_job(ledger):
    """A pause of one host's share (ledger_job) covers that share; NAME's covers every share
    and the fleet job NAME; neither covers a job named NAME@HOST (a fleet job whose name holds
    an @) nor another name that starts with NAME."""
    from cronwrap.model import ledger_job

    web1, web2 = ledger_job("rotate", "web1"), ledger_job("rotate", "web2")
    other = ledger_job("rotate2", "web1")
    ledger.pause(web1, None, "disk swap", "ops1")
    claim = ledger.claim(req("k1", job=web1, host="web1"))
    assert claim.skip_reason == Reason.PAUSED and claim.pause.job == web1
    assert ledger.claim(req("k1", job=web2, host="web2")).run is not None
    assert ledger.claim(req("k1", job="rotate", host="web3")).run is not None
    assert ledger.claim(req("k1", job=other, host="web1")).run is not None
    assert ledger.claim(req("k1", job="rotate@web1", host="web1")).run is not None
    ledger.pause("rotate", None, "all hosts", "ops1")
    claim = ledger.claim(req("k2", job=web2, host="web2", overlap_skip=False))
    assert claim.skip_reason == Reason.PAUSED and claim.pause.job == "rotate"
    # both in force: the host's own pause is the one named
    assert ledger.claim(req("k2", job=web1, host="web1")).pause.job == web1
    assert ledger.claim(req("k2", job=other, host="web1", overlap_skip=False)).run is not None
    assert ledger.claim(req("k2", job="rotate@web1", host="web1",
                            overlap_skip=False)).run is not None
    assert ledger.claim(req("k9", job="rotatex", overlap_skip=False)).run is not None


@pytest.fixture
def reader(backend, ledger, tmp_path, request):
    """A second ledger object over the same data that only reads, as ``serve``'s is (the
    in-memory ledger has one connection: the writer's own)."""
    if backend == "memory":
        yield ledger
        return
    if backend == "sqlite":
        from cronwrap.ledger.sqlite import SqliteLedger

        other = SqliteLedger(tmp_path / "ledger.db", read_only=True)
    else:
        from cronwrap.ledger.postgres import PostgresLedger

        other = PostgresLedger(request.getfixturevalue("pg_dsn"))
    yield other
    other.close()


def test_the_change_token_moves_with_every_commit(ledger, reader, backend, clock):
    seen = [reader.change_token()]
    if backend != "postgres":  # a PostgreSQL server's other databases may be written meanwhile
        assert reader.change_token() == seen[0] and ledger.runs("settle") == []
        assert reader.change_token() == seen[0]  # reading changes nothing

    def changed() -> None:
        token = reader.change_token()
        assert token is not None and token not in seen
        seen.append(token)

    run = ledger.claim(req()).run
    changed()
    clock.advance(10)
    assert ledger.heartbeat(run, 60)  # a lease renewed: what "running" and "late" read
    changed()
    ledger.pause("settle", None, "maintenance", "ops1")
    changed()
    ledger.resume("settle")
    changed()
    ledger.unlock("settle")
    changed()
    ledger.finish(ledger.claim(req(host="h2")).run, done())
    changed()


def test_a_sqlite_ledger_replaced_under_its_reader_has_no_token(tmp_path):
    from cronwrap.ledger.sqlite import SqliteLedger

    path = tmp_path / "ledger.db"
    missing = SqliteLedger(path, read_only=True)  # nothing yet: an empty ledger in memory
    assert missing.change_token() is not None
    SqliteLedger(path).close()  # the first firing makes the file
    assert missing.change_token() is None  # this object cannot see it: open it again
    reader = SqliteLedger(path, read_only=True)
    assert reader.change_token() is not None
    path.rename(tmp_path / "old.db")
    SqliteLedger(path).close()  # another file under the name (a backup restored)
    assert reader.change_token() is None
    missing.close()
    reader.close()


# -- steps (expansion 5, cronwrap step): begun under the fence, kept across attempts ------------

def test_steps_are_fenced_kept_across_attempts_and_pruned_with_their_run(ledger, clock):
    from cronwrap.model import STEP_DONE, STEP_FENCED, STEP_GONE, STEP_LAPSED, STEP_RUN

    first = ledger.claim(req(lease=30.0)).run
    begun = ledger.begin_step(first.run_id, first.run_key, first.fence, "a", "h1", 11, False, 0)
    assert begun.action == STEP_RUN and begun.step is None
    assert ledger.end_step(first, "a", "succeeded", 0, None, 5) == (True, ledger.get_run("settle", first.run_id))
    assert ledger.begin_step(first.run_id, first.run_key, first.fence, "b", "h1", 12, False, 0).action == STEP_RUN
    # The lease runs out: no step starts (it might be taken over any moment) ...
    clock.advance(31)
    assert ledger.begin_step(first.run_id, first.run_key, first.fence, "c", "h1", 13, False, 0).action == STEP_LAPSED
    # ... and once it is taken over, the old attempt's steps are refused, its end of b is not kept
    # once the new attempt has started b, and a is done for the new attempt.
    second = ledger.claim(req(host="h2", trigger="manual")).run
    assert (second.attempt, second.fence) == (2, first.fence + 1)
    assert ledger.begin_step(first.run_id, first.run_key, first.fence, "c", "h1", 13, False, 0).action == STEP_FENCED
    done_a = ledger.begin_step(second.run_id, second.run_key, second.fence, "a", "h2", 21, False, 0)
    assert done_a.action == STEP_DONE and (done_a.step.attempt, done_a.step.host) == (1, "h1")
    assert ledger.begin_step(second.run_id, second.run_key, second.fence, "b", "h2", 22, False, 0).action == STEP_RUN
    recorded, now = ledger.end_step(first, "b", "succeeded", 0, None, 5)
    assert not recorded and now.fence == second.fence
    assert ledger.end_step(second, "b", "failed", 3, None, 7)[0]
    # --force runs a done step; a forced run's steps count from its fence (CRONWRAP_STEPS_FROM).
    assert ledger.begin_step(second.run_id, second.run_key, second.fence, "a", "h2", 23, True, 0).action == STEP_RUN
    ledger.end_step(second, "a", "succeeded", 0, None, 1)
    assert ledger.begin_step(second.run_id, second.run_key, second.fence, "a", "h2", 24, False,
                             second.fence + 1).action == STEP_RUN
    steps = ledger.steps([second])[second.run_id]
    assert [(s.key, s.status, s.attempt, s.host, s.exit_code) for s in steps] == [
        ("a", "running", 2, "h2", None), ("b", "failed", 2, "h2", 3)]  # one clock: by key
    run, b = ledger.step_state(second.run_id, second.run_key, "b")
    assert run.run_id == second.run_id and b.status == "failed"
    assert ledger.begin_step(second.run_id, "another key", second.fence, "a", "h2", 25, False, 0).action == STEP_GONE
    # Prune takes a run's steps with it.
    ledger.finish(second, done())
    clock.advance(86400 * 40)
    ledger.prune(datetime.fromtimestamp(clock.t - 86400, timezone.utc), 0)
    assert ledger.step_state(second.run_id, second.run_key, "b") == (None, None)
    assert ledger.steps([second]) == {second.run_id: []}


def test_run_by_key_finds_the_slot_s_row_and_only_its_job_s(ledger):
    """``why``'s one look-up along the unique key (job, run_key)."""
    run = ledger.claim(req("k1")).run
    ledger.finish(run, done("failed", 3))
    ledger.claim(req("k1", job="other"))
    found = ledger.run_by_key("settle", "k1")
    assert (found.run_id, found.status, found.exit_code) == (run.run_id, "failed", 3)
    assert ledger.run_by_key("other", "k1").run_id != run.run_id
    assert ledger.run_by_key("settle", "k2") is None
    assert ledger.run_by_key("nosuch", "k1") is None
