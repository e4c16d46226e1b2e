-- The PostgreSQL dialect of the ledger: the blocks of sqlite.sql, same names, same semantics,
-- but for the claim's own steps (claim_run, next_fence): here a claim is claim_function's.
-- Times are timestamptz; parameters are %(name)s (so a literal percent sign must be doubled).
-- Every block is one statement, except the scripts: the numbered migrations, which change only
-- tables and indexes, and the functions (*_function), which the migrator re-creates after
-- them in the same transaction, so each function is written once, here, as it is now.
--
-- Tables are prefixed (cronwrap_jobs, cronwrap_runs, cronwrap_meta), not bare jobs/runs:
-- operators point cronwrap at a database it shares with other software, where "jobs" is a
-- likely name already. They live in the first schema of the connection's search_path; an
-- operator who wants a schema of its own sets it in the URL (options=-c search_path=cronwrap).

-- name: create_meta
CREATE TABLE IF NOT EXISTS cronwrap_meta (
  key text PRIMARY KEY,
  value text NOT NULL
)

-- name: schema_version
-- With the expansions applied (expansion_N), in the same round trip.
SELECT value, (SELECT value FROM cronwrap_meta WHERE key = 'expansion') AS expansion
FROM cronwrap_meta WHERE key = 'schema_version'

-- name: set_expansion
INSERT INTO cronwrap_meta (key, value) VALUES ('expansion', %(n)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: set_schema_version
INSERT INTO cronwrap_meta (key, value) VALUES ('schema_version', %(version)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: migration_1
CREATE TABLE IF NOT EXISTS cronwrap_jobs (
  name text PRIMARY KEY,
  schedule text,
  tz text,
  key_template text,
  settings text,
  fence bigint NOT NULL DEFAULT 0,
  first_seen timestamptz NOT NULL,
  last_seen timestamptz NOT NULL,
  last_slot timestamptz
);
CREATE TABLE IF NOT EXISTS cronwrap_runs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job text NOT NULL REFERENCES cronwrap_jobs (name),
  run_key text NOT NULL,
  scheduled_at timestamptz,
  trigger text NOT NULL,
  status text NOT NULL,
  skip_reason text,
  attempts integer NOT NULL DEFAULT 0,
  host text,
  pid integer,
  pid_start bigint,
  locked_by text,
  locked_until timestamptz,
  fence bigint,
  started_at timestamptz,
  finished_at timestamptz,
  duration_ms bigint,
  exit_code integer,
  signal integer,
  timed_out boolean NOT NULL DEFAULT false,
  error_tail text,
  log_path text,
  skew_ms integer,
  created_at timestamptz NOT NULL,
  UNIQUE (job, run_key)
);
-- last_run, runs_of_job: newest runs of a job.
CREATE INDEX IF NOT EXISTS cronwrap_runs_job_id ON cronwrap_runs (job, id);
-- last_success, and running_of_job on every claim (step 2).
CREATE INDEX IF NOT EXISTS cronwrap_runs_job_status_id ON cronwrap_runs (job, status, id);
-- counts: an index-only scan per job over the --since window, which keeps `status` over a
-- million runs within its budget.
CREATE INDEX IF NOT EXISTS cronwrap_runs_job_created ON cronwrap_runs (job, created_at, status);
-- The few running rows of the whole ledger, without touching a million finished ones: step 2
-- of every claim, and "what runs anywhere now" for status.
CREATE INDEX IF NOT EXISTS cronwrap_runs_running ON cronwrap_runs (job, id)
  WHERE status = 'running';

-- name: migration_2
-- The runner identity beside host and pid: the boot and the PID namespace the pid belongs to.
-- Only a runner with the same host, boot and namespace may look the pid up and abandon the
-- row at once, and two containers with one host name wait for the lease (release 0.1.0's
-- rows have neither, so they always wait for it). No semicolon in these comments: the
-- SQLite migration is split into statements at each one.
ALTER TABLE cronwrap_runs ADD COLUMN IF NOT EXISTS boot_id text;
ALTER TABLE cronwrap_runs ADD COLUMN IF NOT EXISTS pid_ns bigint;

-- name: migration_3
-- No table changes: the claim became one server-side function, cronwrap_claim(), and prune
-- reads the jobs' settings through cronwrap_settings() (the blocks claim_function and
-- settings_function below, which the migrator creates after the numbered migrations). This
-- migration used to create both functions itself: a ledger at version 3 or later never runs it
-- again, and one below it runs it in the transaction that ends with those blocks, so the
-- functions it ends with are the same either way.

-- name: migration_4
-- No table changes: the claim function changed (a run recorded `warning` is done, as a
-- succeeded one is: claiming its slot again is a duplicate unless forced). The version still
-- moves, so that every ledger re-creates the function, and so that a cronwrap that knows only
-- version 3, whose claim would retry a warning, refuses the ledger instead of running.

-- name: expansion_1
-- An expansion: tables and triggers a cronwrap of the same schema version that does not know
-- them need not know (it writes runs as before, and the triggers count what it writes), so
-- the schema version stays and the previous release keeps working beside this one. The
-- expansions applied are in cronwrap_meta (key expansion), which only this kind of change uses.
-- Counters for Prometheus (cronwrap_runs_total, cronwrap_run_duration_seconds): every end the
-- ledger records (a row written or rewritten with a status other than running or pending: a
-- finished attempt, a skip, a missed slot) is counted by a trigger as it is written, whichever
-- cronwrap writes it, and nothing ever takes from the counts: prune deletes rows, a retry or a
-- takeover rewrites one, the counts stay. cronwrap_duration_buckets holds the histogram's
-- upper bounds in ms (model.DURATION_BUCKETS, written by the migrator): an end is counted
-- under the smallest bound not below its duration, under none when it is longer than the
-- largest.
CREATE TABLE IF NOT EXISTS cronwrap_tallies (
  job text NOT NULL,
  status text NOT NULL,
  runs bigint NOT NULL DEFAULT 0,
  timed bigint NOT NULL DEFAULT 0,
  duration_ms bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (job, status)
);
CREATE TABLE IF NOT EXISTS cronwrap_duration_buckets (le_ms bigint PRIMARY KEY);
CREATE TABLE IF NOT EXISTS cronwrap_duration_tallies (
  job text NOT NULL,
  le_ms bigint NOT NULL,
  runs bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (job, le_ms)
);
CREATE OR REPLACE FUNCTION cronwrap_count_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO cronwrap_tallies AS t (job, status, runs, timed, duration_ms)
  VALUES (NEW.job, NEW.status, 1, (NEW.duration_ms IS NOT NULL)::int,
          coalesce(NEW.duration_ms, 0))
  ON CONFLICT (job, status) DO UPDATE SET runs = t.runs + 1, timed = t.timed + excluded.timed,
    duration_ms = t.duration_ms + excluded.duration_ms;
  INSERT INTO cronwrap_duration_tallies AS d (job, le_ms, runs)
  SELECT NEW.job, min(b.le_ms), 1 FROM cronwrap_duration_buckets b
  WHERE b.le_ms >= NEW.duration_ms
  HAVING min(b.le_ms) IS NOT NULL
  ON CONFLICT (job, le_ms) DO UPDATE SET runs = d.runs + 1;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS cronwrap_runs_end_inserted ON cronwrap_runs;
