"""Calendars: what is reserved over a period, per provider and per
project, and the reservations behind it. Reads only.

Per provider and class over [start, end): the capacity
(`(total - reserved) * allocation_ratio`, the claims' capacity), what is
allocated now, what is reserved as steps (timeline.steps), and the
intervals that are short: from now on, where something is reserved and
allocated + reserved exceeds the capacity (an inventory shrank under a
reservation, or one was forced in). Per project and class: what it has
reserved, as steps, and which reservations were counted.

"Now" is the database's (db/clock.py). A reservation counts at the
instants of its window [start_at, end_at), so one whose end is not after
now counts nowhere from now on, whether or not anything removed it.
Before now a calendar shows history as it is stored: ended reservations
keep their rows (until someone deletes them) and count at the instants
they covered; cancelled ones were deleted and count nowhere. Allocations
have no history: `allocated` is what is held now, and only the part of
the period from now on can be short.

Each calendar is a fixed number of queries whatever the number of
reservations, each on an index of reservation_amounts or reservations
(db/tables.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple, Optional

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import fleet, providers
from placement_lite.ledger import windows as overlap
from placement_lite.ledger.timeline import Step, steps

DAY = 86400


class ShortStep(NamedTuple):
    """A step without room: [start, end), what is reserved there, and what
    is free (capacity - allocated - reserved: below zero by what is
    missing)."""
    start: int
    end: int
    reserved: int
    free: float


def _whole(value) -> float | int:
    value = float(value)
    return int(value) if value.is_integer() else round(value, 4)


def short_steps(reserved: Iterable[Step], capacity: float, allocated: int,
                since: int) -> list[ShortStep]:
    """The part of `reserved` (steps) from `since` on where something is
    reserved and allocated + reserved exceeds `capacity`. A step with
    nothing reserved is never short, even on a provider left over its
    capacity by a shrunken inventory: no reservation lacks room there."""
    out = []
    for s in reserved:
        if s.end <= since or not s.amount or allocated + s.amount <= capacity:
            continue
        out.append(ShortStep(max(s.start, since), s.end, s.amount,
                             _whole(capacity - allocated - s.amount)))
    return out


@dataclass(frozen=True)
class ClassCalendar:
    resource_class: str
    capacity: float | int
    allocated: int
    steps: tuple
    short: tuple
    # False for a class reserved on the provider that has no inventory of
    # it any more (its capacity is then 0).
    inventory: bool = True

    @property
    def peak(self) -> int:
        return max((s.amount for s in self.steps), default=0)


@dataclass(frozen=True)
class ProviderCalendar:
    provider: providers.Provider
    start: int
    end: int
    now: int
    classes: tuple  # ClassCalendar, by class name


def _windows(conn: Connection, where, start: int, end: int):
    """(class name, start_at, end_at, amount) of the reservation amounts
    `where` selects whose windows overlap [start, end)."""
    ra, rc = t.reservation_amounts, t.resource_classes
    return conn.execute(
        select(rc.c.name, ra.c.start_at, ra.c.end_at, ra.c.amount)
        .join(rc, rc.c.id == ra.c.resource_class_id)
        .where(where, ra.c.end_at > start, ra.c.start_at < end))


def provider_calendar(conn: Connection, provider_uuid: str, start: int,
                      end: int, now: Optional[int] = None) -> ProviderCalendar:
    """The provider's calendar over [start, end); ResourceProviderNotFound
    (404) when there is no such provider. `now`: the database's, when the
    caller has read it already in this transaction."""
    provider = providers.get_by_uuid(conn, provider_uuid)
    now = clock.now(conn) if now is None else now
    windows: dict[str, list] = {}
    for name, s, e, amount in _windows(
            conn, t.reservation_amounts.c.resource_provider_id == provider.id,
            start, end):
        windows.setdefault(name, []).append((int(s), int(e), int(amount)))
    invs = {i.resource_class: i for i in fleet.inventories(conn, provider.id)}
    classes = []
    for name in sorted(set(invs) | set(windows)):
        inv = invs.get(name)
        capacity = inv.capacity if inv else 0
        # Open allocations only: drawn ones count inside their
        # reservations' steps (ledger/draws.py).
        allocated = inv.used - inv.drawn if inv else 0
        reserved = steps(windows.get(name, ()), start, end)
        classes.append(ClassCalendar(
            name, capacity, allocated, tuple(reserved),
            tuple(short_steps(reserved, capacity, allocated, now)),
            inventory=inv is not None))
    return ProviderCalendar(provider, start, end, now, tuple(classes))


@dataclass(frozen=True)
class ProjectCalendar:
    project_id: str
    start: int
    end: int
    now: int
    classes: dict  # class name -> steps
    # The ids of the reservations counted, by start and then id.
    reservations: tuple = ()


def project_calendar(conn: Connection, project_id: str, start: int,
                     end: int, now: Optional[int] = None) -> ProjectCalendar:
    """What the project (its external id) has reserved over [start, end),
    summed over providers, per class. A project with no reservation (or
    none known) has an empty calendar, as it has empty usages."""
    now = clock.now(conn) if now is None else now
    r, ra, rc = t.reservations, t.reservation_amounts, t.resource_classes
    project = select(t.projects.c.id).where(
        t.projects.c.external_id == project_id).scalar_subquery()
    # The project's reservations overlapping the period: a range of its
    # index (project_id, end_at) bounded by the longest window
    # (ledger/windows.py), not all of its future.
    rows = conn.execute(
        select(r.c.uuid, r.c.start_at.label("first"), rc.c.name,
               ra.c.start_at, ra.c.end_at, ra.c.amount)
        .select_from(overlap.joined(r, start, end)
                     .join(ra, ra.c.reservation_id == r.c.id)
                     .join(rc, rc.c.id == ra.c.resource_class_id))
        .where(overlap.ON_ROW, r.c.project_id == project))
    windows: dict[str, list] = {}
    counted: dict[str, int] = {}
    for row in rows:
        windows.setdefault(row.name, []).append(
            (int(row.start_at), int(row.end_at), int(row.amount)))
        counted[row.uuid] = int(row.first)
    return ProjectCalendar(
        project_id, start, end, now,
        {name: tuple(steps(w, start, end)) for name, w in sorted(windows.items())},
        tuple(sorted(counted, key=lambda u: (counted[u], u))))


# The console's list of reservations ---------------------------------------------

STATUSES = ("pending", "active", "ended")


def status_of(start: int, end: int, now: int) -> str:
    """pending before the start, active inside the window, ended at or
    after the end: judged against the database's now."""
    if now < start:
        return "pending"
    return "active" if now < end else "ended"


