"""Security, end to end: paths, permissions, symlinks, other users, secrets, SQL.

The threat is another local user (or a careless value): they must not be able to make cronwrap
write outside its directories, write into a file they planted, follow a symlink they planted,
or skip a job; and the ledger password and ``--env-file`` values must never be shown or stored.
Other users are played by ``nobody`` (the tests run as root and ``chown``).
"""

from __future__ import annotations

import os
import pwd
import socket
import stat
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.acceptance.conftest import wait_for
from tests.conftest import until_exists
from tests.tcpproxy import TcpProxy

JOB_3 = ["--", "sh", "-c", "echo ran; exit 3"]


def history(cw, name: str, *args: str) -> list[dict]:
    return cw.json("history", name, "--json", "--limit", "100", *args)


def tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under root (not following symlinks): mode and, for files, content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = os.lstat(path)
            content = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
            out[str(path)] = (info.st_mode, content)
    return out


def all_under(root: Path) -> list[Path]:
    return [Path(dirpath) / name for dirpath, dirnames, filenames in os.walk(root)
            for name in dirnames + filenames]


@pytest.fixture
def nobody() -> int:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user 'nobody' to play another local user")


@pytest.fixture
def private_home(home: Path) -> Path:
    """CRONWRAP_HOME with its locks/ and logs/ already made (0700), to plant things in."""
    for d in (home, home / "locks", home / "logs"):
        d.mkdir(mode=0o700, exist_ok=True)
    return home


# -- names and keys never become paths outside cronwrap's directories ------------------------

HOSTILE_NAMES = ["../x", "a/b", ".", "..", "/abs/olute", "x/", "../../../../../../tmp/cw-evil",
                 "..%2F..%2Fx", "~root", "-", "a\\b", "é/../ü" * 25, ".hidden", "NUL\u200b"]


def lock_files(home: Path) -> list[str]:
    """The lock files (holders/ beside them keeps cronwrap's records of who holds each)."""
    return [name for name in os.listdir(home / "locks") if name != "holders"]


def test_hostile_job_names_never_become_paths_outside_cronwrap_home(cw, home, tmp_path):
    """Each name is refused (125, one line) or kept inside: one lock file in locks/, one
    directory in logs/, the name intact in the ledger and in the job's environment."""
    accepted = []
    for name in HOSTILE_NAMES:
        proc = cw("run", "-n", name, "--", "sh", "-c", 'printf "%s\\n" "$CRONWRAP_JOB"')
        if proc.returncode == 125:
            assert len(proc.stderr.decode().strip().splitlines()) == 1, (name, proc.stderr)
            continue
        assert proc.returncode == 0, (name, proc.stderr)
        assert proc.stdout.decode().rstrip("\n") == name
        accepted.append(name)
    assert {"../x", "a/b", ".", ".."} <= set(accepted)  # the escaped-name design (commit aa44c40)
    assert sorted(os.listdir(tmp_path)) == [home.name], "something was created beside home"
    for path in all_under(home):
        assert home.resolve() in path.resolve().parents, path
    for sub in ("locks", "logs"):
        for entry in os.listdir(home / sub):
            assert "/" not in entry and entry not in (".", "..") and len(entry) < 256, entry
    assert len(lock_files(home)) == len(accepted)
    assert len(os.listdir(home / "locks" / "holders")) == len(accepted)
    assert len(os.listdir(home / "logs")) == len(accepted) + 1  # + events.jsonl
    jobs = {j["job"]: j for j in cw.json("status", "--json")}
    assert set(jobs) == set(accepted)
    assert all(j["last_run"]["status"] == "succeeded" for j in jobs.values())
    for name in ("../x", "/abs/olute"):
        assert cw("logs", name, "--last").stdout.decode().rstrip("\n") == name
    assert not Path("/tmp/cw-evil").exists() and not Path("/abs").exists()


def test_names_that_look_alike_on_disk_stay_different_jobs(cw, home):
    """The on-disk form of a name never collides with another name's."""
    names = ["a/b", "a%2Fb", "%a%2Fb", "a_b", "a%b", "a b", "A/B"]
    for name in names:
        assert cw("run", "-n", name, "--", "true").returncode == 0, name
    assert len(lock_files(home)) == len(names)
    assert len([d for d in os.listdir(home / "logs") if (home / "logs" / d).is_dir()]) == len(names)
    jobs = {j["job"]: j for j in cw.json("status", "--json")}
    assert set(jobs) == set(names)
    assert all(j["counts"] == {"succeeded": 1} for j in jobs.values())


