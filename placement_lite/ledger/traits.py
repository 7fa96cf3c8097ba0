"""Traits: the standard ones (synced at start-up) and CUSTOM_*, and the
traits each provider has.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterable, Optional

from sqlalchemy import delete, exists, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.ledger import lookup
from placement_lite.ledger.providers import Provider, bump_generation

_tr = t.traits
_rpt = t.resource_provider_traits
CUSTOM_PREFIX = "CUSTOM_"


@dataclass(frozen=True)
class Trait:
    id: int
    name: str
    created_at: Optional[dt.datetime] = None
    updated_at: Optional[dt.datetime] = None

    @property
    def modified(self) -> Optional[dt.datetime]:
        return self.updated_at or self.created_at


def _row(row) -> Trait:
    return Trait(row.id, row.name, row.created_at, row.updated_at)


def list_traits(conn: Connection, prefix: Optional[str] = None,
                names: Optional[Iterable[str]] = None,
                associated: Optional[bool] = None) -> list[Trait]:
    """Traits, by name, filtered by name prefix, a name list, and whether
    any provider has them."""
    query = select(_tr).order_by(_tr.c.name)
    if prefix is not None:
        # '_' is common in trait names and a LIKE wildcard: escape it (with
        # '!', which every backend's string literals leave alone).
        escaped = (prefix.replace("!", "!!").replace("%", "!%")
                   .replace("_", "!_"))
        query = query.where(_tr.c.name.like(escaped + "%", escape="!"))
    if names is not None:
        wanted = sorted(set(names))
        if not wanted:
            return []
        query = query.where(_tr.c.name.in_(wanted))
    if associated is not None:
        used = exists().where(_rpt.c.trait_id == _tr.c.id)
        query = query.where(used if associated else ~used)
    return [_row(r) for r in conn.execute(query)]


def find(conn: Connection, name: str) -> Optional[Trait]:
    row = conn.execute(select(_tr).where(_tr.c.name == name)).first()
    return _row(row) if row else None


def get(conn: Connection, name: str) -> Trait:
    found = find(conn, name)
    if found is None:
        raise errors.TraitNotFound(f"No such trait(s): {name}.")
    return found


def ensure(conn: Connection, name: str) -> tuple[Trait, bool]:
    """Create a custom trait unless it exists; (trait, created)."""
    found = find(conn, name)
    if found is not None:
        return found, False
    try:
        conn.execute(insert(_tr).values(name=name))
    except IntegrityError:
        raise errors.RaceLost(
            f"Another request created trait {name} meanwhile; retry.")
    return get(conn, name), True


def delete_trait(conn: Connection, name: str) -> None:
    """Delete a custom trait; 400 for standard ones, 409 while a provider
    has it."""
    trait = get(conn, name)
    if not name.startswith(CUSTOM_PREFIX):
        raise errors.Invalid(f"Cannot delete standard trait {name}.")
    if conn.execute(select(exists().where(_rpt.c.trait_id == trait.id))).scalar():
        raise errors.Conflict(
            f"The trait {name} is in use by a resource provider. Remove it "
            "from the providers first.")
    conn.execute(delete(_tr).where(_tr.c.id == trait.id))


def provider_traits(conn: Connection, provider: Provider) -> list[Trait]:
    rows = conn.execute(
        select(_tr).join(_rpt, _rpt.c.trait_id == _tr.c.id)
        .where(_rpt.c.resource_provider_id == provider.id)
        .order_by(_tr.c.name))
    return [_row(r) for r in rows]


def set_provider_traits(conn: Connection, provider: Provider,
                        names: Iterable[str],
                        generation: Optional[int]) -> int:
    """Make `names` the provider's traits; returns the new generation.

    Invalid (400) naming any trait that does not exist; ConcurrentUpdate
    (409) for a stale `generation` (None skips the check).
    """
    found = lookup.ids_by_name(
        conn, _tr.c.name, _tr.c.id, names,
        lambda missing: f"No such trait {', '.join(missing)}.")
    new_generation = bump_generation(conn, provider, generation)
    lookup.sync_provider_links(conn, _rpt, "trait_id", provider.id,
                               found.values())
    return new_generation


def delete_provider_traits(conn: Connection, provider: Provider,
                           generation: Optional[int] = None) -> int:
    """Remove every trait from the provider; returns the new generation."""
    return set_provider_traits(conn, provider, [], generation)
