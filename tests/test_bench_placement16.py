"""bench/placement16.py loads into OpenStack Placement's schema the same
cloud that bench/worlds.py loads into placement-lite's, so `bench full
--placement` compares the two in one world.

Both are read back by name and uuid (their ids differ: the schemas number
classes, traits and consumers each their own way) and must be equal.
Needs the test-only dependency openstack-placement (skipped without it).
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

pytest.importorskip("placement.deploy", reason="openstack-placement is a test extra")

from bench import worlds  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each schema's world as plain facts; {consumer} is how an allocation
# names its consumer (an id into consumers here, the uuid in Placement).
_FACTS = {
    "providers": "SELECT uuid, name, generation, parent_provider_id IS NULL, "
                 "root_provider_id = id FROM resource_providers",
    "inventories": "SELECT p.uuid, c.name, i.total, i.reserved, i.min_unit, i.max_unit, "
                   "i.step_size, i.allocation_ratio FROM inventories i "
                   "JOIN resource_providers p ON p.id = i.resource_provider_id "
                   "JOIN resource_classes c ON c.id = i.resource_class_id",
    "traits": "SELECT p.uuid, t.name FROM resource_provider_traits x "
              "JOIN resource_providers p ON p.id = x.resource_provider_id "
              "JOIN traits t ON t.id = x.trait_id",
    "aggregates": "SELECT p.uuid, a.uuid FROM resource_provider_aggregates x "
                  "JOIN resource_providers p ON p.id = x.resource_provider_id "
                  "JOIN placement_aggregates a ON a.id = x.aggregate_id",
    "consumers": "SELECT c.uuid, p.external_id, u.external_id, c.generation "
                 "FROM consumers c JOIN projects p ON p.id = c.project_id "
                 "JOIN users u ON u.id = c.user_id",
    "allocations": "SELECT c.uuid, p.uuid, k.name, a.used FROM allocations a "
                   "JOIN consumers c ON {consumer} "
                   "JOIN resource_providers p ON p.id = a.resource_provider_id "
                   "JOIN resource_classes k ON k.id = a.resource_class_id",
}


def _facts(path, consumer):
    conn = sqlite3.connect(path)
    try:
        return {name: sorted(conn.execute(sql.format(consumer=consumer)).fetchall())
                for name, sql in _FACTS.items()}
    finally:
        conn.close()


@pytest.mark.parametrize("variant", ["idle", "full"])
def test_placement_holds_the_same_cloud(tmp_path, variant):
    ours, theirs = tmp_path / "lite.sqlite", tmp_path / "placement.sqlite"
    count = 120  # 1,200 consumers when full: the usage project's 1,000 and others
    worlds.load(f"sqlite:///{ours}", f"cloud-{variant}", count)
    subprocess.run([sys.executable, "-m", "bench.placement16", "load",
                    f"sqlite:///{theirs}", str(count), variant], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True)
    lite = _facts(ours, "c.id = a.consumer_id")
    placement = _facts(theirs, "c.uuid = a.consumer_id")
    for name in _FACTS:
        assert lite[name] == placement[name], name
    pools = worlds.POOLS * worlds.POOL_SIZE
    assert len(lite["providers"]) == count + pools
    assert len(lite["inventories"]) == 3 * (count + pools)
    consumers = worlds.consumers_for(count) if variant == "full" else 0
    assert len(lite["consumers"]) == consumers
    assert len(lite["allocations"]) == 3 * consumers
