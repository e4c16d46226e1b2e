"""cronwrap: make a crontab job trustworthy — no overlaps, hard timeouts, one run per slot."""

__version__ = "0.1.0"
