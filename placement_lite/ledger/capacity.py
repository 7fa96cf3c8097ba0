"""What is used, and does a claim fit?

Each inventory row carries what is allocated of it (`used`), which every
allocation write moves by its deltas in its own transaction (add_usage).
A claim is checked against that row after the providers' generations were
bumped and the deltas added, so it includes every claim that committed
before ours took the row locks.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Mapping, Optional

from sqlalchemy import (
    BigInteger, Integer, and_, bindparam, case, exists, or_, select, update)
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import clock, facts_log
from placement_lite.db import tables as t
from placement_lite.ledger import reserved_ahead

# The largest amount anything may name: an inventory field, an allocation,
# a requested resource, a lease reservation, a quota limit or delta. It is
# Placement's bound (a signed 32-bit integer, as its schemas and Keystone's
# say), whatever wider columns we store amounts in.
MAX_AMOUNT = 2**31 - 1


def usage(conn: Connection, provider_ids) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> what is allocated there, for the given
    providers (classes with inventory only; nothing is allocated without)."""
    inv = t.inventories
    rows = conn.execute(
        select(inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.used)
        .where(inv.c.resource_provider_id.in_(sorted(set(provider_ids))),
               inv.c.used != 0))
    return {(rp, rc): int(used) for rp, rc, used in rows}


def add_usage(conn: Connection, deltas: Mapping[tuple[int, int], int],
              returning: bool = False,
              drawn: Optional[Mapping[tuple[int, int], int]] = None
              ) -> Optional[dict[tuple[int, int], object]]:
    """Add each delta to the `used` of its (provider id, class id)
    inventory row, in one statement; and each of `drawn` (the part of
    the deltas drawn from reservations) to the row's `drawn`, in the same
    statement, so the two never disagree.

    With `returning`, where the backend returns rows from an UPDATE
    (PostgreSQL, SQLite), the rows it changed, as `inventories` gives
    them, after the change: what `check` reads, without reading it
    again. Otherwise None.

    Called by every allocation write inside its transaction. The UPDATE
    takes the rows' locks in the order of the (provider, class) index, so
    writers freeing capacity on providers they do not lock cannot
    deadlock with claimers, who take the provider's lock first and these
    rows after. A key without an inventory row changes nothing: the
    capacity check refuses a claim there, and a write freeing it is
    removing allocations whose inventory a reshape removed.
    """
    returning = returning and conn.dialect.update_returning
    drawn = {k: d for k, d in (drawn or {}).items() if d}
    if drawn:
        # What is drawn is a fact the copies keep beside the windows ahead
        # (candidates/ahead.py): plain candidates count it once. Draws are
        # few beside plain claims, which never log.
        facts_log.touch(conn, {rp for rp, _rc in drawn})
    keys = sorted({k for k, d in deltas.items() if d} | set(drawn))
    if not keys:
        return {} if returning else None
    params = {}
    for i, (rp, rc) in enumerate(keys):
        params.update({f"rp{i}": rp, f"rc{i}": rc,
                       f"d{i}": deltas.get((rp, rc), 0)})
        if drawn:
            params[f"dd{i}"] = drawn.get((rp, rc), 0)
    result = conn.execute(_add_usage_statement(
        len(keys), returning, conn.dialect.name if returning else "",
        bool(drawn)), params)
    if not returning:
        return None
    return {(r.resource_provider_id, r.resource_class_id): r for r in result}


@lru_cache(maxsize=128)
def _add_usage_statement(n: int, returning: bool, dialect_name: str = "",
                         with_drawn: bool = False):
    """add_usage's UPDATE for n keys, built once per n: a claim's hot
    statement, whose building and cache key cost more than its run."""
    inv = t.inventories
    match = [and_(inv.c.resource_provider_id == bindparam(f"rp{i}", type_=Integer),
                  inv.c.resource_class_id == bindparam(f"rc{i}", type_=Integer))
             for i in range(n)]
    values = {"used": inv.c.used + case(
        *[(m, bindparam(f"d{i}", type_=BigInteger)) for i, m in enumerate(match)],
        else_=0)}
    if with_drawn:
        values["drawn"] = inv.c.drawn + case(
            *[(m, bindparam(f"dd{i}", type_=BigInteger)) for i, m in enumerate(match)],
            else_=0)
    stmt = update(inv).where(or_(*match)).values(**values)
    return stmt.returning(*inv.c, _reserved_ahead(dialect_name)) if returning else stmt


