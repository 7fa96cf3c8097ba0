"""Allocation candidates: the orchestrator of the reader and the combiner.

The work is done one slice of provider trees at a time (a range of root
provider ids, growing geometrically), so a request with a `limit` reads
and combines only as many trees as it needs:

1. the sharing providers (trait MISC_SHARES_VIA_AGGREGATE) are read once
   for the whole request (candidates/reader.py);
2. per slice, the reader returns the providers that can serve each group,
   as an immutable Facts value;
3. the combiner (candidates/combiner.py) yields the slice's candidates
   lazily, tree by tree, and the walk stops once `limit` are found.

An observer (see candidates/explain.py) may listen to every step; the
answer is the same with or without one.
"""
from __future__ import annotations

import bisect
import random
from itertools import islice
from dataclasses import dataclass, field
from typing import Iterator, Optional

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite.candidates import combiner, filters
from placement_lite.candidates.facts import Sharing, Slice
from placement_lite.candidates.kept import KeptCache, kept_for
from placement_lite.candidates.memory import MemoryReader
from placement_lite.candidates.plan import Candidate, Layout, Lookups, Plan
from placement_lite.candidates.reader import Reader
from placement_lite.candidates.query import CandidateRequest
from placement_lite.candidates.snapshot import Snapshot
from placement_lite.db import tables as t

RP = t.resource_providers
FIRST_SPAN = 256
MIN_SPAN = 32
MAX_SPAN = 1 << 16
# Trees per slice of a walk over chosen trees (Search.trees).
MAX_RUN = 4096


class Observer(combiner.Watcher):
    """Hears each step of a search; the default hears nothing."""

    def shared(self, sharing: Sharing) -> None:
        """The sharing providers were read."""

    def sliced(self, lo: int, hi: int, part: Optional[Slice]) -> None:
        """A slice was read (None: some slot has no provider in it)."""


QUIET = Observer()


class Search:
    """One request's walk over the slices, up to `bound` candidates."""

    def __init__(self, conn: Connection, req: CandidateRequest, lookups: Lookups,
                 bound: Optional[int] = None, observer: Observer = QUIET,
                 budget: Optional[combiner.Budget] = None,
                 snapshot: Optional[Snapshot] = None,
                 trees: Optional[list] = None, kept: Optional[KeptCache] = None):
        """`trees`: with `snapshot`, walk only these trees (their roots'
        ids, ascending) rather than every one. `kept`: where the process
        keeps what it derives from `snapshot` per request shape."""
        self.plan = Plan(req, lookups)
        # With the process's copy of the facts, only `used` is read; the
        # SQL reader asks the database everything.
        self.reader = (Reader(conn, self.plan) if snapshot is None
                       else MemoryReader(conn, self.plan, snapshot, kept))
        # Over the copy of the facts, the trees' walks are remembered
        # per request shape while the copy lasts: a tree whose usage did
        # not change since is not walked again (combiner._walk).
        self._walks = (None if snapshot is None else
                       kept_for(kept, snapshot, self.plan.walk_shape, by_tree=True))
        self.bound = bound
        self.trees = trees
        self.observer = observer
        self.budget = budget or combiner.Budget()
        self._layouts: dict = {}
        self._one = Layout(self.plan.slots, (0,) * len(self.plan.slots))
        # Every provider read, for the rendering of the candidates.
        self.uuids: dict = {}
        self.roots: dict = {}
        self.alone: set = set()

    def _learn(self, facts) -> None:
        self.uuids.update(facts.uuid)
        self.roots.update(facts.root)
        self.alone |= facts.alone

    def _spans(self) -> Iterator[tuple]:
        """Root id ranges to read, sized from what the slices so far
        yielded, so a bounded answer reads little more than it needs."""
        if self.trees is not None:
            yield from _runs(self.reader.snap.roots, self.trees)
            return
        found = self.reader.bounds()
        if found is None:
            return
        lo, top = found
        start = lo
        bound = self.bound
        span = max(MIN_SPAN, 2 * bound) if bound else FIRST_SPAN
        while lo <= top:
            hi = min(lo + span - 1, top)
            yield lo, hi
            lo = hi + 1
            span = min(span * 2, MAX_SPAN)
            yielded = self.budget.found
            if bound and yielded:
                per_id = yielded / (hi - start + 1)
                needed = bound - yielded
                span = int(min(max(needed / per_id * 1.2, FIRST_SPAN), MAX_SPAN))

    def candidates(self) -> Iterator[Candidate]:
        plan = self.plan
        sharing = self.reader.sharing()
        self._learn(sharing.facts)
        self.observer.shared(sharing)
        seen: set = set()
        for lo, hi in self._spans():
            part = self.reader.slice(lo, hi, sharing)
            self.observer.sliced(lo, hi, part)
            if part is None:
                continue
            self._learn(part.facts)
            for chosen in combiner.slice_choices(plan, sharing, part, self.budget,
                                                 seen, self.observer, self._walks):
                yield self._candidate(chosen)
            if self.budget.cut_short:
                return

    def result(self, found: list) -> "Result":
        """`found`, candidates of this search, with what renders them."""
        names = {rc: name for name, rc in self.plan.lookups.rc_ids.items()}
        memory = self.reader if isinstance(self.reader, MemoryReader) else None
        return Result(found, self.uuids, self.roots, names, self.alone, memory)

    def _candidate(self, chosen) -> Candidate:
        if chosen and chosen.count(chosen[0]) == len(chosen):
            # One provider serves every slot (a flat cloud's every answer).
            return Candidate(chosen[:1], self._one)
        providers = tuple(dict.fromkeys(chosen))
        # Each slot's provider as a position in `providers`.
        pattern = tuple(map(providers.index, chosen))
        layout = self._layouts.get(pattern)
        if layout is None:
            layout = self._layouts[pattern] = Layout(self.plan.slots, pattern)
        return Candidate(providers, layout)


