"""Writing an import's Plan into the target, inside the caller's
transaction: what counts as a target that already holds a ledger, what
`--force` deletes first, and the rows themselves, in chunks."""
from __future__ import annotations

from typing import Iterable

import os_traits
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.engine import Connection

from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.db.import_plan import Plan

_CHUNK = 1000


# What makes a target "non-empty": rows the import would write beside.
def target_ledger_counts(conn: Connection) -> dict:
    standard_traits = set(os_traits.get_traits())
    counts = {
        "resource_providers": conn.scalar(select(func.count()).select_from(t.resource_providers)),
        "placement_aggregates": conn.scalar(select(func.count()).select_from(t.placement_aggregates)),
        "consumers": conn.scalar(select(func.count()).select_from(t.consumers)),
        "allocations": conn.scalar(select(func.count()).select_from(t.allocations)),
        "custom resource classes": conn.scalar(
            select(func.count()).select_from(t.resource_classes)
            .where(t.resource_classes.c.id >= t.CUSTOM_CLASS_MIN_ID)),
        "custom traits": sum(1 for name in conn.scalars(select(t.traits.c.name))
                             if name not in standard_traits),
    }
    return {k: int(v) for k, v in counts.items()}


def clear(conn: Connection) -> None:
    """Delete the ledger `--force` replaces (see importer's docstring)."""
    standard_traits = set(os_traits.get_traits())
    for table in (t.allocations, t.consumers, t.inventories,
                  t.resource_provider_traits, t.resource_provider_aggregates,
                  t.placement_aggregates):
        conn.execute(delete(table))
    # Children before parents: the self references must never dangle.
    rp = t.resource_providers
    conn.execute(update(rp).values(parent_provider_id=None, root_provider_id=None))
    conn.execute(delete(rp))
    conn.execute(delete(t.resource_classes)
                 .where(t.resource_classes.c.id >= t.CUSTOM_CLASS_MIN_ID))
    custom = [name for name in conn.scalars(select(t.traits.c.name))
              if name not in standard_traits]
    for start in range(0, len(custom), _CHUNK):
        conn.execute(delete(t.traits).where(
            t.traits.c.name.in_(custom[start:start + _CHUNK])))


def _insert(conn: Connection, table, rows: list) -> None:
    for start in range(0, len(rows), _CHUNK):
        conn.execute(insert(table), rows[start:start + _CHUNK])


def _ids_by_name(conn: Connection, table, column) -> dict:
    return dict(conn.execute(select(column, table.c.id)).all())


def _named(conn: Connection, table, column, wanted: list) -> dict:
    """name -> id in the target, creating the names it lacks."""
    have = _ids_by_name(conn, table, column)
    missing = [row for row in wanted if row[column.key] not in have]
    _insert(conn, table, missing)
    return _ids_by_name(conn, table, column) if missing else have


def _new_classes(planned: list, have: dict) -> list:
    """Rows for the planned classes the target lacks, each under its
    Placement id unless that id is taken, or is below the custom range for
    a CUSTOM_ name: then under the next free id."""
    taken = set(have.values())
    # (Markers' ids, from MARKER_CLASS_MIN_ID up, are not the custom range.)
    next_id = max([t.CUSTOM_CLASS_MIN_ID - 1,
                   *(i for i in taken if i < t.MARKER_CLASS_MIN_ID)]) + 1
    rows = []
    for entry in planned:
        if entry["name"] in have:
            continue
        wanted = entry["source_id"]
        if wanted in taken or (entry["name"].startswith("CUSTOM_")
                               and wanted < t.CUSTOM_CLASS_MIN_ID):
            wanted = next_id
        taken.add(wanted)
        next_id = max(next_id, wanted + 1)
        rows.append({"id": wanted, "name": entry["name"],
                     "created_at": entry["created_at"],
                     "updated_at": entry["updated_at"]})
    return rows


