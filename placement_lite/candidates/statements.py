"""The candidate reader's statements, built from a Plan: per slice, one
query per request group returning the providers that can serve it, with
the facts the combiner needs as named columns."""
from __future__ import annotations

from sqlalchemy import and_, case, exists, func, or_, select

from placement_lite.candidates import filters, steps
from placement_lite.candidates.plan import Plan
from placement_lite.db import tables as t

RP = t.resource_providers


def unnumbered_select(plan: Plan, where, in_trees: bool, has_sharing: bool):
    """The unnumbered group's providers in one query, a row each, with
    the classes they can give and their facts as columns.

    in_trees: the rows are read for their own trees (not as sharing
    providers of other trees), so the aggregates of their root apply,
    and, when no sharing provider can help, a provider alone in its
    tree must carry the whole group itself.
    """
    g = plan.unnumbered
    lk = plan.lookups
    inv = t.inventories
    other = RP.alias("tree_mate")
    alone = ~exists().where(other.c.root_provider_id == RP.c.root_provider_id,
                            other.c.id != RP.c.id)
    wanted = plan.wanted
    traits = [filters.has_any_trait(RP.c.id, [lk.trait_ids[n] for n in any_of])
              for any_of in g.required]
    cols = [RP.c.id.label("id"), RP.c.root_provider_id.label("root_id"),
            RP.c.uuid.label("uuid"), RP.c.parent_provider_id.label("parent_id"),
            case((alone, 1), else_=0).label("alone")]
    # One pass over the inventory rows of the wanted classes: each row
    # is checked for capacity once, then folded into a flag per class.
    cols += [func.max(case((inv.c.resource_class_id == rc, 1), else_=0))
             .label(f"rc_{i}") for i, (rc, _amount) in enumerate(wanted)]
    cols += [case((clause, 1), else_=0).label(f"trait_{i}")
             for i, clause in enumerate(traits)]
    # `+ 0` keeps SQLite from driving the query by the class index
    # (every provider's row of the class): the slice of trees drives it.
    conds = [where, or_(*[and_(inv.c.resource_class_id + 0 == rc,
                               *filters.capacity_conditions(inv, amount))
                          for rc, amount in wanted])]
    group_steps = steps.unnumbered_steps(g, lk, RP)
    if in_trees:
        conds += [step.clause for step in group_steps]
    else:
        # Read as sharing providers of other trees: the steps that hold
        # everywhere, and their own aggregates as flags (the anchor's
        # root decides the rest).
        conds += [step.clause for step in group_steps if step.kind in steps.EVERYWHERE]
        if g.member_of:
            ok = and_(*filters.aggregate_clauses(RP.c.id, g.member_of, (),
                                                 lk.agg_ids))
            cols.append(case((ok, 1), else_=0).label("agg_ok"))
        if g.forbidden_aggs:
            bad = filters.in_any_aggregate(
                RP.c.id, filters.known_ids(g.forbidden_aggs, lk.agg_ids))
            cols.append(case((bad, 1), else_=0).label("agg_bad"))
    query = (select(*cols)
             .select_from(RP.join(inv, inv.c.resource_provider_id == RP.c.id))
             .where(*conds)
             # In the order of the root index, so neither the grouping
             # nor the ordering needs a sort.
             .group_by(RP.c.root_provider_id, RP.c.id, RP.c.uuid,
                       RP.c.parent_provider_id)
             .order_by(RP.c.root_provider_id, RP.c.id))
    if in_trees and not has_sharing:
        query = query.having(or_(
            and_(alone, func.count(inv.c.resource_class_id) == len(wanted),
                 *traits),
            ~alone))
        if traits:
            # The traits part of that, again per provider: the database
            # then skips the inventory rows of a lone provider lacking
            # them (a third of the work on a flat cloud).
            query = query.where(or_(~alone, and_(*traits)))
    return query


def numbered_select(plan: Plan, suffix: str, where):
    group = plan.req.groups[suffix]
    conds = [where] + [step.clause for step in steps.numbered_steps(
        group, plan.lookups, RP)]
    return select(RP.c.id.label("id"), RP.c.root_provider_id.label("root_id"),
                  RP.c.uuid.label("uuid"),
                  RP.c.parent_provider_id.label("parent_id")).where(
                      *conds).order_by(RP.c.root_provider_id, RP.c.id)


def inventory_select(plan: Plan, where):
    inv = t.inventories
    return (select(inv.c.resource_provider_id.label("id"),
                   inv.c.resource_class_id.label("rc"),
                   inv.c.total, inv.c.reserved, inv.c.allocation_ratio,
                   inv.c.max_unit, inv.c.used)
            .select_from(RP.join(inv, inv.c.resource_provider_id == RP.c.id))
            .where(where, inv.c.resource_class_id.in_(sorted(plan.multi_rcs))))
