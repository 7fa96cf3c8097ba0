"""The trees a request can find candidates in, from the copy's facts alone.

A tree gives a candidate only if, before any usage is counted, its root
passes the root filters and every slot of the request has a provider to
take it from: one of the tree's own whose facts pass the group's filters,
or a sharing provider (trait MISC_SHARES_VIA_AGGREGATE) that reaches the
tree and passes them as a sharing provider. Those verdicts are the
reader's own (memory.MemoryReader.verdicts): the very values the scan of
a tree then checks against `used`. So an answer made of the viable trees
alone is the answer made of all trees, and a request reads the usage of,
and scans, only the trees its filters let through: in a cloud where every
provider carries usage, a query for one aggregate costs what that
aggregate holds, not what the cloud holds.

A sharing provider reaches the trees the engine combines it into
(MemoryReader.sharing, the SQL reader's join alike): its own, and the
tree of every provider in one of its aggregates. As there, it serves a
numbered group when its own facts pass that group's filters, and a class
of the unnumbered group when they pass the filters that hold everywhere,
it is itself in the group's member_of aggregates and in no forbidden one,
and the tree's root is in no forbidden one either; never the unnumbered
group of a request naming in_tree for it. A candidate made of sharing
providers alone comes from the first tree (in root order) whose walk
gives it: a tree they all reach, and so viable here.

What is judged is kept with the copy of the facts, per request shape
(kept.py), as a list of the viable roots found so far and how far
through the trees the judging went: a bounded request judges only as far
as it scans (as before it read usage only as far), and a repeated one
judges nothing. Where the request names aggregates (member_of) or a tree
(in_tree), the snapshot's indexes give the only trees that can pass (the
trees sharing providers able to serve the group reach, added), and only
those are judged, at once. A tree's verdict is made of its providers'
verdicts and those of the sharing providers reaching it, which the reader
keeps (and carries over a refresh for the providers it did not touch), so
judging a tree is a few lookups. A refresh carries the judged trees over,
but for those it touched, unless it touched a sharing provider able to
serve the shape, or changed which ones are: those reach trees the refresh
did not touch.
"""
from __future__ import annotations

import bisect
from typing import Callable, Optional

from placement_lite.candidates import steps
from placement_lite.candidates.filters import known_ids
from placement_lite.candidates.kept import Kept
from placement_lite.db import tables as t

_UNSET = object()


def narrowed(snap, plan, widen: Optional[Callable[[str], set]] = None) -> Optional[set]:
    """The roots the snapshot's indexes allow (None: any root): a group
    whose filters apply per provider keeps its candidates within the
    trees holding a provider of each of its member_of sets (the provider
    itself or, for the unnumbered group, the tree's root), and within its
    in_tree's tree; or, `widen(suffix)`, within the trees where sharing
    providers can serve the whole group."""
    lk = plan.lookups
    out: Optional[set] = None
    for suffix, group in plan.req.groups.items():
        if not suffix and not plan.wanted:
            # An unnumbered group without resources filters no provider.
            continue
        mine: Optional[set] = None
        if group.in_tree:
            mine = {lk.tree_roots[suffix]}
        for any_of in group.member_of:
            root, members = snap.root, snap.in_aggregate
            roots = {root[rp] for agg in known_ids(any_of, lk.agg_ids)
                     for rp in members.get(agg, ())}
            mine = roots if mine is None else mine & roots
        if mine is None:
            continue
        if widen is not None:
            mine |= widen(suffix)
        out = mine if out is None else out & mine
    return out


def shape_key(plan) -> tuple:
    """What the trees' verdicts depend on besides their facts."""
    req = plan.req
    return ("viable", plan.slot_shape, frozenset(req.root_required),
            frozenset(req.root_forbidden))


