"""Each process's copy of the providers' facts, never stale.

The candidate engine asks the same questions of every provider on every
request: which tree it is in, what inventory it has, which traits and
aggregates. Those facts change when an operator or a compute agent
writes them, not when a claim is made, so each process keeps them in
memory (a Snapshot) and only `used` is read per request.

Freshness comes from the database's facts log (db/facts_log.py): every
write changing facts logs the providers it changed, in its own
transaction. `FactsCache.current(conn)` reads the log's heads first, in
the request's own read transaction; when they moved it reads again the
providers logged since (or everything, when the log cannot tell) and
only then answers. A snapshot is never changed once built: a refresh
builds a new one, so a request holds one consistent copy throughout.
"""
from __future__ import annotations

import bisect
import logging
import threading
import time
from typing import Iterable, NamedTuple, Optional

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.ledger import capacity

LOG = logging.getLogger(__name__)
# Request shapes whose derived values a copy keeps (Snapshot.shapes).
SHAPES_KEPT = 64
_UNSET = object()
# Seconds a request may wait for the lock while another refreshes the
# copy; a log behind the copy for longer than that went back.
BEHIND_AT_MOST = 30.0

RP = t.resource_providers
INV = t.inventories
RPT = t.resource_provider_traits
RPA = t.resource_provider_aggregates
IN_CHUNK = 500


class Inventory(NamedTuple):
    """One inventory row as the engine checks it (all but `used`)."""
    capacity: float  # (total - reserved) * allocation_ratio; 0 if not finite
    min_unit: int
    max_unit: int
    step_size: int

    def fits(self, used: int, amount: int) -> bool:
        """`amount` more fits beside `used`, within the unit limits."""
        # A step of 0 (written by some other tool) lets nothing through,
        # as in SQL, where `amount % 0` is NULL.
        return (self.min_unit <= amount <= self.max_unit
                and self.step_size > 0 and amount % self.step_size == 0
                and self.capacity >= used + amount)


def _statements():
    ids = bindparam("ids", expanding=True)
    return {
        "providers": select(RP.c.id, RP.c.uuid, RP.c.parent_provider_id,
                            RP.c.root_provider_id),
        "inventory": select(INV.c.resource_provider_id, INV.c.resource_class_id,
                            INV.c.total, INV.c.reserved, INV.c.allocation_ratio,
                            INV.c.min_unit, INV.c.max_unit, INV.c.step_size),
        "traits": select(RPT.c.resource_provider_id, RPT.c.trait_id),
        "aggregates": select(RPA.c.resource_provider_id, RPA.c.aggregate_id),
    }, {
        "providers": RP.c.id.in_(ids),
        "inventory": INV.c.resource_provider_id.in_(ids),
        "traits": RPT.c.resource_provider_id.in_(ids),
        "aggregates": RPA.c.resource_provider_id.in_(ids),
    }


_ALL, _WHERE = _statements()
_SOME = {kind: stmt.where(_WHERE[kind]) for kind, stmt in _ALL.items()}
_TRAIT_NAMES = select(t.traits.c.id, t.traits.c.name)
_CLASS_NAMES = select(t.resource_classes.c.id, t.resource_classes.c.name)
_AGGREGATE_IDS = select(t.placement_aggregates.c.uuid, t.placement_aggregates.c.id)


