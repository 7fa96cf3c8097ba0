"""Reservations: room held on providers for a window of time, and how
they are written (docs/reservations.md has the rules and the API).

Every write takes its locks in the claims' order (ledger/allocations.py),
inside one transaction, so two writers racing for the last room never
both win, on SQLite, MariaDB and PostgreSQL alike:

0. the checks' first phase (quota locks its project trees), before any
   other lock, as for a claim;
1. the reservation's row lock, when the write changes one, read together
   with the database's now: every decision of the write is made against
   that one instant;
2. the providers it reserves on, lowest id first, with the row lock a
   claim's generation bump takes. Their generations do not move: a
   reservation changes nothing a provider's generation stands for
   (inventory, traits, aggregates, allocations), and callers that cache
   generations must not see spurious conflicts;
3. only then read inventories (with what is allocated) and the windows
   other reservations hold, check, and write;
4. the checks' second phase, then the charge each keeps for the change,
   if it keeps one (quota's lease hours: quota/reserved.py).

Giving room back (cancelling, ending, shrinking an amount, leaving a
provider) takes no provider lock, as deleting an allocation takes none: it
can only make room, whatever a racing writer reads.
"""
from __future__ import annotations

import uuid as uuidlib
from functools import lru_cache
from typing import Iterable, Mapping, Optional

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import (
    consumers, draws, lookup, marker, reservation_reads, reservation_room,
    resource_classes, windows)
from placement_lite.ledger import reservation_amounts as amounts_rows
from placement_lite.ledger.allocations import ClaimCheck
from placement_lite.ledger.generations import utcnow
from placement_lite.ledger.reservation_reads import Reservation, ShortEntry
from placement_lite.ledger.timeline import iso

_r, _ra, _rp = t.reservations, t.reservation_amounts, t.resource_providers
# A new reservation starts at the generation one write gives, as a
# consumer does.
FIRST_GENERATION = 1
Key = tuple[int, int]
# provider uuid -> class name -> amount, as the API gives them.
Allocations = Mapping[str, Mapping[str, int]]


# Resolving and locking ----------------------------------------------------------

def _resolve(conn: Connection, allocations: Allocations
             ) -> tuple[dict[Key, int], dict[Key, tuple[str, str]]]:
    """(provider id, class id) -> amount, and -> (provider uuid, class
    name); Invalid (400) naming unknown providers and classes."""
    rcs = resource_classes.ids_for(
        conn, {c for res in allocations.values() for c in res},
        lambda missing: ("Unable to reserve: No such resource class "
                         f"{', '.join(missing)}."))
    rps = lookup.ids_by_name(
        conn, _rp.c.uuid, _rp.c.id, allocations, lambda missing: (
            "Unable to reserve: No such resource provider "
            + ", ".join(f"'{u}'" for u in missing) + "."))
    amounts, names = {}, {}
    for rp_uuid, resources in allocations.items():
        for name, amount in resources.items():
            key = (rps[rp_uuid], rcs[name])
            amounts[key], names[key] = amount, (rp_uuid, name)
    return amounts, names


@lru_cache(maxsize=8)
def _provider_lock(dialect_name: str):
    # FOR NO KEY UPDATE on PostgreSQL, the lock a claim's UPDATE of the
    # generation takes; FOR UPDATE on MariaDB, an exclusive record lock
    # like the UPDATE's. SQLite has none: BEGIN IMMEDIATE already made
    # this the only writer. Ordered by id, so locks come in id order.
    return (select(_rp.c.id, _rp.c.uuid)
            .where(_rp.c.id.in_(bindparam("ids", expanding=True)))
            .order_by(_rp.c.id).with_for_update(key_share=True))


