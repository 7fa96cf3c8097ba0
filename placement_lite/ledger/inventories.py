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

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.ledger import capacity, providers, reserved_ahead, resource_classes
from placement_lite.ledger.providers import ProviderRef, bump_generation, utcnow

_inv = t.inventories
_rc = t.resource_classes
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


def validate(provider: ProviderRef, inv: Inventory,
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


_OF_PROVIDER = (select(_inv, _rc.c.name.label("rc_name"))
                .join(_rc, _rc.c.id == _inv.c.resource_class_id)
                .where(_inv.c.resource_provider_id == bindparam("p_id")))


def get_inventories(conn: Connection, provider: ProviderRef) -> dict[str, Inventory]:
    """resource class name -> Inventory for one provider, by name (sorted
    here, so every backend and collation gives the same order)."""
    rows = sorted((row.rc_name, row) for row in
                  conn.execute(_OF_PROVIDER, {"p_id": provider.id}))
    return {name: _row(row, name) for name, row in rows}


# What a provider holds, for a write: class name -> (inventory row id,
# class id).
Held = dict[str, tuple[int, int]]

_WITH_HELD = providers.select_with(
    [(_inv, _inv.c.resource_provider_id == t.resource_providers.c.id),
     (_rc, _rc.c.id == _inv.c.resource_class_id)],
    _inv.c.id.label("held_id"), _inv.c.resource_class_id.label("held_rc_id"),
    _rc.c.name.label("held_rc_name"))
_HELD = (select(_inv.c.id, _inv.c.resource_class_id, _rc.c.name)
         .join(_rc, _rc.c.id == _inv.c.resource_class_id)
         .where(_inv.c.resource_provider_id == bindparam("p_id")))


def provider_for_write(conn: Connection, uuid: str) -> tuple[ProviderRef, Held]:
    """The provider (404 if none) and what it holds, in one query, for
    replace_inventories(held=...)."""
    provider, rows = providers.get_with(conn, _WITH_HELD, uuid)
    return provider, {row.held_rc_name: (row.held_id, row.held_rc_id)
                      for row in rows}


def _held(conn: Connection, provider: ProviderRef) -> Held:
    return {name: (row_id, rc_id) for row_id, rc_id, name
            in conn.execute(_HELD, {"p_id": provider.id})}


def get_inventory(conn: Connection, provider: ProviderRef,
                  resource_class: str) -> Inventory:
    found = get_inventories(conn, provider).get(resource_class)
    if found is None:
        raise errors.InventoryNotFound(
            f"No inventory of class {resource_class} for {provider.uuid}.")
    return found


def _check_usage(conn: Connection, provider: ProviderRef,
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
        _check_reservations(conn, provider, removed, class_names)
        return
    # Ordered by class id, as Placement lists them.
    names = [class_names[rc] for rc in sorted(used)]
    amounts = ", ".join(f"{used[rc]} {class_names[rc]}" for rc in sorted(used))
    raise errors.InventoryInUse(
        f"Inventory for '{', '.join(names)}' on resource provider "
        f"'{provider.uuid}' in use. Allocations still hold {amounts}; "
        "delete or move them before removing the inventory.")


def _check_reservations(conn: Connection, provider: ProviderRef,
                        removed: list[int], class_names: Mapping[int, str]) -> None:
    """InventoryInUse while reservations that have not ended hold a class
    about to be removed: they would be left with no room at all. (A class
    may shrink below what is reserved, as below what is allocated; the
    reservations then report it as `short`.)"""
    held = sorted(rc for rc, (n_live, _n) in reserved_ahead.live_counts(
        conn, provider.id, removed).items() if n_live)
    if held:
        raise errors.InventoryInUse(
            f"Inventory for '{', '.join(class_names[rc] for rc in held)}' on "
            f"resource provider '{provider.uuid}' in use. Reservations that "
            "have not ended hold it; end or cancel them before removing the "
            "inventory.")


_DELETE = delete(_inv).where(_inv.c.id.in_(bindparam("row_ids", expanding=True)))
_UPDATE = (update(_inv).where(_inv.c.id == bindparam("row_id"))
           .values({name: bindparam(f"v_{name}") for name in FIELDS + ("updated_at",)}))
_INSERT = insert(_inv)
_INSERT_RETURNING = insert(_inv).returning(*_inv.c)


def _write(conn: Connection, provider: ProviderRef,
           planned: Mapping[int, Optional[Inventory]],
           existing: Mapping[int, int]) -> Optional[list]:
    """`existing`: class id -> inventory row id, as the provider holds
    them under its lock. Returns the provider's inventory rows as stored
    when the write itself could say (no row kept: every one is new, and
    the database returns inserted rows), else None."""
    now = utcnow()
    gone = [existing[rc] for rc, inv in planned.items()
            if inv is None and rc in existing]
    if gone:
        conn.execute(_DELETE, {"row_ids": sorted(gone)})
    changed, new = [], []
    for rc_id in sorted(planned):
        inv = planned[rc_id]
        if inv is None:
            continue
        if rc_id in existing:
            values = {f"v_{k}": v for k, v in inv.values().items()}
            changed.append(dict(values, row_id=existing[rc_id], v_updated_at=now))
        else:
            new.append(dict(resource_provider_id=provider.id,
                            resource_class_id=rc_id, created_at=now,
                            **inv.values()))
    if gone or changed or new:
        # Inventory rows (but `used`) are facts the candidate engine copies.
        facts_log.touch(conn, (provider.id,))
    # One statement each for every changed and every new class
    # (executemany), not one per class.
    if changed:
        conn.execute(_UPDATE, changed)
    if not new:
        return None if changed else []
    dialect = conn.dialect
    if changed or not (dialect.insert_returning
                       and dialect.insert_executemany_returning):
        conn.execute(_INSERT, new)
        return None
    # The rows as the database stores them (MariaDB's single-precision
    # allocation_ratio among them), as a read would give them.
    return conn.execute(_INSERT_RETURNING, new).all()


def _apply(conn: Connection, provider: ProviderRef,
           planned_by_name: Mapping[str, Optional[Inventory]],
           generation: Optional[int], check_usage: bool,
           held: Optional[Held] = None, whole: bool = False) -> int:
    return _apply_and_store(conn, provider, planned_by_name, generation,
                            check_usage, held, whole)[0]


def _apply_and_store(conn: Connection, provider: ProviderRef,
                     planned_by_name: Mapping[str, Optional[Inventory]],
                     generation: Optional[int], check_usage: bool,
                     held: Optional[Held] = None, whole: bool = False
                     ) -> tuple[int, Optional[dict[str, Inventory]]]:
    """The new generation, and the provider's inventory as stored when the
    write returned it (else None). `held`: what the provider held when
    read before the generation bump; trusted only with a `generation` to
    check, since then the bump succeeds only if nothing changed the
    provider since (without one it is read again under the lock).
    `whole`: the plan is the provider's whole inventory, so every class
    held and not named in it is removed."""
    if generation is None:
        held = None
    known = {name: rc_id for name, (_row_id, rc_id) in (held or {}).items()}
    ids = dict(known)
    ids.update(resource_classes.ids_for(
        conn, [name for name in planned_by_name if name not in known]))
    planned = {ids[name]: inv for name, inv in planned_by_name.items()}
    new_generation = bump_generation(conn, provider, generation)
    if held is None:
        held = _held(conn, provider)
    if whole:
        for name, (_row_id, rc_id) in held.items():
            if name not in planned_by_name:
                ids[name] = rc_id
                planned[rc_id] = None
    names = {v: k for k, v in ids.items()}
    if check_usage:
        _check_usage(conn, provider, planned, names)
    rows = _write(conn, provider, planned,
                  {rc_id: row_id for row_id, rc_id in held.values()})
    if rows is None:
        return new_generation, None
    # By name, as get_inventories orders them.
    stored = sorted((names[row.resource_class_id], row) for row in rows)
    return new_generation, {name: _row(row, name) for name, row in stored}


def replace_inventories(conn: Connection, provider: ProviderRef,
                        inventories: Mapping[str, Inventory],
                        generation: Optional[int],
                        check_usage: bool = True,
                        held: Optional[Held] = None) -> int:
    """Make `inventories` (class name -> Inventory) the provider's whole
    inventory; classes not named are removed. Returns the new generation.

    ConcurrentUpdate (409) if `generation` is stale (None skips the
    check), Invalid (400) for unknown classes, InventoryInUse (409) when
    a removed class still has allocations, unless `check_usage` is False
    (a reshape's interim step). `held` is what provider_for_write read
    with the provider, which saves reading it again.
    """
    return _apply(conn, provider, inventories, generation, check_usage, held,
                  whole=True)


def replace_and_read(conn: Connection, provider: ProviderRef,
                     inventories: Mapping[str, Inventory],
                     generation: Optional[int],
                     held: Optional[Held] = None
                     ) -> tuple[int, dict[str, Inventory]]:
    """replace_inventories, returning also the inventory as stored (what
    get_inventories would read): from the write itself when every class
    is new, else read back."""
    new_generation, stored = _apply_and_store(conn, provider, inventories,
                                              generation, True, held, whole=True)
    if stored is None:
        stored = get_inventories(conn, provider)
    return new_generation, stored


def add_inventory(conn: Connection, provider: ProviderRef, inv: Inventory,
                  generation: Optional[int] = None) -> int:
    """Add one class's inventory; 409 if the provider already has it."""
    resource_classes.ids_for(conn, [inv.resource_class])
    if inv.resource_class in get_inventories(conn, provider):
        raise errors.ConcurrentUpdate(
            f"Update conflict: inventory for {inv.resource_class} on resource "
            f"provider {provider.uuid} already exists; use PUT to change it.")
    return _apply(conn, provider, {inv.resource_class: inv}, generation, True)


def update_inventory(conn: Connection, provider: ProviderRef, inv: Inventory,
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


def delete_inventory(conn: Connection, provider: ProviderRef,
                     resource_class: str,
                     generation: Optional[int] = None) -> int:
    """Remove one class's inventory; 404 if absent, 409 while allocated."""
    if resource_class not in get_inventories(conn, provider):
        raise errors.InventoryNotFound(
            f"No inventory of class {resource_class} found for delete on "
            f"resource provider {provider.uuid}.")
    return _apply(conn, provider, {resource_class: None}, generation, True)


def delete_all_inventories(conn: Connection, provider: ProviderRef,
                           generation: Optional[int] = None) -> int:
    """Remove every inventory of the provider; 409 while any is allocated."""
    return replace_inventories(conn, provider, {}, generation)
