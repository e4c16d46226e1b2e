-- The SQLite dialect of the ledger. Times are REAL seconds since the epoch (UTC).
-- Every block is one statement, except migrations (run as scripts).

-- name: migration_1
CREATE TABLE IF NOT EXISTS jobs (
  name TEXT PRIMARY KEY,
  schedule TEXT,
  tz TEXT,
  key_template TEXT,
  settings TEXT,
  fence INTEGER NOT NULL DEFAULT 0,
  first_seen REAL NOT NULL,
  last_seen REAL NOT NULL,
  last_slot REAL
);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job TEXT NOT NULL REFERENCES jobs (name),
  run_key TEXT NOT NULL,
  scheduled_at REAL,
  trigger TEXT NOT NULL,
  status TEXT NOT NULL,
  skip_reason TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  host TEXT,
  pid INTEGER,
  pid_start INTEGER,
  locked_by TEXT,
  locked_until REAL,
  fence INTEGER,
  started_at REAL,
  finished_at REAL,
  duration_ms INTEGER,
  exit_code INTEGER,
  signal INTEGER,
  timed_out INTEGER NOT NULL DEFAULT 0,
  error_tail TEXT,
  log_path TEXT,
  skew_ms INTEGER,
  created_at REAL NOT NULL,
  UNIQUE (job, run_key)
);
CREATE INDEX IF NOT EXISTS runs_job_id ON runs (job, id);
CREATE INDEX IF NOT EXISTS runs_job_status_id ON runs (job, status, id);
CREATE INDEX IF NOT EXISTS runs_job_created ON runs (job, created_at, status);
CREATE INDEX IF NOT EXISTS runs_running ON runs (job, id) WHERE status = 'running';

-- name: migration_2
-- The runner identity beside host and pid: the boot and the PID namespace the pid belongs to.
-- Only a runner with the same host, boot and namespace may look the pid up and abandon the
-- row at once, and two containers with one host name wait for the lease (release 0.1.0's
-- rows have neither, so they always wait for it). No semicolon in these comments: the
-- SQLite migration is split into statements at each one.
ALTER TABLE runs ADD COLUMN boot_id TEXT;
ALTER TABLE runs ADD COLUMN pid_ns INTEGER;

-- name: expansion_1
-- An expansion: tables and triggers a cronwrap of the same schema version that does not know
-- them need not know (it writes runs as before, and the triggers count what it writes), so
-- the schema version stays and the previous release keeps working beside this one. The
-- expansions applied are in meta (key expansion), which only this kind of change uses.
-- Counters for Prometheus (cronwrap_runs_total, cronwrap_run_duration_seconds): every end the
-- ledger records (a row written or rewritten with a status other than running or pending: a
-- finished attempt, a skip, a missed slot) is counted by a trigger as it is written, whichever
-- cronwrap writes it, and nothing ever takes from the counts: prune deletes rows, a retry or a
-- takeover rewrites one, the counts stay. duration_buckets holds the histogram's upper bounds
-- in ms (model.DURATION_BUCKETS, written by the migrator): an end is counted under the
-- smallest bound not below its duration, under none when it is longer than the largest.
-- run_ends is a view nothing reads: inserting into it is the one body both triggers call.
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tallies (
  job TEXT NOT NULL,
  status TEXT NOT NULL,
  runs INTEGER NOT NULL DEFAULT 0,
  timed INTEGER NOT NULL DEFAULT 0,
  duration_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, status)
);
CREATE TABLE IF NOT EXISTS duration_buckets (le_ms INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS duration_tallies (
  job TEXT NOT NULL,
  le_ms INTEGER NOT NULL,
  runs INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, le_ms)
);
CREATE VIEW IF NOT EXISTS run_ends AS SELECT job, status, duration_ms FROM runs WHERE 0;
CREATE TRIGGER IF NOT EXISTS run_ends_counted INSTEAD OF INSERT ON run_ends
BEGIN
  INSERT INTO tallies (job, status, runs, timed, duration_ms)
  VALUES (NEW.job, NEW.status, 1, NEW.duration_ms IS NOT NULL, coalesce(NEW.duration_ms, 0))
  ON CONFLICT (job, status) DO UPDATE SET runs = runs + 1, timed = timed + excluded.timed,
    duration_ms = duration_ms + excluded.duration_ms;
  INSERT INTO duration_tallies (job, le_ms, runs)
  SELECT NEW.job, le, 1
  FROM (SELECT min(le_ms) AS le FROM duration_buckets WHERE le_ms >= NEW.duration_ms)
  WHERE le IS NOT NULL
  ON CONFLICT (job, le_ms) DO UPDATE SET runs = runs + 1;
