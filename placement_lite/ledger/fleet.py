"""Read-only views of the whole ledger for operators: the fleet's capacity
per resource class, pages of providers, a provider's surroundings (its
tree with each member's usage), the consumers on a provider, pages of the
consumers a search matches.

Every function answers one section of a page (or one metrics scrape) in
one grouped query, whatever the number of providers: nothing here loops
over providers issuing a query each. Capacity is Placement's
`(total - reserved) * allocation_ratio`; a ratio that is not a finite
number counts as no capacity, as the claim check treats it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from sqlalchemy import case, func, literal, or_, select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.ledger.capacity import ratio_is_finite

# The histogram of free capacity: providers counted by the share of their
# capacity that is free, in tenths (0-10 %, ..., 90-100 %).
BUCKETS = 10
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


def _whole(value) -> float | int:
    value = float(value or 0)
    return int(value) if value.is_integer() else round(value, 4)


@dataclass(frozen=True)
class ClassSummary:
    resource_class: str
    providers: int
    capacity: float
    used: int
    # Per bucket of free share (see BUCKETS), how many providers.
    histogram: tuple = ()

    @property
    def free(self) -> float:
        return _whole(self.capacity - self.used)


def _capacity(inv):
    return case((ratio_is_finite(inv.c.allocation_ratio),
                 (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio),
                else_=literal(0.0))


def _provider_filter(aggregates: Sequence[str], traits: Sequence[str]):
    """Conditions on a provider id column: member of every aggregate and
    holder of every trait named (uuids and trait names)."""
    conds = []
    for agg_uuid in aggregates:
        rpa, agg = t.resource_provider_aggregates, t.placement_aggregates
        conds.append(lambda col, u=agg_uuid: col.in_(
            select(rpa.c.resource_provider_id)
            .join(agg, agg.c.id == rpa.c.aggregate_id).where(agg.c.uuid == u)))
    for trait in traits:
        rpt, tr = t.resource_provider_traits, t.traits
        conds.append(lambda col, n=trait: col.in_(
            select(rpt.c.resource_provider_id)
            .join(tr, tr.c.id == rpt.c.trait_id).where(tr.c.name == n)))
    return conds


def class_summaries(conn: Connection, aggregates: Sequence[str] = (),
                    traits: Sequence[str] = ()) -> list[ClassSummary]:
    """Per resource class: providers with inventory of it, capacity, used
    and the histogram of free share, over the providers that are in every
    aggregate and have every trait given.

    One grouped read of the inventory rows, each put in its bucket by
    its capacity and the `used` it carries (see db/tables.py)."""
    inv, rc = t.inventories, t.resource_classes
    cap = _capacity(inv)
    free = cap - inv.c.used
    # Compared without dividing: free * 10 against k * capacity.
    whens = [(or_(cap <= 0, free * BUCKETS < cap), 0)]
    whens += [(free * BUCKETS >= k * cap, k) for k in range(BUCKETS - 1, 0, -1)]
    rows_ = (select(inv.c.resource_class_id.label("rc"), cap.label("cap"),
                    inv.c.used.label("used"), case(*whens, else_=0).label("b")))
    for cond in _provider_filter(aggregates, traits):
        rows_ = rows_.where(cond(inv.c.resource_provider_id))
    bucketed = rows_.subquery("bucketed")
    grouped = (select(bucketed.c.rc, bucketed.c.b, func.count().label("n"),
                      func.sum(bucketed.c.cap).label("cap"),
                      func.sum(bucketed.c.used).label("used"))
               .group_by(bucketed.c.rc, bucketed.c.b)).subquery("grouped")
    rows = conn.execute(
        select(rc.c.name, grouped.c.b, grouped.c.n, grouped.c.cap, grouped.c.used)
        .select_from(grouped.join(rc, rc.c.id == grouped.c.rc)))
    found: dict[str, dict] = {}
    for r in rows:
        e = found.setdefault(r.name, {"n": 0, "cap": 0.0, "used": 0,
                                      "hist": [0] * BUCKETS})
        e["n"] += int(r.n)
        e["cap"] += float(r.cap or 0)
        e["used"] += int(r.used or 0)
        e["hist"][int(r.b)] += int(r.n)
    return [ClassSummary(name, e["n"], _whole(e["cap"]), e["used"], tuple(e["hist"]))
            for name, e in sorted(found.items())]


@dataclass(frozen=True)
class ProviderRow:
    id: int
    uuid: str
    name: str
    generation: int
    root_uuid: str
    parent_uuid: Optional[str]
    parent_name: Optional[str]
    # resource class -> (used, capacity), filled by a second query.
    usage: dict = field(default_factory=dict, compare=False)


def _contains(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, its wildcards taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%") \
        .replace("_", "\\_") + "%"


def _search(query, search: Optional[str]):
    rp = t.resource_providers
    if search:
        pattern = _contains(search)
        query = query.where(or_(rp.c.name.like(pattern, escape="\\"),
                                rp.c.uuid.like(pattern, escape="\\")))
    return query


def count_providers(conn: Connection, search: Optional[str] = None) -> int:
    rp = t.resource_providers
    return int(conn.scalar(_search(select(func.count()).select_from(rp), search)))


def provider_page(conn: Connection, search: Optional[str] = None,
                  offset: int = 0, limit: int = 50) -> list[ProviderRow]:
    """One page of providers by name, with the name or uuid containing
    `search`; each with its usage per class (a second query for the page)."""
    rp = t.resource_providers
    root, parent = rp.alias("root"), rp.alias("parent")
    query = (select(rp.c.id, rp.c.uuid, rp.c.name, rp.c.generation,
                    root.c.uuid.label("root_uuid"),
                    parent.c.uuid.label("parent_uuid"),
                    parent.c.name.label("parent_name"))
             .select_from(rp.join(root, root.c.id == rp.c.root_provider_id)
                          .outerjoin(parent, parent.c.id == rp.c.parent_provider_id))
             .order_by(rp.c.name).offset(offset).limit(limit))
    rows = [ProviderRow(r.id, r.uuid, r.name, r.generation, r.root_uuid,
                        r.parent_uuid, r.parent_name, {})
            for r in conn.execute(_search(query, search))]
    by_id = {r.id: r for r in rows}
    for (pid, cls), pair in inventory_usage(conn, by_id).items():
        by_id[pid].usage[cls] = pair
    return rows


def _usage(conn: Connection, which) -> dict[tuple[int, str], tuple[int, float]]:
    inv, rc = t.inventories, t.resource_classes
    rows = conn.execute(
        select(inv.c.resource_provider_id, rc.c.name, inv.c.used.label("used"),
               _capacity(inv).label("cap"))
        .join(rc, rc.c.id == inv.c.resource_class_id).where(which))
    return {(r.resource_provider_id, r.name): (int(r.used or 0), _whole(r.cap))
            for r in rows}


def inventory_usage(conn: Connection, provider_ids: Iterable[int]
                    ) -> dict[tuple[int, str], tuple[int, float]]:
    """(provider id, class name) -> (used, capacity), one query."""
    ids = sorted(set(provider_ids))
    if not ids:
        return {}
    return _usage(conn, t.inventories.c.resource_provider_id.in_(ids))


def tree_usage(conn: Connection, root_id: int) -> dict[int, dict[str, tuple]]:
    """provider id -> class name -> (used, capacity), for every provider
    of one tree: one query, whatever the tree's size."""
    rp = t.resource_providers
    members = select(rp.c.id).where(rp.c.root_provider_id == root_id)
    out: dict[int, dict[str, tuple]] = {}
    for (pid, cls), pair in _usage(
            conn, t.inventories.c.resource_provider_id.in_(members)).items():
        out.setdefault(pid, {})[cls] = pair
    return out


