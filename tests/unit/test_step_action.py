"""model.step_action, the pure decision of `cronwrap step` (issue 26 §1): run, skip, or refuse."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from cronwrap.model import (STEP_DONE, STEP_FENCED, STEP_GONE, STEP_LAPSED, STEP_RUN, Run, Step,
                            step_action)

NOW = datetime(2026, 10, 28, 1, 31, tzinfo=timezone.utc)


def run(status="running", fence=7, lease=60) -> Run:
    return Run(run_id=1, job="settle", run_key="k", scheduled_at=NOW, trigger="schedule",
               status=status, attempt=2, fence=fence, locked_until=NOW + timedelta(seconds=lease))


def step(status="succeeded", fence=6) -> Step:
    return Step("settle", "k", "batch-0001", 1, status, 1, fence, "app1", 9, NOW, NOW, 1, 0, None)


@pytest.mark.parametrize("row, found, force, since, expected", [
    (run(), None, False, 0, STEP_RUN),                      # never started in this slot
    (run(), step(), False, 0, STEP_DONE),                   # done by an earlier attempt
    (run(), step(fence=7), False, 0, STEP_DONE),            # done by this attempt
    (run(), step(), True, 0, STEP_RUN),                     # --force
    (run(), step(), False, 7, STEP_RUN),                    # run --force: counts from fence 7
    (run(), step(fence=7), False, 7, STEP_DONE),            # ... but its own retries keep theirs
    (run(), step("failed"), False, 0, STEP_RUN),            # failed: again
    (run(), step("running"), False, 0, STEP_RUN),           # left running by a dead attempt
    (run(fence=8), None, False, 0, STEP_FENCED),            # taken over
    (run(fence=8), step(), True, 0, STEP_FENCED),           # --force never beats the fence
    (run("failed"), None, False, 0, STEP_FENCED),           # the run has ended
    (run(lease=0), None, False, 0, STEP_LAPSED),            # lease out, not yet taken over
    (run(lease=-5), step(), False, 0, STEP_LAPSED),
    (None, None, False, 0, STEP_GONE),
])
def test_step_action(row, found, force, since, expected):
    assert step_action(row, found, 7, force, since, NOW) == expected
