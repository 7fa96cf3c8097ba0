"""A full answer over the process's copy of the facts, kept tree by tree.

Without sharing providers a candidate never leaves its tree, so a tree's
candidates depend on its facts and on the `used` of its inventory alone.
Each tree's part of an answer (its candidates and the providers its
summaries show, as plain values: a TreePart) is kept with the copy, per
request shape (kept.Kept, by tree, as the trees' walks are), beside the
usage it was made from, and given again while the usage read now is the
same. Only the trees whose usage changed since are walked again: after a
claim, one. The API renders parts, and may keep each part's text for as
long as the part lives (api/render/candidates.py).
"""
from __future__ import annotations

import itertools
from itertools import islice
from typing import Optional

from sqlalchemy.engine import Connection

from placement_lite.candidates import combiner
from placement_lite.candidates.engine import (
    MAX_RUN, MIN_SPAN, Observer, Search, resolve, whole_size)
from placement_lite.candidates.kept import KeptCache, kept_for
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.plan import Lookups
from placement_lite.candidates.query import CandidateRequest
from placement_lite.candidates.snapshot import Snapshot
from placement_lite.candidates import viable

# A full answer kept tree by tree for at most this many trees (beyond,
# each request works the answer out whole, as a bounded one does).
TREES_KEPT = combiner.REMEMBERED_TREES
_TOKENS = itertools.count()


class TreePart:
    """One tree's part of an answer: what it gives and what it was made
    from. Never changed once made; kept while the tree's usage holds."""

    __slots__ = ("usage", "keys", "candidates", "summary_ids", "steps", "token",
                 "__weakref__")

    def __init__(self, usage: tuple, keys: tuple, candidates: tuple,
                 summary_ids: tuple, steps: int):
        # Names this part and no other, ever, in this process: what is
        # derived from it elsewhere (its text) may be kept by it.
        self.token = next(_TOKENS)
        self.usage = usage  # `used` of each of `keys`, as read (None: 0)
        self.keys = keys  # (provider, class) of every inventory row of the tree
        self.candidates = candidates  # engine Candidates, in order
        self.summary_ids = summary_ids  # providers to summarise, ascending
        self.steps = steps  # combination work its walk took

    def used(self) -> dict:
        """(provider, class) -> `used` for the tree's inventory rows."""
        return dict(zip(self.keys, self.usage))


class Parts:
    """An answer as trees' parts, in tree order, up to a bound: `last`
    is how many of the last part's candidates are given (None: all)."""

    __slots__ = ("parts", "last", "class_names", "snapshot")

    def __init__(self, parts: list, last: Optional[int], class_names: dict,
                 snapshot: Snapshot):
        self.parts = parts
        self.last = last
        self.class_names = class_names
        self.snapshot = snapshot


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
               bound: Optional[int] = None,
               kept: Optional[KeptCache] = None,
               overlay: Optional[Overlay] = None) -> Optional[Parts]:
    """The answer over the copy as each tree's part of it (trees without
    candidates left out), up to `bound` candidates (None: all).

    None where this does not apply, for the caller to search as usual:
    with sharing providers, with more than TREES_KEPT trees, when the
    budget of combination work would stop the answer short (a search
    stops it alike), when `bound` falls within a tree's candidates
    before microversion 1.29 (the summaries would be of the candidates
    given, not of the tree), or when the answer has more candidates than
    engine.whole_size (it is not held, nor kept: the caller's search
    gives it as it is found).

    `overlay`: extra `used` for this request (overlay.py). A part is
    given again only for the same usage, extra included, so parts made
    with one are right for any request; they are kept apart from plain
    requests' all the same, so that asking for windows does not push out
    the parts plain requests reuse.
    """
    if snapshot.sharing or len(snapshot.roots) > TREES_KEPT:
        return None
    lookups = resolve(conn, req, snapshot)
    if lookups is None:
        return Parts([], None, {}, snapshot)
    try:
        return _TreeAnswer(conn, req, lookups, snapshot, bound, kept, overlay).parts()
    except _NoParts:
        return None


class _NoParts(Exception):
    """This answer cannot be made of kept parts (tree_parts returns None)."""