def _runs(roots: list, trees: list) -> Iterator[tuple]:
    """Root id ranges covering exactly `trees` of all `roots` (both
    ascending): each run of trees next to each other in `roots`, at most
    MAX_RUN of them."""
    first = last = at = None
    for tree in trees:
        i = bisect.bisect_left(roots, tree, at or 0)
        if first is not None and i == at + 1 and i - first < MAX_RUN:
            last, at = tree, i
            continue
        if first is not None:
            yield roots[first], last
        first, last, at = i, tree, i
    if first is not None:
        yield roots[first], last


def resolve(conn: Connection, req: CandidateRequest,
            snapshot: Optional[Snapshot] = None) -> Optional[Lookups]:
    """Names -> ids. Unknown classes/traits are a 400; an in_tree naming no
    provider means no candidates (None). Aggregates and trees are looked
    up in `snapshot` when there is one."""
    rc_ids = filters.resource_class_ids(conn, req.resource_class_names())
    trait_ids = filters.trait_ids(conn, req.trait_names())
    if snapshot is None:
        agg_ids = filters.aggregate_ids(conn, req.aggregate_uuids())
    else:
        known = snapshot.aggregate_ids
        agg_ids = {u: known[u] for u in req.aggregate_uuids() if u in known}
    tree_roots = {}
    for suffix, group in req.groups.items():
        if group.in_tree:
            if snapshot is not None:
                root = snapshot.root_of(group.in_tree)
            else:
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
    # The reader over the process's copy of the facts, when the search
    # used one: the summaries come from it too.
    memory: Optional[MemoryReader] = None


def bound_of(req: CandidateRequest, max_candidates: int = 0,
             randomize: bool = False) -> Optional[int]:
    """How many candidates a search may stop at (None: all): `limit`,
    unless a random sample of all is to be taken, and max_candidates
    (<= 0: unbounded)."""
    bound = max_candidates if max_candidates and max_candidates > 0 else None
    if req.limit and not randomize:
        bound = min(bound, req.limit) if bound else req.limit
    return bound


def find(conn: Connection, req: CandidateRequest, max_candidates: int = 0,
         randomize: bool = False, observer: Observer = QUIET,
         lookups: Optional[Lookups] = None,
         snapshot: Optional[Snapshot] = None,
         kept: Optional[KeptCache] = None) -> Result:
    """The candidates for a parsed request, bounded by `limit` and by
    max_candidates (<= 0: unbounded); a random sample when randomize.
    `snapshot`: the process's copy of the facts, read in `conn`'s
    transaction (candidates/snapshot.py); without it, all from SQL.
    `kept`: what the process keeps derived from its copies (kept.py)."""
    if lookups is None:
        lookups = resolve(conn, req, snapshot)
    if lookups is None:
        return Result([], {}, {})
    bound = bound_of(req, max_candidates, randomize)
    search = Search(conn, req, lookups, bound, observer, snapshot=snapshot, kept=kept)
    found: list = []
    for cand in search.candidates():
        found.append(cand)
        if bound and len(found) >= bound:
            break
    if randomize and req.limit and len(found) > req.limit:
        found = random.sample(found, req.limit)
    return search.result(found)


