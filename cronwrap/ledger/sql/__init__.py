"""Named SQL blocks, one file per dialect (procrastinate keeps its queries the same way)."""

from __future__ import annotations

import os


def load(dialect: str) -> dict[str, str]:
    path = os.path.join(os.path.dirname(__file__), f"{dialect}.sql")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    queries: dict[str, str] = {}
    for block in text.split("-- name: ")[1:]:
        name, _, body = block.partition("\n")
        queries[name.strip()] = body if name.startswith("migration") else body.strip().rstrip(";")
    return queries
