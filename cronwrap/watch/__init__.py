"""``cronwrap watch``: telling people when a job silently does not run, fails, hangs or warns."""
