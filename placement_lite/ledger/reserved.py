"""What reservations hold over a window, per provider and class.

A request for room throughout a window [start, end) must leave, on each
provider and class, room for the most that reservations hold there at any
instant of the window (ledger/timeline.py). That peak is read here for
every provider at once: one statement over the rows overlapping the
window (the reservation_amounts index on (end_at, start_at)), and the
step function of each (provider, class) worked out in Python.

Allocations drawn from a reservation (ledger/draws.py) live inside its
amount, but are also in each inventory row's `used`, which is what the
candidate engine reads. So the room taken beyond `used` is the peak less
what is drawn there (`less_drawn`), read in the same statement. It is
never below 0: a negative extra would give back room that the SQL reader's
statements, which know only `used`, have already refused. That leaves the
answer conservative where drawn allocations outlive their reservation's
part of the window.
"""
from __future__ import annotations

from itertools import groupby
from operator import itemgetter

from sqlalchemy import and_, bindparam, func, select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.db.engine import driver_rows
from placement_lite.ledger import timeline

_RA = t.reservation_amounts
_INV = t.inventories
# Up to this many windows on one (provider, class), the peak is summed at
# each window's start; past it, the steps are built (ledger/timeline.py).
FEW = 8
_KEY = itemgetter(0, 1)
_OVERLAPPING = select(
    _RA.c.resource_provider_id, _RA.c.resource_class_id,
    _RA.c.start_at, _RA.c.end_at, _RA.c.amount,
    # One row per key on the inventories' unique (provider, class) index.
    func.coalesce(_INV.c.drawn, 0)).select_from(_RA.outerjoin(_INV, and_(
        _INV.c.resource_provider_id == _RA.c.resource_provider_id,
        _INV.c.resource_class_id == _RA.c.resource_class_id))).where(
        _RA.c.end_at > bindparam("start"), _RA.c.start_at < bindparam("end"))


def peaks(conn: Connection, start: int, end: int,
          less_drawn: bool = False) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> the most reserved there at any instant
    of [start, end), for the keys where that is more than nothing. The
    caller clips `start` to the database's now: a reservation that has
    ended counts nowhere. With `less_drawn`, less what is drawn there
    (the module's docstring says why, and why never below 0)."""
    if start >= end:
        return {}
    # Tens of thousands of rows at a year of reservations: the driver's
    # tuples (integers only, nothing to convert), sorted and grouped by
    # (provider, class) in C rather than filed one by one in Python.
    rows = sorted(driver_rows(conn, _OVERLAPPING, {"start": start, "end": end}))
    out = {}
    for key, group in groupby(rows, _KEY):
        held = list(group)
        if len(held) == 1:
            # One window overlapping [start, end) holds its amount at
            # some instant of it.
            top = held[0][4]
        elif len(held) <= FEW:
            top = _few_peak(held, start)
        else:
            top = timeline.peak([row[2:5] for row in held], start, end)
        if less_drawn:
            top -= held[0][5]
        if top > 0:
            out[key] = int(top)
    return out


def _few_peak(held: list, start: int) -> int:
    """The peak of a few rows (provider, class, start, end, amount) whose
    windows all overlap [start, end): what is held rises only where a
    window starts (or at `start`), so the most is held at one of those
    instants."""
    top = 0
    for row in held:
        at = row[2] if row[2] > start else start
        level = sum(r[4] for r in held if r[2] <= at < r[3])
        if level > top:
            top = level
    return top
