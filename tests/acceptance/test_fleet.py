"""A fleet on one PostgreSQL: many wrappers under a role of 4 connections, and a server that
is not there yet, or never will be.

The role's CONNECTION LIMIT 4 makes the contract visible: a wrapper holds a server connection
only for the length of a transaction (none while its job runs), and a connection refused for
a reason that passes ("too many connections", starting up, refused, reset) is tried again
for up to --db-wait before --on-db-error applies; one that cannot pass (unknown database) fails
at once, one line.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.acceptance.conftest import wait_for
from tests.acceptance.hosts import Host
from tests.conftest import ConnectionSampler
from tests.tcpproxy import TcpProxy

pytestmark = pytest.mark.postgres

SECRET = b"hunter2-secret"
# Firings that wait for one of 4 connections: the default 60 s is a lot on a loaded 2-core
# machine, and these tests prove that they wait, not how fast.
PATIENT = ["--db-wait", "4m"]
# One slot per job and hour, so that firings which start in different minutes still race.
HOURLY_SLOT = ["--schedule", "* * * * *", "--tz", "UTC", "--key", "%Y-%m-%dT%H"]


@contextlib.contextmanager
def reaped(procs: list[subprocess.Popen]):
    """Whatever a failed assertion leaves running is ended: TERM reaches the job through its
    wrapper."""
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def exited_early(procs: list[subprocess.Popen]) -> str | None:
    """Why a wrapper is gone before its job was released, if one is."""
    for proc in procs:
        if proc.poll() is not None:
            return f"a wrapper exited {proc.returncode}: {proc.stderr.read()[-2000:]!r}"
    return None


def same_hour(margin: float = 120) -> None:
    """Firings keyed by the hour (HOURLY_SLOT) start early enough in one."""
    left = 3600 - time.time() % 3600
    if left < margin:
        time.sleep(left + 0.1)


def one_line(stderr: bytes) -> str:
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def refused_at_once(host: Host, said: str, password: str) -> None:
    """A firing whose login waiting cannot cure: exit 125 well within its --db-wait 60s (a
    bound, not a speed: importing psycopg took 5 s on a loaded machine), the job not run, one
    line that says why and shows no password."""
    marker = host.home.parent / "ran"
    began = time.monotonic()
    proc = host("run", "-n", "refused", "--db-wait", "60s", "--", "touch", str(marker),
                timeout=120)
    took = time.monotonic() - began
    assert proc.returncode == 125 and not marker.exists()
    line = one_line(proc.stderr)
    assert said in line and password not in line, line
    assert password.encode() not in proc.stdout
    assert took < 30, f"a refused login was waited for ({took:.1f}s of --db-wait 60s)"


# -- a role of 4 connections -----------------------------------------------------------------

def run_all_at_once(host: Host, count: int, out: Path, while_running=lambda: None) -> list[str]:
    """Fire ``count`` jobs together; each job waits until all have started (so, with a
    connection held per running job, no more could run than there are connections), then for
    the release that follows ``while_running()``, then sleeps 8 s. Asserts every run ended 0
    and was recorded succeeded; returns the job names."""
    started, release = out / "started", out / "release"
    started.mkdir()
    job = out / "job.sh"
    job.write_text(f"""#!/bin/sh
touch "{started}/$CRONWRAP_JOB"
n=0
until [ -e "{release}" ]; do
  n=$((n + 1)); [ $n -le 1800 ] || exit 3
  sleep 0.1
done
exec sleep 8
""")
    job.chmod(0o755)
    names = [f"fleet{i:02d}" for i in range(count)]
    with reaped([host.popen("run", "-n", name, *PATIENT, "--", str(job))
                 for name in names]) as procs:
        outcome = wait_for(lambda: exited_early(procs) or len(list(started.iterdir())) == count,
                           timeout=180, what=f"all {count} jobs running")
        assert outcome is True, outcome
        while_running()
        release.touch()
        statuses = [proc.wait(300) for proc in procs]
    assert statuses == [0] * count, [p.stderr.read()[-500:] for p in procs]
    for name in names:
        (run,) = host.json("history", name, "--json")
        assert (run["status"], run["exit_code"], run["attempt"]) == ("succeeded", 0, 1), run
    return names


def test_24_jobs_run_at_once_while_their_wrappers_hold_no_connection(limited_role, tmp_path):
    """Under a role of 4 connections; once all 24 run, the role has no server connection."""
    with ConnectionSampler(limited_role.name) as sampler:
        run_all_at_once(Host(tmp_path, "a", limited_role.dsn), 24, tmp_path, lambda: wait_for(
            lambda: sampler.last == 0, timeout=30,
            what="no server connection of the role while all 24 jobs run"))
    assert sampler.samples > 0 and sampler.peak <= limited_role.limit


def fire_together(fleet: list[Host], jobs: list[str], out: Path) -> list[tuple[int, bytes]]:
    """Every host fires every job at once, all in one slot per job; each run appends its host
    to ``out/JOB``. Returns each firing's exit status and stderr."""
    same_hour()
    with reaped([h.popen("run", "-n", job, *HOURLY_SLOT, *PATIENT, "--", "sh", "-c",
                         f'echo "$CRONWRAP_HOST" >> {out / job}')
                 for job in jobs for h in fleet]) as procs:
        return [(proc.wait(300), proc.stderr.read()) for proc in procs]


