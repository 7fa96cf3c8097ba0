"""Does a claim fit? Checked against usage read inside the writing
transaction, after the providers' generations were bumped, so the sums
include every claim that committed before ours took the row locks.
"""
from __future__ import annotations

from typing import Mapping

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.ledger import errors


def usage(conn: Connection, provider_ids) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> sum of used, for the given providers."""
    a = t.allocations
    rows = conn.execute(
        select(a.c.resource_provider_id, a.c.resource_class_id,
               func.sum(a.c.used))
        .where(a.c.resource_provider_id.in_(sorted(set(provider_ids))))
        .group_by(a.c.resource_provider_id, a.c.resource_class_id))
    return {(rp, rc): int(used) for rp, rc, used in rows}


def inventories(conn: Connection, provider_ids) -> dict[tuple[int, int], object]:
    inv = t.inventories
    rows = conn.execute(
        select(inv).where(
            inv.c.resource_provider_id.in_(sorted(set(provider_ids)))))
    return {(r.resource_provider_id, r.resource_class_id): r for r in rows}


def capacity_of(inv) -> float:
    return (inv.total - inv.reserved) * inv.allocation_ratio


def check(conn: Connection,
          amounts: Mapping[tuple[int, int], list[int]],
          provider_names: Mapping[int, str],
          class_names: Mapping[int, str]) -> None:
    """Raise CapacityExceeded unless every amount fits.

    `amounts` maps (provider id, class id) to the amounts the request
    claims there, one per consumer: each must respect min_unit, max_unit
    and step_size, and together they must fit the free capacity.
    """
    if not amounts:
        return
    providers = {rp for rp, _rc in amounts}
    invs = inventories(conn, providers)
    used = usage(conn, providers)
    for key in sorted(amounts):
        rp, rc = key
        where = (f"'{class_names[rc]}' on resource provider "
                 f"'{provider_names[rp]}'")
        inv = invs.get(key)
        if inv is None:
            raise errors.CapacityExceeded(
                f"Unable to allocate inventory: Inventory for {where} invalid: "
                "the provider has no inventory of that class.")
        for amount in amounts[key]:
            if amount < inv.min_unit or amount > inv.max_unit or (
                    amount % inv.step_size):
                raise errors.CapacityExceeded(
                    f"Unable to allocate inventory: Unable to create allocation "
                    f"for {where}. The requested amount would violate inventory "
                    f"constraints: requested {amount}, min_unit {inv.min_unit}, "
                    f"max_unit {inv.max_unit}, step_size {inv.step_size}.")
        requested = sum(amounts[key])
        current = used.get(key, 0)
        cap = capacity_of(inv)
        if current + requested > cap:
            raise errors.CapacityExceeded(
                f"Unable to allocate inventory: Unable to create allocation for "
                f"{where}. The requested amount would exceed the capacity: "
                f"requested {requested}, already used {current}, capacity "
                f"{display(cap)} ((total {inv.total} - reserved {inv.reserved}) "
                f"* allocation_ratio {inv.allocation_ratio}).")


def display(value: float):
    return int(value) if float(value).is_integer() else round(value, 4)
