"""The self-contained build and the Debian package (issue 25 §1), built once for the session by
the documented command (``python3 -m tools.build``), then:

- every command of the build run on this host, as a host without Python would run it (no
  virtualenv on PATH): the lazily imported modules, psycopg with its libpq, waitress, the
  ledger's SQL and the JSON schemas must all be inside;
- the package installed with ``dpkg --root`` into a root that has no Python, run there, and
  removed.

The root and why it is made rather than debootstrapped: tools/cleanroot.py (libc6 recorded in
its dpkg database, dash, a few coreutils, man-db; no python3).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.needs import missing
from tools.cleanroot import dpkg, in_root, make_root

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "build" / "package"


class Built:
    def __init__(self, bundle: Path, deb: Path, seconds: float) -> None:
        self.bundle, self.deb, self.seconds = bundle, deb, seconds


@pytest.fixture(scope="session")
def built() -> Built:
    """One build for every test here (~1-2 min on 2 cores; the PyInstaller venv under build/
    is kept while pyproject.toml and constraints.txt are unchanged). gzip rather than xz for
    the package's data: the same files, a third of the time. tests/run.sh keeps a file's tests
    in one xdist worker (--dist loadfile): a session fixture is per worker, and two builds in
    build/package at once break each other."""
    for tool in ("dpkg-deb", "dpkg", "chroot", "unshare"):
        if shutil.which(tool) is None:
            missing(f"{tool} is not installed", "package tests")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "tools.build", "--out", str(OUT),
                    "--compression", "gzip"], cwd=REPO, check=True, timeout=1200)
    seconds = time.monotonic() - started
    (deb,) = OUT.glob("cronwrap_*.deb")
    return Built(OUT / "dist" / "cronwrap", deb, seconds)


def host_env(home: Path) -> dict[str, str]:
    """A host's environment without the test virtualenv: the build must carry its own."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "CRONWRAP_HOME": str(home / "cw"),
            "LANG": "C.UTF-8"}


