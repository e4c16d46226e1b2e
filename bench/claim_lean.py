"""A lean claim for PostgreSQL (issue 24 §2), an experiment: one plain statement that decides
the common cases of cronwrap_claim_unless_paused() — a new slot claimed, a duplicate — and
answers 'retry' or 'full' for everything else, which the caller then sends to the pinned
function. Nothing of cronwrap uses it; bench/claim_lean_bench.py measures it.

Why it is exact (READ COMMITTED): the statement reads one snapshot, taken before it waits for
the job row's lock. What it decides from that snapshot:

- 'duplicate' (the slot's row is there and done, or running under a live lease of another
  runner; no live row of this runner in the way; no other slot's live row when overlap_skip):
  a read-only decision. Every input is in the snapshot, a consistent cut of committed
  transactions; the claim is linearised at the snapshot, before any claim still in progress,
  whose own decision reads nothing this one writes (the job row's schedule, zone, settings,
  last seen and last slot, not decision inputs). The job row is still upserted as the
  function does (it waits for the lock as the function does).
- 'new' (no row for the slot, no live running row that would be in the way): the job row is
  upserted with its fence raised to the snapshot's fence + 1, under ON CONFLICT DO UPDATE …
  WHERE j.fence = excluded.fence - 1, which is evaluated on the row's newest version once it
  is locked. Every claim that makes any row of the job running (this one, the pinned
  function, the previous release's) raises the job's fence under that lock; so an unchanged
  fence proves no row became running between the snapshot and the lock, and what the
  snapshot said about live rows still holds (rows that stopped running since only make it
  more true). The slot's row is then inserted running from the upsert's RETURNING (so after
  the lock), ON CONFLICT DO NOTHING, which sees the newest index entries: a row of the slot
  written meanwhile by a claim that raised no fence (paused, overlap) makes it insert
  nothing. Either miss answers 'retry': nothing is written in the first (the WHERE was
  false), the fence alone moved in the second (monotonic still, one number skipped).
- anything else (paused, schema newer, this runner's live row: 'check', overlap, takeover,
  a retake of a skipped/missed/pending/failed row): 'full', nothing written.

Planned per call like the bare insert (no plpgsql, nothing compiled per connection).
"""

from __future__ import annotations

STATEMENT = """
WITH t AS MATERIALIZED (
  SELECT set_config('lock_timeout', '15s', true) AS lt, coalesce(%(now)s::timestamptz, now()) AS now,
    (SELECT r FROM cronwrap_runs r WHERE r.job = %(job)s::text AND r.run_key = %(run_key)s::text)
      AS slot
),
s AS MATERIALIZED (
  SELECT t.now, t.slot,
    CASE
      WHEN (SELECT value::integer FROM cronwrap_meta WHERE key = 'schema_version') > %(schema)s::integer
        THEN 'full'
      WHEN %(trigger)s::text <> 'manual' AND EXISTS (
        SELECT FROM cronwrap_pauses p WHERE p.job IN (%(job)s::text, split_part(%(job)s::text, chr(31), 1))
          AND (p.until IS NULL OR p.until > t.now)) THEN 'full'
      WHEN EXISTS (
        SELECT FROM cronwrap_runs r
        WHERE r.job = %(job)s::text AND r.status = 'running' AND r.locked_until > t.now
          AND ((r.host = %(host)s::text AND r.boot_id = %(boot_id)s::text AND r.pid_ns = %(pid_ns)s::bigint
                AND (%(overlap_skip)s::boolean OR r.run_key = %(run_key)s::text))
               OR (%(overlap_skip)s::boolean AND r.run_key <> %(run_key)s::text))) THEN 'full'
      WHEN t.slot IS NULL THEN 'new'
      WHEN (t.slot).status = 'running' AND (t.slot).locked_until > t.now THEN 'duplicate'
      WHEN (t.slot).status IN ('running', 'skipped', 'missed', 'pending') OR %(force)s::boolean
        THEN 'full'
      WHEN (t.slot).status IN ('succeeded', 'warning') THEN 'duplicate'
      WHEN %(trigger)s::text = 'manual' OR (t.slot).attempts < %(max_attempts)s::integer THEN 'full'
      ELSE 'duplicate'
    END AS decision,
    coalesce((SELECT fence FROM cronwrap_jobs WHERE name = %(job)s::text), 0) AS fence
  FROM t
),
j AS (
  INSERT INTO cronwrap_jobs AS j (name, schedule, tz, key_template, settings, fence,
                                  first_seen, last_seen, last_slot)
  SELECT %(job)s::text, %(schedule)s::text, %(tz)s::text, %(key_template)s::text, %(settings)s::text,
    CASE WHEN s.decision = 'new' THEN s.fence + 1 ELSE 0 END, s.now, s.now,
    CASE WHEN %(trigger)s::text = 'manual' THEN NULL ELSE %(scheduled_at)s::timestamptz END
  FROM s WHERE s.decision <> 'full'
  ON CONFLICT (name) DO UPDATE SET
    schedule = CASE WHEN %(trigger)s::text = 'manual' THEN j.schedule ELSE excluded.schedule END,
    tz = CASE WHEN %(trigger)s::text = 'manual' THEN j.tz ELSE excluded.tz END,
    settings = CASE WHEN %(trigger)s::text = 'manual' THEN j.settings ELSE excluded.settings END,
    key_template = CASE WHEN %(trigger)s::text = 'manual' THEN j.key_template
                        ELSE excluded.key_template END,
    last_seen = excluded.last_seen,
    last_slot = CASE WHEN %(trigger)s::text = 'manual' THEN j.last_slot
                     ELSE GREATEST(j.last_slot, excluded.last_slot) END,
    fence = CASE WHEN excluded.fence = 0 THEN j.fence ELSE excluded.fence END
  WHERE excluded.fence = 0 OR j.fence = excluded.fence - 1
  RETURNING j.fence
),
run AS (
  INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, attempts, host, pid,
                             pid_start, boot_id, pid_ns, locked_by, locked_until, fence,
                             started_at, skew_ms, created_at)
  SELECT %(job)s::text, %(run_key)s::text, %(scheduled_at)s, %(trigger)s::text, 'running', 1, %(host)s::text, %(pid)s::integer,
    %(pid_start)s::bigint, %(boot_id)s::text, %(pid_ns)s::bigint, %(host)s::text,
    s.now + make_interval(secs => %(lease)s::float8), j.fence, s.now, %(skew_ms)s::integer, s.now
  FROM s, j WHERE s.decision = 'new'
  ON CONFLICT (job, run_key) DO NOTHING
  RETURNING *
)
SELECT 'claimed' AS outcome, to_jsonb(run) AS run FROM run
UNION ALL
SELECT CASE WHEN s.decision = 'new' THEN 'retry' ELSE s.decision END,
       CASE WHEN s.decision = 'duplicate' THEN to_jsonb(s.slot) END
FROM s WHERE NOT EXISTS (SELECT FROM run)
"""


