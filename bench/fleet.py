"""The rows of bench/run.py for many jobs and hosts on one PostgreSQL (issue 13):

- ``connections``: N real ``cronwrap run -- sleep S`` started together under a role limited
  to 4 server connections;
- ``burst``: 1,000 claims of distinct jobs from 50 client processes, directly and through
  PgBouncer in transaction mode, beside a bare INSERT … ON CONFLICT loop;
- ``fleet``: 50 hosts × 20 jobs for several minutes under a role limited to 10 connections,
  every firing cronwrap's own ``run`` code with a real job, most of them forked from a warm
  interpreter (bench/fleet_sim.py) rather than exec'd, with one host SIGKILLed mid-run.

Each function takes the ``Bench`` of run.py and adds its rows. README.md says what each row
measures and why; the docstrings say how.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import ConnectionSampler, event_time, pct, pg_url, read_events, run_with_usage

HERE = Path(__file__).resolve().parent
# A run's end is logged (or timed) just after its finish commits, and the next claim of the
# job may commit in between: only overlaps longer than this are two runs at once.
OVERLAP_TOLERANCE = 0.5
# Run log events about results that could not be recorded when their job ended (runner.py)
OUTBOX_EVENTS = ("spooled", "outbox_delivered", "outbox_quarantined", "unrecorded", "lease_lost")


def spread(values: list[float], unit: str = "ms", digits: int = 1) -> str:
    if not values:
        return "none"
    f = f"{{:.{digits}f}}"
    return (f"p50 {f.format(pct(values, 50))} {unit}, p95 {f.format(pct(values, 95))}, "
            f"p99 {f.format(pct(values, 99))}, max {f.format(max(values))}")


def first_lines(texts: list[str], keep: int = 2) -> str:
    """The most frequent messages among ``texts`` (first line of each), with their counts."""
    counted = Counter(t.strip().splitlines()[-1][:160] if t.strip() else "(no message)" for t in texts)
    return "; ".join(f"{n} × {m!r}" for m, n in counted.most_common(keep))


class Reaper:
    """PIDs of the bench's ``cronwrap run`` children still running, so that a row can end
    what outlives its deadline (a wrapper waiting forever would hang the bench)."""

    def __init__(self) -> None:
        self.live: set[int] = set()
        self.lock = threading.Lock()

    def add(self, pid: int) -> None:
        with self.lock:
            self.live.add(pid)

    def discard(self, pid: int) -> None:  # called before the PID is reaped (run_with_usage)
        with self.lock:
            self.live.discard(pid)

    def terminate(self, sig: int = signal.SIGTERM) -> int:
        with self.lock:
            for pid in self.live:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            return len(self.live)

    def watchdog(self, deadline: float) -> threading.Event:
        """TERM (then KILL 10 s later) whatever is still running at ``deadline``; set the
        returned event to call it off."""
        stop = threading.Event()

        def watch() -> None:
            if not stop.wait(max(0.0, deadline - time.time())):
                self.terminate()
                if not stop.wait(10):
                    self.terminate(signal.SIGKILL)

        threading.Thread(target=watch, daemon=True, name="reaper").start()
        return stop


# -- connection economy -------------------------------------------------------------------


def connections(bench) -> None:
    """N ``cronwrap run -n conn-I -- sleep S`` (one host, one database, distinct jobs) spawned
    together under a role with CONNECTION LIMIT 4; the role's server connections sampled from
    the bench's side every 50 ms; the start delay of each job is its spawn → its ``start``
    event (written right after its claim)."""
    limit = 4
    sizes = [(24, 5.0), (60, 5.0)] if bench.quick else [(24, 20.0), (200, 20.0)]
    budget = f"all N recorded, peak ≤ {limit} connections"
    if not bench.pg():
        for n, sleep in sizes:
            bench.skipped_pg(f"connection economy: {n} jobs", budget)
        return
    role = bench.create_role("conn", limit)
    for n, sleep in sizes:
        connections_once(bench, role, limit, n, sleep, budget)


def connections_once(bench, role: str, limit: int, n: int, sleep: float, budget: str) -> None:
    label = (f"connection economy: {n} × `cronwrap run -- sleep {sleep:g}` started together, role "
             f"CONNECTION LIMIT {limit}" + (" (--quick size; the budget is for 24 and 200 × sleep 20)"
                                            if bench.quick else ""))
    url = bench.create_database(f"conn{n}", owner=role)
    home = f"conn{n}"
    env = bench.env(home, CRONWRAP_DB=url, CRONWRAP_HOST="conn-host")
    init = subprocess.run([bench.exe, "db", "init"], env=env, capture_output=True, text=True)
    if init.returncode != 0:
        return bench.row(label, f"db init failed: {init.stderr.strip()[-200:]}", budget, False)
    sampler = ConnectionSampler(bench.admin_session("postgres"), role)
    sampler.start()
    cpu_before = server_cpu(bench)
    reaper = Reaper()
    # Time enough for every job even at one connection at a time, plus --db-wait's 60 s.
    stop = reaper.watchdog(time.time() + sleep + 60 + n * 0.5 + 60)

    def fire(i: int) -> tuple:
        return run_with_usage([bench.exe, "run", "-n", f"conn-{i:03d}", "--", "sleep", f"{sleep:g}"],
                              env, on_spawn=reaper.add, on_exit=reaper.discard)

    with ThreadPoolExecutor(max_workers=n) as pool:  # one thread per job: all spawned at once
        fired = list(pool.map(fire, range(n)))
    stop.set()
    time.sleep(0.2)
    sampler.stop()
    cpu_used = server_cpu(bench) - cpu_before
    session = bench.admin_session(url.rsplit("/", 1)[1])
    statuses = dict(session.query("SELECT status, count(*) FROM cronwrap_runs "
                                  "WHERE job LIKE %s GROUP BY status", "conn-%"))
    session.close()
    events = [e for e in read_events(bench.tmp / home) if e["job"].startswith("conn-")]
    starts = {e["job"]: event_time(e) for e in events if e["event"] == "start"}
    ends = [event_time(e) for e in events if e["event"] in ("finish", "timeout")]
    delays = [starts[f"conn-{i:03d}"] - f[1] for i, f in enumerate(fired) if f"conn-{i:03d}" in starts]
    codes = Counter(f[0] for f in fired)
    failures = [f[4] for f in fired if f[0] != 0]
    succeeded = statuses.get("succeeded", 0)
    all_running = ""
    if len(starts) == n and ends and max(starts.values()) < min(ends):
        held = sampler.peak_between(max(starts.values()), min(ends))
        all_running = (f"; while all {n} jobs slept ({min(ends) - max(starts.values()):.1f} s): at most "
                       f"{held} connections")
    bench.row(label,
              f"{succeeded}/{n} recorded succeeded ("
              + ", ".join(f"{s} {c}" for s, c in sorted(statuses.items())) + "); exit statuses "
              + ", ".join(f"{c} × {k}" for k, c in sorted(codes.items()))
              + (f" ({first_lines(failures)})" if failures else "")
              + f"; peak {sampler.peak} server connections of the role ({len(sampler.samples)} "
              f"samples, every 50 ms){all_running}; start delay (spawn → start event) over "
              f"{len(delays)} started: {spread([d * 1000 for d in delays], 'ms', 0)}; wrapper "
              f"wall median {statistics.median(f[2] for f in fired) / 1000:.1f} s, CPU median "
              f"{statistics.median(f[3] for f in fired):.0f} ms; server CPU {cpu_used:.1f} s (the whole "
              f"server's); load {os.getloadavg()[0]:.1f}",
              budget, succeeded == n and sampler.peak <= limit)


# -- burst --------------------------------------------------------------------------------


class PgBouncer:
    """A PgBouncer of the bench's own in transaction mode in front of the server, on a free
    loopback port, run as the ``postgres`` user (PgBouncer refuses root) from a directory of
    its own; ``stop()`` ends it by the PID it wrote."""

    POOL_SIZE = 20  # PgBouncer's default_pool_size

    def __init__(self, server_host: str, server_port: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cwbench-pgbouncer."))
        self.port = free_port()
        user = os.environ.get("PGUSER") or "postgres"
        ini = self.dir / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={server_host} port={server_port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.dir / 'users.txt'}\n"
            f"pool_mode = transaction\ndefault_pool_size = {self.POOL_SIZE}\n"
            "max_client_conn = 1000\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\npidfile = {self.dir / 'pgbouncer.pid'}\n"
            # JDBC's usual extra; nothing for cronwrap: what it sends must pass as it is.
            "ignore_startup_parameters = extra_float_digits\n")
        (self.dir / "users.txt").write_text(f'"{user}" ""\n')
        argv = ["pgbouncer", str(ini)]
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            for f in self.dir.iterdir():
                shutil.chown(f, "postgres")
            argv = ["runuser", "-u", "postgres", "--", *argv]
        # Its log goes to stderr too: a file, never a pipe nobody reads (PgBouncer would block).
        with open(self.dir / "stderr", "w") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"pgbouncer did not start: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return ((self.dir / "pgbouncer.log").read_text()
                    or (self.dir / "stderr").read_text()).strip()[-300:]
        except OSError:
            return "(no log)"

    def log_size(self) -> int:
        try:
            return (self.dir / "pgbouncer.log").stat().st_size
        except OSError:
            return 0

    def errors_since(self, offset: int) -> list[str]:
        """PgBouncer's warnings and errors logged past ``offset`` (without its PID and
        connection address, so that like messages count together)."""
        try:
            with open(self.dir / "pgbouncer.log", errors="replace") as f:
                f.seek(offset)
                lines = f.read().splitlines()
        except OSError:
            return []
        return [l.split(": ", 1)[-1] for l in lines if " WARNING " in l or " ERROR " in l]

    def stop(self) -> None:
        try:
            os.kill(int((self.dir / "pgbouncer.pid").read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def burst(bench) -> None:
    """1,000 distinct jobs claimed by 50 client processes × 20 claims (bench/burst_client.py),
    released together once all are set up; the same with a bare INSERT … ON CONFLICT loop on
    the same server (the floor); interleaved, ROUNDS rounds, each on a fresh database; then
    the same through PgBouncer in transaction mode when a ``pgbouncer`` binary is found."""
    clients, per = 50, 20
    rounds = 1 if bench.quick else 3
    what = f"burst: {clients * per:,} claims of distinct jobs from {clients} client processes"
    budget = "≥ 3,000 claims/s, p99 ≤ 25 ms"
    bouncer_budget = "every claim succeeds through PgBouncer (transaction mode)"
    if not bench.pg():
        bench.skipped_pg(what + ", direct", budget)
        return bench.skipped_pg(what + ", through PgBouncer", bouncer_budget)
    host = os.environ.get("PGHOST") or "127.0.0.1"
    port = os.environ.get("PGPORT") or "5432"
    targets = {"direct": (host, port)}
    bouncer, no_bouncer = None, "no pgbouncer (no `pgbouncer` binary on PATH)"
    if shutil.which("pgbouncer"):
        try:
            bouncer = PgBouncer(host, port)
            targets["PgBouncer"] = ("127.0.0.1", str(bouncer.port))
        except RuntimeError as exc:
            no_bouncer = f"no pgbouncer: {exc}"
    results: dict[tuple[str, str], list[dict]] = {}
    loads = []
    try:
        for r in range(rounds):
            for target, (t_host, t_port) in targets.items():
                for mode in ("floor", "ledger"):
                    loads.append(os.getloadavg()[0])
                    results.setdefault((target, mode), []).append(
                        burst_once(bench, mode, target, t_host, t_port, clients, per, r,
                                   bouncer if target == "PgBouncer" else None))
    finally:
        if bouncer is not None:
            bouncer.stop()
    for target in targets:
        floor, ledger = results[(target, "floor")], results[(target, "ledger")]
        rate = statistics.median(x["rate"] for x in ledger)
        lat = [ms for x in ledger for ms in x["latencies"]]
        errors = [e for x in ledger for e in x["errors"]]
        f_rate = statistics.median(x["rate"] for x in floor)
        f_lat = [ms for x in floor for ms in x["latencies"]]
        f_errors = [e for x in floor for e in x["errors"]]
        figure = (f"cronwrap claim(): {rate:,.0f} claims/s (" + ", ".join(f"{x['rate']:,.0f}" for x in ledger)
                  + f"), latency {spread(lat)}; {sum(x['claimed'] for x in ledger)} claimed"
                  + (f", {len(errors)} errors: {first_lines(errors)}" if errors else "")
                  + f"; bare INSERT … ON CONFLICT loop: {f_rate:,.0f} claims/s, latency {spread(f_lat)}"
                  + (f", {len(f_errors)} errors: {first_lines(f_errors)}" if f_errors else "")
                  + (f"; cronwrap at {rate / f_rate:.2f}x the floor's rate" if f_rate else ""))
        figure += (f"; set-up (import, PostgresLedger(url)) median "
                   f"{statistics.median(x['setup'] for x in ledger):.0f} ms, not timed"
                   f"; {rounds} round{'s' if rounds > 1 else ''}, load {min(loads):.1f}–{max(loads):.1f}")
        p99 = pct(lat, 99) if lat else float("inf")
        if target == "direct":
            bench.row(what + ", direct", figure, budget, rate >= 3000 and p99 <= 25 and not errors)
        else:
            logged = [e for x in ledger + floor for e in x["bouncer"]]
            figure += (f"; default_pool_size {PgBouncer.POOL_SIZE}" +
                       (f"; PgBouncer logged: {first_lines(logged)}" if logged else ""))
            bench.row(what + ", through PgBouncer (transaction mode)", figure, bouncer_budget,
                      not errors and sum(x["claimed"] for x in ledger) == clients * per * rounds)
    if "PgBouncer" not in targets:
        bench.row(what + ", through PgBouncer (transaction mode)", no_bouncer, bouncer_budget, None)


def burst_once(bench, mode: str, target: str, host: str, port: str, clients: int, per: int,
               round_: int, bouncer: PgBouncer | None) -> dict:
    name = f"burst_{target.lower()}_{mode}_{round_}"
    direct = bench.create_database(name)
    if mode in ("ledger", "writes", "lean", "fn"):
        subprocess.run([bench.exe, "db", "init"], env=bench.env("burst", CRONWRAP_DB=direct),
                       check=True, capture_output=True)
    else:
        session = bench.admin_session(f"cwbench_{os.getpid()}_{name}")
        session.query("CREATE TABLE burst_floor (id bigserial PRIMARY KEY, job text NOT NULL, "
                      "run_key text NOT NULL, claimed_at timestamptz NOT NULL DEFAULT now(), "
                      "UNIQUE (job, run_key))")
        session.close()
    url = pg_url(f"cwbench_{os.getpid()}_{name}", host=host, port=port)
    run_key = time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime())
    outs = [bench.tmp / f"{name}-{c}.json" for c in range(clients)]
    mark = bouncer.log_size() if bouncer else 0
    errs = [open(bench.tmp / f"{name}-{c}.err", "w") for c in range(clients)]
    procs = [subprocess.Popen([bench.python, str(HERE / "burst_client.py"), mode, url, str(c * per),
                               str(per), run_key, str(out)], env=bench.env("burst"),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
             for c, (out, err) in enumerate(zip(outs, errs))]
    def give_up() -> None:  # a client stuck past any sane time is ended, not waited for
        for p in procs:
            if p.poll() is None:
                p.kill()

    watchdog = threading.Timer(180, give_up)
    watchdog.start()
    for p in procs:
        p.stdout.readline()  # "ready" (or "" from a client that died)
    go = time.time()
    for p in procs:
        try:
            p.stdin.write("go\n")
            p.stdin.flush()
        except BrokenPipeError:
            pass
    for p in procs:
        try:
            p.wait(120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    watchdog.cancel()
    for f in errs:
        f.close()
    claims, setups, died = [], [], 0
    for out in outs:
        try:
            data = json.loads(out.read_text())
        except (OSError, ValueError):
            died += 1
            continue
        setups.append(data["setup_ms"])
        claims += data["claims"]
    logged = bouncer.errors_since(mark) if bouncer else []  # before the drop ends its sessions
    bench.drop_database(f"cwbench_{os.getpid()}_{name}")
    ok = [c for c in claims if c[3] is None]
    end = max((c[0] + c[1] / 1000 for c in ok), default=go)
    errors = [c[3] for c in claims if c[3] is not None] + ["client died"] * died
    return dict(rate=len(ok) / (end - go) if end > go else 0.0, latencies=[c[1] for c in ok],
                claimed=sum(1 for c in ok if c[2]), errors=errors, bouncer=logged,
                setup=statistics.median(setups) if setups else 0.0)


# -- fleet simulation ---------------------------------------------------------------------


def fires(entry: dict, minute: int) -> bool:
    """Whether ``entry`` fires in the run's ``minute`` (0, 1, ...)."""
    return (minute + entry["phase"]) % entry["every"] == 0


