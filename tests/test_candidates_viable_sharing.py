"""With sharing providers in the cloud, a request still reads the usage
of, and walks, only the trees that can give it a candidate
(candidates/viable.py): those whose own providers, or the sharing
providers reaching them, can serve every group.

The promises, as for a cloud without sharing providers
(tests/test_candidates_viable.py): the answer is the one SQL gives, byte
for byte (random worlds with sharing providers of DISK_GB and
IPV4_ADDRESS in several aggregates, requests heavy in member_of, in_tree,
forbidden aggregates and classes only sharing providers hold, and writes
of every kind in between, sharing providers' aggregates, traits and
inventory included, so the trees judged and carried over a refresh must
follow who reaches them); and a query for one aggregate reads no
unrelated tree's usage.
"""
from __future__ import annotations

import io
import json
import random
from urllib.parse import urlencode
from wsgiref.util import setup_testing_defaults

import pytest

from placement_lite.app import create_app
from placement_lite.candidates import viable
from placement_lite.config import Settings
from tests.random_world import TRAITS, Builder, candidate_query, wsgi
from tests.test_candidates_memory import (
    _aggregates, _claim, _create, _delete, _get, _inventory, _move, _traits)
from tests.viable_probes import (
    group_suffix, in_use, judged_roots, narrowed, provider_ids, usage_reads)

SHARES = "MISC_SHARES_VIA_AGGREGATE"


@pytest.fixture
def apps(db):
    return (create_app(Settings(db=db.url), db),
            create_app(Settings(db=db.url, facts_in_memory=False), db))


def _raw(app, path, version):
    """(status, the body's bytes) of a GET; an error's request id, which
    differs per request, left out."""
    path, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_X_AUTH_TOKEN": "admin", "HTTP_ACCEPT": "application/json",
               "HTTP_OPENSTACK_API_VERSION": f"placement {version}",
               "wsgi.input": io.BytesIO(b"")}
    setup_testing_defaults(environ)
    seen = []
    body = b"".join(app(environ, lambda status, headers, exc=None: seen.append(status)))
    status = int(seen[0].split()[0])
    if status != 200:
        return status, wsgi(app, "GET", path + "?" + query, version=version)[0]
    return status, body


def _same(memory, sql, path, version="1.39") -> bytes:
    mine = _raw(memory, path, version)
    assert mine == _raw(sql, path, version), (version, path)
    return mine[1] if mine[0] == 200 else b""


def _given(body: bytes) -> int:
    return len(json.loads(body)["allocation_requests"])


# -- writes on sharing providers and on the trees they reach ------------------

def _sharers(app) -> list:
    return sorted(rp["uuid"] for rp in _get(
        app, f"/resource_providers?required={SHARES}")["resource_providers"])


def _sharer_aggregates(rng, world, app, rp):
    """A sharing provider moves to other aggregates (or to none)."""
    found = _sharers(app)
    rp = rng.choice(found) if found else rp
    gen = _get(app, f"/resource_providers/{rp}/aggregates")["resource_provider_generation"]
    return wsgi(app, "PUT", f"/resource_providers/{rp}/aggregates", {
        "resource_provider_generation": gen,
        "aggregates": rng.sample(world.aggregates, rng.randint(0, 3))})


def _sharer_traits(rng, world, app, rp):
    """A sharing provider's traits change (it may stop sharing), or any
    provider starts sharing."""
    found = _sharers(app)
    if found and rng.random() < 0.7:
        rp = rng.choice(found)
    names = rng.sample(TRAITS, rng.randint(0, 2))
    if rng.random() < 0.75:
        names.append(SHARES)
    gen = _get(app, f"/resource_providers/{rp}/traits")["resource_provider_generation"]
    return wsgi(app, "PUT", f"/resource_providers/{rp}/traits", {
        "resource_provider_generation": gen, "traits": names})


def _sharer_inventory(rng, world, app, rp):
    """A sharing provider's inventory grows, shrinks, gains or loses a class."""
    found = _sharers(app)
    rp = rng.choice(found) if found else rp
    body = _get(app, f"/resource_providers/{rp}/inventories")
    inv = body["inventories"]
    pick = rng.random()
    if inv and pick < 0.4:
        row = inv[rng.choice(sorted(inv))]
        row["total"] = max(1, row["total"] + rng.choice([-150, -10, 10, 300]))
        row["max_unit"] = min(row["max_unit"], row["total"])
    elif inv and pick < 0.55:
        del inv[rng.choice(sorted(inv))]
    else:
        rc = rng.choice(["DISK_GB", "IPV4_ADDRESS", "MEMORY_MB"])
        inv[rc] = world.inv(rng.choice([20, 500]), max_unit=rng.choice([4, 200]))
    return wsgi(app, "PUT", f"/resource_providers/{rp}/inventories", {
        "resource_provider_generation": body["resource_provider_generation"],
        "inventories": inv})


WRITES = [_inventory, _traits, _aggregates, _aggregates, _create, _move, _delete,
          _claim, _claim, _sharer_aggregates, _sharer_aggregates, _sharer_traits,
          _sharer_inventory, _sharer_inventory]


