"""CPU that redaction takes (cronwrap/redact.py), in process: per GiB of ordinary output, and
per MiB of adversarial input for each built-in rule (issue 20 §1).

    python3 bench/redact_cost.py                  # this checkout
    python3 bench/redact_cost.py --src DIR        # another checkout's cronwrap (before/after)
    python3 bench/redact_cost.py --only jwt url   # some cases
    python3 bench/redact_cost.py --size 262144    # bytes per adversarial case (default 1 MiB)

Each case runs in a child process with a CPU limit (--cap seconds, default 60): a case that
reaches it prints ">cap". The input goes through ``Redactor().stream()`` as the capture feeds
it (reads of up to 1 MiB; the "slow writer" cases in reads of 64 bytes), then ``flush``.
Nothing here is asserted; figures are CPU seconds (user + system) of the child.
"""

from __future__ import annotations

import argparse
import os
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


# name -> (input of about `size` bytes, read size)
CASES = {
    "ordinary": lambda n: (rep(LINE, n), MIB),
    "ordinary-zeros": lambda n: (bytes(n), MIB),
    "url": lambda n: (rep(b"://a:", n), MIB),
    "url-lines": lambda n: (rep(b"x://a:" + b"b" * 200 + b"\n", n), MIB),
    "url-at": lambda n: (rep(b"://a:b@", n), MIB),
    "keyword": lambda n: (rep(b"password=", n), MIB),
    "keyword-quote": lambda n: (rep(b'password: "', n), MIB),
    "keyword-bare": lambda n: (rep(b"passw", n), MIB),
    "keyword-spaces": lambda n: (rep(b"password" + b" " * 60, n), MIB),
    "authorization": lambda n: (rep(b"authorization: bearer ", n), MIB),
    "bearer": lambda n: (rep(b"bearer ", n), MIB),
    "aws": lambda n: (rep(b"AKIA", n), MIB),
    "github": lambda n: (rep(b"ghp_" + b"a" * 35 + b"_", n), MIB),
    "github-pat": lambda n: (rep(b"github_pat_", n), MIB),
    "gitlab": lambda n: (rep(b"glpat-", n), MIB),
    "slack": lambda n: (rep(b"xoxb-", n), MIB),
    "slack-app": lambda n: (rep(b"xapp-", n), MIB),
    "jwt": lambda n: (rep(b"eyJ", n), MIB),
    "jwt-dots": lambda n: (rep(b"eyJaaaaa.", n), MIB),
    "pem-begins": lambda n: (rep(b"-----BEGIN PRIVATE KEY-----\n", n), MIB),
    "pem-begin-one-line": lambda n: (rep(b"-----BEGIN PRIVATE KEY-----", n), MIB),
    "pem-near-miss": lambda n: (rep(b"-----BEGIN " + b"A" * 29 + b" ", n), MIB),
    "dashes": lambda n: (b"-" * n, MIB),
    "newlines": lambda n: (b"\n" * n, MIB),
    "mysql": lambda n: (rep(b"mysql ", n), MIB),
    "curl": lambda n: (rep(b"curl ", n), MIB),
    "curl-u": lambda n: (rep(b"curl -u ", n), MIB),
    "password-option": lambda n: (rep(b"--password ", n), MIB),
    "slow-writer-long-line": lambda n: (b"a" * n, 64),
    "slow-writer-pem": lambda n: (b"-----BEGIN PRIVATE KEY-----\n" + rep(b"QUFB\n", n), 64),
}


def child(src: str, name: str, size: int) -> None:
    sys.path.insert(0, src)
    from cronwrap.redact import Redactor

    data, read = CASES[name](size)
    stream = Redactor().stream()
    before = time.process_time()
    for at in range(0, len(data), read):
        stream.feed(data[at:at + read])
    stream.flush()
    print(f"{time.process_time() - before:.4f}")


def measure(src: str, name: str, size: int, cap: int) -> str:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cap, cap + 1))

    proc = subprocess.run([sys.executable, __file__, "--child", name, "--src", src,
                           "--size", str(size)], capture_output=True, text=True,
                          preexec_fn=limit)
    if proc.returncode != 0:
        return ">cap" if proc.returncode in (-9, -24) else f"error {proc.stderr.strip()[-200:]}"
    return proc.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--size", type=int, default=MIB)
    parser.add_argument("--cap", type=int, default=60)
    parser.add_argument("--only", nargs="*", choices=list(CASES))
    parser.add_argument("--child", choices=list(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.src, args.child, args.size)
        return 0
    print(f"{'case':24} CPU s for {args.size} bytes   (ordinary: also s/GiB)")
    for name in args.only or CASES:
        size = 64 * MIB if name.startswith("ordinary") else args.size
        cpu = measure(args.src, name, size, args.cap)
        extra = f"   = {float(cpu) * (1 << 30) / size:.2f} s/GiB" \
            if name.startswith("ordinary") and cpu[0].isdigit() else ""
        print(f"{name:24} {cpu}{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
