"""Allocation candidates: prefilter in SQL, assemble trees, combine lazily.

The work is done one slice of provider trees at a time (a range of root
provider ids, growing geometrically), so a request with a `limit` reads
and combines only as many trees as it needs:

1. per slice, one query per request group returns the providers that can
   serve it (capacity, traits, aggregates, tree), with the facts the
   combination step needs as columns; sharing providers (trait
   MISC_SHARES_VIA_AGGREGATE) are read once for the whole request;
2. per tree (the "anchor"), a depth-first search picks one provider per
   slot (each numbered group is a slot, each class of the unnumbered group
   is a slot) and yields every combination passing group_policy,
   merged capacity, the unnumbered group's traits, same_subtree and the
   pre-1.29 one-provider-per-tree rule, without ever building the product.

The rules are Placement's: the unnumbered group may take each class from
any provider of the tree or from a sharing provider associated with it by
aggregate; an aggregate on the root spans the tree for that group only;
numbered groups are served by one provider each, whose own traits and
aggregates count.
"""
from __future__ import annotations

import logging
import math
import random
import threading
from dataclasses import dataclass, field
from typing import Iterator, Optional

from sqlalchemy import and_, bindparam, case, exists, func, or_, select
from sqlalchemy.engine import Connection

from placement_lite.candidates import filters
from placement_lite.candidates.request import CandidateRequest, RequestGroup
from placement_lite.db import tables as t
from placement_lite.ledger import capacity

LOG = logging.getLogger(__name__)
RP = t.resource_providers
FIRST_SPAN = 256
MIN_SPAN = 32
MAX_SPAN = 1 << 16
IN_CHUNK = 500
# Dead ends remembered per tree by the combination step (see _combine);
# past this many it goes on without remembering more.
MAX_DEAD_ENDS = 200_000
# The combination step's work, in providers tried for a slot: a tree that
# has given no candidate for this many tries is left (a legitimate one
# needs a handful per candidate), and a request stops searching after
# REQUEST_STEPS in all, answering with the candidates found so far, as
# max_allocation_candidates does. Packing groups into providers is a hard
# problem; these bound what one request can cost (a few seconds of CPU).
TREE_STEPS = 20_000
REQUEST_STEPS = 1_000_000
# Slice statements by request shape (see Search._built): a busy service
# sees the same few flavors again and again.
STATEMENT_CACHE_SIZE = 256
_STATEMENTS: dict = {}
_STATEMENTS_LOCK = threading.Lock()
_SHARING_PROVIDERS = (
    select(t.resource_provider_traits.c.resource_provider_id)
    .select_from(t.resource_provider_traits.join(
        t.traits, t.traits.c.id == t.resource_provider_traits.c.trait_id))
    .where(t.traits.c.name == filters.SHARING_TRAIT))


class Layout:
    """The shape shared by every candidate whose slots fall on providers
    the same way: which distinct provider (by position) serves which
    amounts and which suffixes. Built once per shape, so a candidate is
    just a tuple of provider ids until it is rendered."""
    __slots__ = ("allocations", "mappings", "allocating")

    def __init__(self, slots, pattern):
        allocations: dict = {}  # provider position -> {class id: amount}
        mappings: dict = {}  # suffix -> [provider position, ...]
        for slot, pos in zip(slots, pattern):
            if slot.resources:
                res = allocations.setdefault(pos, {})
                for rc, amount in slot.resources.items():
                    res[rc] = res.get(rc, 0) + amount
            mapped = mappings.setdefault(slot.suffix, [])
            if pos not in mapped:
                mapped.append(pos)
        self.allocations = tuple(allocations.items())
        self.mappings = tuple((k, tuple(v)) for k, v in mappings.items())
        # Positions of the providers allocated from (a group without
        # resources maps a provider it takes nothing from).
        self.allocating = tuple(allocations)


class Candidate:
    """One answer: distinct provider ids, in slot order, and their Layout."""
    __slots__ = ("providers", "layout")

    def __init__(self, providers: tuple, layout: Layout):
        self.providers = providers
        self.layout = layout

    @property
    def allocations(self) -> dict:
        """provider id -> {class id: amount}"""
        rps = self.providers
        return {rps[pos]: dict(res) for pos, res in self.layout.allocations}

    @property
    def mappings(self) -> dict:
        """suffix -> [provider id, ...]"""
        rps = self.providers
        return {k: [rps[pos] for pos in v] for k, v in self.layout.mappings}