class Kept(dict):
    """What one request shape's filters decide, per provider id (or per
    tree, keyed by tuples whose first item is the root's id), kept with
    a copy for as long as it lasts (Snapshot.shapes).

    A refreshed copy starts each shape empty but may take, on first
    ask, what the copy it refreshes had worked out for a provider or tree
    the refresh did not touch: a verdict depends on that provider's and
    its tree's facts alone. Only one copy back: `before` of the older
    one is let go, so a chain of refreshes holds at most two of them.
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


class Snapshot:
    """Every provider's facts at one reading of the facts log's heads.

    Not changed after it is built; refreshed by building another.
    """

    __slots__ = ("heads", "uuid", "parent", "root", "members", "roots",
                 "inventory", "traits", "aggregates", "trait_names",
                 "class_names", "aggregate_ids", "sharing", "in_aggregate", "memo",
                 "by_uuid", "shapes", "built", "_bounds")

    def __init__(self, heads: tuple, uuid: dict, parent: dict, root: dict,
                 inventory: dict, traits: dict, aggregates: dict,
                 trait_names: dict, class_names: dict, aggregate_ids: dict,
                 before: Optional["Snapshot"] = None, changed: frozenset = frozenset()):
        """`before` and `changed`: the copy this one refreshes and the
        providers read again, so what is derived from all providers is
        worked out again only where they are. A map whose values the
        refresh did not change is `before`'s own object (neither is ever
        changed once built)."""
        self.heads = heads
        self.uuid = uuid  # rp -> uuid
        self.parent = parent  # rp -> parent id or None
        self.root = root  # rp -> root id
        self.inventory = inventory  # rp -> {class id: Inventory}
        self.traits = traits  # rp -> frozenset of trait ids
        self.aggregates = aggregates  # rp -> frozenset of aggregate ids
        self.trait_names = trait_names  # trait id -> name
        self.class_names = class_names  # resource class id -> name
        # aggregate uuid -> id, for every aggregate some provider is in
        # (one no provider is in matches nothing, known or not).
        self.aggregate_ids = aggregate_ids
        shares = next((i for i, n in trait_names.items()
                       if n == "MISC_SHARES_VIA_AGGREGATE"), None)
        if before is None:
            members: dict = {}
            for rp in sorted(root):
                members.setdefault(root[rp], []).append(rp)
            self.members = {r: tuple(m) for r, m in members.items()}  # root -> ids
            self.roots = sorted(self.members)
            self.sharing = tuple(sorted(rp for rp, ts in traits.items() if shares in ts))
            in_aggregate: dict = {}
            for rp, aggs in aggregates.items():
                for agg in aggs:
                    in_aggregate.setdefault(agg, []).append(rp)
            self.in_aggregate = in_aggregate  # aggregate id -> [rp, ...]
        else:
            affected = self._derive_from(before, changed, shares)
        # Values its users derive from this copy, per provider id, each
        # from that provider's facts alone (the answer's text of each
        # provider but for usage, say): a refresh keeps those of the
        # providers it did not read again.
        self.memo: dict = {}
        self.by_uuid: Optional[dict] = None
        # What a request shape's filters decide of each provider from its
        # facts (and its tree's) alone, and each tree's walk, for as long
        # as this copy lasts (candidates/memory.py, combiner._walk); a
        # refresh carries them over where it changed nothing (Kept).
        self.shapes: dict = {}
        if before is not None:
            self.shapes = {key: kept.refreshed(affected)
                           for key, kept in before.shapes.items()}
            if uuid is before.uuid:
                self.by_uuid = before.by_uuid
        self.built = time.monotonic()
        self._bounds = (before._bounds if before is not None and root is before.root
                        else _UNSET)

    def _derive_from(self, before: "Snapshot", changed: frozenset, shares) -> frozenset:
        """Trees, sharing providers and aggregate members from `before`'s;
        returns the providers whose facts, or whose tree's, changed."""
        root = self.root
        trees = {before.root[rp] for rp in changed if rp in before.root}
        trees.update(root[rp] for rp in changed if rp in root)
        affected = set(changed)
        if root is before.root:
            # No provider came, went or moved: the same trees.
            self.members, self.roots = before.members, before.roots
        else:
            members = dict(before.members)
            for tree in trees:
                kept = [rp for rp in before.members.get(tree, ()) if rp not in changed]
                kept += [rp for rp in changed if root.get(rp) == tree]
                if kept:
                    members[tree] = tuple(sorted(kept))
                else:
                    members.pop(tree, None)
            self.members = members
            self.roots = (before.roots if members.keys() == before.members.keys()
                          else sorted(members))
        # Each provider a tree had before is in it still or was changed
        # itself (moved or deleted: the log names it), so the trees'
        # members now, with the changed, are all whose verdicts may differ.
        for tree in trees:
            affected.update(self.members.get(tree, ()))
        affected = frozenset(affected)
        if self.traits is before.traits and before.trait_names is self.trait_names:
            self.sharing = before.sharing
        else:
            sharing = set(before.sharing).difference(changed)
            sharing.update(rp for rp in changed
                           if rp in self.traits and shares in self.traits[rp])
            self.sharing = tuple(sorted(sharing))
        if self.aggregates is before.aggregates:
            self.in_aggregate = before.in_aggregate
            return affected
        in_aggregate = dict(before.in_aggregate)
        touched = set()
        for rp in changed:
            touched.update(before.aggregates.get(rp, ()))
            touched.update(self.aggregates.get(rp, ()))
        for agg in touched:
            rps = [rp for rp in before.in_aggregate.get(agg, ()) if rp not in changed]
            rps += [rp for rp in changed if agg in self.aggregates.get(rp, ())]
            if rps:
                in_aggregate[agg] = rps
            else:
                in_aggregate.pop(agg, None)
        self.in_aggregate = in_aggregate
        return affected

    def roots_between(self, lo: int, hi: int) -> list:
        roots = self.roots
        return roots[bisect.bisect_left(roots, lo):bisect.bisect_right(roots, hi)]

    def per_shape(self, key, by_tree: bool = False) -> Kept:
        """What a request shape keeps with this copy (Snapshot.shapes),
        per provider id, or `by_tree` per tree."""
        found = self.shapes.get(key)
        if found is None:
            if len(self.shapes) >= SHAPES_KEPT:
                self.shapes.clear()
            found = self.shapes[key] = Kept(by_tree)
        return found

    def ids_by_uuid(self) -> dict:
        """uuid -> provider id."""
        if self.by_uuid is None:
            # Built on first use (a tree named, a claim).
            self.by_uuid = {u: rp for rp, u in self.uuid.items()}
        return self.by_uuid

    def root_of(self, uuid: str) -> Optional[int]:
        """The root id of the provider with this uuid (None: no such one)."""
        rp = self.ids_by_uuid().get(uuid)
        return None if rp is None else self.root[rp]

    def bounds(self) -> Optional[tuple]:
        """The lowest and highest provider id, or None with no provider.
        Worked out once per copy: every search asks, and it is a scan."""
        if self._bounds is _UNSET:
            self._bounds = (min(self.root), max(self.root)) if self.root else None
        return self._bounds


