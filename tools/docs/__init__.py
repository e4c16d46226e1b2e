"""The man pages, and README's reference, generated from the definitions ``--help`` uses.

Nothing the code defines is written twice: ``run``'s options come from ``spec.OPTIONS``, the
other commands and their parameters from ``commands.COMMANDS`` (as --help does), file locations
from paths.py, config.py and runlog.py, exit statuses from errors.py, the job's and the hooks'
variables from their registries (``jobenv.JOB_VARIABLES``, ``hooks.HOOK_VARIABLES``), statuses
and run-log events from theirs, lint codes from ``crontab.LINT_CODES``, metric names from
monitor.py. Only the prose lives here, in the prose_* modules.

    python -m tools.docs > man/cronwrap.1
    python -m tools.docs --toml > man/cronwrap.toml.5
    python -m tools.docs --update-readme      # the generated block of README.md

tests/unit/test_docs.py fails while any of them is stale. None of this ships in the wheel.
"""
