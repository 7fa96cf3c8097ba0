"""What one candidates request asks, worked out once before any reading:
the slots to fill, the ids names resolved to, and the shape of answers.

The reader builds its statements from a Plan, the combiner fills its
slots; neither changes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from placement_lite.candidates.query import CandidateRequest, RequestGroup


@dataclass(frozen=True)
class Slot:
    """One choice of provider: a numbered group, or one class of the
    unnumbered group (which may take each class from another provider)."""
    suffix: str
    resources: dict  # class id -> amount
    numbered: bool


@dataclass
class Lookups:
    rc_ids: dict
    trait_ids: dict
    agg_ids: dict
    tree_roots: dict  # suffix -> root id of its in_tree (missing: no match)


def group_key(g: RequestGroup) -> tuple:
    """What a group asks of a provider, whatever its suffix."""
    return (tuple(sorted(g.resources.items())),
            tuple(frozenset(any_of) for any_of in g.required),
            frozenset(g.forbidden),
            tuple(frozenset(any_of) for any_of in g.member_of),
            frozenset(g.forbidden_aggs), g.in_tree)


class Plan:
    """The request's slots and the facts derived from them."""

    def __init__(self, req: CandidateRequest, lookups: Lookups):
        self.req = req
        self.lookups = lookups
        self.unnumbered: Optional[RequestGroup] = req.groups.get("")
        slots = []
        if self.unnumbered is not None:
            for name, amount in self.unnumbered.resources.items():
                slots.append(Slot("", {lookups.rc_ids[name]: amount}, False))
        for suffix, group in req.groups.items():
            if suffix:
                slots.append(Slot(suffix, {
                    lookups.rc_ids[n]: a for n, a in group.resources.items()}, True))
        self.slots: tuple = tuple(slots)
        # Where the reader files each slot's providers (see slot_key).
        self.slot_keys: tuple = tuple(self.slot_key(slot) for slot in slots)
        counts: dict = {}
        for slot in slots:
            for rc in slot.resources:
                counts[rc] = counts.get(rc, 0) + 1
        # Classes several slots ask for: their amounts merge on a provider
        # serving more than one of them, so its capacity is read.
        self.multi_rcs = frozenset(rc for rc, n in counts.items() if n > 1)
        self.unnumbered_slots = tuple(
            i for i, s in enumerate(slots) if not s.numbered)
        self.last_unnumbered = self.unnumbered_slots[-1] \
            if self.unnumbered_slots else -1
        self.isolate = req.group_policy == "isolate" and sum(
            1 for s in slots if s.numbered) > 1
        # The unnumbered slots' classes, in slot order (one flag column each).
        self.wanted = tuple((rc, amount) for slot in slots if not slot.numbered
                            for rc, amount in slot.resources.items())
        # same_subtree is checked as soon as the last slot it names is chosen.
        checks: dict = {}
        for subtree in req.same_subtrees:
            members = tuple(j for j, s in enumerate(slots) if s.suffix in subtree)
            if members:
                checks.setdefault(max(members), []).append(members)
        self.subtree_checks = {k: tuple(v) for k, v in checks.items()}
        self._needed: Optional[tuple] = None
        alike: dict = {}
        for suffix, group in req.groups.items():
            if suffix:
                alike.setdefault(group_key(group), []).append(suffix)
        # The numbered groups asking for the same thing, together: one
        # query serves them all (a request may repeat one group many times).
        self.alike_numbered = tuple(tuple(v) for v in alike.values())
        self.need_parents = bool(req.same_subtrees)
        groups = tuple((g.suffix,) + group_key(g) for g in req.groups.values())
        ids = tuple(frozenset(m.items()) for m in (
            lookups.rc_ids, lookups.trait_ids, lookups.agg_ids, lookups.tree_roots))
        # Everything a slice statement is built from but the sharing flag.
        self.shape = (groups, ids)
        # The shape with the order of the slots (a request may name the
        # same classes in another order), for what is kept per shape and
        # read by slot position (candidates/memory.py), and with what else
        # a tree's walk depends on (combiner._walk).
        slot_order = tuple((slot.suffix, tuple(slot.resources.items())) for slot in slots)
        self.slot_shape = (self.shape, slot_order)
        self.walk_shape = ("walk", self.slot_shape, self.isolate,
                           tuple(tuple(sorted(s)) for s in req.same_subtrees))

    def slot_key(self, slot: Slot):
        """Where the reader files a slot's providers: by suffix, or
        ('', class id) for a class of the unnumbered group."""
        return slot.suffix if slot.numbered else ("", next(iter(slot.resources)))

    @property
    def needed_choices(self) -> tuple:
        """Per level j: the earlier slots whose chosen provider a later
        check still reads (the unnumbered group's traits, same_subtree)."""
        if self._needed is None:
            last = self.last_unnumbered
            needed = []
            for j in range(len(self.slots)):
                used = set()
                if j <= last:
                    used.update(m for m in self.unnumbered_slots if m < j)
                for at, groups in self.subtree_checks.items():
                    if at >= j:
                        for members in groups:
                            used.update(m for m in members if m < j)
                needed.append(tuple(sorted(used)))
            self._needed = tuple(needed)
        return self._needed


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

    def adding(self, pos: int, rc: int, amount: int) -> "Layout":
        """This layout with `amount` of class `rc` on the provider at
        position `pos` too (a reservation's marker: candidates/drawing.py)."""
        out = Layout.__new__(Layout)
        out.allocations = tuple((p, {**res, rc: amount}) if p == pos else (p, res)
                                for p, res in self.allocations)
        out.mappings, out.allocating = self.mappings, self.allocating
        return out


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
