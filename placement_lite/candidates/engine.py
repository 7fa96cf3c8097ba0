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
from dataclasses import dataclass, field
from itertools import islice
from typing import Callable, Iterable, Iterator, Optional

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite.candidates import combiner, filters, viable
from placement_lite.candidates.facts import Sharing, Slice
from placement_lite.candidates.kept import KeptCache, kept_for
from placement_lite.candidates.memory import MemoryReader
from placement_lite.candidates.overlay import Overlay
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

    def drew(self, found: list) -> None:
        """Of the search's candidates, those a claim drawing from a
        reservation takes as asked (drawing.py), before the limit."""


QUIET = Observer()


class Search:
    """One request's walk over the slices, up to `bound` candidates."""

    def __init__(self, conn: Connection, req: CandidateRequest, lookups: Lookups,
                 bound: Optional[int] = None, observer: Observer = QUIET,
                 budget: Optional[combiner.Budget] = None,
                 snapshot: Optional[Snapshot] = None,
                 trees: Optional[list] = None, kept: Optional[KeptCache] = None,
                 overlay: Optional[Overlay] = None):
        """`trees`: with `snapshot`, walk only these trees (their roots'
        ids, ascending) rather than every one. `kept`: where the process
        keeps what it derives from `snapshot` per request shape.
        `overlay`: extra `used` for this request alone (overlay.py)."""
        self.plan = Plan(req, lookups)
        if snapshot is None and overlay is not None:
            # The SQL reader's statements choose by `used`: it cannot give
            # room back (overlay.py), so it takes the extras above 0.
            overlay = overlay.taking()
        self.overlay = overlay
        # With the process's copy of the facts, only `used` is read; the
        # SQL reader asks the database everything.
        self.reader = (Reader(conn, self.plan, overlay) if snapshot is None
                       else MemoryReader(conn, self.plan, snapshot, kept, overlay))
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
        if isinstance(self.reader, MemoryReader):
            return Result(found, self.uuids, self.roots, names, self.alone,
                          self.reader.snap, self.reader.used, self.reader.read_used)
        return Result(found, self.uuids, self.roots, names, self.alone)

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


def allocated_by(cand) -> tuple:
    """The providers one candidate allocates from."""
    rps = cand.providers
    positions = cand.layout.allocating
    return rps if len(positions) == len(rps) else tuple(rps[pos] for pos in positions)


def allocating(candidates) -> set:
    """The providers the candidates allocate from."""
    used = set()
    for cand in candidates:
        used.update(allocated_by(cand))
    return used


@dataclass
class Result:
    candidates: list  # of Candidate, provider ids
    uuids: dict  # provider id -> uuid for every provider in candidates
    roots: dict  # provider id -> root id
    class_names: dict = field(default_factory=dict)  # class id -> name
    alone: set = field(default_factory=set)  # providers alone in their tree
    # Over the process's copy of the facts: the copy, the `used` read for
    # it ((provider, class) -> used; absent: 0), and how to read more.
    snapshot: Optional[Snapshot] = None
    used: Optional[dict] = None
    _read_used: Optional[Callable] = field(default=None, repr=False)
    # Filled by answer() for the API to show: the providers summarised,
    # as Summary values read from SQL, or (over the copy) as ids whose
    # facts are the copy's and whose `used` is in `used`.
    summaries: Optional[list] = None
    shown: Optional[list] = None

    def allocating(self) -> set:
        """The providers the candidates allocate from."""
        return allocating(self.candidates)

    def summary_ids(self, whole_trees: bool) -> list:
        """Over the copy: the ids of the providers to summarise (those the
        candidates allocate from, or their whole trees), ascending, their
        `used` read."""
        ids = shown_ids(self.snapshot, self.allocating(), whole_trees)
        self._read_used(ids)
        return ids


def shown_ids(snap: Snapshot, used: set, whole_trees: bool) -> list:
    """The ids of the providers summarised for candidates allocating from
    `used`, over the copy `snap`: those, or their whole trees; ascending."""
    if whole_trees:
        members = snap.members
        return sorted(rp for root in {snap.root[p] for p in used} for rp in members[root])
    return sorted(used)


# Candidates times slots (each slot a provider in a candidate's text) up
# to which an answer is worked out whole before it is sent, and past which
# it is sent as it is found (candidates/flow.py): at most ~100 bytes of
# JSON a slot, a few MB of text held, whatever the answer's size.
WHOLE_CHOICES = 60_000


def whole_size(plan: Plan) -> int:
    """The most candidates of `plan`'s shape an answer holds whole."""
    return max(1, WHOLE_CHOICES // max(1, len(plan.slots)))


def sample(candidates: Iterable, k: int) -> list:
    """`k` of the candidates chosen uniformly at random, in random order
    (all of them, in their order, when there are no more than k), holding
    k at a time: random.sample's answer, without the whole list to draw
    from (a reservoir, Vitter's algorithm R, then shuffled)."""
    rest = iter(candidates)
    kept = list(islice(rest, k))
    more = False
    draw = random.randrange
    for seen, cand in enumerate(rest, k):
        more = True
        at = draw(seen + 1)
        if at < k:
            kept[at] = cand
    if more:
        random.shuffle(kept)
    return kept


def bound_of(req: CandidateRequest, max_candidates: int = 0,
             randomize: bool = False) -> Optional[int]:
    """How many candidates a search may stop at (None: all): `limit`,
    unless a random sample of all is to be taken, and max_candidates
    (<= 0: unbounded)."""
    bound = max_candidates if max_candidates and max_candidates > 0 else None
    if req.limit and not randomize:
        bound = min(bound, req.limit) if bound else req.limit
    return bound


def over_viable_trees(search: Search, kept: Optional[KeptCache]) -> None:
    """Over the copy of the facts, only the trees the filters let through
    (with the sharing providers reaching them) can give candidates
    (viable.py): the search walks those alone. An observer (explain)
    hears every tree."""
    reader = search.reader
    if (isinstance(reader, MemoryReader) and search.observer is QUIET
            and search.trees is None):
        search.trees = viable.Viable(reader, kept_for(
            kept, reader.snap, viable.shape_key(search.plan), by_tree=True)).first()


def find(conn: Connection, req: CandidateRequest, max_candidates: int = 0,
         randomize: bool = False, observer: Observer = QUIET,
         lookups: Optional[Lookups] = None,
         snapshot: Optional[Snapshot] = None,
         kept: Optional[KeptCache] = None,
         overlay: Optional[Overlay] = None) -> Result:
    """The candidates for a parsed request, bounded by `limit` and by
    max_candidates (<= 0: unbounded); a random sample when randomize.
    `snapshot`: the process's copy of the facts, read in `conn`'s
    transaction (candidates/snapshot.py); without it, all from SQL.
    `kept`: what the process keeps derived from its copies (kept.py).
    `overlay`: extra `used` for this request alone (overlay.py), as the
    routes pass answer.answer."""
    if lookups is None:
        lookups = resolve(conn, req, snapshot)
    if lookups is None:
        return Result([], {}, {})
    bound = bound_of(req, max_candidates, randomize)
    search = Search(conn, req, lookups, bound, observer, snapshot=snapshot, kept=kept,
                    overlay=overlay)
    over_viable_trees(search, kept)
    found = search.candidates()
    if bound:
        found = islice(found, bound)
    if randomize and req.limit:
        return search.result(sample(found, req.limit))
    return search.result(list(found))
