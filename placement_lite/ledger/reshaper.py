"""Reshape (1.30): replace the inventories of several providers and the
allocations of several consumers in one transaction.

The typical use moves inventory from a provider to new children together
with the allocations against it. The steps, and with them the generation
each provider ends at, are Placement's (callers cache generations, so a
different count would make their next write a spurious 409):

1. lock every provider named in `inventories`, lowest id first, checking
   the generation the caller gave (409 if stale);
2. interim inventory: for each provider given a non-empty inventory, the
   union of what it has and what it is given (nothing is removed yet, so
   no allocation is orphaned) -- one generation bump;
3. the consumers' allocations, through allocations.replace, which checks
   capacity against the interim inventory and bumps each provider it
   claims on -- one more;
4. final inventory: exactly what was given, for every provider named --
   one more. Removing a class that still has allocations is refused
   (409 inventory in use); shrinking one below its usage is accepted, as
   everywhere else.

Nothing is visible to anyone until all of it holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.ledger import allocations
from placement_lite.ledger import inventories as inv_mod
from placement_lite.ledger import providers
from placement_lite.ledger.allocations import ClaimCheck, ConsumerWrite


@dataclass
class ProviderInventories:
    generation: int
    inventories: Mapping[str, inv_mod.Inventory]


def _provider(conn: Connection, uuid: str) -> providers.Provider:
    found = providers.find_by_uuid(conn, uuid)
    if found is None:
        raise errors.ReshapeProviderNotFound(
            f"Resource provider {uuid} in inventories not found: No resource "
            f"provider with uuid {uuid} found. Create it before reshaping.")
    return found


def _stale(uuid: str, actual: int, given: int) -> errors.ConcurrentUpdate:
    return errors.ConcurrentUpdate(
        f"resource provider generation conflict for provider {uuid}: "
        f"actual: {actual}, given: {given}. Re-read the provider and retry.")


def _lock(conn: Connection, provider: providers.Provider, seen: int) -> None:
    """Take the provider's row lock if it is still at generation `seen`,
    without moving the generation (Placement's count has no bump here)."""
    rp = t.resource_providers
    current = conn.execute(select(rp.c.generation).where(rp.c.id == provider.id)
                           .with_for_update()).scalar()
    if current is None:
        raise errors.RaceLost(
            f"Resource provider {provider.uuid} was deleted meanwhile; "
            "try again.")
    if current != seen:
        raise _stale(provider.uuid, current, seen)


def reshape(conn: Connection, inventories: Mapping[str, ProviderInventories],
            writes: list[ConsumerWrite],
            claim_checks: Iterable[ClaimCheck] = (),
            reserved_may_equal_total: bool = True) -> None:
    reshaped = []
    for uuid in sorted(inventories):
        provider = _provider(conn, uuid)
        wanted = inventories[uuid]
        if provider.generation != wanted.generation:
            raise _stale(uuid, provider.generation, wanted.generation)
        for inv in wanted.inventories.values():
            inv_mod.validate(provider, inv, reserved_may_equal_total)
        reshaped.append((provider, wanted))
    # Providers are locked in id order, as every allocation writer does.
    reshaped.sort(key=lambda p: p[0].id)
    for provider, wanted in reshaped:
        _lock(conn, provider, wanted.generation)
    for provider, wanted in reshaped:
        if wanted.inventories:
            interim = dict(inv_mod.get_inventories(conn, provider))
            interim.update(wanted.inventories)
            inv_mod.replace_inventories(conn, provider, interim, None,
                                        check_usage=False)
    allocations.replace(conn, writes, claim_checks)
    for provider, wanted in reshaped:
        inv_mod.replace_inventories(conn, provider, dict(wanted.inventories),
                                    None, check_usage=True)