@dataclass
class Slot:
    suffix: str
    resources: dict  # class id -> amount
    numbered: bool


@dataclass
class Lookups:
    rc_ids: dict
    trait_ids: dict
    agg_ids: dict
    tree_roots: dict  # suffix -> root id of its in_tree (missing: no match)


@dataclass
class Facts:
    """What the search needs to know about providers, slice by slice."""
    uuid: dict = field(default_factory=dict)
    root: dict = field(default_factory=dict)
    parent: dict = field(default_factory=dict)
    trait_flags: dict = field(default_factory=dict)  # rp -> tuple of bools
    agg_ok: dict = field(default_factory=dict)  # rp -> member_of satisfied
    agg_bad: dict = field(default_factory=dict)  # rp -> in a forbidden agg
    inventory: dict = field(default_factory=dict)  # (rp, rc) -> (cap, used, max)
    root_ok: set = field(default_factory=set)
    alone: set = field(default_factory=set)  # providers alone in their tree
    root_agg_bad: dict = field(default_factory=dict)
    # suffix, or ('', class id) for unnumbered slots -> root -> [rp, ...]
    rows: dict = field(default_factory=dict)

    def add(self, key, rp: int, root: int) -> None:
        self.rows.setdefault(key, {}).setdefault(root, []).append(rp)

    def providers(self, key) -> set:
        return {rp for rps in self.rows.get(key, {}).values() for rp in rps}


def _group_key(g: RequestGroup) -> tuple:
    """What a group asks of a provider, whatever its suffix."""
    return (tuple(sorted(g.resources.items())),
            tuple(frozenset(any_of) for any_of in g.required),
            frozenset(g.forbidden),
            tuple(frozenset(any_of) for any_of in g.member_of),
            frozenset(g.forbidden_aggs), g.in_tree)


def chunks(seq, size=IN_CHUNK):
    seq = list(seq)
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


