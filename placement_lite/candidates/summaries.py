"""Provider summaries for a set of candidates, in three set-based queries.

Nested-aware requests (1.29+) summarise every provider of every tree a
candidate allocates from (so a caller sees the whole tree, including
providers without inventory); older ones only the providers allocated
from. Capacity is (total - reserved) * allocation_ratio, used the sum of
current allocations.
"""
from __future__ import annotations

from typing import Iterable, Optional

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite.candidates.engine import IN_CHUNK, Result
from placement_lite.candidates.filters import used_subquery
from placement_lite.db import tables as t


def _parts(ids: Iterable[int]):
    ids = sorted(set(ids))
    for i in range(0, len(ids), IN_CHUNK):
        yield ids[i:i + IN_CHUNK]


def _where(column, ids: Iterable[int]):
    """Conditions selecting `ids` in `column`: a range where the ids are
    dense (cheaper than a long IN list; the caller drops the extras), an
    IN list where they are sparse."""
    for part in _parts(ids):
        lo, hi = part[0], part[-1]
        if hi - lo < 2 * len(part):
            yield column.between(lo, hi)
        else:
            yield column.in_(part)


def summarize(conn: Connection, result: Result, whole_trees: bool,
              classes: Optional[set] = None, with_traits: bool = True,
              with_tree: bool = True) -> dict:
    """provider uuid -> its summary, in the response's shape:
    {"resources": {class: {"capacity", "used"}}, "traits": [...] (when
    with_traits), "parent_provider_uuid", "root_provider_uuid" (when
    with_tree)}, ordered by provider id.

    `classes` (names) limits the resources shown; None shows every class.
    """
    rp = t.resource_providers
    used = set()
    for cand in result.candidates:
        used.update(cand.allocations)
    if not used:
        return {}
    if whole_trees:
        column = rp.c.root_provider_id
        keys = {result.roots[p] for p in used}
    else:
        column = rp.c.id
        keys = used
    key_index = 0 if column is rp.c.id else 3
    rows = {}
    for cond in _where(column, keys):
        for row in conn.execute(select(
                rp.c.id, rp.c.uuid, rp.c.parent_provider_id,
                rp.c.root_provider_id).where(cond)).all():
            if row[key_index] in keys:
                rows[row[0]] = row
    uuid_of = {pid: row[1] for pid, row in rows.items()}
    missing = {row[2] for row in rows.values() if row[2] not in uuid_of} | {
        row[3] for row in rows.values() if row[3] not in uuid_of}
    missing.discard(None)
    for part in _parts(missing):
        uuid_of.update(conn.execute(
            select(rp.c.id, rp.c.uuid).where(rp.c.id.in_(part))).all())
    bodies = {}
    for pid in sorted(rows):
        body = {"resources": {}}
        if with_traits:
            body["traits"] = []
        if with_tree:
            row = rows[pid]
            body["parent_provider_uuid"] = uuid_of.get(row[2])
            body["root_provider_uuid"] = uuid_of[row[3]]
        bodies[pid] = body

    inv = t.inventories
    rc = t.resource_classes
    query = (select(inv.c.resource_provider_id, rc.c.name, inv.c.total,
                    inv.c.reserved, inv.c.allocation_ratio, used_subquery(inv))
             .select_from(inv.join(rc, rc.c.id == inv.c.resource_class_id)
                          .join(rp, rp.c.id == inv.c.resource_provider_id)))
    if classes is not None:
        query = query.where(rc.c.name.in_(sorted(classes)))
    for cond in _where(column, keys):
        for pid, name, total, reserved, ratio, usage in conn.execute(
                query.where(cond).order_by(inv.c.resource_class_id)).all():
            body = bodies.get(pid)
            if body is not None:
                body["resources"][name] = {
                    "capacity": int((total - reserved) * ratio),
                    "used": int(usage or 0)}

    if with_traits:
        rpt = t.resource_provider_traits
        tr = t.traits
        query = (select(rpt.c.resource_provider_id, tr.c.name)
                 .select_from(rpt.join(tr, tr.c.id == rpt.c.trait_id)
                              .join(rp, rp.c.id == rpt.c.resource_provider_id)))
        for cond in _where(column, keys):
            for pid, name in conn.execute(query.where(cond)).all():
                body = bodies.get(pid)
                if body is not None:
                    body["traits"].append(name)
        for body in bodies.values():
            body["traits"].sort()
    return {uuid_of[pid]: body for pid, body in bodies.items()}