@dataclass(frozen=True)
class ReservationSearch:
    """What the console's list matches, each part optional: the project's
    id (exact), a provider's uuid, a status, and a period the window must
    overlap."""
    project: str = ""
    provider: str = ""
    status: str = ""
    start: Optional[int] = None
    end: Optional[int] = None


@dataclass(frozen=True)
class AmountOn:
    provider_uuid: str
    provider_name: str
    resources: dict  # class name -> amount


@dataclass(frozen=True)
class ReservationRow:
    uuid: str
    project: str
    user: str
    start: int
    end: int
    status: str
    amounts: tuple = ()  # AmountOn, by provider name
    # Some of its amounts lack room somewhere in its window from now on:
    # which ("VCPU on cn1"), for the console's tooltip.
    short: bool = False
    short_classes: tuple = ()


def _matching(query, search: ReservationSearch, now: int):
    r = t.reservations
    if search.project:
        query = query.where(r.c.project_id == select(t.projects.c.id).where(
            t.projects.c.external_id == search.project).scalar_subquery())
    if search.provider:
        ra, rp = t.reservation_amounts, t.resource_providers
        query = query.where(r.c.id.in_(
            select(ra.c.reservation_id).join(rp, rp.c.id == ra.c.resource_provider_id)
            .where(rp.c.uuid == search.provider)))
    if search.status == "pending":
        query = query.where(r.c.start_at > now)
    elif search.status == "active":
        query = query.where(r.c.start_at <= now, r.c.end_at > now)
    elif search.status == "ended":
        query = query.where(r.c.end_at <= now)
    if search.start is not None:
        query = query.where(r.c.end_at > search.start)
    if search.end is not None:
        query = query.where(r.c.start_at < search.end)
    return query


def count_reservations(conn: Connection, search: ReservationSearch,
                       now: Optional[int] = None) -> int:
    now = clock.now(conn) if now is None else now
    query = select(func.count()).select_from(t.reservations)
    return int(conn.scalar(_matching(query, search, now)))