class Search:
    def __init__(self, conn: Connection, req: CandidateRequest, lookups: Lookups):
        self.conn = conn
        self.req = req
        self.lk = lookups
        self.unnumbered: Optional[RequestGroup] = req.groups.get("")
        self.slots: list[Slot] = []
        if self.unnumbered is not None:
            for name, amount in self.unnumbered.resources.items():
                self.slots.append(Slot("", {lookups.rc_ids[name]: amount}, False))
        for suffix, group in req.groups.items():
            if suffix:
                self.slots.append(Slot(suffix, {
                    lookups.rc_ids[n]: a for n, a in group.resources.items()}, True))
        counts: dict = {}
        for slot in self.slots:
            for rc in slot.resources:
                counts[rc] = counts.get(rc, 0) + 1
        self.multi_rcs = {rc for rc, n in counts.items() if n > 1}
        self.unnumbered_slots = [i for i, s in enumerate(self.slots) if not s.numbered]
        self.isolate = req.group_policy == "isolate" and sum(
            1 for s in self.slots if s.numbered) > 1
        # Set once the sharing providers are known (see candidates()).
        self.need_root_facts = False
        self.need_parents = bool(req.same_subtrees)
        self.sharing: dict = {}  # anchor root -> set of sharing provider ids
        self.shared = Facts()
        self.shared_by_key: dict = {}
        self.facts_now = Facts()
        # How many candidates the caller will take (None: all), and how
        # many were produced so far; they size the slices.
        self.bound: Optional[int] = None
        self.yielded = 0
        # Tries spent in the combination step, and whether the search
        # stopped at REQUEST_STEPS (see _combine).
        self.work = 0
        self.cut_short = False
        self._shape_key: Optional[tuple] = None
        self._alike: Optional[list] = None
        self._layouts: dict = {}
        # Every provider read, for the rendering of the candidates.
        self.uuids: dict = {}
        self.roots: dict = {}
        self.alone: set = set()

    # -- SQL ----------------------------------------------------------------

    def _unnumbered_select(self, where, in_trees: bool):
        """The unnumbered group's providers in one query, a row each, with
        the classes they can give and their facts as columns.

        in_trees: the rows are read for their own trees (not as sharing
        providers of other trees), so the aggregates of their root apply,
        and, when no sharing provider can help, a provider alone in its
        tree must carry the whole group itself.
        """
        g = self.unnumbered
        lk = self.lk
        inv = t.inventories
        other = RP.alias("tree_mate")
        alone = ~exists().where(other.c.root_provider_id == RP.c.root_provider_id,
                                other.c.id != RP.c.id)
        wanted = [(rc, amount) for slot in self.slots if not slot.numbered
                  for rc, amount in slot.resources.items()]
        # One pass over the inventory rows of the wanted classes: each row
        # is checked for capacity once, then folded into a flag per class.
        flags = [func.max(case((inv.c.resource_class_id == rc, 1), else_=0))
                 for rc, _amount in wanted]
        traits = [filters.has_any_trait(RP.c.id, [lk.trait_ids[n] for n in any_of])
                  for any_of in g.required]
        group_cols = [RP.c.id, RP.c.root_provider_id, RP.c.uuid,
                      RP.c.parent_provider_id]
        cols = group_cols + [case((alone, 1), else_=0)] + flags
        cols += [case((clause, 1), else_=0) for clause in traits]
        # `+ 0` keeps SQLite from driving the query by the class index
        # (every provider's row of the class): the slice of trees drives it.
        conds = [where, or_(*[and_(inv.c.resource_class_id + 0 == rc,
                                   *filters.capacity_conditions(inv, amount))
                              for rc, amount in wanted])]
        conds += filters.trait_clauses(RP.c.id, (), g.forbidden, lk.trait_ids)
        if g.member_of:
            ok = [and_(*filters.aggregate_clauses(col, g.member_of, (), lk.agg_ids))
                  for col in (RP.c.id, RP.c.root_provider_id)]
            if in_trees:
                conds.append(or_(ok[0], and_(RP.c.root_provider_id != RP.c.id,
                                             ok[1])))
            else:
                cols.append(case((ok[0], 1), else_=0))
        if g.forbidden_aggs:
            bad_ids = filters.known_ids(g.forbidden_aggs, lk.agg_ids)
            bad = filters.in_any_aggregate(RP.c.id, bad_ids)
            if in_trees:
                conds.append(~bad)
                conds.append(~filters.in_any_aggregate(RP.c.root_provider_id, bad_ids))
            else:
                cols.append(case((bad, 1), else_=0))
        if g.in_tree:
            conds.append(RP.c.root_provider_id == self.lk.tree_roots[""])
        query = (select(*cols)
                 .select_from(RP.join(inv, inv.c.resource_provider_id == RP.c.id))
                 .where(*conds)
                 # In the order of the root index, so neither the grouping
                 # nor the ordering needs a sort.
                 .group_by(RP.c.root_provider_id, RP.c.id, RP.c.uuid,
                           RP.c.parent_provider_id)
                 .order_by(RP.c.root_provider_id, RP.c.id))
        if in_trees and not self.shared_by_key:
            query = query.having(or_(
                and_(alone, func.count(inv.c.resource_class_id) == len(wanted),
                     *traits),
                ~alone))
            if traits:
                # The traits part of that, again per provider: the database
                # then skips the inventory rows of a lone provider lacking
                # them (a third of the work on a flat cloud).
                query = query.where(or_(~alone, and_(*traits)))
        return query, [rc for rc, _ in wanted]

    def _numbered_select(self, group: RequestGroup, where):
        lk = self.lk
        conds = [where]
        conds += filters.capacity_clauses(RP.c.id, group.resources, lk.rc_ids)
        conds += filters.trait_clauses(RP.c.id, group.required, group.forbidden,
                                       lk.trait_ids)
        conds += filters.aggregate_clauses(RP.c.id, group.member_of,
                                           group.forbidden_aggs, lk.agg_ids)
        if group.in_tree:
            conds.append(RP.c.root_provider_id == lk.tree_roots[group.suffix])
        return select(RP.c.id, RP.c.root_provider_id, RP.c.uuid,
                      RP.c.parent_provider_id).where(*conds).order_by(
                          RP.c.root_provider_id, RP.c.id)

    def _built(self, key, build, reuse: bool):
        """Slice statements are re-run with new bounds, within the request
        and across requests of the same shape (building one costs more
        than running it); others are built for their single use."""
        if not reuse:
            return build()
        key = (key, self._shape())
        found = _STATEMENTS.get(key)
        if found is None:
            found = build()
            # Writers take the lock so eviction never iterates a dict that
            # another thread is changing; readers need none.
            with _STATEMENTS_LOCK:
                _STATEMENTS[key] = found
                while len(_STATEMENTS) > STATEMENT_CACHE_SIZE:
                    del _STATEMENTS[next(iter(_STATEMENTS))]
        return found

    def _shape(self) -> tuple:
        """Everything a slice statement is built from: the groups, the ids
        their names resolved to, and whether sharing providers exist."""
        if self._shape_key is None:
            lk = self.lk
            groups = tuple((g.suffix,) + _group_key(g)
                           for g in self.req.groups.values())
            ids = tuple(frozenset(m.items()) for m in (
                lk.rc_ids, lk.trait_ids, lk.agg_ids, lk.tree_roots))
            self._shape_key = (groups, ids, bool(self.shared_by_key))
        return self._shape_key

    def _read_rows(self, where, facts: Facts, in_trees: bool = True,
                   params=None) -> bool:
        """Read the providers serving each group; False when, reading the
        trees of a slice, some slot has none there and no sharing provider
        either (the slice has no candidate; the rest is not read)."""
        g = self.unnumbered
        if g is not None:
            query, rc_order = self._built(
                ("unnumbered", in_trees),
                lambda: self._unnumbered_select(where, in_trees), params is not None)
            nflags = len(g.required)
            for row in self.conn.execute(query, params or {}).all():
                rp, root = row[0], row[1]
                facts.uuid[rp] = row[2]
                facts.root[rp] = root
                facts.parent[rp] = row[3]
                if row[4]:
                    facts.alone.add(rp)
                pos = 5
                for rc in rc_order:
                    if row[pos]:
                        facts.add(("", rc), rp, root)
                    pos += 1
                if nflags:
                    facts.trait_flags[rp] = tuple(
                        bool(x) for x in row[pos:pos + nflags])
                pos += nflags
                if not in_trees and g.member_of:
                    facts.agg_ok[rp] = bool(row[pos])
                    pos += 1
                if not in_trees and g.forbidden_aggs:
                    facts.agg_bad[rp] = bool(row[pos])
            if in_trees and any(("", rc) not in facts.rows
                                and ("", rc) not in self.shared_by_key
                                for rc in rc_order):
                return False
        for suffixes in self._alike_numbered():
            group = self.req.groups[suffixes[0]]
            for suffix in suffixes:
                facts.rows.setdefault(suffix, {})
            query = self._built(("numbered", suffixes[0]),
                                lambda: self._numbered_select(group, where),
                                params is not None)
            rows = self.conn.execute(query, params or {}).all()
            if not rows and in_trees and suffixes[0] not in self.shared_by_key:
                return False
            for rp, root, uuid, parent in rows:
                facts.uuid[rp] = uuid
                facts.root[rp] = root
                facts.parent[rp] = parent
                for suffix in suffixes:
                    facts.add(suffix, rp, root)
        return True

    def _alike_numbered(self) -> list:
        """The numbered groups' suffixes, those asking for the same thing
        together: one query serves them all (a request may repeat one
        group many times)."""
        if self._alike is None:
            alike: dict = {}
            for suffix, group in self.req.groups.items():
                if suffix:
                    alike.setdefault(_group_key(group), []).append(suffix)
            self._alike = list(alike.values())
        return self._alike

    def _read_inventory(self, where, facts: Facts, params=None) -> None:
        if not self.multi_rcs:
            return
        inv = t.inventories
        query = self._built("inventory", lambda: (
            select(inv.c.resource_provider_id, inv.c.resource_class_id,
                   inv.c.total, inv.c.reserved, inv.c.allocation_ratio,
                   inv.c.max_unit, filters.used_subquery(inv))
            .select_from(RP.join(inv, inv.c.resource_provider_id == RP.c.id))
            .where(where, inv.c.resource_class_id.in_(sorted(self.multi_rcs)))),
            params is not None)
        for rp, rc, total, reserved, ratio, max_unit, used in self.conn.execute(
                query, params or {}):
            facts.inventory[(rp, rc)] = (
                int(capacity.capacity_from(total, reserved, ratio)),
                int(used or 0), max_unit)

    def _read_roots(self, lo: int, hi: int, facts: Facts) -> None:
        """Anchor facts: root_required, and the unnumbered group's forbidden
        aggregates on roots (which span their trees, and keep sharing
        providers out of them)."""
        lk = self.lk
        g = self.unnumbered
        cols = [RP.c.id]
        conds = [RP.c.id.between(lo, hi), RP.c.id == RP.c.root_provider_id]
        required = [{n} for n in self.req.root_required]
        conds += filters.trait_clauses(RP.c.id, required, self.req.root_forbidden,
                                       lk.trait_ids)
        if g is not None and g.forbidden_aggs:
            cols.append(case((filters.in_any_aggregate(
                RP.c.id, filters.known_ids(g.forbidden_aggs, lk.agg_ids)), 1), else_=0))
        for row in self.conn.execute(select(*cols).where(*conds)):
            rp = row[0]
            facts.root_ok.add(rp)
            if g is not None and g.forbidden_aggs:
                facts.root_agg_bad[rp] = bool(row[1])

    def _read_parents(self, facts: Facts) -> None:
        """Complete the parent links of the providers read so far with
        their ancestors that serve no group (for same_subtree)."""
        known = self.shared.parent
        while True:
            missing = {p for p in facts.parent.values()
                       if p is not None and p not in facts.parent and p not in known}
            if not missing:
                return
            for part in chunks(sorted(missing)):
                for rp, parent in self.conn.execute(select(
                        RP.c.id, RP.c.parent_provider_id).where(RP.c.id.in_(part))):
                    facts.parent[rp] = parent

    def _read_sharing(self) -> None:
        """Sharing providers able to serve some slot, and the trees
        (anchors) each of them serves: its own, and those of every provider
        sharing one of its aggregates."""
        ids = list(self.conn.scalars(_SHARING_PROVIDERS))
        if not ids:
            return
        facts = self.shared
        for part in chunks(ids):
            self._read_rows(RP.c.id.in_(part), facts, in_trees=False)
        self.uuids.update(facts.uuid)
        self.roots.update(facts.root)
        self.alone |= facts.alone
        self.shared_by_key = {key: facts.providers(key) for key in facts.rows}
        eligible = set().union(*self.shared_by_key.values()) \
            if self.shared_by_key else set()
        if not eligible:
            self.shared_by_key = {}
            return
        for part in chunks(sorted(eligible)):
            self._read_inventory(RP.c.id.in_(part), facts)
        rpa = t.resource_provider_aggregates
        other = rpa.alias("other")
        member = RP.alias("member")
        for part in chunks(sorted(eligible)):
            query = (select(rpa.c.resource_provider_id, member.c.root_provider_id)
                     .select_from(rpa.join(other, other.c.aggregate_id == rpa.c.aggregate_id)
                                  .join(member, member.c.id == other.c.resource_provider_id))
                     .where(rpa.c.resource_provider_id.in_(part)).distinct())
            for ss, anchor in self.conn.execute(query):
                self.sharing.setdefault(anchor, set()).add(ss)
        for ss in eligible:
            self.sharing.setdefault(facts.root[ss], set()).add(ss)
        if self.need_parents:
            self._read_parents(facts)

    # -- the search ---------------------------------------------------------

    def _options(self, anchor: int, facts: Facts) -> Optional[list]:
        """Per slot, the providers that may serve it in anchor's tree."""
        sharers = self.sharing.get(anchor, ())
        g = self.unnumbered
        out = []
        for slot in self.slots:
            key = slot.suffix if slot.numbered else ("", next(iter(slot.resources)))
            opts = list(facts.rows.get(key, {}).get(anchor, ()))
            if sharers and not (not slot.numbered and g.in_tree):
                eligible = self.shared_by_key.get(key, ())
                extra = [ss for ss in sorted(sharers)
                         if ss in eligible and ss not in opts]
                if not slot.numbered and (g.member_of or g.forbidden_aggs):
                    extra = self._sharing_aggregates_ok(extra, anchor, facts)
                opts += extra
            if not opts:
                return None
            out.append(opts)
        return out

    def _sharing_aggregates_ok(self, sharers, anchor, facts) -> list:
        """The unnumbered group's aggregate rule for a sharing provider
        serving anchor's tree: it is itself in the aggregates (as in
        Placement since bug 1792503: the anchor root's membership, which
        spans its own tree, does not reach a provider outside it), and
        neither it nor the anchor root is in a forbidden one. (For
        providers of the tree itself the SQL has applied the rule.)"""
        g = self.unnumbered
        # A sharing provider's own aggregate flags were read with it (into
        # self.shared); the anchor root's with the slice.
        agg_ok = self.shared.agg_ok
        agg_bad = self.shared.agg_bad
        root_agg_bad = facts.root_agg_bad
        kept = []
        for rp in sharers:
            if g.member_of and not agg_ok.get(rp):
                continue
            if g.forbidden_aggs and (
                    agg_bad.get(rp) or root_agg_bad.get(anchor, False)):
                continue
            kept.append(rp)
        return kept

    def _inventory(self, facts: Facts, key):
        return facts.inventory.get(key) or self.shared.inventory.get(key)

    def _traits_ok(self, rps) -> bool:
        g = self.unnumbered
        if not g.required:
            return True
        have = [False] * len(g.required)
        for rp in rps:
            flags = self.facts_now.trait_flags.get(rp) or self.shared.trait_flags.get(rp)
            for i, flag in enumerate(flags or ()):
                if flag:
                    have[i] = True
        return all(have)

    def _below(self, rp, top) -> bool:
        """rp is top or one of its descendants."""
        parent = self.facts_now.parent
        shared = self.shared.parent
        steps = 0
        while rp is not None and steps < 64:
            if rp == top:
                return True
            rp = parent[rp] if rp in parent else shared.get(rp)
            steps += 1
        return False

    def _subtree_ok(self, chosen, members) -> bool:
        """The providers chosen for the slots in `members` all sit below
        (or are) one of them."""
        rps = {chosen[i] for i in members}
        if len(rps) <= 1:
            return True
        if len(rps) == 2:
            a, b = rps
            return self._below(a, b) or self._below(b, a)
        return any(all(self._below(rp, top) for rp in rps if rp != top)
                   for top in rps)

    def _root_of(self, rp):
        return self.facts_now.root.get(rp) or self.shared.root.get(rp)

    def _one_per_tree_ok(self, chosen) -> bool:
        roots: dict = {}
        for i, slot in enumerate(self.slots):
            if not slot.resources:
                continue
            rp = chosen[i]
            root = self._root_of(rp)
            if roots.setdefault(root, rp) != rp:
                return False
        return True

    def _combine(self, options: list) -> Iterator[tuple]:
        slots = self.slots
        n = len(slots)
        chosen = [0] * n
        amounts: dict = {}
        in_use: dict = {}
        last_unnumbered = self.unnumbered_slots[-1] if self.unnumbered_slots else -1
        facts = self.facts_now

        multi = bool(self.multi_rcs)

        def fits(rp, slot):
            if not multi:
                return ()
            added = []
            for rc, amount in slot.resources.items():
                if rc not in self.multi_rcs:
                    continue
                key = (rp, rc)
                before = amounts.get(key, 0)
                total = before + amount
                if before:
                    inv = self._inventory(facts, key)
                    if inv is None or inv[1] + total > inv[0] or total > inv[2]:
                        for k, a in added:
                            amounts[k] -= a
                        return None
                amounts[key] = total
                added.append((key, amount))
            return added

        # same_subtree is checked as soon as the last slot it names is chosen.
        subtree_checks: dict = {}
        for subtree in self.req.same_subtrees:
            members = [j for j, s in enumerate(slots) if s.suffix in subtree]
            if members:
                subtree_checks.setdefault(max(members), []).append(members)

        if n == 0 or (multi and not self._room_for_all(options)):
            return
        # Dead ends: capacity merging and isolation make a level fail for
        # what has been placed, not for the order it was placed in. A
        # level that yielded nothing is remembered by that state and not
        # searched again, so many alike groups that cannot all fit are
        # refused in polynomial, not exponential, steps.
        memo = multi or self.isolate
        needed = self._needed_choices(subtree_checks) if memo else ()
        dead: set = set()
        entered = [0] * n  # per level: yields before it was entered
        yields = 0

        def state(j):
            placed = frozenset(kv for kv in amounts.items() if kv[1])
            taken = frozenset(rp for rp, k in in_use.items() if k) \
                if self.isolate else None
            return (j, placed, taken, tuple(chosen[m] for m in needed[j]))

        # Depth-first over the slots with an explicit stack of option
        # iterators: a request may have as many slots as groups and
        # classes, more than Python's recursion allows.
        pending: list = [None] * n  # per level: what its choice added
        steps = 0  # tries since this tree's last candidate
        levels = [iter(options[0])]
        while levels:
            i = len(levels) - 1
            slot = slots[i]
            undo = pending[i]
            if undo is not None:
                # Back at this level: take back its previous choice.
                pending[i] = None
                if slot.numbered:
                    in_use[chosen[i]] -= 1
                for k, a in undo:
                    amounts[k] -= a
            checks = subtree_checks.get(i, ())
            for rp in levels[i]:
                steps += 1
                if steps > TREE_STEPS or self.work + steps > REQUEST_STEPS:
                    self.work += steps
                    self.cut_short = self.work > REQUEST_STEPS
                    if self.cut_short:
                        LOG.warning("candidate search stopped after %d tries "
                                    "in all (%d slots); answering with the "
                                    "%d found", self.work, n, self.yielded)
                    else:
                        LOG.warning("candidate search left a tree after %d "
                                    "tries without a candidate (%d slots)",
                                    steps, n)
                    return
                if self.isolate and slot.numbered and in_use.get(rp):
                    continue
                added = fits(rp, slot)
                if added is None:
                    continue
                chosen[i] = rp
                if (i == last_unnumbered and not self._traits_ok(
                        [chosen[j] for j in self.unnumbered_slots])) or (
                        checks and not all(self._subtree_ok(chosen, members)
                                           for members in checks)):
                    for k, a in added:
                        amounts[k] -= a
                    continue
                if slot.numbered:
                    in_use[rp] = in_use.get(rp, 0) + 1
                pending[i] = added
                break
            else:
                levels.pop()
                if memo and i and yields == entered[i] and len(dead) < MAX_DEAD_ENDS:
                    # Every choice of this level is taken back: the state
                    # is the one it was entered with.
                    dead.add(state(i))
                continue
            if i + 1 == n:
                yields += 1
                self.work += steps
                steps = 0
                yield tuple(chosen)
            elif memo:
                # Until a dead end is found, a search costs no state keys.
                if not dead or state(i + 1) not in dead:
                    entered[i + 1] = yields
                    levels.append(iter(options[i + 1]))
            else:
                levels.append(iter(options[i + 1]))
        self.work += steps

    def _needed_choices(self, subtree_checks: dict) -> list:
        """Per level j: the earlier slots whose chosen provider a later
        check still reads (the unnumbered group's traits, same_subtree)."""
        n = len(self.slots)
        last_unnumbered = self.unnumbered_slots[-1] if self.unnumbered_slots else -1
        needed = []
        for j in range(n):
            used = set()
            if j <= last_unnumbered:
                used.update(m for m in self.unnumbered_slots if m < j)
            for at, groups in subtree_checks.items():
                if at >= j:
                    for members in groups:
                        used.update(m for m in members if m < j)
            needed.append(tuple(sorted(used)))
        return needed

    def _room_for_all(self, options: list) -> bool:
        """For each class several slots ask for, the providers that may
        serve those slots have room for their sum. A cheap necessary
        condition: without it, many small groups that cannot all fit
        would have the search try every way of splitting them."""
        facts = self.facts_now
        for rc in self.multi_rcs:
            wanted = 0
            unit = 0  # every amount asked is a multiple of it
            serving = set()
            for slot, opts in zip(self.slots, options):
                amount = slot.resources.get(rc)
                if amount:
                    wanted += amount
                    unit = math.gcd(unit, amount)
                    serving.update(opts)
            room = 0
            for rp in serving:
                inv = self._inventory(facts, (rp, rc))
                if inv is not None:
                    # A provider can only take whole units of it.
                    room += (inv[0] - inv[1]) // unit * unit
            if wanted > room:
                return False
        return True

    def _spans(self) -> Iterator[tuple]:
        """Root id ranges to read, sized from what the slices so far
        yielded, so a bounded answer reads little more than it needs."""
        # Two queries: SQLite answers min() or max() from the index alone,
        # but scans the table for both at once.
        lo = self.conn.execute(select(func.min(RP.c.id))).scalar()
        if lo is None:
            return
        top = self.conn.execute(select(func.max(RP.c.id))).scalar()
        start = lo
        span = FIRST_SPAN
        if self.bound:
            span = max(MIN_SPAN, 2 * self.bound)
        while lo <= top:
            hi = min(lo + span - 1, top)
            yield lo, hi
            lo = hi + 1
            span = min(span * 2, MAX_SPAN)
            if self.bound and self.yielded:
                per_id = self.yielded / (hi - start + 1)
                needed = self.bound - self.yielded
                span = int(min(max(needed / per_id * 1.2, FIRST_SPAN), MAX_SPAN))

    def candidates(self) -> Iterator[Candidate]:
        self._read_sharing()
        g = self.unnumbered
        self.need_root_facts = bool(
            self.req.root_required or self.req.root_forbidden or (
                self.sharing and g is not None and g.forbidden_aggs))
        # A tree of one provider, with no sharing provider to help and no
        # numbered group, is a candidate exactly when the SQL returned it.
        single = g is not None and not self.sharing and all(
            not s.numbered for s in self.slots)
        seen = set()
        where = RP.c.root_provider_id.between(
            bindparam("slice_lo"), bindparam("slice_hi"))
        for lo, hi in self._spans():
            facts = Facts()
            self.facts_now = facts
            params = {"slice_lo": lo, "slice_hi": hi}
            if not self._read_rows(where, facts, params=params):
                continue
            self.uuids.update(facts.uuid)
            self.roots.update(facts.root)
            self.alone |= facts.alone
            anchors = set()
            for rows in facts.rows.values():
                anchors.update(rows)
            anchors.update(a for a in self.sharing if lo <= a <= hi)
            if not anchors:
                continue
            self._read_inventory(where, facts, params=params)
            if self.need_root_facts:
                self._read_roots(lo, hi, facts)
                anchors &= facts.root_ok
            if self.need_parents:
                self._read_parents(facts)
            for anchor in sorted(anchors):
                if single and anchor in facts.alone:
                    self.yielded += 1
                    yield Candidate((anchor,), self._layout((0,) * len(self.slots)))
                    continue
                options = self._options(anchor, facts)
                if options is None:
                    continue
                for chosen in self._combine(options):
                    if chosen in seen:
                        continue
                    if not self.req.nested_aware and not self._one_per_tree_ok(chosen):
                        continue
                    seen.add(chosen)
                    self.yielded += 1
                    yield self._candidate(chosen)
                if self.cut_short:
                    return

    def _layout(self, pattern: tuple) -> Layout:
        layout = self._layouts.get(pattern)
        if layout is None:
            layout = self._layouts[pattern] = Layout(self.slots, pattern)
        return layout

    def _candidate(self, chosen) -> Candidate:
        providers = tuple(dict.fromkeys(chosen))
        # Each slot's provider as a position in `providers`.
        pattern = tuple(map(providers.index, chosen))
        return Candidate(providers, self._layout(pattern))


