"""What reservations hold from now on, for plain candidates.

A claim has no end, so it is refused unless it leaves room for the most
reserved at any instant from now on (ledger/capacity.py, ledger/
reserved_ahead.py). Plain candidates leave the same room, so that a
scheduler is not offered a provider whose claim would then be refused:
that most, per (provider, class), is extra `used` (overlay.py).

With the process's copy of the facts, the windows not ended when the copy
read them are part of it (Snapshot.ahead, an Ahead): reservation writes
log the providers they reserve on in the facts log (ledger/
reservations.py), so a request's usual check of the log's heads tells
whether they moved, and a copy without any windows costs a request
nothing more. Where the copy has some, the overlay depends only on the
instant, and only drops where a window ends: at the database's now T it
holds until the first end after T. So one process keeps the last overlay
made (AheadOverlays), with the instant it was made at and the one it
holds until, and a request asks only the database's now (one statement)
to know whether it still holds; once every window has ended, not even
that, until the copy changes.

Without the copy, the windows alone are kept the same way (AheadCache):
a request reads the facts log's heads, one statement more than it made
before, and the database's now where some window has not ended.
"""
from __future__ import annotations

import threading
import weakref
from bisect import bisect_right
from functools import lru_cache
from typing import Iterable, Mapping, NamedTuple, Optional

from sqlalchemy import and_, bindparam, func, select
from sqlalchemy.engine import Connection

from placement_lite.candidates.overlay import Overlay
from placement_lite.db import clock, facts_log
from placement_lite.db import tables as t
from placement_lite.db.engine import driver_rows
from placement_lite.ledger.reserved_ahead import peak_from_now

_RA = t.reservation_amounts
_INV = t.inventories
IN_CHUNK = 500


@lru_cache(maxsize=8)
def _statements(dialect_name: str) -> tuple:
    """(every window not ended, those on given providers), judged by the
    database's now."""
    live = _RA.c.end_at > clock.now_expr(dialect_name)
    # What is drawn on each key rides along (one row per key on the
    # inventories' unique index): it is in `used` already.
    cols = (_RA.c.resource_provider_id, _RA.c.resource_class_id,
            _RA.c.start_at, _RA.c.end_at, _RA.c.amount,
            func.coalesce(_INV.c.drawn, 0))
    joined = _RA.outerjoin(_INV, and_(
        _INV.c.resource_provider_id == _RA.c.resource_provider_id,
        _INV.c.resource_class_id == _RA.c.resource_class_id))
    return (select(*cols).select_from(joined).where(live),
            select(*cols).select_from(joined).where(
                _RA.c.resource_provider_id.in_(bindparam("ids", expanding=True)), live))


class Ahead:
    """(provider id, class id) -> the windows (start, end, amount) on it
    not ended when they were read, and what was drawn there from
    reservations (ledger/draws.py). Never changed once made."""

    __slots__ = ("windows", "drawn", "ends", "keys_ending", "base", "changed",
                 "__weakref__")

    def __init__(self, windows: Mapping[tuple, tuple], base: Optional["Ahead"] = None,
                 changed: Iterable[int] = (), drawn: Optional[Mapping[tuple, int]] = None):
        """`base` and `changed`: the Ahead this one was read again from,
        and the providers whose windows were, so that an overlay made from
        `base` is carried over for the others (weakly held: a chain of
        them is never kept). `drawn`: key -> what allocations drawn from
        reservations hold there, which `used` counts already."""
        self.windows = {key: ws for key, ws in windows.items() if ws}
        self.drawn = {key: n for key, n in (drawn or {}).items()
                      if n and key in self.windows}
        self.base = weakref.ref(base) if base is not None else None
        self.changed = frozenset(changed)
        # Every window's end, in order, and the keys a window ends on at
        # each: after the first overlay, only the keys whose windows
        # ended since are worked out again.
        keys_ending: dict = {}
        for key, ws in self.windows.items():
            for _start, end, _amount in ws:
                keys_ending.setdefault(end, []).append(key)
        self.ends = sorted(keys_ending)
        self.keys_ending = keys_ending

    def __bool__(self) -> bool:
        return bool(self.windows)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Ahead) and other.windows == self.windows
                and other.drawn == self.drawn)

    __hash__ = None  # equal by value, and not for keeping in sets

    def at(self, now: int, last: Optional["Made"] = None) -> "Made":
        """The overlay at the database's instant `now`, and the instant
        it holds until (None: for ever, as nothing is reserved ahead any
        more). What a claim leaves room for, per key: the peak of its
        windows not ended at `now` (reserved_ahead.peak_from_now).
        `last`: one made at an earlier instant from this Ahead, or from
        the one it was read again from: its keys are worked out again
        only where a window ended since, or where the windows were read
        again."""
        ends = self.ends
        same = last is not None and last.at <= now and last.ahead is self
        based = (not same and last is not None and last.at <= now
                 and self.base is not None and self.base() is last.ahead)
        if same or based:
            extra = dict(last.overlay.extra) if last.overlay is not None else {}
            keys = set()
            for end in ends[bisect_right(ends, last.at):bisect_right(ends, now)]:
                keys.update(self.keys_ending[end])
            if based:
                # The providers read again: their keys from the windows as
                # they are now (those left without any dropped).
                changed = self.changed
                extra = {key: n for key, n in extra.items() if key[0] not in changed}
                keys.update(key for key in self.windows if key[0] in changed)
        else:
            extra, keys = {}, self.windows.keys()
        for key in keys:
            live = [w for w in self.windows[key] if w[1] > now]
            # A drawn allocation lives inside its reservation's amount and
            # is in `used` too: counted once. Never below 0 (an extra only
            # takes room away; where drawn rows outlive their windows the
            # answer stays on the safe side until they are swept).
            top = peak_from_now(live) - self.drawn.get(key, 0) if live else 0
            if top > 0:
                extra[key] = top
            else:
                extra.pop(key, None)
        after = bisect_right(ends, now)
        found = Overlay(extra)
        return Made(self, now, ends[after] if after < len(ends) else None,
                    found if found else None)