END;
CREATE TRIGGER IF NOT EXISTS runs_end_inserted AFTER INSERT ON runs
WHEN NEW.status NOT IN ('running', 'pending')
BEGIN
  INSERT INTO run_ends VALUES (NEW.job, NEW.status, NEW.duration_ms);
END;
CREATE TRIGGER IF NOT EXISTS runs_end_updated AFTER UPDATE OF status ON runs
WHEN NEW.status NOT IN ('running', 'pending') AND NEW.status IS NOT OLD.status
BEGIN
  INSERT INTO run_ends VALUES (NEW.job, NEW.status, NEW.duration_ms);
END;

-- name: expansion_2
-- Every attempt at a slot, as postgres.sql's expansion_2 says (the same records, the same
-- triggers). A run row deleted by prune takes its attempts with it (runs_attempts_pruned:
-- SQLite enforces no foreign key unless asked).
CREATE TABLE IF NOT EXISTS attempts (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  status TEXT NOT NULL,
  reason TEXT,
  host TEXT,
  fence INTEGER,
  started_at REAL,
  finished_at REAL,
  duration_ms INTEGER,
  exit_code INTEGER,
  signal INTEGER,
  PRIMARY KEY (run_id, attempt)
);
CREATE TRIGGER IF NOT EXISTS runs_attempt_taken_over AFTER UPDATE ON runs
WHEN OLD.status = 'running' AND NEW.attempts > OLD.attempts
BEGIN
  INSERT INTO attempts (run_id, attempt, status, reason, host, fence, started_at)
  VALUES (OLD.id, OLD.attempts, 'abandoned', 'superseded', OLD.host, OLD.fence, OLD.started_at)
  ON CONFLICT (run_id, attempt) DO NOTHING;
END;
CREATE TRIGGER IF NOT EXISTS runs_attempt_ended AFTER UPDATE ON runs
WHEN OLD.status = 'running' AND NEW.attempts <= OLD.attempts
  AND NEW.status NOT IN ('running', 'pending')
BEGIN
  INSERT INTO attempts (run_id, attempt, status, reason, host, fence, started_at, finished_at,
                        duration_ms, exit_code, signal)
  VALUES (NEW.id, NEW.attempts, NEW.status, NEW.skip_reason, NEW.host, NEW.fence,
          NEW.started_at, NEW.finished_at, NEW.duration_ms, NEW.exit_code, NEW.signal)
  ON CONFLICT (run_id, attempt) DO UPDATE SET status = excluded.status,
    reason = excluded.reason, host = excluded.host, fence = excluded.fence,
    started_at = excluded.started_at, finished_at = excluded.finished_at,
    duration_ms = excluded.duration_ms, exit_code = excluded.exit_code,
    signal = excluded.signal;
END;
CREATE TRIGGER IF NOT EXISTS runs_attempts_pruned AFTER DELETE ON runs
BEGIN
  DELETE FROM attempts WHERE run_id = OLD.id;
END;

