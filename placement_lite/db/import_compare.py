"""Comparing an imported ledger with the Placement database it came from,
as stored ledgers keyed by public names (uuids, class and trait names), so
two databases that number their rows differently still compare equal."""
from __future__ import annotations

import os_resource_classes
import os_traits
from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.db.import_plan import Plan, plan
from placement_lite.db.import_source import read_placement


def _planned_ledger(out: Plan) -> dict:
    """The plan as sets keyed by public names (uuids, class and trait names)."""
    uuid_of = {p["id"]: p["uuid"] for p in out.providers}
    root_of = {p["id"]: p["root_provider_id"] or p["id"] for p in out.providers}
    agg_of = {a["id"]: a["uuid"] for a in out.aggregates}
    consumer_of = {c["id"]: c["uuid"] for c in out.consumers}
    return {
        "resource providers": {
            p["uuid"]: (p["name"], p["generation"],
                        uuid_of.get(p["parent_provider_id"]), uuid_of[root_of[p["id"]]])
            for p in out.providers},
        "inventories": {
            (uuid_of[i["resource_provider_id"]], i["class_name"]):
            (i["total"], i["reserved"], i["min_unit"], i["max_unit"], i["step_size"],
             float(i["allocation_ratio"]))
            for i in out.inventories},
        "provider traits": {(uuid_of[r["resource_provider_id"]], r["trait_name"]): True
                            for r in out.provider_traits},
        "provider aggregates": {(uuid_of[r["resource_provider_id"]],
                                 agg_of[r["aggregate_id"]]): True
                                for r in out.provider_aggregates},
        "consumers": {c["uuid"]: (c["project"], c["user"], c["consumer_type"],
                                  c["generation"]) for c in out.consumers},
        "allocations": {(consumer_of[a["consumer_id"]],
                         uuid_of[a["resource_provider_id"]], a["class_name"]): a["used"]
                        for a in out.allocations},
        "custom resource classes": {c["name"]: True for c in out.classes},
        "custom traits": {name["name"]: True for name in out.traits},
    }


def _stored_ledger(conn: Connection) -> dict:
    """What the target holds, in the same form as _planned_ledger."""
    rp, parent, root = (t.resource_providers, t.resource_providers.alias("parent"),
                        t.resource_providers.alias("root"))
    rc, tr, c = t.resource_classes, t.traits, t.consumers
    standard_traits = set(os_traits.get_traits())
    standard_classes = set(os_resource_classes.STANDARDS)
    providers = conn.execute(
        select(rp.c.uuid, rp.c.name, rp.c.generation, parent.c.uuid, root.c.uuid)
        .select_from(rp)
        .outerjoin(parent, parent.c.id == rp.c.parent_provider_id)
        .outerjoin(root, root.c.id == rp.c.root_provider_id))
    inventories = conn.execute(
        select(rp.c.uuid, rc.c.name, t.inventories.c.total, t.inventories.c.reserved,
               t.inventories.c.min_unit, t.inventories.c.max_unit,
               t.inventories.c.step_size, t.inventories.c.allocation_ratio)
        .select_from(t.inventories)
        .join(rp, rp.c.id == t.inventories.c.resource_provider_id)
        .join(rc, rc.c.id == t.inventories.c.resource_class_id))
    traits = conn.execute(
        select(rp.c.uuid, tr.c.name)
        .select_from(t.resource_provider_traits)
        .join(rp, rp.c.id == t.resource_provider_traits.c.resource_provider_id)
        .join(tr, tr.c.id == t.resource_provider_traits.c.trait_id))
    aggs = conn.execute(
        select(rp.c.uuid, t.placement_aggregates.c.uuid)
        .select_from(t.resource_provider_aggregates)
        .join(rp, rp.c.id == t.resource_provider_aggregates.c.resource_provider_id)
        .join(t.placement_aggregates,
              t.placement_aggregates.c.id == t.resource_provider_aggregates.c.aggregate_id))
    consumers = conn.execute(
        select(c.c.uuid, t.projects.c.external_id, t.users.c.external_id,
               t.consumer_types.c.name, c.c.generation)
        .select_from(c)
        .join(t.projects, t.projects.c.id == c.c.project_id)
        .join(t.users, t.users.c.id == c.c.user_id)
        .outerjoin(t.consumer_types, t.consumer_types.c.id == c.c.consumer_type_id))
    allocations = conn.execute(
        select(c.c.uuid, rp.c.uuid, rc.c.name, t.allocations.c.used)
        .select_from(t.allocations)
        .join(c, c.c.id == t.allocations.c.consumer_id)
        .join(rp, rp.c.id == t.allocations.c.resource_provider_id)
        .join(rc, rc.c.id == t.allocations.c.resource_class_id))
    return {
        "resource providers": {r[0]: tuple(r[1:]) for r in providers},
        "inventories": {(r[0], r[1]): (*r[2:7], float(r[7])) for r in inventories},
        "provider traits": {(r[0], r[1]): True for r in traits},
        "provider aggregates": {(r[0], r[1]): True for r in aggs},
        "consumers": {r[0]: tuple(r[1:]) for r in consumers},
        "allocations": {(r[0], r[1], r[2]): r[3] for r in allocations},
        "custom resource classes": {
            name: True for name in conn.scalars(select(rc.c.name))
            if name not in standard_classes},
        "custom traits": {name: True for name in conn.scalars(select(tr.c.name))
                          if name not in standard_traits},
    }


def compare(source_url: str, target) -> tuple[dict, list]:
    """Compare Placement's database with the Database `target`, as stored
    ledgers: ({kind: rows compared}, [one line per difference]). Rows the
    import could not map are left out of Placement's side, as the import
    leaves them out (its summary lists them)."""
    _revision_found, rows = read_placement(source_url)
    theirs = _planned_ledger(plan(rows))
    with target.read() as conn:
        ours = _stored_ledger(conn)
        # The sums GET /usages answers from must be those of the rows.
        drift = usage_summary.drift(conn)
    counts, differences = {}, []
    for kind, expected in theirs.items():
        found = ours[kind]
        counts[kind] = len(expected)
        for key in sorted(set(expected) | set(found), key=repr):
            if key not in found:
                differences.append(f"{kind}: {_show_key(key)} is in Placement only")
            elif key not in expected:
                differences.append(f"{kind}: {_show_key(key)} is in placement-lite only")
            elif expected[key] != found[key]:
                differences.append(f"{kind}: {_show_key(key)}: Placement has "
                                   f"{expected[key]!r}, placement-lite has {found[key]!r}")
    return counts, differences + drift


def _show_key(key) -> str:
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)
