-- The daily reconciliation (seed §7) done properly, on PostgreSQL, under cronwrap.
--
--   psql "$SETTLE_DSN" -v ON_ERROR_STOP=1 -f schema.sql      (seed-data.py does this too)
--
-- Idempotent: every statement can run again on an existing database.
--
-- What changed from the seed's §7.1 tables, and why:
--
-- * No locked_until / pending / attempts bookkeeping of our own. cronwrap's ledger already
--   does the claim (one run per slot across hosts), the lease (30 minutes in the seed; a
--   renewed --lease here) and the attempts. The job receives the result of that claim in its
--   environment: CRONWRAP_RUN_KEY (the slot), CRONWRAP_RUN_ID (cronwrap's ledger row, for
--   `cronwrap history` / `cronwrap logs`), CRONWRAP_ATTEMPT and CRONWRAP_FENCE.
--
-- * Rows are keyed by the slot's run key, not by a surrogate id: a re-run, a retry or a
--   takeover of the same slot by another host writes the same keys again, so nothing doubles.
--   (Under the production crontab, `--schedule '30 1 * * *'`, there is one run key per day;
--   `cronwrap run --date 2026-10-28` re-runs that same key.)
--
-- * Fencing. A lease can expire while its holder is still alive (a stopped VM, a long GC
--   pause, a network partition): cronwrap lets another host take the slot over, and the old
--   holder may wake up and keep writing. CRONWRAP_FENCE strictly increases with every claim
--   of the job, so the database can tell the two apart and refuse the older one:
--     - settlement_runs keeps, per run key, the largest fence that registered; it is updated
--       only by a writer whose fence is not smaller (the ON CONFLICT ... WHERE of settle.py,
--       and the trigger below for any other UPDATE);
--     - settle.py begins every batch transaction by updating that row with
--       `WHERE run_key = … AND fence <= my_fence`: this takes the row lock (a takeover's
--       registration waits for the batch in flight and then wins) and matches nothing once a
--       newer fence has registered, so the old writer stops before it writes;
--     - settlement_diffs rows are written with
--       `ON CONFLICT (run_key, order_id) DO UPDATE … WHERE settlement_diffs.fence <= EXCLUDED.fence`
--       and a trigger rejects any diff whose fence is smaller than the run key's registered
--       fence (also for brand-new rows, which ON CONFLICT alone never sees).
--   Fences are per cronwrap job name: these tables belong to one job (`-n settle`).

-- -- business data ---------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS orders (
  order_id text PRIMARY KEY CHECK (order_id <> ''),   -- '' is the keyset scan's start
  biz_date date NOT NULL,
  amount   numeric(18,2) NOT NULL
);
-- The batch query: WHERE biz_date = $1 AND order_id > $last ORDER BY order_id LIMIT 1000.
-- With this index each batch is an index range scan, whatever the batch number (OFFSET would
-- read and throw away every earlier row again, and skip or repeat rows if data changes).
CREATE INDEX IF NOT EXISTS orders_biz_date_order_id ON orders (biz_date, order_id);

CREATE TABLE IF NOT EXISTS payments (
  order_id text PRIMARY KEY,
  amount   numeric(18,2) NOT NULL,
  paid_at  timestamptz NOT NULL
);

-- -- results -----------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS settlement_runs (
  run_key       text PRIMARY KEY,            -- CRONWRAP_RUN_KEY: one row per slot
  biz_date      date NOT NULL,               -- CRONWRAP_BIZ_DATE: the slot's date (Asia/Shanghai)
  run_id        bigint NOT NULL,             -- CRONWRAP_RUN_ID: `cronwrap logs settle RUN_ID`
  fence         bigint NOT NULL CHECK (fence > 0),  -- CRONWRAP_FENCE of the attempt owning the row
  attempts      integer NOT NULL,            -- CRONWRAP_ATTEMPT of that attempt (1, 2, …)
  host          text,                        -- CRONWRAP_HOST
  status        text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
  orders_count  integer NOT NULL DEFAULT 0,  -- orders compared so far by this attempt
  batches       integer NOT NULL DEFAULT 0,  -- batches committed by this attempt
  last_order_id text,                        -- keyset position of the last committed batch
  diff_count    integer NOT NULL DEFAULT 0,  -- set when the attempt succeeds
  last_error    text,
  started_at    timestamptz NOT NULL DEFAULT now(),
  heartbeat_at  timestamptz,                 -- last committed batch
  finished_at   timestamptz
);
CREATE INDEX IF NOT EXISTS settlement_runs_biz_date ON settlement_runs (biz_date, started_at DESC);

CREATE TABLE IF NOT EXISTS settlement_diffs (
  run_key     text NOT NULL REFERENCES settlement_runs (run_key),
  order_id    text NOT NULL,
  expected    numeric(18,2),                 -- the order's amount
  actual      numeric(18,2),                 -- the payment's amount; NULL: no payment at all
  fence       bigint NOT NULL,               -- CRONWRAP_FENCE of the attempt that wrote it
  kind        text GENERATED ALWAYS AS
                (CASE WHEN actual IS NULL THEN 'missing_payment' ELSE 'amount_mismatch' END) STORED,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_key, order_id)            -- a re-run or a takeover rewrites, never doubles
);

-- A write carrying a fence smaller than the largest one registered for its run key is
-- rejected, with its own SQLSTATE so the writer can tell "I was fenced out" from a failure.
CREATE OR REPLACE FUNCTION settlement_diffs_fence_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  owner bigint;
BEGIN
  SELECT fence INTO owner FROM settlement_runs WHERE run_key = NEW.run_key;
  IF owner IS NOT NULL AND NEW.fence < owner THEN
    RAISE EXCEPTION 'stale fence % for run key % (now owned by fence %)', NEW.fence, NEW.run_key, owner
      USING ERRCODE = 'SF001', HINT = 'a newer attempt took this slot over; this writer must stop';
  END IF;
  RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS settlement_diffs_fence_guard ON settlement_diffs;
CREATE TRIGGER settlement_diffs_fence_guard
  BEFORE INSERT OR UPDATE ON settlement_diffs
  FOR EACH ROW EXECUTE FUNCTION settlement_diffs_fence_guard();

-- The fence of a run key never goes backwards, whoever writes the UPDATE.
CREATE OR REPLACE FUNCTION settlement_runs_fence_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.fence < OLD.fence THEN
    RAISE EXCEPTION 'stale fence % for run key % (now owned by fence %)', NEW.fence, OLD.run_key, OLD.fence
      USING ERRCODE = 'SF001';
  END IF;
  RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS settlement_runs_fence_guard ON settlement_runs;
CREATE TRIGGER settlement_runs_fence_guard
  BEFORE UPDATE ON settlement_runs
  FOR EACH ROW EXECUTE FUNCTION settlement_runs_fence_guard();

-- -- what the result page and the alerts read (seed §7.4 "结果查询") ----------------------------

CREATE OR REPLACE VIEW settlement_report AS
SELECT biz_date, status, diff_count, attempts, orders_count, batches,
       finished_at - started_at AS duration,
       started_at, finished_at, host, fence, run_id, run_key, last_error
FROM settlement_runs;