def _reserved_ahead(dialect_name: str):
    """Whether any reservation that has not ended holds the row's key: the
    rows a claim checks carry it, so a claim where nothing is reserved
    ahead (every claim, where nobody reserves) reads no reservations."""
    ra, inv = t.reservation_amounts, t.inventories
    return exists().where(
        ra.c.resource_provider_id == inv.c.resource_provider_id,
        ra.c.resource_class_id == inv.c.resource_class_id,
        ra.c.end_at > clock.now_expr(dialect_name)).label("reserved_ahead")


_INVENTORIES = select(t.inventories).where(
    t.inventories.c.resource_provider_id.in_(bindparam("ids", expanding=True)))


@lru_cache(maxsize=8)
def _inventories_to_check(dialect_name: str):
    return select(t.inventories, _reserved_ahead(dialect_name)).where(
        t.inventories.c.resource_provider_id.in_(bindparam("ids", expanding=True)))


def inventories(conn: Connection, provider_ids) -> dict[tuple[int, int], object]:
    rows = conn.execute(_INVENTORIES, {"ids": sorted(set(provider_ids))})
    return {(r.resource_provider_id, r.resource_class_id): r for r in rows}


def capacity_from(total, reserved, ratio) -> float:
    """(total - reserved) * ratio, or 0 when the ratio is not a finite
    number. The API refuses NaN and the infinities, but a row written by
    another tool or an older release may hold one (PostgreSQL stores NaN,
    SQLite the infinities); NaN compares false with everything, so a
    check `used + requested > capacity` would grant any claim."""
    if ratio is None or not math.isfinite(ratio):
        return 0.0
    return (total - reserved) * ratio


def capacity_of(inv) -> float:
    return capacity_from(inv.total, inv.reserved, inv.allocation_ratio)


def ratio_is_finite(column):
    """SQL: the allocation_ratio `column` is a finite number. PostgreSQL
    orders NaN above every number and +Infinity, so a range excludes NaN
    and both infinities there; SQLite stores NaN as NULL, which no
    comparison is true of; MariaDB stores neither. The bound is far above
    the largest ratio accepted (3.40282e+38, which MariaDB's
    single-precision FLOAT rounds up)."""
    return column.between(-1e300, 1e300)