-- name: expansion_3
-- Pauses (cronwrap pause, resume), as postgres.sql's expansion_3 says: one row per paused job
-- (NAME, or one host's share of a host-scoped job, model.ledger_job), until a time or (NULL)
-- until resumed.
-- The claim reads it (pause_of_job) in its transaction: a scheduled or catch-up firing of a
-- paused job records its slot skipped, reason paused, and runs nothing.
CREATE TABLE IF NOT EXISTS pauses (
  job TEXT PRIMARY KEY,
  until REAL,
  reason TEXT,
  paused_by TEXT,
  paused_at REAL NOT NULL
);

-- name: expansion_4
-- Alerts of `cronwrap watch`, as postgres.sql's expansion_4 says. A deleted alert takes its
-- sends with it (alerts_forgotten: SQLite enforces no foreign key unless asked).
CREATE TABLE IF NOT EXISTS alerts (
  key TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  job TEXT NOT NULL,
  text TEXT NOT NULL,
  detail TEXT,
  slot REAL,
  run_id INTEGER,
  opened_at REAL NOT NULL,
  opened_by TEXT,
  closed_at REAL
);
CREATE INDEX IF NOT EXISTS alerts_closed ON alerts (closed_at);
CREATE TABLE IF NOT EXISTS alert_sends (
  key TEXT NOT NULL,
  notifier TEXT NOT NULL,
  phase TEXT NOT NULL,
  claimed_by TEXT,
  locked_until REAL,
  tries INTEGER NOT NULL DEFAULT 0,
  next_try_at REAL,
  sent_at REAL,
  error TEXT,
  PRIMARY KEY (key, notifier, phase)
);
CREATE TRIGGER IF NOT EXISTS alerts_forgotten AFTER DELETE ON alerts
BEGIN
  DELETE FROM alert_sends WHERE key = OLD.key;
END;

-- name: expansion_5
-- Steps of a slot (cronwrap step), as postgres.sql's expansion_5 says. A run row deleted by
-- prune takes its steps with it (runs_steps_pruned: SQLite enforces no foreign key unless asked).
CREATE TABLE IF NOT EXISTS steps (
  job TEXT NOT NULL,
  run_key TEXT NOT NULL,
  step TEXT NOT NULL,
  run_id INTEGER NOT NULL,
  status TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  fence INTEGER NOT NULL,
  host TEXT,
  pid INTEGER,
  started_at REAL NOT NULL,
  finished_at REAL,
  duration_ms INTEGER,
  exit_code INTEGER,
  signal INTEGER,
  PRIMARY KEY (job, run_key, step)
);
CREATE INDEX IF NOT EXISTS steps_run_id ON steps (run_id);
CREATE TRIGGER IF NOT EXISTS runs_steps_pruned AFTER DELETE ON runs
BEGIN
  DELETE FROM steps WHERE job = OLD.job AND run_key = OLD.run_key;
END;

-- name: step_run
-- The run a step belongs to, in the step's own BEGIN IMMEDIATE (no takeover in between).
SELECT * FROM runs WHERE id = :run_id AND run_key = :run_key

-- name: step_of_run
SELECT * FROM steps WHERE job = :job AND run_key = :run_key AND step = :step

-- name: step_run_read
SELECT * FROM runs WHERE id = :run_id AND run_key = :run_key

-- name: step_of_run_read
SELECT * FROM steps WHERE job = :job AND run_key = :run_key AND step = :step

-- name: step_begin
-- Written only while the run's fence is the caller's and the run is running: the fence check
-- and the record are one statement (and one transaction with the decision before it).
INSERT INTO steps (job, run_key, step, run_id, status, attempt, fence, host, pid, started_at)
SELECT r.job, r.run_key, :step, r.id, 'running', r.attempts, r.fence, :host, :pid, :now
FROM runs r WHERE r.id = :run_id AND r.fence = :fence AND r.status = 'running'
ON CONFLICT (job, run_key, step) DO UPDATE SET run_id = excluded.run_id, status = 'running',
  attempt = excluded.attempt, fence = excluded.fence, host = excluded.host, pid = excluded.pid,
  started_at = excluded.started_at, finished_at = NULL, duration_ms = NULL, exit_code = NULL,
  signal = NULL

-- name: step_end
-- The step's end, written over its own start only (never over a newer attempt's start of the
-- same step); whether the run is still the caller's is asked apart (step_run).
UPDATE steps SET status = :status, finished_at = :now, duration_ms = :duration_ms,
  exit_code = :exit_code, signal = :signal
WHERE job = :job AND run_key = :run_key AND step = :step AND fence = :fence
  AND status = 'running'

-- name: steps_of_runs
SELECT * FROM steps WHERE run_id IN (SELECT value FROM json_each(:ids))
ORDER BY run_id, started_at, step

-- name: expansion_6
-- What each attempt's job tree used, as postgres.sql's expansion_6 says: CPU time (user,
-- system) and peak memory, keyed by (run id, attempt), written with the finish in its
-- transaction (record_usage). A run row deleted by prune takes its usage with it.
CREATE TABLE IF NOT EXISTS usage (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  cpu_user_ms INTEGER,
  cpu_system_ms INTEGER,
  max_rss_kb INTEGER,
  PRIMARY KEY (run_id, attempt)
);
CREATE TRIGGER IF NOT EXISTS runs_usage_pruned AFTER DELETE ON runs
BEGIN
  DELETE FROM usage WHERE run_id = OLD.id;
END;

