"""What a real ``cronwrap run`` firing imports: the modules loaded by the time it leaves (its
forked helpers, the keeper, too), read in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_PROBE = """\
import os, sys
real_exit = os._exit
def leave(status):
    with open({out!r}, "a") as f:
        f.write(" ".join(sorted(sys.modules)) + "\\n")
    real_exit(status)
os._exit = leave
from cronwrap.cli import main
main({argv!r})
"""


def modules_of_a_firing(tmp_path: Path, argv: list[str], *, bare: bool = False,
                        env: dict[str, str] | None = None) -> set[str]:
    """Every module any process of the firing ``cronwrap ARGV`` had loaded when it left.
    ``bare``: in an interpreter started without ``site`` (``-S``: no .pth file, no
    sitecustomize, no editable install's finder), cronwrap and its libraries found through
    PYTHONPATH, so that what is loaded is what cronwrap loads (``bare_interpreter``)."""
    out = tmp_path / "modules"
    out.unlink(missing_ok=True)  # a second firing in the same home: what it loaded only
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
    environ["CRONWRAP_HOME"] = str(tmp_path / "home")
    environ.update(env or {})
    subprocess.run(_python(bare, environ) + ["-c", _PROBE.format(out=str(out), argv=argv)],
                   env=environ, capture_output=True, timeout=60)
    return set(out.read_text().split())


def bare_interpreter() -> set[str]:
    """The modules an interpreter started as ``modules_of_a_firing(bare=True)`` starts has
    loaded before it runs a line."""
    environ = dict(os.environ)
    done = subprocess.run(_python(True, environ) + ["-c", "import sys; print(*sys.modules)"],
                          env=environ, capture_output=True, text=True, timeout=60, check=True)
    return set(done.stdout.split())


def _python(bare: bool, environ: dict[str, str]) -> list[str]:
    if not bare:
        return [sys.executable]
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])
    return [sys.executable, "-S"]