CREATE TRIGGER cronwrap_runs_end_inserted AFTER INSERT ON cronwrap_runs FOR EACH ROW
  WHEN (NEW.status NOT IN ('running', 'pending'))
  EXECUTE FUNCTION cronwrap_count_end();
DROP TRIGGER IF EXISTS cronwrap_runs_end_updated ON cronwrap_runs;
CREATE TRIGGER cronwrap_runs_end_updated AFTER UPDATE OF status ON cronwrap_runs FOR EACH ROW
  WHEN (NEW.status NOT IN ('running', 'pending') AND NEW.status IS DISTINCT FROM OLD.status)
  EXECUTE FUNCTION cronwrap_count_end();

-- name: expansion_2
-- Every attempt at a slot (issue 22 §3): a runs row holds only the latest, so a takeover or a
-- retry rewrote the attempt before it. Triggers keep each one in cronwrap_attempts, keyed by
-- (run id, attempt), whichever cronwrap writes the row: when a running row is taken over
-- (its attempts rise) the attempt it held is kept as `abandoned`, reason `superseded`, with
-- its host, fence and start (its end is not known: its runner was gone, or stopped). When a
-- running row reaches an end (an attempt's finish), the attempt is kept with that end. A
-- wrapper whose finish was refused because its slot was taken over writes its attempt's real
-- end over the `abandoned` one (attempt_superseded), so a job that ran to its end under a
-- stopped wrapper is on the record. Nothing here is read by a claim: prune deletes a run's
-- attempts with the run (the foreign key), and cronwrap_claim() is unchanged.
CREATE TABLE IF NOT EXISTS cronwrap_attempts (
  run_id bigint NOT NULL REFERENCES cronwrap_runs (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  status text NOT NULL,
  reason text,
  host text,
  fence bigint,
  started_at timestamptz,
  finished_at timestamptz,
  duration_ms bigint,
  exit_code integer,
  signal integer,
  PRIMARY KEY (run_id, attempt)
);
CREATE OR REPLACE FUNCTION cronwrap_keep_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.attempts > OLD.attempts THEN
    INSERT INTO cronwrap_attempts (run_id, attempt, status, reason, host, fence, started_at)
    VALUES (OLD.id, OLD.attempts, 'abandoned', 'superseded', OLD.host, OLD.fence,
            OLD.started_at)
    ON CONFLICT (run_id, attempt) DO NOTHING;
  ELSE
    INSERT INTO cronwrap_attempts AS a (run_id, attempt, status, reason, host, fence,
                                        started_at, finished_at, duration_ms, exit_code, signal)
    VALUES (NEW.id, NEW.attempts, NEW.status, NEW.skip_reason, NEW.host, NEW.fence,
            NEW.started_at, NEW.finished_at, NEW.duration_ms, NEW.exit_code, NEW.signal)
    ON CONFLICT (run_id, attempt) DO UPDATE SET status = excluded.status,
      reason = excluded.reason, host = excluded.host, fence = excluded.fence,
      started_at = excluded.started_at, finished_at = excluded.finished_at,
      duration_ms = excluded.duration_ms, exit_code = excluded.exit_code,
      signal = excluded.signal;
  END IF;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS cronwrap_runs_attempt_kept ON cronwrap_runs;
CREATE TRIGGER cronwrap_runs_attempt_kept AFTER UPDATE ON cronwrap_runs FOR EACH ROW
  WHEN (OLD.status = 'running' AND (NEW.attempts > OLD.attempts
        OR NEW.status NOT IN ('running', 'pending')))
  EXECUTE FUNCTION cronwrap_keep_attempt();

-- name: expansion_3
-- Pauses (issue 22 §5: cronwrap pause, resume): one row per paused job, NAME, or one host's
-- share of a host-scoped job (NAME, chr(31), HOST: model.ledger_job), until a time or, with
-- until NULL, until resumed. A scheduled or catch-up firing of a paused job records its slot skipped,
-- reason paused, and runs nothing: this release's claim calls cronwrap_claim_unless_paused()
-- (claim_unless_paused_function below), which looks the pause up in the same statement and
-- otherwise returns what cronwrap_claim() returns, so cronwrap_claim() is unchanged and a
-- claim stays one round trip. The previous release calls cronwrap_claim() and never reads
-- this table: its firings run while the job is paused, until its hosts are upgraded.
CREATE TABLE IF NOT EXISTS cronwrap_pauses (
  job text PRIMARY KEY,
  until timestamptz,
  reason text,
  paused_by text,
  paused_at timestamptz NOT NULL
);

-- name: expansion_4
-- Alerts of `cronwrap watch` (issue 23): each breach once (cronwrap_alerts, keyed by what it is:
-- kind, job, slot or run), and each notification of it once per notifier and phase (the breach
-- itself, then `recovered`), however many watchers share the ledger: a watcher claims a send as
-- a firing claims a slot (insert or take over a lapsed claim, with a lease), sends, and records
-- it sent; a failed send is tried again after a backoff, by whichever watcher comes first.
-- Nothing else reads or writes these tables: the previous release goes on beside.
CREATE TABLE IF NOT EXISTS cronwrap_alerts (
  key text PRIMARY KEY,
  kind text NOT NULL,
  job text NOT NULL,
  text text NOT NULL,
  detail text,
  slot timestamptz,
  run_id bigint,
  opened_at timestamptz NOT NULL,
  opened_by text,
  closed_at timestamptz
);
CREATE INDEX IF NOT EXISTS cronwrap_alerts_closed ON cronwrap_alerts (closed_at);
CREATE TABLE IF NOT EXISTS cronwrap_alert_sends (
  key text NOT NULL REFERENCES cronwrap_alerts (key) ON DELETE CASCADE,
  notifier text NOT NULL,
  phase text NOT NULL,
  claimed_by text,
  locked_until timestamptz,
  tries integer NOT NULL DEFAULT 0,
  next_try_at timestamptz,
  sent_at timestamptz,
  error text,
  PRIMARY KEY (key, notifier, phase)
);

-- name: expansion_5
-- Steps of a slot (issue 26 §1, cronwrap step KEY -- CMD): the parts of a job that must run
-- once per slot whatever the attempts, keyed by (job, run key, step key), with the attempt,
-- fence and host that last started each, and how it ended. A step starts only in a
-- transaction that holds the run's row (FOR SHARE) and finds its fence to be the caller's, so a
-- takeover (which rewrites the row's fence) waits for it, or comes first and refuses it.
-- Nothing else reads or writes this table: cronwrap_claim() is unchanged and the previous
-- release goes on beside; prune deletes a slot's steps with its run (the foreign key).
CREATE TABLE IF NOT EXISTS cronwrap_steps (
  job text NOT NULL,
  run_key text NOT NULL,
  step text NOT NULL,
  run_id bigint NOT NULL,
  status text NOT NULL,
  attempt integer NOT NULL,
  fence bigint NOT NULL,
  host text,
  pid integer,
  started_at timestamptz NOT NULL,
  finished_at timestamptz,
  duration_ms bigint,
  exit_code integer,
  signal integer,
  PRIMARY KEY (job, run_key, step),
  FOREIGN KEY (job, run_key) REFERENCES cronwrap_runs (job, run_key) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS cronwrap_steps_run_id ON cronwrap_steps (run_id);

-- name: step_run
-- The run a step belongs to, its row held (FOR SHARE) to the step's commit: a takeover's
-- claim, which rewrites the row, waits for the step's record, or has come first.
SELECT * FROM cronwrap_runs WHERE id = %(run_id)s AND run_key = %(run_key)s FOR SHARE

-- name: step_of_run
SELECT * FROM cronwrap_steps
WHERE job = %(job)s AND run_key = %(run_key)s AND step = %(step)s FOR UPDATE

-- name: step_run_read
-- cronwrap step --done: only asks, locks nothing.
SELECT * FROM cronwrap_runs WHERE id = %(run_id)s AND run_key = %(run_key)s

-- name: step_of_run_read
SELECT * FROM cronwrap_steps WHERE job = %(job)s AND run_key = %(run_key)s AND step = %(step)s

-- name: step_begin
-- Written only while the run's fence is the caller's and the run is running: the fence check
-- and the record are one statement (in the transaction that holds the run's row).
INSERT INTO cronwrap_steps AS s (job, run_key, step, run_id, status, attempt, fence, host, pid,
                                 started_at)
SELECT r.job, r.run_key, %(step)s, r.id, 'running', r.attempts, r.fence, %(host)s, %(pid)s,
  %(now)s
FROM cronwrap_runs r WHERE r.id = %(run_id)s AND r.fence = %(fence)s AND r.status = 'running'
ON CONFLICT (job, run_key, step) DO UPDATE SET run_id = excluded.run_id, status = 'running',
  attempt = excluded.attempt, fence = excluded.fence, host = excluded.host, pid = excluded.pid,
  started_at = excluded.started_at, finished_at = NULL, duration_ms = NULL, exit_code = NULL,
  signal = NULL

-- name: step_end
-- The step's end, written over its own start only (never over a newer attempt's start of the
-- same step); whether the run is still the caller's is asked apart (step_run).
UPDATE cronwrap_steps SET status = %(status)s, finished_at = %(now)s,
  duration_ms = %(duration_ms)s, exit_code = %(exit_code)s, signal = %(signal)s
WHERE job = %(job)s AND run_key = %(run_key)s AND step = %(step)s AND fence = %(fence)s
  AND status = 'running'

-- name: steps_of_runs
SELECT * FROM cronwrap_steps WHERE run_id = ANY(%(ids)s) ORDER BY run_id, started_at, step

-- name: expansion_6
-- What each attempt's job tree used (issue 26 section 2): CPU time, user and system, in ms,
-- and the peak resident memory of its largest process in KiB, from the keeper's getrusage
-- (the tree's subreaper, so daemons that left the session count). Keyed by (run id,
-- attempt): a retry or a takeover adds a row, and the runs row holds only the latest attempt.
-- The finish writes it in the same statement (one round trip, see finish). A table of its own,
-- not columns of cronwrap_runs: the previous release's claims and finishes, which know nothing
-- of it, can never leave one attempt's figures on another's row. Prune deletes a run's usage
-- with the run (the foreign key); a ledger without it reads no usage.
CREATE TABLE IF NOT EXISTS cronwrap_usage (
  run_id bigint NOT NULL REFERENCES cronwrap_runs (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  cpu_user_ms bigint,
  cpu_system_ms bigint,
  max_rss_kb bigint,
  PRIMARY KEY (run_id, attempt)
);

-- name: expansion_7
-- The --since window's counts kept as runs are written (issue 24 section 3): status counted
-- every run of each job's window at read time, ~160 ms of a 5,000-job status over a million
-- runs. Here, per job and UTC day of a row's creation, the rows that hold an end (every status
-- but running and pending), one column per end this release knows, and any other status (a
-- newer release's) in cronwrap_day_other_counts: status reads one short row per job and day.
-- Triggers keep them exact whichever cronwrap writes the row (the previous release's wrapper
-- too): a row inserted with an end adds one, a row whose status changes moves its count (a
-- retry, or a claim of a skipped or missed slot, takes one away; the finish adds one under the
-- new status), and prune's deletes take theirs away (one statement-level trigger per prune,
-- from its transition table), deleting the days whose counts all reach 0. The claim's own
-- writes (a new slot inserted pending, pending to running, a takeover, a lease renewal) call
-- nothing: the WHEN clauses. The rows already in cronwrap_runs are counted once here. status
-- sums whole days from them and reads only the first, partial day of its window from
-- cronwrap_runs (window_counts).
CREATE TABLE IF NOT EXISTS cronwrap_day_counts (
  job text NOT NULL,
  day date NOT NULL,
  succeeded bigint NOT NULL DEFAULT 0,
  warning bigint NOT NULL DEFAULT 0,
  failed bigint NOT NULL DEFAULT 0,
  timeout bigint NOT NULL DEFAULT 0,
  killed bigint NOT NULL DEFAULT 0,
  skipped bigint NOT NULL DEFAULT 0,
  missed bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (job, day)
);
CREATE TABLE IF NOT EXISTS cronwrap_day_other_counts (
  job text NOT NULL,
  day date NOT NULL,
  status text NOT NULL,
  runs bigint NOT NULL,
  PRIMARY KEY (job, day, status)
);
INSERT INTO cronwrap_day_counts (job, day, succeeded, warning, failed, timeout, killed,
                                 skipped, missed)
SELECT job, (created_at AT TIME ZONE 'UTC')::date, count(*) FILTER (WHERE status = 'succeeded'),
  count(*) FILTER (WHERE status = 'warning'), count(*) FILTER (WHERE status = 'failed'),
  count(*) FILTER (WHERE status = 'timeout'), count(*) FILTER (WHERE status = 'killed'),
  count(*) FILTER (WHERE status = 'skipped'), count(*) FILTER (WHERE status = 'missed')
FROM cronwrap_runs
WHERE status IN ('succeeded', 'warning', 'failed', 'timeout', 'killed', 'skipped', 'missed')
GROUP BY 1, 2
ON CONFLICT (job, day) DO NOTHING;
INSERT INTO cronwrap_day_other_counts (job, day, status, runs)
SELECT job, (created_at AT TIME ZONE 'UTC')::date, status, count(*) FROM cronwrap_runs
WHERE status NOT IN ('succeeded', 'warning', 'failed', 'timeout', 'killed', 'skipped', 'missed',
                     'running', 'pending')
GROUP BY 1, 2, 3
ON CONFLICT (job, day, status) DO NOTHING;
-- A count's move: n (+1 or -1, or minus a prune's rows) runs of status on a job's day.
CREATE OR REPLACE FUNCTION cronwrap_move_day(j text, d date, st text, n bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF st IN ('succeeded', 'warning', 'failed', 'timeout', 'killed', 'skipped', 'missed') THEN
    INSERT INTO cronwrap_day_counts AS c (job, day, succeeded, warning, failed, timeout,
                                          killed, skipped, missed)
    VALUES (j, d, CASE WHEN st = 'succeeded' THEN n ELSE 0 END,
            CASE WHEN st = 'warning' THEN n ELSE 0 END, CASE WHEN st = 'failed' THEN n ELSE 0 END,
            CASE WHEN st = 'timeout' THEN n ELSE 0 END, CASE WHEN st = 'killed' THEN n ELSE 0 END,
            CASE WHEN st = 'skipped' THEN n ELSE 0 END, CASE WHEN st = 'missed' THEN n ELSE 0 END)
    ON CONFLICT (job, day) DO UPDATE SET succeeded = c.succeeded + excluded.succeeded,
      warning = c.warning + excluded.warning, failed = c.failed + excluded.failed,
      timeout = c.timeout + excluded.timeout, killed = c.killed + excluded.killed,
      skipped = c.skipped + excluded.skipped, missed = c.missed + excluded.missed;
    IF n < 0 THEN
      DELETE FROM cronwrap_day_counts
      WHERE job = j AND day = d AND succeeded = 0 AND warning = 0 AND failed = 0
        AND timeout = 0 AND killed = 0 AND skipped = 0 AND missed = 0;
    END IF;
  ELSE
    INSERT INTO cronwrap_day_other_counts AS c (job, day, status, runs) VALUES (j, d, st, n)
    ON CONFLICT (job, day, status) DO UPDATE SET runs = c.runs + excluded.runs;
    IF n < 0 THEN
      DELETE FROM cronwrap_day_other_counts
      WHERE job = j AND day = d AND status = st AND runs <= 0;
    END IF;
  END IF;
END
$$;
CREATE OR REPLACE FUNCTION cronwrap_count_day() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.status NOT IN ('running', 'pending') THEN
    PERFORM cronwrap_move_day(OLD.job, (OLD.created_at AT TIME ZONE 'UTC')::date, OLD.status, -1);
  END IF;
  IF NEW.status NOT IN ('running', 'pending') THEN
    PERFORM cronwrap_move_day(NEW.job, (NEW.created_at AT TIME ZONE 'UTC')::date, NEW.status, 1);
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION cronwrap_uncount_days() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM cronwrap_move_day(job, day, status, -n)
  FROM (SELECT job, (created_at AT TIME ZONE 'UTC')::date AS day, status, count(*) AS n
        FROM cronwrap_gone_runs WHERE status NOT IN ('running', 'pending')
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3) AS gone;
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS cronwrap_runs_day_inserted ON cronwrap_runs;
CREATE TRIGGER cronwrap_runs_day_inserted AFTER INSERT ON cronwrap_runs FOR EACH ROW
  WHEN (NEW.status NOT IN ('running', 'pending'))
  EXECUTE FUNCTION cronwrap_count_day();
DROP TRIGGER IF EXISTS cronwrap_runs_day_updated ON cronwrap_runs;
CREATE TRIGGER cronwrap_runs_day_updated AFTER UPDATE OF status, job, created_at
  ON cronwrap_runs FOR EACH ROW
  WHEN ((OLD.status NOT IN ('running', 'pending') OR NEW.status NOT IN ('running', 'pending'))
    AND (NEW.status IS DISTINCT FROM OLD.status OR NEW.job IS DISTINCT FROM OLD.job
         OR NEW.created_at IS DISTINCT FROM OLD.created_at))
  EXECUTE FUNCTION cronwrap_count_day();
DROP TRIGGER IF EXISTS cronwrap_runs_day_pruned ON cronwrap_runs;
CREATE TRIGGER cronwrap_runs_day_pruned AFTER DELETE ON cronwrap_runs
  REFERENCING OLD TABLE AS cronwrap_gone_runs FOR EACH STATEMENT
  EXECUTE FUNCTION cronwrap_uncount_days();

-- name: usage_of_runs
SELECT * FROM cronwrap_usage WHERE run_id = ANY(%(ids)s)

-- name: alerts_since
-- Open alerts, and those closed since a time, each with the sends it has had (one row per
-- send; none for an alert not sent anywhere yet).
SELECT a.*, s.notifier, s.phase, s.sent_at
FROM cronwrap_alerts a LEFT JOIN cronwrap_alert_sends s ON s.key = a.key AND s.sent_at IS NOT NULL
WHERE a.closed_at IS NULL OR a.closed_at >= %(since)s
ORDER BY a.opened_at, a.key

-- name: open_alert
INSERT INTO cronwrap_alerts (key, kind, job, text, detail, slot, run_id, opened_at, opened_by)
VALUES (%(key)s, %(kind)s, %(job)s, %(text)s, %(detail)s, %(slot)s, %(run_id)s, %(now)s,
        %(by)s)
ON CONFLICT (key) DO NOTHING

-- name: close_alert
UPDATE cronwrap_alerts SET closed_at = %(now)s WHERE key = %(key)s AND closed_at IS NULL

-- name: forget_alerts
DELETE FROM cronwrap_alerts WHERE closed_at < %(before)s

-- name: claim_send
-- A send is this watcher's when it is new, or unsent with its claim lapsed and its backoff
-- over: the row comes back (RETURNING) only then.
INSERT INTO cronwrap_alert_sends AS s (key, notifier, phase, claimed_by, locked_until)
VALUES (%(key)s, %(notifier)s, %(phase)s, %(by)s, %(until)s)
ON CONFLICT (key, notifier, phase) DO UPDATE SET claimed_by = excluded.claimed_by,
  locked_until = excluded.locked_until
WHERE s.sent_at IS NULL AND (s.locked_until IS NULL OR s.locked_until <= %(now)s)
  AND (s.next_try_at IS NULL OR s.next_try_at <= %(now)s)
RETURNING tries

-- name: send_done
UPDATE cronwrap_alert_sends SET sent_at = %(now)s, locked_until = NULL, error = NULL
WHERE key = %(key)s AND notifier = %(notifier)s AND phase = %(phase)s AND claimed_by = %(by)s

-- name: send_failed
UPDATE cronwrap_alert_sends SET tries = tries + 1, next_try_at = %(retry_at)s,
  locked_until = NULL, error = %(error)s
WHERE key = %(key)s AND notifier = %(notifier)s AND phase = %(phase)s AND claimed_by = %(by)s

-- name: attempt_superseded
-- A wrapper's own end of an attempt whose slot was taken over (its finish matched nothing):
-- written over the trigger's `abandoned` record of that attempt, never over another fence's,
-- and not at all once prune has deleted the run.
INSERT INTO cronwrap_attempts AS a (run_id, attempt, status, reason, host, fence, started_at,
                                    finished_at, duration_ms, exit_code, signal)
SELECT id, %(attempt)s, %(status)s, %(reason)s, %(host)s, %(fence)s, %(started_at)s,
  %(finished_at)s, %(duration_ms)s, %(exit_code)s, %(signal)s
FROM cronwrap_runs WHERE id = %(id)s
ON CONFLICT (run_id, attempt) DO UPDATE SET status = excluded.status, reason = excluded.reason,
  finished_at = excluded.finished_at, duration_ms = excluded.duration_ms,
  exit_code = excluded.exit_code, signal = excluded.signal
WHERE a.fence IS NOT DISTINCT FROM excluded.fence

-- name: attempts_of_runs
SELECT * FROM cronwrap_attempts WHERE run_id = ANY(%(ids)s) ORDER BY run_id, attempt

-- name: pause_of_job
-- The pause in force for a firing of %(job)s: its own, else (one host's share of a host-scoped
-- job) its name's, which covers every host (as in cronwrap_claim_unless_paused).
SELECT * FROM cronwrap_pauses
WHERE job IN (%(job)s, split_part(%(job)s, chr(31), 1)) AND (until IS NULL OR until > %(now)s)
ORDER BY job = %(job)s DESC LIMIT 1

-- name: pause_job
INSERT INTO cronwrap_pauses (job, until, reason, paused_by, paused_at)
VALUES (%(job)s, %(until)s, %(reason)s, %(paused_by)s, %(now)s)
ON CONFLICT (job) DO UPDATE SET until = excluded.until, reason = excluded.reason,
  paused_by = excluded.paused_by, paused_at = excluded.paused_at
RETURNING *

-- name: resume_job
DELETE FROM cronwrap_pauses WHERE job = %(job)s RETURNING *

-- name: pauses
SELECT * FROM cronwrap_pauses ORDER BY job

-- name: duration_bucket
INSERT INTO cronwrap_duration_buckets (le_ms) VALUES (%(le_ms)s) ON CONFLICT DO NOTHING

-- name: change_token
-- Ledger.change_token: the server's current snapshot (xmin:xmax:in-progress xids). Any
-- transaction that commits between two calls either took its xid after the first (xmax
-- moved) or was in progress at it (it left the list): the text differs. Reads take no xid,
-- so readers (serve itself) never change it; writes to other databases of the server do
-- (a needless redraw, never a missed change).
SELECT pg_current_snapshot()::text AS token

-- name: tallies
SELECT job, status, runs, timed, duration_ms FROM cronwrap_tallies

-- name: duration_tallies
SELECT job, le_ms, runs FROM cronwrap_duration_tallies

-- name: claim_function
-- The claim protocol (ARCHITECTURE.md §3) as one server-side function, so that a claim is one
-- round trip: the same steps and decisions as SqlLedger.claim and decide() in sqlcore.py
-- (which SQLite runs), proved equal by the ledger contract tests. The one copy: the migrator
-- re-creates it after the numbered migrations, in their transaction, and `db init` re-creates
-- it on a current schema too. A change to it comes with a numbered migration (one without
-- statements if the tables stay): a ledger already at the version keeps the function it was
-- migrated with, and an older cronwrap must refuse the ledger rather than claim beside it
-- (tests/integration/test_upgrade.py pins its text to the version). Its signature never
-- changes: wrappers of every release at this version call it. Called as one statement in
-- autocommit mode, it is its own transaction; lock_timeout bounds its waits for row locks.
-- p_gone: running rows of this very runner whose wrapper the client found gone; p_checked:
-- the client has looked. Until it has, a live row of this runner that is in the way comes back
-- as outcome 'check' (its PID can only be looked up on the runner's host) and nothing is
-- written but the job row. No semicolon may end a line of this comment's text: none does.
CREATE OR REPLACE FUNCTION cronwrap_claim(
  p_job text, p_schedule text, p_tz text, p_key_template text, p_settings text,
  p_run_key text, p_scheduled_at timestamptz, p_trigger text, p_host text, p_pid integer,
  p_pid_start bigint, p_boot_id text, p_pid_ns bigint, p_lease float8,
  p_overlap_skip boolean, p_force boolean, p_max_attempts integer, p_skew_ms integer,
  p_now timestamptz, p_gone bigint[], p_checked boolean, p_schema integer)
RETURNS TABLE (outcome text, took_over boolean, run jsonb)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_row cronwrap_runs;
  v_other cronwrap_runs;
  v_new boolean := false;
  v_reason text;
  v_fence bigint;
  v_schema integer;
BEGIN
  PERFORM set_config('lock_timeout', '15s', true);
  SELECT value::integer INTO v_schema FROM cronwrap_meta WHERE key = 'schema_version';
  IF v_schema > p_schema THEN
    RAISE EXCEPTION 'cronwrap ledger schema % is newer than this cronwrap knows (%)', v_schema,
      p_schema USING ERRCODE = 'feature_not_supported';
  END IF;
  -- step 1: the job row, locked until the end of the statement
  IF p_trigger = 'manual' THEN
    INSERT INTO cronwrap_jobs AS j (name, schedule, tz, key_template, settings, first_seen,
                                    last_seen)
    VALUES (p_job, p_schedule, p_tz, p_key_template, p_settings, v_now, v_now)
    ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen;
  ELSE
    INSERT INTO cronwrap_jobs AS j (name, schedule, tz, key_template, settings, first_seen,
                                    last_seen, last_slot)
    VALUES (p_job, p_schedule, p_tz, p_key_template, p_settings, v_now, v_now, p_scheduled_at)
    ON CONFLICT (name) DO UPDATE SET
      schedule = excluded.schedule, tz = excluded.tz, settings = excluded.settings,
      key_template = excluded.key_template, last_seen = excluded.last_seen,
      last_slot = GREATEST(j.last_slot, excluded.last_slot);
  END IF;
  -- this runner's running rows whose wrapper is gone expire now
  UPDATE cronwrap_runs SET locked_until = v_now
  WHERE job = p_job AND status = 'running' AND id = ANY(coalesce(p_gone, '{}'))
    AND host = p_host AND boot_id = p_boot_id AND pid_ns = p_pid_ns;
  -- a live row of this very runner in the way: its PID must be looked up on its host first
  IF NOT p_checked THEN
    RETURN QUERY
      SELECT 'check'::text, false, to_jsonb(r) FROM cronwrap_runs r
      WHERE r.job = p_job AND r.status = 'running' AND r.locked_until > v_now
        AND r.host = p_host AND r.boot_id = p_boot_id AND r.pid_ns = p_pid_ns
        AND (p_overlap_skip OR r.run_key = p_run_key)
      ORDER BY r.id;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  -- step 2: another slot of the job held by a live lease
  IF p_overlap_skip THEN
    SELECT * INTO v_other FROM cronwrap_runs r
    WHERE r.job = p_job AND r.status = 'running' AND r.locked_until > v_now
      AND r.run_key <> p_run_key
    ORDER BY r.id LIMIT 1;
    IF FOUND THEN
      INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, skip_reason,
                                 host, created_at)
      VALUES (p_job, p_run_key, p_scheduled_at, p_trigger, 'skipped', 'overlap', p_host, v_now)
      ON CONFLICT (job, run_key) DO NOTHING;
      RETURN QUERY SELECT 'overlap'::text, false, to_jsonb(v_other);
      RETURN;
    END IF;
  END IF;
  -- step 3: the slot's row, new or existing, and whether it may be taken
  INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, host, created_at)
  VALUES (p_job, p_run_key, p_scheduled_at, p_trigger, 'pending', p_host, v_now)
  ON CONFLICT (job, run_key) DO NOTHING
  RETURNING * INTO v_row;
  v_new := FOUND;
  IF NOT v_new THEN
    SELECT * INTO v_row FROM cronwrap_runs WHERE job = p_job AND run_key = p_run_key;
    IF v_row.status = 'running' THEN
      v_reason := CASE WHEN v_row.locked_until IS NULL OR v_row.locked_until <= v_now THEN NULL
                       ELSE 'duplicate' END;
    ELSIF v_row.status IN ('skipped', 'missed', 'pending') OR p_force THEN
      v_reason := NULL;
    ELSIF v_row.status IN ('succeeded', 'warning') THEN
      v_reason := 'duplicate';
    ELSIF p_trigger = 'manual' OR v_row.attempts < p_max_attempts THEN
      v_reason := NULL;
    ELSE
      v_reason := 'duplicate';
    END IF;
    IF v_reason IS NOT NULL THEN
      RETURN QUERY SELECT v_reason, false, to_jsonb(v_row);
      RETURN;
    END IF;
  END IF;
  UPDATE cronwrap_jobs SET fence = fence + 1 WHERE name = p_job RETURNING fence INTO v_fence;
  took_over := v_row.status = 'running';
  UPDATE cronwrap_runs SET
    status = 'running', trigger = p_trigger, scheduled_at = p_scheduled_at,
    skip_reason = NULL, attempts = attempts + 1, host = p_host, pid = p_pid,
    pid_start = p_pid_start, boot_id = p_boot_id, pid_ns = p_pid_ns, locked_by = p_host,
    locked_until = v_now + make_interval(secs => p_lease), fence = v_fence,
    started_at = v_now, finished_at = NULL, duration_ms = NULL, exit_code = NULL,
    signal = NULL, timed_out = false, error_tail = NULL, log_path = NULL,
    skew_ms = p_skew_ms
  WHERE id = v_row.id
  RETURNING * INTO v_row;
  RETURN QUERY SELECT 'claimed'::text, took_over, to_jsonb(v_row);
END
$fn$;

-- name: claim_unless_paused_function
-- The claim of this release (the block claim calls it): a firing that is not a person's
-- (trigger manual) of a paused job, its own pause or its name's (split_part: NAME of a host's
-- share, NAME chr(31) HOST), is recorded skipped, reason paused, with the job row as cronwrap_claim() writes
-- it (its last slot seen: status does not count the paused slots late), and answered with
-- outcome 'paused' and the slot's row (the new one, or the one already there) with the pause
-- under its key 'pause'. Any other firing is cronwrap_claim()'s, unchanged. Same parameters,
-- same result, one statement: a claim stays one round trip. Created as claim_function is
-- (after the expansions that add cronwrap_pauses, and by db init).
CREATE OR REPLACE FUNCTION cronwrap_claim_unless_paused(
  p_job text, p_schedule text, p_tz text, p_key_template text, p_settings text,
  p_run_key text, p_scheduled_at timestamptz, p_trigger text, p_host text, p_pid integer,
  p_pid_start bigint, p_boot_id text, p_pid_ns bigint, p_lease float8,
  p_overlap_skip boolean, p_force boolean, p_max_attempts integer, p_skew_ms integer,
  p_now timestamptz, p_gone bigint[], p_checked boolean, p_schema integer)
RETURNS TABLE (outcome text, took_over boolean, run jsonb)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_now timestamptz := coalesce(p_now, now());
  v_pause cronwrap_pauses;
  v_row cronwrap_runs;
  v_schema integer;
BEGIN
  IF p_trigger <> 'manual' THEN
    SELECT * INTO v_pause FROM cronwrap_pauses p
    WHERE p.job IN (p_job, split_part(p_job, chr(31), 1))
      AND (p.until IS NULL OR p.until > v_now)
    ORDER BY p.job = p_job DESC LIMIT 1;
  END IF;
  IF v_pause.job IS NULL THEN
    RETURN QUERY SELECT * FROM cronwrap_claim(p_job, p_schedule, p_tz, p_key_template,
      p_settings, p_run_key, p_scheduled_at, p_trigger, p_host, p_pid, p_pid_start, p_boot_id,
      p_pid_ns, p_lease, p_overlap_skip, p_force, p_max_attempts, p_skew_ms, p_now, p_gone,
      p_checked, p_schema);
    RETURN;
  END IF;
  PERFORM set_config('lock_timeout', '15s', true);
  SELECT value::integer INTO v_schema FROM cronwrap_meta WHERE key = 'schema_version';
  IF v_schema > p_schema THEN
    RAISE EXCEPTION 'cronwrap ledger schema % is newer than this cronwrap knows (%)', v_schema,
      p_schema USING ERRCODE = 'feature_not_supported';
  END IF;
  INSERT INTO cronwrap_jobs AS j (name, schedule, tz, key_template, settings, first_seen,
                                  last_seen, last_slot)
  VALUES (p_job, p_schedule, p_tz, p_key_template, p_settings, v_now, v_now, p_scheduled_at)
  ON CONFLICT (name) DO UPDATE SET
    schedule = excluded.schedule, tz = excluded.tz, settings = excluded.settings,
    key_template = excluded.key_template, last_seen = excluded.last_seen,
    last_slot = GREATEST(j.last_slot, excluded.last_slot);
  INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, skip_reason, host,
                             created_at)
  VALUES (p_job, p_run_key, p_scheduled_at, p_trigger, 'skipped', 'paused', p_host, v_now)
  ON CONFLICT (job, run_key) DO NOTHING
  RETURNING * INTO v_row;
  IF v_row.id IS NULL THEN
    SELECT * INTO v_row FROM cronwrap_runs r WHERE r.job = p_job AND r.run_key = p_run_key;
  END IF;
  RETURN QUERY SELECT 'paused'::text, false,
    to_jsonb(v_row) || jsonb_build_object('pause', to_jsonb(v_pause));
END
$fn$;

-- name: settings_function
-- Settings that are not JSON (anyone who can write a shared ledger can put anything there)
-- read as no settings, so that prune never fails on them. Created as claim_function is.
CREATE OR REPLACE FUNCTION cronwrap_settings(p text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
  RETURN p::jsonb;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$fn$;

-- name: upsert_job
-- Step 1 of the claim: ON CONFLICT DO UPDATE row-locks the job until commit, and a concurrent
-- first INSERT of the same name waits on the primary key for the same lock, so claims of one
-- job are serialised without a separate SELECT ... FOR UPDATE. Later statements of the
-- transaction (READ COMMITTED) see what the previous holder committed.
-- last_slot: the newest scheduled slot seen (catch-up planning and "late" count slots after it;
-- slot times come from the hosts' clocks, so planning never mixes in the database's clock).
-- settings: JSON of what prune must respect (the catch-up policy and window).
INSERT INTO cronwrap_jobs (name, schedule, tz, key_template, settings, first_seen, last_seen,
                           last_slot)
VALUES (%(job)s, %(schedule)s, %(tz)s, %(key_template)s, %(settings)s, %(now)s, %(now)s,
        %(last_slot)s)
ON CONFLICT (name) DO UPDATE SET
  schedule = excluded.schedule, tz = excluded.tz, settings = excluded.settings,
  key_template = excluded.key_template, last_seen = excluded.last_seen,
  last_slot = GREATEST(cronwrap_jobs.last_slot, excluded.last_slot)

-- name: touch_job
-- A manual run (--date, --at) is not cron's firing: it leaves what the job's firings recorded
-- (schedule, zone, key template, settings, last slot) as it is. A job seen first by hand gets
-- what the manual run knows.
INSERT INTO cronwrap_jobs (name, schedule, tz, key_template, settings, first_seen, last_seen)
VALUES (%(job)s, %(schedule)s, %(tz)s, %(key_template)s, %(settings)s, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen

-- name: running_of_job
SELECT * FROM cronwrap_runs WHERE job = %(job)s AND status = 'running' ORDER BY id

-- name: expire_lease
UPDATE cronwrap_runs SET locked_until = %(now)s WHERE id = %(id)s AND status = 'running'

-- name: insert_run
INSERT INTO cronwrap_runs (job, run_key, scheduled_at, trigger, status, skip_reason, host,
                           created_at)
VALUES (%(job)s, %(run_key)s, %(scheduled_at)s, %(trigger)s, %(status)s, %(skip_reason)s,
        %(host)s, %(now)s)
ON CONFLICT (job, run_key) DO NOTHING
RETURNING *

-- name: run_by_key
SELECT * FROM cronwrap_runs WHERE job = %(job)s AND run_key = %(run_key)s

-- name: claim
-- One statement, its own transaction: a claim is one round trip (see claim_function and
-- claim_unless_paused_function).
SELECT * FROM cronwrap_claim_unless_paused(%(job)s::text, %(schedule)s::text, %(tz)s::text,
  %(key_template)s::text, %(settings)s::text, %(run_key)s::text, %(scheduled_at)s::timestamptz,
  %(trigger)s::text, %(host)s::text, %(pid)s::integer, %(pid_start)s::bigint,
  %(boot_id)s::text, %(pid_ns)s::bigint, %(lease)s::float8, %(overlap_skip)s::boolean,
  %(force)s::boolean, %(max_attempts)s::integer, %(skew_ms)s::integer,
  %(now)s::timestamptz, %(gone)s::bigint[], %(checked)s::boolean, %(schema)s::integer)

-- name: heartbeat
-- One statement, its own transaction: a renewal is one round trip. now: the server's clock
-- unless a test passes one.
UPDATE cronwrap_runs SET
  locked_until = coalesce(%(now)s, now()) + make_interval(secs => %(lease)s::float8)
WHERE id = %(id)s AND fence = %(fence)s AND status = 'running'
  AND job = %(job)s AND run_key = %(run_key)s
  AND host = %(host)s AND pid = %(pid)s AND pid_start = %(pid_start)s

-- name: finish
-- The run's end, and what its tree used (expansion 6) in the same statement: the usage row
-- is written only when the update matched, so the statement's row count (1, or 0: the slot
-- was taken over) is the update's.
WITH ended AS (
UPDATE cronwrap_runs SET
  status = %(status)s, skip_reason = %(skip_reason)s, finished_at = coalesce(%(now)s, now()),
  duration_ms = %(duration_ms)s, exit_code = %(exit_code)s, signal = %(signal)s,
  timed_out = %(timed_out)s, error_tail = %(error_tail)s, log_path = %(log_path)s,
  locked_until = NULL
WHERE id = %(id)s AND fence = %(fence)s AND status = 'running'
  AND job = %(job)s AND run_key = %(run_key)s
  AND host = %(host)s AND pid = %(pid)s AND pid_start = %(pid_start)s
RETURNING id, attempts)
INSERT INTO cronwrap_usage AS u (run_id, attempt, cpu_user_ms, cpu_system_ms, max_rss_kb)
SELECT id, attempts, %(cpu_user_ms)s::bigint, %(cpu_system_ms)s::bigint, %(max_rss_kb)s::bigint
FROM ended
ON CONFLICT (run_id, attempt) DO UPDATE SET cpu_user_ms = excluded.cpu_user_ms,
  cpu_system_ms = excluded.cpu_system_ms, max_rss_kb = excluded.max_rss_kb

-- name: runs_of_job
-- The newest runs created since a time, newest first by creation: backwards along
-- cronwrap_runs_job_created, one page of rows read (sqlite.sql says why not by id).
SELECT * FROM cronwrap_runs WHERE job = %(job)s AND created_at >= %(since)s
ORDER BY created_at DESC, id DESC LIMIT %(limit)s

-- name: runs_before
-- The newest runs below an id (keyset paging: history, serve's pages), on (job, id).
SELECT * FROM cronwrap_runs WHERE job = %(job)s AND id < %(before)s
ORDER BY id DESC LIMIT %(limit)s

-- name: runs_after
-- The runs just above an id, oldest first: the page newer than one of serve's pages.
SELECT * FROM cronwrap_runs WHERE job = %(job)s AND id > %(after)s ORDER BY id LIMIT %(limit)s

-- name: run_by_id
SELECT * FROM cronwrap_runs WHERE job = %(job)s AND id = %(id)s

-- name: jobs
SELECT * FROM cronwrap_jobs ORDER BY name

-- name: job_by_name
SELECT * FROM cronwrap_jobs WHERE name = %(job)s

-- name: job_names
SELECT name FROM cronwrap_jobs ORDER BY name

-- name: jobs_named
-- The job itself and each host's share of it (model.ledger_job: NAME, chr(31), HOST).
SELECT name FROM cronwrap_jobs
WHERE name = %(job)s OR left(name, length(%(job)s::text) + 1) = %(job)s::text || chr(31)
ORDER BY name

-- name: abandoned_since
-- The job's runs abandoned (running with the lease expired: the runner died) whose slot is at or
-- after %(since)s; the next firing takes them over. Only running rows are read (sqlite.sql).
SELECT run_key, scheduled_at FROM cronwrap_runs
WHERE job = %(job)s AND status = 'running' AND (locked_until IS NULL OR locked_until <= %(now)s)
  AND scheduled_at >= %(since)s

-- name: keys_known
-- Which of %(keys)s the job has a row for: along the (job, run_key) key.
SELECT run_key FROM cronwrap_runs WHERE job = %(job)s AND run_key = ANY(%(keys)s)

-- name: overview
-- One row per job with its last run's row (skips are not runs; all NULL without one) and its
-- last success: the last run itself when it succeeded, else looked up (sqlite.sql says why).
SELECT j.name, j.schedule, j.tz, j.key_template, j.settings, j.first_seen, j.last_seen,
  j.last_slot,
  CASE WHEN r.status = 'succeeded' THEN r.finished_at
       ELSE (SELECT s.finished_at FROM cronwrap_runs s
             WHERE s.job = j.name AND s.status = 'succeeded'
             ORDER BY s.id DESC LIMIT 1) END AS last_success_at,
  r.*
FROM cronwrap_jobs j LEFT JOIN LATERAL (
  SELECT * FROM cronwrap_runs x WHERE x.job = j.name AND x.status <> 'skipped'
  ORDER BY x.id DESC LIMIT 1) AS r ON true
ORDER BY j.name

-- name: all_running
SELECT * FROM cronwrap_runs WHERE status = 'running' ORDER BY id

-- name: all_counts
-- Per job through cronwrap_runs_job_created: the window of each job, not a scan of all runs.
SELECT j.name AS job, c.status, c.n
FROM cronwrap_jobs j CROSS JOIN LATERAL (
  SELECT r.status, count(*) AS n FROM cronwrap_runs r
  WHERE r.job = j.name AND r.created_at >= %(since)s GROUP BY r.status
) AS c

-- name: window_counts
-- The --since window's rows by job with expansion 7, in one statement (one snapshot), as
-- sqlite.sql's window_counts says: a row per job of its whole days (status NULL), a row per
-- job of the window's first day from cronwrap_runs (sign: added or taken away; others: the
-- statuses this release does not know, as a JSON list), and rows of one status (n) for the
-- other statuses' whole days and for each running row (cronwrap_runs_running). Each range is
-- read per job along its index; at most half a day of a job's runs, whatever the window.
SELECT j.name AS job, NULL::text AS status, NULL::bigint AS n, w.succeeded, w.warning,
  w.failed, w.timeout, w.killed, w.skipped, w.missed, NULL::json AS others
FROM cronwrap_jobs j CROSS JOIN LATERAL (
  SELECT sum(succeeded) AS succeeded, sum(warning) AS warning, sum(failed) AS failed,
    sum(timeout) AS timeout, sum(killed) AS killed, sum(skipped) AS skipped,
    sum(missed) AS missed
  FROM cronwrap_day_counts d WHERE d.job = j.name AND d.day >= %(from_day)s::date) AS w
WHERE w.succeeded IS NOT NULL
UNION ALL
SELECT j.name, NULL, %(sign)s::bigint, p.succeeded, p.warning, p.failed, p.timeout, p.killed,
  p.skipped, p.missed, p.others
FROM cronwrap_jobs j CROSS JOIN LATERAL (
  SELECT count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded,
    count(*) FILTER (WHERE r.status = 'warning') AS warning,
    count(*) FILTER (WHERE r.status = 'failed') AS failed,
    count(*) FILTER (WHERE r.status = 'timeout') AS timeout,
    count(*) FILTER (WHERE r.status = 'killed') AS killed,
    count(*) FILTER (WHERE r.status = 'skipped') AS skipped,
    count(*) FILTER (WHERE r.status = 'missed') AS missed,
    json_agg(r.status) FILTER (WHERE r.status NOT IN ('succeeded', 'warning', 'failed',
      'timeout', 'killed', 'skipped', 'missed')) AS others,
    count(*) AS n
  FROM cronwrap_runs r
  WHERE r.job = j.name AND r.created_at >= %(lo)s AND r.created_at < %(hi)s
    AND r.status NOT IN ('running', 'pending')
    AND (r.created_at AT TIME ZONE 'UTC')::date = %(edge_day)s::date) AS p
WHERE p.n > 0
UNION ALL
SELECT job, status, runs, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM cronwrap_day_other_counts WHERE day >= %(from_day)s::date
UNION ALL
SELECT job, status, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM cronwrap_runs WHERE status = 'running' AND created_at >= %(since)s

-- name: prune
-- Old finished rows beyond each job's newest %(keep)s, never a running row, never a slot
-- inside its job's catch-up window.
DELETE FROM cronwrap_runs WHERE id IN (
  SELECT id FROM (
    SELECT r.id, r.status, r.created_at, r.finished_at, r.scheduled_at,
           ROW_NUMBER() OVER (PARTITION BY r.job ORDER BY r.id DESC) AS newer,
           CASE WHEN cronwrap_settings(j.settings) ->> 'catchup' IN ('latest', 'all')
                THEN coalesce((cronwrap_settings(j.settings) ->> 'catchup_window')::float, 0)
                ELSE 0 END AS win
    FROM cronwrap_runs r JOIN cronwrap_jobs j ON j.name = r.job
  ) AS candidates
  WHERE status <> 'running' AND newer > %(keep)s AND coalesce(finished_at, created_at) < %(cutoff)s
    AND (scheduled_at IS NULL OR win = 0 OR scheduled_at < %(now)s - make_interval(secs => win))
)
RETURNING id, job, log_path

-- name: analyze
-- The planner's statistics of the tables status and history read: after a migration or
-- expansion, by `db upgrade` and by prune; autovacuum's autoanalyze keeps them fresh between.
ANALYZE cronwrap_jobs, cronwrap_runs

-- name: unlock
UPDATE cronwrap_runs SET locked_until = %(now)s WHERE job = %(job)s AND status = 'running'
RETURNING *
