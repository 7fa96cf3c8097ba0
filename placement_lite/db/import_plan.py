"""Placement's rows in placement_lite's terms: what the import writes, and
which rows it cannot map (with why). No connection: the rows come in, the
Plan goes out, so a dry run and `compare` map exactly as the import does.

Each family of rows is mapped only after the rows it points at, so a row
whose provider, class, trait, aggregate or consumer was left out is left
out too, naming the one it lost.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Optional

import os_resource_classes
import os_traits

from placement_lite.db.import_report import Note


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


def plan(rows: dict, now: Optional[dt.datetime] = None) -> Plan:
    """What to write, in target terms, and which rows cannot be mapped."""
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    return _Planner(rows, now).plan()


def _ts(row: dict, now: dt.datetime) -> dict:
    return {"created_at": row.get("created_at") or now,
            "updated_at": row.get("updated_at")}


def _find_roots(by_id: dict) -> tuple[dict, dict]:
    """({provider id: its root's id}, {provider id: why it has none}).

    The root is found by walking parents; the stored root_provider_id is
    only checked against it later, as a drifted database may hold a wrong
    one."""
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

    for pid in by_id:
        root_of(pid)
    return roots, bad


class _Planner:
    """Maps one source's rows into one Plan. The names it learns on the way
    (class and trait names by id, which providers, aggregates and consumers
    made it in) are what the later families are checked against, so the
    steps in `plan` run in that order."""

    def __init__(self, rows: dict, now: dt.datetime):
        self.rows = rows
        self.now = now
        self.out = Plan()
        self.class_name: dict = {}
        self.trait_name: dict = {}
        self.by_id: dict = {}
        self.imported_rps: set = set()
        self.inventory_keys: set = set()
        self.aggregate_ids: set = set()
        self.consumer_ids: dict = {}

    def plan(self) -> Plan:
        self._classes()
        self._traits()
        self._providers()
        self._inventories()
        self._provider_traits()
        self._aggregates()
        self._consumers()
        self._allocations()
        _drop_emptied_consumers(self.out)
        return self.out

    def _skip(self, note: Note) -> None:
        self.out.skipped.append(note)

    def _adjust(self, note: Note) -> None:
        self.out.adjusted.append(note)

    def _kept(self, table: str, label: str, *problems):
        """The rows of the source's `table` that have none of `problems`
        (each a row -> reason or None); every other row is skipped with
        the first reason, named by `label` formatted with its columns."""
        for row in self.rows[table]:
            why = next(filter(None, (problem(row) for problem in problems)), None)
            if why:
                self._skip(Note(table, label.format_map(row), why))
            else:
                yield row

    # Names ------------------------------------------------------------------

    def _classes(self) -> None:
        standard = set(os_resource_classes.STANDARDS)
        for row in self.rows["resource_classes"]:
            name = row["name"]
            self.class_name[row["id"]] = name
            if name in standard:
                continue  # synced into the target under the same name
            entry = {"name": name, "source_id": row["id"], **_ts(row, self.now)}
            if not name.startswith("CUSTOM_"):
                self._adjust(Note(
                    "resource_classes", f"id={row['id']} {name}",
                    "a standard class this placement-lite's os-resource-classes "
                    "does not know yet; imported under its Placement id"))
            self.out.classes.append(entry)

    def _traits(self) -> None:
        standard = set(os_traits.get_traits())
        for row in self.rows["traits"]:
            self.trait_name[row["id"]] = row["name"]
            if row["name"] not in standard:
                self.out.traits.append({"name": row["name"], **_ts(row, self.now)})

    # Providers --------------------------------------------------------------

    def _providers(self) -> None:
        """A tree's parents before its children."""
        by_id = self.by_id = {row["id"]: row for row in self.rows["resource_providers"]}
        roots, bad = _find_roots(by_id)
        depth = {}
        for pid, row in by_id.items():
            if pid in bad:
                self._skip(Note("resource_providers", f"id={pid} uuid={row['uuid']}",
                                bad[pid]))
                continue
            d, cur = 0, pid
            while by_id[cur]["parent_provider_id"] is not None:
                cur, d = by_id[cur]["parent_provider_id"], d + 1
            depth[pid] = d
        names_taken = {row["name"] for row in self.rows["resource_providers"]
                       if row["name"]}
        for pid in sorted(depth, key=lambda p: (depth[p], p)):
            self.out.providers.append(
                self._provider(by_id[pid], roots[pid], names_taken))
        self.imported_rps = set(depth)

    def _provider(self, row: dict, root: int, names_taken: set) -> dict:
        pid = row["id"]
        label = f"id={pid} uuid={row['uuid']}"
        name = row["name"]
        if not name:
            name = row["uuid"] if row["uuid"] not in names_taken else f"provider-{row['uuid']}"
            self._adjust(Note("resource_providers", label,
                              f"name was empty; imported with the name {name}"))
        generation = row["generation"]
        if generation is None:
            generation = 0
            self._adjust(Note("resource_providers", label,
                              "generation was NULL; imported as 0"))
        if row["root_provider_id"] != root:
            self._adjust(Note("resource_providers", label,
                              f"stored root id={row['root_provider_id']} is not the top "
                              f"of its parents (id={root}); the top is used"))
        return {"id": pid, "uuid": row["uuid"], "name": name, "generation": generation,
                "parent_provider_id": row["parent_provider_id"],
                "root_provider_id": None if root == pid else root,
                **_ts(row, self.now)}

    # What providers offer ---------------------------------------------------

    def _no_provider(self, row):
        rp_id = row["resource_provider_id"]
        if rp_id in self.imported_rps:
            return None
        if rp_id in self.by_id:
            return f"its resource provider id={rp_id} was not imported"
        return f"resource provider id={rp_id} does not exist"

    def _no_class(self, row):
        if row["resource_class_id"] not in self.class_name:
            return f"resource class id={row['resource_class_id']} does not exist"

    def _no_trait(self, row):
        if row["trait_id"] not in self.trait_name:
            return f"trait id={row['trait_id']} does not exist"

    def _no_aggregate(self, row):
        if row["aggregate_id"] not in self.aggregate_ids:
            return (f"aggregate id={row['aggregate_id']} was not imported "
                    "or does not exist")

    def _inventories(self) -> None:
        for row in self._kept("inventories", "id={id}", self._no_provider, self._no_class):
            self.inventory_keys.add((row["resource_provider_id"], row["resource_class_id"]))
            self.out.inventories.append({
                "id": row["id"], "resource_provider_id": row["resource_provider_id"],
                "class_name": self.class_name[row["resource_class_id"]],
                **{k: row[k] for k in ("total", "reserved", "min_unit", "max_unit",
                                       "step_size", "allocation_ratio")},
                **_ts(row, self.now)})

    def _provider_traits(self) -> None:
        for row in self._kept("resource_provider_traits",
                              "provider id={resource_provider_id} trait id={trait_id}",
                              self._no_provider, self._no_trait):
            self.out.provider_traits.append({
                "resource_provider_id": row["resource_provider_id"],
                "trait_name": self.trait_name[row["trait_id"]], **_ts(row, self.now)})

    def _aggregates(self) -> None:
        for row in self._kept("placement_aggregates", "id={id}",
                              lambda row: None if row["uuid"] else "its uuid is NULL"):
            self.aggregate_ids.add(row["id"])
            self.out.aggregates.append({"id": row["id"], "uuid": row["uuid"],
                                        **_ts(row, self.now)})
        for row in self._kept(
                "resource_provider_aggregates",
                "provider id={resource_provider_id} aggregate id={aggregate_id}",
                self._no_provider, self._no_aggregate):
            self.out.provider_aggregates.append({
                "resource_provider_id": row["resource_provider_id"],
                "aggregate_id": row["aggregate_id"], **_ts(row, self.now)})

    # Consumers and what they hold -------------------------------------------

    def _consumers(self) -> None:
        rows, now, out = self.rows, self.now, self.out
        project_name = {r["id"]: r["external_id"] for r in rows["projects"]}
        user_name = {r["id"]: r["external_id"] for r in rows["users"]}
        type_name = {r["id"]: r["name"] for r in rows["consumer_types"]}
        out.projects = [{"external_id": r["external_id"], **_ts(r, now)}
                        for r in rows["projects"]]
        out.users = [{"external_id": r["external_id"], **_ts(r, now)} for r in rows["users"]]
        out.consumer_types = [{"name": r["name"], **_ts(r, now)}
                              for r in rows["consumer_types"]]
        holding = {row["consumer_id"] for row in rows["allocations"]}

        def consumer_problem(row):
            if row["project_id"] not in project_name:
                return f"project id={row['project_id']} does not exist"
            if row["user_id"] not in user_name:
                return f"user id={row['user_id']} does not exist"
            if row.get("consumer_type_id") is not None \
                    and row["consumer_type_id"] not in type_name:
                return f"consumer type id={row['consumer_type_id']} does not exist"
            if row["uuid"] not in holding:
                return ("it has no allocations (placement-lite keeps a consumer only "
                        "while it has some; its next write starts it afresh)")

        for row in self._kept("consumers", "id={id} uuid={uuid}", consumer_problem):
            self.consumer_ids[row["uuid"]] = row["id"]
            type_id = row.get("consumer_type_id")
            out.consumers.append({
                "id": row["id"], "uuid": row["uuid"],
                "project": project_name[row["project_id"]],
                "user": user_name[row["user_id"]],
                "consumer_type": None if type_id is None else type_name[type_id],
                "generation": row["generation"], **_ts(row, now)})

    def _allocations(self) -> None:
        known_consumers = {r["uuid"] for r in self.rows["consumers"]}

        def allocation_problem(row):
            rc = row["resource_class_id"]
            if (row["resource_provider_id"], rc) not in self.inventory_keys:
                return (f"its provider has no {self.class_name[rc]} inventory "
                        "(an allocation against a class with no inventory)")
            if row["consumer_id"] not in self.consumer_ids:
                return ("its consumer was not imported"
                        if row["consumer_id"] in known_consumers
                        else "its consumer has no row in consumers (run Placement's "
                        "`placement-manage db online_data_migrations` first)")
            if row["used"] < 1:
                return f"used={row['used']} is not a positive amount"

        for row in self._kept(
                "allocations",
                "id={id} consumer={consumer_id} provider id={resource_provider_id}",
                self._no_provider, self._no_class, allocation_problem):
            self.out.allocations.append({
                "id": row["id"], "resource_provider_id": row["resource_provider_id"],
                "consumer_id": self.consumer_ids[row["consumer_id"]],
                "class_name": self.class_name[row["resource_class_id"]],
                "used": row["used"], **_ts(row, self.now)})


def _drop_emptied_consumers(out: Plan) -> None:
    """A consumer whose every allocation was skipped would be left with none:
    skip it too, as placement-lite holds no consumer without allocations."""
    kept = {a["consumer_id"] for a in out.allocations}
    for consumer in [c for c in out.consumers if c["id"] not in kept]:
        out.consumers.remove(consumer)
        out.skipped.append(Note("consumers", f"id={consumer['id']} uuid={consumer['uuid']}",
                                "none of its allocations could be imported"))