-- name: expansion_7
-- The --since window's counts kept as runs are written (issue 24 section 3), as postgres.sql's
-- expansion_7 says: per job and UTC day of a row's creation (whole days since the epoch), the
-- rows that hold an end (every status but running and pending), one column per end this
-- release knows, and any other status (a newer release's) in day_other_counts. Triggers keep
-- them exact whichever cronwrap writes the row: a row inserted with an end adds one, a row
-- whose status changes moves its count (a retry or a claim of a skipped slot takes one away,
-- the finish adds one under the new status), a deleted row (prune) takes its one away, and a
-- day whose counts all reach 0 is deleted. The claim's own writes (a row inserted pending,
-- pending to running, a takeover, a lease renewal) do nothing: the WHEN clauses. The rows
-- already in runs are counted once here. status sums whole days from them and reads only the
-- first, partial day of its window from runs (window_counts).
CREATE TABLE IF NOT EXISTS day_counts (
  job TEXT NOT NULL,
  day INTEGER NOT NULL,
  succeeded INTEGER NOT NULL DEFAULT 0,
  warning INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  timeout INTEGER NOT NULL DEFAULT 0,
  killed INTEGER NOT NULL DEFAULT 0,
  skipped INTEGER NOT NULL DEFAULT 0,
  missed INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, day)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS day_other_counts (
  job TEXT NOT NULL,
  day INTEGER NOT NULL,
  status TEXT NOT NULL,
  runs INTEGER NOT NULL,
  PRIMARY KEY (job, day, status)
) WITHOUT ROWID;
INSERT OR IGNORE INTO day_counts (job, day, succeeded, warning, failed, timeout, killed,
                                  skipped, missed)
SELECT job, CAST(created_at / 86400 AS INTEGER), sum(status = 'succeeded'),
  sum(status = 'warning'), sum(status = 'failed'), sum(status = 'timeout'),
  sum(status = 'killed'), sum(status = 'skipped'), sum(status = 'missed')
FROM runs
WHERE status IN ('succeeded', 'warning', 'failed', 'timeout', 'killed', 'skipped', 'missed')
GROUP BY 1, 2;
INSERT OR IGNORE INTO day_other_counts (job, day, status, runs)
SELECT job, CAST(created_at / 86400 AS INTEGER), status, count(*) FROM runs
WHERE status NOT IN ('succeeded', 'warning', 'failed', 'timeout', 'killed', 'skipped', 'missed',
                     'running', 'pending')
