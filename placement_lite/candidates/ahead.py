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

from sqlalchemy import bindparam, literal_column, select, union_all
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
    database's now, each with the keys where something is drawn from
    reservations (in `used` already) as rows of their own: end 0."""
    live = _RA.c.end_at > clock.now_expr(dialect_name)
    zero = literal_column("0")
    windows = select(_RA.c.resource_provider_id, _RA.c.resource_class_id,
                     _RA.c.start_at, _RA.c.end_at, _RA.c.amount, zero).where(live)
    drawn = select(_INV.c.resource_provider_id, _INV.c.resource_class_id,
                   zero, zero, zero, _INV.c.drawn).where(_INV.c.drawn > 0)
    ids = bindparam("ids", expanding=True)
    return (union_all(windows, drawn),
            union_all(windows.where(_RA.c.resource_provider_id.in_(ids)),
                      drawn.where(_INV.c.resource_provider_id.in_(ids))))


class _Ends:
    """One layer of an Ahead's index of window ends: every end in it, in
    order, and the keys a window ends on at each. Never changed once
    made. A layer may name an end whose window has since been read again
    and is gone: harmless, as the keys named are worked out from the
    windows as they are, and `next_after` skips it."""

    __slots__ = ("ends", "keys", "size")

    def __init__(self, pairs: Iterable[tuple]):
        """`pairs`: (end, key) of each window."""
        keys: dict = {}
        size = 0
        for end, key in pairs:
            keys.setdefault(end, []).append(key)
            size += 1
        self.ends = sorted(keys)
        self.keys = keys
        self.size = size

    def between(self, lo: int, hi: int) -> Iterable:
        """The keys of the ends in (lo, hi]."""
        ends, keys = self.ends, self.keys
        for end in ends[bisect_right(ends, lo):bisect_right(ends, hi)]:
            yield from keys[end]

    def next_after(self, now: int, windows: Mapping) -> Optional[int]:
        """The first end after `now` that some window of `windows` has."""
        ends, keys = self.ends, self.keys
        for i in range(bisect_right(ends, now), len(ends)):
            end = ends[i]
            for key in keys[end]:
                if any(w[1] == end for w in windows.get(key, ())):
                    return end
        return None


def _pairs(windows: Mapping, keys: Iterable) -> list:
    return [(end, key) for key in keys for _s, end, _a in windows[key]]


def _layered(layers: tuple, fresh: _Ends, windows: Mapping) -> tuple:
    """`layers` with `fresh` on top, the top ones merged while the newest
    is at least half the size of the one below it (so a write costs what
    it changed, and a window's end is merged again only a logarithmic
    number of times); a merge leaves out the ends `windows` no longer
    has."""
    if fresh.size:
        layers = layers + (fresh,)
    while len(layers) >= 2 and layers[-1].size * 2 >= layers[-2].size:
        lower, upper = layers[-2], layers[-1]
        merged = _Ends(
            (end, key) for layer in (lower, upper)
            for end, ks in layer.keys.items() for key in ks
            if any(w[1] == end for w in windows.get(key, ())))
        layers = layers[:-2] + ((merged,) if merged.size else ())
    return layers


# How many earlier Aheads one remembers, with the providers read again
# since each: the overlay made from any of them is carried over.
LINEAGE = 8


class Ahead:
    """(provider id, class id) -> the windows (start, end, amount) on it
    not ended when they were read, and what was drawn there from
    reservations (ledger/draws.py). Never changed once made.

    One read again after a write (read_again) costs what the write
    changed, not what is held: the mappings are copied whole (in C), the
    index of window ends gets a layer for the keys read again
    (_layered), and an overlay made from an earlier Ahead is carried over
    for the providers not read again since (`lineage`)."""

    __slots__ = ("windows", "classes", "drawn", "layers", "lineage", "__weakref__")

    def __init__(self, windows: Mapping[tuple, tuple],
                 drawn: Optional[Mapping[tuple, int]] = None):
        """From whole mappings (a copy read whole); one read again after a
        write is made by again(). `drawn`: key -> what allocations drawn
        from reservations hold there, which `used` counts already."""
        self.windows = {key: ws for key, ws in windows.items() if ws}
        self.drawn = {key: n for key, n in (drawn or {}).items() if n}
        self.classes = _classes(self.windows.keys() | self.drawn.keys())
        self.layers = (_Ends(_pairs(self.windows, self.windows)),)
        self.lineage = ()

    @classmethod
    def _made(cls, windows: dict, classes: dict, drawn: dict, layers: tuple,
              lineage: tuple) -> "Ahead":
        ahead = cls.__new__(cls)
        ahead.windows, ahead.classes, ahead.drawn = windows, classes, drawn
        ahead.layers, ahead.lineage = layers, lineage
        return ahead

    def __bool__(self) -> bool:
        return bool(self.windows or self.drawn)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Ahead) and other.windows == self.windows
                and other.drawn == self.drawn)

    __hash__ = None  # equal by value, and not for keeping in sets

    def changed_since(self, earlier: "Ahead") -> Optional[frozenset]:
        """The providers read again between `earlier` and this one, or
        None when `earlier` is not among those remembered."""
        for ref, changed in self.lineage:
            if ref() is earlier:
                return changed
        return None

    def at(self, now: int, last: Optional["Made"] = None) -> "Made":
        """The overlay at the database's instant `now`, and the instant
        it holds until (None: for ever, as nothing is reserved ahead any
        more). What a claim leaves room for, per key: the peak of its
        windows not ended at `now` (reserved_ahead.peak_from_now).
        `last`: one made at an earlier instant from this Ahead, or from
        one it was read again from: its keys are worked out again only
        where a window ended since, or where the windows were read
        again."""
        changed = None
        if last is not None and last.at <= now:
            changed = (frozenset() if last.ahead is self
                       else self.changed_since(last.ahead))
        windows, drawn = self.windows, self.drawn
        if changed is None:
            extra: dict = {}
            by_provider: Optional[dict] = None
            keys: Iterable = windows.keys() | drawn.keys() if drawn else windows.keys()
        else:
            prev = last.overlay
            extra = dict(prev.extra) if prev is not None else {}
            by_provider = dict(prev.by_provider) if prev is not None else {}
            keys = set()
            for layer in self.layers:
                keys.update(layer.between(last.at, now))
            if changed:
                # The providers read again: their keys from the windows as
                # they are now (those left without any dropped).
                before = last.ahead.classes
                for rp in changed:
                    for rc in before.get(rp, ()):
                        extra.pop((rp, rc), None)
                    by_provider.pop(rp, None)
                    keys.update((rp, rc) for rc in self.classes.get(rp, ()))
        touched = set()
        for key in keys:
            ws = windows.get(key, ())
            live = [w for w in ws if w[1] > now]
            # A drawn allocation lives inside its reservation's amount and
            # is in `used` too: counted once. Below 0 where what was drawn
            # outlives the windows (a reservation ended, its drawn rows not
            # yet swept): their room is given back, as a claim is (overlay.py).
            top = (peak_from_now(live) if live else 0) - drawn.get(key, 0)
            if top:
                extra[key] = top
            else:
                extra.pop(key, None)
            touched.add(key[0])
        if by_provider is None:
            found = Overlay(extra)
        else:
            for rp in touched:
                rows = tuple((rc, extra[(rp, rc)]) for rc in self.classes.get(rp, ())
                             if (rp, rc) in extra)
                if rows:
                    by_provider[rp] = rows
                else:
                    by_provider.pop(rp, None)
            found = Overlay.made(extra, by_provider)
        until = None
        for layer in self.layers:
            end = layer.next_after(now, windows)
            if end is not None and (until is None or end < until):
                until = end
        return Made(self, now, until, found if found else None)


def _classes(windows: Mapping) -> dict:
    """provider id -> the class ids of its keys."""
    out: dict = {}
    for rp, rc in windows:
        out.setdefault(rp, []).append(rc)
    return {rp: tuple(rcs) for rp, rcs in out.items()}


def _lineage(base: Ahead, changed: frozenset) -> tuple:
    """(weakref to an earlier Ahead, providers read again since), newest
    first: `base` itself, then those `base` remembers, no more than
    LINEAGE (weakly held: a chain of them is never kept)."""
    return ((weakref.ref(base), changed),) + tuple(
        (ref, seen | changed) for ref, seen in base.lineage[:LINEAGE - 1])


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
        if end:
            out.setdefault((rp, rc), []).append((int(start), int(end), int(amount)))
        else:
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
    return again(old, read, read_drawn, ids)


def again(old: Ahead, read: dict, read_drawn: dict, changed: Iterable[int]) -> Ahead:
    """`old` with the keys of the `changed` providers replaced by `read`
    (key -> windows) and `read_drawn` (key -> drawn): read_again's answer
    from what it read."""
    ids_set = frozenset(changed)
    before = {(rp, rc): old.windows[(rp, rc)]
              for rp in ids_set for rc in old.classes.get(rp, ()) if (rp, rc) in old.windows}
    drawn_before = {key: n for key, n in old.drawn.items() if key[0] in ids_set}
    if before == read and drawn_before == read_drawn:
        return old
    windows = dict(old.windows)
    for key in before:
        del windows[key]
    windows.update(read)
    drawn = {key: n for key, n in old.drawn.items() if key[0] not in ids_set}
    drawn.update({key: n for key, n in read_drawn.items() if n})
    if not windows and not drawn:
        return NONE
    classes = dict(old.classes)
    for rp in ids_set:
        classes.pop(rp, None)
    classes.update(_classes(read.keys() | drawn.keys() & set(read_drawn)))
    layers = _layered(old.layers, _Ends(_pairs(read, read)), windows)
    return Ahead._made(windows, classes, drawn, layers, _lineage(old, ids_set))


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
            # Every window had ended at `last.at` (what is left is what
            # drawn allocations give back); new ones come only with a
            # write, which makes another copy (another Ahead).
            return last.overlay
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
