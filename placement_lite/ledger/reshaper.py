"""Reshape (1.30): replace the inventories of several providers and the
allocations of several consumers in one transaction.

The typical use moves inventory from a provider to new children together
with the allocations against it. Inside the transaction the order is:
check every given provider generation; replace the inventories without
the in-use check (the allocations that would block it are about to move);
write the consumers' allocations through allocations.replace, which bumps
the providers, checks capacity and runs the claim checks; and finally
check that every allocation left on a reshaped provider fits its new
inventory. Nothing is visible to anyone until all of it holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from sqlalchemy.engine import Connection

from placement_lite.ledger import allocations, capacity, errors
from placement_lite.ledger import inventories as inv_mod
from placement_lite.ledger import providers, resource_classes
from placement_lite.ledger.allocations import ClaimCheck, ConsumerWrite


@dataclass
class ProviderInventories:
    generation: int
    inventories: Mapping[str, inv_mod.Inventory]


def _provider(conn: Connection, uuid: str) -> providers.Provider:
    found = providers.find_by_uuid(conn, uuid)
    if found is None:
        raise errors.Invalid(
            f"Resource provider {uuid} in inventories not found; create it "
            "before reshaping.", code="placement.resource_provider.not_found")
    return found


def reshape(conn: Connection, inventories: Mapping[str, ProviderInventories],
            writes: list[ConsumerWrite],
            claim_checks: Iterable[ClaimCheck] = (),
            reserved_may_equal_total: bool = True) -> None:
    reshaped = []
    for uuid in sorted(inventories):
        provider = _provider(conn, uuid)
        wanted = inventories[uuid]
        if provider.generation != wanted.generation:
            raise errors.ConcurrentUpdate(
                f"resource provider generation conflict: resource provider "
                f"{uuid} is at generation {provider.generation}, the reshape "
                f"was made against generation {wanted.generation}. Re-read "
                "the provider and retry.")
        for inv in wanted.inventories.values():
            inv_mod.validate(provider, inv, reserved_may_equal_total)
        reshaped.append((provider, wanted))
    # Providers are locked in id order, as every allocation writer does.
    for provider, wanted in sorted(reshaped, key=lambda p: p[0].id):
        inv_mod.replace_inventories(conn, provider, dict(wanted.inventories),
                                    wanted.generation, check_usage=False)
    allocations.replace(conn, writes, claim_checks)
    _check_fits(conn, [provider for provider, _ in reshaped])


def _check_fits(conn: Connection, reshaped: list[providers.Provider]) -> None:
    if not reshaped:
        return
    by_id = {p.id: p for p in reshaped}
    invs = capacity.inventories(conn, by_id)
    used = capacity.usage(conn, by_id)
    for (rp_id, rc_id), amount in sorted(used.items()):
        inv = invs.get((rp_id, rc_id))
        if inv is not None and amount <= capacity.capacity_of(inv):
            continue
        name = resource_classes.names_for(conn, [rc_id])[rc_id]
        where = (f"'{name}' on resource provider "
                 f"'{by_id[rp_id].uuid}'")
        if inv is None:
            raise errors.InventoryInUse(
                f"Inventory for {where} in use: {amount} allocated but the "
                "reshape removes the inventory; move those allocations in "
                "the same reshape.")
        raise errors.InventoryInUse(
            f"Inventory for {where} in use: {amount} allocated, but the "
            f"reshaped capacity is {capacity.display(capacity.capacity_of(inv))}.")
