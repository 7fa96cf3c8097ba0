"""The perfload worlds for `python -m bench matrix`, bulk-loaded.

Run as a script (`python bench/worlds.py URL SHAPE COUNT`) so the
`placement_lite` it imports is the one on PYTHONPATH: in comparison mode
each side's database is migrated and loaded by that side's own code.

Shapes (Placement's gate/perfload-* jobs):
- flat: COUNT providers, VCPU 32 / MEMORY_MB 8192 / DISK_GB 8192, every
  one with HW_CPU_X86_AVX2 and in the aggregate, so the perfload query
  answers COUNT candidates; each provider holds a running instance (one
  consumer with VCPU 4, MEMORY_MB 2048, DISK_GB 20), so summaries carry
  real usage, as in a cloud in service;
- nested: COUNT trees of 7 providers: a root with DISK_GB and
  COMPUTE_VOLUME_MULTI_ATTACH, two NUMA nodes with VCPU and MEMORY_MB (the
  first with CUSTOM_FOO), an FPGA below the first and two below the
  second, a PGPU below the first: one candidate per tree for the perfload
  nested query;
- race: COUNT providers with VCPU 50 (ratio 1) for the claims workloads;
- usages: COUNT consumers of one project (uuid5 of the count), each with
  VCPU 1 and MEMORY_MB 256 on the `race` providers' neighbours;
- cloud-idle / cloud-full: a cloud of COUNT compute nodes (the flat
  shape's inventory, not in the pools) and, after them, the pools of 64
  idle nodes that bench/full.py's schedulers claim from; in the full
  variant every node carries 30-90% of its capacity, held by several
  consumers of many projects; defined once, as plain rows, by Cloud,
  which OpenStack Placement's loader (bench/placement16.py) reads too.
  cloud-idle-sharing / cloud-full-sharing: the same, with a sharing
  provider of DISK_GB in each pool's aggregate, last.
Provider and project ids are uuid5 of their names, so the benchmark knows
them without asking.
"""
from __future__ import annotations

import itertools
import random
import sys
import uuid as uuidlib

from sqlalchemy import func, insert, select

NS = uuidlib.UUID("6d2c3f1e-5b7a-4c1e-9a0d-1f2e3d4c5b6a")
AGGREGATE = "b0a5e1a8-1d1c-4c55-9f5a-0c1d0e7e0a01"
BATCH = 2000


def uid(name: str) -> str:
    return str(uuidlib.uuid5(NS, name))


def usage_project(count: int) -> str:
    return uid(f"usage-project-{count}")


def open_db(url):
    """The database at `url`, migrated, with the standard classes and traits."""
    from placement_lite.db import migrate
    from placement_lite.db.engine import Database
    from placement_lite.ledger import standards
    db = Database(url)
    migrate.upgrade(db.engine)
    standards.sync(db)
    return db


class Bulk:
    """Providers with their inventories, traits and membership of
    AGGREGATE, inserted in batches with explicit ids (after the largest
    there), for bench/loader.py as for the worlds here."""

    def __init__(self, conn, batch: int = BATCH):
        from placement_lite.db import tables as t
        self.conn, self.t, self.batch = conn, t, batch
        self.rc = dict(conn.execute(select(t.resource_classes.c.name,
                                           t.resource_classes.c.id)).all())
        self.traits = dict(conn.execute(select(t.traits.c.name, t.traits.c.id)).all())
        self.next_id = (conn.execute(select(func.max(t.resource_providers.c.id)))
                        .scalar() or 0) + 1
        agg = conn.execute(select(t.placement_aggregates.c.id).where(
            t.placement_aggregates.c.uuid == AGGREGATE)).scalar()
        if agg is None:
            agg = conn.execute(insert(t.placement_aggregates).values(
                uuid=AGGREGATE)).inserted_primary_key[0]
        self.agg = agg
        self.rps, self.invs, self.rpt, self.rpa = [], [], [], []

    def custom_trait(self, name: str) -> None:
        if name not in self.traits:
            self.traits[name] = self.conn.execute(insert(self.t.traits).values(
                name=name)).inserted_primary_key[0]

    def provider(self, name, parent=None, root=None, inventory=(), traits=(),
                 aggregate=False, uuid=None):
        """`inventory`: class -> a total (max_unit the same) or the
        inventory's columns (total and max_unit at least); `uuid`, uuid5
        of the name unless given."""
        pid = self.next_id
        self.next_id += 1
        self.rps.append(dict(id=pid, uuid=uuid or uid(name), name=name, generation=1,
                             parent_provider_id=parent, root_provider_id=root or pid))
        for rc, spec in dict(inventory).items():
            row = dict(resource_provider_id=pid, resource_class_id=self.rc[rc],
                       reserved=0, min_unit=1, step_size=1, allocation_ratio=1.0)
            row.update(spec if isinstance(spec, dict)
                       else dict(total=spec, max_unit=spec))
            self.invs.append(row)
        self.rpt += [dict(resource_provider_id=pid, trait_id=self.traits[x])
                     for x in traits]
        if aggregate:
            self.rpa.append(dict(resource_provider_id=pid, aggregate_id=self.agg))
        if len(self.rps) >= self.batch:
            self.flush()
        return pid

    def flush(self):
        t = self.t
        for table, rows in ((t.resource_providers, self.rps), (t.inventories, self.invs),
                            (t.resource_provider_traits, self.rpt),
                            (t.resource_provider_aggregates, self.rpa)):
            if rows:
                _facts_changed(self.conn)
                self.conn.execute(insert(table), rows)
                rows.clear()


