"""A job's options: the table of every option and the checked ``JobSpec`` (spec.py), GNU
durations (durations.py), the TOML file (config.py), and ``run``'s command line with the
environment and the file merged under it (runargs.py)."""
