"""Reservations as callers read them: one, or a page of them by filters.

Status is judged against the database's now, read by the same statement
that reads the rows, so an answer never mixes two instants. `short` is
computed at read time from the inventories and the other reservations
(reservation_room.shortfalls): it is never stored, so it cannot go stale
when an inventory shrinks.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import reservation_room

_r, _ra = t.reservations, t.reservation_amounts
_rp, _rc = t.resource_providers, t.resource_classes
STATUSES = ("pending", "active", "ended")


@dataclass(frozen=True)
class ShortEntry:
    resource_provider: str
    resource_class: str
    start: int
    end: int
    free: float


@dataclass(frozen=True)
class Reservation:
    id: int  # the row's, for the ledger; callers know the uuid
    uuid: str
    project_id: str
    user_id: str
    start: int
    end: int
    generation: int
    # provider uuid -> class name -> amount
    allocations: dict[str, dict[str, int]]
    # The database's now when this was read or written.
    now: int
    short: tuple[ShortEntry, ...] = field(default=())

    @property
    def status(self) -> str:
        return status_at(self.start, self.end, self.now)


def status_at(start: int, end: int, now: int) -> str:
    if end <= now:
        return "ended"
    return "pending" if now < start else "active"


def _owner(table, column):
    return (select(table.c.external_id).where(table.c.id == column)
            .scalar_subquery())


@lru_cache(maxsize=8)
def row_statement(dialect_name: str, lock: bool):
    """One reservation by uuid with its owner's names and the database's
    now; with `lock`, its row lock (the owners, read by subqueries, are
    not locked)."""
    stmt = _rows(dialect_name).where(_r.c.uuid == bindparam("r_uuid"))
    return stmt.with_for_update() if lock else stmt


def _rows(dialect_name: str):
    return select(_r.c.id, _r.c.uuid, _owner(t.projects, _r.c.project_id)
                  .label("project"), _owner(t.users, _r.c.user_id).label("user"),
                  _r.c.start_at, _r.c.end_at, _r.c.generation,
                  clock.now_expr(dialect_name).label("db_now"))


_AMOUNTS = (select(_ra.c.reservation_id, _ra.c.resource_provider_id,
                   _ra.c.resource_class_id, _rp.c.uuid, _rc.c.name, _ra.c.amount)
            .join(_rp, _rp.c.id == _ra.c.resource_provider_id)
            .join(_rc, _rc.c.id == _ra.c.resource_class_id)
            .where(_ra.c.reservation_id.in_(bindparam("ids", expanding=True))))


def _amounts(conn: Connection, ids: list[int]) -> dict[int, list]:
    out: dict[int, list] = defaultdict(list)
    if ids:
        for row in conn.execute(_AMOUNTS, {"ids": sorted(ids)}):
            out[row.reservation_id].append(row)
    return out


def build(row, amounts: list, room: Optional[reservation_room.Room],
          now: int) -> Reservation:
    """A Reservation from its row and amount rows; `room` (read over the
    live part of its window) gives its shortfalls."""
    allocations: dict[str, dict[str, int]] = {}
    names = {}
    for a in amounts:
        allocations.setdefault(a.uuid, {})[a.name] = int(a.amount)
        names[(a.resource_provider_id, a.resource_class_id)] = (a.uuid, a.name)
    short: tuple = ()
    start = max(int(row.start_at), now)
    if room is not None and start < row.end_at:
        short = tuple(
            ShortEntry(*names[(s.provider_id, s.class_id)], s.start, s.end, s.free)
            for s in reservation_room.shortfalls(
                room, row.id, {(a.resource_provider_id, a.resource_class_id):
                               int(a.amount) for a in amounts},
                start, int(row.end_at)))
    return Reservation(row.id, row.uuid, row.project, row.user,
                       int(row.start_at), int(row.end_at), row.generation,
                       allocations, now, short)


def _with_room(conn: Connection, rows: list) -> list[Reservation]:
    """Reservations for `rows`, their amounts and shortfalls read for all
    at once (three statements whatever their number)."""
    if not rows:
        return []
    now = int(rows[0].db_now)
    amounts = _amounts(conn, [row.id for row in rows])
    live = [row for row in rows if row.end_at > now]
    keys = {(a.resource_provider_id, a.resource_class_id)
            for row in live for a in amounts[row.id]}
    room = (reservation_room.read(conn, keys, now, max(r.end_at for r in live))
            if keys else None)
    return [build(row, amounts[row.id], room, now) for row in rows]


def get(conn: Connection, uuid: str) -> Reservation:
    row = conn.execute(row_statement(conn.dialect.name, False),
                       {"r_uuid": uuid}).first()
    if row is None:
        raise not_found(uuid)
    return _with_room(conn, [row])[0]


def not_found(uuid: str) -> errors.ReservationNotFound:
    return errors.ReservationNotFound(
        f"No reservation with id {uuid} found.")


@dataclass(frozen=True)
class Filters:
    project_id: Optional[str] = None
    user_id: Optional[str] = None
    resource_provider: Optional[str] = None
    status: Optional[str] = None
    # Windows overlapping [start, end); None leaves that side open.
    start: Optional[int] = None
    end: Optional[int] = None


def _where(filters: Filters, now) -> list:
    conds = []
    if filters.project_id is not None:
        conds.append(_r.c.project_id == select(t.projects.c.id).where(
            t.projects.c.external_id == filters.project_id).scalar_subquery())
    if filters.user_id is not None:
        conds.append(_r.c.user_id == select(t.users.c.id).where(
            t.users.c.external_id == filters.user_id).scalar_subquery())
    if filters.resource_provider is not None:
        conds.append(_r.c.id.in_(
            select(_ra.c.reservation_id).join(
                _rp, _rp.c.id == _ra.c.resource_provider_id)
            .where(_rp.c.uuid == filters.resource_provider)))
    conds += {"pending": [_r.c.start_at > now],
              "active": [_r.c.start_at <= now, _r.c.end_at > now],
              "ended": [_r.c.end_at <= now]}.get(filters.status, [])
    if filters.start is not None:
        conds.append(_r.c.end_at > filters.start)
    if filters.end is not None:
        conds.append(_r.c.start_at < filters.end)
    return conds


def list_reservations(conn: Connection, filters: Filters,
                      limit: Optional[int] = None,
                      marker: Optional[str] = None) -> list[Reservation]:
    """Reservations matching every filter, ordered by start, then id;
    after `marker` (an id from an earlier page), at most `limit`."""
    query = _rows(conn.dialect.name).where(
        *_where(filters, clock.now_expr(conn.dialect.name)))
    if marker is not None:
        after = conn.execute(select(_r.c.start_at, _r.c.uuid)
                             .where(_r.c.uuid == marker)).first()
        if after is None:
            raise errors.Invalid(
                f"Marker {marker} does not name a reservation: give the id of "
                "the last reservation of the previous page.")
        query = query.where(or_(_r.c.start_at > after.start_at, and_(
            _r.c.start_at == after.start_at, _r.c.uuid > after.uuid)))
    query = query.order_by(_r.c.start_at, _r.c.uuid)
    if limit is not None:
        query = query.limit(limit)
    return _with_room(conn, conn.execute(query).all())
