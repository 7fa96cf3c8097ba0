"""A request reads the usage of, and walks, only the trees its filters let
through before usage (candidates/viable.py), and answers as SQL does.

In a cloud where every provider carries usage, reading every tree's
`used` made a query for one aggregate cost what the cloud holds. These
tests hold the narrowing to two promises: the answer is still the one
SQL gives (random worlds without sharing providers, random requests
heavy in member_of, in_tree, root_required and granular groups, writes
of every kind in between, so each tree's kept verdict must follow its
facts); and a query for one aggregate reads no other tree's usage.
"""
from __future__ import annotations

import json
import random
from urllib.parse import urlencode

import pytest

from placement_lite.app import create_app
from placement_lite.candidates import memory as memory_module, viable
from placement_lite.config import Settings
from tests.random_world import TRAITS, Builder, candidate_query, wsgi
from tests.test_candidates_memory import (
    _aggregates, _alike, _claim, _create, _delete, _get, _inventory, _move)
from tests.viable_probes import (
    group_suffix, in_use, judged_roots, narrowed, provider_ids, usage_reads)


@pytest.fixture
def apps(db):
    return (create_app(Settings(db=db.url), db),
            create_app(Settings(db=db.url, facts_in_memory=False), db))


def _traits(rng, world, app, rp):
    """New traits, never the sharing one (a sharing provider takes the
    answer off the path by tree)."""
    gen = _get(app, f"/resource_providers/{rp}/traits")["resource_provider_generation"]
    return wsgi(app, "PUT", f"/resource_providers/{rp}/traits", {
        "resource_provider_generation": gen,
        "traits": rng.sample(TRAITS + ["CUSTOM_A", "CUSTOM_B"], rng.randint(0, 3))})


WRITES = [_inventory, _traits, _traits, _aggregates, _aggregates, _create, _move,
          _delete, _claim, _claim]


def _filtered_query(rng, world) -> list:
    """A random request, most often narrowed by aggregate or tree."""
    params = candidate_query(rng, world)
    pick = rng.random()
    return narrowed(rng, world, params, pick, group_suffix(rng, params),
                    root_required_below=0.8)


@pytest.mark.parametrize("seed", [29, 2029, 4029])
def test_the_viable_trees_answer_as_sql_does_after_every_write(apps, seed):
    memory, sql = apps
    rng = random.Random(seed)
    world = Builder(memory, rng)
    world.build(sharing=False)
    found = 0
    for _ in range(40):
        write = rng.choice(WRITES)
        write(rng, world, rng.choice([memory, sql]), rng.choice(sorted(world.providers)))
        for _ in range(6):
            query = _filtered_query(rng, world)
            status, body = _alike(memory, sql, "/allocation_candidates?" + urlencode(query),
                                  rng.choice(["1.17", "1.29", "1.39"]))
            found += status == 200 and bool(body["allocation_requests"])
            _alike(memory, sql, "/allocation_candidates?" + urlencode(
                query + [("limit", str(rng.randint(1, 3)))]), "1.39")
    # Compared something real: many answers held candidates.
    assert found >= 10, found


def _requests(body) -> list:
    return sorted(json.dumps(r, sort_keys=True) for r in body["allocation_requests"])


@pytest.mark.parametrize("seed", [31, 2031])
def test_a_random_sample_is_drawn_from_the_viable_trees_answer(db, apps, seed,
                                                              monkeypatch):
    """randomize_allocation_candidates searches (not by tree) over the
    viable trees: asked for more than there are, it gives every
    candidate SQL gives, in some order."""
    _memory, sql = apps
    narrowed = []
    real = viable.Viable.first
    monkeypatch.setattr(viable.Viable, "first",
                        lambda self, count=None: narrowed.append(1) or real(self, count))
    shuffled = create_app(Settings(db=db.url, randomize_allocation_candidates=True), db)
    rng = random.Random(seed)
    world = Builder(shuffled, rng)
    world.build(sharing=False)
    found = 0
    for _ in range(12):
        write = rng.choice(WRITES)
        write(rng, world, rng.choice([shuffled, sql]), rng.choice(sorted(world.providers)))
        for _ in range(6):
            path = "/allocation_candidates?" + urlencode(
                _filtered_query(rng, world) + [("limit", "100000")])
            mine, theirs = wsgi(shuffled, "GET", path), wsgi(sql, "GET", path)
            assert mine[0] == theirs[0], (path, mine, theirs)
            if mine[0] == 200:
                assert _requests(mine[1]) == _requests(theirs[1]), path
                found += bool(mine[1]["allocation_requests"])
    assert found >= 5, found
    assert narrowed  # the searches went over the viable trees


