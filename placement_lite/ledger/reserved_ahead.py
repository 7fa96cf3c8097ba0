"""What reservations hold on providers: the windows on given keys, read
in one statement, and the most reserved at any instant from now on.

A claim has no end, so it must leave room for the largest amount any
future instant has reserved (docs/reservations.md). Only windows that end
after the database's now count: a reservation that ended counts nowhere,
whether or not anything removed it. Both this module and the capacity
check depend on nothing else of the ledger, so the claim path can ask
without importing the reservations' writers.
"""
from __future__ import annotations

from collections import defaultdict
from functools import lru_cache
from typing import Iterable, Optional

from sqlalchemy import bindparam, case, delete, distinct, func, select
from sqlalchemy.engine import Connection

from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import timeline

Key = tuple[int, int]  # (provider id, class id)

_ra = t.reservation_amounts


@lru_cache(maxsize=8)
def _live_statement(dialect_name: str):
    """Windows on the given providers and classes that end after now.
    The index (provider, class, end) answers it; the pairs the IN lists
    cross but nobody asked about are dropped by the caller."""
    return select(_ra.c.resource_provider_id, _ra.c.resource_class_id,
                  _ra.c.amount, _ra.c.start_at, _ra.c.end_at).where(
        _ra.c.resource_provider_id.in_(bindparam("rps", expanding=True)),
        _ra.c.resource_class_id.in_(bindparam("rcs", expanding=True)),
        _ra.c.end_at > clock.now_expr(dialect_name))


def live_windows(conn: Connection, keys: Iterable[Key]
                 ) -> dict[Key, list[timeline.Window]]:
    """key -> (start, end, amount) of every window on it that has not
    ended; keys without any are absent. One statement."""
    keys = set(keys)
    if not keys:
        return {}
    rows = conn.execute(_live_statement(conn.dialect.name), {
        "rps": sorted({rp for rp, _rc in keys}),
        "rcs": sorted({rc for _rp, rc in keys})})
    out: dict[Key, list[timeline.Window]] = defaultdict(list)
    for rp, rc, amount, start, end in rows:
        if (rp, rc) in keys:
            out[(rp, rc)].append((int(start), int(end), int(amount)))
    return dict(out)


def peak_from_now(windows: list[timeline.Window]) -> int:
    """The most reserved at any instant from now on, given only windows
    that end after now: no instant before now can hold more than now
    does (a window covering it and ending after now covers now too), so
    the peak over the windows' whole span is the peak from now on. One
    window (nearly every key) is its amount; more are swept in order of
    instant, an end before a start at the same instant (a window holds
    [start, end)). Plain candidates work it out for every key held."""
    if len(windows) <= 1:
        return windows[0][2] if windows else 0
    level = top = 0
    for _at, change in sorted([(s, a) for s, _e, a in windows]
                              + [(e, -a) for _s, e, a in windows]):
        level += change
        if level > top:
            top = level
    return top


def peaks(conn: Connection, keys: Iterable[Key]) -> dict[Key, int]:
    """key -> the most reserved there at any instant from now on, for
    the keys that have any; one statement, none for no keys."""
    return {key: peak_from_now(windows)
            for key, windows in live_windows(conn, keys).items()}


def live_counts(conn: Connection, provider_id: Optional[int] = None,
                class_ids: Optional[Iterable[int]] = None) -> dict[int, tuple[int, int]]:
    """class id -> (reservations that hold it and have not ended, amount
    rows of it in all), on one provider or, without one, anywhere; in one
    statement. What deleting a provider, an inventory or a class must
    refuse (live ones) or take along (ended ones)."""
    live = _ra.c.end_at > clock.now_expr(conn.dialect.name)
    query = select(_ra.c.resource_class_id,
                   func.count(distinct(case((live, _ra.c.reservation_id)))),
                   func.count()).group_by(_ra.c.resource_class_id)
    if provider_id is not None:
        query = query.where(_ra.c.resource_provider_id == provider_id)
    if class_ids is not None:
        query = query.where(_ra.c.resource_class_id.in_(sorted(set(class_ids))))
    return {rc: (int(n_live), int(n)) for rc, n_live, n in conn.execute(query)}


def drop_ended(conn: Connection, provider_id: Optional[int] = None,
               class_id: Optional[int] = None) -> None:
    """Remove the amount rows of ended reservations on a provider (or of
    a class) being deleted: the records keep the rest of them."""
    query = delete(_ra).where(_ra.c.end_at <= clock.now_expr(conn.dialect.name))
    if provider_id is not None:
        query = query.where(_ra.c.resource_provider_id == provider_id)
    if class_id is not None:
        query = query.where(_ra.c.resource_class_id == class_id)
    conn.execute(query)
