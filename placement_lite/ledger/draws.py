"""Allocations drawn from a reservation (docs/reservations.md, "Using a
reservation").

Every allocation is either open (it has no end) or drawn from a
reservation R (it ends with R). A consumer's allocation on provider P
that names R's marker class (ledger/marker.py) draws its other classes on
P from R: the rows carry `reservation_id`, and each inventory row's
`drawn` says how much of its `used` is drawn. What takes room in time is
then

    load(P, c, t) = (used - drawn)(P, c) + sum over R covering t of R.amount(P, c)

so a drawn amount is never counted twice: it lives inside R's amount.

Locks, in the order every writer takes them (no cycles):

  quota trees -> reservation rows -> consumers -> providers -> inventory rows

A write that draws takes a share lock on each reservation it draws from,
before its consumers (`plan`); ending, cancelling or shrinking a
reservation takes the row's exclusive lock first, so it never runs
between a draw's checks and its commit. The sum a draw checks is read
under the providers' locks (`check_totals`), which every draw on the same
provider takes too.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Mapping, Optional

from sqlalchemy import bindparam, delete, exists, func, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.ledger import capacity, consumers, marker, resource_classes
from placement_lite.ledger.timeline import iso

_r, _ra, _a = t.reservations, t.reservation_amounts, t.allocations
Key = tuple[int, int]


def marker_of(resources: Iterable[str], where: str) -> Optional[str]:
    """The reservation uuid a provider's classes name through a marker
    class, or None; Invalid when they name more than one."""
    found = {marker.reservation_uuid(name) for name in resources
             if name.startswith(marker.PREFIX)} - {None}
    if len(found) > 1:
        raise errors.Invalid(
            f"Unable to allocate inventory: the allocations {where} name "
            f"{len(found)} reservations' classes; one provider's allocations "
            "of a consumer draw from one reservation at most.")
    return next(iter(found), None)


def is_marker(name: str) -> bool:
    return marker.reservation_uuid(name) is not None


@dataclass
class Plan:
    """What a write draws: (consumer uuid, provider uuid) -> reservation
    id; what each reservation holds, (reservation id, provider id, class
    id) -> amount; and the reservations' uuids by id."""
    by_consumer: dict[tuple[str, str], int] = field(default_factory=dict)
    held: dict[tuple[int, int, int], int] = field(default_factory=dict)
    uuids: dict[int, str] = field(default_factory=dict)


@lru_cache(maxsize=8)
def _share_lock(dialect_name: str):
    # FOR SHARE (LOCK IN SHARE MODE on MariaDB): draws from one
    # reservation run side by side, and the end, cancel or change that
    # takes its exclusive lock waits for them (and they for it). SQLite
    # has no row locks: BEGIN IMMEDIATE already made us the only writer.
    owner = (select(t.projects.c.external_id)
             .where(t.projects.c.id == _r.c.project_id).scalar_subquery())
    return (select(_r.c.id, _r.c.uuid, owner.label("project"), _r.c.start_at,
                   _r.c.end_at, clock.now_expr(dialect_name).label("db_now"))
            .where(_r.c.uuid.in_(bindparam("uuids", expanding=True)))
            .order_by(_r.c.id).with_for_update(read=True))


_HELD = select(_ra.c.reservation_id, _ra.c.resource_provider_id,
               _ra.c.resource_class_id, _ra.c.amount).where(
    _ra.c.reservation_id.in_(bindparam("ids", expanding=True)))


def _projects_after(writes, stored) -> dict[str, str]:
    """consumer uuid -> the project that owns it after the write."""
    out = {}
    for w in writes:
        consumer = stored.get(w.consumer_uuid)
        out[w.consumer_uuid] = w.project_id or (
            consumer.project_id if consumer is not None else w.incomplete_owner[0])
    return out


def to_check(amounts, rcs: Mapping[str, int],
             drawing: Mapping[tuple[int, int, int], int], *rest):
    """capacity.check's arguments for a write: its amounts without the
    marker classes (a marker needs no inventory: it names the reservation
    drawn from, and takes no room), `rest` as given, and what it draws
    at each (provider, class)."""
    markers = {rc for name, rc in rcs.items() if is_marker(name)}
    drawn_now: dict[Key, int] = defaultdict(int)
    for (_rid, rp, rc), n in drawing.items():
        drawn_now[(rp, rc)] += n
    return ({k: v for k, v in amounts.items() if k[1] not in markers}, *rest,
            dict(drawn_now))


