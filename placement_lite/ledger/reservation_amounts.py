"""The rows that say what a reservation holds, and who must hear of them.

Every write that stores a reservation's amounts (ledger/reservations.py)
stores them here, in its own transaction: one row per (provider, class)
with the window copied on, after raising the bound on the longest
window (ledger/windows.py) so that no read sees a window without a bound
that covers it. And every write that changes the windows on providers
logs those providers in the facts log: each process's copy of the facts
keeps the windows ahead for plain candidates (candidates/ahead.py) and
reads them again from there, as it does a provider's inventory.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.ledger import windows

_ra = t.reservation_amounts
Key = tuple[int, int]  # (provider id, class id)


def store(conn: Connection, reservation_id: int, amounts: Mapping[Key, int],
          start: int, end: int, longest: Optional[int] = None) -> None:
    """Store the amounts over [start, end). `longest`: the bound on the
    longest window, if this transaction read it already (it can only have
    grown since)."""
    windows.widen(conn, start, end, longest)
    conn.execute(insert(_ra), [
        {"reservation_id": reservation_id, "resource_provider_id": rp,
         "resource_class_id": rc, "amount": amount, "start_at": start,
         "end_at": end} for (rp, rc), amount in sorted(amounts.items())])


def log(conn: Connection, providers: Iterable[int]) -> None:
    """The windows reserved on these providers change in this write."""
    facts_log.touch(conn, providers)


def providers_of(conn: Connection, reservation_id: int) -> set[int]:
    return set(conn.scalars(select(_ra.c.resource_provider_id).distinct()
                            .where(_ra.c.reservation_id == reservation_id)))
