"""What a choice of providers must pass, checked as the combiner walks
(candidates/combiner.py): the unnumbered group's traits taken together,
same_subtree, the pre-1.29 one-provider-per-tree rule, and a cheap test
that a tree has room for every slot asking for one class. Pure functions
over a View of Facts; nothing here reads the database.
"""
from __future__ import annotations

import math

from placement_lite.candidates.facts import EMPTY, Facts
from placement_lite.candidates.plan import Plan


class View:
    """A slice's facts with the sharing providers' behind them."""
    __slots__ = ("facts", "shared")

    def __init__(self, facts: Facts, shared: Facts = EMPTY):
        self.facts = facts
        self.shared = shared

    def inventory(self, key):
        return self.facts.inventory.get(key) or self.shared.inventory.get(key)

    def root_of(self, rp):
        return self.facts.root.get(rp) or self.shared.root.get(rp)

    def trait_flags(self, rp):
        return self.facts.trait_flags.get(rp) or self.shared.trait_flags.get(rp)

    def below(self, rp, top) -> bool:
        """rp is top or one of its descendants."""
        parent = self.facts.parent
        shared = self.shared.parent
        steps = 0
        while rp is not None and steps < 64:
            if rp == top:
                return True
            rp = parent[rp] if rp in parent else shared.get(rp)
            steps += 1
        return False


# -- checks on a (partial) choice --------------------------------------------

def traits_ok(plan: Plan, view: View, rps) -> bool:
    """The unnumbered group's required traits are on the providers
    chosen for it, taken together."""
    g = plan.unnumbered
    if not g.required:
        return True
    have = [False] * len(g.required)
    own, shared = view.facts.trait_flags, view.shared.trait_flags
    for rp in rps:
        for i, flag in enumerate(own.get(rp) or shared.get(rp) or ()):
            if flag:
                have[i] = True
    return all(have)


def subtree_ok(view: View, chosen, members) -> bool:
    """The providers chosen for the slots in `members` all sit below
    (or are) one of them."""
    rps = {chosen[i] for i in members}
    if len(rps) <= 1:
        return True
    if len(rps) == 2:
        a, b = rps
        return view.below(a, b) or view.below(b, a)
    return any(all(view.below(rp, top) for rp in rps if rp != top) for top in rps)


def one_per_tree_ok(plan: Plan, view: View, chosen) -> bool:
    """Before 1.29, a candidate takes from one provider per tree."""
    roots: dict = {}
    for i, slot in enumerate(plan.slots):
        if not slot.resources:
            continue
        rp = chosen[i]
        if roots.setdefault(view.root_of(rp), rp) != rp:
            return False
    return True


def room_for_all(plan: Plan, view: View, opts: list) -> bool:
    """For each class several slots ask for, the providers that may
    serve those slots have room for their sum. A cheap necessary
    condition: without it, many small groups that cannot all fit
    would have the search try every way of splitting them."""
    for rc in plan.multi_rcs:
        wanted = 0
        unit = 0  # every amount asked is a multiple of it
        serving = set()
        for slot, slot_opts in zip(plan.slots, opts):
            amount = slot.resources.get(rc)
            if amount:
                wanted += amount
                unit = math.gcd(unit, amount)
                serving.update(slot_opts)
        room = 0
        for rp in serving:
            inv = view.inventory((rp, rc))
            if inv is not None:
                # A provider can only take whole units of it.
                room += (inv.capacity - inv.used) // unit * unit
        if wanted > room:
            return False
    return True
