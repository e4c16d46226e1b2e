"""CPU that redaction takes (cronwrap/redact/redactor.py), in process: per GiB of ordinary output, and
per MiB of adversarial input for each built-in rule (issue 20 §1).

    python3 bench/redact_cost.py                  # this checkout
    python3 bench/redact_cost.py --src DIR        # another checkout's cronwrap (before/after)
    python3 bench/redact_cost.py --only jwt url   # some cases

Each case runs in a child process with a CPU limit (--cap seconds, default 60): a case that
reaches it prints ">cap". The input goes through ``Redactor().stream()`` as the capture feeds
it (reads of up to 1 MiB; the "slow writer" cases in reads of 64 bytes), then ``flush``.
Nothing here is asserted; figures are CPU seconds (user + system) of the child.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

MIB = 1 << 20
LINE = (b"2026-12-03 01:30:00 INFO worker-3 processed batch 1523 of 9000 in 0.8s (rows=1523, "
        b"bytes=993211) status=ok path=/var/lib/app/x.csv user=app@example.com\n"
        b"2026-12-03 01:30:01 DEBUG GET https://api.example.com/v1/items?page=2 -> 200 in 31 ms\n"
        b"2026-12-03 01:30:01 WARN retrying: connection reset by peer (attempt 2 of 5)\n")


def rep(unit: bytes, size: int) -> bytes:
    return (unit * (size // len(unit) + 1))[:size]


def cases() -> dict[str, tuple[bytes, int]]:
    """name -> (input, read size): ordinary output (64 MiB), each rule's adversarial inputs of
    tests/unit/test_redact.py (1 MiB), and two slow writers (reads of 64 bytes)."""
    from tests.unit.test_redact import ADVERSARIAL

    found = {"ordinary": (rep(LINE, 64 * MIB), MIB), "ordinary-zeros": (bytes(64 * MIB), MIB)}
    found.update((name, (data, MIB)) for name, data in ADVERSARIAL.items())
    found["slow-writer-long-line"] = (b"a" * MIB, 64)
    found["slow-writer-pem"] = (b"-----BEGIN PRIVATE KEY-----\n" + rep(b"QUFB\n", MIB), 64)
    return found


def child(src: str, name: str) -> None:
    sys.path[:0] = [src, str(Path(__file__).resolve().parents[1])]
    from cronwrap.redact.redactor import Redactor

    data, read = cases()[name]
    stream = Redactor().stream()
    before = time.process_time()
    for at in range(0, len(data), read):
        stream.feed(data[at:at + read])
    stream.flush()
    print(f"{time.process_time() - before:.4f}")


def measure(src: str, name: str, cap: int) -> str:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cap, cap + 1))

    proc = subprocess.run([sys.executable, __file__, "--child", name, "--src", src],
                          capture_output=True, text=True,
                          preexec_fn=limit)
    if proc.returncode != 0:
        return ">cap" if proc.returncode in (-9, -24) else f"error {proc.stderr.strip()[-200:]}"
    return proc.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--cap", type=int, default=60)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.src, args.child)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    print(f"{'case':24} CPU seconds (ordinary: for 64 MiB, and per GiB; others: for 1 MiB)")
    for name in args.only or cases():
        cpu = measure(args.src, name, args.cap)
        extra = f"   = {float(cpu) * 16:.2f} s/GiB" \
            if name.startswith("ordinary") and cpu[0].isdigit() else ""
        print(f"{name:24} {cpu}{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