def _world(app, seed) -> Builder:
    """The random world, in five aggregates, with sharing providers of
    DISK_GB and IPV4_ADDRESS (one in two aggregates of its own, one in
    none: it reaches its own tree alone)."""
    rng = random.Random(seed)
    world = Builder(app, rng)
    world.aggregates += [world.uuid() for _ in range(2)]
    world.build(sharing=True)
    world.provider("shared-mixed", inventory={"DISK_GB": world.inv(400, max_unit=100),
                                              "IPV4_ADDRESS": world.inv(8, max_unit=2)},
                   traits=[SHARES, "CUSTOM_A"], aggs=world.aggregates[3:])
    world.provider("shared-alone", inventory={"DISK_GB": world.inv(300, max_unit=100)},
                   traits=[SHARES])
    # Some compute nodes join the new aggregates.
    for rp in rng.sample(sorted(u for u, p in world.providers.items()
                                if p["parent"] is None and p["inventory"]), 3):
        _aggregates(rng, world, app, rp)
    return world


def _query(rng, world) -> list:
    """A random request: often for a class only sharing providers hold, or
    narrowed by aggregate, tree or root traits."""
    pick = rng.random()
    if pick < 0.45:
        params = candidate_query(rng, world)
    else:
        resources = rng.choice([
            "DISK_GB:10", "IPV4_ADDRESS:1", "DISK_GB:20,IPV4_ADDRESS:1",
            "VCPU:1,DISK_GB:10", "MEMORY_MB:256,IPV4_ADDRESS:1",
            "VCPU:1,MEMORY_MB:256,DISK_GB:100"])
        params = [("resources", resources)]
        if rng.random() < 0.3:
            params.append(("required", rng.choice(
                ["CUSTOM_A", "!CUSTOM_C", "STORAGE_DISK_SSD", "in:CUSTOM_A,CUSTOM_C"])))
        if rng.random() < 0.3:
            params += [("resources1", rng.choice(["DISK_GB:10", "IPV4_ADDRESS:1", "VCPU:1"])),
                       ("group_policy", rng.choice(["none", "isolate"]))]
            if rng.random() < 0.5:
                params.append(("member_of1", rng.choice(world.aggregates)))
    suffix = group_suffix(rng, params)
    pick = rng.random()
    return narrowed(rng, world, params, pick, suffix, root_required_below=0.75)


def _repeated(world) -> list:
    """Requests asked after every write: what each judged is carried over
    the refresh the write makes, where the write allows."""
    aggs = world.aggregates
    return [[("resources", "VCPU:1,DISK_GB:10")], [("resources", "DISK_GB:10")],
            [("resources", "MEMORY_MB:256,IPV4_ADDRESS:1"), ("member_of", aggs[1])],
            [("resources", "VCPU:1"), ("resources1", "DISK_GB:10"),
             ("member_of1", f"in:{aggs[0]},{aggs[2]}")],
            [("resources", "IPV4_ADDRESS:1"), ("limit", "1")],
            [("resources", "VCPU:1,DISK_GB:10"), ("member_of", aggs[3])],
            [("resources", "VCPU:1,IPV4_ADDRESS:1"), ("member_of", "!" + aggs[4])]]


@pytest.mark.parametrize("seed", [1729, 2729, 3729])
def test_with_sharing_providers_the_viable_trees_answer_as_sql_does(
        apps, seed, monkeypatch):
    memory, sql = apps
    judged = []
    real = viable.Viable._tree
    monkeypatch.setattr(viable.Viable, "_tree",
                        lambda self, root: judged.append(root) or real(self, root))
    rng = random.Random(seed)
    world = _world(memory, seed)
    found = shared_only = 0
    kinds: dict = {}
    for _ in range(45):
        write = rng.choice(WRITES)
        status, _out = write(rng, world, rng.choice([memory, sql]),
                             rng.choice(sorted(world.providers)))
        kinds.setdefault(write.__name__, set()).add(status)
        for query in _repeated(world):
            _same(memory, sql, "/allocation_candidates?" + urlencode(query))
        for _ in range(5):
            query = _query(rng, world)
            body = _same(memory, sql, "/allocation_candidates?" + urlencode(query),
                         rng.choice(["1.17", "1.29", "1.39"]))
            given = _given(body) if body else 0
            found += given > 0
            shared_only += query[0] == ("resources", "DISK_GB:10") and given > 0
            _same(memory, sql, "/allocation_candidates?" + urlencode(
                query + [("limit", str(rng.randint(1, 3)))]), "1.39")
    # Compared something real: many answers held candidates, the copy
    # judged trees with sharing providers about, and every kind of write
    # on sharing providers landed.
    assert found >= 30, found
    assert shared_only and judged
    assert all(any(s in (200, 204) for s in kinds.get(w.__name__, ()))
               for w in (_sharer_aggregates, _sharer_traits, _sharer_inventory)), kinds


