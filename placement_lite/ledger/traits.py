"""Traits: the standard ones (synced at start-up) and CUSTOM_*, and the
traits each provider has.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterable, Optional

from sqlalchemy import bindparam, delete, exists, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.ledger import lookup, providers
from placement_lite.ledger.providers import ProviderRef, bump_generation

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


def _by_name(traits: Iterable[Trait]) -> list[Trait]:
    # Sorted here, not by the database, so every backend and collation
    # lists them in the same (code point) order.
    return sorted(traits, key=lambda tr: tr.name)


_OF_PROVIDER = (select(_tr).join(_rpt, _rpt.c.trait_id == _tr.c.id)
                .where(_rpt.c.resource_provider_id == bindparam("p_id")))


def provider_traits(conn: Connection, provider: ProviderRef) -> list[Trait]:
    return _by_name(_row(r) for r in conn.execute(_OF_PROVIDER, {"p_id": provider.id}))


# name -> trait row; standard traits are remembered (lookup.PERMANENT),
# in the same cache the name-to-id lookups use.
_ROWS = lookup.permanent_rows(_tr)

_WITH_LINKS = providers.select_with(
    [(_rpt, _rpt.c.resource_provider_id == t.resource_providers.c.id)],
    _rpt.c.trait_id.label("linked_trait_id"))


def provider_for_write(conn: Connection, uuid: str) -> tuple[ProviderRef, set[int]]:
    """The provider (404 if none) and the ids of its traits, in one
    query, for replace_provider_traits(held=...)."""
    provider, rows = providers.get_with(conn, _WITH_LINKS, uuid)
    return provider, {row.linked_trait_id for row in rows}


def replace_provider_traits(conn: Connection, provider: ProviderRef,
                            names: Iterable[str], generation: Optional[int],
                            held: Optional[set[int]] = None
                            ) -> tuple[int, list[Trait]]:
    """Make `names` the provider's traits; returns the new generation and
    the traits, by name.

    Invalid (400) naming any trait that does not exist; ConcurrentUpdate
    (409) for a stale `generation` (None skips the check). `held` (from
    provider_for_write, read before the generation bump) saves reading the
    provider's traits again; it is trusted only with a `generation` to
    check, since then the bump succeeds only if nothing changed since.
    """
    wanted = sorted(set(names))
    rows = _ROWS.get(conn, wanted)
    missing = [name for name in wanted if name not in rows]
    if missing:
        raise errors.Invalid(f"No such trait {', '.join(missing)}.")
    new_generation = bump_generation(conn, provider, generation)
    lookup.sync_provider_links(
        conn, _rpt, "trait_id", provider.id, [row.id for row in rows.values()],
        have=held if generation is not None else None)
    return new_generation, _by_name(
        Trait(row.id, row.name, row.created_at, row.updated_at)
        for row in rows.values())


def set_provider_traits(conn: Connection, provider: ProviderRef,
                        names: Iterable[str],
                        generation: Optional[int]) -> int:
    """replace_provider_traits, returning only the new generation."""
    return replace_provider_traits(conn, provider, names, generation)[0]


def delete_provider_traits(conn: Connection, provider: ProviderRef,
                           generation: Optional[int] = None) -> int:
    """Remove every trait from the provider; returns the new generation."""
    return set_provider_traits(conn, provider, [], generation)