# A full answer kept tree by tree for at most this many trees (beyond,
# each request works the answer out whole, as a bounded one does).
TREES_KEPT = combiner.REMEMBERED_TREES


class _Steps(Observer):
    """The combination work each tree's walk took, from the budget's
    count as each tree is done."""

    def __init__(self, budget: combiner.Budget):
        self.budget = budget
        self.done = 0
        self.per_tree: dict = {}

    def tree_combined(self, anchor: int, found: int, older_rule: int) -> None:
        self.per_tree[anchor] = self.budget.work - self.done
        self.done = self.budget.work


def tree_parts(conn: Connection, req: CandidateRequest, snapshot: Snapshot,
               shape: tuple, render, bound: Optional[int] = None,
               kept: Optional[KeptCache] = None) -> Optional[list]:
    """An answer over the process's copy of the facts as each tree's part
    of it, in the order of the trees (those without candidates left
    out), up to `bound` candidates (None: all).

    `render(result)` turns a Result into {root id: (each candidate's
    text, the summaries' text)} for the trees it holds candidates of;
    `shape` names the request and the format of the parts (the query
    string and microversion, say). A tree's candidates depend on its
    facts and on the `used` of its inventory alone when no provider
    shares (a candidate never leaves its tree), so its part is kept with
    the copy (per request and shape, by tree, as its walks are:
    kept.Kept, in `kept`) beside that usage, and given again while the usage
    read now is the same. Only the trees whose usage changed since are
    walked again: after a claim, one.

    None where this does not apply, for the caller to search as usual:
    with sharing providers, with more than TREES_KEPT trees, when the
    budget of combination work would stop the answer short (a search
    stops it alike), or when `bound` falls within a tree's candidates
    before microversion 1.29 (the summaries would be of the candidates
    given, not of the tree).
    """
    if snapshot.sharing or len(snapshot.roots) > TREES_KEPT:
        return None
    lookups = resolve(conn, req, snapshot)
    if lookups is None:
        return []
    try:
        return _TreeAnswer(conn, req, lookups, snapshot, shape, render, bound,
                           kept).parts()
    except _NoParts:
        return None


class _NoParts(Exception):
    """This answer cannot be made of kept parts (tree_parts returns None)."""


