"""A bounded HTTP load generator for the ``serve`` row of bench/run.py (issue 24 §4).

    python load.py URL --clients 8 --seconds 10 [--header 'Authorization: Bearer T']
                   [--new-connections] [--identity] [--processes P]

CLIENTS closed-loop clients (each has one request in flight, never more: the load is bounded by
the client count, as a crowd of browsers or a few Prometheus servers are), spread over P worker
processes (default: min(CLIENTS, 4)) of threads, so that the clients' own CPU is not one GIL.
Each client keeps its connection alive between requests, as a browser and Prometheus do (or,
with ``--new-connections``, opens a new one per request: a reload without keep-alive), and
sends ``Accept-Encoding: gzip`` as both do (``--identity``: none). Every worker starts at one
common instant and stops at SECONDS after it; a request still in flight then is not counted.
A request that fails or answers anything but 200 counts as an error (the first one's reason is
printed). The body is read whole but not decompressed (a client's own cost, not the server's).

Prints one JSON object: requests, errors, seconds, rps, p50/p90/p99/max ms, bytes per answer.
Standard library only (the bench's own Python).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import statistics
import sys
import threading
import time
from urllib.parse import urlsplit


def client(url: str, headers: dict[str, str], start: float, end: float, keep_alive: bool,
           source: str | None, out: list[tuple[float, int]], errors: list[str]) -> None:
    """One client: GET ``url`` in a loop from ``start`` to ``end`` (time.time()) from the
    address ``source`` (None: any); appends (latency ms, body bytes) per answer, or a reason
    per failure."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection | None = None
    time.sleep(max(0.0, start - time.time()))
    while True:
        began = time.perf_counter()
        if time.time() >= end:
            break
        try:
            if conn is None:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30,
                                                  source_address=source and (source, 0))
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
            if not keep_alive or response.will_close:
                conn.close()
                conn = None
        except Exception as exc:  # counted, and the connection started again
            errors.append(f"{type(exc).__name__}: {exc}")
            if conn is not None:
                conn.close()
            conn = None
            continue
        if time.time() <= end:
            out.append(((time.perf_counter() - began) * 1000, len(body)))
    if conn is not None:
        conn.close()


def worker(url: str, headers: dict[str, str], sources: list[str | None], start: float, end: float,
           keep_alive: bool, queue: multiprocessing.Queue) -> None:
    out: list[tuple[float, int]] = []
    errors: list[str] = []
    threads = [threading.Thread(target=client, args=(url, headers, start, end, keep_alive,
                                                     source, out, errors))
               for source in sources]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put((out, errors))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def load(url: str, headers: dict[str, str], clients: int, seconds: float, keep_alive: bool = True,
         processes: int | None = None) -> dict[str, object]:
    processes = max(1, min(clients, processes or 4))
    start = time.time() + 0.5 + 0.05 * processes  # every worker started and waiting by then
    end = start + seconds
    queue: multiprocessing.Queue = multiprocessing.Queue()
    # Each client from an address of its own when the server is on 127.0.0.1 (all of 127/8 is
    # loopback): the server's guard counts connections per client address, and 32 browsers or
    # scrapers are 32 addresses, not one.
    own = urlsplit(url).hostname == "127.0.0.1"
    sources = [f"127.0.{1 + i // 250}.{1 + i % 250}" if own else None for i in range(clients)]
    workers = [multiprocessing.Process(target=worker, args=(url, headers, sources[i::processes],
                                                            start, end, keep_alive, queue))
               for i in range(processes)]
    for w in workers:
        w.start()
    results = [queue.get() for _ in workers]
    for w in workers:
        w.join()
    latencies = [ms for out, _ in results for ms, _ in out]
    sizes = [size for out, _ in results for _, size in out]
    errors = [e for _, errs in results for e in errs]
    figures: dict[str, object] = {"clients": clients, "seconds": seconds,
                                  "keep_alive": keep_alive, "requests": len(latencies),
                                  "errors": len(errors), "first_error": errors[0] if errors else None,
                                  "rps": len(latencies) / seconds}
    if latencies:
        figures.update(p50_ms=pct(latencies, 50), p90_ms=pct(latencies, 90),
                       p99_ms=pct(latencies, 99), max_ms=max(latencies),
                       bytes=statistics.median(sizes))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--header", action="append", default=[], help="NAME: VALUE")
    parser.add_argument("--new-connections", action="store_true")
    parser.add_argument("--identity", action="store_true", help="no Accept-Encoding: gzip")
    args = parser.parse_args()
    headers = dict(h.split(": ", 1) for h in args.header)
    if not args.identity:
        headers.setdefault("Accept-Encoding", "gzip")
    figures = load(args.url, headers, args.clients, args.seconds, not args.new_connections,
                   args.processes)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