FULL = "SELECT * FROM cronwrap_claim_unless_paused(" + ", ".join(
    f"%({name})s::{kind}" for name, kind in (
        ("job", "text"), ("schedule", "text"), ("tz", "text"), ("key_template", "text"),
        ("settings", "text"), ("run_key", "text"), ("scheduled_at", "timestamptz"),
        ("trigger", "text"), ("host", "text"), ("pid", "integer"), ("pid_start", "bigint"),
        ("boot_id", "text"), ("pid_ns", "bigint"), ("lease", "float8"),
        ("overlap_skip", "boolean"), ("force", "boolean"), ("max_attempts", "integer"),
        ("skew_ms", "integer"), ("now", "timestamptz"), ("gone", "bigint[]"),
        ("checked", "boolean"), ("schema", "integer"))) + ")"
RETRIES = 2  # 'retry' answers in a row before the pinned function decides


def claim(conn, params: dict, is_gone=lambda run: False,
          lean: bool = True) -> tuple[str, bool, dict | None, int]:
    """The lean statement, then the pinned function when it answers 'full' (or 'retry' too
    often), with PostgresLedger.claim's 'check' loop: (outcome, took_over, run row as JSON,
    statements sent). ``conn``: autocommit, dict rows. ``lean=False``: the function alone, as
    cronwrap claims today."""
    sent = 0
    if lean and not params.get("gone") and not params.get("checked"):
        for _ in range(RETRIES + 1):
            row = conn.execute(STATEMENT, params).fetchone()
            sent += 1
            if row["outcome"] in ("claimed", "duplicate"):
                return row["outcome"], False, row["run"], sent
            if row["outcome"] == "full":
                break
    params = {**params, "gone": list(params.get("gone") or []), "checked": bool(params.get("checked"))}
    while True:
        rows = conn.execute(FULL, params).fetchall()
        sent += 1
        checks = [r for r in rows if r["outcome"] == "check"]
        if not checks:
            (row,) = rows
            return row["outcome"], row["took_over"], row["run"], sent
        params = {**params, "checked": True,
                  "gone": [r["run"]["id"] for r in checks if is_gone(r["run"])]}


def schema_version() -> int:
    from cronwrap.ledger import sql

    return max(int(name.split("_")[1]) for name in sql.load("postgres")
               if name.startswith("migration_"))
