"""The bare psycopg wrapper: the floor for a firing on a PostgreSQL ledger (issue 24 §2).

Connects, claims the run with one ``INSERT … ON CONFLICT`` into a bare table, spawns the
command, records its end with one ``UPDATE``. Nothing else: no lock, no lease, no schema
check, no log. Run with bench/.venv's python (it has psycopg).

    python pg_floor_wrapper.py URL COMMAND [ARG…]
"""

import subprocess
import sys

import psycopg

url, command = sys.argv[1], sys.argv[2:]
conn = psycopg.connect(url, autocommit=True, prepare_threshold=None)
row = conn.execute("INSERT INTO floor_runs (job, run_key) VALUES ('x', md5(random()::text)) "
                   "ON CONFLICT DO NOTHING RETURNING id").fetchone()
code = subprocess.call(command)
conn.execute("UPDATE floor_runs SET finished_at = now(), exit_code = %s WHERE id = %s",
             (code, row[0]))
conn.close()
sys.exit(code)
