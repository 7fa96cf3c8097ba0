"""Each process's copy of the providers' facts, never stale.

The candidate engine asks the same questions of every provider on every
request: which tree it is in, what inventory it has, which traits and
aggregates. Those facts change when an operator or a compute agent
writes them, not when a claim is made, so each process keeps them in
memory (a Snapshot) and only `used` is read per request. The reservation
windows not ended are kept with them (Snapshot.ahead: candidates/ahead.py),
read again with a provider's facts when a reservation write logs it.

Freshness comes from the database's facts log (db/facts_log.py): every
write changing facts logs the providers it changed, in its own
transaction. `FactsCache.current(conn)` reads the log's heads first, in
the request's own read transaction; when they moved it reads again the
providers logged since (or everything, when the log cannot tell) and
only then answers (candidates/facts_cache.py). A snapshot is never
changed once built: a refresh builds a new one, so a request holds one
consistent copy throughout.
"""
from __future__ import annotations

import bisect
import itertools
import logging
import time
from typing import Iterable, NamedTuple, Optional

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from placement_lite.candidates import ahead as reserved_ahead
from placement_lite.db import tables as t
from placement_lite.ledger import capacity

LOG = logging.getLogger(__name__)
_UNSET = object()
# Every copy a process builds gets the next number: what is derived from
# one copy is known by it (candidates/kept.py).
_SERIALS = itertools.count(1)

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
TRAIT_NAMES = select(t.traits.c.id, t.traits.c.name)
CLASS_NAMES = select(t.resource_classes.c.id, t.resource_classes.c.name)
_AGGREGATE_IDS = select(t.placement_aggregates.c.uuid, t.placement_aggregates.c.id)


class Snapshot:
    """Every provider's facts at one reading of the facts log's heads,
    and indexes of them.

    Not changed after it is built, by anyone: requests on many threads
    read it at once. A refresh builds another; what requests derive from
    a copy is kept apart from it (candidates/kept.py, the API's text).
    """

    __slots__ = ("heads", "uuid", "parent", "root", "members", "roots",
                 "inventory", "traits", "aggregates", "trait_names",
                 "class_names", "aggregate_ids", "sharing", "in_aggregate",
                 "by_uuid", "bounds", "counts", "built", "serial", "since",
                 "affected", "ahead")

    def __init__(self, heads: tuple, uuid: dict, parent: dict, root: dict,
                 inventory: dict, traits: dict, aggregates: dict,
                 trait_names: dict, class_names: dict, aggregate_ids: dict,
                 before: Optional["Snapshot"] = None, changed: frozenset = frozenset(),
                 ahead: reserved_ahead.Ahead = reserved_ahead.NONE):
        """`before` and `changed`: the copy this one refreshes and the
        providers read again, so what is derived from all providers is
        worked out again only where they are. A map whose values the
        refresh did not change is `before`'s own object (neither is ever
        changed once built). `ahead`: the reservation windows not ended
        when the copy read them (candidates/ahead.py)."""
        self.heads = heads
        self.ahead = ahead
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
        self.serial = next(_SERIALS)
        # The copy this one refreshes, and the providers whose facts, or
        # whose tree's, differ from it (None: read whole).
        self.since = None if before is None else before.serial
        self.affected = None if before is None else affected
        self.by_uuid = self._uuid_index(before, changed)  # uuid -> rp
        # Rows of each kind the copy holds, as the self-check compares
        # them with the database's (selfcheck.py): kept up as the copy is,
        # so a check costs nothing per provider.
        self.counts = self._counts(before, changed)
        # The lowest and highest provider id (None: no provider): every
        # search asks.
        if before is not None and root is before.root:
            self.bounds = before.bounds
        else:
            self.bounds = (min(root), max(root)) if root else None
        self.built = time.monotonic()

    def _counts(self, before: Optional["Snapshot"], changed: frozenset) -> dict:
        if before is None:
            return {"providers": (len(self.uuid), sum(self.uuid)),
                    "inventory rows": sum(map(len, self.inventory.values())),
                    "trait links": sum(map(len, self.traits.values())),
                    "aggregate links": sum(map(len, self.aggregates.values()))}
        count, ids = before.counts["providers"]
        counts = dict(before.counts)
        for name, old, new in (("inventory rows", before.inventory, self.inventory),
                               ("trait links", before.traits, self.traits),
                               ("aggregate links", before.aggregates, self.aggregates)):
            if new is not old:
                counts[name] += sum(len(new.get(rp, ())) - len(old.get(rp, ()))
                                    for rp in changed)
        for rp in changed:
            was, now = rp in before.uuid, rp in self.uuid
            count += now - was
            ids += rp * (now - was)
        counts["providers"] = (count, ids)
        return counts

    def _uuid_index(self, before: Optional["Snapshot"], changed: frozenset) -> dict:
        if before is None:
            return {u: rp for rp, u in self.uuid.items()}
        if self.uuid is before.uuid:
            return before.by_uuid
        index = before.by_uuid.copy()
        for rp in changed:
            old = before.uuid.get(rp)
            if old is not None and index.get(old) == rp:
                del index[old]
        for rp in changed:
            if rp in self.uuid:
                index[self.uuid[rp]] = rp
        return index

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

    def root_of(self, uuid: str) -> Optional[int]:
        """The root id of the provider with this uuid (None: no such one)."""
        rp = self.by_uuid.get(uuid)
        return None if rp is None else self.root[rp]


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


def read_providers(conn: Connection, ids: Iterable[int]) -> _Rows:
    """The facts of these providers as the database has them now."""
    rows = _Rows()
    for part in _chunks(ids):
        rows.read(conn, _SOME, {"ids": part})
    return rows


def load(conn: Connection, heads: tuple) -> Snapshot:
    """Everything, read again."""
    rows = _Rows()
    rows.read(conn, _ALL, None)
    return Snapshot(heads, rows.uuid, rows.parent, rows.root, rows.inventory,
                    rows.traits, rows.aggregates, dict(conn.execute(TRAIT_NAMES).all()),
                    dict(conn.execute(CLASS_NAMES).all()),
                    dict(conn.execute(_AGGREGATE_IDS).all()),
                    ahead=reserved_ahead.read_all(conn))


def refresh(conn: Connection, old: Snapshot, heads: tuple, changed: set) -> Snapshot:
    """`old` with the facts of the `changed` providers read again (a
    provider no longer found was deleted)."""
    rows = read_providers(conn, changed)
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
        names = dict(conn.execute(TRAIT_NAMES).all())
    classes = old.class_names
    if any(rows.inventory.values()):
        classes = dict(conn.execute(CLASS_NAMES).all())
    aggregates = old.aggregate_ids
    known = set(aggregates.values())
    if any(not aggs <= known for aggs in rows.aggregates.values()):
        aggregates = dict(conn.execute(_AGGREGATE_IDS).all())
    # Reservation writes log the providers they reserve on (ledger/
    # reservations.py): their windows are read again with their facts.
    ahead = reserved_ahead.read_again(conn, old.ahead, changed)
    return Snapshot(heads, *maps, names, classes, aggregates, old, frozenset(changed),
                    ahead)
