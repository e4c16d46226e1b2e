"""Does bench/claim_lean.py decide as cronwrap_claim_unless_paused() does? (an experiment)

    python claim_lean_check.py URL

URL: a cronwrap ledger. 1. Each scenario is set up twice, on two fresh jobs, and claimed once
by the pinned function, once by claim_lean.claim (the lean statement, the function behind
it): outcome, took_over, the run row and the job row must agree (ids and times aside).
2. Races: many processes claim one slot at once (exactly one claimed, the rest duplicate),
and many claim overlapping slots of one job (with overlap_skip: never two live running rows;
fences strictly rising in claim order). Prints what it found; exit 1 on a difference.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from datetime import datetime, timedelta, timezone

import psycopg
from psycopg.rows import dict_row

import claim_lean

SLOT = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
SKIP = {"id", "job", "started_at", "created_at", "locked_until", "finished_at"}


def connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True, prepare_threshold=None, row_factory=dict_row)


def params(job: str, **over) -> dict:
    base = dict(job=job, schedule="* * * * *", tz="UTC", key_template=None, settings='{"a": 1}',
                run_key="k", scheduled_at=SLOT, trigger="schedule", host="m", pid=7,
                pid_start=70, boot_id="b", pid_ns=1, lease=120.0, overlap_skip=True,
                force=False, max_attempts=1, skew_ms=3, now=None, gone=[], checked=False,
                schema=claim_lean.schema_version())
    return {**base, **over}


def run_row(job: str, key: str, status: str, *, host: str = "other", live: bool = True,
            attempts: int = 1, fence: int = 1, boot: str = "x") -> str:
    until = "now() + interval '1 h'" if live else "now() - interval '1 s'"
    return (f"INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, attempts, "
            f"host, pid, pid_start, boot_id, pid_ns, locked_by, locked_until, fence, started_at, "
            f"created_at) VALUES ('{job}', '{key}', '{SLOT.isoformat()}', 'schedule', "
            f"'{status}', {attempts}, '{host}', 7, 70, '{boot}', 1, '{host}', "
            f"{until if status == 'running' else 'NULL'}, {fence}, now(), now())")


def job_row(job: str, fence: int = 3) -> str:
    return (f"INSERT INTO cronwrap_jobs (name, schedule, tz, settings, fence, first_seen, "
            f"last_seen, last_slot) VALUES ('{job}', '0 * * * *', 'Europe/Paris', NULL, {fence}, "
            f"now() - interval '1 d', now() - interval '1 d', "
            f"'{(SLOT - timedelta(hours=1)).isoformat()}')")


# name: (setup statements for job J, claim parameters)
SCENARIOS = {
    "new job": (lambda j: [], {}),
    "new slot, job with fence 3": (lambda j: [job_row(j)], {}),
    "new slot beside a finished slot": (lambda j: [job_row(j), run_row(j, "old", "succeeded")],
                                        {}),
    "slot succeeded": (lambda j: [job_row(j), run_row(j, "k", "succeeded")], {}),
    "slot warning": (lambda j: [job_row(j), run_row(j, "k", "warning")], {}),
    "slot running, another runner's live lease": (
        lambda j: [job_row(j), run_row(j, "k", "running")], {}),
    "slot running, this runner's live lease": (
        lambda j: [job_row(j), run_row(j, "k", "running", host="m", boot="b")], {}),
    "slot running, lease expired (takeover)": (
        lambda j: [job_row(j), run_row(j, "k", "running", live=False)], {}),
    "another slot live (overlap)": (lambda j: [job_row(j), run_row(j, "o", "running")], {}),
    "another slot live, no overlap_skip": (lambda j: [job_row(j), run_row(j, "o", "running")],
                                           {"overlap_skip": False}),
    "another slot live of this runner, no overlap_skip": (
        lambda j: [job_row(j), run_row(j, "o", "running", host="m", boot="b")],
        {"overlap_skip": False}),
    "another slot expired": (lambda j: [job_row(j), run_row(j, "o", "running", live=False)], {}),
    "slot failed, attempts spent": (lambda j: [job_row(j), run_row(j, "k", "failed")], {}),
    "slot failed, a retry left": (lambda j: [job_row(j), run_row(j, "k", "failed")],
                                  {"max_attempts": 2}),
    "slot failed, manual": (lambda j: [job_row(j), run_row(j, "k", "failed")],
                            {"trigger": "manual"}),
    "slot skipped (retake)": (lambda j: [job_row(j), run_row(j, "k", "skipped")], {}),
    "slot succeeded, forced": (lambda j: [job_row(j), run_row(j, "k", "succeeded")],
                               {"force": True}),
    "manual, new slot": (lambda j: [job_row(j)], {"trigger": "manual"}),
    "manual, new job": (lambda j: [], {"trigger": "manual"}),
    "paused": (lambda j: [job_row(j), f"INSERT INTO cronwrap_pauses (job, paused_at) VALUES "
                                      f"('{j}', now())"], {}),
    "paused, manual": (lambda j: [job_row(j), f"INSERT INTO cronwrap_pauses (job, paused_at) "
                                              f"VALUES ('{j}', now())"], {"trigger": "manual"}),
    "pause expired": (lambda j: [job_row(j), f"INSERT INTO cronwrap_pauses (job, until, "
                                             f"paused_at) VALUES ('{j}', now() - interval '1 s',"
                                             f" now())"], {}),
    "schema newer": (lambda j: [job_row(j)], {"schema": 1}),
}


def outcome_of(conn, how: str, setup, over: dict, tag: str) -> tuple:
    job = f"chk-{tag}-{how}-{time.time()}"
    for statement in setup(job):
        conn.execute(statement)
    p = params(job, **over)
    try:
        outcome, took_over, run, sent = claim_lean.claim(conn, p, is_gone=lambda r: False,
                                                         lean=how == "lean")
        result = (outcome, took_over, run)
    except psycopg.Error as exc:
        return (f"error {exc.sqlstate}",), None, 0
    run = {k: v for k, v in (result[2] or {}).items() if k not in SKIP and k != "pause"}
    jrow = conn.execute("SELECT schedule, tz, settings, key_template, fence, last_slot, "
                        "first_seen = last_seen AS fresh FROM cronwrap_jobs WHERE name = %s",
                        (job,)).fetchone()
    return (result[0], result[1], run), jrow, sent


def scenarios(url: str) -> bool:
    conn = connect(url)
    ok = True
    for n, (name, (setup, over)) in enumerate(SCENARIOS.items()):
        ref, ref_job, _ = outcome_of(conn, "function", setup, over, str(n))
        got, got_job, sent = outcome_of(conn, "lean", setup, over, str(n))
        same = ref == got and ref_job == got_job
        ok = ok and same
        print(f"{'same' if same else 'DIFFERENT':9s} {name}: {ref[0]}"
              + ("" if same else f"\n   function {ref} {ref_job}\n   lean     {got} {got_job}")
              + f" (lean: {sent} statement{'s' if sent > 1 else ''})")
    conn.close()
    return ok


def racer(url: str, job: str, key: str, host: str, start: float, queue) -> None:
    conn = connect(url)
    p = params(job, run_key=key, host=host, boot_id=host, pid=1)
    while time.time() < start:
        pass
    outcome, _, run, sent = claim_lean.claim(conn, p)
    queue.put((host, key, outcome, run and run.get("fence"), sent))
    conn.close()


def race(url: str, processes: int, keys: int, rounds: int) -> bool:
    """``processes`` claimers at once on one job, spread over ``keys`` slots."""
    ok = True
    ctx = multiprocessing.get_context("fork")
    counts: dict[str, int] = {}
    for r in range(rounds):
        job = f"race-{keys}-{r}-{time.time()}"
        queue = ctx.Queue()
        start = time.time() + 0.3
        procs = [ctx.Process(target=racer, args=(url, job, f"k{i % keys}", f"h{i}", start, queue))
                 for i in range(processes)]
        for p in procs:
            p.start()
        results = [queue.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        for _, _, outcome, _, sent in results:
            counts[outcome] = counts.get(outcome, 0) + 1
            counts[f"{sent} statements"] = counts.get(f"{sent} statements", 0) + 1
        claimed = [x for x in results if x[2] == "claimed"]
        conn = connect(url)
        running = conn.execute("SELECT run_key, fence FROM cronwrap_runs WHERE job = %s AND "
                               "status = 'running' ORDER BY fence", (job,)).fetchall()
        fence = conn.execute("SELECT fence FROM cronwrap_jobs WHERE name = %s",
                             (job,)).fetchone()["fence"]
        conn.close()
        # overlap_skip: one live run of the job at most, whoever claimed it
        good = len(claimed) == 1 and len(running) == 1 and fence >= claimed[0][3]
        if keys == 1:
            good = good and all(x[2] == "duplicate" for x in results if x[2] != "claimed")
        else:
            good = good and all(x[2] in ("duplicate", "overlap") for x in results
                                if x[2] != "claimed")
        if not good:
            ok = False
            print(f"  RACE WRONG round {r}: {sorted(results)} running {running} fence {fence}")
    print(f"race, {processes} claimers, {keys} slot(s) of one job, {rounds} rounds: "
          f"{'exact' if ok else 'WRONG'}; outcomes {counts}")
    return ok


def interleaved(url: str, name: str, a_params: dict, b_over: dict, want: str,
                want_fence: int | None) -> bool:
    """Host A claims through the pinned function in an open transaction (it holds the job's
    row); host B's lean claim starts, its snapshot taken, and waits on that row; A commits.
    B must not decide from what its snapshot missed."""
    import threading

    job = f"inter-{time.time()}"
    setup = connect(url)
    setup.execute(job_row(job))
    if a_params.get("pause"):
        setup.execute(f"INSERT INTO cronwrap_pauses (job, paused_at) VALUES ('{job}', now())")
    a = psycopg.connect(url, prepare_threshold=None, row_factory=dict_row)
    b = connect(url)
    a.execute(claim_lean.FULL, params(job, **{k: v for k, v in a_params.items()
                                              if k != "pause"})).fetchall()
    got: dict = {}

    def host_b() -> None:
        got["r"] = claim_lean.claim(b, params(job, host="hb", boot_id="hb", **b_over))

    thread = threading.Thread(target=host_b)
    thread.start()
    time.sleep(0.5)
    waiting = setup.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = "
                            "'Lock' AND datname = current_database()").fetchone()["n"]
    a.commit()
    thread.join()
    outcome, _, run, sent = got["r"]
    fence = run and run.get("fence")
    ok = outcome == want and waiting >= 1 and (want_fence is None or fence == want_fence)
    print(f"{'exact' if ok else 'WRONG':9s} interleaved, {name}: B waited ({waiting} waiting), "
          f"answered {outcome} fence {fence} after {sent} statements")
    for conn in (a, b, setup):
        conn.close()
    return ok


def main() -> int:
    url = sys.argv[1]
    ok = interleaved(url, "A claims slot o (fence 3 -> 4) while B's snapshot sees none: B "
                          "must see the overlap", {"run_key": "o"}, {}, "overlap", None)
    ok = interleaved(url, "A claims slot k while B waits: B duplicate", {}, {}, "duplicate",
                     None) and ok
    ok = interleaved(url, "A, paused, records slot k skipped (no fence) while B (manual) waits: "
                          "B retakes it, fence 5 (4 skipped by the lean statement; the "
                          "function alone gives 4)",
                     {"pause": True}, {"trigger": "manual"}, "claimed", 5) and ok
    ok = scenarios(url) and ok
    ok = race(url, 12, 1, 20) and ok
    ok = race(url, 12, 4, 20) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
