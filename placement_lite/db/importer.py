"""Import an OpenStack Placement database into placement_lite's.

The source is read, never written: it is opened read-only where the backend
allows it (SQLite `mode=ro`, a read-only session on MariaDB/MySQL and
PostgreSQL) and read in one repeatable-read transaction, so the copy is one
consistent moment of it even if a writer was left running.

Placement's schema (its releases 2023.1 to 16.0 share it: alembic revision
422ece571366 or a082b8bb98d0) is close to ours, with these differences the
import resolves:
- an allocation names its consumer by uuid (`allocations.consumer_id`), ours
  by the consumer row's id;
- nothing ties inventories, allocations, memberships or consumers to the rows
  they point at (no foreign keys), so a drifted database can hold rows that
  point nowhere; those are reported, with why, and not imported;
- a provider's name and generation, and an aggregate's uuid, may be NULL.

Standard resource classes and traits are matched by name with the ones
placement_lite syncs from os-resource-classes and os-traits; custom ones are
created. Providers, inventories, aggregates, consumers and allocations keep
their ids, so lists come back in the order Placement gave them.

Everything is written in one transaction on the target: all of it, or
nothing. A target that already holds a ledger is refused unless `force` is
given, which means: in that same transaction, first delete every resource
provider (with its inventories, traits and aggregate memberships),
aggregate, consumer, allocation, custom resource class and custom trait
already in the target. Projects, users and consumer types are kept and
matched by name; quota data (limits, registered limits, services, regions,
endpoints, the enforcement setting, the lease ledger) is never touched.
"""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from typing import Iterable, Optional