class _Rows:
    """The dicts a Snapshot is built from, filled from result rows; a
    provider's facts come as one kind of row each. Equal values are
    shared (a cloud has few distinct inventories and trait sets)."""

    def __init__(self):
        self.uuid, self.parent, self.root = {}, {}, {}
        self.inventory, self.traits, self.aggregates = {}, {}, {}
        self._same: dict = {}

    def _shared(self, value):
        return self._same.setdefault(value, value)

    def read(self, conn: Connection, statements: dict, params: Optional[dict]) -> None:
        """Add the providers these statements select (one chunk of a
        refresh, or all); the providers earlier reads added are kept."""
        found = []
        for rp, uuid, parent, root in conn.execute(statements["providers"], params):
            self.uuid[rp] = uuid
            self.parent[rp] = parent
            self.root[rp] = root
            found.append(rp)
        inventory: dict = {}
        for rp, rc, total, reserved, ratio, lo, hi, step in conn.execute(
                statements["inventory"], params):
            inventory.setdefault(rp, {})[rc] = self._shared(Inventory(
                capacity.capacity_from(total, reserved, ratio), lo, hi, step))
        traits: dict = {}
        for rp, trait in conn.execute(statements["traits"], params):
            traits.setdefault(rp, []).append(trait)
        aggregates: dict = {}
        for rp, agg in conn.execute(statements["aggregates"], params):
            aggregates.setdefault(rp, []).append(agg)
        for rp in found:
            # Only this read's providers: a refresh reads in chunks, and an
            # earlier chunk's providers are not among this one's rows.
            # Rows of a provider deleted between the statements are dropped.
            self.inventory[rp] = inventory.get(rp, {})
            self.traits[rp] = self._shared(frozenset(traits.get(rp, ())))
            self.aggregates[rp] = self._shared(frozenset(aggregates.get(rp, ())))


def _chunks(ids: Iterable[int]):
    ids = sorted(ids)
    for i in range(0, len(ids), IN_CHUNK):
        yield ids[i:i + IN_CHUNK]