@dataclass(frozen=True)
class InventoryRow:
    resource_class: str
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    capacity: float
    used: int
    # The part of `used` drawn from reservations (ledger/draws.py).
    drawn: int = 0


def inventories(conn: Connection, provider_id: int) -> list[InventoryRow]:
    """A provider's inventories with what is used of each, one query."""
    inv, rc = t.inventories, t.resource_classes
    used = inv.c.used
    rows = conn.execute(
        select(rc.c.name, inv.c.total, inv.c.reserved, inv.c.min_unit,
               inv.c.max_unit, inv.c.step_size, inv.c.allocation_ratio,
               _capacity(inv).label("cap"), used.label("used"), inv.c.drawn)
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(inv.c.resource_provider_id == provider_id).order_by(rc.c.name))
    return [InventoryRow(r.name, r.total, r.reserved, r.min_unit, r.max_unit,
                         r.step_size, r.allocation_ratio, _whole(r.cap),
                         int(r.used or 0), int(r.drawn or 0)) for r in rows]


@dataclass(frozen=True)
class TreeNode:
    id: int
    uuid: str
    name: str
    parent_id: Optional[int]
    generation: int


def tree(conn: Connection, root_id: int) -> list[TreeNode]:
    """Every provider of one tree, parents before children, one query."""
    rp = t.resource_providers
    rows = conn.execute(
        select(rp.c.id, rp.c.uuid, rp.c.name, rp.c.parent_provider_id,
               rp.c.generation)
        .where(rp.c.root_provider_id == root_id).order_by(rp.c.id))
    nodes = [TreeNode(r.id, r.uuid, r.name, r.parent_provider_id, r.generation)
             for r in rows]
    by_parent: dict = {}
    for n in nodes:
        by_parent.setdefault(n.parent_id, []).append(n)
    ordered: list[TreeNode] = []

    def walk(parent_id):
        for child in sorted(by_parent.get(parent_id, ()), key=lambda n: n.name):
            ordered.append(child)
            walk(child.id)
    walk(None)
    return ordered


