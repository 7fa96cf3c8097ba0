"""The process's copy of the facts against the database, across processes.

Two servers share one database: one holding its copy of the facts in each
of 2 worker processes (the default engine), one reading only the database
(PLACEMENT_LITE_FACTS_IN_MEMORY=false). A random world is written through
the API, then rounds of random write batches, sent to either server from
several client threads, each changing from one to well over a thousand
providers (new trees three deep, subtrees deleted or moved, inventory
totals, reserved amounts and ratios, trait and aggregate sets, sharing
providers, allocations). After each batch, random reads go to both
servers: candidates in the whole 1.39 language (granular groups,
required/!/in:, member_of/!/in:, in_tree, same_subtree, group_policy,
limit, root_required), provider lists and usages. Every answer of the
copy must equal the database's, byte for byte once parsed.

Knobs, for a long campaign on a developer's machine:
  PLACEMENT_LITE_DIFF_SEED    the world and every choice (default 2511)
  PLACEMENT_LITE_DIFF_ROUNDS  write batches (default 6: sizes 1 to 1,100)
  PLACEMENT_LITE_DIFF_READS   candidate queries after each batch (default 12)
  PLACEMENT_LITE_DIFF_ALL     1: go on past a difference and report them all
A failure names the seed, the round and the query.
"""
from __future__ import annotations

import math
import os
import random
import re
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

import pytest

from tests import random_world as rw
from tests.backends import backend_id, backend_urls, fresh_url
from tests.servers import serve

SEED = int(os.environ.get("PLACEMENT_LITE_DIFF_SEED", "2511"))
ROUNDS = int(os.environ.get("PLACEMENT_LITE_DIFF_ROUNDS", "6"))
READS = int(os.environ.get("PLACEMENT_LITE_DIFF_READS", "12"))
# The short campaign's batch sizes (changed providers, roughly): one
# write, a few, past one chunk of a refresh's reads (500), past two.
FIRST_SIZES = [1, 1100, 7, 520, 40, 150]
CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GPU", "SRIOV_NET_VF", "CUSTOM_PF"]
CLIENTS = 4
KEEP_GOING = os.environ.get("PLACEMENT_LITE_DIFF_ALL") == "1"


class World:
    """What the campaign wrote, as far as it needs to pick its next
    writes (the servers, not this, are compared)."""

    def __init__(self, builder: rw.Builder):
        self.rng = builder.rng
        self.aggregates = builder.aggregates
        self.lock = threading.Lock()
        # uuid -> {"name", "parent", "inventory": {class: total}}
        self.providers = {u: {"name": p["name"], "parent": p["parent"],
                              "inventory": {rc: s["total"] for rc, s in p["inventory"].items()},
                              "traits": p["traits"], "aggregates": p["aggregates"]}
                          for u, p in builder.providers.items()}

    def uuid(self) -> str:
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    def children(self) -> dict:
        out: dict = {}
        for u, p in self.providers.items():
            out.setdefault(p["parent"], []).append(u)
        return out

    def subtree(self, top: str, children: dict) -> list:
        """`top` and everything below it, parents before children."""
        out, todo = [], [top]
        while todo:
            u = todo.pop()
            out.append(u)
            todo.extend(sorted(children.get(u, ())))
        return out


def _call(base, method, path, body=None, version=rw.VERSION):
    return rw.wsgi(base, method, path, body, version)


def _ok(result, *statuses):
    status, body = result
    assert status in statuses, (status, body)
    return body


# -- writes -----------------------------------------------------------------

def _inventory(rng):
    out = {}
    for rc in rng.sample(CLASSES, rng.randint(1, 3)):
        total = rng.choice([2, 4, 8, 16]) if rc != "MEMORY_MB" else rng.choice([2048, 8192])
        out[rc] = {"total": total, "max_unit": total,
                   "reserved": rng.choice([0, 0, 1]) if total > 2 else 0,
                   "allocation_ratio": rng.choice([1.0, 1.0, 2.0, 1.5])}
    return out


def _new_provider(base, world, rng, name, parent):
    rp = world.uuid()
    body = {"name": name, "uuid": rp}
    if parent:
        body["parent_provider_uuid"] = parent
    if _call(base, "POST", "/resource_providers", body)[0] != 200:
        return None
    inventory = _inventory(rng) if rng.random() < 0.85 else {}
    gen = 0
    if inventory:
        status, out = _call(base, "PUT", f"/resource_providers/{rp}/inventories",
                            {"resource_provider_generation": gen, "inventories": inventory})
        if status == 200:
            gen = out["resource_provider_generation"]
    traits = rng.sample(rw.TRAITS, rng.randint(0, 2))
    if traits and rng.random() < 0.4:
        status, out = _call(base, "PUT", f"/resource_providers/{rp}/traits",
                            {"resource_provider_generation": gen, "traits": traits})
        if status == 200:
            gen = out["resource_provider_generation"]
    if rng.random() < 0.3:
        _call(base, "PUT", f"/resource_providers/{rp}/aggregates", {
            "resource_provider_generation": gen,
            "aggregates": rng.sample(world.aggregates, rng.randint(1, 2))})
    with world.lock:
        world.providers[rp] = {"name": name, "parent": parent,
                               "inventory": {rc: s["total"] for rc, s in inventory.items()}}
    return rp