class Viable:
    """Which trees can give a request candidates; see the module."""

    def __init__(self, reader, kept: Kept):
        self.reader, self.snap, self.plan = reader, reader.snap, reader.plan
        self.kept = kept
        plan = self.plan
        self._unnumbered = (reader.verdicts("unnumbered")
                            if plan.unnumbered is not None and plan.wanted else None)
        rc_ids = plan.lookups.rc_ids
        self._numbered = [reader.verdicts(
            "numbered", suffixes[0], [(rc_ids[name], amount) for name, amount in
                                      sorted(plan.req.groups[suffixes[0]].resources.items())])
            for suffixes in plan.alike_numbered]
        self._root_tests = [s.test for s in steps.root_steps(
            plan.req, plan.lookups, t.resource_providers)]
        self._shared: Optional[_Sharers] = None  # on a first judging

    def first(self, count: Optional[int] = None) -> list:
        """The viable trees' roots, ascending: at least the first `count`
        of them where there are as many (None: all of them)."""
        # (the root the judging stopped before, None when all are judged;
        # the viable roots before it; the sharing providers able to serve
        # the shape, which it was judged with)
        state = self.kept.note
        if state is None:
            state = self.kept.note = self._start()
        upto, found, useful = state
        if upto is None or (count is not None and len(found) >= count):
            return found
        roots = self.snap.roots
        done = bisect.bisect_left(roots, upto)
        while done < len(roots) and (count is None or len(found) < count):
            # As many trees as viable ones are still wanted (each may be),
            # twice over, so a sparse request doubles its reach each time.
            step = len(roots) if count is None else max(64, 2 * (count - len(found)))
            chunk = roots[done:done + step]
            # A new list, never one a request on another thread reads.
            found = found + self._judge(chunk)
            done += len(chunk)
        upto = roots[done] if done < len(roots) else None
        if upto is None and len(found) == len(roots):
            found = roots  # every tree: the copy's own list, not another
        self.kept.note = (upto, found, useful)
        return found

    def _start(self) -> tuple:
        """What the copy before judged, where a refresh left most trees
        and every sharing provider able to serve the shape as they were:
        the trees it touched are judged again (those the judging had
        reached); else nothing judged yet, or, narrowed by the indexes,
        every tree that can pass, judged now."""
        shared = self._sharers()
        useful = shared.useful
        allowed = narrowed(self.snap, self.plan, shared.widen if useful else None)
        before, gone = self.kept.before, self.kept.gone
        old = before.note if before is not None else None
        if (old is None or len(gone) > max(64, len(old[1]) // 4)
                or old[2] != useful or not gone.isdisjoint(useful)):
            return (None, self._judge(sorted(allowed)), useful) if allowed is not None else (
                self.snap.roots[0] if self.snap.roots else None, [], useful)
        upto, found, _useful = old
        root = self.snap.root
        touched = {root[rp] for rp in gone if rp in root}
        if allowed is not None:
            touched &= allowed
        if upto is not None:
            touched = {r for r in touched if r < upto}
        keep = [r for r in found if r not in gone]
        return upto, sorted(set(keep).union(self._judge(sorted(touched)))), useful

    def _sharers(self) -> "_Sharers":
        if self._shared is None:
            self._shared = _Sharers(self)
        return self._shared

    def _judge(self, roots) -> list:
        tree = self._tree
        return [root for root in roots if tree(root)]

    def _tree(self, root: int) -> bool:
        view = self.reader.view(root)
        if not all(test(view) for test in self._root_tests):
            return False
        members = self.snap.members[root]
        shared = self._sharers()
        helping = shared.reaching(root, members) if shared.useful else ()
        for i, (verdicts, build) in enumerate(self._numbered):
            if any(i in shared.numbered.get(ss, ()) for ss in helping):
                continue
            if not any(_verdict(verdicts, build, rp) is not None for rp in members):
                return False
        if self._unnumbered is None:
            return True
        verdicts, build = self._unnumbered
        entries = [e for e in (_verdict(verdicts, build, rp) for rp in members)
                   if e is not None and e.in_tree_ok]
        extra = shared.unnumbered_in(root, helping) if helping else []
        if (not extra and len(members) == 1 and entries
                and not all(entries[0].trait_flags)):
            # Alone in its tree, with no sharing provider to take a class
            # (and bring its traits): it must have every trait asked.
            return False
        entries += extra
        # Every class asked must have a provider whose unit limits and
        # capacity leave room for the amount with nothing used.
        return all(any(e.limits[j][1] >= 0 for e in entries)
                   for j in range(len(self.plan.wanted)))


class _Sharers:
    """The sharing providers of the copy that could serve some slot of
    the request with nothing used (see the module), and the trees each
    reaches."""

    def __init__(self, viable: Viable):
        snap, plan = viable.snap, viable.plan
        self.snap = snap
        # provider -> the positions (in plan.alike_numbered) of the
        # numbered groups it can serve
        self.numbered: dict = {}
        # provider -> its verdict for the unnumbered group, where it can
        # serve one of the group's classes
        self.unnumbered: dict = {}
        g = plan.unnumbered
        lk = plan.lookups
        self._bad = frozenset(known_ids(g.forbidden_aggs, lk.agg_ids)) if (
            g is not None and g.forbidden_aggs) else frozenset()
        self._positions = {suffix: i for i, suffixes in enumerate(plan.alike_numbered)
                           for suffix in suffixes}
        for ss in snap.sharing:
            serves = frozenset(
                i for i, (verdicts, build) in enumerate(viable._numbered)
                if _fits(_verdict(verdicts, build, ss)))
            if serves:
                self.numbered[ss] = serves
            if viable._unnumbered is not None and not g.in_tree:
                entry = _verdict(*viable._unnumbered, ss)
                if (entry is not None and (not g.member_of or entry.agg_ok)
                        and not (self._bad and entry.agg_bad)
                        and any(most >= 0 for _key, most in entry.limits)):
                    self.unnumbered[ss] = entry
        self.useful = frozenset(self.numbered).union(self.unnumbered)
        self._by_agg: dict = {}
        self._by_root: dict = {}
        for ss in sorted(self.useful):
            self._by_root.setdefault(snap.root[ss], []).append(ss)
            for agg in snap.aggregates[ss]:
                self._by_agg.setdefault(agg, []).append(ss)

    def reaching(self, root: int, members) -> set:
        """The useful sharing providers reaching the tree of `root`."""
        out = set(self._by_root.get(root, ()))
        by_agg, aggregates = self._by_agg, self.snap.aggregates
        for rp in members:
            for agg in aggregates[rp]:
                out.update(by_agg.get(agg, ()))
        return out

    def unnumbered_in(self, root: int, helping) -> list:
        """The verdicts of those of `helping` serving the unnumbered
        group in the tree of `root` (none where the root is in a
        forbidden aggregate)."""
        if self._bad and not self.snap.aggregates[root].isdisjoint(self._bad):
            return []
        found = self.unnumbered.get
        return [e for e in map(found, helping) if e is not None]

    def anchors(self, ss: int) -> set:
        """The roots of the trees `ss` reaches."""
        root, members = self.snap.root, self.snap.in_aggregate
        out = {root[ss]}
        for agg in self.snap.aggregates[ss]:
            out.update(root[rp] for rp in members.get(agg, ()))
        return out

    def widen(self, suffix: str) -> set:
        """The trees where sharing providers can serve group `suffix`
        whole: for the unnumbered group, every class of it."""
        if suffix:
            at = self._positions[suffix]
            return set().union(*(self.anchors(ss) for ss, serves in self.numbered.items()
                                 if at in serves))
        entries = self.unnumbered
        if not entries:
            return set()
        width = len(next(iter(entries.values())).limits)
        out: Optional[set] = None
        for j in range(width):
            reach = set().union(*(self.anchors(ss) for ss, e in entries.items()
                                  if e.limits[j][1] >= 0))
            out = reach if out is None else out & reach
            if not out:
                break
        return out or set()


def _fits(limits) -> bool:
    """A numbered verdict leaving room with nothing used."""
    return limits is not None and all(most >= 0 for _key, most in limits)


def _verdict(verdicts, build, rp):
    found = verdicts.get(rp, _UNSET)
    return verdicts.settle(rp, build) if found is _UNSET else found
