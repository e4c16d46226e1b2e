"""The ledger: its contract (base.py), the claim protocol over SQL (sqlcore.py), and the two
back ends (sqlite.py, postgres.py). url.py picks one by URL (``open_ledger``); psycopg is
imported only for PostgreSQL."""