def check(conn: Connection,
          amounts: Mapping[tuple[int, int], list[int]],
          provider_names: Mapping[int, str],
          class_names: Mapping[int, str],
          held: Optional[Mapping[tuple[int, int], int]] = None,
          changed: Optional[Mapping[tuple[int, int], object]] = None,
          drawn: Optional[Mapping[tuple[int, int], int]] = None) -> None:
    """Raise CapacityExceeded unless every amount fits.

    `amounts` maps (provider id, class id) to the amounts the request
    claims there, one per consumer: each must respect min_unit, max_unit
    and step_size, and together they must fit the free capacity.

    Called after the write's deltas are added (add_usage), under the
    providers' row locks: each inventory row's `used` is then the usage
    with this write applied. `held` is what the writing consumers held at
    each key before this write. A provider may hold more than its capacity (its inventory
    shrank under existing allocations); there a write that leaves the
    usage no higher than it was (a resize down, a consumer rewriting what
    it holds, allocations moving between the consumers written) is let
    through, as Placement lets it through, while any write that raises
    the usage is refused. Comparing with what the writers held, rather
    than with a usage read earlier, keeps the rule exact while other
    consumers free capacity concurrently.

    A write that raises the usage of a key must also leave room for the
    most reserved there at any instant from now on (an allocation has no
    end): one more statement reads those reservations, for every such key
    at once, only once every key passed the check without them, and only
    where the inventory rows say something is reserved ahead
    (`reserved_ahead`, read with them). Reservations take the same
    provider locks, so none slips in between.

    `changed`: inventory rows add_usage returned, as they stand after the
    deltas; only what they leave out (a class the write claims without
    changing its usage, or one with no inventory) is read here.

    `drawn`: how much of each key's amounts this write draws from
    reservations. Those amounts still respect the unit limits, but take
    no free room: they live inside their reservation's amount, which
    already counts. Only the open part (no end) is checked against
    capacity, beside the open usage `used - drawn` and the peak
    reserved, and `held` is then what the writers held open there.
    """
    if not amounts:
        return
    invs = dict(changed or {})
    missing = {rp for rp, rc in amounts if (rp, rc) not in invs}
    if missing:
        invs.update(((r.resource_provider_id, r.resource_class_id), r)
                    for r in conn.execute(_inventories_to_check(conn.dialect.name),
                                          {"ids": sorted(missing)}))
    raising = []
    for key in sorted(amounts):
        where = (f"'{class_names[key[1]]}' on resource provider "
                 f"'{provider_names[key[0]]}'")
        open_claim = sum(amounts[key]) - (drawn or {}).get(key, 0)
        kept = held is not None and open_claim <= held.get(key, 0)
        if _check_key(invs.get(key), amounts[key], where, kept,
                      open_claim) and getattr(
                invs[key], "reserved_ahead", True):
            raising.append((key, where))
    if not raising:
        return
    peaks = reserved_ahead.peaks(conn, [key for key, _where in raising])
    for key, where in raising:
        if peaks.get(key):
            _refuse_if_full(invs[key], sum(amounts[key]) - (drawn or {}).get(key, 0),
                            where, peaks[key])


def _check_key(inv, amounts: list[int], where: str, kept: bool,
               open_claim: Optional[int] = None) -> bool:
    """One key's claim against its inventory row, as it stands with the
    write applied, reservations aside. `kept`: the writers held at least
    as much there before, so the usage does not rise. True where the
    write raises the usage: reservations must then leave room too."""
    if inv is None:
        raise errors.CapacityExceeded(
            f"Unable to allocate inventory: Inventory for {where} invalid. "
            "The provider has no inventory of that class.")
    for amount in amounts:
        if amount < inv.min_unit or amount > inv.max_unit or (
                amount % inv.step_size):
            raise errors.CapacityExceeded(
                f"Unable to allocate inventory: Unable to create allocation "
                f"for {where}. The requested amount would violate inventory "
                f"constraints: requested {amount}, min_unit {inv.min_unit}, "
                f"max_unit {inv.max_unit}, step_size {inv.step_size}.")
    if kept:
        return False
    _refuse_if_full(inv, sum(amounts) if open_claim is None else open_claim,
                    where, 0)
    return True


def open_usage(inv) -> int:
    """What an inventory row's allocations take from its room at every
    instant: those with no end. The drawn ones count inside their
    reservations' amounts, over the reservations' windows only."""
    return int(inv.used) - int(getattr(inv, "drawn", 0) or 0)


def _refuse_if_full(inv, requested: int, where: str, reserved_later: int) -> None:
    # What the others hold open: the row's open usage less this write's
    # open amounts (`requested`).
    current = open_usage(inv) - requested
    cap = capacity_of(inv)
    if current + requested + reserved_later <= cap:
        return
    later = (f", held by reservations {reserved_later} (at their peak from "
             "now on)" if reserved_later else "")
    raise errors.CapacityExceeded(
        f"Unable to allocate inventory: Unable to create allocation for "
        f"{where}. The requested amount would exceed the capacity: "
        f"requested {requested}, already used {current}{later}, capacity "
        f"{display(cap)} ((total {inv.total} - reserved {inv.reserved}) "
        f"* allocation_ratio {inv.allocation_ratio}).")


def display(value: float):
    return int(value) if float(value).is_integer() else round(value, 4)
