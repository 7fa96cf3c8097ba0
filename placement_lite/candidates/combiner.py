"""The candidate engine's combining side: pure functions over Facts.

Per tree (the "anchor"), a depth-first search picks one provider per slot
(each numbered group is a slot, each class of the unnumbered group is a
slot) and yields every combination passing group_policy, merged
capacity, the unnumbered group's traits, same_subtree and the pre-1.29
one-provider-per-tree rule, without ever building the product. Nothing
here reads the database.

The rules are Placement's: the unnumbered group may take each class from
any provider of the tree or from a sharing provider associated with it by
aggregate; an aggregate on the root spans the tree for that group only;
numbered groups are served by one provider each, whose own traits and
aggregates count.
"""
from __future__ import annotations

import logging
import math
from typing import Iterator, Optional

from placement_lite.candidates.checks import (  # noqa: F401 (View: the combiner's too)
    View, one_per_tree_ok, room_for_all, subtree_ok, traits_ok)
from placement_lite.candidates.facts import Facts, Sharing, Slice
from placement_lite.candidates.plan import Plan

LOG = logging.getLogger(__name__)
# Dead ends remembered per tree by the combination step (see combine);
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
# Trees of at most this many combinations have their walk remembered by
# slice_choices when given somewhere to keep it; at most
# REMEMBERED_CHOICES choices (and entries) kept per request shape, so
# one full answer over many small trees does not stay in memory whole.
REMEMBERED_COMBINATIONS = 64
REMEMBERED_CHOICES = 200_000
# Trees a full answer may be kept for, tree by tree (by_tree.py).
REMEMBERED_TREES = 200_000


class Budget:
    """The combination work of one request: tries spent, whether it was
    cut short at its bound, and how many candidates it produced."""

    def __init__(self, tree_steps: Optional[int] = None,
                 request_steps: Optional[int] = None):
        self.tree_steps = TREE_STEPS if tree_steps is None else tree_steps
        self.request_steps = REQUEST_STEPS if request_steps is None else request_steps
        self.work = 0
        self.cut_short = False
        self.found = 0


# -- per tree: which providers may serve each slot ---------------------------

def options(plan: Plan, sharing: Sharing, facts: Facts, anchor: int) -> list:
    """Per slot, the providers that may serve it in anchor's tree (a slot
    nobody serves has an empty list)."""
    sharers = sharing.anchors.get(anchor, ())
    g = plan.unnumbered
    out = []
    rows = facts.rows
    for slot, key in zip(plan.slots, plan.slot_keys):
        opts = list(rows.get(key, {}).get(anchor, ()))
        if sharers and not (not slot.numbered and g.in_tree):
            eligible = sharing.by_key.get(key, ())
            extra = [ss for ss in sorted(sharers) if ss in eligible and ss not in opts]
            if not slot.numbered and (g.member_of or g.forbidden_aggs):
                extra = sharing_aggregates_ok(plan, sharing, facts, extra, anchor)
            opts += extra
        out.append(opts)
    return out


def sharing_aggregates_ok(plan: Plan, sharing: Sharing, facts: Facts,
                          sharers, anchor) -> list:
    """The unnumbered group's aggregate rule for a sharing provider
    serving anchor's tree: it is itself in the aggregates (as in
    Placement since bug 1792503: the anchor root's membership, which
    spans its own tree, does not reach a provider outside it), and
    neither it nor the anchor root is in a forbidden one. (For
    providers of the tree itself the SQL has applied the rule.)"""
    g = plan.unnumbered
    agg_ok = sharing.facts.agg_ok
    agg_bad = sharing.facts.agg_bad
    kept = []
    for rp in sharers:
        if g.member_of and not agg_ok.get(rp):
            continue
        if g.forbidden_aggs and (
                agg_bad.get(rp) or facts.root_agg_bad.get(anchor, False)):
            continue
        kept.append(rp)
    return kept


# -- the walk ----------------------------------------------------------------

def combine(plan: Plan, view: View, opts: list, budget: Budget) -> Iterator[tuple]:
    """Every choice of one provider per slot (from `opts`, per slot)
    passing merged capacity, isolation, the unnumbered group's traits and
    same_subtree, in the order of the product, lazily."""
    if not plan.slots or (plan.multi_rcs and not room_for_all(plan, view, opts)):
        return iter(())
    return _Combination(plan, view, opts, budget).walk()


