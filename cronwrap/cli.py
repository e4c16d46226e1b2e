"""The command line: lean parsers for ``run`` and the read commands, typer for the rest.

``run`` fires on every host every minute, so it must not pay for typer's parameter machinery
(~130 ms measured, ARCHITECTURE.md): ``main()`` hands ``run`` to runargs.py, which parses it
from the option table in spec.py. The read commands an operator runs most (``status``,
``history``, ``logs``, ``explain``) are run from their declaration in commands.py the same
way; the administrative commands, and whatever the lean parser does not understand, go to
the typer app built from that declaration (admin.py). This is the one place where an
exception becomes an exit status.
"""

from __future__ import annotations

import gc
import os
import sys

from cronwrap import __version__
from cronwrap.errors import EXIT_CRONWRAP, CronwrapError
from cronwrap.stdio import fit_locale, warn


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    open_stdio()
    fit_locale()
    sys.unraisablehook = unraisable
    try:
        if args[:1] == ["run"]:
            return run_command(args[1:])
        if args[:1] in (["--version"], ["-V"]):
            print(f"cronwrap {__version__}")
            return 0
        from cronwrap.commands import lean_command  # off the run path (ARCHITECTURE.md §9)

        done = lean_command(args)
        if done is not None:
            return done
        from cronwrap.admin import app

        return app(args)
    except CronwrapError as exc:
        return fail(exc)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line for the person, the traceback only on request
        if os.environ.get("CRONWRAP_DEBUG"):
            import traceback

            traceback.print_exc()
        warn(f"internal error: {type(exc).__name__}: {exc} (set CRONWRAP_DEBUG=1 for the "
             "traceback)")
        return EXIT_CRONWRAP


def run_command(args: list[str]) -> int:
    # No garbage collection while the run path is loaded and the firing is set up: importing
    # it allocates enough to set off ~20 collections that find next to nothing (modules,
    # classes and functions live to the exit), ~3 ms of CPU a firing (the A/B figures are in
    # bench/results.md, issue 24). What is loaded then is frozen out of later collections,
    # and collection resumes before the firing's own work (runner.run), which may last for
    # days beside a long job: after 10,000 new objects rather than 700, so that a firing of
    # a short job (~1,500) sets off none (two were ~0.2 ms).
    gc.disable()
    try:
        from cronwrap.options.runargs import parse_run_args, with_config
        from cronwrap.options.spec import build_spec

        given, command = parse_run_args(args)
        if given is None:
            return 0  # --help was printed
        values, labels = with_config(given, command)
        spec = build_spec(command, values, os.environ, lambda: os.uname().nodename, labels,
                          warn=warn)
        if spec.dry_run:
            from cronwrap.run import dryrun
        else:
            from cronwrap.run import runner
    finally:
        gc.freeze()
        gc.set_threshold(10_000)
        gc.enable()
    environ = dict(os.environ)
    status = dryrun.run(spec, environ) if spec.dry_run else runner.run(spec, environ)
    # Leave without interpreter teardown: nothing is left to clean, and closing the SQLite
    # connection would checkpoint the WAL (two fsyncs, ~15 ms) on every cron firing; the next
    # connection, or SQLite's auto-checkpoint, takes care of the WAL. Nothing of the run's
    # is buffered in sys.stdout/stderr (stdio.py writes unbuffered): the job's status stands
    # whatever a flush would meet (a full disk, a closed pipe).
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def unraisable(info: sys.UnraisableHookArgs) -> None:
    """An exception Python cannot raise (in a finalizer, or "Signal N ignored due to race
    condition" when a signal meets a handler being reset): one line, never a traceback."""
    if os.environ.get("CRONWRAP_DEBUG"):
        sys.__unraisablehook__(info)
        return
    warn(f"ignored: {type(info.exc_value).__name__}: {info.exc_value}")


def fail(exc: CronwrapError) -> int:
    warn(str(exc))
    return exc.exit_code


def open_stdio() -> None:
    """Descriptors 0-2 closed by the caller (``2>&-``) are opened on /dev/null: otherwise the
    first file cronwrap opens (a lock file, the ledger) would become its stdout, and the job's
    output would be written into it. The job then sees what it would have written to fail."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="backslashreplace",
                                    closefd=False))