def lock_providers(conn: Connection, providers: Mapping[int, str]) -> None:
    """Step 2: lock the providers (id -> uuid), lowest id first. One
    deleted (or its id reused) since its id was read is a lost race,
    which run_write retries in a new transaction."""
    if not providers:
        return
    rows = conn.execute(_provider_lock(conn.dialect.name),
                        {"ids": sorted(providers)}).all()
    if {(row.id, row.uuid) for row in rows} != set(providers.items()):
        raise errors.RaceLost(
            "Unable to reserve: a resource provider was deleted meanwhile; "
            "try again.")


def _locked(conn: Connection, uuid: str, checks: Iterable[ClaimCheck],
            new_project: Optional[str] = None):
    """Steps 0 and 1 for a write to an existing reservation: the row
    (owner names, db_now) under its lock, and the checks' second phases.
    The checks are told the owner before the lock is taken (as a claim's
    are): an owner changed meanwhile is a lost race."""
    checks = list(checks)
    seen = None
    if checks:
        seen = conn.execute(reservation_reads.row_statement(
            conn.dialect.name, False), {"r_uuid": uuid}).first()
        if seen is None:
            raise reservation_reads.not_found(uuid)
    projects = {p for p in (seen and seen.project, new_project) if p}
    after = [check.before_write(conn, projects) for check in checks]
    row = conn.execute(reservation_reads.row_statement(conn.dialect.name, True),
                       {"r_uuid": uuid}).first()
    if row is None:
        raise reservation_reads.not_found(uuid)
    if seen is not None and row.project != seen.project:
        raise errors.RaceLost(
            f"Reservation {uuid} changed owner meanwhile; try again.")
    return row, after


@lru_cache(maxsize=8)
def _before_create(dialect_name: str):
    """The database's now, whether the id is taken, and the owner's row
    ids: one round trip for all that a create decides before locking."""
    def named(table, column, param):
        return (select(table.c.id).where(column == bindparam(param))
                .scalar_subquery())
    return select(clock.now_expr(dialect_name).label("db_now"),
                  named(_r, _r.c.uuid, "r_uuid").label("taken"),
                  *draws.marker_columns(),
                  windows.longest_expr().label("longest"),
                  named(t.projects, t.projects.c.external_id, "project")
                  .label("project"),
                  named(t.users, t.users.c.external_id, "user").label("user"))


# Checking room -------------------------------------------------------------------

def _window(start: int, end: int, now: int) -> int:
    """The start as stored (a start in the past means now); Invalid
    unless the end comes after it."""
    stored = max(start, now)
    if end <= stored:
        past = " (a start in the past means now)" if start < now else ""
        raise errors.Invalid(
            f"Unable to reserve: the end ({iso(end)}) must be after the start "
            f"({iso(stored)}{past}).")
    return stored


_BOOK = (update(t.inventories)
         .where(t.inventories.c.resource_provider_id.in_(bindparam("rps", expanding=True)),
                t.inventories.c.resource_class_id.in_(bindparam("rcs", expanding=True)))
         .values(booked=t.inventories.c.booked + 1))


def _admit(conn: Connection, amounts: Mapping[Key, int],
           names: Mapping[Key, tuple[str, str]], start: int, end: int,
           spans=None, reservation_id: Optional[int] = None):
    """Steps 2 and 3: lock the providers, read, and refuse unless each
    amount fits over its spans (`spans(key)`; the whole window when
    None). Returns the room read, for the answer's shortfalls.

    The inventory rows reserved on are written too (`booked`), after the
    providers' locks as a claim's `used` is: on Galera, the provider
    locks bind only the node that took them, and it is a write to the
    same row that makes certification refuse one of two writers racing
    on two nodes. (The IN lists may match a few more rows than the keys:
    a wider write set, never a narrower one.)"""
    lock_providers(conn, {key[0]: names[key][0] for key in amounts})
    if amounts:
        conn.execute(_BOOK, {"rps": sorted({rp for rp, _rc in amounts}),
                             "rcs": sorted({rc for _rp, rc in amounts})})
    room = reservation_room.read(conn, amounts, start, end)
    for key in sorted(amounts):
        reservation_room.check(room, key, amounts[key],
                               spans(key) if spans else [(start, end)],
                               names[key], reservation_id)
    return room