class _Combination:
    """One tree's depth-first walk over its slots' options (combine).

    Dead ends: capacity merging and isolation make a level fail for what
    has been placed, not for the order it was placed in. A level that
    yielded nothing is remembered by that state and not searched again,
    so many alike groups that cannot all fit are refused in polynomial,
    not exponential, steps.
    """

    def __init__(self, plan: Plan, view: View, opts: list, budget: Budget):
        self.plan, self.view, self.opts, self.budget = plan, view, opts, budget
        n = len(plan.slots)
        self.chosen = [0] * n
        self.amounts: dict = {}  # (rp, class) -> amount chosen so far
        self.in_use: dict = {}  # rp -> numbered slots it serves
        self.memo = bool(plan.multi_rcs) or plan.isolate
        self.needed = plan.needed_choices if self.memo else ()
        self.dead: set = set()
        self.entered = [0] * n  # per level: yields before it was entered
        self.yields = 0
        self.pending: list = [None] * n  # per level: what its choice added

    def fits(self, rp, slot):
        """The amounts `slot` adds on `rp`, added (None: they do not fit
        beside what other slots put there)."""
        multi_rcs = self.plan.multi_rcs
        if not multi_rcs:
            return ()
        amounts = self.amounts
        added = []
        for rc, amount in slot.resources.items():
            if rc not in multi_rcs:
                continue
            key = (rp, rc)
            before = amounts.get(key, 0)
            total = before + amount
            if before:
                inv = self.view.inventory(key)
                if inv is None or inv.used + total > inv.capacity or total > inv.max_unit:
                    for k, a in added:
                        amounts[k] -= a
                    return None
            amounts[key] = total
            added.append((key, amount))
        return added

    def state(self, j) -> tuple:
        placed = frozenset(kv for kv in self.amounts.items() if kv[1])
        taken = (frozenset(rp for rp, k in self.in_use.items() if k)
                 if self.plan.isolate else None)
        return (j, placed, taken, tuple(self.chosen[m] for m in self.needed[j]))

    def take_back(self, i: int, slot) -> None:
        """Back at level i: its previous choice is undone."""
        undo = self.pending[i]
        if undo is None:
            return
        self.pending[i] = None
        if slot.numbered:
            self.in_use[self.chosen[i]] -= 1
        for k, a in undo:
            self.amounts[k] -= a

    def stop(self, steps: int) -> None:
        """`steps` more tries went past the tree's or the request's
        budget: counted, and the walk ends."""
        budget = self.budget
        budget.work += steps
        budget.cut_short = budget.work > budget.request_steps
        n = len(self.plan.slots)
        if budget.cut_short:
            LOG.warning("candidate search stopped after %d tries in all "
                        "(%d slots); answering with the %d found",
                        budget.work, n, budget.found)
        else:
            LOG.warning("candidate search left a tree after %d tries "
                        "without a candidate (%d slots)", steps, n)

    def unfit(self, i: int, checks) -> bool:
        """The choices up to level i break the unnumbered group's traits
        or a same_subtree rule checked at this level."""
        plan, chosen = self.plan, self.chosen
        return (i == plan.last_unnumbered and not traits_ok(
            plan, self.view, [chosen[j] for j in plan.unnumbered_slots])) or (
            bool(checks) and not all(subtree_ok(self.view, chosen, members)
                                     for members in checks))

    def walk(self) -> Iterator[tuple]:
        # Depth-first with an explicit stack of option iterators: a
        # request may have as many slots as groups and classes, more
        # than Python's recursion allows.
        plan, opts, budget = self.plan, self.opts, self.budget
        slots, chosen, amounts, in_use = plan.slots, self.chosen, self.amounts, self.in_use
        n, isolate, memo, dead = len(slots), plan.isolate, self.memo, self.dead
        subtree_checks, fits = plan.subtree_checks, self.fits
        last_unnumbered, tree_steps = plan.last_unnumbered, budget.tree_steps
        steps = 0  # tries since this tree's last candidate
        levels = [iter(opts[0])]
        while levels:
            i = len(levels) - 1
            slot = slots[i]
            self.take_back(i, slot)
            checks = subtree_checks.get(i, ())
            # Whether a choice at this level completes a rule to check.
            ruled = i == last_unnumbered or bool(checks)
            for rp in levels[i]:
                steps += 1
                if steps > tree_steps or budget.work + steps > budget.request_steps:
                    self.stop(steps)
                    return
                if isolate and slot.numbered and in_use.get(rp):
                    continue
                added = fits(rp, slot)
                if added is None:
                    continue
                chosen[i] = rp
                if ruled and self.unfit(i, checks):
                    for k, a in added:
                        amounts[k] -= a
                    continue
                if slot.numbered:
                    in_use[rp] = in_use.get(rp, 0) + 1
                self.pending[i] = added
                break
            else:
                levels.pop()
                if memo and i and self.yields == self.entered[i] and len(dead) < MAX_DEAD_ENDS:
                    # Every choice of this level is taken back: the state
                    # is the one it was entered with.
                    dead.add(self.state(i))
                continue
            if i + 1 == n:
                self.yields += 1
                budget.work += steps
                steps = 0
                yield tuple(chosen)
            elif memo:
                # Until a dead end is found, a search costs no state keys.
                if not dead or self.state(i + 1) not in dead:
                    self.entered[i + 1] = self.yields
                    levels.append(iter(opts[i + 1]))
            else:
                levels.append(iter(opts[i + 1]))
        budget.work += steps