def _grow(base, world, rng, size):
    """A new tree of about `size` providers, up to three deep."""
    tag = world.uuid()[:8]
    root = _new_provider(base, world, rng, f"t-{tag}", None)
    made, level = 1, [root]
    depth = 1
    while made < size and level:
        below = []
        for parent in level:
            room = size - made
            if room <= 0:
                break
            fan = room if depth == 2 or rng.random() < 0.5 else min(room, rng.randint(1, 8))
            if depth == 1 and size > 40:
                fan = min(room, max(2, size // 10))
            for n in range(fan if depth < 3 else 0):
                rp = _new_provider(base, world, rng, f"t-{tag}-{depth}-{parent[:4]}-{n}", parent)
                made += 1
                if rp:
                    below.append(rp)
        level, depth = below, depth + 1
        if depth > 3:
            break
    return made


def _set_inventory(base, world, rng, rp):
    status, body = _call(base, "GET", f"/resource_providers/{rp}/inventories")
    if status != 200:
        return
    inv = body["inventories"]
    if inv and rng.random() < 0.8:
        rc = rng.choice(sorted(inv))
        row = inv[rc]
        pick = rng.random()
        if pick < 0.4:
            row["total"] = max(row["total"] + rng.choice([-2, -1, 1, 3]), 1)
            row["max_unit"] = row["total"]
        elif pick < 0.7:
            row["reserved"] = rng.choice([0, 1, row["total"]])
        else:
            row["allocation_ratio"] = rng.choice([0.5, 1.0, 2.0, 16.0])
    else:
        inv.update(_inventory(rng))
    for row in inv.values():
        row["reserved"] = min(row.get("reserved", 0), row["total"])
        row["max_unit"] = max(row.get("max_unit", 1), row.get("min_unit", 1))
    status, _out = _call(base, "PUT", f"/resource_providers/{rp}/inventories", {
        "resource_provider_generation": body["resource_provider_generation"],
        "inventories": inv})
    if status == 200:
        with world.lock:
            if rp in world.providers:
                world.providers[rp]["inventory"] = {rc: r["total"] for rc, r in inv.items()}


def _set_traits(base, world, rng, rp):
    status, body = _call(base, "GET", f"/resource_providers/{rp}/traits")
    if status != 200:
        return
    names = rng.sample(rw.TRAITS, rng.randint(0, 3))
    if rng.random() < 0.1:
        names.append("MISC_SHARES_VIA_AGGREGATE")
    _call(base, "PUT", f"/resource_providers/{rp}/traits", {
        "resource_provider_generation": body["resource_provider_generation"],
        "traits": names})


def _set_aggregates(base, world, rng, rp):
    status, body = _call(base, "GET", f"/resource_providers/{rp}/aggregates")
    if status != 200:
        return
    _call(base, "PUT", f"/resource_providers/{rp}/aggregates", {
        "resource_provider_generation": body["resource_provider_generation"],
        "aggregates": rng.sample(world.aggregates, rng.randint(0, 2))})


def _move(base, world, rng, top, children):
    """Re-parent a subtree: under a provider outside it, or up to a root."""
    inside = set(world.subtree(top, children))
    outside = [u for u in world.providers if u not in inside]
    target = rng.choice(outside + [None]) if outside else None
    status, _out = _call(base, "PUT", f"/resource_providers/{top}", {
        "name": world.providers[top]["name"], "parent_provider_uuid": target}, "1.37")
    if status == 200:
        with world.lock:
            world.providers[top]["parent"] = target


def _delete(base, world, top, children):
    """A subtree, leaves first (a provider with allocations stays)."""
    for rp in reversed(world.subtree(top, children)):
        if _call(base, "DELETE", f"/resource_providers/{rp}")[0] == 204:
            with world.lock:
                world.providers.pop(rp, None)


def _claim(base, world, rng):
    holders = [(u, rc) for u, p in world.providers.items() for rc in p["inventory"]]
    if not holders:
        return
    allocations: dict = {}
    for rp, rc in rng.sample(holders, min(len(holders), rng.randint(1, 2))):
        amount = 1 if rc != "MEMORY_MB" else 256
        allocations.setdefault(rp, {"resources": {}})["resources"][rc] = amount
    _call(base, "PUT", f"/allocations/{world.uuid()}", {
        "allocations": allocations, "project_id": rng.choice(rw.PROJECTS),
        "user_id": rng.choice(rw.USERS), "consumer_generation": None,
        "consumer_type": "INSTANCE"}, "1.38")


def _batch(bases, world, rng, size):
    """Writes changing about `size` providers, from CLIENTS threads, each
    write sent to either server."""
    children = world.children()
    every = sorted(world.providers)
    jobs = []
    left = size
    while left > 0:
        pick = rng.random()
        base = rng.choice(bases)
        seed = rng.getrandbits(32)
        if pick < 0.3 or len(every) < 10:
            n = min(left, rng.choice([1, 3, 12, 60, 300, 700]))
            jobs.append(lambda b=base, n=n, s=seed: _grow(b, world, random.Random(s), n))
            left -= n
        elif pick < 0.45 and every:
            top = rng.choice(every)
            n = len(world.subtree(top, children))
            jobs.append(lambda b=base, t=top, s=seed: _move(b, world, random.Random(s), t,
                                                            children))
            left -= n
        elif pick < 0.52 and every:
            top = rng.choice(every)
            jobs.append(lambda b=base, t=top: _delete(b, world, t, children))
            left -= len(world.subtree(top, children))
        else:
            # A run of single-provider writes.
            n = min(left, rng.choice([1, 5, 25, 120]))
            for rp in rng.sample(every, min(n, len(every))):
                write = rng.choice([_set_inventory, _set_inventory, _set_traits,
                                    _set_aggregates])
                jobs.append(lambda b=base, w=write, r=rp, s=seed:
                            w(b, world, random.Random(s), r))
            for _ in range(max(1, n // 10)):
                jobs.append(lambda b=base, s=seed: _claim(b, world, random.Random(s)))
            left -= n
    # Moves and deletes of one batch may overlap; each write alone is
    # still a valid request (refusals are part of the campaign).
    rng.shuffle(jobs)
    with ThreadPoolExecutor(CLIENTS) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()
    return len(jobs)


# -- reads --------------------------------------------------------------------

class _QueryWorld:
    """What random_world's query makers read of a world."""

    def __init__(self, world: World, rng):
        self.aggregates = world.aggregates
        self.providers = world.providers
        self.rng = rng


def _reads(world, rng, count):
    qw = _QueryWorld(world, rng)
    roots = [u for u, p in world.providers.items() if p["parent"] is None]
    out = []
    for _ in range(count):
        params = rw.candidate_query(rng, qw)
        if rng.random() < 0.3:
            params.append(("limit", str(rng.choice([1, 5, 50, 700]))))
        out.append("/allocation_candidates?" + urlencode(params))
    out.append("/allocation_candidates?resources=CUSTOM_PF:1")
    out.append("/allocation_candidates?resources=CUSTOM_PF:1,VCPU:1&limit=20")
    out.append("/allocation_candidates?resources1=CUSTOM_PF:1&resources2=VCPU:1"
               "&group_policy=isolate&same_subtree=1,2")
    out.append("/allocation_candidates?resources=DISK_GB:10,SRIOV_NET_VF:1")
    for _ in range(3):
        out.append("/resource_providers?" + urlencode(rw.provider_query(rng, qw)))
    if roots:
        out.append(f"/resource_providers?in_tree={rng.choice(roots)}")
    for project in rw.PROJECTS[:2]:
        out.append(f"/usages?project_id={project}")
    for rp in rng.sample(sorted(world.providers), min(2, len(world.providers))):
        out.append(f"/resource_providers/{rp}/usages")
    return out


def _answer(base, path):
    status, body = _call(base, "GET", path)
    if status != 200 and isinstance(body, dict):
        for error in body.get("errors", ()):
            error.pop("request_id", None)
    return status, body


def _summary(answer):
    status, body = answer
    if isinstance(body, dict) and "allocation_requests" in body:
        return (status, f"{len(body['allocation_requests'])} candidates, "
                f"{len(body['provider_summaries'])} summaries")
    if isinstance(body, dict) and "resource_providers" in body:
        return status, f"{len(body['resource_providers'])} providers"
    return status, str(body)[:200]


def _per_worker(base, series: str) -> dict:
    """worker -> the highest value of a /metrics series seen (either
    worker may answer a scrape)."""
    out: dict = {}
    pattern = re.escape(series).replace("WORKER", r'(\d+)') + r" (\d+)"
    for _ in range(20):
        status, text = _call(base, "GET", "/metrics")
        assert status == 200
        for worker, n in re.findall(pattern, text):
            out[worker] = max(out.get(worker, 0), int(n))
    return out


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_the_copy_answers_as_the_database_does_after_any_writes(backend):
    rng = random.Random(SEED)
    with fresh_url(backend) as url, \
            serve(url, env={"PLACEMENT_LITE_FACTS_IN_MEMORY": "false"}) as sql, \
            serve(url, "--workers", "2", "--metrics",
                  # Each worker checks its copy against the database
                  # every half second meanwhile: none may differ.
                  env={"PLACEMENT_LITE_FACTS_CHECK_SECONDS": "0.5"}) as memory:
        builder = rw.Builder(memory.base, rng)
        builder.build()
        world = World(builder)
        bases = [memory.base, sql.base]
        started = time.monotonic()
        sizes = FIRST_SIZES[:ROUNDS] + [
            int(math.exp(rng.uniform(0, math.log(1500))))
            for _ in range(ROUNDS - len(FIRST_SIZES))]
        compared = found = 0
        differences = []
        for round_no, size in enumerate(sizes):
            # The copy is read before the batch, so the batch is a refresh.
            for path in _reads(world, rng, 2):
                _answer(memory.base, path)
            _batch(bases, world, rng, size)
            for path in _reads(world, rng, READS):
                expected = _answer(sql.base, path)
                for _ in range(2):  # either worker may answer
                    got = _answer(memory.base, path)
                    if got != expected:
                        differences.append(
                            f"seed {SEED}, round {round_no} (batch of ~{size}): {path}\n"
                            f"copy: {_summary(got)}\ndatabase: {_summary(expected)}")
                        assert KEEP_GOING, differences[0]
                compared += 1
                body = expected[1]
                found += bool(isinstance(body, dict) and body.get("allocation_requests"))
        refreshes = _per_worker(memory.base, 'placement_lite_facts_copy_reads_total'
                                '{worker="WORKER",kind="refresh"}')
        checks = {result: _per_worker(memory.base, 'placement_lite_facts_copy_checks_total'
                                      f'{{worker="WORKER",result="{result}"}}')
                  for result in ("same", "different")}
        elapsed = time.monotonic() - started
        print(f"\n{backend_id(backend)}: {len(sizes)} rounds, {compared} reads compared "
              f"({found} with candidates), {len(world.providers)} providers, "
              f"refreshes by worker {refreshes}, self-checks {checks}, "
              f"{len(differences)} differences, "
              f"{elapsed:.1f} s")
        assert not differences, f"{len(differences)} differences:\n" + "\n".join(
            differences[:20])
        assert found >= len(sizes) * 3, found
        # Both workers followed the writes by refreshing their copies, and
        # checked them against the database.
        assert len(refreshes) == 2 and all(refreshes.values()), refreshes
        assert sum(checks["same"].values()) > 0, checks
        assert not any(checks["different"].values()), checks


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_the_issues_reproduction_answers_every_provider(backend, workers):
    """20 flat providers read once (each worker holds its copy), then 5
    roots of 100 children with CUSTOM_PF: 4 from 4 client threads (505
    changed providers): candidates list all 500, as the provider list
    does. The refresh's chunked read once answered 5."""
    with fresh_url(backend) as url, \
            serve(url, "--workers", workers, "--metrics") as srv:
        base = srv.base
        _ok(_call(base, "PUT", "/resource_classes/CUSTOM_PF", version="1.7"), 201)
        for n in range(20):
            rp = str(uuidlib.uuid4())
            _ok(_call(base, "POST", "/resource_providers", {"name": f"flat{n}", "uuid": rp}),
                200)
            _ok(_call(base, "PUT", f"/resource_providers/{rp}/inventories", {
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": 8}}}), 200)
        for _ in range(4):  # every worker reads its copy
            assert len(_ok(_call(base, "GET", "/allocation_candidates?resources=VCPU:1"),
                           200)["allocation_requests"]) == 20

        def child(root, n):
            rp = str(uuidlib.uuid4())
            _ok(_call(base, "POST", "/resource_providers", {
                "name": f"{root[:8]}-{n}", "uuid": rp, "parent_provider_uuid": root}), 200)
            _ok(_call(base, "PUT", f"/resource_providers/{rp}/inventories", {
                "resource_provider_generation": 0,
                "inventories": {"CUSTOM_PF": {"total": 4}}}), 200)

        roots = [str(uuidlib.uuid4()) for _ in range(5)]
        for root in roots:
            _ok(_call(base, "POST", "/resource_providers", {"name": root, "uuid": root}), 200)
        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(lambda job: child(*job), [(r, n) for r in roots for n in range(100)]))
        listed = _ok(_call(base, "GET", "/resource_providers?resources=CUSTOM_PF:1"), 200)
        assert len(listed["resource_providers"]) == 500
        for _ in range(4):
            body = _ok(_call(base, "GET", "/allocation_candidates?resources=CUSTOM_PF:1"), 200)
            assert (len(body["allocation_requests"]), len(body["provider_summaries"])) == (
                500, 505)
