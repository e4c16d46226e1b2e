"""Secrets out of a job's output and out of URLs (redactor.py), the patterns refused because
they can backtrack exponentially (backtrack.py), and the CPU budget that ends a runaway one
(deadline.py)."""