class _TreeAnswer:
    """One request's answer made of the parts kept by tree (tree_parts)."""

    def __init__(self, conn: Connection, req: CandidateRequest, lookups: Lookups,
                 snapshot: Snapshot, shape: tuple, render, bound: Optional[int],
                 kept: Optional[KeptCache]):
        self.req, self.snap, self.render, self.bound = req, snapshot, render, bound
        self.budget = combiner.Budget()
        self.steps = _Steps(self.budget)
        self.search = Search(conn, req, lookups, None, self.steps, self.budget, snapshot,
                             kept=kept)
        self.reader = self.search.reader
        self.kept = kept_for(kept, snapshot,
                             ("answer by tree", shape, self.search.plan.shape), by_tree=True)
        self.usage_keys = kept_for(kept, snapshot, ("usage keys",), by_tree=True)
        self.given = 0  # candidates in the answer so far
        self.work = 0  # combination steps the answer's trees took

    def parts(self) -> list:
        roots, members = self.snap.roots, self.snap.members
        # Trees per `used` read: all; or as many as the last answer of this
        # shape went through, and an eighth more (or, first, a quarter more
        # than the bound: each tree gives one candidate or more, or none),
        # then doubling: a repeated request reads its usage in one statement.
        scanned = self.kept.note
        if self.bound is None:
            size = len(roots)
        elif scanned is None:
            size = max(MIN_SPAN, self.bound + self.bound // 4)
        else:
            size = max(MIN_SPAN, scanned + scanned // 8)
        if size >= len(roots):
            # Every tree's usage is read: in one statement, by range.
            self.reader.read_all_used()
        out: list = []
        at = 0
        while at < len(roots):
            trees = roots[at:at + size]
            size = min(2 * size, MAX_RUN)
            if not self.reader.all_read:
                self.reader.read_used([rp for tree in trees for rp in members[tree]])
            i = 0
            while i < len(trees):
                entries, i = self._scan(trees, i)
                if self._give(entries, out):
                    self.kept.note = at + i
                    return self._within_budget(out)
            at += len(trees)
        self.kept.note = len(roots)
        return self._within_budget(out)

    def _within_budget(self, out: list) -> list:
        """`out`, unless its trees' walks took more than a request's
        budget: a search would have stopped short, and does so again."""
        if self.work > self.budget.request_steps:
            raise _NoParts
        return out

    def _scan(self, trees: list, i: int) -> tuple:
        """From trees[i] on, in order, until the trees kept (or, stale,
        what they gave last) give what the bound asks: each tree's entry
        (usage, part or None, walk steps), the stale ones walked again;
        and where the scan stopped. An entry is None for a tree past a
        bound met within the walk, which was not walked."""
        used, bound = self.reader.used.get, self.bound
        keys_of, known, kept = self.usage_keys.get, self.kept.get, self.kept
        entries = []  # (root, kept entry, or None if stale)
        stale = []  # (root, its usage now)
        guess = 0
        for root in trees[i:]:
            if bound is not None and self.given + guess >= bound:
                break
            i += 1
            key = (root,)
            keys = keys_of(key)
            if keys is None:
                keys = self.usage_keys.settle(key, self._usage_keys)
            usage = tuple(map(used, keys))
            entry = known(key)
            if entry is None:
                entry = kept.carried(key, None)
                if entry is not None:
                    kept[key] = entry
            if entry is not None and entry[1] is not None:
                # Stale, its last count is the best guess: a claim
                # seldom changes it (if it did, the scan goes on).
                guess += len(entry[1][0])
            if entry is not None and entry[0] != usage:
                entry = None
            if entry is None:
                stale.append((root, usage))
            entries.append((root, entry))
        if not stale:
            return [entry for _root, entry in entries], i
        fresh = self._walk(stale)
        return [entry or fresh.get(root) for root, entry in entries], i

    def _usage_keys(self, key: tuple) -> tuple:
        """The (provider, class) of every inventory row of the tree
        rooted at key[0], in a fixed order."""
        inventory = self.snap.inventory
        return tuple((rp, rc) for rp in self.snap.members[key[0]]
                     for rc in sorted(inventory[rp]))

    def _walk(self, stale: list) -> dict:
        """Walk the stale trees again, lazily, as a search does (a tree
        may hold more candidates than any answer gives): root -> entry,
        kept but for a tree the bound cut short."""
        search = self.search
        search.trees = [root for root, _usage in stale]
        needed = None if self.bound is None else self.bound - self.given
        found = list(islice(search.candidates(), None if needed is None else needed + 1))
        if self.budget.cut_short:  # a search stops alike
            raise _NoParts
        # One more than needed, to know where the walk stopped: in the
        # tree of that one, which may have more (its part is given, not
        # kept); those after it were not walked (the bound is met before
        # them).
        stop = None
        if needed is not None and len(found) > needed:
            stop = search.roots[found.pop().providers[0]]
        parts = self.render(search.result(found))
        walked = self.steps.per_tree
        fresh = {}
        for root, usage in stale:
            if stop is not None and root > stop:
                break
            fresh[root] = entry = (usage, parts.get(root), walked.get(root, 0))
            if root != stop:
                self.kept[(root,)] = entry
        return fresh

    def _give(self, entries: list, out: list) -> bool:
        """Add the entries' parts to `out` until the bound is met (True).
        Before microversion 1.29 a bound within a tree's candidates cannot
        be met with parts: the summaries would be of the candidates
        given, not of the tree."""
        for entry in entries:
            if entry is None:  # not walked: past a bound met
                raise _NoParts
            self.work += entry[2]
            part = entry[1]
            if part is None:
                continue
            self.given += len(part[0])
            if self.bound is not None and self.given >= self.bound:
                over = self.given - self.bound
                if over:
                    if not self.req.nested_aware:
                        raise _NoParts
                    part = (part[0][:len(part[0]) - over], part[1])
                out.append(part)
                return True
            out.append(part)
        return False
