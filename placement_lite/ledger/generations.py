"""The generation contract: a provider as a write to what it offers
(inventory, traits, aggregates, allocations) sees it, and the one UPDATE
that lets such a write through.

`bump_generation` is a conditional UPDATE that is both the optimistic
concurrency check (a caller's stale generation is a 409 for the caller to
resolve) and the row lock that serialises writers of one provider, so
reads made after it in the same transaction see every writer that
committed before.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Optional

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import tables as t

_rp = t.resource_providers


@dataclass(frozen=True)
class ProviderRef:
    """A provider as a write to what it offers (inventory, traits,
    aggregates) needs it: its row and generation, not its name or tree,
    so reading it joins nothing."""
    id: int
    uuid: str
    generation: int
    created_at: Optional[dt.datetime] = None
    updated_at: Optional[dt.datetime] = None

    @property
    def modified(self) -> Optional[dt.datetime]:
        return self.updated_at or self.created_at


def utcnow() -> dt.datetime:
    """Naive UTC, as every DateTime column stores it."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def not_found(uuid: str) -> errors.ResourceProviderNotFound:
    return errors.ResourceProviderNotFound(
        f"No resource provider with uuid {uuid} found.")


_REF_COLUMNS = (_rp.c.id, _rp.c.uuid, _rp.c.generation, _rp.c.created_at,
                _rp.c.updated_at)
_REF_BY_UUID = select(*_REF_COLUMNS).where(_rp.c.uuid == bindparam("p_uuid"))


def _ref(row) -> ProviderRef:
    return ProviderRef(row[0], row[1], row[2], row[3], row[4])


def get_ref(conn: Connection, uuid: str) -> ProviderRef:
    """The provider with this uuid as a write needs it (ProviderRef); 404
    if none."""
    row = conn.execute(_REF_BY_UUID, {"p_uuid": uuid}).first()
    if row is None:
        raise not_found(uuid)
    return _ref(row)


def select_with(joins, *columns):
    """A statement reading one provider (by :p_uuid, as a ProviderRef)
    with its rows in other tables, each (table, onclause) of `joins`
    outer-joined in turn: a write that needs the provider and, say, its
    inventory reads both in one round trip. Build it once per module and
    run it with `get_with`.

    One flat chain of outer joins, never an outer join to a parenthesised
    inner join: SQLite (which plans without statistics) builds the whole
    inner join before joining it, reading every row of the cloud's table
    to find one provider's."""
    stmt = select(*_REF_COLUMNS, *columns).select_from(_rp)
    for table, onclause in joins:
        stmt = stmt.outerjoin(table, onclause)
    return stmt.where(_rp.c.uuid == bindparam("p_uuid"))


def get_with(conn: Connection, statement, uuid: str) -> tuple[ProviderRef, list]:
    """(provider, its joined rows) by a `select_with` statement; 404 if
    there is no such provider. A provider with no joined rows has one row
    of NULLs there, which is left out (its first joined column must be one
    that is never NULL in a joined row)."""
    rows = conn.execute(statement, {"p_uuid": uuid}).all()
    if not rows:
        raise not_found(uuid)
    first = len(_REF_COLUMNS)
    return _ref(rows[0]), [row for row in rows if row[first] is not None]


# Built once, as every statement a write runs: a statement object kept
# whole keeps its cache key, so SQLAlchemy finds its compiled form at once.
_BUMP = (update(_rp).where(_rp.c.id == bindparam("p_id"))
         .values(generation=_rp.c.generation + 1, updated_at=bindparam("p_now")))
_BUMP_CHECKED = _BUMP.where(_rp.c.generation == bindparam("p_seen"))
_BUMP_RETURNING = _BUMP.returning(_rp.c.generation)
_GENERATION = select(_rp.c.uuid, _rp.c.generation).where(_rp.c.id == bindparam("p_id"))
_BUMP_NAMED = _BUMP.where(_rp.c.uuid == bindparam("p_uuid"))


def _stale(uuid: str, current: int, seen: Optional[int]) -> errors.ConcurrentUpdate:
    return errors.ConcurrentUpdate(
        f"resource provider generation conflict: resource provider {uuid} "
        f"is at generation {current}, the request was made against "
        f"generation {seen}. Re-read the provider and retry.")


def bump_generation(conn: Connection, provider: ProviderRef | int,
                    seen: Optional[int] = None) -> int:
    """Increment the provider's generation and return the new value.

    With `seen`, only if the generation is still `seen`; otherwise
    ConcurrentUpdate (409 placement.concurrent_update). Either way the
    UPDATE takes the provider's row lock, so reads made after this call
    in the same transaction see every writer that committed before us.
    """
    provider_id = provider if isinstance(provider, int) else provider.id
    params = {"p_id": provider_id, "p_now": utcnow()}
    returning = seen is None and conn.dialect.update_returning
    if seen is not None:
        stmt = _BUMP_CHECKED
        params["p_seen"] = seen
    else:
        # PostgreSQL and SQLite hand the new value back with the UPDATE.
        stmt = _BUMP_RETURNING if returning else _BUMP
    result = conn.execute(stmt, params)
    if returning:
        row = result.first()
        if row is not None:
            return row[0]
    if returning or result.rowcount != 1:
        current = conn.execute(_GENERATION, {"p_id": provider_id}).first()
        if current is None:
            which = (f"id {provider}" if isinstance(provider, int)
                     else f"uuid {provider.uuid}")
            raise errors.ResourceProviderNotFound(
                f"No resource provider with {which} found: it was deleted "
                "meanwhile.")
        raise _stale(current.uuid, current.generation, seen)
    if seen is not None:
        # The UPDATE matched generation == seen under its row lock.
        return seen + 1
    return conn.execute(_GENERATION, {"p_id": provider_id}).first().generation


def lock_for_claim(conn: Connection, provider_id: int, uuid: str) -> bool:
    """Bump the generation without comparing or reading it back (an
    allocation write's provider lock); False when the provider is gone.
    The uuid is matched too: the id may come from a process's copy of the
    facts, taken before the provider was deleted, and SQLite can give a
    deleted provider's id to the next one created."""
    return conn.execute(_BUMP_NAMED, {"p_id": provider_id, "p_uuid": uuid,
                                      "p_now": utcnow()}).rowcount == 1


def check_generation(provider: ProviderRef, seen: Optional[int]) -> None:
    """ConcurrentUpdate (409) at once if `seen` differs from the generation
    just read, so a stale request is told so before anything else is
    examined. The conditional UPDATE in bump_generation stays the check
    that counts; this one only orders the answers as Placement does."""
    if seen is not None and provider.generation != seen:
        raise _stale(provider.uuid, provider.generation, seen)


def check_generation_unchanged(provider: ProviderRef, seen: Optional[int]) -> None:
    """check_generation, in the words Placement uses on the traits and
    aggregates routes."""
    if seen is not None and provider.generation != seen:
        raise errors.ConcurrentUpdate(
            "Resource provider's generation already changed. Please update "
            f"the generation and try again. (Resource provider {provider.uuid} "
            f"is at generation {provider.generation}, the request was made "
            f"against generation {seen}.)")
