"""deadline.py: a CPU-time budget that ends a runaway regular expression (issue 20 §1). CPU
time, not the wall clock: each bound below is a budget the code keeps, whatever the load."""

from __future__ import annotations

import re
import signal
import threading
import time

from cronwrap.redact.deadline import CpuBudget

HOSTILE = re.compile(rb"(x+x+)+y")


def busy(seconds: float, budget: CpuBudget | None = None, every: float = 0.01) -> None:
    """Burn ``seconds`` of CPU, bumping ``budget.mark`` every ``every`` seconds of it."""
    start = last = time.process_time()
    while (now := time.process_time()) - start < seconds:
        if budget is not None and now - last >= every:
            budget.mark += 1
            last = now


def test_a_runaway_match_is_stopped_after_a_step_or_two_of_cpu():
    budget = CpuBudget(step=0.05, total=10)
    assert budget.run(lambda: HOSTILE.search(b"x" * 40)) is False
    # Not "at least a step": the kernel runs ITIMER_VIRTUAL on the user time it samples at each
    # tick, which on a loaded machine runs ahead of process_time()'s exact count (0.036 s
    # measured for a 0.05 s step under a test suite's load). The bound that matters is above.
    assert 0 < budget.used < 1.0 and not budget.spent
    assert budget.run(lambda: None) is True  # the next run starts afresh


def test_work_that_makes_progress_is_never_stopped_by_the_step():
    budget = CpuBudget(step=0.05, total=10)
    assert budget.run(lambda: busy(0.4, budget)) is True
    assert budget.used >= 0.4


def test_the_total_ends_the_run_it_is_spent_in_and_every_later_one():
    budget = CpuBudget(step=5, total=0.1)
    assert budget.run(lambda: busy(1.0, budget)) is False
    assert budget.spent and budget.used < 0.5
    called = []
    assert budget.run(lambda: called.append(1)) is False and not called


def test_the_previous_handler_and_timer_are_put_back():
    seen = []

    def handler(*_):
        seen.append(1)

    previous = signal.signal(signal.SIGVTALRM, handler)
    signal.setitimer(signal.ITIMER_VIRTUAL, 100)
    try:
        budget = CpuBudget(step=0.05, total=10)
        assert budget.run(lambda: HOSTILE.search(b"x" * 40)) is False
        assert budget.run(lambda: busy(0.01)) is True
        assert signal.getsignal(signal.SIGVTALRM) is handler
        assert 50 < signal.getitimer(signal.ITIMER_VIRTUAL)[0] <= 101 and not seen
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
    assert signal.getsignal(signal.SIGVTALRM) is previous


def test_outside_the_main_thread_there_is_no_deadline_but_the_total_counts():
    budget = CpuBudget(step=0.01, total=0.05)
    results = []
    before = signal.getsignal(signal.SIGVTALRM)
    thread = threading.Thread(target=lambda: results.append(budget.run(lambda: busy(0.1))))
    thread.start()
    thread.join()
    assert results == [True] and budget.spent  # finished: nothing could stop it there
    assert budget.run(lambda: None) is False and signal.getsignal(signal.SIGVTALRM) is before