GROUP BY 1, 2, 3;
-- day_moves is a view nothing reads: inserting into it (a count's move, +1 or -1) is the one
-- body the four triggers call.
CREATE VIEW IF NOT EXISTS day_moves AS
SELECT job, day, 'status' AS status, 0 AS n FROM day_counts WHERE 0;
CREATE TRIGGER IF NOT EXISTS day_moved INSTEAD OF INSERT ON day_moves
BEGIN
  INSERT INTO day_counts (job, day, succeeded, warning, failed, timeout, killed, skipped,
                          missed)
  SELECT NEW.job, NEW.day, NEW.n * (NEW.status = 'succeeded'), NEW.n * (NEW.status = 'warning'),
    NEW.n * (NEW.status = 'failed'), NEW.n * (NEW.status = 'timeout'),
    NEW.n * (NEW.status = 'killed'), NEW.n * (NEW.status = 'skipped'),
    NEW.n * (NEW.status = 'missed')
  WHERE NEW.status IN ('succeeded', 'warning', 'failed', 'timeout', 'killed', 'skipped', 'missed')
  ON CONFLICT (job, day) DO UPDATE SET succeeded = succeeded + excluded.succeeded,
    warning = warning + excluded.warning, failed = failed + excluded.failed,
    timeout = timeout + excluded.timeout, killed = killed + excluded.killed,
    skipped = skipped + excluded.skipped, missed = missed + excluded.missed;
  INSERT INTO day_other_counts (job, day, status, runs)
  SELECT NEW.job, NEW.day, NEW.status, NEW.n
  WHERE NEW.status NOT IN ('succeeded', 'warning', 'failed', 'timeout', 'killed', 'skipped',
                           'missed')
  ON CONFLICT (job, day, status) DO UPDATE SET runs = runs + excluded.runs;
  DELETE FROM day_counts
  WHERE NEW.n < 0 AND job = NEW.job AND day = NEW.day AND succeeded = 0 AND warning = 0
    AND failed = 0 AND timeout = 0 AND killed = 0 AND skipped = 0 AND missed = 0;
  DELETE FROM day_other_counts
  WHERE NEW.n < 0 AND job = NEW.job AND day = NEW.day AND status = NEW.status AND runs <= 0;
END;
CREATE TRIGGER IF NOT EXISTS runs_day_inserted AFTER INSERT ON runs
WHEN NEW.status NOT IN ('running', 'pending')
BEGIN
  INSERT INTO day_moves VALUES (NEW.job, CAST(NEW.created_at / 86400 AS INTEGER), NEW.status, 1);
END;
CREATE TRIGGER IF NOT EXISTS runs_day_left AFTER UPDATE OF status, job, created_at ON runs
WHEN OLD.status NOT IN ('running', 'pending') AND (NEW.status IS NOT OLD.status
  OR NEW.job IS NOT OLD.job OR NEW.created_at IS NOT OLD.created_at)
BEGIN
  INSERT INTO day_moves VALUES (OLD.job, CAST(OLD.created_at / 86400 AS INTEGER), OLD.status, -1);
END;
CREATE TRIGGER IF NOT EXISTS runs_day_entered AFTER UPDATE OF status, job, created_at ON runs
WHEN NEW.status NOT IN ('running', 'pending') AND (NEW.status IS NOT OLD.status
  OR NEW.job IS NOT OLD.job OR NEW.created_at IS NOT OLD.created_at)
BEGIN
  INSERT INTO day_moves VALUES (NEW.job, CAST(NEW.created_at / 86400 AS INTEGER), NEW.status, 1);
END;
CREATE TRIGGER IF NOT EXISTS runs_day_pruned AFTER DELETE ON runs
WHEN OLD.status NOT IN ('running', 'pending')
BEGIN
  INSERT INTO day_moves VALUES (OLD.job, CAST(OLD.created_at / 86400 AS INTEGER), OLD.status, -1);
END;

-- name: window_counts
-- The --since window's rows by job with expansion 7: one row per job from its whole days in
-- day_counts (status NULL), one from the window's first day in runs (its part inside the
-- window added to the days after it, or, when that part is the bigger one, its part before the
-- window taken from the whole day: :sign; others: the statuses this release does not know, as
-- a JSON list), and rows of one status (n) for the other statuses' whole days and for each
-- running row (through runs_running by name: left to itself, SQLite walks all of
-- runs_job_created for them). Each range is read per job along its index, in the jobs' order
-- (no sort), and the first day's rows are filtered by the triggers' own day expression, so a
-- row on a day's edge is counted on the day they count it. At most half a day of a job's
-- runs is read, whatever the window's size; ledger.sqlcore sums the rows.
SELECT j.name AS job, NULL AS status, NULL AS n, sum(d.succeeded) AS succeeded,
  sum(d.warning) AS warning, sum(d.failed) AS failed, sum(d.timeout) AS timeout,
  sum(d.killed) AS killed, sum(d.skipped) AS skipped, sum(d.missed) AS missed, NULL AS others
FROM jobs j CROSS JOIN day_counts d ON d.job = j.name AND d.day >= :from_day
GROUP BY j.name
UNION ALL
SELECT j.name, NULL, :sign, sum(r.status = 'succeeded'), sum(r.status = 'warning'),
  sum(r.status = 'failed'), sum(r.status = 'timeout'), sum(r.status = 'killed'),
  sum(r.status = 'skipped'), sum(r.status = 'missed'),
  json_group_array(r.status) FILTER (WHERE r.status NOT IN ('succeeded', 'warning', 'failed',
    'timeout', 'killed', 'skipped', 'missed'))
FROM jobs j CROSS JOIN runs r
  ON r.job = j.name AND r.created_at >= :lo AND r.created_at < :hi
WHERE r.status NOT IN ('running', 'pending') AND CAST(r.created_at / 86400 AS INTEGER) = :edge_day
GROUP BY j.name
UNION ALL
SELECT job, status, runs, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM day_other_counts WHERE day >= :from_day
UNION ALL
SELECT job, status, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM runs INDEXED BY runs_running WHERE status = 'running' AND created_at >= :since

-- name: record_usage
INSERT INTO usage (run_id, attempt, cpu_user_ms, cpu_system_ms, max_rss_kb)
VALUES (:id, :attempt, :cpu_user_ms, :cpu_system_ms, :max_rss_kb)
ON CONFLICT (run_id, attempt) DO UPDATE SET cpu_user_ms = excluded.cpu_user_ms,
  cpu_system_ms = excluded.cpu_system_ms, max_rss_kb = excluded.max_rss_kb

-- name: usage_of_runs
SELECT * FROM usage WHERE run_id IN (SELECT value FROM json_each(:ids))

