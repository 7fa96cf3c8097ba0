"""Allocations: what consumers hold on providers, and how claims are written.

Every write follows one order inside one transaction, so racing writers
(threads or processes) can never oversell a provider:

1. bump the generation of every consumer written (its row lock), sorted by
   uuid; a stale caller-supplied consumer_generation is a 409;
2. bump the generation of every provider the write claims on (and, for a
   consumer whose allocations are emptied, of the providers it held),
   sorted by id: the UPDATE takes each provider's row lock; a provider
   deleted meanwhile is RaceLost, which `run_write` retries in a new
   transaction. These are exactly the providers Placement bumps: the
   providers a consumer merely moves away from keep their generation, and
   need no lock, since deleting one's own allocation rows can only free
   capacity;
3. only then add the write's deltas to the `used` of the inventory rows
   it changes (one UPDATE, which locks those rows) and check capacity
   against them: the row locks we now hold mean no other claim can raise
   these providers' usage until we commit, and the reads (READ COMMITTED,
   or SQLite's single writer) see every claim that committed before;
4. write, drop consumers left without allocations, add what changed to
   the usage summary (db/usage_summary.py), run the claim checks.

Claim checks (quota) run in two phases around all of this, in the same
transaction: before step 1 they lock what they decide on and read it, and
after step 4 they check what the write changed.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.ledger import (
    capacity, consumers, draws, lookup, providers, resource_classes)

# Marks a write that does not check the consumer generation (before 1.28).
UNCHECKED = object()


class ClaimCheck(Protocol):
    def before_write(self, conn: Connection, project_ids: set[str]
                     ) -> Callable[[Connection], None]:
        """Called before anything is written, with the external ids of the
        projects whose usage the write may change; returns the check to
        call once the write is done, before commit, on the same
        connection. Either refuses the claim by raising a ledger error."""


@dataclass
class ConsumerWrite:
    """The allocations one consumer should hold after the write.

    `allocations` maps provider uuid -> {class name: used}; empty removes
    every allocation of the consumer (and with them the consumer).
    `project_id`/`user_id` None keep the stored owner (writes before 1.8),
    or give a new consumer `incomplete_owner`, Placement's "incomplete
    consumer" project and user (the deployment may choose them);
    `consumer_type` None keeps the stored type.
    """
    consumer_uuid: str
    project_id: Optional[str]
    user_id: Optional[str]
    allocations: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    consumer_type: Optional[str] = None
    expected_generation: Any = UNCHECKED
    incomplete_owner: tuple[str, str] = (consumers.INCOMPLETE_CONSUMER_ID,
                                         consumers.INCOMPLETE_CONSUMER_ID)


def class_ids(conn: Connection, names: Iterable[str],
              consumer_uuid: Optional[str] = None) -> dict[str, int]:
    who = f" for consumer {consumer_uuid}" if consumer_uuid else ""
    return resource_classes.ids_for(conn, names, lambda missing: (
        f"Unable to allocate inventory{who}: No such resource class "
        f"{', '.join(missing)}. Create custom classes with PUT "
        "/resource_classes/{name} first."))


def provider_ids(conn: Connection, uuids: Iterable[str],
                 hint: Optional[Mapping[str, int]] = None) -> dict[str, int]:
    """uuid -> id; `hint` (a process's copy of uuid -> id, perhaps stale)
    spares the query when it knows every uuid: each id is checked against
    its uuid when the provider is locked (bump_providers)."""
    uuids = set(uuids)
    if hint is not None and all(u in hint for u in uuids):
        return {u: hint[u] for u in uuids}
    rp = t.resource_providers
    return lookup.ids_by_name(conn, rp.c.uuid, rp.c.id, uuids, lambda missing: (
        "Allocation for resource provider "
        + ", ".join(f"'{u}'" for u in missing) + " that does not exist."))


def bump_providers(conn: Connection, ids: Iterable[int],
                   known: Optional[Mapping[int, str]] = None) -> dict[int, str]:
    """Bump each provider's generation, lowest id first; uuid by id.

    Sorted so two writers touching overlapping providers take the row
    locks in the same order and cannot deadlock each other. No generation
    is compared: the caller sent none for these providers. The bump is
    Placement's (an allocation write moves the generation of each
    provider it writes), and its row lock makes the capacity reads fresh.
    """
    ids = sorted(set(ids))
    if not ids:
        return {}
    known = known or {}
    names = {i: known[i] for i in ids if i in known}
    if len(names) != len(ids):
        rp = t.resource_providers
        names.update(conn.execute(select(rp.c.id, rp.c.uuid).where(
            rp.c.id.in_([i for i in ids if i not in names]))).all())
    # Each UPDATE's row count says whether the provider still exists: a
    # provider deleted since its id was read is a lost race (a retry
    # re-validates the request and names the missing provider).
    if len(names) != len(ids) or not all(
            providers.lock_for_claim(conn, provider_id, names[provider_id])
            for provider_id in ids):
        raise errors.RaceLost(
            "Inventory and/or allocations changed while attempting to "
            "allocate: a resource provider was deleted meanwhile; try again.")
    return names


def _holdings(conn: Connection, consumer_ids: list[int]
              ) -> list[tuple[int, int, int, int, Optional[int]]]:
    """(consumer id, provider id, class id, used, reservation id or None)
    of every allocation these
    consumers hold now: the providers an emptied consumer lets go of, what
    the writers held where they claim (for the capacity check), and what
    leaves their owners' usage sums.

    Stable for the whole transaction: only a writer holding a consumer's
    row lock changes its allocations, and we hold these consumers' locks.
    """
    if not consumer_ids:
        return []
    return [(cid, rp, rc, int(n), rid) for cid, rp, rc, n, rid in conn.execute(
        _HOLDINGS, {"ids": sorted(consumer_ids)})]


# Built once: every allocation write of an existing consumer runs them.
_a = t.allocations
_HOLDINGS = select(_a.c.consumer_id, _a.c.resource_provider_id,
                   _a.c.resource_class_id, _a.c.used, _a.c.reservation_id).where(
    _a.c.consumer_id.in_(bindparam("ids", expanding=True)))
_INSERT = insert(_a)
_DROP_HOLDINGS = delete(_a).where(_a.c.consumer_id.in_(bindparam("ids", expanding=True)))


def _by_class(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for rc, used in pairs:
        out[rc] += used
    return out


def _classes_of(w: ConsumerWrite) -> set[str]:
    return {c for resources in w.allocations.values() for c in resources}


def _resolve(conn: Connection, writes: list[ConsumerWrite],
             hint: Optional[Mapping[str, int]] = None
             ) -> tuple[dict[str, int], dict[str, int]]:
    """Class and provider ids for every write, one query each whatever
    the number of consumers (none for providers `hint` knows)."""
    try:
        return (class_ids(conn, set().union(*map(_classes_of, writes))),
                provider_ids(conn, {u for w in writes for u in w.allocations}, hint))
    except errors.Invalid:
        # Rare: look again write by write, so the error names the first
        # consumer at fault, as a caller of this API expects.
        for w in writes:
            class_ids(conn, _classes_of(w), w.consumer_uuid)
            provider_ids(conn, w.allocations)
        raise


def replace(conn: Connection, writes: list[ConsumerWrite],
            claim_checks: Iterable[ClaimCheck] = (),
            provider_hint: Optional[Mapping[str, int]] = None) -> None:
    """Set the allocations of each consumer in `writes`, all or nothing.
    `provider_hint`: provider uuid -> id as a process's copy of the facts
    had it (see provider_ids); a retry after a lost race goes without.

    The steps below run in the module docstring's order, and racing
    writers depend on it: each step that locks or writes stays visible
    here, in that order.
    """
    uuids = _consumer_uuids(writes)
    rcs, rps = _resolve(conn, writes, provider_hint)
    stored = consumers.get_many(conn, uuids)
    after_write = [check.before_write(conn, _owners(writes, stored))
                   for check in claim_checks]
    # Draws lock their reservations (shared) after quota, before consumers.
    plan = draws.plan(conn, writes, rcs, rps, stored)
    written, existing_ids = _lock_consumers(conn, writes, stored)
    old = _holdings(conn, existing_ids)
    names_by_id = _lock_providers(conn, written, old, rps)
    amounts, rows, deltas, drawing = _new_allocations(written, old, rps, rcs, plan)
    held, moved, drawn_moved = _usage_moves(old, amounts, drawing)
    if existing_ids:
        conn.execute(_DROP_HOLDINGS, {"ids": existing_ids})
    class_names = {v: k for k, v in rcs.items()}
    if plan is not None:
        draws.check_totals(conn, plan, drawing, names_by_id, class_names)
    changed = capacity.add_usage(conn, moved, returning=True, drawn=drawn_moved)
    capacity.check(conn, *draws.to_check(amounts, rcs, drawing, names_by_id,
                                         class_names, held, changed))
    if rows:
        conn.execute(_INSERT, rows)
    consumers.delete_if_empty(conn, existing_ids)
    # After every other lock the write takes; before the claim checks,
    # which count usage from the summary.
    usage_summary.apply(conn, deltas)
    for check in after_write:
        check(conn)


def _consumer_uuids(writes: list[ConsumerWrite]) -> set[str]:
    seen: set[str] = set()
    for w in writes:
        if w.consumer_uuid in seen:
            raise errors.Invalid(
                f"consumer {w.consumer_uuid} appears more than once.")
        seen.add(w.consumer_uuid)
    return seen


# A consumer written, with its owner before the write (None: new).
_Written = tuple[ConsumerWrite, consumers.Consumer,
                 Optional[usage_summary.Owner]]


def _lock_consumers(conn: Connection, writes: list[ConsumerWrite],
                    stored: Mapping[str, consumers.Consumer]
                    ) -> tuple[list[_Written], list[int]]:
    """Step 1: bump each consumer's generation (its row lock) or create it,
    sorted by uuid, so that writers of the same consumers lock them in one
    order. Returns the consumers written (one emptied that never existed
    is not) and the ids of those that existed before."""
    written: list[_Written] = []
    existing_ids: list[int] = []
    for w in sorted(writes, key=lambda w: w.consumer_uuid):
        consumer = stored.get(w.consumer_uuid)
        before = None if consumer is None else consumer.owner
        if w.expected_generation is not UNCHECKED:
            consumers.check_generation(consumer, w.consumer_uuid,
                                       w.expected_generation)
        if consumer is not None:
            consumers.claim(conn, consumer,
                            w.project_id or consumer.project_id,
                            w.user_id or consumer.user_id, w.consumer_type)
            existing_ids.append(consumer.id)
        elif w.allocations:
            consumer = consumers.create(
                conn, w.consumer_uuid,
                w.project_id or w.incomplete_owner[0],
                w.user_id or w.incomplete_owner[1], w.consumer_type)
        else:
            continue
        written.append((w, consumer, before))
    return written, existing_ids


def _lock_providers(conn: Connection, written: list[_Written],
                    old: list[tuple[int, int, int, int, Optional[int]]],
                    rps: Mapping[str, int]) -> dict[int, str]:
    """Step 2: lock the providers Placement bumps (those the write claims
    on, and those an emptied consumer lets go of); uuid by id."""
    emptied = {consumer.id for w, consumer, _ in written if not w.allocations}
    touched = {rp for cid, rp, _rc, _n, _r in old if cid in emptied} | set(rps.values())
    return bump_providers(conn, touched, {v: k for k, v in rps.items()})


def _new_allocations(written: list[_Written],
                     old: list[tuple[int, int, int, int, Optional[int]]],
                     rps: Mapping[str, int], rcs: Mapping[str, int],
                     plan: Optional[draws.Plan] = None
                     ) -> tuple[dict[tuple[int, int], list[int]], list[dict],
                                usage_summary.Deltas,
                                dict[tuple[int, int, int], int]]:
    """The allocation rows to insert; the amounts claimed at each
    (provider id, class id), one per consumer, since each must respect
    the inventory's unit limits on its own; what the write changes in
    its owners' usage sums; and what it draws, (reservation id, provider
    id, class id) -> amount (marker classes aside)."""
    amounts: dict[tuple[int, int], list[int]] = defaultdict(list)
    rows = []
    deltas = usage_summary.Deltas()
    drawing: dict[tuple[int, int, int], int] = defaultdict(int)
    held_before: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for cid, _rp, rc, n, _rid in old:
        held_before[cid].append((rc, n))
    for w, consumer, before in written:
        if before is not None:
            deltas.holding(before, consumer.id,
                           _by_class(held_before[consumer.id]), -1)
        now: dict[int, int] = defaultdict(int)
        for rp_uuid, resources in w.allocations.items():
            rid = (plan.by_consumer.get((w.consumer_uuid, rp_uuid))
                   if plan is not None else None)
            for rc_name, used in resources.items():
                key = (rps[rp_uuid], rcs[rc_name])
                amounts[key].append(used)
                now[key[1]] += used
                rows.append({"resource_provider_id": key[0],
                             "consumer_id": consumer.id,
                             "resource_class_id": key[1], "used": used,
                             "reservation_id": rid})
                if rid is not None and not draws.is_marker(rc_name):
                    drawing[(rid, *key)] += used
        deltas.holding(consumer.owner, consumer.id, now, 1)
    return amounts, rows, deltas, dict(drawing)


def _usage_moves(old: list[tuple[int, int, int, int, Optional[int]]],
                 amounts: Mapping[tuple[int, int], list[int]],
                 drawing: Mapping[tuple[int, int, int], int]
                 ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int],
                            dict[tuple[int, int], int]]:
    """What the writers held open (not drawn) where they claim, which the
    capacity check compares the write's open amounts against; how much
    each inventory's `used` moves (the new claims less everything the
    writers held before); and how much its `drawn` moves (likewise, for
    the drawn rows only)."""
    held: dict[tuple[int, int], int] = defaultdict(int)
    moved: dict[tuple[int, int], int] = defaultdict(int)
    drawn: dict[tuple[int, int], int] = defaultdict(int)
    for _cid, rp, rc, n, rid in old:
        moved[(rp, rc)] -= n
        if rid is not None:
            drawn[(rp, rc)] -= n
        elif (rp, rc) in amounts:
            held[(rp, rc)] += n
    for key, claimed in amounts.items():
        moved[key] += sum(claimed)
    for (_rid, rp, rc), n in drawing.items():
        drawn[(rp, rc)] += n
    return held, moved, drawn


def _owners(writes: list[ConsumerWrite],
            stored: Mapping[str, consumers.Consumer]) -> set[str]:
    """The projects whose usage these writes may change: each consumer's
    owner before the write and after it."""
    owners: set[str] = set()
    for w in writes:
        consumer = stored.get(w.consumer_uuid)
        if consumer is not None:
            owners |= {consumer.project_id, w.project_id or consumer.project_id}
        elif w.allocations:
            owners.add(w.project_id or w.incomplete_owner[0])
    return owners


def delete_for_consumer(conn: Connection, consumer_uuid: str) -> None:
    consumer = consumers.get(conn, consumer_uuid)
    if consumer is None:
        raise errors.NotFound(
            f"No allocations for consumer '{consumer_uuid}'.")
    # The consumer's row lock serialises writers of this consumer. The
    # providers keep their generations, as in Placement: freeing
    # capacity needs no provider lock.
    consumers.bump(conn, consumer)
    a = t.allocations
    gone = delete(a).where(a.c.consumer_id == consumer.id)
    held = (a.c.resource_provider_id, a.c.resource_class_id, a.c.used,
            a.c.reservation_id)
    if conn.dialect.delete_returning:
        old = conn.execute(gone.returning(*held)).all()
    else:
        old = conn.execute(select(*held).where(a.c.consumer_id == consumer.id)).all()
        conn.execute(gone)
    freed: dict[tuple[int, int], int] = defaultdict(int)
    undrawn: dict[tuple[int, int], int] = defaultdict(int)
    for rp, rc, n, rid in old:
        freed[(rp, rc)] -= n
        if rid is not None:
            undrawn[(rp, rc)] -= n
    capacity.add_usage(conn, freed, drawn=undrawn)
    conn.execute(delete(t.consumers).where(t.consumers.c.id == consumer.id))
    deltas = usage_summary.Deltas()
    deltas.holding(consumer.owner, consumer.id,
                   _by_class((rc, n) for _rp, rc, n, _rid in old), -1)
    usage_summary.apply(conn, deltas)


def _timestamps(row) -> list:
    return [row.created_at, row.updated_at]


def for_consumer(conn: Connection, consumer_uuid: str):
    """(consumer or None, {provider uuid: {generation, resources}}, stamps)."""
    consumer = consumers.get(conn, consumer_uuid)
    if consumer is None:
        return None, {}, []
    a, rp, rc = t.allocations, t.resource_providers, t.resource_classes
    rows = conn.execute(
        select(rp.c.uuid, rp.c.generation, rc.c.name, a.c.used,
               a.c.created_at, a.c.updated_at)
        .join(rp, rp.c.id == a.c.resource_provider_id)
        .join(rc, rc.c.id == a.c.resource_class_id)
        .where(a.c.consumer_id == consumer.id))
    result: dict[str, dict] = {}
    stamps: list = []
    for row in rows:
        entry = result.setdefault(row.uuid, {"generation": row.generation,
                                             "resources": {}})
        entry["resources"][row.name] = int(row.used)
        stamps += _timestamps(row)
    return consumer, result, stamps


def provider_generation(conn: Connection, rp_uuid: str):
    rp = t.resource_providers
    row = conn.execute(select(rp.c.id, rp.c.generation, rp.c.created_at,
                              rp.c.updated_at)
                       .where(rp.c.uuid == rp_uuid)).first()
    if row is None:
        raise errors.ResourceProviderNotFound(
            f"No resource provider with uuid {rp_uuid} found.")
    return row


def for_provider(conn: Connection, rp_uuid: str):
    """(provider generation, {consumer uuid: ({class: used}, consumer
    generation)}, stamps)."""
    provider = provider_generation(conn, rp_uuid)
    a, c, rc = t.allocations, t.consumers, t.resource_classes
    rows = conn.execute(
        select(c.c.uuid, c.c.generation, rc.c.name, a.c.used, a.c.created_at,
               a.c.updated_at)
        .join(c, c.c.id == a.c.consumer_id)
        .join(rc, rc.c.id == a.c.resource_class_id)
        .where(a.c.resource_provider_id == provider.id))
    result: dict[str, dict] = {}
    stamps: list = _timestamps(provider)
    for row in rows:
        result.setdefault(row.uuid, ({}, row.generation))[0][row.name] = int(row.used)
        stamps += _timestamps(row)
    return provider.generation, result, stamps