def _facts_changed(conn):
    """The rows go in around the ledger, perhaps under a live server
    (bench/loader.py): every process reloads the providers' facts once
    this transaction (a Database.write) commits. A tree before the facts
    log has nothing to tell."""
    try:
        from placement_lite.db import facts_log
    except ImportError:
        return
    facts_log.reset(conn)


FLAT = {"VCPU": 32, "MEMORY_MB": 8192, "DISK_GB": 8192}


def load(url: str, shape: str, count: int) -> None:
    """Load world `shape` of `count`; a shape ending in "+full" is that
    world with every provider 30-90% used (fill)."""
    from placement_lite.db import tables as t
    shape, _plus, variant = shape.partition("+")
    db = open_db(url)
    with db.write() as conn:
        bulk = Bulk(conn)
        bulk.custom_trait("CUSTOM_FOO")
        if shape == "flat":
            rps = [bulk.provider(f"cn-{i}", inventory=FLAT,
                                 traits=["HW_CPU_X86_AVX2"], aggregate=True)
                   for i in range(count)]
            bulk.flush()
            _in_service(conn, t, bulk, rps)
            _rebuild_usage_summary(conn)
        elif shape == "nested":
            for i in range(count):
                root = bulk.provider(f"tree-{i}", inventory={"DISK_GB": 8192},
                                     traits=["COMPUTE_VOLUME_MULTI_ATTACH"])
                numa = [bulk.provider(f"tree-{i}-numa{n}", root, root,
                                      {"VCPU": 16, "MEMORY_MB": 4096},
                                      ["HW_NUMA_ROOT"] + (["CUSTOM_FOO"] if n == 0 else []))
                        for n in range(2)]
                bulk.provider(f"tree-{i}-fpga0", numa[0], root, {"FPGA": 1})
                bulk.provider(f"tree-{i}-fpga1", numa[1], root, {"FPGA": 1})
                bulk.provider(f"tree-{i}-fpga2", numa[1], root, {"FPGA": 1})
                bulk.provider(f"tree-{i}-pgpu0", numa[0], root, {"PGPU": 1})
        elif shape == "race":
            for i in range(count):
                bulk.provider(f"race-{i}", inventory={"VCPU": 50})
        elif shape in CLOUDS:
            load_cloud(conn, t, bulk, count, *CLOUDS[shape])
            _rebuild_usage_summary(conn)
        elif shape == "usages":
            bulk.flush()
            _usages(conn, t, bulk, count)
            _rebuild_usage_summary(conn)
        bulk.flush()
        if variant == "full":
            fill(conn, t, shape)
            _rebuild_usage_summary(conn)
        if db.backend == "postgresql":
            # Explicit ids do not move PostgreSQL's sequences; the API's
            # inserts afterwards must not collide with the loaded rows.
            for table in ("resource_providers", "consumers"):
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT coalesce(max(id), 0) + 1 FROM {table}), false)")
    # Fresh statistics, as autovacuum / InnoDB's background statistics
    # would have them in a deployment: PostgreSQL's planner needs them
    # (and the visibility map) to choose index-only scans.
    if db.backend == "postgresql":
        with db.engine.connect().execution_options(
                isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    elif db.backend == "mysql":
        with db.engine.connect() as conn:
            for table in ("resource_providers", "inventories", "consumers",
                          "allocations", "resource_provider_traits",
                          "resource_provider_aggregates"):
                conn.exec_driver_sql(f"ANALYZE TABLE {table}").all()
    db.dispose()


def _rebuild_usage_summary(conn):
    """The rows went in around the ledger: recompute the usage sums from
    them, as an import does (a tree before the summary has none)."""
    try:
        from placement_lite.db import usage_summary
    except ImportError:
        return
    usage_summary.rebuild(conn)


def _in_service(conn, t, bulk, rps):
    """One instance per provider: a consumer of its own with VCPU 4,
    MEMORY_MB 2048 and DISK_GB 20 there."""
    project = conn.execute(insert(t.projects).values(
        external_id=uid("flat-project"))).inserted_primary_key[0]
    user = conn.execute(insert(t.users).values(
        external_id=uid("flat-user"))).inserted_primary_key[0]
    first = (conn.execute(select(func.max(t.consumers.c.id))).scalar() or 0) + 1
    amounts = [(bulk.rc[rc], n) for rc, n in (("VCPU", 4), ("MEMORY_MB", 2048),
                                              ("DISK_GB", 20))]
    for start in range(0, len(rps), BATCH):
        part = list(enumerate(rps[start:start + BATCH], first + start))
        conn.execute(insert(t.consumers), [
            dict(id=c, uuid=uid(f"flat-consumer-{c}"), project_id=project,
                 user_id=user, generation=1) for c, _rp in part])
        conn.execute(insert(t.allocations), [
            dict(resource_provider_id=rp, consumer_id=c, resource_class_id=rc, used=n)
            for c, rp in part for rc, n in amounts])


def _usages(conn, t, bulk, count):
    """COUNT consumers of one project, two allocations each, on 100
    providers of their own."""
    rps = [bulk.provider(f"usage-{count}-rp-{i}",
                         inventory={"VCPU": 10 ** 7, "MEMORY_MB": 10 ** 9})
           for i in range(100)]
    bulk.flush()
    project = conn.execute(insert(t.projects).values(
        external_id=usage_project(count))).inserted_primary_key[0]
    user = conn.execute(insert(t.users).values(
        external_id=uid(f"usage-user-{count}"))).inserted_primary_key[0]
    first = (conn.execute(select(func.max(t.consumers.c.id))).scalar() or 0) + 1
    vcpu, mem = bulk.rc["VCPU"], bulk.rc["MEMORY_MB"]
    for start in range(0, count, BATCH):
        ids = range(first + start, first + min(start + BATCH, count))
        conn.execute(insert(t.consumers), [
            dict(id=c, uuid=uid(f"usage-{count}-consumer-{c}"), project_id=project,
                 user_id=user, generation=1) for c in ids])
        conn.execute(insert(t.allocations), [
            dict(resource_provider_id=rps[c % 100], consumer_id=c,
                 resource_class_id=rc, used=used)
            for c in ids for rc, used in ((vcpu, 1), (mem, 256))])


def fill(conn, t, tag: str, consumers: int = 3) -> None:
    """Every provider with inventory 30-90% used (a share drawn per
    provider, of each class's capacity, less what it already holds), by
    `consumers` new consumers each, of PROJECTS projects: a cloud in
    service rather than a perfload world waiting for its first instance.
    Each amount keeps the inventory's unit limits."""
    rng = random.Random(tag)
    inv = t.inventories
    rows = conn.execute(select(
        inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total, inv.c.reserved,
        inv.c.allocation_ratio, inv.c.min_unit, inv.c.max_unit, inv.c.step_size,
        select(func.coalesce(func.sum(t.allocations.c.used), 0)).where(
            t.allocations.c.resource_provider_id == inv.c.resource_provider_id,
            t.allocations.c.resource_class_id == inv.c.resource_class_id)
        .scalar_subquery()).order_by(inv.c.resource_provider_id, inv.c.resource_class_id)).all()
    by_rp: dict = {}
    for row in rows:
        by_rp.setdefault(row[0], []).append(row[1:])
    projects = [conn.execute(insert(t.projects).values(
        external_id=uid(f"fill-{tag}-project-{p}"))).inserted_primary_key[0]
        for p in range(PROJECTS)]
    user = conn.execute(insert(t.users).values(
        external_id=uid(f"fill-{tag}-user"))).inserted_primary_key[0]
    next_id = (conn.execute(select(func.max(t.consumers.c.id))).scalar() or 0) + 1
    made, allocs = [], []
    for rp, classes in by_rp.items():
        share = rng.uniform(0.3, 0.9)
        # Per consumer, (class, amount) it holds: the class's share split
        # as evenly as the unit limits let it.
        held: list = [[] for _ in range(consumers)]
        for rc, total, reserved, ratio, lo, hi, step, used in classes:
            want = int((total - reserved) * ratio * share) - used
            for k in range(consumers):
                n = want // consumers + (1 if k < want % consumers else 0)
                n = min(n - n % max(step, 1), hi)
                if n >= max(lo, 1):
                    held[k].append((rc, n))
        for amounts in held:
            if not amounts:
                continue
            made.append(dict(id=next_id, uuid=uid(f"fill-{tag}-consumer-{next_id}"),
                             project_id=projects[next_id % PROJECTS], user_id=user,
                             generation=1))
            allocs += [dict(resource_provider_id=rp, consumer_id=next_id,
                            resource_class_id=rc, used=n) for rc, n in amounts]
            next_id += 1
        if len(made) >= BATCH:
            conn.execute(insert(t.consumers), made)
            conn.execute(insert(t.allocations), allocs)
            made, allocs = [], []
    if made:
        conn.execute(insert(t.consumers), made)
        conn.execute(insert(t.allocations), allocs)


# The clouds of bench/full.py.
POOL_SIZE = 64
POOL_VCPU = 14
POOLS = 5  # pool 0 for the filtered query; one per scheduler round after
USAGE_CONSUMERS = 1000
PROJECTS = 100
CONSUMERS_MAX = 100_000


def pool_aggregate(k: int) -> str:
    return uid(f"pool-aggregate-{k}")


def cloud_usage_project() -> str:
    return uid("cloud-usage-project")


def consumers_for(count: int) -> int:
    """Consumers in a full cloud of `count` nodes: ten per node, at most
    CONSUMERS_MAX (a 10,000-node cloud holds 100,000)."""
    return max(count, min(CONSUMERS_MAX, 10 * count))


POOL_INVENTORY = {"VCPU": POOL_VCPU, "MEMORY_MB": 65536, "DISK_GB": 8192}
# A pool's sharing provider of disk (Cloud's `sharing`).
POOL_DISK = {"DISK_GB": 100_000}
SHARES = "MISC_SHARES_VIA_AGGREGATE"


def cloud_shape(variant: str, sharing: bool = False) -> str:
    """The world name of a Cloud variant ("idle" or "full")."""
    return f"cloud-{variant}" + ("-sharing" if sharing else "")


# World name -> Cloud's (in_use, sharing).
CLOUDS = {cloud_shape(variant, sharing): (variant == "full", sharing)
          for variant in ("idle", "full") for sharing in (False, True)}


class Cloud:
    """A cloud of bench/full.py as plain rows, named and counted but
    without database ids: the one definition that every loader of it
    reads (load_cloud below for placement_lite's schema,
    bench/placement16.py for OpenStack Placement's), so the worlds the
    sides are measured in cannot drift apart.

    `count` compute nodes with the flat inventory, each in AGGREGATE,
    then POOLS pools of POOL_SIZE idle nodes, pool k in
    pool_aggregate(k). `in_use`: the full variant, where every node is
    30-90% used by consumers_for(count) consumers: consumer c on node
    c % count, the first USAGE_CONSUMERS of the usage project, the others
    of PROJECTS projects, their share of the node split evenly among the
    consumers on it. `sharing`: after the pools, a sharing provider of
    POOL_DISK in each pool's aggregate, idle."""

    def __init__(self, count: int, in_use: bool, sharing: bool = False):
        self.count, self.in_use, self.sharing = count, in_use, sharing
        # In the order they are created (so in id order).
        self.aggregates = [AGGREGATE] + [pool_aggregate(k) for k in range(POOLS)]
        self.projects = ([uid(f"cloud-project-{p}") for p in range(PROJECTS)]
                         + [cloud_usage_project()]) if in_use else []
        self.users = [uid(f"cloud-user-{u}") for u in range(10)] if in_use else []

    def providers(self):
        """(name, inventory {class: total, max_unit the same}, traits,
        aggregate uuids) in id order; the uuid is uid(name). The pools
        last: a walk of the cloud in id order meets them last."""
        for i in range(self.count):
            yield f"node-{i}", FLAT, ("HW_CPU_X86_AVX2",), (AGGREGATE,)
        for k in range(POOLS):
            for j in range(POOL_SIZE):
                yield (f"pool-{k}-{j}", POOL_INVENTORY, ("HW_CPU_X86_AVX2",),
                       (pool_aggregate(k),))
        if self.sharing:
            for k in range(POOLS):
                yield f"pool-{k}-disk", POOL_DISK, (SHARES,), (pool_aggregate(k),)

    def consumers(self):
        """(uuid, project, user, [(provider index in providers(), class,
        used)]) in id order, project and user as external ids; none when
        idle."""
        if not self.in_use:
            return
        n = self.count
        rng = random.Random(n)
        total = consumers_for(n)
        share = [rng.uniform(0.3, 0.9) for _ in range(n)]
        per_node = [total // n + (1 if i < total % n else 0) for i in range(n)]
        usage = self.projects[PROJECTS]
        for c in range(total):
            i = c % n
            f = share[i] / per_node[i]
            owner = usage if c < USAGE_CONSUMERS else self.projects[c % PROJECTS]
            yield uid(f"cloud-consumer-{c}"), owner, self.users[c % 10], [
                (i, "VCPU", max(1, int(FLAT["VCPU"] * f))),
                (i, "MEMORY_MB", max(256, int(FLAT["MEMORY_MB"] * f) // 256 * 256)),
                (i, "DISK_GB", max(1, int(FLAT["DISK_GB"] * f)))]


def load_cloud(conn, t, bulk, count: int, in_use: bool, sharing: bool = False) -> None:
    """The Cloud's rows in placement_lite's schema (called by this
    module's loader)."""
    cloud = Cloud(count, in_use, sharing)
    aggs = {AGGREGATE: bulk.agg}
    for uuid in cloud.aggregates:
        if uuid not in aggs:
            aggs[uuid] = conn.execute(insert(t.placement_aggregates).values(
                uuid=uuid)).inserted_primary_key[0]
    ids = []
    for name, inventory, traits, member_of in cloud.providers():
        rp = bulk.provider(name, inventory=inventory, traits=traits)
        bulk.rpa += [dict(resource_provider_id=rp, aggregate_id=aggs[a]) for a in member_of]
        ids.append(rp)
    bulk.flush()
    if in_use:
        _hold(conn, t, bulk, cloud, ids)


def _hold(conn, t, bulk, cloud, ids: list) -> None:
    """The Cloud's consumers and their allocations."""
    def external(table, names):
        return {name: conn.execute(insert(table).values(
            external_id=name)).inserted_primary_key[0] for name in names}
    projects, users = external(t.projects, cloud.projects), external(t.users, cloud.users)
    rc = bulk.rc
    first = (conn.execute(select(func.max(t.consumers.c.id))).scalar() or 0) + 1
    consumers = enumerate(cloud.consumers(), first)
    while True:
        part = list(itertools.islice(consumers, BATCH))
        if not part:
            break
        conn.execute(insert(t.consumers), [
            dict(id=c, uuid=uuid, project_id=projects[project], user_id=users[user],
                 generation=1) for c, (uuid, project, user, _a) in part])
        conn.execute(insert(t.allocations), [
            dict(resource_provider_id=ids[i], consumer_id=c, resource_class_id=rc[name],
                 used=used)
            for c, (_u, _p, _s, allocations) in part for i, name, used in allocations])


if __name__ == "__main__":
    load(sys.argv[1], sys.argv[2], int(sys.argv[3]))
