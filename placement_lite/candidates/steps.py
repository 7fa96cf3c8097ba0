"""A request group's provider filters, step by step, as Core clauses.

The reader ANDs them into its per-slice statements; explain counts what
each one removes. One list, so the two can never filter differently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sqlalchemy import and_, or_

from placement_lite.candidates import filters
from placement_lite.candidates.plan import Lookups
from placement_lite.candidates.query import RequestGroup


@dataclass(frozen=True)
class Step:
    kind: str  # resources, required, forbidden, any_of, member_of,
    #            forbidden_aggregates, in_tree
    detail: str  # what the request said, e.g. "VCPU:8" or "HW_CPU_X86_AVX2"
    clause: object  # over the provider columns given
    rc: Optional[int] = None  # resources steps: the class id
    amount: int = 0
    names: tuple = ()  # the traits or aggregate uuids it names


def _trait_steps(group: RequestGroup, lk: Lookups, rp_id) -> list:
    out = []
    for any_of in group.required:
        names = tuple(sorted(any_of))
        clause = filters.has_any_trait(rp_id, filters.known_ids(any_of, lk.trait_ids))
        kind = "required" if len(names) == 1 else "any_of"
        out.append(Step(kind, ",".join(names), clause, names=names))
    return out


def _forbidden_trait_steps(group: RequestGroup, lk: Lookups, rp_id) -> list:
    bad = filters.known_ids(group.forbidden, lk.trait_ids)
    if not bad:
        return []
    names = tuple(sorted(group.forbidden))
    return [Step("forbidden", ",".join("!" + n for n in names),
                 ~filters.has_any_trait(rp_id, bad), names=names)]


def numbered_steps(group: RequestGroup, lk: Lookups, rp) -> list:
    """A numbered group's filters on one provider (`rp`: the providers
    table or an alias of it), in the order explain reports them."""
    out = [Step("resources", f"{name}:{amount}",
                filters.has_capacity(rp.c.id, lk.rc_ids[name], amount),
                rc=lk.rc_ids[name], amount=amount)
           for name, amount in sorted(group.resources.items())]
    traits = _trait_steps(group, lk, rp.c.id)
    out += [s for s in traits if s.kind == "required"]
    out += _forbidden_trait_steps(group, lk, rp.c.id)
    out += [s for s in traits if s.kind == "any_of"]
    for any_of in group.member_of:
        names = tuple(sorted(any_of))
        out.append(Step("member_of", ",".join(names), filters.in_any_aggregate(
            rp.c.id, filters.known_ids(any_of, lk.agg_ids)), names=names))
    bad = filters.known_ids(group.forbidden_aggs, lk.agg_ids)
    if bad:
        names = tuple(sorted(group.forbidden_aggs))
        out.append(Step("forbidden_aggregates", ",".join("!" + n for n in names),
                        ~filters.in_any_aggregate(rp.c.id, bad), names=names))
    if group.in_tree:
        out.append(Step("in_tree", group.in_tree,
                        rp.c.root_provider_id == lk.tree_roots[group.suffix]))
    return out


def unnumbered_steps(group: RequestGroup, lk: Lookups, rp) -> list:
    """The unnumbered group's filters on each provider serving it in its
    own tree, after capacity (which is per class: see the reader). Its
    required traits are not among them: they hold for the providers
    chosen together, not for each one."""
    out = _forbidden_trait_steps(group, lk, rp.c.id)
    if group.member_of:
        # An aggregate on the root spans its tree, for this group only.
        ok = [and_(*filters.aggregate_clauses(col, group.member_of, (), lk.agg_ids))
              for col in (rp.c.id, rp.c.root_provider_id)]
        names = tuple(sorted(set().union(*group.member_of)))
        out.append(Step("member_of", ";".join(
            ",".join(sorted(any_of)) for any_of in group.member_of),
            or_(ok[0], and_(rp.c.root_provider_id != rp.c.id, ok[1])), names=names))
    bad = filters.known_ids(group.forbidden_aggs, lk.agg_ids)
    if group.forbidden_aggs:
        names = tuple(sorted(group.forbidden_aggs))
        out.append(Step("forbidden_aggregates", ",".join("!" + n for n in names),
                        and_(~filters.in_any_aggregate(rp.c.id, bad),
                             ~filters.in_any_aggregate(rp.c.root_provider_id, bad)),
                        names=names))
    if group.in_tree:
        out.append(Step("in_tree", group.in_tree,
                        rp.c.root_provider_id == lk.tree_roots[""]))
    return out
