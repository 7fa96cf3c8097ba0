"""The trees a request can find candidates in, from the copy's facts alone.

Without sharing providers a candidate never leaves its tree, and a tree
gives one only if, before any usage is counted, every group has some
provider there whose facts pass the group's filters (for the unnumbered
group: every class it asks for), and its root passes the root filters.
Those verdicts are the reader's own (memory.MemoryReader.verdicts): the
very values the scan of a tree then checks against `used`. So an answer
made of the viable trees alone is the answer made of all trees, and a
request reads the usage of, and scans, only the trees its filters let
through: in a cloud where every provider carries usage, a query for one
aggregate costs what that aggregate holds, not what the cloud holds.

What is judged is kept with the copy of the facts, per request shape
(kept.py), as a list of the viable roots found so far and how far
through the trees the judging went: a bounded request judges only as far
as it scans (as before it read usage only as far), and a repeated one
judges nothing. Where the request names aggregates (member_of) or a tree
(in_tree), the snapshot's indexes give the only trees that can pass, and
only those are judged, at once. A tree's verdict is made of its
providers' verdicts, which the reader keeps (and carries over a refresh
for the trees it did not touch), so judging a tree is a few lookups.
"""
from __future__ import annotations

import bisect
from typing import Optional

from placement_lite.candidates import steps
from placement_lite.candidates.filters import known_ids
from placement_lite.candidates.kept import Kept
from placement_lite.db import tables as t

_UNSET = object()


def narrowed(snap, plan) -> Optional[set]:
    """The roots the snapshot's indexes allow (None: any root): a group
    whose filters apply per provider keeps its candidates within the
    trees holding a provider of each of its member_of sets (the provider
    itself or, for the unnumbered group, the tree's root), and within its
    in_tree's tree."""
    lk = plan.lookups
    out: Optional[set] = None
    for suffix, group in plan.req.groups.items():
        if not suffix and not plan.wanted:
            # An unnumbered group without resources filters no provider.
            continue
        if group.in_tree:
            out = {lk.tree_roots[suffix]} if out is None else out & {lk.tree_roots[suffix]}
        for any_of in group.member_of:
            root, members = snap.root, snap.in_aggregate
            roots = {root[rp] for agg in known_ids(any_of, lk.agg_ids)
                     for rp in members.get(agg, ())}
            out = roots if out is None else out & roots
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

    def first(self, count: Optional[int] = None) -> list:
        """The viable trees' roots, ascending: at least the first `count`
        of them where there are as many (None: all of them)."""
        # (the root the judging stopped before, None when all are judged;
        # the viable roots before it)
        state = self.kept.note
        if state is None:
            state = self.kept.note = self._start()
        upto, found = state
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
        self.kept.note = (upto, found)
        return found

    def _start(self) -> tuple:
        """What the copy before judged, where a refresh left most trees
        as they were: the trees it touched are judged again (those the
        judging had reached); else nothing judged yet, or, narrowed by
        the indexes, every tree that can pass, judged now."""
        allowed = narrowed(self.snap, self.plan)
        before, gone = self.kept.before, self.kept.gone
        old = before.note if before is not None else None
        if old is None or len(gone) > max(64, len(old[1]) // 4):
            return (None, self._judge(sorted(allowed))) if allowed is not None else (
                self.snap.roots[0] if self.snap.roots else None, [])
        upto, found = old
        root = self.snap.root
        touched = {root[rp] for rp in gone if rp in root}
        if allowed is not None:
            touched &= allowed
        if upto is not None:
            touched = {r for r in touched if r < upto}
        keep = [r for r in found if r not in gone]
        return upto, sorted(set(keep).union(self._judge(sorted(touched))))

    def _judge(self, roots) -> list:
        tree = self._tree
        return [root for root in roots if tree(root)]

    def _tree(self, root: int) -> bool:
        view = self.reader.view(root)
        if not all(test(view) for test in self._root_tests):
            return False
        members = self.snap.members[root]
        for verdicts, build in self._numbered:
            if not any(_verdict(verdicts, build, rp) is not None for rp in members):
                return False
        if self._unnumbered is None:
            return True
        verdicts, build = self._unnumbered
        entries = [e for e in (_verdict(verdicts, build, rp) for rp in members)
                   if e is not None and e.in_tree_ok]
        if len(members) == 1 and entries and not all(entries[0].trait_flags):
            return False  # alone in its tree: it must have every trait asked
        # Every class asked must have a provider whose unit limits and
        # capacity leave room for the amount with nothing used.
        return all(any(e.limits[j][1] >= 0 for e in entries)
                   for j in range(len(self.plan.wanted)))


def _verdict(verdicts, build, rp):
    found = verdicts.get(rp, _UNSET)
    return verdicts.settle(rp, build) if found is _UNSET else found