def test_a_query_for_one_aggregate_reads_no_other_trees_usage(db, apps, monkeypatch):
    """Forty compute nodes, every one in use; the last four in aggregate
    A. A query for A reads `used` of A's trees only, and answers as SQL."""
    memory, sql = apps
    world = Builder(memory, random.Random(7))
    agg = world.uuid()
    nodes = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(8),
                                                 "MEMORY_MB": world.inv(4096)},
                            aggs=[agg] if n >= 36 else [])
             for n in range(40)]
    for n, rp in enumerate(nodes):
        in_use(memory, world, rp, {"VCPU": 1 + n % 4})
    ids = provider_ids(db)
    in_a = {ids[rp] for rp in nodes[36:]}
    read, whole = usage_reads(monkeypatch)
    path = "/allocation_candidates?" + urlencode(
        {"resources": "VCPU:1,MEMORY_MB:256", "member_of": agg, "limit": 2})
    for _ in range(2):
        read.clear()
        status, body = _alike(memory, sql, path)
        assert status == 200 and len(body["allocation_requests"]) == 2
        assert not whole
        assert read and set(read) <= in_a, sorted(read)
    # The whole answer too reads A's trees alone.
    read.clear()
    path = "/allocation_candidates?" + urlencode(
        {"resources": "VCPU:1,MEMORY_MB:256", "member_of": agg})
    assert len(_alike(memory, sql, path)[1]["allocation_requests"]) == 4
    assert not whole and set(read) <= in_a


def test_a_bounded_answer_judges_only_as_far_as_it_scans(apps, monkeypatch):
    """Without member_of or in_tree every tree may be viable: a request
    for two candidates judges the first trees, not all of them; asked
    again it judges none; a full answer then judges the rest once."""
    memory, sql = apps
    world = Builder(memory, random.Random(11))
    for n in range(300):
        world.provider(f"cn{n}", inventory={"VCPU": world.inv(4)})
    judged = judged_roots(monkeypatch)
    path = "/allocation_candidates?resources=VCPU:1&limit=2"
    assert len(_alike(memory, sql, path)[1]["allocation_requests"]) == 2
    assert 0 < len(judged) < 100, len(judged)
    first = len(judged)
    _alike(memory, sql, path)
    assert len(judged) == first
    assert len(_alike(memory, sql, "/allocation_candidates?resources=VCPU:1")[1][
        "allocation_requests"]) == 300
    assert sorted(judged) == sorted(set(judged)) and len(judged) == 300


def test_after_a_facts_write_only_the_trees_it_touched_are_judged_again(
        apps, monkeypatch):
    """A refresh carries the judged trees over: a write to one provider's
    facts, or a new provider, costs the next request one tree's judging,
    and the answers still follow the writes."""
    memory, sql = apps
    world = Builder(memory, random.Random(13))
    nodes = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(4)}) for n in range(200)]
    assert wsgi(memory, "PUT", "/traits/CUSTOM_B")[0] == 201
    judged = judged_roots(monkeypatch)
    path = "/allocation_candidates?resources=VCPU:1&required=!CUSTOM_B"
    assert len(_alike(memory, sql, path)[1]["allocation_requests"]) == 200
    assert len(judged) == 200
    judged.clear()
    _traits_to(memory, nodes[7], ["CUSTOM_B"])
    assert len(_alike(memory, sql, path)[1]["allocation_requests"]) == 199
    assert len(judged) == 1, judged
    judged.clear()
    world.provider("late", inventory={"VCPU": world.inv(4)})
    assert len(_alike(memory, sql, path)[1]["allocation_requests"]) == 200
    assert len(judged) == 1, judged


def _traits_to(app, rp, names):
    gen = _get(app, f"/resource_providers/{rp}/traits")["resource_provider_generation"]
    status, out = wsgi(app, "PUT", f"/resource_providers/{rp}/traits", {
        "resource_provider_generation": gen, "traits": names})
    assert status == 200, out


def test_a_bounded_answer_over_wide_trees_reads_the_trees_it_needs(apps, monkeypatch):
    """Twelve trees of twelve devices each, every device in use. A request
    for three devices needs the first tree alone: asked again, it reads
    that tree's usage and its neighbour's. (The first read of a shape counted
    32 trees whatever their width: here every device of the cloud.)"""
    memory, sql = apps
    world = Builder(memory, random.Random(17))
    assert wsgi(memory, "PUT", "/resource_classes/CUSTOM_PF")[0] == 201
    trees = []
    for r in range(12):
        root = world.provider(f"host{r}", inventory={"DISK_GB": world.inv(100)})
        kids = [world.provider(f"host{r}-pf{c}", parent=root,
                               inventory={"CUSTOM_PF": world.inv(4)})
                for c in range(12)]
        trees.append([root] + kids)
        for kid in kids:
            in_use(memory, world, kid, {"CUSTOM_PF": 1})
    read = []
    real_read = memory_module.MemoryReader.read_used
    monkeypatch.setattr(memory_module.MemoryReader, "read_used",
                        lambda self, rps: read.append(sorted(rps)) or real_read(self, rps))
    monkeypatch.setattr(memory_module.MemoryReader, "read_all_used",
                        lambda self: pytest.fail("read every tree's usage"))
    path = "/allocation_candidates?resources=CUSTOM_PF:1&limit=3"
    for _attempt in range(3):
        read.clear()
        status, body = _alike(memory, sql, path)
        assert status == 200 and len(body["allocation_requests"]) == 3
    # The tree it needs, and a neighbour: the first read covers up to 32
    # providers (candidates/by_tree.py _span).
    assert len({rp for rps in read for rp in rps}) == 26, [len(r) for r in read]