def _answer_shape(req: CandidateRequest, plan, overlaid: bool) -> tuple:
    """Everything a tree's part depends on besides its facts and usage,
    and whether its requests have an overlay."""
    return ("answer by tree", plan.walk_shape, frozenset(req.root_required),
            frozenset(req.root_forbidden), req.nested_aware, overlaid)


class _TreeAnswer:
    """One request's answer made of the parts kept by tree (tree_parts)."""

    def __init__(self, conn: Connection, req: CandidateRequest, lookups: Lookups,
                 snapshot: Snapshot, bound: Optional[int], kept: Optional[KeptCache],
                 overlay: Optional[Overlay] = None):
        self.req, self.snap, self.bound = req, snapshot, bound
        self.budget = combiner.Budget()
        self.steps = _Steps(self.budget)
        self.search = Search(conn, req, lookups, None, self.steps, self.budget, snapshot,
                             kept=kept, overlay=overlay)
        self.reader = self.search.reader
        self.kept = kept_for(kept, snapshot, _answer_shape(
            req, self.search.plan, overlay is not None), by_tree=True)
        self.usage_keys = kept_for(kept, snapshot, ("usage keys",), by_tree=True)
        self.viable = viable.Viable(self.reader, kept_for(
            kept, snapshot, viable.shape_key(self.search.plan), by_tree=True))
        self.given = 0  # candidates in the answer so far
        self.work = 0  # combination steps the answer's trees took
        self.parts_used = 0  # of the last scan's, when the bound was met
        self.last: Optional[int] = None
        # Past this many candidates the answer is not made of parts.
        self.whole = whole_size(self.search.plan)

    def parts(self) -> Parts:
        # Only the trees the request's filters let through, before usage
        # (viable.py): the others give nothing, whatever they use.
        judged, members = self.viable, self.snap.members
        # Trees per `used` read: all; or as many as the last answer of this
        # shape went through, and an eighth more (or, first, a quarter more
        # than the bound: each tree gives one candidate or more, or none),
        # then doubling: a repeated request reads its usage in one statement.
        scanned = self.kept.note
        if self.bound is None:
            roots = judged.first()
            size = len(roots)
        else:
            want = max(1, (self.bound + self.bound // 4 if scanned is None
                           else scanned + scanned // 8))
            roots = judged.first(max(MIN_SPAN, want))
            size = _span(roots, members, want)
        if size >= len(roots):
            if roots is self.snap.roots:
                # Every tree's usage is read: in one statement, by range.
                self.reader.read_all_used()
            else:
                self.reader.read_used([rp for tree in roots for rp in members[tree]])
        out: list = []
        at = 0
        while True:
            if at + size > len(roots):
                roots = judged.first(at + size)
            trees = roots[at:at + size]
            if not trees:
                break
            size = min(2 * size, MAX_RUN)
            if not self.reader.all_read:
                self.reader.read_used([rp for tree in trees for rp in members[tree]])
            i = 0
            while i < len(trees):
                found, i = self._scan(trees, i)
                if self._give(found, out):
                    # The trees the answer needed, not those scanned: the
                    # scan may pass trees a walk then found it need not
                    # enter, and the next answer's first read is sized by
                    # this.
                    self.kept.note = at + i - len(found) + self.parts_used
                    return self._within_budget(out)
            at += len(trees)
        self.kept.note = at
        return self._within_budget(out)

    def _within_budget(self, out: list) -> Parts:
        """`out`, unless its trees' walks took more than a request's
        budget: a search would have stopped short, and does so again."""
        if self.work > self.budget.request_steps:
            raise _NoParts
        names = {rc: name for name, rc in self.search.plan.lookups.rc_ids.items()}
        return Parts(out, self.last, names, self.snap)

    def _scan(self, trees: list, i: int) -> tuple:
        """From trees[i] on, in order, until the parts kept (or, stale,
        what they gave last) give what the bound asks: each tree's part,
        the stale ones walked again; and where the scan stopped. A part
        is None for a tree past a bound met within the walk, which was
        not walked."""
        used, bound = self.reader.used.get, self.bound
        keys_of, known, kept = self.usage_keys.get, self.kept.get, self.kept
        found = []  # (root, its kept part, or None if stale)
        stale = []  # (root, its usage keys, its usage now)
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
            part = known(key)
            if part is None:
                part = kept.carried(key, None)
                if part is not None:
                    kept[key] = part
            if part is not None:
                if part.candidates:
                    # Stale, its last count is the best guess: a claim
                    # seldom changes it (if it did, the scan goes on).
                    guess += len(part.candidates)
                if part.usage != usage:
                    part = None
            if part is None:
                stale.append((root, keys, usage))
            found.append((root, part))
        if not stale:
            return [part for _root, part in found], i
        fresh = self._walk(stale)
        return [part or fresh.get(root) for root, part in found], i

    def _usage_keys(self, key: tuple) -> tuple:
        """The (provider, class) of every inventory row of the tree
        rooted at key[0], in a fixed order."""
        inventory = self.snap.inventory
        return tuple((rp, rc) for rp in self.snap.members[key[0]]
                     for rc in sorted(inventory[rp]))

    def _walk(self, stale: list) -> dict:
        """Walk the stale trees again, lazily, as a search does (a tree
        may hold more candidates than any answer gives): root -> part,
        kept but for a tree the bound cut short."""
        search = self.search
        search.trees = [root for root, _keys, _usage in stale]
        needed = None if self.bound is None else self.bound - self.given
        # One more than the answer may hold whole is enough to know it is
        # too big; a tree may hold millions.
        room = self.whole - self.given + 1
        if needed is None or needed + 1 > room:
            found = list(islice(search.candidates(), room))
            if len(found) == room:
                raise _NoParts
        else:
            found = list(islice(search.candidates(), needed + 1))
        if self.budget.cut_short:  # a search stops alike
            raise _NoParts
        # One more than needed, to know where the walk stopped: in the
        # tree of that one, which may have more (its part is given, not
        # kept); those after it were not walked (the bound is met before
        # them).
        stop = None
        if needed is not None and len(found) > needed:
            stop = search.roots[found.pop().providers[0]]
        result = search.result(found)
        by_root: dict = {}
        for cand in found:
            by_root.setdefault(search.roots[cand.providers[0]], []).append(cand)
        shown: dict = {}
        root_of = self.snap.root
        for rp in result.summary_ids(self.req.nested_aware):
            shown.setdefault(root_of[rp], []).append(rp)
        walked = self.steps.per_tree
        fresh = {}
        for root, keys, usage in stale:
            if stop is not None and root > stop:
                break
            fresh[root] = part = TreePart(usage, keys, tuple(by_root.get(root, ())),
                                          tuple(shown.get(root, ())), walked.get(root, 0))
            if root != stop:
                self.kept[(root,)] = part
        return fresh

    def _give(self, found: list, out: list) -> bool:
        """Add the parts to `out` until the bound is met (True). Before
        microversion 1.29 a bound within a tree's candidates cannot be
        met with parts: the summaries would be of the candidates given,
        not of the tree. Past `whole` candidates in all (the parts of one
        scan are kept already, and only counted here) the answer is not
        made of parts."""
        met = self._add(found, out)
        if self.given > self.whole and (self.bound is None or self.bound > self.whole):
            raise _NoParts
        return met

    def _add(self, found: list, out: list) -> bool:
        for k, part in enumerate(found, 1):
            self.parts_used = k
            if part is None:  # not walked: past a bound met
                raise _NoParts
            self.work += part.steps
            if not part.candidates:
                continue
            self.given += len(part.candidates)
            out.append(part)
            if self.bound is not None and self.given >= self.bound:
                over = self.given - self.bound
                if over:
                    if not self.req.nested_aware:
                        raise _NoParts
                    self.last = len(part.candidates) - over
                return True
        return False


def _span(roots: list, members, want: int) -> int:
    """How many of `roots` the first `used` read covers: the `want` trees
    the answer is expected to need, and more while the providers read stay
    within MIN_SPAN. The floor is one of providers, not trees: a tree of a
    hundred devices read 32 at a time made a `limit=10` answer read the
    usage of thousands of providers, which in a cloud where each carries
    usage is what the answer cost."""
    size = min(want, len(roots))
    read = sum(len(members[root]) for root in roots[:size])
    while size < len(roots) and read + len(members[roots[size]]) <= MIN_SPAN:
        read += len(members[roots[size]])
        size += 1
    return size
