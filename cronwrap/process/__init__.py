"""Processes: identity, trees, signals, spawning and reaping in one place (procs.py); the keeper
that owns a job's life (keeper.py); the wrapper's side of supervision (supervise.py); the local
overlap lock (locks.py)."""
