"""Provider summaries for a set of candidates, in three set-based queries.

Nested-aware requests (1.29+) summarise every provider of every tree a
candidate allocates from (so a caller sees the whole tree, including
providers without inventory); older ones only the providers allocated
from. Capacity is (total - reserved) * allocation_ratio, used the sum of
current allocations.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple, Optional, Union

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from placement_lite.candidates.engine import Result
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.reader import selecting
from placement_lite.db import tables as t
from placement_lite.ledger import capacity

if TYPE_CHECKING:
    from placement_lite.candidates.flow import Flow


class Summary(NamedTuple):
    uuid: str
    resources: list  # of (class name, capacity, used), by class id
    traits: Optional[list]  # names by trait id; None when not wanted
    parent_uuid: Optional[str]
    root_uuid: Optional[str]  # None when the tree is not wanted


@lru_cache(maxsize=64)
def _statements(kind: str, by_root: bool, classes: Optional[tuple] = None):
    """(by range, by IN list) statements of one kind, selecting providers
    by id or (for "providers") by root id. Built once per process:
    building them cost as much as running them on answers of a few
    hundred providers."""
    rp = t.resource_providers
    column = rp.c.root_provider_id if by_root else rp.c.id
    if kind == "providers":
        query = select(rp.c.id, rp.c.uuid, rp.c.parent_provider_id,
                       rp.c.root_provider_id)
    elif kind == "uuids":
        query = select(rp.c.id, rp.c.uuid)
    elif kind == "inventory":
        inv = t.inventories
        rc = t.resource_classes
        # In the order of the (provider, class) index, so the database
        # sorts nothing and each provider's rows come by class id.
        query = (select(inv.c.resource_provider_id, rc.c.name, inv.c.total,
                        inv.c.reserved, inv.c.allocation_ratio, inv.c.used,
                        inv.c.resource_class_id)
                 .select_from(inv.join(rc, rc.c.id == inv.c.resource_class_id))
                 .order_by(inv.c.resource_provider_id, inv.c.resource_class_id))
        column = inv.c.resource_provider_id
        if classes is not None:
            query = query.where(rc.c.name.in_(classes))
    else:
        rpt = t.resource_provider_traits
        tr = t.traits
        query = (select(rpt.c.resource_provider_id, tr.c.name, rpt.c.trait_id)
                 .select_from(rpt.join(tr, tr.c.id == rpt.c.trait_id)))
        column = rpt.c.resource_provider_id
    return (query.where(column.between(bindparam("lo"), bindparam("hi"))),
            query.where(column.in_(bindparam("ids", expanding=True))))


def summarize(conn: Connection, result: Union[Result, "Flow"], whole_trees: bool,
              classes: Optional[set] = None, with_traits: bool = True,
              with_tree: bool = True, overlay: Optional[Overlay] = None) -> list:
    """The summaries of the providers the candidates allocate from (or of
    their whole trees), ordered by provider id.

    `classes` (names) limits the resources shown; None shows every class.
    `result`: an engine.Result, or a flow.Flow whose candidates are done.
    `overlay`: extra `used` (overlay.py), shown in `used`.
    """
    # Read from SQL, as the SQL reader reads: the extras above 0 (overlay.py).
    taking = overlay.taking() if overlay is not None else None
    extra = taking.extra if taking is not None else {}
    used = result.allocating()
    if not used:
        return []
    if whole_trees:
        keys = {result.roots[p] for p in used}
    else:
        keys = used
    key_index = 3 if whole_trees else 0
    # A provider the search found alone in its tree is its whole tree, and
    # the search read its uuid already.
    rows = {pid: (pid, result.uuids[pid], None, pid)
            for pid in keys if pid in result.alone}
    for stmt, params in selecting(_statements("providers", whole_trees),
                                   keys.difference(rows)):
        for row in conn.execute(stmt, params).all():
            if row[key_index] in keys:
                rows[row[0]] = row
    uuid_of = {pid: row[1] for pid, row in rows.items()}
    missing = {row[2] for row in rows.values() if row[2] not in uuid_of} | {
        row[3] for row in rows.values() if row[3] not in uuid_of}
    missing.discard(None)
    for stmt, params in selecting(_statements("uuids", False), missing):
        uuid_of.update(conn.execute(stmt, params).all())

    resources: dict = {pid: [] for pid in rows}
    # Inventory and traits by the ids of the providers summarised (read
    # above, whole trees included): a range of ids where they are dense,
    # and no join to find a tree's members again.
    statements = _statements("inventory", False,
                             None if classes is None else tuple(sorted(classes)))
    for stmt, params in selecting(statements, rows):
        for pid, name, total, reserved, ratio, usage, rc in conn.execute(
                stmt, params).all():
            found = resources.get(pid)
            if found is not None:
                found.append((name, int(capacity.capacity_from(
                                  total, reserved, ratio)),
                              int(usage or 0) + extra.get((pid, rc), 0)))

    traits: dict = {}
    if with_traits:
        by_id: dict = {pid: [] for pid in rows}
        for stmt, params in selecting(_statements("traits", False), rows):
            for pid, name, trait_id in conn.execute(stmt, params).all():
                found = by_id.get(pid)
                if found is not None:
                    found.append((trait_id, name))
        # Placement's order: as the traits were created (by id), which
        # puts standard traits before custom ones added later.
        traits = {pid: [name for _id, name in sorted(found)]
                  for pid, found in by_id.items()}
    out = []
    for pid in sorted(rows):
        row = rows[pid]
        out.append(Summary(
            row[1], resources[pid], traits.get(pid) if with_traits else None,
            uuid_of.get(row[2]) if with_tree else None,
            uuid_of[row[3]] if with_tree else None))
    return out