def test_every_command_of_the_self_contained_build(built: Built, tmp_path: Path,
                                                   pg_dsn: str) -> None:
    exe = str(built.bundle / "cronwrap")
    env = host_env(tmp_path)

    exercised: set[str] = set()

    def cw(*args: str, code: int = 0, extra: dict[str, str] | None = None) -> str:
        exercised.add(" ".join(args[:2]) if args[0] == "db" else args[0])
        done = subprocess.run([exe, *args], env={**env, **(extra or {})}, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
        return done.stdout

    assert cw("--version").startswith("cronwrap ")
    assert "Commands" in cw("--help")
    # the embedded ledger: its schema is the package's .sql files
    cw("run", "-n", "t", "--", "sh", "-c", "echo out-of-t")
    cw("run", "-n", "fails", "--", "false", code=1)
    assert "t " in cw("status")
    rows = json.loads(cw("status", "--json"))
    assert {row["job"] for row in rows} == {"t", "fails"}
    assert "CRONWRAP CRITICAL" in cw("status", "--check", code=2)
    assert "succeeded" in cw("history", "t")
    assert "out-of-t" in cw("logs", "t")
    cw("pause", "t", "--until", "2099-01-01T00:00:00Z", "--reason", "test")
    cw("resume", "t")
    assert json.loads(cw("explain", "*/5 * * * *", "--tz", "UTC", "--json"))["next"]
    crontab = tmp_path / "crontab"
    crontab.write_text("*/5 * * * * /usr/bin/true\n")
    assert "cronwrap run" in cw("wrap", str(crontab))
    cw("lint", str(crontab))
    cw("prune", "--older-than", "30d")
    cw("unlock", "t")
    for shell in ("bash", "zsh", "fish"):
        assert "cronwrap" in cw("completion", shell)
    cw("watch", "--once", "--dry-run")
    # step, as a job calls it (its run's ledger from the environment the wrapper gives it)
    cw("run", "-n", "stepper", "--", exe, "step", "first", "--", "sh", "-c", "echo in-step")
    exercised.add("step")
    assert "first" in cw("history", "stepper") and "in-step" in cw("logs", "stepper")
    cw("run", "-n", "sched", "--schedule", "*/5 * * * *", "--", "true")
    assert json.loads(cw("why", "sched", "--json"))["format"] == 1
    # the JSON schemas are package data, read by the installed package
    schemas = built.bundle / "_internal" / "cronwrap" / "schemas"
    assert sorted(p.name for p in schemas.glob("*.json")), "schemas/*.json not bundled"

    # PostgreSQL: psycopg and psycopg-binary's libpq are inside
    pg = {"CRONWRAP_DB": pg_dsn}
    cw("db", "init", extra=pg)
    cw("db", "upgrade", extra=pg)
    cw("run", "-n", "pg", "--", "true", extra=pg)
    assert "pg " in cw("status", extra=pg)

    # serve: waitress, the pages, the API
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    token.chmod(0o600)
    port = free_port()
    server = subprocess.Popen([exe, "serve", "--listen", f"127.0.0.1:{port}", "--token-file",
                               str(token)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    exercised.add("serve")
    try:
        for path in ("/", "/api/status", "/metrics", "/jobs/t", "/healthz"):
            body = fetch(f"http://127.0.0.1:{port}{path}", "s3cret-token")
            assert body, path
    finally:
        server.terminate()
        server.wait(timeout=30)
    # a command added later is run here too before this passes: its modules must be inside
    from tools.docs.facts import all_commands

    assert {name for name, _ in all_commands()} <= exercised, \
        {name for name, _ in all_commands()} - exercised


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str, token: str) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return str(answer.read().decode())
        except (ConnectionError, urllib.error.URLError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# -- the Debian package in a root without Python ----------------------------------------------

def test_the_package_installs_runs_and_removes_in_a_root_without_python(built: Built,
                                                                         tmp_path: Path) -> None:
    if os.geteuid() != 0:
        missing("dpkg --root and chroot need root", "package tests")
    root = tmp_path / "root"
    make_root(root)
    assert not list(root.rglob("python3*")), "the clean root must have no Python"
    before = {p.relative_to(root) for p in root.rglob("*")}

    installed = dpkg(root, "-i", str(built.deb))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    listed = subprocess.run(["dpkg-deb", "-c", str(built.deb)], capture_output=True, text=True,
                            check=True).stdout
    assert "./usr/share/man/man1/cronwrap.1.gz" in listed
    for path in ("usr/bin/cronwrap", "usr/share/man/man5/cronwrap.toml.5.gz",
                 "usr/share/bash-completion/completions/cronwrap",
                 "usr/share/fish/vendor_completions.d/cronwrap.fish",
                 "usr/share/zsh/vendor-completions/_cronwrap",
                 "usr/lib/systemd/system/cronwrap-serve.service",
                 "usr/lib/systemd/system/cronwrap-watch.service",
                 "usr/share/doc/cronwrap/examples/config.toml"):
        assert (root / path).exists(), path

    nopython = in_root(root, "sh", "-c", "command -v python3 python; echo status=$?")
    assert "python" not in nopython.stdout.replace("status=", ""), nopython
    ran = in_root(root, "cronwrap", "run", "-n", "t", "--", "true")
    assert ran.returncode == 0, ran.stderr
    status = in_root(root, "cronwrap", "status")
    assert status.returncode == 0 and " t " in status.stdout and "succeeded" in status.stdout, \
        status
    for page, where in (("cronwrap", "/usr/share/man/man1/cronwrap.1.gz"),
                        ("cronwrap.toml", "/usr/share/man/man5/cronwrap.toml.5.gz")):
        found = in_root(root, "man", "-w", page)
        assert found.returncode == 0 and found.stdout.strip() == where, found
    # the example config is one cronwrap reads without complaint
    example = in_root(root, "env", "CRONWRAP_CONFIG=/usr/share/doc/cronwrap/examples/config.toml",
                      "cronwrap", "run", "-n", "settle", "--dry-run", "--", "true")
    assert example.returncode == 0, example.stderr

    removed = dpkg(root, "-r", "cronwrap")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    # nothing of the package is left (there are no conffiles); what cronwrap itself wrote
    # (the ledger in /var/lib/cronwrap) is data, kept as Debian keeps data
    ours = {Path(line.split()[-1].removeprefix("./")) for line in listed.splitlines()
            if not line.startswith("d")}
    ours |= {Path(line.split()[-3].removeprefix("./")) for line in listed.splitlines()
             if line.startswith("l")}
    left = {p for p in ours if (root / p).exists() or (root / p).is_symlink()}
    assert not left, sorted(left)[:10]
    after = {p.relative_to(root) for p in root.rglob("*")}
    strays = {p for p in after - before
              if not str(p).startswith(("var/lib/cronwrap", "var/log/cronwrap", "run/lock",
                                        "var/lib/dpkg", "var/cache/man", "var/log/dpkg"))}
    assert not strays, sorted(strays)[:10]
    # as for any package with a postrm: "deinstall ok config-files" until purged, then gone
    state = dpkg(root, "-s", "cronwrap")
    assert "Status: deinstall ok config-files" in state.stdout, state.stdout
    purged = dpkg(root, "--purge", "cronwrap")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert dpkg(root, "-s", "cronwrap").returncode != 0


def test_the_systemd_units_are_valid_and_carry_no_secret(built: Built) -> None:
    units = REPO / "packaging" / "systemd"
    for unit in units.glob("*.service"):
        text = unit.read_text()
        start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
        assert "postgresql://" not in start and "token=" not in start and "@" not in start
    if shutil.which("systemd-analyze") is None:
        missing("systemd-analyze is not installed (Debian's systemd)", "package tests")
    # --man=no: Documentation= names the man pages the package installs, not this host
    # verify needs ExecStart's executable: the build's, where the package puts it
    root_units = []
    for unit in units.glob("*.service"):
        copy = OUT / "units" / unit.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(unit.read_text().replace("/usr/bin/cronwrap",
                                                 str(built.bundle / "cronwrap")))
        root_units.append(str(copy))
    checked = subprocess.run(["systemd-analyze", "verify", "--man=no", *root_units], capture_output=True,
                             text=True, timeout=120)
    problems = [line for line in checked.stderr.splitlines() if "cronwrap" in line]
    assert not problems, checked.stderr
