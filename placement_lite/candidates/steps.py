"""A request group's provider filters, step by step: each as a Core
clause and as the same test over a provider's facts in memory.

The SQL reader ANDs the clauses into its per-slice statements, explain
counts what each one removes, and the reader over the process's copy of
the facts (memory.py) runs the tests. One list, so none of them can
filter differently; the differential tests hold the clause and the test
of every step to the same answers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

from sqlalchemy import and_, or_

from placement_lite.candidates import filters
from placement_lite.candidates.plan import Lookups
from placement_lite.candidates.query import RequestGroup


class ProviderView(NamedTuple):
    """One provider's facts, as a step's test reads them."""
    self_id: int  # the provider's id
    traits: frozenset  # trait ids
    aggregates: frozenset  # aggregate ids
    root: int  # its root's id
    root_aggregates: frozenset  # its root's aggregate ids


@dataclass(frozen=True)
class Step:
    kind: str  # resources, required, forbidden, any_of, member_of,
    #            forbidden_aggregates, in_tree
    detail: str  # what the request said, e.g. "VCPU:8" or "HW_CPU_X86_AVX2"
    # Builds the clause, over the provider columns given: on use only, as
    # the reader over the copy runs the tests alone, and building Core
    # clauses costs far more than the tests (a millisecond a request).
    make: Callable[[], object]
    rc: Optional[int] = None  # resources steps: the class id
    amount: int = 0
    names: tuple = ()  # the traits or aggregate uuids it names
    # The clause as a test of a ProviderView (None for resources steps:
    # capacity is checked against `used`, per request).
    test: Optional[Callable[[ProviderView], bool]] = None

    @property
    def clause(self):
        return self.make()


def _has_any(ids) -> Callable[[frozenset], bool]:
    ids = frozenset(ids)
    return lambda have: not have.isdisjoint(ids)


def _trait_steps(group: RequestGroup, lk: Lookups, rp) -> list:
    out = []
    for any_of in group.required:
        names = tuple(sorted(any_of))
        ids = filters.known_ids(any_of, lk.trait_ids)
        has = _has_any(ids)
        kind = "required" if len(names) == 1 else "any_of"
        out.append(Step(kind, ",".join(names),
                        lambda ids=ids: filters.has_any_trait(rp.c.id, ids),
                        names=names, test=lambda v, has=has: has(v.traits)))
    return out


def _forbidden_trait_steps(group: RequestGroup, lk: Lookups, rp) -> list:
    bad = filters.known_ids(group.forbidden, lk.trait_ids)
    if not bad:
        return []
    names = tuple(sorted(group.forbidden))
    has = _has_any(bad)
    return [Step("forbidden", ",".join("!" + n for n in names),
                 lambda: ~filters.has_any_trait(rp.c.id, bad), names=names,
                 test=lambda v: not has(v.traits))]


def _in_tree_step(group: RequestGroup, lk: Lookups, rp) -> Step:
    root = lk.tree_roots[group.suffix]
    return Step("in_tree", group.in_tree, lambda: rp.c.root_provider_id == root,
                test=lambda v: v.root == root)


def numbered_steps(group: RequestGroup, lk: Lookups, rp) -> list:
    """A numbered group's filters on one provider (`rp`: the providers
    table or an alias of it), in the order explain reports them."""
    out = [Step("resources", f"{name}:{amount}",
                lambda rc=lk.rc_ids[name], amount=amount: filters.has_capacity(
                    rp.c.id, rc, amount),
                rc=lk.rc_ids[name], amount=amount)
           for name, amount in sorted(group.resources.items())]
    traits = _trait_steps(group, lk, rp)
    out += [s for s in traits if s.kind == "required"]
    out += _forbidden_trait_steps(group, lk, rp)
    out += [s for s in traits if s.kind == "any_of"]
    for any_of in group.member_of:
        names = tuple(sorted(any_of))
        ids = filters.known_ids(any_of, lk.agg_ids)
        has = _has_any(ids)
        out.append(Step("member_of", ",".join(names),
                        lambda ids=ids: filters.in_any_aggregate(rp.c.id, ids),
                        names=names, test=lambda v, has=has: has(v.aggregates)))
    bad = filters.known_ids(group.forbidden_aggs, lk.agg_ids)
    if bad:
        names = tuple(sorted(group.forbidden_aggs))
        has = _has_any(bad)
        out.append(Step("forbidden_aggregates", ",".join("!" + n for n in names),
                        lambda: ~filters.in_any_aggregate(rp.c.id, bad), names=names,
                        test=lambda v: not has(v.aggregates)))
    if group.in_tree:
        out.append(_in_tree_step(group, lk, rp))
    return out


# The unnumbered group's steps that keep a provider out wherever it
# serves; the others (its root's aggregates span the tree) hold only for
# the provider in its own tree, not as a sharing provider of another.
EVERYWHERE = ("forbidden", "in_tree")


def unnumbered_steps(group: RequestGroup, lk: Lookups, rp) -> list:
    """The unnumbered group's filters on each provider serving it in its
    own tree, after capacity (which is per class: see the reader). Its
    required traits are not among them: they hold for the providers
    chosen together, not for each one."""
    out = _forbidden_trait_steps(group, lk, rp)
    if group.member_of:
        # An aggregate on the root spans its tree, for this group only.
        def spans():
            ok = [and_(*filters.aggregate_clauses(col, group.member_of, (), lk.agg_ids))
                  for col in (rp.c.id, rp.c.root_provider_id)]
            return or_(ok[0], and_(rp.c.root_provider_id != rp.c.id, ok[1]))
        names = tuple(sorted(set().union(*group.member_of)))
        every = [_has_any(filters.known_ids(any_of, lk.agg_ids))
                 for any_of in group.member_of]

        def member(v: ProviderView) -> bool:
            return (all(has(v.aggregates) for has in every)
                    or (v.root != v.self_id and all(has(v.root_aggregates) for has in every)))
        out.append(Step("member_of", ";".join(
            ",".join(sorted(any_of)) for any_of in group.member_of),
            spans, names=names, test=member))
    bad = filters.known_ids(group.forbidden_aggs, lk.agg_ids)
    if group.forbidden_aggs:
        names = tuple(sorted(group.forbidden_aggs))
        has = _has_any(bad)
        out.append(Step("forbidden_aggregates", ",".join("!" + n for n in names),
                        lambda: and_(~filters.in_any_aggregate(rp.c.id, bad),
                                     ~filters.in_any_aggregate(rp.c.root_provider_id, bad)),
                        names=names,
                        test=lambda v: not (has(v.aggregates) or has(v.root_aggregates))))
    if group.in_tree:
        out.append(_in_tree_step(group, lk, rp))
    return out


def root_steps(req, lk: Lookups, rp) -> list:
    """root_required on a tree's root (`rp`: the providers table)."""
    out = []
    for name in sorted(req.root_required):
        ids = filters.known_ids({name}, lk.trait_ids)
        has = _has_any(ids)
        out.append(Step("root_required", name,
                        lambda ids=ids: filters.has_any_trait(rp.c.id, ids),
                        names=(name,), test=lambda v, has=has: has(v.traits)))
    bad = filters.known_ids(req.root_forbidden, lk.trait_ids)
    if bad:
        has = _has_any(bad)
        names = tuple(sorted(req.root_forbidden))
        out.append(Step("root_forbidden", ",".join("!" + n for n in names),
                        lambda: ~filters.has_any_trait(rp.c.id, bad), names=names,
                        test=lambda v: not has(v.traits)))
    return out
