"""Provider worlds for the benchmark.

`load_flat` gives the shape of Placement's perfload job: N compute nodes
with VCPU, MEMORY_MB and DISK_GB, one aggregate on half of them and the
trait HW_CPU_X86_AVX2 on two thirds. `load_nested` gives N trees of seven
providers: a compute root with DISK_GB, two NUMA nodes (VCPU, MEMORY_MB,
HW_NUMA_ROOT), three FPGAs and a PGPU below them.

Big worlds go straight into the database in bulk (the database the
server under test uses, opened by bench.worlds.open_db; rows by
bench.worlds.Bulk, as the matrix's worlds); small ones can go through the
HTTP API.
"""
from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import func, insert, select

from bench.worlds import AGGREGATE, Bulk
from placement_lite.db import tables as t
from placement_lite.db.engine import Database

AVX2 = "HW_CPU_X86_AVX2"
NUMA = "HW_NUMA_ROOT"
BATCH = 5000

FLAT_INVENTORY = {
    "VCPU": dict(total=32, reserved=0, allocation_ratio=4.0, max_unit=32),
    "MEMORY_MB": dict(total=131072, reserved=512, allocation_ratio=1.5,
                      max_unit=131072),
    "DISK_GB": dict(total=2048, reserved=0, allocation_ratio=1.0, max_unit=2048),
}

# name suffix, parent index (within the tree), inventory, traits
TREE = [
    ("", None, {"DISK_GB": dict(total=2048, max_unit=2048)}, []),
    ("numa0", 0, {"VCPU": dict(total=16, max_unit=16),
                  "MEMORY_MB": dict(total=65536, max_unit=65536)}, [NUMA]),
    ("numa1", 0, {"VCPU": dict(total=16, max_unit=16),
                  "MEMORY_MB": dict(total=65536, max_unit=65536)}, [NUMA]),
    ("fpga0", 1, {"FPGA": dict(total=1, max_unit=1)}, []),
    ("fpga1", 2, {"FPGA": dict(total=1, max_unit=1)}, []),
    ("fpga2", 2, {"FPGA": dict(total=1, max_unit=1)}, []),
    ("pgpu0", 1, {"PGPU": dict(total=2, max_unit=1)}, []),
]


def load_flat(db: Database, count: int, tag: str = "cn") -> None:
    with db.write() as conn:
        bulk = Bulk(conn, BATCH)
        for i in range(count):
            bulk.provider(f"{tag}-{i}", inventory=FLAT_INVENTORY,
                          traits=[AVX2] if i % 3 else [],
                          aggregate=i % 2 == 0)
        bulk.flush()


def load_nested(db: Database, count: int, tag: str = "tree") -> None:
    with db.write() as conn:
        bulk = Bulk(conn, BATCH)
        for i in range(count):
            ids = []
            for suffix, parent, inventory, traits in TREE:
                root = ids[0] if ids else None
                ids.append(bulk.provider(
                    f"{tag}-{i}-{suffix}" if suffix else f"{tag}-{i}",
                    parent=ids[parent] if parent is not None else None,
                    root=root, inventory=inventory, traits=traits,
                    aggregate=not ids))
        bulk.flush()


def load_flat_http(client, count: int, tag: str = "cn") -> None:
    """The same flat world through the API (slow; for small N)."""
    for i in range(count):
        uid = str(uuidlib.uuid4())
        client.post("/resource_providers", {"name": f"{tag}-{i}", "uuid": uid})
        client.put(f"/resource_providers/{uid}/inventories", {
            "resource_provider_generation": 0, "inventories": FLAT_INVENTORY})
        gen = 1
        if i % 3:
            client.put(f"/resource_providers/{uid}/traits", {
                "resource_provider_generation": gen, "traits": [AVX2]})
            gen += 1
        if i % 2 == 0:
            client.put(f"/resource_providers/{uid}/aggregates", {
                "resource_provider_generation": gen, "aggregates": [AGGREGATE]})


WIDE_CLASS = "CUSTOM_WIDE"


def load_wide(db: Database, children: int = 8, units: int = 6,
              tag: str = "wide") -> None:
    """One root with `children` children of `units` CUSTOM_WIDE each: the
    shape whose candidates explode combinatorially with granular groups."""
    rc = t.resource_classes
    with db.write() as conn:
        if conn.execute(select(rc.c.id).where(rc.c.name == WIDE_CLASS)).scalar() is None:
            top = conn.execute(select(func.max(rc.c.id))).scalar() or 0
            conn.execute(insert(rc).values(id=max(top + 1, t.CUSTOM_CLASS_MIN_ID),
                                           name=WIDE_CLASS))
        bulk = Bulk(conn, BATCH)
        root = bulk.provider(f"{tag}-root")
        for i in range(children):
            bulk.provider(f"{tag}-child{i}", parent=root, root=root, inventory={
                WIDE_CLASS: dict(total=units, max_unit=units)})
        bulk.flush()
