"""What the reader learns about providers, as values the combiner reads.

A Facts value is built by the reader for one slice of trees (or for the
sharing providers) and not changed afterwards: the combiner, the
orchestrator and explain only read it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple, Optional


class Room(NamedTuple):
    """One provider's inventory of one class, as the combiner merges it."""
    capacity: int  # (total - reserved) * allocation_ratio
    used: int
    max_unit: int


def most_used(cap, amount: int):
    """The most `used` may be for `amount` more to fit in capacity `cap`
    (None: the unit limits refuse the amount; -1 then, as `used` is never
    negative). The same test as `used + amount <= cap`, Inventory.fits's:
    capacity is a float, so the bound is taken in integers, where
    subtracting from a float beyond 2**53 could round."""
    if cap is None:
        return -1
    return math.floor(cap) - amount if math.isfinite(cap) else cap


@dataclass(frozen=True)
class Facts:
    uuid: dict = field(default_factory=dict)  # rp -> uuid
    root: dict = field(default_factory=dict)  # rp -> root id
    parent: dict = field(default_factory=dict)  # rp -> parent id (or None)
    # rp -> per any-of set of the unnumbered group's required traits: has one
    trait_flags: dict = field(default_factory=dict)
    agg_ok: dict = field(default_factory=dict)  # rp -> member_of satisfied
    agg_bad: dict = field(default_factory=dict)  # rp -> in a forbidden agg
    inventory: dict = field(default_factory=dict)  # (rp, rc) -> Room
    root_ok: frozenset = frozenset()  # roots passing root_required
    alone: frozenset = frozenset()  # providers alone in their tree
    root_agg_bad: dict = field(default_factory=dict)  # root -> in forbidden agg
    # slot key (see Plan.slot_key) -> root -> [rp, ...] serving it there
    rows: dict = field(default_factory=dict)

    def providers(self, key) -> set:
        return {rp for rps in self.rows.get(key, {}).values() for rp in rps}


EMPTY = Facts()


@dataclass(frozen=True)
class Sharing:
    """Sharing providers (trait MISC_SHARES_VIA_AGGREGATE), read once per
    request: their facts, which slot each may serve, and the trees
    (anchors) each serves: its own, and those of every provider sharing
    one of its aggregates."""
    facts: Facts = EMPTY
    by_key: dict = field(default_factory=dict)  # slot key -> {rp, ...}
    anchors: dict = field(default_factory=dict)  # root -> {rp, ...}


NO_SHARING = Sharing()


@dataclass(frozen=True)
class Slice:
    """The trees whose root id lies in [lo, hi], as far as they matter."""
    lo: int
    hi: int
    facts: Facts
    # Roots worth combining, ascending: some slot has a provider there or
    # a sharing provider serves them, and they pass root_required.
    anchors: tuple
    # Roots any provider (or sharing provider) offered before root_required.
    offered: Optional[frozenset] = None