class FleetPlan:
    """Who fires what. HOSTS hosts share CRONTABS crontabs (host h carries crontab h %
    CRONTABS: 2–3 hosts per crontab, so every slot is raced), each of JOBS jobs fired every
    EVERY minutes (``*/2``; half the jobs on even minutes, half on odd ones) without --schedule
    (the slot is the minute): LONG of them sleep 10–60 s (10–30 with --quick), the others run
    ``true``. Cron on each host fires at the minute plus a host
    offset of 0–2 s, its jobs 5 ms apart.

    Every firing runs cronwrap's own ``run`` with a real job process. Exec'd ``cronwrap run``
    processes (a whole interpreter start-up each): every firing of the victim host (the one
    SIGKILLed) and the long jobs of every host of crontabs EXEC_CRONTABS. Every other firing
    is forked from a warm interpreter by fleet_sim.py (no start-up, no imports)."""

    HOSTS, CRONTABS, JOBS, LONG, EVERY = 50, 17, 20, 6, 2
    EXEC_CRONTABS = (0, 1, 2)
    VICTIM = 0

    def __init__(self, quick: bool) -> None:
        self.longest = 30 if quick else 60
        rng = random.Random(13)
        self.offsets = [0.0 if h == self.VICTIM else round(rng.uniform(0, 2.0), 3)
                        for h in range(self.HOSTS)]

    @staticmethod
    def host(h: int) -> str:
        return f"fleet-h{h:02d}"

    def duration(self, c: int, j: int) -> int:
        return 0 if j >= self.LONG else 10 + (c * 31 + j * 17) % (self.longest - 9)

    def entries(self) -> tuple[list[dict], list[dict]]:
        """(exec'd, forked) entries: {"host", "job", "duration", "offset"}."""
        execd, forked = [], []
        for h in range(self.HOSTS):
            c = h % self.CRONTABS
            for j in range(self.JOBS):
                entry = {"host": self.host(h), "job": f"fleet-c{c:02d}-j{j:02d}",
                         "duration": self.duration(c, j), "offset": self.offsets[h] + j * 0.005,
                         "every": self.EVERY, "phase": (c + j) % self.EVERY}
                exec_it = h == self.VICTIM or (c in self.EXEC_CRONTABS and j < self.LONG)
                (execd if exec_it else forked).append(entry)
        return execd, forked


