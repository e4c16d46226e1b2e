"""policy.py: the runner's pure decisions."""

from __future__ import annotations

from cronwrap.model import Reason, Run, Status
from cronwrap.process.supervise import Outcome
from cronwrap.run import policy


def outcome(**kw) -> Outcome:
    fields = dict(exit_code=0, signal=None, timed_out=False, killed=False, spawn_error=None,
                  duration=1.0)
    return Outcome(**{**fields, **kw})


def test_how_an_end_is_recorded():
    assert policy.ended_as(outcome(), False) == (Status.SUCCEEDED, None)
    assert policy.ended_as(outcome(exit_code=3), False) == (Status.FAILED, None)
    assert policy.ended_as(outcome(exit_code=None, signal=15), False) == (Status.KILLED, None)
    assert policy.ended_as(outcome(exit_code=None, signal=15, timed_out=True), False) == \
        (Status.TIMEOUT, None)
    assert policy.ended_as(outcome(exit_code=127, spawn_error="not found: x"), False) == \
        (Status.FAILED, None)
    assert policy.ended_as(outcome(exit_code=None, signal=15, timed_out=True), True) == \
        (Status.KILLED, Reason.LEASE_LOST)


def runs(*statuses: str) -> list[Run]:
    return [Run(run_id=i, job="j", run_key=str(i), scheduled_at=None, trigger="schedule",
                status=s) for i, s in enumerate(statuses)]


def test_the_failure_streak_counts_back_to_the_last_success():
    assert policy.failure_streak(runs("failed", "timeout", "succeeded", "failed")) == 2
    assert policy.failure_streak(runs("succeeded", "failed", "killed", "succeeded")) == 2
    assert policy.failure_streak(runs("skipped", "failed", "missed", "failed")) == 2
    assert policy.failure_streak([]) == 0


def test_a_firing_exits_with_its_first_failure():
    assert policy.firing_status([0, 3, 0, 5]) == 3
    assert policy.firing_status([0, 0]) == 0
    assert policy.firing_status([]) == 0


def test_success_and_warning_exit_codes_choose_the_status():
    success, warning = frozenset({0, 24}), frozenset({1})
    assert policy.ended_as(outcome(exit_code=24), False, success, warning) == \
        (Status.SUCCEEDED, None)
    assert policy.ended_as(outcome(exit_code=1), False, success, warning) == (Status.WARNING, None)
    assert policy.ended_as(outcome(exit_code=2), False, success, warning) == (Status.FAILED, None)
    assert policy.ended_as(outcome(exit_code=24), False) == (Status.FAILED, None)
    # a code never turns a timeout, a signal or a command that could not start into a success
    assert policy.ended_as(outcome(exit_code=1, timed_out=True), False, success, warning) == \
        (Status.TIMEOUT, None)
    assert policy.ended_as(outcome(exit_code=None, signal=15), False, success, warning) == \
        (Status.KILLED, None)
    assert policy.ended_as(outcome(exit_code=127, spawn_error="not found: x"), False,
                           frozenset({0, 127}), warning) == (Status.FAILED, None)


def spec(**kw):
    from cronwrap.options.spec import JobSpec

    return JobSpec(command=["true"], **{**dict(on_failure="fail", on_success="ok",
                                               on_warning="look"), **kw})


def test_a_warning_runs_on_warning_and_never_on_failure():
    assert policy.choose_hook(spec(), Status.WARNING, 0) == ("look", None)
    assert policy.choose_hook(spec(alert_after=2), Status.WARNING, 5) == ("look", None)
    assert policy.choose_hook(spec(on_warning=None), Status.WARNING, 0) == (None, None)
    assert policy.choose_hook(spec(), Status.FAILED, 0) == ("fail", None)
    assert policy.choose_hook(spec(), Status.SUCCEEDED, 0) == ("ok", None)
    assert policy.choose_hook(spec(alert_after=2), Status.SUCCEEDED, 2) == ("fail", "recovered")


