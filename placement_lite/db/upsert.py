"""Insert-or-add in one statement, on every backend.

For rows many writers create and bump at once (quota tree locks, usage
sums): an INSERT that may fail inside a savepoint would not do on
MariaDB, where writers racing to create the same row can deadlock, and
the deadlock rolls back the whole transaction, savepoint included.
MariaDB/MySQL say it `ON DUPLICATE KEY UPDATE`, SQLite and PostgreSQL
`ON CONFLICT (primary key) DO UPDATE`.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from sqlalchemy import Table
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection


def insert_or_add(conn: Connection, table: Table, rows: Sequence[dict],
                  add: Iterable[str]) -> None:
    """Insert `rows`; where a row's primary key is already stored, add the
    row's values of the `add` columns to the stored ones instead.

    One statement (an executemany for several rows). The rows are applied
    in the order given, which is the order their row locks are taken in:
    callers sort them, so that two writers cannot wait on each other. No
    primary key may appear twice (PostgreSQL refuses to update a row twice
    in one statement)."""
    if not rows:
        return
    conn.execute(_statement(conn.dialect.name, table, tuple(add)), list(rows))


# Statements are immutable: built once per process (building the
# `inserted`/`excluded` alias is a third of a millisecond of CPU, more
# than the rest of the call).
_STATEMENTS: dict = {}


def _statement(dialect: str, table: Table, add: tuple[str, ...]):
    key = (dialect, table.name, add)
    stmt = _STATEMENTS.get(key)
    if stmt is None:
        if dialect == "mysql":
            stmt = mysql.insert(table)
            stmt = stmt.on_duplicate_key_update(
                {c: table.c[c] + stmt.inserted[c] for c in add})
        else:
            stmt = (postgresql if dialect == "postgresql" else sqlite).insert(table)
            stmt = stmt.on_conflict_do_update(
                index_elements=list(table.primary_key.columns),
                set_={c: table.c[c] + stmt.excluded[c] for c in add})
        _STATEMENTS[key] = stmt
    return stmt