def fleet(bench) -> None:
    """Several minutes of a fleet on one server under a role with CONNECTION LIMIT 10; see
    FleetPlan for who fires what and README.md for the limits of the simulation."""
    # A lease of 1 min (half the default): a takeover fits in the run, and a firing that waits
    # its turn for one of the 10 connections does not lose its slot on the way.
    limit, lease, sim_procs = 10, 60.0, 4
    minutes = 2 if bench.quick else 4
    plan = FleetPlan(bench.quick)
    execd, forked = plan.entries()
    label = (f"fleet: {plan.HOSTS} hosts × {plan.JOBS} jobs every {plan.EVERY} minutes for "
             f"{minutes} minutes, role CONNECTION LIMIT {limit}, lease {lease:g} s; "
             f"{len(execd) // plan.EVERY} exec'd `cronwrap run` + {len(forked) // plan.EVERY} "
             f"forked from a warm interpreter a minute; one host SIGKILLed mid-run"
             + (" (--quick: 2 minutes, long jobs ≤ 30 s)" if bench.quick else ""))
    budget = ("no duplicate run of a slot, no firing lost to a connection error, firings and "
              "ledger agree, takeover ≤ lease + 1 s")
    if not bench.pg():
        return bench.skipped_pg(label, budget)
    role = bench.create_role("fleet", limit)
    url = bench.create_database("fleet", owner=role)
    database = url.rsplit("/", 1)[1]
    init = subprocess.run([bench.exe, "db", "init"], env=bench.env("fleet-init", CRONWRAP_DB=url),
                          capture_output=True, text=True)
    if init.returncode != 0:
        return bench.row(label, f"db init failed: {init.stderr.strip()[-200:]}", budget, False)
    run = FleetRun(bench, plan, url, role, database, lease, minutes, execd, forked, sim_procs)
    try:
        run.start()
        run.fire_and_kill()
        run.drain()
    finally:
        run.stop()
    run.report(label, budget, limit)