def assert_each_slot_ran_once(fleet: list[Host], jobs: list[str], out: Path) -> None:
    """One run per job, on the host the job itself says, and a duplicate on every other."""
    for job in jobs:
        ran_on = (out / job).read_text().split()
        assert len(ran_on) == 1, (job, ran_on)
        (run,) = fleet[0].json("history", job, "--json")
        assert (run["status"], run["host"], run["attempt"]) == ("succeeded", ran_on[0], 1), run
        skips = [e["skip_reason"] for h in fleet for e in h.events()
                 if e["event"] == "skip" and e["job"] == job]
        assert skips == ["duplicate"] * (len(fleet) - 1), (job, skips)


def test_60_firings_at_once_under_4_connections_record_each_slot_once(limited_role, tmp_path):
    """20 jobs on 3 hosts, all fired together: the firings past the role's limit wait for a
    connection instead of failing with "too many connections"."""
    fleet = [Host(tmp_path, f"h{i}", limited_role.dsn) for i in range(3)]
    jobs = [f"slot{j:02d}" for j in range(20)]
    with ConnectionSampler(limited_role.name) as sampler:
        results = fire_together(fleet, jobs, tmp_path)
    full = [err.decode().strip() for _, err in results if b"too many connections" in err]
    assert not full, "\n".join(full)  # at the claim, a renewal or the finish
    assert [rc for rc, _ in results] == [0] * 60, [err[-300:] for rc, err in results if rc]
    assert_each_slot_ran_once(fleet, jobs, tmp_path)
    assert sampler.peak <= limited_role.limit


# -- a server that is not there yet ----------------------------------------------------------

def refusing_login(sqlstate: str, message: str):
    """An answer as a PostgreSQL turning logins away gives it: no to SSL/GSS encryption, then
    FATAL ``sqlstate`` ``message``."""
    fields = f"SFATAL\0VFATAL\0C{sqlstate}\0M{message}\0\0".encode()

    def answer(client: socket.socket) -> None:
        def packet() -> bytes:
            (length,) = struct.unpack("!I", client.recv(4, socket.MSG_WAITALL))
            return client.recv(length - 4, socket.MSG_WAITALL)

        while struct.unpack("!I", packet()[:4])[0] in (80877103, 80877104):  # SSL, GSSENC
            client.sendall(b"N")
        client.sendall(b"E" + struct.pack("!I", len(fields) + 4) + fields)
    return answer


def reset(client: socket.socket) -> None:
    """Accept, then reset the connection (RST, as a crashed server's port does)."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class StandIn:
    """Listens on ``port`` and answers each connection with ``answer`` until closed."""

    def __init__(self, port: int, answer) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(64)
        self.answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                self.answer(client)
            except OSError:
                pass
            finally:
                client.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the thread blocked in accept()
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


@pytest.fixture
def late_server(pg_dsn):
    """The test database behind a port of its own, at ``.dsn`` (with a password that must
    never show): after ``start(answer)`` the port answers each connection with ``answer``
    (None: nothing listens) until ``ready()`` makes it forward to the server."""
    url = urlsplit(pg_dsn)
    proxy = TcpProxy(url.hostname, url.port or 5432)
    proxy.cut()
    stand_in: list[StandIn] = []

    class Late:
        dsn = f"postgresql://{url.username}:{SECRET.decode()}@127.0.0.1:{proxy.port}{url.path}"

        def start(self, answer) -> None:
            if answer is not None:
                stand_in.append(StandIn(proxy.port, answer))

        def ready(self) -> None:
            for s in stand_in:
                s.close()
            proxy.restore()

    yield Late()
    for s in stand_in:
        s.close()
    proxy.close()


LATER = {  # how the port answers until the server is there
    "refused": None,
    "starting_up": refusing_login("57P03", "the database system is starting up"),
    "shutting_down": refusing_login("57P03", "the database system is shutting down"),
    "too_many_clients": refusing_login("53300", "sorry, too many clients already"),
    "reset": reset,
}


@pytest.mark.parametrize("answer", LATER.values(), ids=LATER.keys())
def test_a_server_that_answers_later_is_waited_for(late_server, pg_dsn, tmp_path, answer):
    host = Host(tmp_path, "a", late_server.dsn)
    marker = tmp_path / "ran"
    late_server.start(answer)
    timer = threading.Timer(2, late_server.ready)
    timer.start()
    began = time.monotonic()
    try:
        proc = host("run", "-n", "late", "--db-wait", "60s", "--", "touch", str(marker), timeout=120)
    finally:
        timer.cancel()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert marker.exists() and time.monotonic() - began < 60
    assert SECRET not in proc.stderr + proc.stdout
    (run,) = Host(tmp_path, "reader", pg_dsn).json("history", "late", "--json")
    assert (run["status"], run["host"]) == ("succeeded", "a")


def test_nothing_listening_fails_after_db_wait_with_one_line(late_server, tmp_path):
    host = Host(tmp_path, "a", late_server.dsn)
    marker = tmp_path / "ran"
    began = time.monotonic()
    proc = host("run", "-n", "gone", "--db-wait", "1s", "--", "touch", str(marker), timeout=60)
    assert proc.returncode == 125 and not marker.exists()
    line = one_line(proc.stderr)
    assert "refused" in line and "unknown option" not in line, line
    assert SECRET.decode() not in line
    assert time.monotonic() - began < 30  # a bound that catches a hang, not a speed


def test_unknown_database_fails_at_once_with_one_line(pg_dsn, tmp_path):
    url = urlsplit(pg_dsn)
    dsn = f"postgresql://{url.username}:{SECRET.decode()}@{url.hostname}:{url.port or 5432}/no_such_db"
    refused_at_once(Host(tmp_path, "a", dsn), 'database "no_such_db" does not exist',
                    SECRET.decode())
