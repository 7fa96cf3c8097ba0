"""Small shapes every ledger module needs: names to ids, all or none (with
the rows that never change remembered per connection pool); and a
provider's link rows (traits, aggregates) made equal to a set."""
from __future__ import annotations

import weakref
from typing import Callable, Iterable, Optional

import os_traits
from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select
from sqlalchemy.sql.schema import Column, Table

from placement_lite import errors
from placement_lite.db import facts_log
from placement_lite.db import tables as t


# Keyed by names, not by the columns themselves: columns overload `==`
# to build SQL, so they make poor cache keys.
_STATEMENTS: dict[tuple[str, str, str], Select] = {}


def lookup_statement(name_col: Column, id_col: Column) -> Select:
    """SELECT name, id WHERE name IN :names, built once per column pair:
    these lookups run on every request (candidate queries among them), and
    building a select costs about as much as running one."""
    key = (name_col.table.name, name_col.name, id_col.name)
    stmt = _STATEMENTS.get(key)
    if stmt is None:
        stmt = _STATEMENTS.setdefault(key, select(name_col, id_col).where(
            name_col.in_(bindparam("names", expanding=True))))
    return stmt


_STANDARD_TRAITS = frozenset(os_traits.get_traits())

# Rows that, once read, stay exactly as read for as long as the database
# exists, so a process may remember them without ever serving a stale
# value: a standard resource class keeps its os-resource-classes index as
# id and is never renamed or deleted (only custom classes are); a standard
# trait is never deleted (only custom traits are, by the API and by
# `import --force`). Custom classes and traits, providers and aggregates
# can all be deleted or renamed, so they are always read.
PERMANENT: dict[str, Callable[[str, int], bool]] = {
    t.resource_classes.name: lambda name, _id: _id < t.CUSTOM_CLASS_MIN_ID,
    t.traits.name: lambda name, _id: name in _STANDARD_TRAITS,
}


class PermanentRows:
    """Rows of one table keyed by name, read by `statement` (which takes
    the expanding parameter `names` and returns the name first), kept per
    connection pool when `keep(name, id)` says they never change, so a
    database created anew (the tests' fresh databases) starts empty."""

    def __init__(self, statement: Select, keep: Callable[[str, int], bool],
                 id_index: int = 1):
        self.statement = statement
        self.keep = keep
        self.id_index = id_index
        self._by_pool: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def get(self, conn: Connection, names: Iterable[str]) -> dict:
        """name -> row for every name that exists; one query for those
        not remembered, none when all are."""
        known = self._by_pool.get(conn.engine.pool)
        if known is None:
            known = self._by_pool.setdefault(conn.engine.pool, {})
        found = {}
        missing = []
        for name in names:
            row = known.get(name)
            if row is None:
                missing.append(name)
            else:
                found[name] = row
        if missing:
            for row in conn.execute(self.statement, {"names": missing}):
                found[row[0]] = row
                if self.keep(row[0], row[self.id_index]):
                    known[row[0]] = row
        return found


# Per table with PERMANENT rows: the columns remembered, name and id first.
_PERMANENT_COLUMNS = {
    t.resource_classes.name: ("name", "id"),
    t.traits.name: ("name", "id", "created_at", "updated_at"),
}
_PERMANENT_ROWS: dict[str, PermanentRows] = {}


def permanent_rows(table: Table) -> PermanentRows:
    """The one remembered-rows cache of `table` (resource classes or
    traits), shared by every lookup of it in the process."""
    rows = _PERMANENT_ROWS.get(table.name)
    if rows is None:
        columns = [table.c[c] for c in _PERMANENT_COLUMNS[table.name]]
        rows = _PERMANENT_ROWS.setdefault(table.name, PermanentRows(
            select(*columns).where(
                table.c.name.in_(bindparam("names", expanding=True))),
            PERMANENT[table.name]))
    return rows


def _permanent_ids(name_col: Column, id_col: Column) -> Optional[PermanentRows]:
    table = name_col.table
    if (table.name not in PERMANENT or name_col is not table.c.name
            or id_col is not table.c.id):
        return None
    return permanent_rows(table)


def ids_by_name(conn: Connection, name_col: Column, id_col: Column,
                names: Iterable[str],
                explain: Callable[[list[str]], str],
                error: type = errors.Invalid) -> dict[str, int]:
    """name -> id for every name; error(explain(missing)) (Invalid unless
    told) if any is unknown, so the caller's message names each one.
    Standard classes and traits, once seen, cost no query (PERMANENT)."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    permanent = _permanent_ids(name_col, id_col)
    if permanent is not None:
        found = {name: row[1] for name, row in permanent.get(conn, wanted).items()}
    else:
        found = dict(conn.execute(lookup_statement(name_col, id_col),
                                  {"names": wanted}).all())
    missing = [n for n in wanted if n not in found]
    if missing:
        raise error(explain(missing))
    return found


def link_ids(conn: Connection, table: Table, column: str,
             provider_id: int) -> set[int]:
    """The ids in `column` of the provider's rows in `table`."""
    return set(conn.scalars(_links_statement(table, column),
                            {"provider_id": provider_id}))


_LINKS: dict[tuple[str, str], Select] = {}


def _links_statement(table: Table, column: str) -> Select:
    key = (table.name, column)
    stmt = _LINKS.get(key)
    if stmt is None:
        stmt = _LINKS.setdefault(key, select(table.c[column]).where(
            table.c.resource_provider_id == bindparam("provider_id")))
    return stmt


def sync_provider_links(conn: Connection, table: Table, column: str,
                        provider_id: int, target: Iterable[int],
                        have: Optional[Iterable[int]] = None) -> None:
    """Make the provider's rows in `table` (provider id, `column`) exactly
    `target`, touching only the rows that change. `have`, when given, is
    what the provider has now (read under its lock, or checked by its
    generation), and saves reading it here."""
    owner = table.c.resource_provider_id
    linked = table.c[column]
    have = (link_ids(conn, table, column, provider_id) if have is None
            else set(have))
    target = set(target)
    gone = sorted(have - target)
    added = sorted(target - have)
    if gone or added:
        # A provider's traits and aggregates are facts the candidate
        # engine copies; a write leaving them as they were changes none.
        facts_log.touch(conn, (provider_id,))
    if gone:
        conn.execute(delete(table).where(owner == provider_id, linked.in_(gone)))
    if added:
        conn.execute(insert(table), [
            {"resource_provider_id": provider_id, column: value}
            for value in added])