class FleetRun:
    """One run of the fleet row: start the fork servers, exec firings minute by minute,
    kill the victim, let a surviving host take its slots over, wait, then check."""

    def __init__(self, bench, plan: FleetPlan, url: str, role: str, database: str, lease: float,
                 minutes: int, execd: list[dict], forked: list[dict], sim_procs: int) -> None:
        self.bench, self.plan, self.url, self.role, self.database = bench, plan, url, role, database
        self.lease, self.minutes, self.execd, self.forked = lease, minutes, execd, forked
        self.sim_procs = sim_procs
        self.dir = bench.tmp / "fleet"
        self.dir.mkdir()
        self.victim = plan.host(plan.VICTIM)
        self.survivor = plan.host(plan.VICTIM + plan.CRONTABS)  # same crontab as the victim
        self.reaper = Reaper()
        self.victim_pids: set[int] = set()
        self.victim_down = threading.Event()
        self.fired: list[tuple] = []  # (entry, minute, due, result of run_with_usage)
        self.fired_lock = threading.Lock()
        self.sims: list[subprocess.Popen] = []
        self.probe: subprocess.Popen | None = None
        self.kill: dict = {}
        self.sampler: ConnectionSampler | None = None

    def host_env(self, host: str) -> dict[str, str]:
        return self.bench.env(f"fleet/{host}", CRONWRAP_DB=self.url, CRONWRAP_HOST=host)

    def start(self) -> None:
        """Fork servers started (they import cronwrap, then wait for their firings); the
        first minute is the next that leaves them time to."""
        self.server_cpu = server_cpu(self.bench)
        now = time.time()
        first = now - now % 60 + 60
        if first - now < 8:
            first += 60
        self.starts = [first + 60 * m for m in range(self.minutes)]
        self.kill_at = self.starts[0 if self.bench.quick else 1] + (15 if self.bench.quick else 20)
        chunks = [self.forked[i::self.sim_procs] for i in range(self.sim_procs)]
        for i, entries in enumerate(chunks):
            config = self.dir / f"sim{i}.json"
            entries = [{**e, "home": str(self.dir / e["host"])} for e in entries]
            config.write_text(json.dumps({"url": self.url, "lease": self.lease,
                                          "minutes": self.starts, "entries": entries}))
            err = open(self.dir / f"sim{i}.err", "w")
            (self.dir / f"sim{i}-stderr").mkdir()
            self.sims.append(subprocess.Popen(
                [self.bench.python, str(HERE / "fleet_sim.py"), "sim", str(config),
                 str(self.dir / f"sim{i}.jsonl"), str(self.dir / f"sim{i}-stderr")],
                env=self.bench.env("fleet-sim"), stdout=subprocess.DEVNULL, stderr=err))
            err.close()
        self.sampler = ConnectionSampler(self.bench.admin_session("postgres"), self.role)
        self.sampler.start()
        print(f"    first firings at {time.strftime('%H:%M:%S', time.localtime(first))} "
              f"({first - now:.0f} s from now)", flush=True)

    def fire_execd(self, entry: dict, minute: int, due: float) -> None:
        if entry["host"] == self.victim and self.victim_down.is_set():
            return  # a crashed host fires nothing more
        argv = [self.bench.exe, "run", "-n", entry["job"], "--lease", f"{self.lease:g}s", "--"]
        argv += ["sleep", str(entry["duration"])] if entry["duration"] else ["true"]
        victim = entry["host"] == self.victim

        spawned_pid: list[int] = []

        def spawned(pid: int) -> None:
            spawned_pid.append(pid)
            self.reaper.add(pid)
            if victim:
                self.victim_pids.add(pid)

        def exited(pid: int) -> None:
            self.reaper.discard(pid)
            self.victim_pids.discard(pid)

        result = run_with_usage(argv, self.host_env(entry["host"]), on_spawn=spawned, on_exit=exited)
        with self.fired_lock:
            self.fired.append((entry, minute, due, spawned_pid[0], result))

    def fire_and_kill(self) -> None:
        plan = sorted((s + e["offset"], m, i, e) for m, s in enumerate(self.starts)
                      for i, e in enumerate(self.execd) if fires(e, m))
        self.pool = ThreadPoolExecutor(max_workers=len(self.execd) * 2)
        killer = threading.Thread(target=self.kill_victim, daemon=True, name="killer")
        killer.start()
        for due, minute, _, entry in plan:
            time.sleep(max(0.0, due - time.time()))
            self.pool.submit(self.fire_execd, entry, minute, due)
        killer.join()

    def kill_victim(self) -> None:
        """At kill_at, once the victim holds a slot (waiting up to 25 s more for one), SIGKILL
        its wrappers and their jobs; the survivor (another host of the same crontab)
        then claims each slot the victim held every 100 ms until it can (fleet_sim.py probe)."""
        time.sleep(max(0.0, self.kill_at - 8 - time.time()))
        config = self.dir / "probe.json"
        config.write_text(json.dumps({"url": self.url, "host": self.survivor, "lease": self.lease,
                                      "interval": 0.1, "deadline": self.kill_at + 25 + self.lease + 20}))
        self.probe = subprocess.Popen([self.bench.python, str(HERE / "fleet_sim.py"), "probe",
                                       str(config), str(self.dir / "probe.jsonl")],
                                      env=self.bench.env("fleet-sim"), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        self.probe.stdout.readline()
        time.sleep(max(0.0, self.kill_at - time.time()))
        session = self.bench.admin_session(self.database)
        held: list = []
        give_up = time.time() + 25
        while True:
            held = session.query(
                "SELECT job, run_key, scheduled_at, extract(epoch FROM locked_until)::float8 "
                "FROM cronwrap_runs WHERE host = %s AND status = 'running' AND locked_until > now()",
                self.victim)
            if held or time.time() > give_up:
                break
            time.sleep(0.5)
        self.victim_down.set()
        killed = time.time()
        # A crash of the host: every process of it at once — wrappers, their sentinels, jobs.
        doomed = host_processes(self.victim) | set(self.victim_pids)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in doomed:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        wrappers = doomed & set(self.victim_pids)
        jobs = doomed - wrappers
        session.close()
        self.kill = {"at": killed, "wrappers": len(wrappers), "jobs": len(jobs),
                     "held": [{"job": j, "run_key": k, "scheduled_at": s, "until": until,
                               "lease_left": until - killed} for j, k, s, until in held]}
        self.probe.stdin.write(json.dumps([{"job": h["job"], "run_key": h["run_key"],
                                            "scheduled_at": h["scheduled_at"]}
                                           for h in self.kill["held"]]) + "\n")
        self.probe.stdin.flush()
        print(f"    killed {self.victim} at {killed % 60:.1f} s into the minute: {len(wrappers)} "
              f"wrappers, {len(jobs)} other processes (sentinels, jobs), {len(held)} slots held",
              flush=True)

    def drain(self) -> None:
        """Wait for every firing: the last long job, a lease and --db-wait's 60 s at most."""
        deadline = self.starts[-1] + 2 + self.plan.longest + self.lease + 60 + 30
        stop = self.reaper.watchdog(deadline)
        self.pool.shutdown(wait=True)
        stop.set()
        for p in self.sims + ([self.probe] if self.probe else []):
            try:
                p.wait(max(1.0, deadline + 15 - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.deliver_outboxes()

    def deliver_outboxes(self) -> None:
        """What the hosts' next minute would do first: deliver the results their last firings
        left in an outbox (one ``cronwrap run -n outbox-delivery -- true`` per such host)."""
        self.delivery: dict[str, int] = {}
        for home in sorted(self.dir.iterdir()):
            outbox = home / "outbox"
            if not (home.name.startswith("fleet-h") and outbox.is_dir()
                    and any(p.suffix == ".json" for p in outbox.iterdir())):
                continue
            if home.name == self.victim:
                continue  # a dead host delivers nothing
            code = run_with_usage([self.bench.exe, "run", "-n", "outbox-delivery", "--", "true"],
                                  self.host_env(home.name))[0]
            self.delivery[home.name] = code

    def stop(self) -> None:
        if self.sampler is not None and self.sampler.is_alive():
            time.sleep(0.2)
            self.sampler.stop()
        self.reaper.terminate(signal.SIGKILL)
        for p in self.sims + ([self.probe] if self.probe else []):
            if p.poll() is None:
                p.kill()
                p.wait()

    # -- checks ---------------------------------------------------------------------------

    def records(self) -> tuple[list[dict], list[dict]]:
        """(firings, probe claims). A firing, exec'd or forked, is joined to its run log
        events by host, job and wrapper PID within its lifetime (a PID may come back over
        minutes: pid_max is often 32768)."""
        events: dict[tuple[str, str, int], list[dict]] = {}
        self.outbox = Counter()  # what the hosts' run logs say of results kept for later
        self.quarantined: list[str] = []
        for home in self.dir.iterdir():
            if home.is_dir() and home.name.startswith("fleet-h"):
                for ev in read_events(home):
                    if ev["event"] in OUTBOX_EVENTS:
                        self.outbox[ev["event"]] += 1
                    if ev["event"] == "outbox_quarantined":
                        self.quarantined.append(str(ev.get("error")))
                    if "job" in ev and "pid" in ev:  # outbox deliveries, reports: no firing of theirs
                        events.setdefault((ev.get("host", home.name), ev["job"], ev["pid"]), []).append(ev)
        firings = []
        for entry, minute, due, pid, (code, launched, wall, cpu, err) in self.fired:
            firings.append({"kind": "exec", "host": entry["host"], "job": entry["job"],
                            "minute": minute, "due": due, "launched": launched, "pid": pid,
                            "exit": code, "wall_ms": wall, "cpu_ms": cpu, "stderr": err})
        for i in range(self.sim_procs):
            path = self.dir / f"sim{i}.jsonl"
            if path.exists():
                firings += [{"kind": "fork", **json.loads(l)}
                            for l in path.read_text().splitlines() if l.strip()]
        for r in firings:
            end = r["launched"] + r["wall_ms"] / 1000
            r["events"] = [e for e in events.get((r["host"], r["job"], r["pid"]), [])
                           if r["launched"] - 1 <= event_time(e) <= end + 1]
        probes = []
        if (self.dir / "probe.jsonl").exists():
            probes = [json.loads(l) for l in (self.dir / "probe.jsonl").read_text().splitlines()]
        return firings, probes

    def report(self, label: str, budget: str, limit: int) -> None:
        firings, probes = self.records()
        session = self.bench.admin_session(self.database)
        rows = session.query("SELECT job, run_key, status, host, fence FROM cronwrap_runs "
                             "WHERE job LIKE %s", "fleet-%")
        session.close()
        ledger = {(j, k): {"status": s, "host": h, "fence": f} for j, k, s, h, f in rows}
        check = FleetCheck(ledger, self.victim, self.kill.get("at", float("inf")))
        for r in firings:
            check.firing(r)
        took = check.probes(probes, self.survivor)
        check.finish()
        problems = self.sim_problems(sum(1 for r in firings if r["kind"] == "fork"))
        cpu_used = server_cpu(self.bench) - self.server_cpu
        held = self.kill.get("held", [])
        taken = [p for p in probes if p.get("claimed_at") is not None]
        takeover_ok = bool(held) and len(taken) == len(held) and max(took) <= self.lease + 1
        until = {(h["job"], h["run_key"]): h["until"] for h in held}
        lag = [p["claimed_at"] - until[(p["job"], p["run_key"])] for p in taken
               if (p["job"], p["run_key"]) in until]
        kinds = {k: [r for r in firings if r["kind"] == k] for k in ("exec", "fork")}
        delays = {k: [(event_time(e) - r["launched"]) * 1000 for r in rs for e in r["events"]
                      if e["event"] == "start"] for k, rs in kinds.items()}
        cpu = {k: statistics.median(r["cpu_ms"] for r in rs) if rs else 0 for k, rs in kinds.items()}
        skips = Counter(e.get("skip_reason") for r in firings for e in r["events"] if e["event"] == "skip")
        statuses = Counter(v["status"] for v in ledger.values())
        takeover = ("the victim held no slot at the kill" if not held else
                    f"the victim held {len(held)} slots (lease left {min(h['lease_left'] for h in held):.1f}–"
                    f"{max(h['lease_left'] for h in held):.1f} s); {len(taken)} taken over by {self.survivor}"
                    + (f", kill → claim median {statistics.median(took):.2f} s, max {max(took):.2f} s "
                       f"(verdict: max ≤ {self.lease + 1:g} s), lease expiry → claim max "
                       f"{max(lag, default=float('nan')) * 1000:.0f} ms" if took else "")
                    + "".join(f"; {p['job']} not taken over, the probe's claims after the lease expired: "
                              + (", ".join(f"{n} {k}" for k, n in Counter(
                                  t[2] for t in p.get("tries", [])
                                  if t[0] > until.get((p["job"], p["run_key"]), 0)).items()) or "none")
                              for p in probes if p.get("claimed_at") is None)
                    + (f"; probe errors: {first_lines([p['last_error'] for p in probes if p.get('last_error')])}"
                       if any(p.get("last_error") for p in probes) else ""))
        c = check
        figure = (
            f"{len(firings):,} firings ({len(kinds['exec'])} exec'd, {len(kinds['fork']):,} forked): "
            f"{c.ran} ran, skipped: " + ", ".join(f"{k} {n}" for k, n in sorted(skips.items(), key=str))
            + "; ledger: " + ", ".join(f"{k} {n}" for k, n in sorted(statuses.items()))
            + f"; duplicate runs of a slot: {len(c.duplicates)}, overlapping runs of a job: "
            f"{len(c.overlaps)}; lost to errors: {len(c.lost)} "
            f"({sum('too many connections' in l for l in c.lost)} 'too many connections')"
            + (f": {first_lines([l.split(': ', 1)[-1] for l in c.lost])}" if c.lost else "")
            + "; run log events of results recorded late: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.outbox.items())) or "none")
            + (f" (quarantined: {first_lines(self.quarantined)})" if self.quarantined else "")
            + "; firings vs ledger disagree: "
            f"{len(c.mismatches)}" + (f" (e.g. {c.mismatches[0]})" if c.mismatches else "")
            + f"; running rows left: {len(c.left_running)}; takeover: {takeover}; killed "
            f"{self.kill.get('wrappers', 0)} wrappers and {self.kill.get('jobs', 0)} other processes "
            f"(sentinels, jobs); outbox deliveries after the last minute: "
            + (", ".join(f"{n} × exit {k}" for k, n in Counter(self.delivery.values()).items())
               or "none needed")
            + f"; server CPU during the row {cpu_used:.0f} s (the whole server's: other work "
            f"included); peak "
            f"{self.sampler.peak if self.sampler else '?'} server connections of the role (limit {limit}); "
            f"start delay (spawn → start event): exec'd {spread(delays['exec'], 'ms', 0)}; forked "
            f"{spread(delays['fork'], 'ms', 0)}; CPU per firing median: exec'd {cpu['exec']:.0f} ms, "
            f"forked {cpu['fork']:.0f} ms; load {os.getloadavg()[0]:.1f}")
        if c.duplicates or c.overlaps:
            figure += f"; e.g. {(c.duplicates + c.overlaps)[0]}"
        if problems:
            figure += f"; PROBLEMS: {problems}"
        clean = c.clean and not problems
        # Without a slot held at the kill the takeover was not produced: no verdict on it.
        self.bench.row(label, figure, budget, (clean and takeover_ok) if held or not clean else None)

    def sim_problems(self, recorded: int) -> str:
        """The fork servers' own failures: a process that ended badly, firings never made."""
        found = []
        for i, p in enumerate(self.sims):
            if p.returncode != 0:
                err = (self.dir / f"sim{i}.err").read_text().strip().splitlines()
                found.append(f"fleet_sim.py {i} exited {p.returncode}: {err[-1] if err else ''}")
        expected = sum(fires(e, m) for e in self.forked for m in range(self.minutes))
        if recorded != expected:
            found.append(f"{recorded} of {expected} forked firings recorded")
        return "; ".join(found)


class FleetCheck:
    """The fleet's firings against its ledger: duplicate claims of a slot, overlapping runs of
    a job, firings lost to errors, firings the ledger contradicts, rows left running."""

    def __init__(self, ledger: dict, victim: str, killed_at: float) -> None:
        self.ledger, self.victim, self.killed_at = ledger, victim, killed_at
        self.claims: dict[tuple[str, str], list[dict]] = {}  # slot → its claims
        self.spans: dict[str, list[tuple[float, float, str]]] = {}  # job → (start, end, host)
        self.lost: list[str] = []
        self.mismatches: list[str] = []
        self.fired_slots: set[tuple[str, str]] = set()
        self.ran = 0

    def firing(self, r: dict) -> None:
        ev = {e["event"]: e for e in r["events"]}
        start, skip = ev.get("start"), ev.get("skip")
        end = ev.get("finish") or ev.get("timeout")
        killed = r["host"] == self.victim and r["exit"] < 0
        for e in (start, skip):
            if e is not None:
                self.fired_slots.add((r["job"], e["run_key"]))
        if start is not None:
            self.ran += 1
            self.claims.setdefault((r["job"], start["run_key"]), []).append(
                {"host": r["host"], "fence": start["fence"], "took_over": start.get("took_over"),
                 "killed": killed})
            stop = (self.killed_at if killed else
                    event_time(end) if end else r["launched"] + r["wall_ms"] / 1000)
            self.spans.setdefault(r["job"], []).append((event_time(start), stop, r["host"]))
        if killed:
            return
        who = f"{r['host']} {r['job']} ({r['kind']})"
        if r["exit"] != 0:
            said = r["stderr"].strip().splitlines()
            self.lost.append(f"{who}: exit {r['exit']}: {said[-1][:200] if said else ''}")
        elif start is None and skip is None:
            self.mismatches.append(f"{who}: exit 0 without a start or skip event")
        elif start is not None:
            row = self.ledger.get((r["job"], start["run_key"]))
            if (not row or row["fence"] != start["fence"] or row["host"] != r["host"]
                    or row["status"] != (end or {}).get("status")):
                self.mismatches.append(f"{who} {start['run_key']}: ran (fence {start['fence']}, "
                                       f"{end and end.get('status')}), ledger {row}")

    def probes(self, probes: list[dict], survivor: str) -> list[float]:
        took = []
        for p in probes:
            if p.get("claimed_at") is None:
                continue
            took.append(p["claimed_at"] - self.killed_at)
            self.claims.setdefault((p["job"], p["run_key"]), []).append(
                {"host": survivor, "fence": p["fence"], "took_over": p.get("took_over"), "killed": False})
            row = self.ledger.get((p["job"], p["run_key"]))
            if not row or row["fence"] != p["fence"] or row["status"] != "succeeded":
                self.mismatches.append(f"takeover of {p['job']} {p['run_key']}: ledger {row}")
        return took

    def finish(self) -> None:
        self.duplicates = []
        for slot, cs in self.claims.items():
            cs.sort(key=lambda c: c["fence"] or 0)
            for before, after in zip(cs, cs[1:]):
                if not (before["killed"] and after["took_over"]):
                    self.duplicates.append(f"{slot}: {before['host']} then {after['host']}")
        self.overlaps = []
        for job, spans in self.spans.items():
            spans.sort()
            for (s1, e1, h1), (s2, e2, h2) in zip(spans, spans[1:]):
                if s2 < e1 - OVERLAP_TOLERANCE:
                    self.overlaps.append(f"{job}: {h1} until {e1 % 60:.1f}, {h2} from {s2 % 60:.1f}")
        self.mismatches += [f"{s} fired, no ledger row" for s in sorted(self.fired_slots)
                            if s not in self.ledger]
        self.left_running = [k for k, v in self.ledger.items() if v["status"] == "running"]

    @property
    def clean(self) -> bool:
        return not (self.duplicates or self.overlaps or self.lost or self.mismatches
                    or self.left_running)


def host_processes(host: str) -> set[int]:
    """The processes of one simulated host: those whose environment holds its
    CRONWRAP_HOST (the wrappers the bench started, their sentinels and their jobs, which
    cronwrap gives CRONWRAP_HOST)."""
    mark = f"CRONWRAP_HOST={host}".encode()
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    found.add(int(entry))
        except OSError:
            continue
    return found


def server_cpu(bench) -> float:
    """CPU seconds the PostgreSQL server has used: its postmaster's own and its reaped
    backends' (/proc/PID/stat utime, stime, cutime, cstime); nan if not readable here."""
    try:
        session = bench.admin_session("postgres")
        ((backend,),) = session.query("SELECT pg_backend_pid()")
        with open(f"/proc/{backend}/stat", "rb") as f:
            stat = f.read()
        postmaster = int(stat[stat.rfind(b")") + 2:].split()[1])
        session.close()
        with open(f"/proc/{postmaster}/stat", "rb") as f:
            stat = f.read()
    except (OSError, RuntimeError, ValueError):
        return float("nan")
    fields = stat[stat.rfind(b")") + 2:].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
