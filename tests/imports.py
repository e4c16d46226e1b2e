"""What a real ``cronwrap run`` firing imports: the modules loaded by the time it leaves (its
forked helpers, the keeper, too), read in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def modules_of_a_firing(tmp_path: Path, argv: list[str]) -> set[str]:
    """Every module any process of the firing ``cronwrap ARGV`` had loaded when it left."""
    out = tmp_path / "modules"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWRAP_")}
    env["CRONWRAP_HOME"] = str(tmp_path / "home")
    subprocess.run([sys.executable, "-c", _PROBE.format(out=str(out), argv=argv)], env=env,
                   capture_output=True, timeout=60)
    return set(out.read_text().split())