-- name: alerts_since
SELECT a.*, s.notifier, s.phase, s.sent_at
FROM alerts a LEFT JOIN alert_sends s ON s.key = a.key AND s.sent_at IS NOT NULL
WHERE a.closed_at IS NULL OR a.closed_at >= :since
ORDER BY a.opened_at, a.key

-- name: open_alert
INSERT INTO alerts (key, kind, job, text, detail, slot, run_id, opened_at, opened_by)
VALUES (:key, :kind, :job, :text, :detail, :slot, :run_id, :now, :by)
ON CONFLICT (key) DO NOTHING

-- name: close_alert
UPDATE alerts SET closed_at = :now WHERE key = :key AND closed_at IS NULL

-- name: forget_alerts
DELETE FROM alerts WHERE closed_at < :before

-- name: claim_send
INSERT INTO alert_sends AS s (key, notifier, phase, claimed_by, locked_until)
VALUES (:key, :notifier, :phase, :by, :until)
ON CONFLICT (key, notifier, phase) DO UPDATE SET claimed_by = excluded.claimed_by,
  locked_until = excluded.locked_until
WHERE s.sent_at IS NULL AND (s.locked_until IS NULL OR s.locked_until <= :now)
  AND (s.next_try_at IS NULL OR s.next_try_at <= :now)
RETURNING tries

-- name: send_done
UPDATE alert_sends SET sent_at = :now, locked_until = NULL, error = NULL
WHERE key = :key AND notifier = :notifier AND phase = :phase AND claimed_by = :by

-- name: send_failed
UPDATE alert_sends SET tries = tries + 1, next_try_at = :retry_at, locked_until = NULL,
  error = :error
WHERE key = :key AND notifier = :notifier AND phase = :phase AND claimed_by = :by

-- name: attempt_superseded
INSERT INTO attempts (run_id, attempt, status, reason, host, fence, started_at, finished_at,
                      duration_ms, exit_code, signal)
SELECT id, :attempt, :status, :reason, :host, :fence, :started_at, :finished_at,
  :duration_ms, :exit_code, :signal
FROM runs WHERE id = :id
ON CONFLICT (run_id, attempt) DO UPDATE SET status = excluded.status, reason = excluded.reason,
  finished_at = excluded.finished_at, duration_ms = excluded.duration_ms,
  exit_code = excluded.exit_code, signal = excluded.signal
WHERE attempts.fence IS excluded.fence

-- name: attempts_of_runs
SELECT * FROM attempts WHERE run_id IN (SELECT value FROM json_each(:ids))
ORDER BY run_id, attempt

-- name: pause_of_job
-- The pause in force for a firing of :job: its own, else (one host's share of a host-scoped
-- job, NAME char(31) HOST) its name's, which covers every host. model.pause_names says the same.
SELECT * FROM pauses
WHERE job IN (:job, substr(:job, 1, instr(:job || char(31), char(31)) - 1))
  AND (until IS NULL OR until > :now)
ORDER BY job = :job DESC LIMIT 1

-- name: pause_job
INSERT INTO pauses (job, until, reason, paused_by, paused_at)
VALUES (:job, :until, :reason, :paused_by, :now)
ON CONFLICT (job) DO UPDATE SET until = excluded.until, reason = excluded.reason,
  paused_by = excluded.paused_by, paused_at = excluded.paused_at
RETURNING *

-- name: resume_job
DELETE FROM pauses WHERE job = :job RETURNING *

-- name: pauses
SELECT * FROM pauses ORDER BY job

-- name: expansion
SELECT value FROM meta WHERE key = 'expansion'

-- name: set_expansion
INSERT INTO meta (key, value) VALUES ('expansion', :n)
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: duration_bucket
INSERT INTO duration_buckets (le_ms) VALUES (:le_ms) ON CONFLICT DO NOTHING

-- name: change_token
-- Ledger.change_token: SQLite changes data_version on this connection whenever another
-- connection (any process) committed to the file since this one last asked; total_changes()
-- counts this connection's own writes.
SELECT data_version || '.' || total_changes() AS token FROM pragma_data_version()

-- name: tallies
SELECT job, status, runs, timed, duration_ms FROM tallies

-- name: duration_tallies
SELECT job, le_ms, runs FROM duration_tallies

