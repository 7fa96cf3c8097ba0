"""Two small shapes every ledger module needs: names to ids, all or none;
and a provider's link rows (traits, aggregates) made equal to a set."""
from __future__ import annotations

from typing import Callable, Iterable

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select
from sqlalchemy.sql.schema import Column, Table

from placement_lite import errors


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


def ids_by_name(conn: Connection, name_col: Column, id_col: Column,
                names: Iterable[str],
                explain: Callable[[list[str]], str],
                error: type = errors.Invalid) -> dict[str, int]:
    """name -> id for every name; error(explain(missing)) (Invalid unless
    told) if any is unknown, so the caller's message names each one."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    found = dict(conn.execute(lookup_statement(name_col, id_col),
                              {"names": wanted}).all())
    missing = [n for n in wanted if n not in found]
    if missing:
        raise error(explain(missing))
    return found


def sync_provider_links(conn: Connection, table: Table, column: str,
                        provider_id: int, target: Iterable[int]) -> None:
    """Make the provider's rows in `table` (provider id, `column`) exactly
    `target`, touching only the rows that change."""
    owner = table.c.resource_provider_id
    linked = table.c[column]
    have = set(conn.scalars(select(linked).where(owner == provider_id)))
    target = set(target)
    gone = sorted(have - target)
    if gone:
        conn.execute(delete(table).where(owner == provider_id, linked.in_(gone)))
    added = sorted(target - have)
    if added:
        conn.execute(insert(table), [
            {"resource_provider_id": provider_id, column: value}
            for value in added])