def resolve(conn: Connection, req: CandidateRequest) -> Optional[Lookups]:
    """Names -> ids. Unknown classes/traits are a 400; an in_tree naming no
    provider means no candidates (None)."""
    rc_ids = filters.resource_class_ids(conn, req.resource_class_names())
    trait_ids = filters.trait_ids(conn, req.trait_names())
    agg_ids = filters.aggregate_ids(conn, req.aggregate_uuids())
    tree_roots = {}
    for suffix, group in req.groups.items():
        if group.in_tree:
            root = conn.execute(select(RP.c.root_provider_id).where(
                RP.c.uuid == group.in_tree)).scalar()
            if root is None:
                return None
            tree_roots[suffix] = root
    return Lookups(rc_ids, trait_ids, agg_ids, tree_roots)


@dataclass
class Result:
    candidates: list  # of Candidate, provider ids
    uuids: dict  # provider id -> uuid for every provider in candidates
    roots: dict  # provider id -> root id
    class_names: dict = field(default_factory=dict)  # class id -> name
    alone: set = field(default_factory=set)  # providers alone in their tree


def find(conn: Connection, req: CandidateRequest, max_candidates: int = 0,
         randomize: bool = False) -> Result:
    """The candidates for a parsed request, bounded by `limit` and by
    max_candidates (<= 0: unbounded); a random sample when randomize."""
    lookups = resolve(conn, req)
    if lookups is None:
        return Result([], {}, {})
    search = Search(conn, req, lookups)
    bound = max_candidates if max_candidates and max_candidates > 0 else None
    if req.limit and not randomize:
        bound = min(bound, req.limit) if bound else req.limit
    search.bound = bound
    found: list = []
    for cand in search.candidates():
        found.append(cand)
        if bound and len(found) >= bound:
            break
    if randomize and req.limit and len(found) > req.limit:
        found = random.sample(found, req.limit)
    names = {rc: name for name, rc in lookups.rc_ids.items()}
    return Result(found, search.uuids, search.roots, names, search.alone)
