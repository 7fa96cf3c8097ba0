"""Inventories: what a provider offers, per resource class.

Every change bumps the provider's generation first (the conditional
UPDATE, which also takes the row lock) and only then reads usage, so the
"is a class being removed still allocated" check sees every allocation
committed before us. A class may shrink below its usage (Placement
accepts that); claims then check capacity exactly, see capacity.check.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Mapping, Optional

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.ledger import capacity, resource_classes
from placement_lite.ledger.providers import Provider, bump_generation, utcnow

_inv = t.inventories
DEFAULTS = {"reserved": 0, "min_unit": 1, "max_unit": capacity.MAX_AMOUNT,
            "step_size": 1, "allocation_ratio": 1.0}
FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size",
          "allocation_ratio")


@dataclass(frozen=True)
class Inventory:
    resource_class: str
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = capacity.MAX_AMOUNT
    step_size: int = 1
    allocation_ratio: float = 1.0
    created_at: Optional[dt.datetime] = None
    updated_at: Optional[dt.datetime] = None

    @property
    def capacity(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio

    @property
    def modified(self) -> Optional[dt.datetime]:
        return self.updated_at or self.created_at

    def values(self) -> dict:
        return {name: getattr(self, name) for name in FIELDS}


def make(resource_class: str, data: Mapping) -> Inventory:
    """An Inventory from a request record, with Placement's defaults."""
    values = dict(DEFAULTS)
    values.update({k: data[k] for k in FIELDS if k in data})
    values["allocation_ratio"] = float(values["allocation_ratio"])
    return Inventory(resource_class=resource_class, **values)


def validate(provider: Provider, inv: Inventory,
             reserved_may_equal_total: bool = True,
             relaxed_at: str = "") -> None:
    """Invalid (400) for an inventory that cannot hold anything sensible.

    Capacity is (total - reserved) * allocation_ratio, truncated to an
    integer as Placement truncates it here. Under the strict rule (older
    callers) it must be positive (reserved below total, a positive ratio);
    with `reserved_may_equal_total` it may be zero (a provider whose whole
    inventory is held back) but never negative. `relaxed_at` is where a
    strict caller can get the relaxed rule; the refusal names it. The
    wording is Placement's, whichever of the three numbers is at fault,
    followed by the numbers.
    """
    where = f"'{inv.resource_class}' on resource provider '{provider.uuid}'"
    cap = inv.capacity
    if math.isfinite(cap):
        cap = int(cap)
    numbers = (f"capacity ((total {inv.total} - reserved {inv.reserved}) * "
               f"allocation_ratio {inv.allocation_ratio})")
    if reserved_may_equal_total:
        if inv.reserved > inv.total or not cap >= 0:
            raise errors.Invalid(
                f"Invalid inventory for {where}. The reserved value is "
                f"greater than total: the {numbers} must not be negative.")
    elif not cap > 0:
        raise errors.Invalid(
            f"Invalid inventory for {where}. The reserved value is greater "
            f"than or equal to total: the {numbers} must be positive"
            + (f" (from microversion {relaxed_at} it may be zero)."
               if relaxed_at else "."))
    if inv.min_unit > inv.max_unit:
        raise errors.Invalid(
            f"Invalid inventory for {where}. min_unit ({inv.min_unit}) must "
            f"not be greater than max_unit ({inv.max_unit}).")


def _row(row, name: str) -> Inventory:
    return Inventory(resource_class=name, total=row.total,
                     reserved=row.reserved, min_unit=row.min_unit,
                     max_unit=row.max_unit, step_size=row.step_size,
                     allocation_ratio=float(row.allocation_ratio),
                     created_at=row.created_at, updated_at=row.updated_at)


def get_inventories(conn: Connection, provider: Provider) -> dict[str, Inventory]:
    """resource class name -> Inventory for one provider."""
    rc = t.resource_classes
    rows = conn.execute(
        select(_inv, rc.c.name.label("rc_name"))
        .join(rc, rc.c.id == _inv.c.resource_class_id)
        .where(_inv.c.resource_provider_id == provider.id)
        .order_by(rc.c.name))
    return {row.rc_name: _row(row, row.rc_name) for row in rows}


def get_inventory(conn: Connection, provider: Provider,
                  resource_class: str) -> Inventory:
    found = get_inventories(conn, provider).get(resource_class)
    if found is None:
        raise errors.InventoryNotFound(
            f"No inventory of class {resource_class} for {provider.uuid}.")
    return found