def load(conn: Connection, heads: tuple) -> Snapshot:
    """Everything, read again."""
    rows = _Rows()
    rows.read(conn, _ALL, None)
    return Snapshot(heads, rows.uuid, rows.parent, rows.root, rows.inventory,
                    rows.traits, rows.aggregates, dict(conn.execute(_TRAIT_NAMES).all()),
                    dict(conn.execute(_CLASS_NAMES).all()),
                    dict(conn.execute(_AGGREGATE_IDS).all()))


def refresh(conn: Connection, old: Snapshot, heads: tuple, changed: set) -> Snapshot:
    """`old` with the facts of the `changed` providers read again (a
    provider no longer found was deleted)."""
    rows = _Rows()
    for part in _chunks(changed):
        rows.read(conn, _SOME, {"ids": part})
    maps = []
    for before, read in zip((old.uuid, old.parent, old.root, old.inventory,
                             old.traits, old.aggregates),
                            (rows.uuid, rows.parent, rows.root, rows.inventory,
                             rows.traits, rows.aggregates)):
        if all(before.get(rp, _UNSET) == read.get(rp, _UNSET) for rp in changed):
            # A write changes one kind of fact (traits, say): the other
            # maps are shared with the copy before, not copied whole.
            maps.append(before)
            continue
        after = before.copy()
        for rp in changed:
            after.pop(rp, None)
        after.update(read)
        maps.append(after)
    # The names are read again with any provider holding classes or
    # traits: a custom class or trait may have been created since, or
    # deleted and its id given to a new one (no provider held it then, so
    # nothing else in the copy names it; a rename resets the whole copy).
    names = old.trait_names
    if any(rows.traits.values()):
        names = dict(conn.execute(_TRAIT_NAMES).all())
    classes = old.class_names
    if any(rows.inventory.values()):
        classes = dict(conn.execute(_CLASS_NAMES).all())
    aggregates = old.aggregate_ids
    known = set(aggregates.values())
    if any(not aggs <= known for aggs in rows.aggregates.values()):
        aggregates = dict(conn.execute(_AGGREGATE_IDS).all())
    new = Snapshot(heads, *maps, names, classes, aggregates, old, frozenset(changed))
    # What was derived from one unchanged provider alone still holds
    # (memo entries are keyed by provider id: see Snapshot.memo), and so
    # do the names it shows, as said above.
    for key, derived in old.memo.items():
        kept = new.memo[key] = derived.copy()
        for rp in changed:
            kept.pop(rp, None)
    return new


class FactsCache:
    """One process's current Snapshot, for every thread of it."""

    def __init__(self):
        self._snapshot: Optional[Snapshot] = None
        self._lock = threading.Lock()
        self.loads = 0  # full reads, for tests and metrics
        self.refreshes = 0

    def latest(self) -> Optional[Snapshot]:
        """The copy as last read, without asking whether it is current."""
        return self._snapshot

    def current(self, conn: Connection) -> Snapshot:
        """The facts as of now, read in `conn`'s transaction."""
        heads = facts_log.heads(conn)
        snap = self._snapshot
        if snap is not None and snap.heads == heads:
            return snap
        with self._lock:
            snap = self._snapshot
            if snap is not None and _covers(snap.heads, heads):
                if snap.heads == heads or time.monotonic() - snap.built < BEHIND_AT_MOST:
                    # As new as this transaction's view, or newer: built
                    # by a request whose transaction began later, while
                    # this one waited for the lock.
                    return snap
                # The database's log is behind this copy for longer than
                # any request waits: it went back (a backup restored in
                # place). Nothing it logs can be trusted against the copy.
                LOG.warning("the facts log is behind this process's copy "
                            "(database restored?): reading all facts again")
                snap = None
            changed = None if snap is None else facts_log.changes(conn, snap.heads, heads)
            if changed is None:
                built = load(conn, heads)
                self.loads += 1
            else:
                built = refresh(conn, snap, heads, changed)
                self.refreshes += 1
            self._snapshot = built
            return built


def _covers(have: tuple, wanted: tuple) -> bool:
    """A copy built at heads `have` holds every change up to `wanted`."""
    return (len(have) == len(wanted) and have[:1] == wanted[:1] and all(
        h.serial >= w.serial and h.floor >= w.floor
        for h, w in zip(have[1:], wanted[1:])))