def plan(conn: Connection, writes, rcs: Mapping[str, int],
         rps: Mapping[str, int], stored) -> Optional[Plan]:
    """Find the draws among `writes` (ledger.allocations.ConsumerWrite),
    lock their reservations (shared) and refuse what may not draw:
    a reservation that does not exist or is not active at the database's
    now, one of another project than the consumer's after the write
    (`stored`: consumer uuid -> Consumer, as read before), or a class the
    reservation does not hold on that provider. None when nothing draws
    (no statement)."""
    wanted: dict[tuple[str, str], str] = {}
    for w in writes:
        for rp_uuid, resources in w.allocations.items():
            found = marker_of(resources, f"of consumer {w.consumer_uuid} on "
                                         f"resource provider {rp_uuid}")
            if found is not None:
                wanted[(w.consumer_uuid, rp_uuid)] = found
    if not wanted:
        return None
    rows = {row.uuid: row for row in conn.execute(
        _share_lock(conn.dialect.name), {"uuids": sorted(set(wanted.values()))})}
    out = Plan()
    for row in rows.values():
        out.uuids[row.id] = row.uuid
    for rid, rp, rc, amount in conn.execute(
            _HELD, {"ids": sorted(out.uuids)}) if out.uuids else ():
        out.held[(rid, rp, rc)] = int(amount)
    by_write = {w.consumer_uuid: w for w in writes}
    owners = _projects_after(writes, stored)
    for (consumer_uuid, rp_uuid), r_uuid in sorted(wanted.items()):
        row = rows.get(r_uuid)
        mark = marker.class_name(r_uuid)
        if row is None:
            raise errors.ReservationNotActive(
                f"Unable to allocate inventory: reservation {r_uuid} does not "
                f"exist, so class {mark} draws from nothing.")
        now = int(row.db_now)
        if not row.start_at <= now < row.end_at:
            when = (f"starts at {iso(row.start_at)}" if now < row.start_at
                    else f"ended at {iso(row.end_at)}")
            raise errors.ReservationNotActive(
                f"Unable to allocate inventory: reservation {r_uuid} is not "
                f"active (it {when}; now is {iso(now)}). A claim draws from a "
                "reservation only inside its window.")
        project = owners[consumer_uuid]
        if project != row.project:
            raise errors.ReservationOtherProject(
                f"Unable to allocate inventory: reservation {r_uuid} is held "
                f"by project {row.project}, and consumer {consumer_uuid} "
                f"belongs to project {project}. Only the holder's consumers "
                "draw from it.")
        rp = rps[rp_uuid]
        for name in by_write[consumer_uuid].allocations[rp_uuid]:
            if is_marker(name):
                continue
            if (row.id, rp, rcs[name]) not in out.held:
                raise errors.ReservationNotHeld(
                    f"Unable to allocate inventory: reservation {r_uuid} holds "
                    f"no {name} on resource provider {rp_uuid}, so the "
                    f"allocation of {name} there cannot draw from it. Claim "
                    f"it without {mark}, or reserve it.")
        out.by_consumer[(consumer_uuid, rp_uuid)] = row.id
    return out


_DRAWN = (select(_a.c.reservation_id, _a.c.resource_provider_id,
                 _a.c.resource_class_id, func.sum(_a.c.used))
          .where(_a.c.reservation_id.in_(bindparam("ids", expanding=True)))
          .group_by(_a.c.reservation_id, _a.c.resource_provider_id,
                    _a.c.resource_class_id))


def check_totals(conn: Connection, plan: Plan,
                 drawing: Mapping[tuple[int, int, int], int],
                 provider_names: Mapping[int, str],
                 class_names: Mapping[int, str]) -> None:
    """Refuse unless what each reservation has given out at each key,
    with this write's draws (`drawing`), fits what it holds there. Called
    under the providers' locks, after the writers' old rows are gone (so
    they are not counted twice) and before the new ones are inserted."""
    if not drawing:
        return
    given = {(rid, rp, rc): int(n) for rid, rp, rc, n in conn.execute(
        _DRAWN, {"ids": sorted({key[0] for key in drawing})})}
    for key in sorted(drawing):
        rid, rp, rc = key
        held, already = plan.held.get(key, 0), given.get(key, 0)
        if already + drawing[key] > held:
            raise errors.ReservationOverdrawn(
                f"Unable to allocate inventory: reservation {plan.uuids[rid]} "
                f"holds {held} of {class_names[rc]} on resource provider "
                f"{provider_names[rp]}, {already} already drawn; requested "
                f"{drawing[key]}.")


def drawn_by_key(conn: Connection, reservation_id: int) -> dict[Key, int]:
    """(provider id, class id) -> what the reservation has given out."""
    return {(rp, rc): int(n) for _rid, rp, rc, n in conn.execute(
        _DRAWN, {"ids": [reservation_id]})}


def check_shrink(conn: Connection, reservation_id: int, r_uuid: str,
                 amounts: Mapping[Key, int],
                 names: Mapping[Key, tuple[str, str]]) -> None:
    """A change of an active reservation may not hold less than it has
    given out anywhere. Called under the reservation's exclusive lock, so
    no draw runs meanwhile."""
    own = resource_classes.find(conn, marker.class_name(r_uuid))
    for (rp, rc), n in sorted(drawn_by_key(conn, reservation_id).items()):
        if own is not None and rc == own.id:
            continue  # its marker rows, which it does not hold
        if n and amounts.get((rp, rc), 0) < n:
            where = names.get((rp, rc))
            what = (f"{where[1]} on resource provider {where[0]}" if where
                    else f"class id {rc} on provider id {rp}")
            raise errors.ReservationOverdrawn(
                f"Unable to change reservation {r_uuid}: it has given out {n} "
                f"of {what} to its consumers' allocations, more than the "
                f"{amounts.get((rp, rc), 0)} it would hold. Remove those "
                "allocations first, or end the reservation.")


