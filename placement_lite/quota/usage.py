"""Resource names -> usage, per project, in a few grouped queries.

Allocation sums and consumer counts come from the usage summary
(db/usage_summary.py), which every allocation write keeps exact in its
transaction: a claim's quota check reads a few rows per project, however
many consumers the project tree has.

  class:<RESOURCE_CLASS>      sum of the open allocations of that class
                              by the project's consumers: those drawn from
                              a reservation are charged through it (at
                              every instant of its window, booked.py), so
                              they are left out here rather than counted
                              twice (docs/reservations.md, "Using a
                              reservation"). A reservation's marker class
                              is no quota resource: it takes no room.
  consumers:<CONSUMER_TYPE>   how many consumers of that type the project
                              has (`consumers:unknown`: those without type)
  lease:<resource_type>:hours reserved time charged to the project in the
                              lease ledger, in amount-hours
  any other name              whatever settings.quota_resource_usage maps
                              it to (one of the forms above)
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping, Optional

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.ledger import marker

UNKNOWN_CONSUMER_TYPE = "unknown"


def source(name: str, aliases: Mapping[str, str]) -> Optional[tuple[str, str]]:
    """(kind, key) for a resource name, or None when nothing counts it."""
    name = aliases.get(name, name)
    kind, sep, key = name.partition(":")
    if not sep or not key:
        return None
    if kind == "class":
        return ("class", key)
    if kind == "consumers":
        return ("consumers", key)
    if kind == "lease" and key.endswith(":hours") and len(key) > len(":hours"):
        return ("lease", name)
    return None


def require_sources(names: Iterable[str], aliases: Mapping[str, str]) -> None:
    unknown = sorted(n for n in names if source(n, aliases) is None)
    if unknown:
        raise errors.UnknownResource(
            f"No usage is known for resource(s) {', '.join(unknown)}: use "
            "class:<RESOURCE_CLASS>, consumers:<CONSUMER_TYPE>, "
            "lease:<resource_type>:hours, or a name configured in "
            "quota_resource_usage.")


def usage(conn: Connection, project_ids: Iterable[int], names: Iterable[str],
          aliases: Mapping[str, str]) -> dict[str, dict[int, float]]:
    """{name: {project_id: usage}} for the names that have a source."""
    project_ids = list(set(project_ids))
    by_source: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name in set(names):
        src = source(name, aliases)
        if src is not None:
            by_source[src].append(name)
    out: dict[str, dict[int, float]] = {
        n: {} for names_ in by_source.values() for n in names_}
    if not project_ids or not by_source:
        return out

    def put(src, pid, value):
        for name in by_source.get(src, ()):
            out[name][pid] = value

    s = t.usage_summary
    classes = [key for kind, key in by_source if kind == "class"]
    if classes:
        rc = t.resource_classes
        rows = conn.execute(
            select(s.c.project_id, rc.c.name, func.sum(s.c.amount))
            .join(rc, rc.c.id == s.c.resource_class_id)
            .where(s.c.project_id.in_(project_ids), rc.c.name.in_(classes))
            .group_by(s.c.project_id, rc.c.name))
        drawn = _drawn(conn, project_ids, classes)
        for pid, cls, used in rows:
            used = int(used or 0) - drawn.get((pid, cls), 0)
            if used:
                put(("class", cls), pid, used)

    ctypes = [key for kind, key in by_source if kind == "consumers"]
    if ctypes:
        ct = t.consumer_types
        rows = conn.execute(
            select(s.c.project_id, ct.c.name, func.sum(s.c.amount))
            .outerjoin(ct, ct.c.id == s.c.consumer_type_id)
            .where(s.c.project_id.in_(project_ids),
                   s.c.resource_class_id == usage_summary.CONSUMERS)
            .group_by(s.c.project_id, s.c.consumer_type_id, ct.c.name))
        for pid, cname, count in rows:
            if count:
                put(("consumers", cname or UNKNOWN_CONSUMER_TYPE), pid, int(count))

    leases = [key for kind, key in by_source if kind == "lease"]
    if leases:
        lg = t.lease_ledger
        rows = conn.execute(
            select(lg.c.project_id, lg.c.resource_name,
                   func.sum(lg.c.unit_seconds))
            .where(lg.c.project_id.in_(project_ids),
                   lg.c.resource_name.in_(leases))
            .group_by(lg.c.project_id, lg.c.resource_name))
        for pid, rname, seconds in rows:
            put(("lease", rname), pid, int(seconds or 0) / 3600.0)
    return out


def _drawn(conn: Connection, project_ids: list[int], classes: list[str]
           ) -> dict[tuple[int, str], int]:
    """(project id, class name) -> what the projects' consumers drew from
    reservations, for the given classes: one statement on the drawn rows
    alone (allocations' reservation index), none of which exist where
    nobody draws."""
    a, c, rc = t.allocations, t.consumers, t.resource_classes
    rows = conn.execute(
        select(c.c.project_id, rc.c.name, func.sum(a.c.used))
        .select_from(a).join(c, c.c.id == a.c.consumer_id)
        .join(rc, rc.c.id == a.c.resource_class_id)
        .where(a.c.reservation_id.is_not(None), c.c.project_id.in_(project_ids),
               rc.c.name.in_(classes))
        .group_by(c.c.project_id, rc.c.name))
    return {(pid, name): int(n) for pid, name, n in rows if n}


def names_in_use(conn: Connection, project_ids: Iterable[int]) -> set[str]:
    """Every class:/consumers: name with non-zero usage in these projects."""
    project_ids = list(set(project_ids))
    if not project_ids:
        return set()
    s, rc, ct = t.usage_summary, t.resource_classes, t.consumer_types
    mine = (s.c.project_id.in_(project_ids), s.c.amount != 0)
    names = {f"class:{n}" for n in conn.scalars(
        select(rc.c.name).distinct().select_from(s)
        .join(rc, rc.c.id == s.c.resource_class_id).where(*mine))
        if marker.reservation_uuid(n) is None}
    names |= {f"consumers:{n or UNKNOWN_CONSUMER_TYPE}" for n in conn.scalars(
        select(ct.c.name).distinct().select_from(s)
        .outerjoin(ct, ct.c.id == s.c.consumer_type_id)
        .where(*mine, s.c.resource_class_id == usage_summary.CONSUMERS))}
    return names
