"""A root without Python to install the Debian package into (tests/integration/test_package.py,
bench/run.py's ``package`` row): what a Debian host always has, copied from this host.

- libc6, all its files, and its stanza in the root's dpkg database, so that dpkg checks the
  package's ``Depends: libc6 (>= …)`` for real;
- dash as /bin/sh (the maintainer scripts, ``sh -c``) and the few coreutils a job runs;
- man-db's ``man`` with its libraries and /etc/manpath.config, for ``man -w``.

Why not debootstrap: it fetches ~120 MB of packages a run, minutes on a 2-core machine, and
fails without the network. ``dpkg --root`` runs the maintainer scripts chrooted into the root,
as it does for a chroot or a container's image; commands run in ``chroot`` inside a private
mount namespace with /proc and /dev mounted (cronwrap reads /proc, as on any host), undone
when it exits. Needs root, dpkg, chroot and unshare.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# Host programs copied into the root with their shared libraries: the shell of the
# maintainer scripts and of `sh -c`, what the jobs and the checks below run, and man-db.
PROGRAMS = ["/bin/sh", "/bin/dash", "/usr/bin/true", "/usr/bin/false", "/usr/bin/ls",
            "/usr/bin/cat", "/usr/bin/id", "/usr/bin/env", "/usr/bin/man"]


def copy_in(root: Path, path: str) -> None:
    """A host file at the same place in root (a symlink stays one), parents made through the
    root's own merged-/usr links."""
    source = Path(path)
    target = root / path.lstrip("/")
    if target.exists() or target.is_symlink():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        target.symlink_to(os.readlink(source))
        copy_in(root, str(source.parent.resolve() / os.readlink(source))
                if not os.path.isabs(os.readlink(source)) else os.readlink(source))
    elif source.is_dir():
        target.mkdir(exist_ok=True)
    elif source.is_file():
        shutil.copy2(source, target)


def libraries(program: str) -> list[str]:
    """The shared libraries ``program`` loads, as this host's ldd finds them."""
    listed = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
    found = []
    for line in listed.splitlines():
        parts = line.split()
        for part in parts:
            if part.startswith("/"):
                found.append(part)
    return found


def make_root(root: Path) -> None:
    """The root, in an empty directory: merged /usr as Debian 12 has it."""
    for link, to in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"),
                     ("sbin", "usr/sbin")):
        (root / to).mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(to)
    for folder in ("etc", "tmp", "proc", "dev", "run/lock", "var/lib/dpkg/info",
                   "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "root", "var/cache/man",
                   "var/log"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    # libc6, whole and recorded: the package's Depends is checked against it
    files = subprocess.run(["dpkg", "-L", "libc6"], capture_output=True, text=True,
                           check=True).stdout.split()
    for path in files:
        if path != "/." and os.path.lexists(path):
            copy_in(root, path)
    stanzas = Path("/var/lib/dpkg/status").read_text().split("\n\n")
    (libc6,) = [s for s in stanzas if s.startswith("Package: libc6\n")
                and "Status: install ok installed" in s]
    (root / "var/lib/dpkg/status").write_text(libc6.strip() + "\n\n")
    (root / "var/lib/dpkg/available").write_text("")
    for program in PROGRAMS:
        copy_in(root, program)
        for library in libraries(program):
            copy_in(root, library)
    for name in ("/etc/manpath.config", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
                 "/etc/hostname"):
        if os.path.exists(name):
            copy_in(root, name)
    for found in Path("/usr/lib/man-db").glob("*"):  # man's own libraries and helpers
        copy_in(root, str(found))
        if ".so" in found.name:
            for library in libraries(str(found)):
                copy_in(root, library)
    (root / "usr/share/man").mkdir(parents=True, exist_ok=True)


def in_root(root: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """argv chrooted into root, in a private mount namespace with /proc and /dev mounted."""
    script = ('mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && '
              'exec chroot "$0" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"')
    return subprocess.run(["unshare", "--mount", "--fork", "--propagation", "private",
                           "sh", "-c", script, str(root), *argv],
                          capture_output=True, text=True, timeout=timeout)


def dpkg(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "LANG": "C.UTF-8"}
    return subprocess.run(["dpkg", f"--root={root}", *args], capture_output=True, text=True,
                          env=env, timeout=300)
