"""Usage sums: per provider, and per project (for quota counting).

Project usage is one SQL statement joining consumers to allocations
through the (project_id, user_id, uuid) consumer indexes; nothing loops
over consumers in Python, so the answer stays exact and fast with
hundreds of thousands of allocations.
"""
from __future__ import annotations

from typing import Optional

from sqlalchemy import func, null, select, union_all
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.ledger.allocations import provider_generation
from placement_lite.ledger.consumers import UNKNOWN_TYPE

# consumer_type query values with a meaning of their own (1.38).
ALL_TYPES = "all"


def for_provider(conn: Connection, rp_uuid: str):
    """(generation, {class: used}, stamps); classes with inventory but no
    allocations report 0."""
    provider = provider_generation(conn, rp_uuid)
    inv, a, rc = t.inventories, t.allocations, t.resource_classes
    used = (select(func.sum(a.c.used))
            .where(a.c.resource_provider_id == inv.c.resource_provider_id,
                   a.c.resource_class_id == inv.c.resource_class_id)
            .scalar_subquery())
    rows = conn.execute(
        select(rc.c.name, func.coalesce(used, 0))
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(inv.c.resource_provider_id == provider.id))
    return provider.generation, {name: int(n) for name, n in rows}, [
        provider.created_at, provider.updated_at]


def _scope(query, project_id: str, user_id: Optional[str]):
    c = t.consumers
    query = query.where(c.c.project_id == select(t.projects.c.id).where(
        t.projects.c.external_id == project_id).scalar_subquery())
    if user_id is not None:
        query = query.where(c.c.user_id == select(t.users.c.id).where(
            t.users.c.external_id == user_id).scalar_subquery())
    return query


def for_project(conn: Connection, project_id: str,
                user_id: Optional[str] = None) -> dict[str, int]:
    """{class: sum of used} over every allocation of the project's (and
    user's) consumers."""
    c, a, rc = t.consumers, t.allocations, t.resource_classes
    query = (select(rc.c.name, func.sum(a.c.used))
             .select_from(c)
             .join(a, a.c.consumer_id == c.c.id)
             .join(rc, rc.c.id == a.c.resource_class_id)
             .group_by(rc.c.name))
    rows = conn.execute(_scope(query, project_id, user_id))
    return {name: int(n) for name, n in rows}


def for_project_by_type(conn: Connection, project_id: str,
                        user_id: Optional[str] = None,
                        consumer_type: Optional[str] = None
                        ) -> dict[str, dict[str, int]]:
    """{type: {"consumer_count": n, class: used, ...}} (1.38).

    Without a type every stored type is its own group; `all` folds every
    consumer into one group; `unknown` selects consumers without a type.
    One statement: the per-class sums and the per-type consumer counts are
    two branches of a UNION ALL.
    """
    c, a, rc, ct = (t.consumers, t.allocations, t.resource_classes,
                    t.consumer_types)
    # Grouping by the raw column (not an expression with bound literals)
    # keeps PostgreSQL happy; the null type becomes `unknown` below.
    group = [] if consumer_type == ALL_TYPES else [ct.c.name]

    def base(*cols):
        query = (select(*cols).select_from(c)
                 .join(a, a.c.consumer_id == c.c.id)
                 .outerjoin(ct, ct.c.id == c.c.consumer_type_id))
        if consumer_type == UNKNOWN_TYPE:
            query = query.where(c.c.consumer_type_id.is_(None))
        elif consumer_type not in (None, ALL_TYPES):
            query = query.where(ct.c.name == consumer_type)
        return _scope(query, project_id, user_id)

    grp = ct.c.name if group else null()
    sums = (base(grp.label("grp"), rc.c.name.label("rc"),
                 func.sum(a.c.used).label("n"))
            .join(rc, rc.c.id == a.c.resource_class_id)
            .group_by(*group, rc.c.name))
    counts = base(grp.label("grp"), null().label("rc"),
                  func.count(func.distinct(c.c.id)).label("n"))
    if group:
        counts = counts.group_by(*group)
    result: dict[str, dict[str, int]] = {}
    for name, rc_name, n in conn.execute(union_all(sums, counts)):
        if not n:
            continue
        key = ALL_TYPES if not group else (name or UNKNOWN_TYPE)
        entry = result.setdefault(key, {})
        entry["consumer_count" if rc_name is None else rc_name] = int(n)
    return result