import os_resource_classes
import os_traits
from sqlalchemy import (
    MetaData, Table, create_engine, delete, func, insert, inspect, select, text,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url

from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.db import usage_summary

# Placement's alembic revisions whose schema this reads (2023.1 .. 16.0).
KNOWN_REVISIONS = {
    "422ece571366": "consumer types (Xena and later)",
    "a082b8bb98d0": "redundant indexes dropped (2023.1 .. 16.0)",
}
SOURCE_TABLES = (
    "resource_classes", "traits", "resource_providers", "inventories",
    "resource_provider_traits", "placement_aggregates",
    "resource_provider_aggregates", "projects", "users", "consumer_types",
    "consumers", "allocations",
)
# The target tables the summary counts, in the order they are written.
TARGET_TABLES = (
    "resource_classes", "traits", "resource_providers", "inventories",
    "resource_provider_traits", "placement_aggregates",
    "resource_provider_aggregates", "projects", "users", "consumer_types",
    "consumers", "allocations",
)
_CHUNK = 1000


class ImportRefused(Exception):
    """The import cannot go ahead; the message says why and what to do."""


@dataclass
class Note:
    """A source row that was not imported (skipped) or was changed on the
    way in (adjusted), and why."""
    table: str
    row: str
    reason: str

    def __str__(self) -> str:
        return f"{self.table} {self.row}: {self.reason}"


@dataclass
class Report:
    source: str
    target: str
    revision: str
    dry_run: bool
    forced: bool
    read: dict = field(default_factory=dict)
    imported: dict = field(default_factory=dict)
    # Rows already in the target that `force` deleted, per table.
    cleared: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    adjusted: list = field(default_factory=list)

    def render(self) -> str:
        verb = "would import" if self.dry_run else "imported"
        lines = [f"source: {self.source} (OpenStack Placement schema {self.revision})",
                 f"target: {self.target}"]
        if self.cleared:
            lines.append(("would delete" if self.dry_run else "deleted")
                         + " what the target held first (--force): "
                         + ", ".join(f"{n} {k}" for k, n in self.cleared.items() if n))
        width = max(len(name) for name in TARGET_TABLES)
        lines.append(f"{'table':<{width}}  {'read':>8}  {verb:>12}  {'skipped':>8}")
        for name in TARGET_TABLES:
            read = self.read.get(name, 0)
            done = self.imported.get(name, 0)
            skipped = sum(1 for n in self.skipped if n.table == name)
            lines.append(f"{name:<{width}}  {read:>8}  {done:>12}  {skipped:>8}")
        if self.skipped:
            lines.append(f"not imported ({len(self.skipped)} rows):")
            lines.extend(f"  {note}" for note in self.skipped)
        if self.adjusted:
            lines.append(f"changed on the way in ({len(self.adjusted)} rows):")
            lines.extend(f"  {note}" for note in self.adjusted)
        lines.append("dry run: nothing was written" if self.dry_run
                     else "written in one transaction")
        return "\n".join(lines)


# Reading the source --------------------------------------------------------

def open_source(url: str) -> Engine:
    """An engine that can only read `url` (where the backend can say so)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = parsed.database
        if not path or path == ":memory:":
            raise ImportRefused(f"--from {url}: an in-memory SQLite database has "
                                "nothing to import; give the path of Placement's file")
        if not os.path.isfile(path):
            raise ImportRefused(f"--from {url}: no such file: {path}")
        ro = parsed.set(database=f"file:{os.path.abspath(path)}?mode=ro",
                        query={"uri": "true"})
        return create_engine(ro)
    kwargs: dict = {"isolation_level": "REPEATABLE READ"}
    if backend == "mysql":
        kwargs["connect_args"] = {"init_command": "SET SESSION TRANSACTION READ ONLY"}
        query = dict(parsed.query)
        query.setdefault("charset", "utf8mb4")
        parsed = parsed.set(query=query)
    elif backend == "postgresql":
        kwargs["connect_args"] = {"options": "-c default_transaction_read_only=on"}
    return create_engine(parsed, **kwargs)


def _revision(conn: Connection, names: set) -> str:
    if "alembic_version" not in names or "resource_providers" not in names:
        raise ImportRefused(
            "the source is not an OpenStack Placement database (it has no "
            "alembic_version or resource_providers table)")
    revisions = list(conn.scalars(text("SELECT version_num FROM alembic_version")))
    if len(revisions) != 1 or revisions[0] not in KNOWN_REVISIONS:
        shown = ", ".join(map(str, revisions)) or "none"
        raise ImportRefused(
            f"the source's schema revision is {shown}, not one of Placement's "
            f"2023.1 .. 16.0 ({', '.join(sorted(KNOWN_REVISIONS))}); run "
            "`placement-manage db sync` with Placement 2023.1 or later first")
    return revisions[0]


def read_placement(source_url: str) -> tuple[str, dict]:
    """read_source over a read-only connection to `source_url`, in one
    repeatable-read transaction."""
    engine = open_source(source_url)
    try:
        with engine.connect() as conn:
            with conn.begin():
                return read_source(conn)
    finally:
        engine.dispose()


def read_source(conn: Connection) -> tuple[str, dict]:
    """(revision, {table: [row mappings]}) for every table the import uses."""
    names = set(inspect(conn).get_table_names())
    revision = _revision(conn, names)
    missing = [name for name in SOURCE_TABLES if name not in names]
    if missing:
        raise ImportRefused(f"the source lacks Placement's table(s) {', '.join(missing)}")
    meta = MetaData()
    rows = {}
    for name in SOURCE_TABLES:
        table = Table(name, meta, autoload_with=conn)
        order = [c for c in table.primary_key.columns]
        rows[name] = [dict(r._mapping) for r in
                      conn.execute(select(table).order_by(*order))]
    return revision, rows


# Mapping (pure) -------------------------------------------------------------

@dataclass
class Plan:
    classes: list = field(default_factory=list)      # {id?, name, ts...}
    traits: list = field(default_factory=list)       # {name, ts...}
    providers: list = field(default_factory=list)    # parents before children
    inventories: list = field(default_factory=list)
    provider_traits: list = field(default_factory=list)
    aggregates: list = field(default_factory=list)
    provider_aggregates: list = field(default_factory=list)
    projects: list = field(default_factory=list)
    users: list = field(default_factory=list)
    consumer_types: list = field(default_factory=list)
    consumers: list = field(default_factory=list)
    allocations: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    adjusted: list = field(default_factory=list)


def _ts(row: dict, now: dt.datetime) -> dict:
    return {"created_at": row.get("created_at") or now,
            "updated_at": row.get("updated_at")}


def plan(rows: dict, now: Optional[dt.datetime] = None) -> Plan:
    """What to write, in target terms, and which rows cannot be mapped."""
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    out = Plan()
    skip, adjust = out.skipped.append, out.adjusted.append
    standard_classes = set(os_resource_classes.STANDARDS)
    standard_traits = set(os_traits.get_traits())

    class_name = {}
    for row in rows["resource_classes"]:
        name = row["name"]
        class_name[row["id"]] = name
        if name in standard_classes:
            continue  # synced into the target under the same name
        entry = {"name": name, "source_id": row["id"], **_ts(row, now)}
        if not name.startswith("CUSTOM_"):
            adjust(Note("resource_classes", f"id={row['id']} {name}",
                        "a standard class this placement-lite's os-resource-classes "
                        "does not know yet; imported under its Placement id"))
        out.classes.append(entry)

    trait_name = {}
    for row in rows["traits"]:
        trait_name[row["id"]] = row["name"]
        if row["name"] not in standard_traits:
            out.traits.append({"name": row["name"], **_ts(row, now)})

    # Providers: a tree's parents before its children; the root is found by
    # walking parents (the stored root_provider_id is only checked).
    by_id = {row["id"]: row for row in rows["resource_providers"]}
    roots, bad = {}, {}

    def root_of(pid, seen=()):
        if pid in roots or pid in bad:
            return roots.get(pid)
        row = by_id[pid]
        parent = row["parent_provider_id"]
        if parent is None:
            roots[pid] = pid
        elif parent in seen or parent == pid:
            bad[pid] = "its parents form a cycle"
        elif parent not in by_id:
            bad[pid] = f"its parent provider id={parent} does not exist"
        else:
            top = root_of(parent, seen + (pid,))
            if top is None:
                bad[pid] = f"its parent provider id={parent} was not imported"
            else:
                roots[pid] = top
        return roots.get(pid)

    depth = {}
    for pid in by_id:
        root_of(pid)
    for pid, row in by_id.items():
        if pid in bad:
            skip(Note("resource_providers", f"id={pid} uuid={row['uuid']}", bad[pid]))
            continue
        d, cur = 0, pid
        while by_id[cur]["parent_provider_id"] is not None:
            cur, d = by_id[cur]["parent_provider_id"], d + 1
        depth[pid] = d
    names_taken = {row["name"] for row in rows["resource_providers"] if row["name"]}
    for pid in sorted(depth, key=lambda p: (depth[p], p)):
        row = by_id[pid]
        label = f"id={pid} uuid={row['uuid']}"
        name = row["name"]
        if not name:
            name = row["uuid"] if row["uuid"] not in names_taken else f"provider-{row['uuid']}"
            adjust(Note("resource_providers", label,
                        f"name was empty; imported with the name {name}"))
        generation = row["generation"]
        if generation is None:
            generation = 0
            adjust(Note("resource_providers", label,
                        "generation was NULL; imported as 0"))
        if row["root_provider_id"] != roots[pid]:
            adjust(Note("resource_providers", label,
                        f"stored root id={row['root_provider_id']} is not the top "
                        f"of its parents (id={roots[pid]}); the top is used"))
        out.providers.append({
            "id": pid, "uuid": row["uuid"], "name": name, "generation": generation,
            "parent_provider_id": row["parent_provider_id"],
            "root_provider_id": None if roots[pid] == pid else roots[pid],
            **_ts(row, now)})
    imported_rps = set(depth)

    def kept(table: str, label: str, *problems):
        """The rows of the source's `table` that have none of `problems`
        (each a row -> reason or None); every other row is skipped with
        the first reason, named by `label` formatted with its columns."""
        for row in rows[table]:
            why = next(filter(None, (problem(row) for problem in problems)), None)
            if why:
                skip(Note(table, label.format_map(row), why))
            else:
                yield row

    def no_provider(row):
        rp_id = row["resource_provider_id"]
        if rp_id in imported_rps:
            return None
        if rp_id in by_id:
            return f"its resource provider id={rp_id} was not imported"
        return f"resource provider id={rp_id} does not exist"

    def no_class(row):
        if row["resource_class_id"] not in class_name:
            return f"resource class id={row['resource_class_id']} does not exist"

    def no_trait(row):
        if row["trait_id"] not in trait_name:
            return f"trait id={row['trait_id']} does not exist"

    inventory_keys = set()
    for row in kept("inventories", "id={id}", no_provider, no_class):
        inventory_keys.add((row["resource_provider_id"], row["resource_class_id"]))
        out.inventories.append({
            "id": row["id"], "resource_provider_id": row["resource_provider_id"],
            "class_name": class_name[row["resource_class_id"]],
            **{k: row[k] for k in ("total", "reserved", "min_unit", "max_unit",
                                   "step_size", "allocation_ratio")},
            **_ts(row, now)})

    for row in kept("resource_provider_traits",
                    "provider id={resource_provider_id} trait id={trait_id}",
                    no_provider, no_trait):
        out.provider_traits.append({
            "resource_provider_id": row["resource_provider_id"],
            "trait_name": trait_name[row["trait_id"]], **_ts(row, now)})

    aggregate_ids = set()
    for row in kept("placement_aggregates", "id={id}",
                    lambda row: None if row["uuid"] else "its uuid is NULL"):
        aggregate_ids.add(row["id"])
        out.aggregates.append({"id": row["id"], "uuid": row["uuid"], **_ts(row, now)})

    def no_aggregate(row):
        if row["aggregate_id"] not in aggregate_ids:
            return (f"aggregate id={row['aggregate_id']} was not imported "
                    "or does not exist")

    for row in kept("resource_provider_aggregates",
                    "provider id={resource_provider_id} aggregate id={aggregate_id}",
                    no_provider, no_aggregate):
        out.provider_aggregates.append({
            "resource_provider_id": row["resource_provider_id"],
            "aggregate_id": row["aggregate_id"], **_ts(row, now)})

    project_name = {r["id"]: r["external_id"] for r in rows["projects"]}
    user_name = {r["id"]: r["external_id"] for r in rows["users"]}
    type_name = {r["id"]: r["name"] for r in rows["consumer_types"]}
    out.projects = [{"external_id": r["external_id"], **_ts(r, now)} for r in rows["projects"]]
    out.users = [{"external_id": r["external_id"], **_ts(r, now)} for r in rows["users"]]
    out.consumer_types = [{"name": r["name"], **_ts(r, now)} for r in rows["consumer_types"]]

    allocs_by_consumer: dict = {}
    for row in rows["allocations"]:
        allocs_by_consumer.setdefault(row["consumer_id"], []).append(row)

    def consumer_problem(row):
        if row["project_id"] not in project_name:
            return f"project id={row['project_id']} does not exist"
        if row["user_id"] not in user_name:
            return f"user id={row['user_id']} does not exist"
        if row.get("consumer_type_id") is not None \
                and row["consumer_type_id"] not in type_name:
            return f"consumer type id={row['consumer_type_id']} does not exist"
        if row["uuid"] not in allocs_by_consumer:
            return ("it has no allocations (placement-lite keeps a consumer only "
                    "while it has some; its next write starts it afresh)")

    consumer_ids = {}
    for row in kept("consumers", "id={id} uuid={uuid}", consumer_problem):
        consumer_ids[row["uuid"]] = row["id"]
        type_id = row.get("consumer_type_id")
        out.consumers.append({
            "id": row["id"], "uuid": row["uuid"],
            "project": project_name[row["project_id"]],
            "user": user_name[row["user_id"]],
            "consumer_type": None if type_id is None else type_name[type_id],
            "generation": row["generation"], **_ts(row, now)})

    consumers_by_uuid = {r["uuid"] for r in rows["consumers"]}

    def allocation_problem(row):
        rc = row["resource_class_id"]
        if (row["resource_provider_id"], rc) not in inventory_keys:
            return (f"its provider has no {class_name[rc]} inventory "
                    "(an allocation against a class with no inventory)")
        if row["consumer_id"] not in consumer_ids:
            return ("its consumer was not imported"
                    if row["consumer_id"] in consumers_by_uuid
                    else "its consumer has no row in consumers (run Placement's "
                    "`placement-manage db online_data_migrations` first)")
        if row["used"] < 1:
            return f"used={row['used']} is not a positive amount"

    for row in kept("allocations",
                    "id={id} consumer={consumer_id} provider id={resource_provider_id}",
                    no_provider, no_class, allocation_problem):
        out.allocations.append({
            "id": row["id"], "resource_provider_id": row["resource_provider_id"],
            "consumer_id": consumer_ids[row["consumer_id"]],
            "class_name": class_name[row["resource_class_id"]],
            "used": row["used"], **_ts(row, now)})
    _drop_emptied_consumers(out)
    return out


def _drop_emptied_consumers(out: Plan) -> None:
    """A consumer whose every allocation was skipped would be left with none:
    skip it too, as placement-lite holds no consumer without allocations."""
    kept = {a["consumer_id"] for a in out.allocations}
    for consumer in [c for c in out.consumers if c["id"] not in kept]:
        out.consumers.remove(consumer)
        out.skipped.append(Note("consumers", f"id={consumer['id']} uuid={consumer['uuid']}",
                                "none of its allocations could be imported"))


# Writing the target ---------------------------------------------------------

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


def _clear(conn: Connection) -> None:
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


def write(conn: Connection, out: Plan) -> dict:
    """Write the plan; return the rows written per table."""
    # Every provider's facts may change (and --force deleted the old
    # ones): each process reloads all of them after the commit.
    facts_log.reset(conn)
    rc = t.resource_classes
    have_classes = _ids_by_name(conn, rc, rc.c.name)
    taken = set(have_classes.values())
    next_id = max([t.CUSTOM_CLASS_MIN_ID - 1, *taken]) + 1
    new_classes = []
    for entry in out.classes:
        if entry["name"] in have_classes:
            continue
        wanted = entry["source_id"]
        if wanted in taken or (entry["name"].startswith("CUSTOM_")
                               and wanted < t.CUSTOM_CLASS_MIN_ID):
            wanted = next_id
        taken.add(wanted)
        next_id = max(next_id, wanted + 1)
        new_classes.append({"id": wanted, "name": entry["name"],
                            "created_at": entry["created_at"],
                            "updated_at": entry["updated_at"]})
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
    return {**_planned_counts(out), "resource_classes": len(new_classes)}


def _advance_sequences(conn: Connection) -> None:
    """Rows written with their own ids leave PostgreSQL's sequences behind;
    without this the next provider created through the API would collide."""
    for table in (t.resource_providers, t.inventories, t.placement_aggregates,
                  t.consumers, t.allocations):
        top = conn.scalar(select(func.max(table.c.id)))
        if top is not None:
            conn.execute(text("SELECT setval(pg_get_serial_sequence(:t, 'id'), :v)"),
                         {"t": table.name, "v": top})


def _planned_counts(out: Plan, classes_known: Iterable[str] = ()) -> dict:
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


def run(source_url: str, target, dry_run: bool = False, force: bool = False) -> Report:
    """Read `source_url`, map it, and (unless dry_run) write it into the
    Database `target`, whose schema must be current. ImportRefused when the
    source is not a Placement database this understands, or the target
    already holds a ledger and force is not given."""
    revision, rows = read_placement(source_url)
    report = Report(
        source=make_url(source_url).render_as_string(hide_password=True),
        target=target.engine.url.render_as_string(hide_password=True),
        revision=revision, dry_run=dry_run, forced=force,
        read={name: len(rows[name]) for name in TARGET_TABLES})
    out = plan(rows)
    report.skipped, report.adjusted = out.skipped, out.adjusted

    def refuse_if_full(conn):
        found = {k: v for k, v in target_ledger_counts(conn).items() if v}
        if found and not force:
            raise ImportRefused(
                "the target already holds a ledger ("
                + ", ".join(f"{n} {k}" for k, n in found.items())
                + "); import into an empty database, or give --force to delete "
                "those rows first, in the same transaction as the import")
        return found

    if dry_run:
        with target.read() as conn:
            if inspect(conn).has_table("resource_providers"):
                report.cleared = refuse_if_full(conn)
                known = set(conn.scalars(select(t.resource_classes.c.name)))
            else:  # no schema yet: nothing in it, standard names once synced
                known = set(os_resource_classes.STANDARDS)
        report.imported = _planned_counts(out, () if report.cleared else known)
        return report
    with target.write() as conn:
        report.cleared = refuse_if_full(conn)
        if report.cleared:
            _clear(conn)
        report.imported = write(conn, out)
    return report


# Comparing ---------------------------------------------------------------------

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


__all__ = ["run", "plan", "read_source", "open_source", "compare", "Report", "Note",
           "ImportRefused", "KNOWN_REVISIONS"]