def write(conn: Connection, out: Plan) -> dict:
    """Write the plan; return the rows written per table."""
    # Every provider's facts may change (and --force deleted the old
    # ones): each process reloads all of them after the commit.
    facts_log.reset(conn)
    rc = t.resource_classes
    new_classes = _new_classes(out.classes, _ids_by_name(conn, rc, rc.c.name))
    _insert(conn, rc, new_classes)
    class_ids = _ids_by_name(conn, rc, rc.c.name)
    trait_ids = _named(conn, t.traits, t.traits.c.name, out.traits)
    project_ids = _named(conn, t.projects, t.projects.c.external_id, out.projects)
    user_ids = _named(conn, t.users, t.users.c.external_id, out.users)
    type_ids = _named(conn, t.consumer_types, t.consumer_types.c.name, out.consumer_types)

    rp = t.resource_providers
    _insert(conn, rp, out.providers)
    conn.execute(update(rp).where(rp.c.root_provider_id.is_(None))
                 .values(root_provider_id=rp.c.id))
    _insert(conn, t.inventories, [
        {**{k: v for k, v in row.items() if k != "class_name"},
         "resource_class_id": class_ids[row["class_name"]]}
        for row in out.inventories])
    _insert(conn, t.resource_provider_traits, [
        {"resource_provider_id": row["resource_provider_id"],
         "trait_id": trait_ids[row["trait_name"]], "created_at": row["created_at"]}
        for row in out.provider_traits])
    _insert(conn, t.placement_aggregates, [
        {"id": row["id"], "uuid": row["uuid"], "created_at": row["created_at"]}
        for row in out.aggregates])
    _insert(conn, t.resource_provider_aggregates, [
        {"resource_provider_id": row["resource_provider_id"],
         "aggregate_id": row["aggregate_id"], "created_at": row["created_at"]}
        for row in out.provider_aggregates])
    _insert(conn, t.consumers, [
        {"id": row["id"], "uuid": row["uuid"],
         "project_id": project_ids[row["project"]], "user_id": user_ids[row["user"]],
         "consumer_type_id": (None if row["consumer_type"] is None
                              else type_ids[row["consumer_type"]]),
         "generation": row["generation"], "created_at": row["created_at"],
         "updated_at": row["updated_at"]}
        for row in out.consumers])
    _insert(conn, t.allocations, [
        {**{k: v for k, v in row.items() if k != "class_name"},
         "resource_class_id": class_ids[row["class_name"]]}
        for row in out.allocations])
    usage_summary.rebuild(conn)
    if conn.dialect.name == "postgresql":
        _advance_sequences(conn)
    # What was written is what was planned, but for the classes the target
    # already had.
    return {**planned_counts(out), "resource_classes": len(new_classes)}


def _advance_sequences(conn: Connection) -> None:
    """Rows written with their own ids leave PostgreSQL's sequences behind;
    without this the next provider created through the API would collide."""
    for table in (t.resource_providers, t.inventories, t.placement_aggregates,
                  t.consumers, t.allocations):
        top = conn.scalar(select(func.max(table.c.id)))
        if top is not None:
            conn.execute(text("SELECT setval(pg_get_serial_sequence(:t, 'id'), :v)"),
                         {"t": table.name, "v": top})


def planned_counts(out: Plan, classes_known: Iterable[str] = ()) -> dict:
    """Rows per target table the plan writes, leaving out the classes
    already `classes_known` to the target (what a dry run reports)."""
    known = set(classes_known)
    return {
        "resource_classes": sum(1 for c in out.classes if c["name"] not in known),
        "traits": len(out.traits),
        "resource_providers": len(out.providers),
        "inventories": len(out.inventories),
        "resource_provider_traits": len(out.provider_traits),
        "placement_aggregates": len(out.aggregates),
        "resource_provider_aggregates": len(out.provider_aggregates),
        "projects": len(out.projects),
        "users": len(out.users),
        "consumer_types": len(out.consumer_types),
        "consumers": len(out.consumers),
        "allocations": len(out.allocations),
    }
