"""What reservations hold over a window, per provider and class.

A request for room throughout a window [start, end) must leave, on each
provider and class, room for the most that reservations hold there at any
instant of the window (ledger/timeline.py). That peak is read here for
every provider at once: one statement over the rows overlapping the
window (a range of the reservation_amounts index on (end_at, start_at)
bounded by the longest window, ledger/windows.py), and the
step function of each (provider, class) worked out in Python.
"""
from __future__ import annotations

from itertools import groupby
from operator import itemgetter

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.db.engine import driver_rows
from placement_lite.ledger import timeline, windows

_RA = t.reservation_amounts
# Up to this many windows on one (provider, class), the peak is summed at
# each window's start; past it, the steps are built (ledger/timeline.py).
FEW = 8
_KEY = itemgetter(0, 1)
# Bounded on both sides by the longest window (ledger/windows.py).
_OVERLAPPING = windows.overlapping(select(
    _RA.c.resource_provider_id, _RA.c.resource_class_id,
    _RA.c.start_at, _RA.c.end_at, _RA.c.amount))


def peaks(conn: Connection, start: int, end: int) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> the most reserved there at any instant
    of [start, end), for the keys where that is more than nothing. The
    caller clips `start` to the database's now: a reservation that has
    ended counts nowhere."""
    if start >= end:
        return {}
    # Tens of thousands of rows at a year of reservations: the driver's
    # tuples (integers only, nothing to convert), sorted and grouped by
    # (provider, class) in C rather than filed one by one in Python.
    rows = sorted(driver_rows(conn, _OVERLAPPING, {"w_start": start, "w_end": end}))
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
            top = timeline.peak([row[2:] for row in held], start, end)
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