def release(conn: Connection, reservation_id: int) -> int:
    """Delete every allocation drawn from the reservation and its marker
    rows, in the caller's transaction (which holds the reservation's
    exclusive lock): the consumers are locked (their generations move, as
    any change of their allocations moves them), usage, drawn and the
    usage summary move back, and consumers left with nothing go, as
    Placement removes them. No provider lock: this only frees room."""
    ids = sorted(set(conn.scalars(select(_a.c.consumer_id).where(
        _a.c.reservation_id == reservation_id))))
    if not ids:
        return 0
    c = t.consumers
    uuids = conn.scalars(select(c.c.uuid).where(c.c.id.in_(ids))).all()
    stored = consumers.get_many(conn, uuids)
    for uuid in sorted(stored):
        consumers.bump(conn, stored[uuid])
    by_id = {consumer.id: consumer for consumer in stored.values()}
    rows = conn.execute(select(_a.c.consumer_id, _a.c.resource_provider_id,
                               _a.c.resource_class_id, _a.c.used,
                               _a.c.reservation_id)
                        .where(_a.c.consumer_id.in_(sorted(by_id)))).all()
    before: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    after: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    freed: dict[Key, int] = defaultdict(int)
    for cid, rp, rc, n, rid in rows:
        before[cid][rc] += int(n)
        if rid == reservation_id:
            freed[(rp, rc)] -= int(n)
        else:
            after[cid][rc] += int(n)
    conn.execute(delete(_a).where(_a.c.reservation_id == reservation_id,
                                  _a.c.consumer_id.in_(sorted(by_id))))
    capacity.add_usage(conn, freed, drawn=freed)
    deltas = usage_summary.Deltas()
    for cid, consumer in by_id.items():
        deltas.holding(consumer.owner, cid, dict(before[cid]), -1)
        deltas.holding(consumer.owner, cid, dict(after[cid]), 1)
    consumers.delete_if_empty(conn, by_id)
    usage_summary.apply(conn, deltas)
    return sum(1 for _cid, _rp, _rc, _n, rid in rows if rid == reservation_id)


# After a natural end -------------------------------------------------------------

def ended_with_draws(conn: Connection, limit: int = 1000) -> list[str]:
    """Uuids of reservations that have ended and still have drawn rows
    (or marker rows) on record: what `sweep` removes."""
    return list(conn.scalars(
        select(_r.c.uuid).where(_r.c.end_at <= clock.now_expr(conn.dialect.name),
                                exists().where(_a.c.reservation_id == _r.c.id))
        .order_by(_r.c.id).limit(limit)))


def sweep(conn: Connection, r_uuid: str) -> int:
    """Remove what an ended reservation gave out, as an early end does,
    under the reservation's exclusive lock (the lock order of an end:
    the reservation, then its consumers); the rows removed. A
    reservation not ended (or gone) is left alone."""
    row = conn.execute(select(_r.c.id, _r.c.end_at,
                              clock.now_expr(conn.dialect.name).label("db_now"))
                       .where(_r.c.uuid == r_uuid).with_for_update()).first()
    if row is None or row.end_at > row.db_now:
        return 0
    return release(conn, row.id)


def marker_columns():
    """Columns for a create's first round trip (bind parameter `marker`:
    the class's name): whether the marker class exists already."""
    rc = t.resource_classes
    return (select(rc.c.id).where(rc.c.name == bindparam("marker"))
            .scalar_subquery().label("marker_id"),)


def ensure_marker(conn: Connection, r_uuid: str, reservation_id: int, pre) -> None:
    """Create the reservation's marker class unless it exists (`pre`:
    the row marker_columns read), so a flavor can name it and GET
    /resource_classes/<it> answers 200. Its id comes from the
    reservation's (t.MARKER_CLASS_MIN_ID), so no other writer wants it."""
    if pre.marker_id is not None:
        return
    try:
        conn.execute(insert(t.resource_classes).values(
            id=t.MARKER_CLASS_MIN_ID + reservation_id, name=marker.class_name(r_uuid)))
    except IntegrityError:
        # The name was made meanwhile (a PUT /resource_classes of it): a
        # new transaction reads it.
        raise errors.RaceLost(
            f"Another request created a resource class while reservation "
            f"{r_uuid}'s was being created; try again.")


def drop_marker(conn: Connection, r_uuid: str) -> None:
    """Delete the reservation's marker class unless something still
    refers to it (an inventory, an allocation, a reservation's amount):
    then it stays, and does no harm. One statement."""
    rc = t.resource_classes
    unused = [~exists().where(table.c.resource_class_id == rc.c.id)
              for table in (t.inventories, t.allocations, t.reservation_amounts)]
    conn.execute(delete(rc).where(rc.c.name == marker.class_name(r_uuid), *unused))
