"""Project usage kept summed (the usage_summary table), in step with the
allocations table.

Every writer of allocations, or of a consumer's owner, collects what each
consumer it touches held before and holds after, as Deltas, and applies
them with `apply` in the same transaction as the write: one upsert that
adds each delta to its row (`amount = amount + delta`), rows sorted by
key. Adding is exact whatever other writers do meanwhile: each row
update is atomic under the row's lock, so no increment is lost, and the
sorted order means two writers never wait on each other's rows in a
cycle. An allocation write takes them after its consumer, provider and
inventory rows (a reshape then rewrites the inventory of providers it
already holds), and holds them only to its commit.

A consumer counts towards its owner's consumer count while it holds at
least one allocation row, which is what GET /usages (1.38) counts.

`rebuild` recomputes every row from the allocations (an import, a bulk
load); `recomputed` and `drift` are the checks. Both also cover the other
sum kept beside the allocations, each inventory row's `used` (moved by
ledger/capacity.add_usage), so a writer working around the ledger has one
function to call and one check to pass.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Optional

from sqlalchemy import (
    case, delete, func, insert, literal_column, select, union_all, update)
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.db import upsert

# Key values that are not rows (see db/tables.py).
NO_TYPE = 0
CONSUMERS = -1
SHARDS = 16

# (project row id, user row id, consumer type row id or None)
Owner = tuple[int, int, Optional[int]]
# (project_id, user_id, consumer_type_id, resource_class_id, shard): the
# table's primary key, in its column order.
Key = tuple[int, int, int, int, int]
_KEY = ("project_id", "user_id", "consumer_type_id", "resource_class_id", "shard")


class Deltas:
    """What one write changes in the summary, summed per row."""

    def __init__(self) -> None:
        self.amounts: dict[Key, int] = defaultdict(int)

    def holding(self, owner: Owner, consumer_id: int,
                by_class: Mapping[int, int], sign: int) -> None:
        """Add (sign 1) or take away (sign -1) a consumer holding
        `by_class` ({class id: used}) under `owner`. A consumer holding
        nothing is not counted."""
        if not by_class:
            return
        project, user, ctype = owner
        kind = NO_TYPE if ctype is None else ctype
        shard = consumer_id % SHARDS
        self.amounts[(project, user, kind, CONSUMERS, shard)] += sign
        for rc, used in by_class.items():
            self.amounts[(project, user, kind, rc, shard)] += sign * used

    def rows(self) -> list[dict]:
        return [dict(zip(_KEY, key), amount=n)
                for key, n in sorted(self.amounts.items()) if n]


def apply(conn: Connection, deltas: Deltas) -> None:
    upsert.insert_or_add(conn, t.usage_summary, deltas.rows(), add=["amount"])


def _from_allocations():
    """SELECT of every summary row, computed from the allocations (the
    same as migration 0005's fill)."""
    c, a = t.consumers, t.allocations
    # Constants written into the SQL: PostgreSQL matches a grouped
    # expression to its GROUP BY only when no bound parameter differs.
    kind = func.coalesce(c.c.consumer_type_id, literal_column(str(NO_TYPE)))
    shard = c.c.id % literal_column(str(SHARDS))
    owner = (c.c.project_id, c.c.user_id, kind)
    sums = (select(*owner, a.c.resource_class_id, shard, func.sum(a.c.used))
            .select_from(c).join(a, a.c.consumer_id == c.c.id)
            .group_by(*owner, a.c.resource_class_id, shard))
    counts = (select(*owner, literal_column(str(CONSUMERS)), shard, func.count())
              .where(select(a.c.id).where(a.c.consumer_id == c.c.id).exists())
              .group_by(*owner, shard))
    return union_all(sums, counts)


def rebuild(conn: Connection) -> None:
    """Recompute the whole summary from the allocations. For writes that
    bypass the ledger (an import, a bulk load) while no other writer
    runs: a writer committing meanwhile could be counted twice or not
    at all."""
    s = t.usage_summary
    conn.execute(delete(s))
    conn.execute(insert(s).from_select([*_KEY, "amount"], _from_allocations()))
    # One grouped pass over the allocations joined to the inventories
    # (UPDATE ... FROM): a subquery per inventory row is what MariaDB
    # planned as a scan of every allocation per row right after a bulk
    # load, whose statistics it had not caught up with (minutes at
    # 100,000 allocations).
    inv = t.inventories
    sums = _held_by_key()
    conn.execute(update(inv).values(used=0, drawn=0))
    conn.execute(update(inv).values(used=sums.c.used, drawn=sums.c.drawn).where(
        inv.c.resource_provider_id == sums.c.rp, inv.c.resource_class_id == sums.c.rc))


def _held_by_key():
    """Per (provider, class) with allocations: what they hold (`used`),
    and of it what is drawn from reservations (`drawn`); one grouped pass
    over the allocations, as a subquery."""
    a = t.allocations
    return (select(a.c.resource_provider_id.label("rp"),
                   a.c.resource_class_id.label("rc"),
                   func.sum(a.c.used).label("used"),
                   func.sum(case((a.c.reservation_id.is_not(None), a.c.used),
                                 else_=0)).label("drawn"))
            .group_by(a.c.resource_provider_id, a.c.resource_class_id).subquery())


def recomputed(conn: Connection) -> dict[Key, int]:
    """The non-zero sums the allocations give now, by key."""
    rows = conn.execute(_from_allocations())
    return {tuple(row[:5]): int(row[5]) for row in rows if row[5]}


def stored(conn: Connection) -> dict[Key, int]:
    """The non-zero rows of the summary, by key."""
    s = t.usage_summary
    rows = conn.execute(select(*(s.c[k] for k in _KEY), s.c.amount)
                        .where(s.c.amount != 0))
    return {tuple(row[:5]): int(row[5]) for row in rows}


def drift(conn: Connection) -> list[str]:
    """One line per owner and class whose stored sum differs from the
    allocations' (empty when the summary is right), shards added up."""
    def folded(rows: dict[Key, int]) -> dict:
        out: dict = defaultdict(int)
        for (project, user, kind, rc, _shard), n in rows.items():
            out[(project, user, kind, rc)] += n
        return {k: n for k, n in out.items() if n}
    want, have = folded(recomputed(conn)), folded(stored(conn))
    lines = []
    for key in sorted(set(want) | set(have)):
        if want.get(key, 0) != have.get(key, 0):
            project, user, kind, rc = key
            what = "consumers" if rc == CONSUMERS else f"class id {rc}"
            lines.append(
                f"usage summary: project id {project}, user id {user}, consumer "
                f"type id {kind or 'none'}, {what}: the summary holds "
                f"{have.get(key, 0)}, the allocations give {want.get(key, 0)}")
    inv, a = t.inventories, t.allocations
    held = _held_by_key()
    for rp, rc, used, allocated, drawn, given in conn.execute(
            select(inv.c.resource_provider_id, inv.c.resource_class_id,
                   inv.c.used, func.coalesce(held.c.used, 0), inv.c.drawn,
                   func.coalesce(held.c.drawn, 0))
            .select_from(inv.outerjoin(held, (held.c.rp == inv.c.resource_provider_id)
                                       & (held.c.rc == inv.c.resource_class_id)))
            .order_by(inv.c.resource_provider_id, inv.c.resource_class_id)):
        if used != allocated:
            lines.append(
                f"inventory: provider id {rp}, class id {rc}: used holds "
                f"{used}, the allocations give {allocated}")
        if drawn != given:
            lines.append(
                f"inventory: provider id {rp}, class id {rc}: drawn holds "
                f"{drawn}, the drawn allocations give {given}")
    # Nothing can be allocated without an inventory row to keep its sum,
    # but a reservation's marker class (ledger/draws.py): its rows name
    # the reservation drawn from and take no room.
    marker = t.resource_classes.c.name.like("CUSTOM\\_RESERVATION\\_%", escape="\\")
    orphans = (select(a.c.resource_provider_id, a.c.resource_class_id).distinct()
               .where(~(a.c.reservation_id.is_not(None) & select(
                   t.resource_classes.c.id).where(
                   t.resource_classes.c.id == a.c.resource_class_id,
                   marker).exists()))
               .where(~select(inv.c.id).where(
                   inv.c.resource_provider_id == a.c.resource_provider_id,
                   inv.c.resource_class_id == a.c.resource_class_id).exists()))
    for rp, rc in conn.execute(orphans):
        lines.append(f"allocations: provider id {rp}, class id {rc}: "
                     "allocated without an inventory row")
    return lines