def _check_usage(conn: Connection, provider: Provider,
                 planned: Mapping[int, Optional[Inventory]],
                 class_names: Mapping[int, str]) -> None:
    """InventoryInUse when a class about to be removed still has
    allocations, naming every such class.

    `planned` maps class id -> the inventory it will have (None: removed).
    A class that stays may shrink below what is allocated, as in
    Placement (nova's ironic driver reserves a whole node that holds an
    instance; an operator lowers allocation_ratio): the provider then
    admits no new claims of that class until usage falls back under the
    capacity, which capacity.check enforces on every claim.
    """
    removed = [rc for rc, inv in planned.items() if inv is None]
    if not removed:
        return
    used = {rc: n for (_rp, rc), n in
            capacity.usage(conn, [provider.id]).items()
            if rc in removed and n}
    if not used:
        return
    # Ordered by class id, as Placement lists them.
    names = [class_names[rc] for rc in sorted(used)]
    amounts = ", ".join(f"{used[rc]} {class_names[rc]}" for rc in sorted(used))
    raise errors.InventoryInUse(
        f"Inventory for '{', '.join(names)}' on resource provider "
        f"'{provider.uuid}' in use. Allocations still hold {amounts}; "
        "delete or move them before removing the inventory.")


def _current_ids(conn: Connection, provider: Provider) -> dict[int, int]:
    """class id -> inventory row id."""
    return dict(conn.execute(
        select(_inv.c.resource_class_id, _inv.c.id)
        .where(_inv.c.resource_provider_id == provider.id)).all())


def _write(conn: Connection, provider: Provider,
           planned: Mapping[int, Optional[Inventory]]) -> None:
    existing = _current_ids(conn, provider)
    now = utcnow()
    gone = [existing[rc] for rc, inv in planned.items()
            if inv is None and rc in existing]
    if gone:
        conn.execute(delete(_inv).where(_inv.c.id.in_(sorted(gone))))
    new = []
    for rc_id in sorted(planned):
        inv = planned[rc_id]
        if inv is None:
            continue
        if rc_id in existing:
            conn.execute(update(_inv).where(_inv.c.id == existing[rc_id])
                         .values(updated_at=now, **inv.values()))
        else:
            new.append(dict(resource_provider_id=provider.id,
                            resource_class_id=rc_id, **inv.values()))
    if new:
        # One statement for every new class (executemany), not one each.
        conn.execute(insert(_inv), new)


def _apply(conn: Connection, provider: Provider,
           planned_by_name: Mapping[str, Optional[Inventory]],
           generation: Optional[int], check_usage: bool) -> int:
    ids = resource_classes.ids_for(conn, planned_by_name)
    planned = {ids[name]: inv for name, inv in planned_by_name.items()}
    new_generation = bump_generation(conn, provider, generation)
    if check_usage:
        _check_usage(conn, provider, planned, {v: k for k, v in ids.items()})
    _write(conn, provider, planned)
    return new_generation


def replace_inventories(conn: Connection, provider: Provider,
                        inventories: Mapping[str, Inventory],
                        generation: Optional[int],
                        check_usage: bool = True) -> int:
    """Make `inventories` (class name -> Inventory) the provider's whole
    inventory; classes not named are removed. Returns the new generation.

    ConcurrentUpdate (409) if `generation` is stale (None skips the
    check), Invalid (400) for unknown classes, InventoryInUse (409) when
    a removed class still has allocations, unless `check_usage` is False
    (a reshape's interim step).
    """
    planned: dict[str, Optional[Inventory]] = {
        name: None for name in get_inventories(conn, provider)}
    planned.update(inventories)
    return _apply(conn, provider, planned, generation, check_usage)


def add_inventory(conn: Connection, provider: Provider, inv: Inventory,
                  generation: Optional[int] = None) -> int:
    """Add one class's inventory; 409 if the provider already has it."""
    resource_classes.ids_for(conn, [inv.resource_class])
    if inv.resource_class in get_inventories(conn, provider):
        raise errors.ConcurrentUpdate(
            f"Update conflict: inventory for {inv.resource_class} on resource "
            f"provider {provider.uuid} already exists; use PUT to change it.")
    return _apply(conn, provider, {inv.resource_class: inv}, generation, True)


def update_inventory(conn: Connection, provider: Provider, inv: Inventory,
                     generation: Optional[int]) -> int:
    """Change one class's existing inventory; Invalid (400) if absent,
    ResourceClassNotFound (404, as Placement answers) for an unknown class."""
    resource_classes.ids_for(conn, [inv.resource_class],
                             error=errors.ResourceClassNotFound)
    if inv.resource_class not in get_inventories(conn, provider):
        raise errors.NoInventoryRecord(
            f"No inventory record with resource class for resource provider "
            f"{provider.uuid}: No inventory of class {inv.resource_class} "
            "found. Create it with POST, or PUT the whole inventory.")
    return _apply(conn, provider, {inv.resource_class: inv}, generation, True)


def delete_inventory(conn: Connection, provider: Provider,
                     resource_class: str,
                     generation: Optional[int] = None) -> int:
    """Remove one class's inventory; 404 if absent, 409 while allocated."""
    if resource_class not in get_inventories(conn, provider):
        raise errors.InventoryNotFound(
            f"No inventory of class {resource_class} found for delete on "
            f"resource provider {provider.uuid}.")
    return _apply(conn, provider, {resource_class: None}, generation, True)


def delete_all_inventories(conn: Connection, provider: Provider,
                           generation: Optional[int] = None) -> int:
    """Remove every inventory of the provider; 409 while any is allocated."""
    return replace_inventories(conn, provider, {}, generation)
