"""What the viable-trees tests (test_candidates_viable and its sharing
twin) watch and do: spies on the usage the process's copy of the facts
reads and on the trees it judges, narrowing filters for random
requests, and providers put in use."""
from __future__ import annotations

from sqlalchemy import select

from placement_lite.candidates import memory as memory_module, viable
from placement_lite.db import tables as t
from tests.random_world import wsgi


def usage_reads(monkeypatch) -> tuple[list, list]:
    """(the providers whose `used` the copy read, one entry per read of
    every provider's), as requests go on."""
    read, whole = [], []
    real_read, real_all = (memory_module.MemoryReader.read_used,
                           memory_module.MemoryReader.read_all_used)
    monkeypatch.setattr(memory_module.MemoryReader, "read_used",
                        lambda self, rps: read.extend(rps) or real_read(self, rps))
    monkeypatch.setattr(memory_module.MemoryReader, "read_all_used",
                        lambda self: whole.append(1) or real_all(self))
    return read, whole


def judged_roots(monkeypatch) -> list:
    """The roots of the trees judged viable or not, as requests go on."""
    judged = []
    real = viable.Viable._judge
    monkeypatch.setattr(viable.Viable, "_judge",
                        lambda self, roots: judged.extend(roots) or real(self, roots))
    return judged


def provider_ids(db) -> dict:
    """Provider uuid -> id."""
    with db.read() as conn:
        return dict(conn.execute(select(t.resource_providers.c.uuid,
                                        t.resource_providers.c.id)).all())


def in_use(app, world, rp: str, resources: dict) -> None:
    """`resources` on `rp` allocated to a new consumer of a new project."""
    status, out = wsgi(app, "PUT", f"/allocations/{world.uuid()}", {
        "allocations": {rp: {"resources": resources}},
        "project_id": world.uuid(), "user_id": world.uuid(),
        "consumer_generation": None, "consumer_type": "INSTANCE"}, version="1.39")
    assert status == 204, out


def group_suffix(rng, params: list) -> str:
    """The suffix of one of the request's resource groups ("" for the
    unnamed one), or "" when it has none."""
    groups = sorted({k[len("resources"):] for k, _v in params if k.startswith("resources")})
    return rng.choice(groups) if groups else ""


def narrowed(rng, world, params: list, pick: float, suffix: str,
             root_required_below: float) -> list:
    """`params` narrowed, as `pick` (in [0, 1)) falls: by aggregate for
    half, by tree (on the group `suffix` names), by root traits up to
    `root_required_below`, else not. The caller draws `pick` and `suffix`,
    each test in its own order: its seeds' requests depend on it."""
    roots = [u for u, p in world.providers.items() if p["parent"] is None]
    if pick < 0.5:
        agg = rng.choice(world.aggregates)
        params.append((f"member_of{suffix}", rng.choice(
            [agg, "in:" + ",".join(rng.sample(world.aggregates, 2)), "!" + agg])))
    elif pick < 0.65 and roots:
        params.append((f"in_tree{suffix}", rng.choice(roots)))
    elif pick < root_required_below:
        params.append(("root_required", rng.choice(["CUSTOM_A", "!CUSTOM_B"])))
    return params