class Watcher:
    """What the combiner tells an observer about each tree it tries (see
    candidates/explain.py); the default hears nothing."""

    def tree_unserved(self, anchor: int, slot: int) -> None:
        """No provider of anchor's tree (nor sharing one) serves `slot`."""

    def tree_combined(self, anchor: int, found: int, older_rule: int) -> None:
        """The walk over anchor's tree gave `found` candidates; `older_rule`
        more were refused by the pre-1.29 one-provider-per-tree rule."""


QUIET = Watcher()


def _walk(plan: Plan, view: View, opts: list, budget: Budget,
          walks, anchor: int) -> Iterator[tuple]:
    """combine(), or what it gave the last time for the same options of
    the same tree (`walks`: a kept.Kept by tree, kept by the caller
    for as long as the facts behind `plan` and the trees do not change).
    A tree's options are its providers that passed every check against
    `used` (with the merged classes' rooms, when any): the same options,
    the same walk. The work the walk took is counted again, so budgets
    stop a request alike."""
    if walks is None or math.prod(map(len, opts)) > min(REMEMBERED_COMBINATIONS,
                                                        budget.tree_steps):
        return combine(plan, view, opts, budget)
    key = (anchor, tuple(map(tuple, opts)))
    if plan.multi_rcs:
        key += tuple(view.inventory((rp, rc)) for rp in sorted(set().union(*opts))
                     for rc in sorted(plan.multi_rcs))
    known = walks.get(key)
    if known is None:
        known = walks.carried(key, None)
        if known is not None:
            _remember(walks, key, known)
    if known is not None:
        choices, steps = known
        if budget.work + steps <= budget.request_steps:
            budget.work += steps
            return iter(choices)
        return combine(plan, view, opts, budget)
    before = budget.work
    choices = list(combine(plan, view, opts, budget))
    if not budget.cut_short:
        _remember(walks, key, (choices, budget.work - before))
    return iter(choices)


def _remember(walks, key, walk: tuple) -> None:
    """walks[key] = walk, within REMEMBERED_CHOICES: past it, what was
    kept goes (a tree's options change with its usage, so old keys are
    mostly dead). The count lives in the Kept's note; requests on other
    threads may add to it at once, so it is approximate, as a bound may
    be."""
    size = (walks.note or 0) + len(walk[0]) + 1
    if size > REMEMBERED_CHOICES:
        walks.clear()
        size = len(walk[0]) + 1
    walks.note = size
    walks[key] = walk


def slice_choices(plan: Plan, sharing: Sharing, part: Slice, budget: Budget,
                  seen: set, watcher: Watcher = QUIET,
                  walks=None) -> Iterator[tuple]:
    """Every candidate of a slice's trees, as the provider chosen per slot
    (a candidate reached from two trees through sharing providers comes
    once: `seen` holds those of them given so far). `walks`: where each tree's
    walk may be remembered (see _walk); not with sharing providers, whose
    options span trees."""
    facts = part.facts
    view = View(facts, sharing.facts)
    if sharing.anchors:
        walks = None
    # A candidate comes from one tree's walk, but one made only of sharing
    # providers may come from the walk of every tree they serve: those
    # alone are held in `seen` (not every candidate, which would be the
    # whole answer).
    sharers = set().union(*sharing.anchors.values()) if sharing.anchors else None
    g = plan.unnumbered
    # A tree of one provider, with no sharing provider to help and no
    # numbered group, is a candidate exactly when the SQL returned it.
    single = g is not None and not sharing.anchors and all(
        not s.numbered for s in plan.slots)
    n = len(plan.slots)
    nested_aware = plan.req.nested_aware
    for anchor in part.anchors:
        if single and anchor in facts.alone:
            budget.found += 1
            watcher.tree_combined(anchor, 1, 0)
            yield (anchor,) * n
            continue
        opts = options(plan, sharing, facts, anchor)
        if not all(opts):
            watcher.tree_unserved(anchor, [bool(o) for o in opts].index(False))
            continue
        found = refused = 0
        for chosen in _walk(plan, view, opts, budget, walks, anchor):
            shared = sharers is not None and sharers.issuperset(chosen)
            if shared and chosen in seen:
                continue
            if not nested_aware and not one_per_tree_ok(plan, view, chosen):
                refused += 1
                continue
            if shared:
                seen.add(chosen)
            budget.found += 1
            found += 1
            yield chosen
        watcher.tree_combined(anchor, found, refused)
        if budget.cut_short:
            return
