"""A PostgreSQL session for bench/run.py, which may run on a Python without psycopg.

Run with bench/.venv's python (it has psycopg, as cronwrap depends on it):

    python pgtool.py check URL    exit 0 and print the server version, or 1 and the reason
    python pgtool.py shell URL    read JSON lines {"sql": ..., "params": [...]} from stdin and
                                  answer one JSON line each: {"rows": [[...], ...]} or
                                  {"error": "..."}; autocommit, so CREATE/DROP DATABASE work
"""

from __future__ import annotations

import json
import sys

import psycopg


def main() -> int:
    mode, url = sys.argv[1], sys.argv[2]
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        print(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return 1
    if mode == "check":
        print(conn.execute("SHOW server_version").fetchone()[0])
        return 0
    for line in sys.stdin:
        request = json.loads(line)
        try:
            cur = conn.execute(request["sql"], request.get("params") or None)
            rows = [list(r) for r in cur.fetchall()] if cur.description else []
            answer = {"rows": rows}
        except psycopg.Error as exc:
            answer = {"error": str(exc).strip()}
        sys.stdout.write(json.dumps(answer, default=str) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