def traits(conn: Connection, provider_id: int) -> list[str]:
    rpt, tr = t.resource_provider_traits, t.traits
    return list(conn.scalars(
        select(tr.c.name).join(rpt, rpt.c.trait_id == tr.c.id)
        .where(rpt.c.resource_provider_id == provider_id).order_by(tr.c.name)))


def aggregates(conn: Connection, provider_id: int) -> list[str]:
    rpa, agg = t.resource_provider_aggregates, t.placement_aggregates
    return list(conn.scalars(
        select(agg.c.uuid).join(rpa, rpa.c.aggregate_id == agg.c.id)
        .where(rpa.c.resource_provider_id == provider_id).order_by(agg.c.uuid)))


@dataclass(frozen=True)
class SharingRow:
    uuid: str
    name: str
    aggregate: str


def sharing_providers(conn: Connection, root_id: int) -> list[SharingRow]:
    """Providers outside the tree that share their inventory with it: they
    have MISC_SHARES_VIA_AGGREGATE and an aggregate in common with a
    provider of the tree. One query."""
    rp, rpa, agg = (t.resource_providers, t.resource_provider_aggregates,
                    t.placement_aggregates)
    rpt, tr = t.resource_provider_traits, t.traits
    mine = rpa.alias("mine")
    member = rp.alias("member")
    rows = conn.execute(
        select(rp.c.uuid, rp.c.name, agg.c.uuid.label("agg")).distinct()
        .select_from(
            rp.join(rpa, rpa.c.resource_provider_id == rp.c.id)
            .join(agg, agg.c.id == rpa.c.aggregate_id)
            .join(mine, mine.c.aggregate_id == rpa.c.aggregate_id)
            .join(member, member.c.id == mine.c.resource_provider_id)
            .join(rpt, rpt.c.resource_provider_id == rp.c.id)
            .join(tr, tr.c.id == rpt.c.trait_id))
        .where(member.c.root_provider_id == root_id,
               rp.c.root_provider_id != root_id, tr.c.name == SHARING_TRAIT)
        .order_by(rp.c.name, agg.c.uuid))
    return [SharingRow(r.uuid, r.name, r.agg) for r in rows]


@dataclass(frozen=True)
class ConsumerOnProvider:
    uuid: str
    project: str
    user: str
    consumer_type: Optional[str]
    # class name -> used, on this provider
    resources: dict


