"""The stdlib-only reference wrapper: the floor for any Python wrapper.

fcntl.flock on a lock file + one sqlite3 row inserted + subprocess of the command + the row
updated. Usage: python floor_wrapper.py DIR COMMAND [ARG…]
"""

import fcntl
import os
import sqlite3
import subprocess
import sys
import time

directory, command = sys.argv[1], sys.argv[2:]
lock = os.open(os.path.join(directory, "floor.lock"), os.O_RDWR | os.O_CREAT, 0o600)
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(0)
db = sqlite3.connect(os.path.join(directory, "floor.db"), isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, job TEXT, started REAL, "
           "finished REAL, exit_code INTEGER)")
row = db.execute("INSERT INTO runs (job, started) VALUES ('x', ?) RETURNING id", (time.time(),)).fetchone()
code = subprocess.call(command)
db.execute("UPDATE runs SET finished = ?, exit_code = ? WHERE id = ?", (time.time(), code, row[0]))
sys.exit(code)
