"""The claim path's rows of bench/run.py (issue 24 §2), each a ratio to its reference measured
in the same run, interleaved:

- burst (`burst_client.py`): N client processes, each with one held connection, claim
  distinct jobs one after another, released together; N = 1, 10, 50. cronwrap's
  ``PostgresLedger.claim()`` against the floor, a bare ``INSERT … ON CONFLICT DO NOTHING
  RETURNING id`` on a psycopg connection. Budgets: rate with 50 clients ≥ 0.8× the floor's;
  p50 at 1, 10 and 50 clients ≤ 1.5× the floor's. Directly and through PgBouncer (transaction
  mode).
- race (`claim_timer.py`): 3 processes × 200 jobs in the same order, each claim on a fresh
  connection as a firing's is (``PostgresLedger(url)``, ``claim()``, ``finish()``), against the
  same processes doing connect + the bare insert (``claim_timer.py … floor``). Budget: claim
  p95 ≤ 2× the floor's p95. Directly and through PgBouncer.
(The PostgreSQL firing against ``pg_floor_wrapper.py`` is run.py's ``startup_pg``.)
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time

from common import HERE, pct, pg_url
from fleet import PgBouncer, burst_once, first_lines

LEVELS = (1, 10, 50)
# lean: bench/claim_lean.py's one-statement claim, an experiment beside cronwrap's (no verdict);
# fn: the pinned function on a bare psycopg connection (the server's share of cronwrap's claim)
MODES = ("floor", "writes", "ledger", "lean", "fn")
RATE_BUDGET, P50_BUDGET, P95_BUDGET = 0.8, 1.5, 2.0


def claims(bench) -> None:
    labels = ("claims: rate with 50 clients", "claims: p50 at 1 / 10 / 50 clients",
              "claims: race p95, 3 processes × 200 jobs, a connection per claim",
              "claims: PostgreSQL firing")
    if not bench.pg():
        for label in labels:
            bench.skipped_pg(label, "issue 24 §2")
        return
    host = os.environ.get("PGHOST") or "127.0.0.1"
    port = os.environ.get("PGPORT") or "5432"
    targets = {"direct": (host, port)}
    bouncer = None
    if shutil.which("pgbouncer"):
        try:
            bouncer = PgBouncer(host, port)
            targets["PgBouncer"] = ("127.0.0.1", str(bouncer.port))
        except RuntimeError as exc:
            print(f"  no pgbouncer: {exc}", flush=True)
    try:
        burst_rows(bench, targets, bouncer)
        race_rows(bench, targets)
    finally:
        if bouncer is not None:
            bouncer.stop()
    paths_row(bench)


def paths_row(bench) -> None:
    """claim_paths.py: the first calls on a new connection, and the one-statement race."""
    rounds = 10 if bench.quick else 40
    url = bench.create_database("claimpaths")
    subprocess.run([bench.exe, "db", "init"], env=bench.env("claim-paths", CRONWRAP_DB=url),
                   check=True, capture_output=True)
    out = bench.tmp / "claim_paths.json"
    load = os.getloadavg()[0]
    subprocess.run([bench.python, str(HERE / "claim_paths.py"), url, str(rounds), str(out)],
                   check=True, env=bench.env("claim-paths"))
    got = json.loads(out.read_text())
    calls = got["calls"]
    bench.row("claims: calls 1 / 2 / 3 on a new connection (bench/claim_paths.py, "
              "synchronous_commit off)",
              "; ".join(f"{kind} " + " / ".join(f"{calls[f'{kind} {n}']:.2f}" for n in (1, 2, 3))
                        + " ms" for kind in ("function", "plain statements", "lean statement",
                                                 "bare insert"))
              + f"; `DO $$ BEGIN END $$` (plpgsql loaded) {calls['DO (plpgsql load) 1']:.2f} ms"
              f"; one-statement claim (CTE) that waited on the job's lock saw the slot as "
              f"{got['cte_saw']} while the table held {got['table_holds']}; median of {rounds} "
              f"connections, load {load:.1f}",
              "— (where the time goes)", None)


def burst_rows(bench, targets: dict[str, tuple[str, str]], bouncer: PgBouncer | None) -> None:
    rounds = 1 if bench.quick else 3
    per = {1: 40, 10: 20, 50: 10} if bench.quick else {1: 100, 10: 30, 50: 20}
    results: dict[tuple[str, int, str], list[dict]] = {}
    loads: list[float] = []
    for r in range(rounds):
        for target, (t_host, t_port) in targets.items():
            for clients in LEVELS:
                for mode in MODES:
                    loads.append(os.getloadavg()[0])
                    results.setdefault((target, clients, mode), []).append(burst_once(
                        bench, mode, f"c{clients}{target[:1]}", t_host, t_port, clients,
                        per[clients], r, bouncer if target == "PgBouncer" else None))
    load = f"load {min(loads):.1f}–{max(loads):.1f}"
    for target in targets:
        def lat(clients: int, mode: str) -> list[float]:
            return [ms for x in results[(target, clients, mode)] for ms in x["latencies"]]

        errors = [e for c in LEVELS for m in MODES
                  for x in results[(target, c, m)] for e in x["errors"]]
        err = f"; {len(errors)} errors: {first_lines(errors)}" if errors else ""
        rate = statistics.median(x["rate"] for x in results[(target, 50, "ledger")])
        f_rate = statistics.median(x["rate"] for x in results[(target, 50, "floor")])
        w_rate = statistics.median(x["rate"] for x in results[(target, 50, "writes")])
        l_rate = statistics.median(x["rate"] for x in results[(target, 50, "lean")])
        fn_rate = statistics.median(x["rate"] for x in results[(target, 50, "fn")])
        ratio = rate / f_rate if f_rate else 0.0
        bench.row(f"claims: rate with 50 clients × {per[50]} claims, held connections, {target}"
                  + (" (transaction mode)" if target == "PgBouncer" else ""),
                  f"{ratio:.2f}x the floor's rate (verdict); cronwrap claim() {rate:,.0f}/s, "
                  f"bare INSERT … ON CONFLICT {f_rate:,.0f}/s; the claim's writes alone (job "
                  f"upsert + run insert, one statement, no checks) {w_rate:,.0f}/s = "
                  f"{w_rate / f_rate if f_rate else 0:.2f}x the floor; the lean statement "
                  f"(bench/claim_lean.py, an experiment) {l_rate:,.0f}/s = "
                  f"{l_rate / f_rate if f_rate else 0:.2f}x; the pinned function on a bare "
                  f"psycopg connection {fn_rate:,.0f}/s = {fn_rate / f_rate if f_rate else 0:.2f}x"
                  f"; per round "
                  + ", ".join(f"{x['rate']:,.0f}" for x in results[(target, 50, "ledger")])
                  + f" vs " + ", ".join(f"{x['rate']:,.0f}" for x in results[(target, 50, "floor")])
                  + f"; {rounds} rounds, {load}{err}",
                  f"≥ {RATE_BUDGET}x the bare insert's rate", ratio >= RATE_BUDGET and not errors)
        parts, ok = [], not errors
        for clients in LEVELS:
            led, flo = lat(clients, "ledger"), lat(clients, "floor")
            wri, lea, fn = lat(clients, "writes"), lat(clients, "lean"), lat(clients, "fn")
            p50 = statistics.median(led) / statistics.median(flo)
            p95 = pct(led, 95) / pct(flo, 95)
            ok = ok and p50 <= P50_BUDGET
            parts.append(f"{clients}: {p50:.2f}x ({statistics.median(led):.2f} vs "
                         f"{statistics.median(flo):.2f} ms; p95 {pct(led, 95):.2f} vs "
                         f"{pct(flo, 95):.2f}, {p95:.2f}x; writes alone p50 "
                         f"{statistics.median(wri):.2f}, "
                         f"{statistics.median(wri) / statistics.median(flo):.2f}x; lean p50 "
                         f"{statistics.median(lea):.2f}, "
                         f"{statistics.median(lea) / statistics.median(flo):.2f}x, p95 "
                         f"{pct(lea, 95) / pct(flo, 95):.2f}x; bare function p50 "
                         f"{statistics.median(fn) / statistics.median(flo):.2f}x)")
        bench.row(f"claims: p50 at 1 / 10 / 50 clients, held connections, {target}",
                  "claim() p50 / bare insert p50 at " + "; ".join(parts) + f"; {load}",
                  f"each ≤ {P50_BUDGET}x", ok)


def race_rows(bench, targets: dict[str, tuple[str, str]]) -> None:
    jobs, hosts = (60 if bench.quick else 200), ("h1", "h2", "h3")
    rounds = 1 if bench.quick else 3
    timings: dict[tuple[str, str], list[dict]] = {}
    loads: list[float] = []
    for r in range(rounds):
        for target, (t_host, t_port) in targets.items():
            for mode in ("floor", "ledger", "lean"):
                name = f"race_{target[:1].lower()}_{mode}_{r}"
                direct = bench.create_database(name)
                if mode in ("ledger", "lean"):
                    subprocess.run([bench.exe, "db", "init"],
                                   env=bench.env("race-claims", CRONWRAP_DB=direct),
                                   check=True, capture_output=True)
                else:
                    session = bench.admin_session(f"cwbench_{os.getpid()}_{name}")
                    session.query("CREATE TABLE race_floor (id bigserial PRIMARY KEY, job text "
                                  "NOT NULL, run_key text NOT NULL, claimed_at timestamptz NOT "
                                  "NULL DEFAULT now(), UNIQUE (job, run_key))")
                    session.close()
                url = pg_url(f"cwbench_{os.getpid()}_{name}", host=t_host, port=t_port)
                start_at = time.time() + 2.0
                outs = [bench.tmp / f"{name}-{h}.jsonl" for h in hosts]
                loads.append(os.getloadavg()[0])
                procs = [subprocess.Popen([bench.python, str(HERE / "claim_timer.py"), url, h,
                                           str(jobs), str(start_at), str(out), mode],
                                          env=bench.env("race-claims"))
                         for h, out in zip(hosts, outs)]
                for p in procs:
                    p.wait()
                timings.setdefault((target, mode), []).extend(
                    json.loads(line) for out in outs for line in out.read_text().splitlines())
                bench.drop_database(f"cwbench_{os.getpid()}_{name}")
    for target in targets:
        led = [x["claim_ms"] for x in timings[(target, "ledger")]]
        flo = [x["claim_ms"] for x in timings[(target, "floor")]]
        lea = [x["claim_ms"] for x in timings[(target, "lean")]]
        sends = [x["statements"] for x in timings[(target, "lean")]]
        con = [x["connect_ms"] for x in timings[(target, "ledger")]]
        f_con = [x["connect_ms"] for x in timings[(target, "floor")]]
        won = sum(x["claimed"] for x in timings[(target, "ledger")])
        ratio = pct(led, 95) / pct(flo, 95)
        bench.row(f"claims: race p95, {len(hosts)} processes × {jobs} jobs, a new connection "
                  f"per claim, {target}",
                  f"{ratio:.2f}x the floor's p95 (verdict); claim() p95 {pct(led, 95):.2f} ms, "
                  f"p50 {statistics.median(led):.2f}; bare insert on a new connection p95 "
                  f"{pct(flo, 95):.2f}, p50 {statistics.median(flo):.2f}; the lean statement "
                  f"(bench/claim_lean.py, an experiment) p95 {pct(lea, 95):.2f} ms = "
                  f"{pct(lea, 95) / pct(flo, 95):.2f}x, p50 {statistics.median(lea):.2f}, "
                  f"{sum(x['claimed'] for x in timings[(target, 'lean')])} claimed, "
                  f"{sum(s == 1 for s in sends)} of {len(sends)} in one statement; {won} claimed of "
                  f"{len(led)}; connect: PostgresLedger(url) (connect + schema check) p50 "
                  f"{statistics.median(con):.2f} ms, psycopg.connect p50 "
                  f"{statistics.median(f_con):.2f}; {rounds} rounds, load "
                  f"{min(loads):.1f}–{max(loads):.1f}",
                  f"claim p95 ≤ {P95_BUDGET}x the bare insert's", ratio <= P95_BUDGET)
