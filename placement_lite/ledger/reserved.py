"""What reservations hold over a window, per provider and class.

A request for room throughout a window [start, end) must leave, on each
provider and class, room for the most that reservations hold there at any
instant of the window (ledger/timeline.py). That peak is read here for
every provider at once: one statement over the rows overlapping the
window (a range of the reservation_amounts index on (end_at, start_at)
bounded by the longest window, ledger/windows.py), and the
step function of each (provider, class) worked out in Python.

Allocations drawn from a reservation (ledger/draws.py) live inside its
amount, but are also in each inventory row's `used`, which is what the
candidate engine reads. So the room taken beyond `used` is the peak less
what is drawn there (`less_drawn`): below 0 where the allocations drawn
there end with a reservation that does not reach into the window (they
give their room back in it, as admission and the claim rule judge), and
on keys with no window in it at all. The SQL reader, whose statements
know only `used`, cannot take room back: it keeps the parts above 0
(overlay.py), which leaves its answer on the safe side there.
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
_INV = t.inventories
# Up to this many windows on one (provider, class), the peak is summed at
# each window's start; past it, the steps are built (ledger/timeline.py).
FEW = 8
_KEY = itemgetter(0, 1)
_AMOUNT = itemgetter(4)
# Bounded on both sides by the longest window (ledger/windows.py).
_OVERLAPPING = windows.overlapping(select(
    _RA.c.resource_provider_id, _RA.c.resource_class_id,
    _RA.c.start_at, _RA.c.end_at, _RA.c.amount))
# What allocations drawn from reservations hold, on the keys that have
# any (a range of the index on `drawn`).
_DRAWN = select(_INV.c.resource_provider_id, _INV.c.resource_class_id,
                _INV.c.drawn).where(_INV.c.drawn > 0)


def peaks(conn: Connection, start: int, end: int,
          less_drawn: bool = False) -> dict[tuple[int, int], int]:
    """(provider id, class id) -> the most reserved there at any instant
    of [start, end), for the keys where that is more than nothing. The
    caller clips `start` to the database's now: a reservation that has
    ended counts nowhere. With `less_drawn`, less what is drawn there,
    on every key where something is (the module's docstring says why,
    and why that may be below 0)."""
    if start >= end:
        return {}
    # Thousands of rows for a week of a year's reservations: the driver's
    # tuples (integers only, nothing to convert). Most keys hold one
    # window in the period, whose amount is its peak (a window overlapping
    # [start, end) holds it at some instant of it; amounts are positive):
    # every key goes into the answer that way, in C, and only the keys
    # seen twice are worked out in Python and overwritten.
    params = {"w_start": start, "w_end": end}
    out = _peaks(driver_rows(conn, _OVERLAPPING, params), start, end)
    if less_drawn:
        for rp, rc, taken in driver_rows(conn, _DRAWN):
            key = (rp, rc)
            left = out.get(key, 0) - taken
            if left:
                out[key] = left
            else:
                out.pop(key, None)
    return out


def _peaks(rows: list, start: int, end: int) -> dict[tuple[int, int], int]:
    """peaks' answer from the rows (provider, class, start, end, amount)
    overlapping [start, end)."""
    keys = list(map(_KEY, rows))
    out = dict(zip(keys, map(_AMOUNT, rows)))
    if len(out) == len(rows):
        return out
    if len(out) * 2 > len(rows):
        # A few keys repeat: file them as they come.
        first: dict = {}
        repeated: dict = {}
        for key, row in zip(keys, rows):
            held = repeated.get(key)
            if held is not None:
                held.append(row)
            elif key in first:
                repeated[key] = [first[key], row]
            else:
                first[key] = row
        groups = repeated.items()
    else:
        # Most keys repeat (a million reservations: 2.6 rows a key in a
        # week): sorted and grouped in C.
        groups = ((key, list(group)) for key, group in groupby(sorted(rows), _KEY))
    for key, held in groups:
        if len(held) == 1:
            continue
        out[key] = (_few_peak(held, start) if len(held) <= FEW
                    else timeline.peak([row[2:] for row in held], start, end))
    return out


def _few_peak(held: list, start: int) -> int:
    """The peak of a few rows (provider, class, start, end, amount) whose
    windows all overlap [start, end): what is held rises only where a
    window starts (or at `start`), so the most is held at one of those
    instants. Two windows (the commonest case past one) hold both
    amounts where they meet, and they meet within the period if they
    meet at all."""
    if len(held) == 2:
        (_p, _c, s1, e1, a1), (_p, _c, s2, e2, a2) = held
        if (s1 if s1 > s2 else s2) < (e1 if e1 < e2 else e2):
            return a1 + a2
        return a1 if a1 > a2 else a2
    top = 0
    for row in held:
        at = row[2] if row[2] > start else start
        level = 0
        for _p, _c, s, e, amount in held:
            if s <= at < e:
                level += amount
        if level > top:
            top = level
    return top