NONE = Ahead({})


class Made(NamedTuple):
    """An overlay made from `ahead` at `at`, right for every instant in
    [at, until) (until None: from `at` on)."""
    ahead: Ahead
    at: int
    until: Optional[int]
    overlay: Optional[Overlay]


def _grouped(rows: Iterable[tuple]) -> tuple[dict, dict]:
    """(key -> its windows, key -> what is drawn there)."""
    out: dict = {}
    drawn: dict = {}
    for rp, rc, start, end, amount, taken in rows:
        out.setdefault((rp, rc), []).append((int(start), int(end), int(amount)))
        if taken:
            drawn[(rp, rc)] = int(taken)
    return {key: tuple(sorted(ws)) for key, ws in out.items()}, drawn


def read_all(conn: Connection) -> Ahead:
    """Every window not ended, for a copy read whole (one statement)."""
    rows = driver_rows(conn, _statements(conn.dialect.name)[0])
    if not rows:
        return NONE
    windows, drawn = _grouped(rows)
    return Ahead(windows, drawn=drawn)


def read_again(conn: Connection, old: Ahead, changed: Iterable[int]) -> Ahead:
    """`old` with the windows on the `changed` providers read again; `old`
    itself when they are as they were (what was made from it holds)."""
    ids = sorted(set(changed))
    stmt = _statements(conn.dialect.name)[1]
    rows: list = []
    for i in range(0, len(ids), IN_CHUNK):
        rows.extend(driver_rows(conn, stmt, {"ids": ids[i:i + IN_CHUNK]}))
    read, read_drawn = _grouped(rows)
    ids_set = set(ids)
    before = {key: ws for key, ws in old.windows.items() if key[0] in ids_set}
    drawn_before = {key: n for key, n in old.drawn.items() if key[0] in ids_set}
    if before == read and drawn_before == read_drawn:
        return old
    windows = {key: ws for key, ws in old.windows.items() if key[0] not in ids_set}
    windows.update(read)
    drawn = {key: n for key, n in old.drawn.items() if key[0] not in ids_set}
    drawn.update(read_drawn)
    return Ahead(windows, old, ids_set, drawn) if windows else NONE


class AheadCache:
    """Without a copy of the facts: the windows not ended alone, kept
    current through the facts log as a copy is (reservation writes log
    their providers), so that a request reads the log's heads (one
    statement) rather than every window, and its overlay is kept as a
    copy's is (AheadOverlays)."""

    def __init__(self):
        self._kept: Optional[tuple] = None  # (heads, Ahead)
        self._lock = threading.Lock()
        self.overlays = AheadOverlays()

    def current(self, conn: Connection) -> Ahead:
        """The windows as of `conn`'s transaction (or a later one)."""
        heads = facts_log.heads(conn)
        kept = self._kept
        if kept is not None and kept[0] == heads:
            return kept[1]
        with self._lock:
            kept = self._kept
            if kept is not None and kept[0] == heads:
                return kept[1]
            # Heads behind those kept (a request that began before a
            # write, or a database restored in place) read everything:
            # never trusting kept windows newer than the log.
            changed = None if kept is None else facts_log.changes(conn, kept[0], heads)
            if changed is None:
                ahead = read_all(conn)
            else:
                ahead = read_again(conn, kept[1], changed) if changed else kept[1]
            self._kept = (heads, ahead)
            return ahead

    def overlay(self, conn: Connection) -> Optional[Overlay]:
        return self.overlays.overlay(conn, self.current(conn))


class AheadOverlays:
    """One process's last overlay made from its copy's Ahead (Made,
    replaced whole, never changed: requests on many threads read it)."""

    def __init__(self):
        self._last: Optional[Made] = None
        self.made = 0  # overlays worked out, for tests and metrics

    def overlay(self, conn: Connection, ahead: Ahead) -> Optional[Overlay]:
        """The extra `used` of a plain request reading the copy whose
        Ahead is `ahead`, in `conn`'s transaction."""
        if not ahead:
            return None
        last = self._last
        if last is not None and last.ahead is ahead and last.until is None:
            # Every window had ended at `last.at`; new ones come only
            # with a write, which makes another copy (another Ahead).
            return None
        now = clock.now(conn)
        if (last is not None and last.ahead is ahead
                and last.at <= now < last.until):
            return last.overlay
        made = ahead.at(now, last)
        self.made += 1
        if last is None or last.ahead is not ahead or now >= last.at:
            # A request whose transaction saw an earlier now than the
            # last one made does not replace it.
            self._last = made
        return made.overlay
