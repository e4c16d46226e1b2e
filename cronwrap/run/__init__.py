"""One firing of ``cronwrap run``: the invocation and its collaborators (invocation.py), the
runner (runner.py), the pure planners (firing.py, catchup.py, policy.py, retry.py, jobenv.py),
an attempt at a claimed slot (attempt.py) with its lease (lease.py), its files and run log
(runlog.py), its hooks and pings (hooks.py), the outbox (outbox.py) and ``--dry-run``
(dryrun.py)."""
