"""Usage sums: per provider, and per project (for quota counting).

Project usage is one SQL statement over the usage summary
(db/usage_summary.py), which every allocation write keeps exact in
its own transaction: the answer reads a few rows per owner and class,
however many consumers and allocations the project has.
"""
from __future__ import annotations

from typing import Optional

from sqlalchemy import func, null, select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.ledger.allocations import provider_generation
from placement_lite.ledger.consumers import UNKNOWN_TYPE

# consumer_type query values with a meaning of their own (1.38).
ALL_TYPES = "all"


def for_provider(conn: Connection, rp_uuid: str):
    """(generation, {class: used}, stamps); classes with inventory but no
    allocations report 0."""
    provider = provider_generation(conn, rp_uuid)
    inv, rc = t.inventories, t.resource_classes
    # Each inventory row carries what is allocated of it (db/tables.py).
    rows = conn.execute(
        select(rc.c.name, inv.c.used)
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(inv.c.resource_provider_id == provider.id))
    return provider.generation, {name: int(n) for name, n in rows}, [
        provider.created_at, provider.updated_at]


def _project_rows(project_id: str, user_id: Optional[str], *columns):
    """SELECT `columns` from the project's (and user's) summary rows,
    found through the projects (and users) external id index: the ids
    cost no statement of their own."""
    s, p, u = t.usage_summary, t.projects, t.users
    query = (select(*columns).select_from(s)
             .join(p, p.c.id == s.c.project_id)
             .where(p.c.external_id == project_id))
    if user_id is not None:
        query = query.join(u, u.c.id == s.c.user_id).where(u.c.external_id == user_id)
    return query


def for_project(conn: Connection, project_id: str,
                user_id: Optional[str] = None) -> dict[str, int]:
    """{class: sum of used} over every allocation of the project's (and
    user's) consumers, from the usage summary: a few rows per owner and
    class (their shards), however many consumers the project has."""
    s, rc = t.usage_summary, t.resource_classes
    rows = conn.execute(
        _project_rows(project_id, user_id, rc.c.name, func.sum(s.c.amount))
        .join(rc, rc.c.id == s.c.resource_class_id)
        .group_by(rc.c.name))
    return {name: int(n) for name, n in rows if n}


def for_project_by_type(conn: Connection, project_id: str,
                        user_id: Optional[str] = None,
                        consumer_type: Optional[str] = None
                        ) -> dict[str, dict[str, int]]:
    """{type: {"consumer_count": n, class: used, ...}} (1.38).

    Without a type every stored type is its own group; `all` folds every
    consumer into one group; `unknown` selects consumers without a type.
    One statement over the usage summary, whose rows of class -1 count
    each owner's consumers (see usage_summary).
    """
    s, rc, ct = t.usage_summary, t.resource_classes, t.consumer_types
    grouped = consumer_type != ALL_TYPES
    kind = ct.c.name if grouped else null()
    query = (_project_rows(project_id, user_id, kind.label("kind"),
                           rc.c.name.label("rc"), func.sum(s.c.amount))
             .outerjoin(rc, rc.c.id == s.c.resource_class_id))
    if grouped:
        query = (query.outerjoin(ct, ct.c.id == s.c.consumer_type_id)
                 .group_by(s.c.consumer_type_id, ct.c.name))
    if consumer_type == UNKNOWN_TYPE:
        query = query.where(s.c.consumer_type_id == usage_summary.NO_TYPE)
    elif grouped and consumer_type is not None:
        query = query.where(ct.c.name == consumer_type)
    query = query.group_by(s.c.resource_class_id, rc.c.name)
    result: dict[str, dict[str, int]] = {}
    for name, rc_name, n in conn.execute(query):
        if not n:
            continue
        key = ALL_TYPES if not grouped else (name or UNKNOWN_TYPE)
        entry = result.setdefault(key, {})
        entry["consumer_count" if rc_name is None else rc_name] = int(n)
    return result