def test_warnings_neither_count_nor_end_a_failure_streak():
    assert policy.failure_streak(runs("failed", "warning", "failed", "succeeded")) == 2
    assert policy.failure_streak(runs("warning", "failed", "failed")) == 2
    assert policy.failure_streak(runs("succeeded", "warning", "failed", "warning")) == 1


def test_a_success_faster_than_min_duration_is_a_too_fast_warning():
    fast = outcome(duration=1.0)
    assert policy.ended_as(fast, False, min_duration=5.0) == (Status.WARNING, Reason.TOO_FAST)
    assert policy.ended_as(outcome(duration=5.0), False, min_duration=5.0) == \
        (Status.SUCCEEDED, None)
    assert policy.ended_as(fast, False) == (Status.SUCCEEDED, None)
    # after --success-exit; a failure or a warning exit keeps its own record
    assert policy.ended_as(outcome(exit_code=24, duration=1.0), False, frozenset({0, 24}),
                           min_duration=5.0) == (Status.WARNING, Reason.TOO_FAST)
    assert policy.ended_as(outcome(exit_code=2, duration=1.0), False, min_duration=5.0) == \
        (Status.FAILED, None)
    assert policy.ended_as(outcome(exit_code=1, duration=1.0), False, warning=frozenset({1}),
                           min_duration=5.0) == (Status.WARNING, None)


def test_the_usual_duration_is_a_p95_of_at_least_five_runs():
    from cronwrap.read.report import p95

    assert p95([1.0, 2.0, 3.0, 4.0]) is None
    assert p95([5.0, 1.0, 2.0, 3.0, 4.0]) == 5.0
    assert p95([float(n) for n in range(1, 101)]) == 96.0


def test_a_tree_over_a_limit_is_killed_with_its_reason_and_exits_143_or_137():
    """--max-memory/--max-cpu (issue 26 §2): recorded killed, reason memory or cpu, whatever
    the job returned after the TERM; cronwrap exits 128+TERM, or 128+KILL when KILL was
    needed (the job's own status with --preserve-status)."""
    over = outcome(exit_code=None, signal=15, limit="memory")
    assert policy.ended_as(over, False) == (Status.KILLED, Reason.MEMORY)
    trapped = outcome(exit_code=0, limit="cpu")  # handled TERM and exited 0: still killed
    assert policy.ended_as(trapped, False, min_duration=5.0) == (Status.KILLED, Reason.CPU)
    assert over.exit_status() == 143 and trapped.exit_status() == 143
    assert outcome(exit_code=None, signal=9, limit="cpu", killed=True).exit_status() == 137
    assert trapped.exit_status(preserve_status=True) == 0
    assert policy.ended_as(over, True) == (Status.KILLED, Reason.LEASE_LOST)  # the lease first


def test_a_peak_over_memory_factor_times_its_usual_p95_is_flagged():
    """--memory-factor (issue 26 §2), from figures passed in: the peak (KiB) of the last run
    against the p95 of the successful runs before it, at least five of them."""
    from cronwrap.read.report import memory_note

    usual = [100 * 1024, 110 * 1024, 90 * 1024, 120 * 1024, 105 * 1024]  # p95: 120 MiB
    assert memory_note(3.0, 361 * 1024, usual) == \
        "memory: peak 361 MiB, more than 3x its usual p95 of 120 MiB"
    assert memory_note(3.0, 360 * 1024, usual) is None  # not more than 3x
    assert memory_note(3.0, 900 * 1024, usual[:4]) is None  # too few runs to know the usual
    assert memory_note(None, 900 * 1024, usual) is None  # no factor: off
    assert memory_note(3.0, None, usual) is None  # no figure for the last run
    assert memory_note(1.5, 2 * 1024 * 1024, usual) == \
        "memory: peak 2.0 GiB, more than 1.5x its usual p95 of 120 MiB"