def test_non_printable_names_are_refused(cw, home):
    for name in ["a\nb", "tab\tname", "bell\a", "", " lead", "trail ", "x" * 129, "esc\x1b[31m"]:
        proc = cw("run", "-n", name, "--", "true")
        assert proc.returncode == 125, (name, proc.stderr)
        assert len(proc.stderr.decode().strip().splitlines()) == 1
    assert not home.exists() or not list(home.rglob("*.lock"))


def test_key_and_host_with_slashes_change_only_the_ledger(cw, home, tmp_path):
    before = set(os.listdir(tmp_path))
    key = "../../%Y/%m/../../..%d/x"
    host = "../../h/"
    proc = cw("run", "-n", "k", "--schedule", "* * * * *", "--tz", "UTC", "--key", key,
              "--host", host, "--", "sh", "-c", "echo $CRONWRAP_RUN_KEY")
    assert proc.returncode == 0, proc.stderr
    (run,) = history(cw, "k")
    assert run["run_key"] == proc.stdout.decode().strip() and run["run_key"].startswith("../../20")
    assert run["host"] == host
    for path in all_under(home):
        assert home.resolve() in path.resolve().parents, path
        assert "h" != path.name and not path.name.startswith("20"), path
    assert sorted(p.name for p in (home / "logs").iterdir()) == ["events.jsonl", "k"]
    assert set(os.listdir(tmp_path)) - before <= {home.name}


# -- permissions -----------------------------------------------------------------------------