def test_with_a_sharer_a_query_for_one_aggregate_reads_no_other_trees_usage(
        db, apps, monkeypatch):
    """Forty compute nodes, every one in use; the last four in aggregate
    A, the eight before them in B. A sharing provider of DISK_GB in A,
    another in B (both in use). A query for A reads `used` of A's trees
    and of the sharing providers only, and answers as SQL: for compute
    classes, for them with disk from A's sharing provider, and for disk
    alone (a candidate of the sharing provider only)."""
    memory, sql = apps
    world = Builder(memory, random.Random(17))
    agg_a, agg_b = world.uuid(), world.uuid()
    nodes = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(8),
                                                 "MEMORY_MB": world.inv(4096)},
                            aggs=[agg_a] if n >= 36 else [agg_b] if n >= 28 else [])
             for n in range(40)]
    disks = [world.provider(f"disk-{name}", inventory={"DISK_GB": world.inv(1000)},
                            traits=[SHARES], aggs=[agg])
             for name, agg in (("a", agg_a), ("b", agg_b))]
    for n, rp in enumerate(nodes):
        in_use(memory, world, rp, {"VCPU": 1 + n % 4})
    for disk in disks:
        in_use(memory, world, disk, {"DISK_GB": 100})
    ids = provider_ids(db)
    in_a = {ids[rp] for rp in nodes[36:]}
    sharers = {ids[rp] for rp in disks}
    read, whole = usage_reads(monkeypatch)
    for resources, given in (("VCPU:1,MEMORY_MB:256", 2), ("VCPU:1,DISK_GB:10", 2),
                             ("DISK_GB:10", 1)):
        path = "/allocation_candidates?" + urlencode(
            {"resources": resources, "member_of": agg_a, "limit": 2})
        for _ in range(2):
            read.clear()
            body = _same(memory, sql, path)
            assert _given(body) == given, body
            assert not whole
            assert read and set(read) <= in_a | sharers, sorted(read)
    # Whole answers too read A's trees alone.
    for resources, given in (("VCPU:1,MEMORY_MB:256", 4), ("VCPU:1,DISK_GB:10", 4)):
        read.clear()
        path = "/allocation_candidates?" + urlencode(
            {"resources": resources, "member_of": agg_a})
        assert _given(_same(memory, sql, path)) == given
        assert not whole and set(read) <= in_a | sharers, sorted(read)


def test_a_sharer_reaching_other_trees_changes_what_is_judged_viable(
        apps, monkeypatch):
    """Trees of VCPU alone give VCPU with DISK_GB only where a sharing
    provider of disk reaches them. What was judged is carried over a
    refresh, but not past a write to a sharing provider able to serve the
    request (its aggregates, traits, inventory) or to which ones are: the
    answers follow each write. A write to a tree's aggregates, or to a
    sharing provider that cannot serve the request, costs the next
    request the judging of one tree."""
    memory, sql = apps
    world = Builder(memory, random.Random(23))
    agg_a, agg_b = world.uuid(), world.uuid()
    nodes = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(8)},
                            aggs=[agg_a] if n < 4 else [agg_b] if n < 8 else [])
             for n in range(30)]
    disk = world.provider("disk", inventory={"DISK_GB": world.inv(1000)},
                          traits=[SHARES], aggs=[agg_a])
    ips = world.provider("ips", inventory={"IPV4_ADDRESS": world.inv(10)},
                         traits=[SHARES], aggs=[agg_b])
    judged = judged_roots(monkeypatch)
    path = "/allocation_candidates?resources=VCPU:1,DISK_GB:10"

    def count():
        return _given(_same(memory, sql, path))

    def put(rp, what, body):
        gen = _get(memory, f"/resource_providers/{rp}/{what}")["resource_provider_generation"]
        status, out = wsgi(memory, "PUT", f"/resource_providers/{rp}/{what}",
                           dict(body, resource_provider_generation=gen))
        assert status == 200, out

    assert count() == 4
    put(disk, "aggregates", {"aggregates": [agg_b]})
    assert count() == 4  # now cn4-cn7's
    put(nodes[20], "aggregates", {"aggregates": [agg_b]})
    judged.clear()
    assert count() == 5
    assert len(judged) == 1, judged
    put(ips, "aggregates", {"aggregates": [agg_a]})
    judged.clear()
    assert count() == 5
    assert len(judged) == 1, judged  # the ips' own tree
    put(disk, "traits", {"traits": []})
    assert count() == 0
    put(disk, "traits", {"traits": [SHARES]})
    assert count() == 5
    put(disk, "inventories", {"inventories": {"MEMORY_MB": world.inv(100)}})
    assert count() == 0
    put(disk, "inventories", {"inventories": {"DISK_GB": world.inv(1000)}})
    put(disk, "aggregates", {"aggregates": [agg_a, agg_b]})
    assert count() == 9
    # A request whose only class sharing providers hold: one candidate,
    # from the first tree the disk reaches.
    body = _same(memory, sql, "/allocation_candidates?resources=DISK_GB:10&limit=1")
    assert _given(body) == 1