def consumers_on(conn: Connection, provider_id: int, offset: int = 0,
                 limit: int = 50) -> tuple[int, list[ConsumerOnProvider]]:
    """How many consumers hold allocations on the provider, and one page of
    them (by uuid) with what each holds there: two queries."""
    a, c, rc = t.allocations, t.consumers, t.resource_classes
    total = int(conn.scalar(
        select(func.count(func.distinct(a.c.consumer_id)))
        .where(a.c.resource_provider_id == provider_id)))
    page = (select(a.c.consumer_id).distinct()
            .where(a.c.resource_provider_id == provider_id)
            .order_by(a.c.consumer_id).offset(offset).limit(limit)
            .subquery("page"))
    rows = conn.execute(
        select(c.c.uuid, t.projects.c.external_id.label("project"),
               t.users.c.external_id.label("user"),
               t.consumer_types.c.name.label("ctype"), rc.c.name.label("rc"),
               func.sum(a.c.used).label("used"))
        .select_from(
            a.join(page, page.c.consumer_id == a.c.consumer_id)
            .join(c, c.c.id == a.c.consumer_id)
            .join(t.projects, t.projects.c.id == c.c.project_id)
            .join(t.users, t.users.c.id == c.c.user_id)
            .outerjoin(t.consumer_types,
                       t.consumer_types.c.id == c.c.consumer_type_id)
            .join(rc, rc.c.id == a.c.resource_class_id))
        .where(a.c.resource_provider_id == provider_id)
        .group_by(c.c.uuid, t.projects.c.external_id, t.users.c.external_id,
                  t.consumer_types.c.name, rc.c.name)
        .order_by(c.c.uuid, rc.c.name))
    found: dict[str, ConsumerOnProvider] = {}
    for r in rows:
        entry = found.get(r.uuid)
        if entry is None:
            entry = found[r.uuid] = ConsumerOnProvider(
                r.uuid, r.project, r.user, r.ctype, {})
        entry.resources[r.rc] = int(r.used or 0)
    return total, list(found.values())


@dataclass(frozen=True)
class AllocationRow:
    provider_uuid: str
    provider_name: str
    resource_class: str
    used: int


def consumer_allocations(conn: Connection, consumer_id: int) -> list[AllocationRow]:
    a, rp, rc = t.allocations, t.resource_providers, t.resource_classes
    rows = conn.execute(
        select(rp.c.uuid, rp.c.name, rc.c.name.label("rc"), a.c.used)
        .select_from(a.join(rp, rp.c.id == a.c.resource_provider_id)
                     .join(rc, rc.c.id == a.c.resource_class_id))
        .where(a.c.consumer_id == consumer_id).order_by(rp.c.name, rc.c.name))
    return [AllocationRow(r.uuid, r.name, r.rc, int(r.used)) for r in rows]


@dataclass(frozen=True)
class ConsumerSearch:
    """What the console's consumer search matches, each part optional: a
    piece of the uuid (any case, anywhere in it) and the exact project
    and user ids."""
    uuid_part: str = ""
    project: str = ""
    user: str = ""


@dataclass(frozen=True)
class ConsumerRow:
    uuid: str
    project: str
    user: str
    consumer_type: Optional[str]
    generation: int


def _consumers_matching(query, search: ConsumerSearch):
    c = t.consumers
    if search.uuid_part:
        query = query.where(func.lower(c.c.uuid).like(
            _contains(search.uuid_part.lower()), escape="\\"))
    # By id through the owner's row: the consumers' (project, user, uuid)
    # index answers a project's consumers in uuid order.
    for part, table, column in ((search.project, t.projects, c.c.project_id),
                                (search.user, t.users, c.c.user_id)):
        if part:
            query = query.where(column == select(table.c.id).where(
                table.c.external_id == part).scalar_subquery())
    return query


def count_consumers(conn: Connection, search: ConsumerSearch) -> int:
    query = select(func.count()).select_from(t.consumers)
    return int(conn.scalar(_consumers_matching(query, search)))


def consumer_page(conn: Connection, search: ConsumerSearch, offset: int = 0,
                  limit: int = 50) -> list[ConsumerRow]:
    """One page of the consumers `search` matches, by uuid: one query."""
    c = t.consumers
    query = (select(c.c.uuid, t.projects.c.external_id.label("project"),
                    t.users.c.external_id.label("user"),
                    t.consumer_types.c.name.label("ctype"), c.c.generation)
             .select_from(
                 c.join(t.projects, t.projects.c.id == c.c.project_id)
                 .join(t.users, t.users.c.id == c.c.user_id)
                 .outerjoin(t.consumer_types,
                            t.consumer_types.c.id == c.c.consumer_type_id))
             .order_by(c.c.uuid).offset(offset).limit(limit))
    return [ConsumerRow(r.uuid, r.project, r.user, r.ctype, r.generation)
            for r in conn.execute(_consumers_matching(query, search))]
