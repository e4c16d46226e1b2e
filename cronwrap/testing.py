"""An in-memory ``World`` for testing code around cronwrap's runner (ARCHITECTURE.md §5), as
procrastinate ships ``InMemoryConnector``: the real runner, policy and ledger code run
unchanged, while nothing is spawned and nothing sleeps.

``MemoryWorld(outcomes)`` gives a fixed clock you move (``now``), a sleep that records
(``sleeps``), hooks that record (``hooks``: command and ``CRONWRAP_ALERT``), a supervisor that
ends each job as the next of ``outcomes`` says (an exit code, or ``(code, {Outcome field:
value})``) after writing ``exit CODE`` to the job's stderr, the environments the jobs got
(``envs``), and the in-memory SQLite ledger, kept across firings (``ledger``)::

    world = MemoryWorld([75, 0])
    assert world.fire(home, "--retries", "1", "--retry-on", "75") == 0
    assert [r.status for r in world.runs()] == ["succeeded"]

Not imported by cronwrap itself.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from cronwrap.ledger.sqlite import SqliteLedger
from cronwrap.model import Run
from cronwrap.options.spec import build_spec
from cronwrap.process.keeper import JobProcess, Outcome, SuperviseSpec
from cronwrap.run import runner
from cronwrap.run.hooks import HookResult
from cronwrap.run.invocation import LocalLock, World
from cronwrap.stdio import Passthrough

T0 = datetime(2026, 10, 28, 10, 0, 5, tzinfo=timezone.utc).timestamp()  # 5 s into a minute
Scripted = int | tuple[int, dict[str, Any]]


class MemoryLedger(SqliteLedger):
    """The in-memory SQLite ledger, kept across the firings of one world (``run()`` closes
    the ledger it opened: here that is a no-op)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(None, clock=clock)

    def close(self) -> None:
        pass


class ScriptedSupervisor:
    """Ends its job as the world's next scripted outcome says."""

    def __init__(self, world: MemoryWorld, spec: SuperviseSpec,
                 on_output: Callable[[int, bytes], None],
                 on_spawn: Callable[[JobProcess], None] | None,
                 passthrough: Passthrough | None) -> None:
        self.world, self.spec, self.on_output = world, spec, on_output

    def run(self) -> Outcome:
        self.world.envs.append(self.spec.env)
        code, extra = self.world.outcomes.pop(0)
        self.on_output(2, f"exit {code}\n".encode())
        return Outcome(exit_code=code, signal=None, timed_out=False, killed=False,
                       spawn_error=None, duration=0.5, **extra)

    def request_stop(self, reason: str) -> None:
        pass


class MemoryWorld:
    """A World whose clock, sleep, supervisor and hooks are in memory (see the module)."""

    def __init__(self, outcomes: list[Scripted], now: float = T0, seed: int = 7) -> None:
        self.now = now
        self.outcomes = [o if isinstance(o, tuple) else (o, {}) for o in outcomes]
        self.sleeps: list[float] = []
        self.hooks: list[tuple[str, str | None]] = []
        self.envs: list[dict[str, str]] = []
        self.notes: list[str] = []  # what build_spec would have printed
        self.ledger = MemoryLedger(lambda: self.now)
        self.seed = seed

    def world(self) -> World:
        def run_hook(command: str, env: dict[str, str], timeout: float) -> HookResult:
            self.hooks.append((command, env.get("CRONWRAP_ALERT")))
            return HookResult(0, False, 0.0, "")

        def supervisor(spec: SuperviseSpec, on_output: Callable[[int, bytes], None],
                       on_spawn: Callable[[JobProcess], None] | None,
                       passthrough: Passthrough | None) -> ScriptedSupervisor:
            return ScriptedSupervisor(self, spec, on_output, on_spawn, passthrough)

        return World(
            clock=lambda: self.now, monotonic=lambda: self.now, sleep=self.sleeps.append,
            rng=random.Random(self.seed), open_ledger=lambda inv: self.ledger,
            take_lock=lambda inv: LocalLock(), run_hook=run_hook, supervisor=supervisor)

    def fire(self, home: Path, *options: str, job: str = "j",
             command: tuple[str, ...] = ("job",)) -> int:
        """``cronwrap run -n JOB OPTIONS -- COMMAND`` with CRONWRAP_HOME=``home``, in-process;
        its exit status. An option without a value is a flag."""
        environ = {"CRONWRAP_HOME": str(home), "PATH": "/usr/bin:/bin"}
        given: dict[str, Any] = {}
        args = list(options)
        while args:
            name = args.pop(0).removeprefix("--")
            given[name] = True if not args or args[0].startswith("--") else args.pop(0)
        spec = build_spec(list(command), {"name": job, **given}, environ, lambda: "h",
                          warn=self.notes.append)
        return runner.run(spec, environ, world=self.world())

    def runs(self, job: str = "j") -> list[Run]:
        return self.ledger.runs(job, 100)
