"""Named SQL blocks, one file per dialect (procrastinate keeps its queries the same way).

Blocks named ``migration_N`` (the numbered schema changes), ``expansion_N`` (additions an
older cronwrap of the same schema version need not know: the schema version stays) and
``*_function`` (server-side functions the migrator re-creates after them) are scripts, kept
as written; every other block is one statement."""

from __future__ import annotations

import os

FUNCTION = "_function"  # the name of a block that creates a server-side function ends so


def load(dialect: str) -> dict[str, str]:
    path = os.path.join(os.path.dirname(__file__), f"{dialect}.sql")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    queries: dict[str, str] = {}
    for block in text.split("-- name: ")[1:]:
        name, _, body = block.partition("\n")
        script = name.startswith(("migration_", "expansion_")) or name.strip().endswith(FUNCTION)
        queries[name.strip()] = body if script else body.strip().rstrip(";")
    return queries


def functions(queries: dict[str, str]) -> list[str]:
    """The blocks that create server-side functions, in the file's order: the migrator runs
    them after the numbered migrations (a repeatable migration, as Flyway's R__ scripts)."""
    return [name for name in queries if name.endswith(FUNCTION)]