def _exercise(cw, umask: int) -> None:
    """Every kind of file cronwrap makes: ledger (+ WAL), flock and PID locks, run log and its
    rotation, captured output, and what status/prune/db init touch."""
    logs = cw.home / "logs"
    logs.mkdir(parents=True, mode=0o700, exist_ok=True)
    os.chmod(cw.home, 0o700)
    big = logs / "events.jsonl"
    with open(os.open(big, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.write(b'{"event": "padding"}\n' * (17 * 1024 * 1024 // 21))  # rotated on next write
    commands = [
        ["run", "-n", "u", "--", "sh", "-c", "echo hi"],
        ["run", "-n", "p", "--lock", "pid", "--", "true"],
        ["run", "-n", "s", "--schedule", "* * * * *", "--catchup", "all", "--", "false"],
        ["status"], ["history", "u"], ["db", "init"], ["prune", "--older-than", "90d"],
        ["unlock", "u"], ["logs", "u"],
    ]
    for args in commands:
        proc = cw.popen(*args, umask=umask)
        proc.communicate(timeout=60)
        assert proc.returncode in (0, 1), (args, proc.returncode)
    assert (logs / "events.jsonl.1").exists() and (logs / ".rotate.lock").exists()


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
def test_nothing_cronwrap_creates_is_group_or_world_writable(cw, home, umask):
    _exercise(cw, umask)
    paths = all_under(home)
    assert len(paths) >= 12, paths
    for path in [home, *paths]:
        mode = os.lstat(path).st_mode
        assert not stat.S_ISLNK(mode), path
        assert not mode & 0o077, (str(path), oct(mode))  # 0700 directories, 0600 files


# -- symlinks refused ------------------------------------------------------------------------

def _plant_link(home: Path, where: str, target: Path) -> Path:
    link = home / where
    link.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    if link.is_dir() and not link.is_symlink():
        link.rmdir()
    link.symlink_to(target)
    return link


@pytest.mark.parametrize("where, kind, job_runs, lock_kinds", [
    ("locks/j.lock", "file", False, ("flock", "pid")),
    ("locks", "dir", False, ("flock", "pid")),
    ("ledger.db", "file", False, ("flock",)),
    ("logs", "dir", True, ("flock",)),
    ("logs/events.jsonl", "file", True, ("flock",)),
    ("logs/j", "dir", True, ("flock",)),
    ("logs/j/1.1.log", "file", True, ("flock",)),  # the first run's captured output
])
def test_a_planted_symlink_is_refused_and_its_target_untouched(cw, private_home, tmp_path, where,
                                                               kind, job_runs, lock_kinds):
    target = tmp_path / "target"
    if kind == "file":
        target.write_bytes(b"precious\n")
    else:
        target.mkdir()
        (target / "keep").write_bytes(b"precious\n")
    before = tree(target) if kind == "dir" else target.read_bytes()
    mtime = os.lstat(target).st_mtime_ns
    link = _plant_link(private_home, where, target)
    for lock in lock_kinds:
        proc = cw("run", "-n", "j", "--lock", lock, "--force", *JOB_3)
        err = proc.stderr.decode()
        assert "Traceback" not in err and "internal error" not in err, err
        assert "symlink" in err and str(link) in err, err
        if job_runs:  # a log path it cannot use is reported; the job still runs
            assert proc.returncode == 3 and proc.stdout == b"ran\n"
        else:
            assert proc.returncode == 125 and proc.stdout == b""
        assert len([l for l in err.splitlines() if l.startswith("cronwrap:")]) == 1, err
    assert (tree(target) if kind == "dir" else target.read_bytes()) == before
    assert os.lstat(target).st_mtime_ns == mtime
    assert link.is_symlink()


# -- another local user ----------------------------------------------------------------------

def _plant_foreign(path: Path, uid: int, content: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    path.write_bytes(content)
    os.chown(path, uid, uid)
    os.chmod(path, mode)


def _pid1_identity() -> bytes:
    with open("/proc/1/stat", "rb") as f:
        start = f.read().rsplit(b") ", 1)[1].split()[19]
    return b"1 " + start + b" 0 0\n"


@pytest.mark.parametrize("where, lock, job_runs", [
    ("locks/j.lock", "flock", False),
    ("locks/j.lock", "pid", False),  # holds PID 1's identity: "a live holder, skip"
    ("ledger.db", "flock", False),
    ("logs/events.jsonl", "flock", True),
    ("logs/j/1.1.log", "flock", True),
])
def test_a_file_planted_by_another_user_is_an_error_not_a_skip_nor_a_write(
        cw, private_home, nobody, where, lock, job_runs):
    path = private_home / where
    content = _pid1_identity() if where.endswith(".lock") else b"planted by nobody\n"
    _plant_foreign(path, nobody, content)
    proc = cw("run", "-n", "j", "--lock", lock, "--skip-exit-code", "99", *JOB_3)
    err = proc.stderr.decode()
    assert proc.returncode != 99, "a planted file made cronwrap skip the job"
    assert str(path) in err and f"uid {nobody}" in err, err
    assert proc.returncode == (3 if job_runs else 125), err
    assert path.read_bytes() == content, "cronwrap wrote into another user's file"
    assert os.lstat(path).st_uid == nobody


@pytest.mark.parametrize("where", [
    "", "locks", "logs/j",
    "logs",
])
def test_a_directory_owned_by_another_user_is_refused(cw, private_home, nobody, where):
    directory = private_home / where
    directory.mkdir(mode=0o700, exist_ok=True)
    os.chown(directory, nobody, nobody)
    before = sorted(os.listdir(directory))
    proc = cw("run", "-n", "j", "--skip-exit-code", "99", *JOB_3)
    err = proc.stderr.decode()
    assert proc.returncode != 99 and str(directory) in err and f"uid {nobody}" in err, err
    assert proc.returncode == (3 if where.startswith("logs") else 125), err
    assert sorted(os.listdir(directory)) == before, "cronwrap wrote into another user's directory"


def test_a_lock_planted_in_a_shared_sticky_directory_is_refused(cw, home, tmp_path, nobody):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    lock = shared / "j.lock"
    _plant_foreign(lock, nobody, _pid1_identity(), mode=0o666)
    for kind in ("flock", "pid"):
        proc = cw("run", "-n", "j", "--lock", kind, "--lock-file", str(lock),
                  "--skip-exit-code", "99", *JOB_3)
        assert proc.returncode == 125, proc.stderr
        assert str(lock) in proc.stderr.decode()
    assert lock.read_bytes() == _pid1_identity()
    # and a world-writable directory without the sticky bit is refused outright
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    proc = cw("run", "-n", "j", "--lock-file", str(open_dir / "j.lock"), *JOB_3)
    assert proc.returncode == 125 and b"world-writable" in proc.stderr
    assert not (open_dir / "j.lock").exists()


def test_world_writable_files_of_my_own_are_refused(cw, private_home):
    for where in ("locks/j.lock", "ledger.db"):
        path = private_home / where
        if where == "ledger.db":
            assert cw("db", "init").returncode == 0
        else:
            path.write_bytes(b"")
        os.chmod(path, 0o666)
        proc = cw("run", "-n", "j", "--skip-exit-code", "99", *JOB_3)
        assert proc.returncode == 125 and b"world-writable" in proc.stderr, proc.stderr
        os.chmod(path, 0o600)
    assert cw("run", "-n", "j", *JOB_3).returncode == 3


# -- secrets ---------------------------------------------------------------------------------

SECRET = "hunter2-s3cr3t-pw"


def assert_no_secret(*blobs: bytes | str, secret: str = SECRET) -> None:
    for blob in blobs:
        data = blob.encode() if isinstance(blob, str) else blob
        assert secret.encode() not in data, data[-600:]


def assert_no_secret_in_files(root: Path, secret: str = SECRET) -> None:
    for path in all_under(root):
        if path.is_file() and not path.is_symlink():
            assert secret.encode() not in path.read_bytes(), path


@pytest.fixture
def proxied(pg_dsn):
    url = urlsplit(pg_dsn)
    proxy = TcpProxy(url.hostname, url.port or 5432)
    yield proxy, f"postgresql://{url.username}:{SECRET}@127.0.0.1:{proxy.port}{url.path}", pg_dsn
    proxy.close()


ADMIN = (["status"], ["status", "--json"], ["status", "--check"], ["status", "--format", "prometheus"],
         ["history", "pw"], ["history", "pw", "--json"], ["logs", "pw"], ["unlock", "pw"],
         ["db", "init"], ["prune", "--older-than", "90d"])


def _admin_outputs(cw, db: str, commands=ADMIN) -> list[bytes]:
    outs = []
    for args in commands:
        proc = cw(*args, "--db", db, env={"CRONWRAP_DEBUG": "1"})
        outs += [proc.stdout, proc.stderr]
    return outs


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.postgres
def test_the_database_password_never_shows_nor_is_stored(cw, home, proxied, tmp_path):
    import psycopg

    proxy, dsn, direct = proxied
    debug = {"CRONWRAP_DEBUG": "1"}
    outputs: list[bytes] = []
    # a good run, with the DSN from the command line and from the environment
    proc = cw("run", "-n", "pw", "--db", dsn, "--", "sh", "-c", "echo fine", env=debug)
    assert proc.returncode == 0, proc.stderr
    proc2 = cw("run", "-n", "env", "--", "true", env={**debug, "CRONWRAP_DB": dsn})
    assert proc2.returncode == 0, proc2.stderr
    outputs += [proc.stdout, proc.stderr, proc2.stdout, proc2.stderr, *_admin_outputs(cw, dsn)]
    # the ledger lost mid-run: the result goes to the outbox, spooled under umask 000
    ready, go = tmp_path / "ready", tmp_path / "go"
    # the job ends once the server is cut (a fixed sleep could end first under load)
    runner = cw.popen("run", "-n", "pw", "--force", "--db", dsn, "--lease", "60", "--", "sh", "-c",
                      f"touch {ready}; {until_exists(go)}; exit 4",
                      env=debug, umask=0)
    wait_for(ready.exists, what="job start")
    proxy.cut()
    go.touch()
    outputs += list(runner.communicate(timeout=30))
    assert runner.returncode == 4
    (spooled,) = (home / "outbox").glob("*.json")
    assert not os.stat(spooled).st_mode & 0o077 and not os.stat(home / "outbox").st_mode & 0o077
    # unreachable: refused connections, a dead port, a bad URL; fail and run-unrecorded (after
    # --db-wait 1s: the default 60 s of waiting for a refusing server tells nothing more here)
    for url in (dsn, dsn.replace(str(proxy.port), str(_dead_port())), dsn.replace("@", "%ZZ@")):
        for mode in ("fail", "run-unrecorded"):
            proc = cw("run", "-n", "pw", "--force", "--db", url, "--on-db-error", mode,
                      "--db-wait", "1s", "--", "true", env=debug)
            assert proc.returncode in (0, 125) and b"Traceback" not in proc.stderr, proc.stderr
            outputs += [proc.stdout, proc.stderr]
        outputs += _admin_outputs(cw, url, (["status"],))
    proxy.restore()
    proc = cw("run", "-n", "other", "--db", dsn, "--", "true", env=debug)  # delivers the outbox
    outputs += [proc.stdout, proc.stderr]
    assert not list(home.glob("outbox/*.json"))
    assert_no_secret(*outputs)
    assert_no_secret_in_files(home)
    with psycopg.connect(direct, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")]
        assert tables
        for table in tables:
            rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            assert SECRET not in repr(rows), table


def test_env_file_values_never_show_nor_are_stored(cw, home, tmp_path):
    env_file = tmp_path / "job.env"
    env_file.write_text(f"API_TOKEN={SECRET}\nexport DB_PASS='{SECRET}-2'\nPATH=/usr/bin:/bin\n")
    env_file.chmod(0o600)
    debug = {"CRONWRAP_DEBUG": "1"}
    outputs = []
    # the job checks the values without the secret ever being on a command line
    seen = f'test "$API_TOKEN" = "$(printf %s {SECRET[:7]} {SECRET[7:]})"'
    for name, script in (("ok", seen), ("bad", f"{seen}; exit 5"), ("slow", f"{seen} && sleep 5")):
        extra = ["--timeout", "0.3"] if name == "slow" else []
        proc = cw("run", "-n", name, "--env-file", str(env_file), *extra,
                  "--on-failure", "true", "--", "sh", "-c", script, env=debug)
        assert proc.returncode == {"ok": 0, "bad": 5, "slow": 124}[name], proc.stderr
        outputs += [proc.stdout, proc.stderr]
    assert history(cw, "ok")[0]["status"] == "succeeded"  # the job did see the value
    for args in (["status"], ["status", "--json"], ["history", "bad", "--json"], ["logs", "bad"],
                 ["status", "--format", "prometheus"]):
        proc = cw(*args, env=debug)
        outputs += [proc.stdout, proc.stderr]
    # a broken line names the line, never its content; the good lines are not echoed either
    env_file.write_text(f"API_TOKEN={SECRET}\nthis line holds {SECRET} and is broken\n")
    proc = cw("run", "-n", "ok", "--env-file", str(env_file), "--", "true", env=debug)
    assert proc.returncode == 125 and b"job.env:2" in proc.stderr
    outputs += [proc.stdout, proc.stderr]
    assert_no_secret(*outputs)
    assert_no_secret_in_files(home)  # ledger.db, its WAL, events.jsonl, captured output


# -- SQL: quotes, percent signs and Unicode are data -----------------------------------------

NAME_AT_LIMIT = ("o'brien\"; DROP TABLE runs;-- ✓ ünï %s %(x)s \\' " * 4)[:127] + "é"
KEY = "%Y'\";-- ✓ %% %m-%d ünï \\ %%s ?"
HOST = "h'o\"st;--ü%s$1"


@pytest.fixture(params=["sqlite", "postgres"])
def any_db(request, cw):
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        base_env = cw.env
        cw.env = lambda extra=None: {**base_env(extra), "CRONWRAP_DB": dsn}
        return dsn
    return None


def test_quotes_percent_and_unicode_work_end_to_end(cw, home, any_db):
    assert len(NAME_AT_LIMIT) == 128
    args = ["run", "-n", NAME_AT_LIMIT, "--host", HOST, "--schedule", "* * * * *", "--tz", "UTC",
            "--key", KEY]
    proc = cw(*args, "--", "sh", "-c", 'printf "%s|%s|%s" "$CRONWRAP_JOB" "$CRONWRAP_RUN_KEY" '
              '"$CRONWRAP_HOST"; exit 3')
    assert proc.returncode == 3, proc.stderr
    job, key, host = proc.stdout.decode().split("|")
    assert (job, host) == (NAME_AT_LIMIT, HOST)
    assert key.startswith("20") and "'\";-- ✓ % " in key and key.endswith(" ünï \\ %s ?")
    again = cw(*args, "--", "sh", "-c", "echo ran twice")  # the same slot: found by exact key
    assert again.returncode == 0 and again.stdout == b""
    (run,) = history(cw, NAME_AT_LIMIT)
    assert (run["job"], run["run_key"], run["host"], run["status"]) == (NAME_AT_LIMIT, key, HOST,
                                                                        "failed")
    (summary,) = cw.json("status", "--json")
    assert (summary["job"], summary["last_run"]["run_key"]) == (NAME_AT_LIMIT, key)
    assert cw("status", NAME_AT_LIMIT).returncode == 0
    assert NAME_AT_LIMIT.encode() in cw("logs", NAME_AT_LIMIT, "--last").stdout
    assert cw("unlock", NAME_AT_LIMIT).returncode == 0
    forced = cw(*args, "--force", "--", "true")
    assert forced.returncode == 0 and history(cw, NAME_AT_LIMIT)[0]["attempt"] == 2
    assert cw("prune", "--older-than", "0").returncode == 0


def test_sql_wildcards_in_names_match_only_themselves(cw, any_db):
    names = ["x_y", "x%y", "xzy", "x\\y", "x'y", "X_Y"]
    for i, name in enumerate(names):
        assert cw("run", "-n", name, "--", "sh", "-c", f"exit {i}").returncode == i
    jobs = {j["job"]: j for j in cw.json("status", "--json")}
    assert set(jobs) == set(names)
    for i, name in enumerate(names):
        assert jobs[name]["last_run"]["exit_code"] == i and sum(jobs[name]["counts"].values()) == 1
    (run,) = history(cw, "x%y")
    assert (run["job"], run["exit_code"]) == ("x%y", 1)