def _raised(old: Mapping[Key, int], old_window: tuple[int, int],
            amounts: Mapping[Key, int], start: int, end: int):
    """For a change: the spans of [start, end) where the reservation
    would hold more at a key than it did. Only there is room checked:
    like a claim that raises no usage, a change that holds no more
    anywhere (shorter, or smaller) is let through even where an
    inventory shrank under it."""
    def spans(key: Key) -> list[tuple[int, int]]:
        if amounts[key] > old.get(key, 0):
            return [(start, end)]
        outside = [(start, min(end, old_window[0])), (max(start, old_window[1]), end)]
        return [(s, e) for s, e in outside if s < e]
    return spans


def _entries(room, reservation_id: int, amounts: Mapping[Key, int],
             names: Mapping[Key, tuple[str, str]], start: int, end: int
             ) -> tuple[ShortEntry, ...]:
    return tuple(ShortEntry(*names[(s.provider_id, s.class_id)], s.start, s.end,
                            s.free)
                 for s in reservation_room.shortfalls(room, reservation_id,
                                                      amounts, start, end))


def _by_uuid(names: Mapping[Key, tuple[str, str]],
             amounts: Mapping[Key, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for key, amount in amounts.items():
        rp_uuid, rc_name = names[key]
        out.setdefault(rp_uuid, {})[rc_name] = amount
    return out


# The checks' second phase, and what they charge -----------------------------------

def _by_class(names: Mapping[int, str], amounts: Mapping[Key, int]
              ) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_rp, rc), amount in amounts.items():
        out[names[rc]] = out.get(names[rc], 0) + amount
    return out


def _stored(conn: Connection, reservation_id: int) -> dict[str, int]:
    """What a stored reservation holds per class name."""
    rc, amount = _ra.c.resource_class_id, _ra.c.amount
    held = dict(conn.execute(select(rc, func.sum(amount))
                             .where(_ra.c.reservation_id == reservation_id)
                             .group_by(rc)).all())
    names = resource_classes.names_for(conn, held)
    return {names[k]: int(v) for k, v in held.items()}


def _finish(conn: Connection, after, uuid: str, now: int, changes) -> None:
    """Step 4. A check whose second phase has a `charge` is told each
    (project, old, new, event) of `changes()`: old and new are the
    reservation as an account of what was reserved sees it, (start, end,
    {class name: amount over all providers}), or None; event None lets
    the account name the change. `changes` is called only then, so only
    an account pays for reading what the reservation held."""
    for check in after:
        check(conn)
    charges = [check.charge for check in after if hasattr(check, "charge")]
    for project, old, new, event in (changes() if charges else ()):
        for charge in charges:
            charge(conn, project, uuid, old, new, now=now, event=event)


# The writes ------------------------------------------------------------------------

def create(conn: Connection, uuid: Optional[str], project_id: str,
           user_id: str, start: int, end: int, allocations: Allocations,
           checks: Iterable[ClaimCheck] = ()) -> Reservation:
    """Reserve `allocations` over [start, end): 409 ReservationNoRoom
    unless every instant of the window (from now on) has room."""
    uuid = uuid or str(uuidlib.uuid4())
    amounts, names = _resolve(conn, allocations)
    after = [check.before_write(conn, {project_id}) for check in checks]
    pre = conn.execute(_before_create(conn.dialect.name), {
        "r_uuid": uuid, "project": project_id, "user": user_id,
        "marker": marker.class_name(uuid)}).one()
    if pre.taken is not None:
        raise errors.ReservationExists(
            f"Unable to reserve: reservation {uuid} already exists. Change it "
            f"with PUT /reservations/{uuid}, or choose another id.")
    now = int(pre.db_now)
    start = _window(start, end, now)
    # Created on first use, as a consumer's owner is.
    project = (pre.project if pre.project is not None
               else consumers.ensure_project(conn, project_id))
    user = pre.user if pre.user is not None else consumers.ensure_user(conn, user_id)
    _admit(conn, amounts, names, start, end)
    try:
        row_id = conn.execute(insert(_r).values(
            uuid=uuid, project_id=project, user_id=user, start_at=start,
            end_at=end, generation=FIRST_GENERATION, created_at=utcnow())
        ).inserted_primary_key[0]
    except IntegrityError:
        raise errors.RaceLost(
            f"Reservation {uuid} was created by another request at the same "
            "time; try again.")
    # Its marker class: a flavor names it to draw from the reservation.
    draws.ensure_marker(conn, uuid, row_id, pre)
    amounts_rows.store(conn, row_id, amounts, start, end, pre.longest)
    amounts_rows.log(conn, {rp for rp, _rc in amounts})
    _finish(conn, after, uuid, now, lambda: [(project_id, None, (
        start, end, _by_class({k[1]: n[1] for k, n in names.items()}, amounts)),
        None)])
    return Reservation(row_id, uuid, project_id, user_id, start, end,
                       FIRST_GENERATION, _by_uuid(names, amounts), now)


def replace(conn: Connection, uuid: str, generation: int, start: int,
            end: int, allocations: Allocations,
            project_id: Optional[str] = None, user_id: Optional[str] = None,
            checks: Iterable[ClaimCheck] = ()) -> Reservation:
    """Make the reservation hold `allocations` over [start, end), checked
    where it would hold more than before (its own old amounts do not
    count against it). 409 ConcurrentUpdate for a stale generation,
    ReservationEnded once ended, ReservationStarted for moving the start
    of an active one."""
    amounts, names = _resolve(conn, allocations)
    row, after = _locked(conn, uuid, checks, project_id)
    if row.generation != generation:
        raise errors.ConcurrentUpdate(
            f"reservation generation conflict: reservation {uuid} is at "
            f"generation {row.generation}, the request was made against "
            f"generation {generation}. Re-read the reservation and retry.")
    now = int(row.db_now)
    status = reservation_reads.status_at(row.start_at, row.end_at, now)
    if status == "ended":
        raise _ended(uuid, row.end_at, "change")
    if status == "active" and start != row.start_at:
        raise errors.ReservationStarted(
            f"Unable to change reservation {uuid}: it started at "
            f"{iso(row.start_at)}, and the start of an active reservation "
            f"cannot move. Send that start, or end it.")
    if status == "active" and end <= now:
        raise errors.Invalid(
            f"Unable to change reservation {uuid}: the end ({iso(end)}) must "
            f"be after now ({iso(now)}). To end it now, POST "
            f"/reservations/{uuid}/end.")
    start = row.start_at if status == "active" else _window(start, end, now)
    if status == "active":
        # Under the row's exclusive lock: no draw runs meanwhile.
        draws.check_shrink(conn, row.id, uuid, amounts, names)
    old = {(rp, rc): int(n) for rp, rc, n in conn.execute(
        select(_ra.c.resource_provider_id, _ra.c.resource_class_id, _ra.c.amount)
        .where(_ra.c.reservation_id == row.id))}
    # A new owner is created before the providers' locks, as a claim's
    # (and a create's) is: inserting it under them could wait for a claim
    # creating the same project, which waits for those providers.
    owner = {}
    if project_id is not None and project_id != row.project:
        owner["project_id"] = consumers.ensure_project(conn, project_id)
    if user_id is not None and user_id != row.user:
        owner["user_id"] = consumers.ensure_user(conn, user_id)
    live = max(start, now)
    room = _admit(conn, amounts, names, live, end,
                  _raised(old, (row.start_at, row.end_at), amounts, live, end),
                  row.id)
    conn.execute(update(_r).where(_r.c.id == row.id).values(
        start_at=start, end_at=end, generation=_r.c.generation + 1,
        updated_at=utcnow(), **owner))
    conn.execute(delete(_ra).where(_ra.c.reservation_id == row.id))
    amounts_rows.store(conn, row.id, amounts, start, end)
    amounts_rows.log(conn, {rp for rp, _rc in old} | {rp for rp, _rc in amounts})

    def changes():
        rcs = resource_classes.names_for(conn, {rc for _rp, rc in old})
        rcs.update({k[1]: n[1] for k, n in names.items()})
        was = (row.start_at, row.end_at, _by_class(rcs, old))
        now_held = (start, end, _by_class(rcs, amounts))
        holder = project_id or row.project
        if holder == row.project:
            return [(holder, was, now_held, None)]
        # A new owner: the old one is refunded, the new one charged.
        return [(row.project, was, None, "change"),
                (holder, None, now_held, "change")]
    _finish(conn, after, uuid, now, changes)
    return Reservation(row.id, uuid, project_id or row.project,
                       user_id or row.user, start, end, row.generation + 1,
                       _by_uuid(names, amounts), now,
                       _entries(room, row.id, amounts, names, live, end))


def _ended(uuid: str, end: int, what: str) -> errors.ReservationEnded:
    return errors.ReservationEnded(
        f"Unable to {what} reservation {uuid}: it ended at {iso(end)}. An "
        "ended reservation can only be deleted from the records.")


def cancel(conn: Connection, uuid: str,
           checks: Iterable[ClaimCheck] = ()) -> None:
    """Cancel a pending reservation, or remove an ended one from the
    records; 409 ReservationStarted for an active one."""
    row, after = _locked(conn, uuid, checks)
    now = int(row.db_now)
    if reservation_reads.status_at(row.start_at, row.end_at, now) == "active":
        raise errors.ReservationStarted(
            f"Unable to cancel reservation {uuid}: it is active (it started "
            f"at {iso(row.start_at)}). End it with POST /reservations/{uuid}/end.")
    # Read before the rows go, and only if an account will ask.
    held = (_stored(conn, row.id)
            if any(hasattr(check, "charge") for check in after) else {})
    # An ended reservation's drawn allocations go with its record.
    draws.release(conn, row.id)
    if row.end_at > now:
        # A pending one: the room it held ahead returns. (An ended one
        # counts nowhere already.)
        amounts_rows.log(conn, amounts_rows.providers_of(conn, row.id))
    conn.execute(delete(_ra).where(_ra.c.reservation_id == row.id))
    conn.execute(delete(_r).where(_r.c.id == row.id))
    draws.drop_marker(conn, uuid)
    _finish(conn, after, uuid, now, lambda: [
        (row.project, (row.start_at, row.end_at, held), None, None)])


def end(conn: Connection, uuid: str,
        checks: Iterable[ClaimCheck] = ()) -> Reservation:
    """End an active reservation now: its room returns from this instant.
    409 ReservationNotStarted for a pending one (cancel it instead),
    ReservationEnded for one already ended."""
    row, after = _locked(conn, uuid, checks)
    now = int(row.db_now)
    status = reservation_reads.status_at(row.start_at, row.end_at, now)
    if status == "ended":
        raise _ended(uuid, row.end_at, "end")
    if status == "pending":
        raise errors.ReservationNotStarted(
            f"Unable to end reservation {uuid}: it has not started (it starts "
            f"at {iso(row.start_at)}). Cancel it with DELETE /reservations/{uuid}.")
    conn.execute(update(_r).where(_r.c.id == row.id).values(
        end_at=now, generation=_r.c.generation + 1, updated_at=utcnow()))
    conn.execute(update(_ra).where(_ra.c.reservation_id == row.id)
                 .values(end_at=now))
    # What its consumers drew ends with it, in this transaction.
    draws.release(conn, row.id)
    amounts_rows.log(conn, amounts_rows.providers_of(conn, row.id))

    def changes():
        held = _stored(conn, row.id)
        return [(row.project, (row.start_at, row.end_at, held),
                 (row.start_at, now, held), None)]
    _finish(conn, after, uuid, now, changes)
    return reservation_reads.get(conn, uuid)
