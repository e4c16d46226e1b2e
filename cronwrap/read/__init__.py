"""What reads the ledger and the logs: the read commands' bodies (reads.py), ``status`` and
``history`` (report.py, picture.py), ``--check`` and ``--prometheus`` (monitoring.py), ``logs``
(logs.py), terminal tables (table.py), ``serve`` (serve.py, pages.py, webserver.py), and
``prune`` (prune.py)."""