def reservation_page(conn: Connection, search: ReservationSearch,
                     offset: int = 0, limit: int = 50,
                     now: Optional[int] = None) -> list[ReservationRow]:
    """One page of the reservations `search` matches, by start and then
    id, each with its amounts and whether it is short: four queries (and
    the clock's, without `now`)."""
    now = clock.now(conn) if now is None else now
    r = t.reservations
    page = conn.execute(_matching(
        select(r.c.id, r.c.uuid, r.c.start_at, r.c.end_at,
               t.projects.c.external_id.label("project"),
               t.users.c.external_id.label("user"))
        .select_from(r.join(t.projects, t.projects.c.id == r.c.project_id)
                     .join(t.users, t.users.c.id == r.c.user_id))
        .order_by(r.c.start_at, r.c.uuid).offset(offset).limit(limit),
        search, now)).all()
    if not page:
        return []
    amounts = _amounts(conn, [row.id for row in page])
    short = _short_keys(conn, page, amounts, now)
    out = []
    for row in page:
        held = amounts.get(row.id, [])
        by_provider: dict[tuple, dict] = {}
        for rp_id, rp_uuid, rp_name, cls, amount in held:
            by_provider.setdefault((rp_name, rp_uuid), {})[cls] = amount
        lacking = tuple(sorted({f"{cls} on {rp_name}"
                                for rp_id, _u, rp_name, cls, _a in held
                                if (row.id, rp_id, cls) in short}))
        out.append(ReservationRow(
            row.uuid, row.project, row.user, int(row.start_at), int(row.end_at),
            status_of(int(row.start_at), int(row.end_at), now),
            tuple(AmountOn(u, n, dict(sorted(res.items())))
                  for (n, u), res in sorted(by_provider.items())),
            bool(lacking), lacking))
    return out


def _amounts(conn: Connection, reservation_ids: list[int]) -> dict[int, list]:
    """reservation id -> [(provider id, uuid, name, class, amount)]."""
    ra, rp, rc = t.reservation_amounts, t.resource_providers, t.resource_classes
    rows = conn.execute(
        select(ra.c.reservation_id, rp.c.id, rp.c.uuid, rp.c.name,
               rc.c.name.label("rc"), ra.c.amount)
        .select_from(ra.join(rp, rp.c.id == ra.c.resource_provider_id)
                     .join(rc, rc.c.id == ra.c.resource_class_id))
        .where(ra.c.reservation_id.in_(reservation_ids)))
    out: dict[int, list] = {}
    for row in rows:
        out.setdefault(row.reservation_id, []).append(
            (row.id, row.uuid, row.name, row.rc, int(row.amount)))
    return out


def _short_keys(conn: Connection, page, amounts: dict[int, list],
                now: int) -> set[tuple]:
    """(reservation id, provider id, class) of the page's amounts whose
    key is short somewhere in the reservation's window from now on."""
    live = {row.id: (max(int(row.start_at), now), int(row.end_at))
            for row in page if int(row.end_at) > now}
    keys = {(rp_id, cls) for rid in live for rp_id, _u, _n, cls, _a in amounts.get(rid, ())}
    if not keys:
        return set()
    rp_ids = sorted({rp_id for rp_id, _cls in keys})
    # Only the windows overlapping the page's live windows can matter.
    first = min(s for s, _e in live.values())
    horizon = max(e for _s, e in live.values())
    ra = t.reservation_amounts
    windows: dict[tuple, list] = {}
    for row in conn.execute(
            select(ra.c.resource_provider_id.label("rp"), t.resource_classes.c.name,
                   ra.c.start_at, ra.c.end_at, ra.c.amount)
            .join(t.resource_classes, t.resource_classes.c.id == ra.c.resource_class_id)
            .where(and_(ra.c.resource_provider_id.in_(rp_ids), ra.c.end_at > first,
                        ra.c.start_at < horizon))):
        if (row.rp, row.name) in keys:
            windows.setdefault((row.rp, row.name), []).append(
                (int(row.start_at), int(row.end_at), int(row.amount)))
    usage = fleet.inventory_usage(conn, rp_ids)
    lacking: dict[tuple, list] = {}
    for key in keys:
        allocated, capacity = usage.get(key, (0, 0))
        lacking[key] = short_steps(steps(windows.get(key, ()), first, horizon),
                                   capacity, allocated, now)
    out = set()
    for rid, (start, end) in live.items():
        for rp_id, _u, _n, cls, _a in amounts.get(rid, ()):
            if any(s.start < end and s.end > start for s in lacking[(rp_id, cls)]):
                out.add((rid, rp_id, cls))
    return out
