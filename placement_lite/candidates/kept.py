"""What the candidate engine derives from a copy of the facts, per request
shape, and keeps while that copy lasts.

A copy (snapshot.Snapshot) is published once built and never changed;
requests read it from many threads at once. What they work out from it
for one request shape (each provider's verdict under the shape's
filters, each tree's walk, each tree's part of a full answer) lives
here, in one KeptCache per process, owned by the FactsCache that
publishes the copies. Its rules:

- one bound: at most SHAPES_KEPT shapes, the least recently asked one
  let go first;
- one lock, for the index of shapes only: it is changed (a shape added,
  evicted, or all carried to a new copy) under the lock, and never
  iterated but under it;
- a Kept is only ever added to, key by key (one dict store each, which
  a reader on another thread sees whole or not at all); nothing empties
  or iterates it while requests use it.

A request on a copy older than the one the cache serves (it began
before a refresh was published) gets a Kept of its own, filled for that
request alone: correct, only not shared.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Optional

# Request shapes a process keeps derived values for.
SHAPES_KEPT = 64
_UNSET = object()


class Kept(dict):
    """What one request shape's filters decide, per provider id (or per
    tree, keyed by tuples whose first item is the root's id), for as long
    as one copy of the facts lasts.

    A Kept for a refreshed copy starts empty but may take, on first ask,
    what the Kept for the copy before had for a provider or tree the
    refresh did not touch: a verdict depends on that provider's and its
    tree's facts alone. Only one copy back: `before` of the older one is
    let go, so a chain of refreshes holds at most two of them.
    """

    __slots__ = ("before", "gone", "by_tree", "note")

    def __init__(self, by_tree: bool = False, before: Optional["Kept"] = None,
                 gone: frozenset = frozenset()):
        super().__init__()
        self.by_tree = by_tree
        self.before = before
        self.gone = gone  # providers (and so trees) whose verdicts changed
        # What its user keeps of the shape as a whole (not carried over).
        self.note = None

    def carried(self, key, missing):
        """What the copy before had for `key`, if still true; else `missing`."""
        before = self.before
        if before is None or (key[0] if self.by_tree else key) in self.gone:
            return missing
        return before.get(key, missing)

    def settle(self, key, build):
        """On a first ask for `key` (callers look up hits themselves, in
        their loops): what the copy before had, if still true, else
        `build(key)`; kept either way."""
        value = self.carried(key, _UNSET)
        if value is _UNSET:
            value = build(key)
        self[key] = value
        return value

    def refreshed(self, gone: frozenset) -> "Kept":
        """An empty Kept for the copy after a refresh changing `gone`."""
        after = Kept(self.by_tree, self, gone)
        # Its own fallback is no longer needed by the newest copy; a
        # request still on this one just works out what it lacks.
        self.before = None
        return after


class KeptCache:
    """Per request shape, the Kept of the newest copy of the facts; one
    per FactsCache (see the module's rules)."""

    def __init__(self, bound: int = SHAPES_KEPT):
        self.bound = bound
        self._lock = threading.Lock()
        self._shapes: OrderedDict = OrderedDict()
        self._serial = None  # the copy the shapes belong to

    def of(self, snap, key, by_tree: bool = False) -> Kept:
        """The Kept of shape `key` for copy `snap`."""
        with self._lock:
            if snap.serial != self._serial:
                # A copy this cache does not serve (older than the newest,
                # or never published here): the request's own.
                return Kept(by_tree)
            return lru_entry(self._shapes, key, lambda: Kept(by_tree), self.bound)

    def advance(self, snap) -> None:
        """Serve copy `snap` from now on: each shape's Kept carried over
        where `snap` refreshes the copy served so far, else none kept.
        Called by the copy's publisher before it publishes `snap`."""
        with self._lock:
            if snap.since is not None and snap.since == self._serial:
                self._shapes = OrderedDict(
                    (key, kept.refreshed(snap.affected))
                    for key, kept in self._shapes.items())
            else:
                self._shapes = OrderedDict()
            self._serial = snap.serial

    def shapes(self) -> list:
        """(key, Kept) of every shape kept, oldest asked first (a copy
        of the index, for tests and metrics)."""
        with self._lock:
            return list(self._shapes.items())


def lru_entry(entries: OrderedDict, key, make, bound: int):
    """entries[key], made by make() when missing, and marked as the most
    recently asked; past `bound` entries the least recently asked goes.
    The caller holds the lock guarding `entries`."""
    found = entries.get(key)
    if found is None:
        found = entries[key] = make()
        if len(entries) > bound:
            entries.popitem(last=False)
    else:
        entries.move_to_end(key)
    return found


def kept_for(cache: Optional[KeptCache], snap, key, by_tree: bool = False) -> Kept:
    """The Kept of shape `key` for `snap` from `cache`; without a cache,
    one for the caller alone."""
    return Kept(by_tree) if cache is None else cache.of(snap, key, by_tree)
