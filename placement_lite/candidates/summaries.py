"""Provider summaries for a set of candidates, in three set-based queries.

Nested-aware requests (1.29+) summarise every provider of every tree a
candidate allocates from (so a caller sees the whole tree, including
providers without inventory); older ones only the providers allocated
from. Capacity is (total - reserved) * allocation_ratio, used the sum of
current allocations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite.candidates.engine import IN_CHUNK, Result
from placement_lite.candidates.filters import used_subquery
from placement_lite.db import tables as t


@dataclass
class Summary:
    uuid: str
    parent_uuid: Optional[str]
    root_uuid: str
    resources: dict = field(default_factory=dict)  # class -> (capacity, used)
    traits: list = field(default_factory=list)


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
              classes: Optional[set] = None, with_traits: bool = True) -> dict:
    """provider id -> Summary, ordered by provider id.

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
        # Every tree's root is itself one of the rows.
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
    out = {}
    for pid in sorted(rows):
        row = rows[pid]
        out[pid] = Summary(row[1], uuid_of.get(row[2]), uuid_of[row[3]])

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
            if pid in out:
                out[pid].resources[name] = (
                    int((total - reserved) * ratio), int(usage or 0))

    if with_traits:
        rpt = t.resource_provider_traits
        tr = t.traits
        query = (select(rpt.c.resource_provider_id, tr.c.name)
                 .select_from(rpt.join(tr, tr.c.id == rpt.c.trait_id)
                              .join(rp, rp.c.id == rpt.c.resource_provider_id)))
        for cond in _where(column, keys):
            for pid, name in conn.execute(query.where(cond)).all():
                if pid in out:
                    out[pid].traits.append(name)
        for summary in out.values():
            summary.traits.sort()
    return out
