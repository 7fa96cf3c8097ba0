"""Provider worlds for the candidate-engine tests, written straight into
the tables (the engine only reads them)."""
from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import insert, select

from placement_lite.db import facts_log
from placement_lite.db import tables as t
from placement_lite.db import usage_summary


class World:
    def __init__(self, db):
        self.db = db
        self.ids = {}  # name -> id
        self.uuids = {}  # name -> uuid
        self.aggs = {}  # name -> (id, uuid)
        with db.read() as conn:
            self.rc = dict(conn.execute(select(t.resource_classes.c.name,
                                               t.resource_classes.c.id)).all())
            self.traits = dict(conn.execute(select(t.traits.c.name,
                                                   t.traits.c.id)).all())

    def provider(self, name, parent=None, inventory=None, traits=(), aggs=(),
                 used=None):
        """inventory: {class: total or dict(total=, reserved=, ...)}."""
        uid = str(uuidlib.uuid4())
        with self.db.write() as conn:
            pid = conn.execute(insert(t.resource_providers).values(
                uuid=uid, name=name, generation=0,
                parent_provider_id=self.ids.get(parent))).inserted_primary_key[0]
            root = pid if parent is None else conn.execute(
                select(t.resource_providers.c.root_provider_id).where(
                    t.resource_providers.c.id == self.ids[parent])).scalar()
            conn.execute(t.resource_providers.update().where(
                t.resource_providers.c.id == pid).values(root_provider_id=root))
            for rc, spec in (inventory or {}).items():
                spec = {"total": spec} if isinstance(spec, int) else dict(spec)
                spec.setdefault("max_unit", spec["total"])
                conn.execute(insert(t.inventories).values(
                    resource_provider_id=pid, resource_class_id=self.rc[rc],
                    reserved=spec.get("reserved", 0),
                    min_unit=spec.get("min_unit", 1),
                    step_size=spec.get("step_size", 1),
                    allocation_ratio=spec.get("allocation_ratio", 1.0),
                    total=spec["total"], max_unit=spec["max_unit"]))
            for trait in traits:
                if trait not in self.traits:
                    self.traits[trait] = conn.execute(insert(t.traits).values(
                        name=trait)).inserted_primary_key[0]
                conn.execute(insert(t.resource_provider_traits).values(
                    resource_provider_id=pid, trait_id=self.traits[trait]))
            for agg in aggs:
                if agg not in self.aggs:
                    auid = str(uuidlib.uuid4())
                    aid = conn.execute(insert(t.placement_aggregates).values(
                        uuid=auid)).inserted_primary_key[0]
                    self.aggs[agg] = (aid, auid)
                conn.execute(insert(t.resource_provider_aggregates).values(
                    resource_provider_id=pid, aggregate_id=self.aggs[agg][0]))
            # Written around the ledger: logged as the ledger would.
            facts_log.touch(conn, (pid,))
            if used:
                self._use(conn, pid, used)
        self.ids[name] = pid
        self.uuids[name] = uid
        return pid

    def _use(self, conn, pid, used):
        cons = getattr(self, "_consumer", None)
        if cons is None:
            proj = conn.execute(insert(t.projects).values(
                external_id="p")).inserted_primary_key[0]
            user = conn.execute(insert(t.users).values(
                external_id="u")).inserted_primary_key[0]
            cons = conn.execute(insert(t.consumers).values(
                uuid=str(uuidlib.uuid4()), project_id=proj, user_id=user,
                generation=0)).inserted_primary_key[0]
            self._consumer = cons
        for rc, amount in used.items():
            conn.execute(insert(t.allocations).values(
                resource_provider_id=pid, consumer_id=cons,
                resource_class_id=self.rc[rc], used=amount))
        usage_summary.rebuild(conn)

    def agg(self, name):
        return self.aggs[name][1]

    def name_of(self, uuid):
        return {u: n for n, u in self.uuids.items()}[uuid]