-- name: upsert_job
-- last_slot: the newest scheduled slot seen (catch-up planning and "late" count slots after it).
-- settings: JSON of what prune must respect (the catch-up policy and window).
INSERT INTO jobs (name, schedule, tz, key_template, settings, first_seen, last_seen, last_slot)
VALUES (:job, :schedule, :tz, :key_template, :settings, :now, :now, :last_slot)
ON CONFLICT (name) DO UPDATE SET
  schedule = excluded.schedule, tz = excluded.tz, settings = excluded.settings,
  key_template = excluded.key_template, last_seen = excluded.last_seen,
  last_slot = CASE WHEN jobs.last_slot IS NULL OR excluded.last_slot > jobs.last_slot
                   THEN coalesce(excluded.last_slot, jobs.last_slot) ELSE jobs.last_slot END

-- name: touch_job
-- A manual run (--date, --at) is not cron's firing: it leaves what the job's firings recorded
-- (schedule, zone, key template, settings, last slot) as it is. A job seen first by hand gets
-- what the manual run knows.
INSERT INTO jobs (name, schedule, tz, key_template, settings, first_seen, last_seen)
VALUES (:job, :schedule, :tz, :key_template, :settings, :now, :now)
ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen

-- name: running_of_job
SELECT * FROM runs WHERE job = :job AND status = 'running' ORDER BY id

-- name: expire_lease
UPDATE runs SET locked_until = :now WHERE id = :id AND status = 'running'

-- name: insert_run
INSERT INTO runs (job, run_key, scheduled_at, trigger, status, skip_reason, host, created_at)
VALUES (:job, :run_key, :scheduled_at, :trigger, :status, :skip_reason, :host, :now)
ON CONFLICT (job, run_key) DO NOTHING
RETURNING *

-- name: run_by_key
SELECT * FROM runs WHERE job = :job AND run_key = :run_key

-- name: next_fence
UPDATE jobs SET fence = fence + 1 WHERE name = :job RETURNING fence

-- name: claim_run
UPDATE runs SET
  status = 'running', trigger = :trigger, scheduled_at = :scheduled_at,
  skip_reason = NULL, attempts = attempts + 1, host = :host, pid = :pid,
  pid_start = :pid_start, boot_id = :boot_id, pid_ns = :pid_ns,
  locked_by = :host, locked_until = :now + :lease, fence = :fence,
  started_at = :now, finished_at = NULL, duration_ms = NULL, exit_code = NULL,
  signal = NULL, timed_out = 0, error_tail = NULL, log_path = NULL, skew_ms = :skew_ms
WHERE id = :id
RETURNING *

-- name: heartbeat
UPDATE runs SET locked_until = :now + :lease
WHERE id = :id AND fence = :fence AND status = 'running'
  AND job = :job AND run_key = :run_key
  AND host = :host AND pid = :pid AND pid_start = :pid_start

-- name: finish
UPDATE runs SET
  status = :status, skip_reason = :skip_reason, finished_at = :now,
  duration_ms = :duration_ms, exit_code = :exit_code, signal = :signal,
  timed_out = :timed_out, error_tail = :error_tail, log_path = :log_path,
  locked_until = NULL
WHERE id = :id AND fence = :fence AND status = 'running'
  AND job = :job AND run_key = :run_key
  AND host = :host AND pid = :pid AND pid_start = :pid_start

-- name: runs_of_job
-- The newest runs created since a time, newest first by creation: read backwards along
-- runs_job_created, so a page reads one page of rows however many runs the job (or the
-- window) holds. Ordered by id, SQLite read every run of the window and sorted them.
SELECT * FROM runs WHERE job = :job AND created_at >= :since
ORDER BY created_at DESC, id DESC LIMIT :limit

