"""Retry decisions with the clock and the random source passed in."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from cronwrap.errors import UsageError
from cronwrap.options.spec import retry_codes as parse_retry_on
from cronwrap.run.retry import (CANNOT_RUN, TIMEOUT, backoff, fits_before_next_slot,
                                retry_deadline, should_retry)

NOW = datetime(2026, 3, 2, 12, 0, 5, tzinfo=timezone.utc)
TEMPFAIL = frozenset({75})


# -- parse_retry_on ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("75", {75}),
    ("75,111", {75, 111}),
    (" 75 , timeout ", {75, TIMEOUT}),
    ("TIMEOUT", {TIMEOUT}),
    ("64-66,75", {64, 65, 66, 75}),
    ("1-255", set(range(1, 256))),
    ("75,75", {75}),
])
def test_parse_retry_on(text, expected):
    assert parse_retry_on(text) == frozenset(expected)


@pytest.mark.parametrize("text", ["", "0", "256", "abc", "75,", "-1", "5-3", "1-", "7.5", "0-3"])
def test_parse_retry_on_errors_name_the_option(text):
    with pytest.raises(UsageError, match=r"^--retry-on: .* is not an exit status 1-255"):
        parse_retry_on(text)


def test_parse_retry_on_takes_a_label_like_every_value_parser():
    with pytest.raises(UsageError, match=r"^CRONWRAP_RETRY_ON: 'x'"):
        parse_retry_on("x", "CRONWRAP_RETRY_ON")


def test_without_retry_on_every_failure_but_126_and_127_is_transient():
    assert CANNOT_RUN == frozenset({126, 127})
    assert retry(code=1, retry_on=None) and retry(code=75, retry_on=None)
    assert retry(code=None, retry_on=None)  # ended by a signal of its own (SIGSEGV)
    assert retry(status="timeout", code=124, retry_on=None)
    assert not retry(code=126, retry_on=None) and not retry(code=127, retry_on=None)
    assert not retry(status="killed", code=1, retry_on=None)
    assert not retry(status="warning", code=1, retry_on=None)
    assert not retry(code=1, retry_on=None, retries=0)


def test_with_retry_on_only_its_members_are_transient():
    assert not retry(code=1, retry_on=frozenset({75}))
    assert retry(code=127, retry_on=frozenset({127}))  # said explicitly: as asked


# -- should_retry ------------------------------------------------------------------------------

def retry(status="failed", code=75, retry_on=TEMPFAIL, attempt=1, retries=2, max_attempts=None,
          **kw):
    return should_retry(status, code, retry_on, attempt, retries, max_attempts, **kw)


def test_a_transient_failure_is_retried_while_retries_last():
    assert retry(attempt=1) and retry(attempt=2)
    assert not retry(attempt=3)  # two retries spent: attempts 2 and 3


def test_only_listed_exit_codes_are_transient():
    assert not retry(code=1)
    assert not retry(code=None)
    assert retry(code=111, retry_on=frozenset({75, 111}))


def test_success_and_non_runs_are_never_retried():
    for status in ("succeeded", "skipped", "missed", "running"):
        assert not retry(status=status, code=75)


def test_killed_is_never_retried():
    # killed: a signal from outside or a lost lease; retrying would fight the operator
    assert not retry(status="killed", code=75)


def test_timeout_is_retried_only_when_listed():
    assert not retry(status="timeout", code=124)
    assert not retry(status="timeout", code=124, retry_on=frozenset({124}))
    assert retry(status="timeout", code=None, retry_on=frozenset({75, TIMEOUT}))


def test_no_retries_means_no_retry():
    assert not retry(retries=0)


def test_max_attempts_caps_the_slot_across_invocations():
    assert retry(attempt=1, max_attempts=2)
    assert not retry(attempt=2, max_attempts=2)
    assert not retry(attempt=5, retries=10, max_attempts=3)


def test_retries_count_from_this_invocations_first_attempt():
    # the slot failed twice in an earlier invocation; this one started at attempt 3
    assert retry(attempt=3, retries=1, first_attempt=3)
    assert not retry(attempt=4, retries=1, first_attempt=3)
    assert not retry(attempt=3, retries=1, first_attempt=3, max_attempts=3)


# -- backoff -----------------------------------------------------------------------------------

class Recorder(random.Random):
    def __init__(self) -> None:
        super().__init__(1)
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return b


def test_backoff_is_full_jitter_over_a_doubling_ceiling():
    rng = Recorder()
    assert [backoff(n, 2.0, 100.0, rng) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 16.0]
    assert rng.calls == [(0.0, 2.0), (0.0, 4.0), (0.0, 8.0), (0.0, 16.0)]


def test_backoff_is_capped():
    rng = Recorder()
    assert backoff(10, 2.0, 60.0, rng) == 60.0


def test_a_cap_of_zero_means_none():
    assert backoff(10, 1.0, 0.0, Recorder()) == 512.0


def test_huge_attempts_do_not_overflow():
    assert backoff(100_000, 1.0, 300.0, Recorder()) == 300.0
    assert backoff(100_000, 1.0, 0.0, Recorder()) == 2.0 ** 60


def test_zero_base_means_no_wait():
    assert backoff(3, 0.0, 60.0, Recorder()) == 0.0


def test_backoff_samples_spread_over_the_whole_range():
    rng = random.Random(42)
    samples = [backoff(3, 10.0, 1000.0, rng) for _ in range(2000)]
    assert all(0.0 <= s <= 40.0 for s in samples)
    assert min(samples) < 2.0 and max(samples) > 38.0
    assert 17.0 < sum(samples) / len(samples) < 23.0


def test_backoff_is_reproducible_with_a_seeded_rng():
    assert backoff(2, 5.0, 60.0, random.Random(7)) == backoff(2, 5.0, 60.0, random.Random(7))


# -- fits_before_next_slot ---------------------------------------------------------------------

def test_without_a_schedule_a_retry_always_fits():
    assert fits_before_next_slot(NOW, 3600.0, None, 86400.0)


def test_a_retry_must_end_before_the_next_slot():
    next_slot = NOW + timedelta(minutes=10)
    assert fits_before_next_slot(NOW, 60.0, next_slot, 300.0)
    assert not fits_before_next_slot(NOW, 60.0, next_slot, 540.0)  # ends exactly at the slot
    assert not fits_before_next_slot(NOW, 600.0, next_slot, 0.0)


def test_a_next_slot_already_past_never_fits():
    assert not fits_before_next_slot(NOW, 0.0, NOW - timedelta(seconds=1), 0.0)


def test_a_negative_expected_duration_counts_as_zero():
    assert fits_before_next_slot(NOW, 5.0, NOW + timedelta(seconds=6), -100.0)


# -- retry_deadline: a manual run counts the schedule's interval from its start ---------------

def test_a_firing_retries_until_the_next_slot():
    slot = NOW - timedelta(minutes=1)
    assert retry_deadline(slot, slot + timedelta(days=1)) == slot + timedelta(days=1)
    assert retry_deadline(slot, None) is None and retry_deadline(None, NOW) is None


def test_a_manual_run_of_an_old_slot_gets_the_interval_from_when_it_began():
    slot = NOW - timedelta(days=30)
    deadline = retry_deadline(slot, slot + timedelta(days=1), began=NOW)
    assert deadline == NOW + timedelta(days=1)
    assert fits_before_next_slot(NOW, 60.0, deadline, 600.0)
    assert not fits_before_next_slot(NOW, 60.0, retry_deadline(slot, slot + timedelta(days=1)),
                                     600.0)  # the old rule: a month past, never fits