-- name: runs_before
-- The newest runs below an id (keyset paging: history, serve's pages), on the (job, id) index:
-- no more rows are read than asked for, whatever the job's length (runs_of_job sorts the whole job).
SELECT * FROM runs WHERE job = :job AND id < :before ORDER BY id DESC LIMIT :limit

-- name: runs_after
-- The runs just above an id, oldest first: the page newer than one of serve's pages.
SELECT * FROM runs WHERE job = :job AND id > :after ORDER BY id LIMIT :limit

-- name: run_by_id
SELECT * FROM runs WHERE job = :job AND id = :id

-- name: jobs
SELECT * FROM jobs ORDER BY name

-- name: job_by_name
SELECT * FROM jobs WHERE name = :job

-- name: job_names
SELECT name FROM jobs ORDER BY name

-- name: jobs_named
-- The job itself and each host's share of it (model.ledger_job: NAME, char(31), HOST).
SELECT name FROM jobs
WHERE name = :job OR substr(name, 1, length(:job) + 1) = :job || char(31)
ORDER BY name

-- name: abandoned_since
-- The job's runs abandoned (running with the lease expired: the runner died) whose slot is at or
-- after :since; the next firing takes them over. Only running rows are read (issue 24: a firing
-- read every run key of its window, ~70 ms for 30 days of a minutely job).
SELECT run_key, scheduled_at FROM runs
WHERE job = :job AND status = 'running' AND (locked_until IS NULL OR locked_until <= :now)
  AND scheduled_at >= :since

-- name: keys_known
-- Which of :keys (a JSON array) the job has a row for: along the (job, run_key) key.
SELECT run_key FROM runs WHERE job = :job AND run_key IN (SELECT value FROM json_each(:keys))

-- name: overview
-- One row per job with its last run's row (skips are not runs; all NULL without one) and its
-- last success: the last run itself when it succeeded (no run after it but skips), else
-- looked up (a second index descent only for the jobs whose last run did not succeed). One
-- statement: reading the last runs again by id was a second lookup a job (issue 24).
SELECT j.name, j.schedule, j.tz, j.key_template, j.settings, j.first_seen, j.last_seen,
  j.last_slot,
  CASE WHEN r.status = 'succeeded' THEN r.finished_at
       ELSE (SELECT s.finished_at FROM runs s WHERE s.job = j.name AND s.status = 'succeeded'
             ORDER BY s.id DESC LIMIT 1) END AS last_success_at,
  r.*
FROM jobs j LEFT JOIN runs r ON r.id = (
  SELECT x.id FROM runs x WHERE x.job = j.name AND x.status <> 'skipped'
  ORDER BY x.id DESC LIMIT 1)
ORDER BY j.name

-- name: all_running
-- No ORDER BY: with one, SQLite scans the table in id order instead of using runs_running.
SELECT * FROM runs WHERE status = 'running'

-- name: all_counts
-- Per job through runs_job_created (a range of the window for each job); a plain GROUP BY
-- over runs walked the whole table: 1.4 s for a million rows instead of ~30 ms. Grouping by
-- status sorts every row of the window (a temporary B-tree): only the rows that did not
-- succeed (the few) are grouped, and a job's successes are its rows less those; half the time
-- for a fleet's week of runs. Both are MATERIALIZED: otherwise SQLite counts each job's
-- window once more for `WHERE n > 0`. Still one pass over the window's index entries
-- (bench/results.md, issue 24).
WITH others AS MATERIALIZED (
  SELECT j.name AS job, r.status, count(*) AS n
  FROM jobs j CROSS JOIN runs r
    ON r.job = j.name AND r.created_at >= :since AND r.status <> 'succeeded'
  GROUP BY j.name, r.status),
totals AS MATERIALIZED (
  SELECT j.name AS job,
    (SELECT count(*) FROM runs r WHERE r.job = j.name AND r.created_at >= :since)
    - coalesce((SELECT sum(o.n) FROM others o WHERE o.job = j.name), 0) AS n
  FROM jobs j)
SELECT job, status, n FROM others
UNION ALL
SELECT job, 'succeeded', n FROM totals WHERE n > 0

-- name: prune
-- Old finished rows beyond each job's newest :keep, never a running row, never a slot inside
-- its job's catch-up window.
DELETE FROM runs WHERE id IN (
  SELECT id FROM (
    SELECT r.id, r.status, r.created_at, r.finished_at, r.scheduled_at,
           ROW_NUMBER() OVER (PARTITION BY r.job ORDER BY r.id DESC) AS newer,
           CASE WHEN json_valid(j.settings) AND json_extract(j.settings, '$.catchup') IN ('latest', 'all')
                THEN coalesce(json_extract(j.settings, '$.catchup_window'), 0) ELSE 0 END AS win
    FROM runs r JOIN jobs j ON j.name = r.job
  )
  WHERE status <> 'running' AND newer > :keep AND coalesce(finished_at, created_at) < :cutoff
    AND (scheduled_at IS NULL OR win = 0 OR scheduled_at < :now - win)
)
RETURNING id, job, log_path

-- name: analyze
-- The planner's statistics (sqlite_stat1), within the connection's analysis_limit: after a
-- migration or expansion, by `db upgrade` and by prune (SqliteLedger.close runs PRAGMA
-- optimize, which does this only where a query of the connection wanted it).
ANALYZE

-- name: unlock
UPDATE runs SET locked_until = :now WHERE job = :job AND status = 'running' RETURNING *
