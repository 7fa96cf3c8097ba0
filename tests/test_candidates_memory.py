"""The candidate engine over a process's copy of the facts
(candidates/snapshot.py, candidates/memory.py) answers exactly what it
answers over SQL, and the copy is never stale.

Two apps share one database: one with the copy (the default), one asking
SQL for everything (facts_in_memory off). A random world is built through
the API (tests/random_world.py), then hundreds of random candidate
queries must get byte-for-byte the same answer, order included, from
both. Then writes of every kind that changes facts, made through either
app (the other app stands for another process), each followed by
queries: the copy must follow every write at once.
"""
from __future__ import annotations

import os
import uuid as uuidlib
import random
from urllib.parse import urlencode

import pytest

from placement_lite.app import create_app
from placement_lite.api.provider_filters import query_dialect
from placement_lite.api.versions import Version
from placement_lite.candidates import by_tree as by_tree_module
from placement_lite.candidates import engine, facts_cache, snapshot
from placement_lite.candidates.kept import Kept
from placement_lite.candidates.memory import _most_used
from placement_lite.candidates.plan import Plan
from placement_lite.candidates.query import parse_candidate_request
from placement_lite.candidates.facts_cache import FactsCache
from placement_lite.config import Settings
from placement_lite.db import tables as t
from placement_lite.ledger import providers
from tests.random_world import (
    TRAITS, Builder, candidate_query, wsgi)

SEED = int(os.environ.get("PLACEMENT_LITE_SAMENESS_SEED", "1604"))
# Older microversions render other answer shapes (lists before 1.12, no
# traits before 1.17, no tree before 1.29, no mappings before 1.34).
SHAPES = ["1.10", "1.12", "1.17", "1.25", "1.29", "1.34"]
LIMIT = "1.16"
SIMPLE = ["resources=VCPU:1", "resources=VCPU:1,MEMORY_MB:256",
          "resources=DISK_GB:10", "resources=MEMORY_MB:128,IPV4_ADDRESS:1",
          "resources=SRIOV_NET_VF:1,VCPU:2"]


@pytest.fixture
def apps(db):
    memory = create_app(Settings(db=db.url), db)
    sql = create_app(Settings(db=db.url, facts_in_memory=False), db)
    return memory, sql


def _answer(app, path, version):
    status, body = wsgi(app, "GET", path, version=version)
    if status != 200:
        for error in body["errors"]:
            error.pop("request_id")
    return status, body


def _alike(memory, sql, path, version="1.39"):
    mine = _answer(memory, path, version)
    assert mine == _answer(sql, path, version), (version, path)
    return mine


def test_the_copy_answers_as_sql_does(apps):
    memory, sql = apps
    rng = random.Random(SEED)
    world = Builder(memory, rng)
    world.build()
    found = 0
    for _ in range(250):
        status, body = _alike(memory, sql, "/allocation_candidates?"
                              + urlencode(candidate_query(rng, world)))
        found += status == 200 and bool(body["allocation_requests"])
    for version in SHAPES:
        for query in SIMPLE:
            _alike(memory, sql, f"/allocation_candidates?{query}", version)
            if version >= LIMIT:
                assert _alike(memory, sql, f"/allocation_candidates?{query}&limit=3",
                              version)[0] == 200
    stranger = world.uuid()  # no aggregate, no provider
    for term in (f"member_of={stranger}", f"member_of=!{stranger}",
                 f"member_of=in:{stranger},{world.aggregates[0]}",
                 f"in_tree={stranger}", f"in_tree={sorted(world.providers)[0]}"):
        _alike(memory, sql, f"/allocation_candidates?resources=VCPU:1&{term}")
    for agg in world.aggregates:
        # An aggregate on a root spans its tree (the unnumbered group only).
        for query in ("resources=SRIOV_NET_VF:1", "resources=VCPU:1,CUSTOM_GPU:1",
                      "resources1=VCPU:1&resources=MEMORY_MB:128"):
            for member_of in (agg, "!" + agg):
                _alike(memory, sql, f"/allocation_candidates?{query}&member_of={member_of}")
    # What is kept per request shape must not mix shapes that differ only
    # in the order of the classes or in the rules between groups.
    for query in ("resources=VCPU:1,MEMORY_MB:128", "resources=MEMORY_MB:128,VCPU:1",
                  "resources=DISK_GB:10,VCPU:1,MEMORY_MB:128",
                  "resources=MEMORY_MB:128,DISK_GB:10,VCPU:1"):
        _alike(memory, sql, f"/allocation_candidates?{query}")
    for policy in ("isolate", "none", "isolate"):
        for rest in ("", "&same_subtree=1,2"):
            _alike(memory, sql, "/allocation_candidates?resources1=VCPU:1"
                   f"&resources2=VCPU:1&group_policy={policy}{rest}")
            _alike(memory, sql, "/allocation_candidates?resources2=VCPU:1"
                   f"&resources1=MEMORY_MB:128&group_policy={policy}{rest}")
    # Compared something real: many queries found candidates.
    assert found > 40, found


# -- writes of every kind, through either app ---------------------------------

def _get(app, path, version="1.39"):
    status, body = wsgi(app, "GET", path, version=version)
    assert status == 200, (path, body)
    return body


def _inventory(rng, world, app, rp):
    body = _get(app, f"/resource_providers/{rp}/inventories")
    inv = body["inventories"]
    pick = rng.random()
    if inv and pick < 0.5:
        rc = rng.choice(sorted(inv))
        row = inv[rc]
        row["total"] = max(row["total"] + rng.choice([-2, -1, 1, 4]), 1)
        row["max_unit"] = row["total"]
        row["reserved"] = rng.choice([0, 0, 1])
    elif inv and pick < 0.7:
        del inv[rng.choice(sorted(inv))]
    else:
        inv[rng.choice(["VCPU", "MEMORY_MB", "CUSTOM_GPU"])] = world.inv(rng.randint(2, 16))
    return wsgi(app, "PUT", f"/resource_providers/{rp}/inventories", {
        "resource_provider_generation": body["resource_provider_generation"],
        "inventories": inv})


def _traits(rng, world, app, rp):
    gen = _get(app, f"/resource_providers/{rp}/traits")["resource_provider_generation"]
    names = rng.sample(TRAITS, rng.randint(0, 3))
    if rng.random() < 0.2:
        names.append("MISC_SHARES_VIA_AGGREGATE")
    return wsgi(app, "PUT", f"/resource_providers/{rp}/traits", {
        "resource_provider_generation": gen, "traits": names})


def _aggregates(rng, world, app, rp):
    gen = _get(app, f"/resource_providers/{rp}/aggregates")["resource_provider_generation"]
    return wsgi(app, "PUT", f"/resource_providers/{rp}/aggregates", {
        "resource_provider_generation": gen,
        "aggregates": rng.sample(world.aggregates, rng.randint(0, 2))})


def _create(rng, world, app, rp):
    body = {"name": f"new-{world.uuid()[:8]}", "uuid": world.uuid()}
    if rng.random() < 0.6:
        body["parent_provider_uuid"] = rp
    status, out = wsgi(app, "POST", "/resource_providers", body)
    if status == 200:
        world.providers[body["uuid"]] = {"name": body["name"], "inventory": {},
                                         "parent": body.get("parent_provider_uuid"),
                                         "traits": [], "aggregates": []}
        _inventory(rng, world, app, body["uuid"])
    return status, out


def _move(rng, world, app, rp):
    """Re-parent (1.37): under another provider, or up to a root."""
    here = _get(app, f"/resource_providers/{rp}")
    target = rng.choice(sorted(world.providers) + [None])
    status, out = wsgi(app, "PUT", f"/resource_providers/{rp}", {
        "name": here["name"], "parent_provider_uuid": target}, version="1.37")
    if status == 200:
        world.providers[rp]["parent"] = target
    return status, out


def _delete(rng, world, app, rp):
    status, out = wsgi(app, "DELETE", f"/resource_providers/{rp}")
    if status == 204:
        del world.providers[rp]
    return status, out


def _claim(rng, world, app, rp):
    world.app = app
    return world.write(world.uuid(), world._allocation()), None


WRITES = [_inventory, _inventory, _traits, _aggregates, _create, _move, _delete,
          _claim, _claim]


def test_the_copy_follows_every_write_at_once(apps):
    memory, sql = apps
    rng = random.Random(SEED + 1)
    world = Builder(memory, rng)
    world.build()
    # The copy is made now; every write below must reach it.
    _alike(memory, sql, "/allocation_candidates?resources=VCPU:1")
    kinds = {}
    for _ in range(60):
        write = rng.choice(WRITES)
        app = rng.choice([memory, sql])
        status, _out = write(rng, world, app, rng.choice(sorted(world.providers)))
        kinds.setdefault(write.__name__, set()).add(status)
        for _ in range(3):
            _alike(memory, sql, "/allocation_candidates?"
                   + urlencode(candidate_query(rng, world)))
        _alike(memory, sql, "/allocation_candidates?" + rng.choice(SIMPLE), "1.29")
    # Every kind of write ran and most succeeded.
    assert set(kinds) == {w.__name__ for w in WRITES}, kinds
    assert all(any(s in (200, 204) for s in statuses) for statuses in kinds.values()), kinds


def test_the_copy_is_read_again_only_where_facts_changed(db):
    """One full read, then only what the facts log names."""
    cache = FactsCache()
    with db.write() as conn:
        a = providers.create_provider(conn, "a")
        providers.create_provider(conn, "b")
    with db.read() as conn:
        first = cache.current(conn)
    with db.read() as conn:
        assert cache.current(conn) is first
    with db.write() as conn:
        providers.create_provider(conn, "c", parent_uuid=a.uuid)
    with db.read() as conn:
        second = cache.current(conn)
    assert (cache.loads, cache.refreshes) == (1, 1)
    assert len(second.members[a.id]) == 2
    assert sorted(second.uuid) != sorted(first.uuid)


FIELDS = ("uuid", "parent", "root", "members", "roots", "inventory", "traits",
          "aggregates", "trait_names", "class_names", "aggregate_ids", "sharing",
          "by_uuid", "bounds", "counts")


def _equal_to_a_whole_read(db, cache, note=None):
    """The cache's current copy, after checking it field by field against
    one read whole at the same heads."""
    with db.read() as conn:
        kept = cache.current(conn)
        whole = snapshot.load(conn, kept.heads)
    for name in FIELDS:
        assert getattr(kept, name) == getattr(whole, name), (note, name)
    assert {a: sorted(m) for a, m in kept.in_aggregate.items()} == {
        a: sorted(m) for a, m in whole.in_aggregate.items()}, note
    return kept


def test_a_refreshed_copy_equals_one_read_whole(db, apps):
    """What a refresh works out again only where providers changed (trees,
    sharing providers, aggregate members) is what a whole read gives."""
    memory, _sql = apps
    rng = random.Random(SEED + 2)
    world = Builder(memory, rng)
    world.build()
    cache = FactsCache()

    def same():
        return _equal_to_a_whole_read(db, cache)

    for _ in range(40):
        same()
        write = rng.choice(WRITES)
        write(rng, world, memory, rng.choice(sorted(world.providers)))
    # Sharing providers stop sharing, and one starts.
    kept = same()
    assert kept.sharing
    for pid in kept.sharing:
        rp = kept.uuid[pid]
        gen = _get(memory, f"/resource_providers/{rp}/traits")["resource_provider_generation"]
        assert wsgi(memory, "PUT", f"/resource_providers/{rp}/traits", {
            "resource_provider_generation": gen, "traits": []})[0] == 200
        assert pid not in same().sharing
    _traits(random.Random(3), world, memory, sorted(world.providers)[0])
    same()
    assert cache.loads == 1 and cache.refreshes > 10, (cache.loads, cache.refreshes)


def test_a_class_or_trait_id_given_again_shows_its_new_name(apps):
    """A custom class or trait deleted (no provider held it) and its id
    given to a new one: the copy shows the new name (SQLite reuses the
    highest id)."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    rp = world.provider("cn", inventory={"VCPU": world.inv(8)})
    for path in ("/resource_classes/CUSTOM_OLD", "/traits/CUSTOM_OLD"):
        assert wsgi(memory, "PUT", path, version="1.7")[0] == 201
    path = "/allocation_candidates?resources=VCPU:1"
    _alike(memory, sql, path)
    for path in ("/resource_classes/CUSTOM_OLD", "/traits/CUSTOM_OLD"):
        assert wsgi(sql, "DELETE", path, version="1.7")[0] == 204
    for path in ("/resource_classes/CUSTOM_NEW", "/traits/CUSTOM_NEW"):
        assert wsgi(sql, "PUT", path, version="1.7")[0] == 201
    body = _get(sql, f"/resource_providers/{rp}/inventories")
    body["inventories"]["CUSTOM_NEW"] = world.inv(4)
    assert wsgi(sql, "PUT", f"/resource_providers/{rp}/inventories", body)[0] == 200
    gen = _get(sql, f"/resource_providers/{rp}/traits")["resource_provider_generation"]
    assert wsgi(sql, "PUT", f"/resource_providers/{rp}/traits", {
        "resource_provider_generation": gen, "traits": ["CUSTOM_NEW"]})[0] == 200
    status, body = _alike(memory, sql, "/allocation_candidates?resources=CUSTOM_NEW:1")
    (summary,) = body["provider_summaries"].values()
    assert "CUSTOM_NEW" in summary["resources"] and summary["traits"] == ["CUSTOM_NEW"]


def _claim_on(app, rp, vcpu=1):
    return wsgi(app, "PUT", f"/allocations/{uuidlib.uuid4()}", {
        "allocations": {rp: {"resources": {"VCPU": vcpu}}}, "project_id": "p",
        "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"})


def test_a_claim_through_a_stale_copy_never_lands_elsewhere(apps):
    """Claims take provider ids from the copy as last read, unchecked: a
    provider deleted since (its id perhaps given to a new provider, as
    SQLite does) is refused as unknown, and the new provider is untouched."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    keep = world.provider("keep", inventory={"VCPU": world.inv(8)})
    gone = world.provider("gone", inventory={"VCPU": world.inv(8)})
    _alike(memory, sql, "/allocation_candidates?resources=VCPU:1")  # the copy
    assert _claim_on(memory, gone)[0] == 204
    assert wsgi(sql, "DELETE", f"/allocations/{_consumers_of(sql, gone)[0]}")[0] == 204
    assert wsgi(sql, "DELETE", f"/resource_providers/{gone}")[0] == 204
    new = Builder(sql, random.Random(SEED + 9)).provider(
        "new", inventory={"VCPU": world.inv(8)})
    status, body = _claim_on(memory, gone)
    assert status == 400 and "does not exist" in body["errors"][0]["detail"], body
    assert _get(sql, f"/resource_providers/{new}/usages")["usages"] == {"VCPU": 0}
    assert _claim_on(memory, keep)[0] == 204
    assert _get(sql, f"/resource_providers/{keep}/usages")["usages"] == {"VCPU": 1}


def _consumers_of(app, rp):
    return sorted(_get(app, f"/resource_providers/{rp}/allocations")["allocations"])


def test_a_database_restored_under_the_copy_is_read_again(db, monkeypatch):
    """A backup restored in place: the log's serials go back while the
    copy holds later facts. Behind for longer than any request waits for
    the lock, the log is taken to have gone back, and all is read again."""
    cache = FactsCache()
    with db.write() as conn:
        kept = providers.create_provider(conn, "kept")
    with db.read() as conn:
        before = cache.current(conn)
    with db.write() as conn:
        providers.create_provider(conn, "lost in the restore")
    with db.read() as conn:
        assert len(cache.current(conn).uuid) == 2
    # The restore: the second provider and its log entry are gone.
    with db.engine.begin() as conn:
        lost = t.resource_providers.c.id != kept.id
        # A root points at itself: InnoDB wants that let go first.
        conn.execute(t.resource_providers.update().where(lost).values(
            root_provider_id=None))
        conn.execute(t.resource_providers.delete().where(lost))
        for shard, head in enumerate(before.heads[1:]):
            conn.execute(t.facts_heads.update().where(
                t.facts_heads.c.shard == shard).values(serial=head.serial))
    with db.read() as conn:
        # Within the wait a request may have had: the newer copy stands.
        assert len(cache.current(conn).uuid) == 2
    monkeypatch.setattr(facts_cache, "BEHIND_AT_MOST", 0.0)
    with db.read() as conn:
        assert list(cache.current(conn).uuid) == [kept.id]
    assert cache.loads == 2


def test_a_query_remembered_answers_per_version_and_refusals_repeat(apps):
    """Parsed queries are remembered per query string and microversion: the
    same string means other things at other versions, and a refused one is
    refused every time."""
    memory, _sql = apps
    Builder(memory, random.Random(SEED)).provider(
        "cn", inventory={"VCPU": {"total": 8, "max_unit": 8}})
    path = "/allocation_candidates?resources=VCPU:1&limit=1"
    for _ in range(2):
        assert wsgi(memory, "GET", path, version="1.15")[0] == 400
        status, body = wsgi(memory, "GET", path, version="1.16")
        assert status == 200 and isinstance(body["allocation_requests"][0]["allocations"], dict)
        status, body = wsgi(memory, "GET", path.replace("&limit=1", ""), version="1.10")
        assert status == 200 and isinstance(body["allocation_requests"][0]["allocations"], list)


def test_a_trees_walk_is_remembered_until_its_options_change(db, apps):
    """Over the copy, each tree's walk is kept per request shape and
    reused while the tree's options (what passed against `used`) stay the
    same; a claim that changes them makes a new walk."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    root = world.provider("cn", inventory={"DISK_GB": world.inv(100)})
    for n in range(2):
        world.provider(f"numa{n}", parent=root, inventory={"VCPU": world.inv(1)})
    path = ("/allocation_candidates?resources=DISK_GB:10&resources1=VCPU:1"
            "&resources2=VCPU:1&group_policy=isolate")
    query = parse_candidate_request(
        {k: [v] for k, v in (p.split("=") for p in path.split("?")[1].split("&"))},
        query_dialect(Version.parse("1.39")))
    cache = FactsCache()

    def walk():
        with db.read() as conn:
            snap = cache.current(conn)
            found = engine.find(conn, query, snapshot=snap, kept=cache.kept)
            shape = Plan(query, engine.resolve(conn, query, snap)).walk_shape
        walks = cache.kept.of(snap, shape, by_tree=True)
        return [c.providers for c in found.candidates], dict(walks)

    first, kept = walk()
    assert len(first) == 2 and len(kept) == 1
    again, kept_again = walk()
    assert again == first and kept_again == kept
    numa0 = next(u for u, p in world.providers.items() if p["name"] == "numa0")
    assert _claim_on(memory, numa0)[0] == 204
    after, kept_after = walk()
    assert after == [] and len(kept_after) == 2
    _alike(memory, sql, path)


def test_a_summary_shown_again_follows_its_providers_usage(apps):
    """A provider's summary text is kept with the usage it shows and shown
    again while that usage holds; a claim or its deletion, which change
    no fact the copy holds, changes that provider's summary alone."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    one = world.provider("one", inventory={"VCPU": world.inv(8)})
    other = world.provider("other", inventory={"VCPU": world.inv(8)})
    path = "/allocation_candidates?resources=VCPU:1"

    def used():
        body = _alike(memory, sql, path)[1]
        return {rp: s["resources"]["VCPU"]["used"]
                for rp, s in body["provider_summaries"].items()}

    assert used() == used() == {one: 0, other: 0}
    assert _claim_on(memory, one, vcpu=3)[0] == 204
    assert used() == {one: 3, other: 0}
    assert wsgi(sql, "DELETE", f"/allocations/{_consumers_of(sql, one)[0]}")[0] == 204
    assert used() == used() == {one: 0, other: 0}


# -- a full answer kept tree by tree (by_tree.tree_parts) ----------------------

@pytest.fixture
def by_tree(monkeypatch):
    """What by_tree.tree_parts did: how many answers it gave (None: the
    request was searched as usual) and which trees each walked."""
    seen = {"answers": 0, "walked": []}
    real_parts, real_candidates = by_tree_module.tree_parts, engine.Search.candidates

    def parts(*args, **kwargs):
        out = real_parts(*args, **kwargs)
        seen["answers"] += out is not None
        return out

    def candidates(self):
        if self.trees is not None:
            seen["walked"].append(list(self.trees))
        return real_candidates(self)

    monkeypatch.setattr(by_tree_module, "tree_parts", parts)
    monkeypatch.setattr(engine.Search, "candidates", candidates)
    return seen


def test_a_full_answer_kept_by_tree_follows_every_write(apps, by_tree):
    """Without sharing providers, a full answer is kept tree by tree and
    only the trees whose usage changed are walked again; writes of every
    kind, through either app, and every answer format must still get
    what SQL answers."""
    memory, sql = apps
    rng = random.Random(SEED + 2)
    world = Builder(memory, rng)
    world.build(sharing=False)
    queries = [candidate_query(rng, world) for _ in range(12)] + [
        [("resources", q.split("=")[1])] for q in SIMPLE]
    trees = len([p for p in world.providers.values() if p["parent"] is None])
    for _ in range(30):
        write = rng.choice(WRITES)
        write(rng, world, rng.choice([memory, sql]), rng.choice(sorted(world.providers)))
        for query in rng.sample(queries, 4):
            _alike(memory, sql, "/allocation_candidates?" + urlencode(query),
                   rng.choice(["1.12", "1.17", "1.29", "1.34", "1.39"]))
            # A bound may fall within a tree's candidates.
            _alike(memory, sql, "/allocation_candidates?" + urlencode(
                query + [("limit", str(rng.randint(1, 4)))]), rng.choice(["1.17", "1.39"]))
    # Most answers were made of kept parts; many walked only some trees
    # (each query and format walks every tree once, and after a write
    # changing facts the trees it touched).
    assert by_tree["answers"] > 100, by_tree["answers"]
    assert len(by_tree["walked"]) < by_tree["answers"]
    partial = [w for w in by_tree["walked"] if len(w) < trees]
    assert len(partial) >= 10, by_tree["walked"]


def test_only_the_trees_whose_usage_changed_are_walked_again(apps, by_tree):
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    flat = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(4)}) for n in range(3)]
    root = world.provider("nested", inventory={"DISK_GB": world.inv(100)})
    numa = [world.provider(f"numa{n}", parent=root, inventory={"VCPU": world.inv(4)})
            for n in range(2)]
    path = "/allocation_candidates?resources=VCPU:1"

    def answer(version="1.39"):
        body = _alike(memory, sql, path, version)[1]
        return sorted(rp for a in body["allocation_requests"] for rp in a["allocations"])

    def walked():
        out = by_tree["walked"][:]
        by_tree["walked"].clear()
        return [len(trees) for trees in out]

    everything = sorted(flat + numa)
    assert answer() == everything and walked() == [4]
    assert answer() == everything and walked() == []
    # Fill cn0: its tree alone is walked again, and it is no candidate.
    assert _claim_on(memory, flat[0], vcpu=4)[0] == 204
    assert answer() == sorted(flat[1:] + numa) and walked() == [1]
    assert answer() == sorted(flat[1:] + numa) and walked() == []
    # A claim in the nested tree, made by the other app, shows in its
    # summary: that tree alone is walked again.
    assert _claim_on(sql, numa[1], vcpu=1)[0] == 204
    body = _alike(memory, sql, path)[1]
    assert body["provider_summaries"][numa[1]]["resources"]["VCPU"]["used"] == 1
    assert walked() == [1]
    assert wsgi(sql, "DELETE", f"/allocations/{_consumers_of(sql, flat[0])[0]}")[0] == 204
    assert answer() == everything and walked() == [1]
    # Another microversion's format renders the same parts; one asking
    # for other summaries (before 1.29: the providers allocated from, not
    # whole trees) has parts of its own.
    assert answer("1.29") == everything and walked() == []
    assert answer("1.17") == everything and walked() == [4]
    assert by_tree["answers"] == 8


def test_a_bounded_answer_kept_by_tree_walks_no_further_than_its_bound(
        apps, by_tree, monkeypatch):
    """A tree may hold far more candidates than the bound gives (every
    split of ten groups over two providers: 1,024); the walk stops at the
    bound, and that tree's part, cut short, is not kept."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    root = world.provider("cn", inventory={})
    for name in ("a", "b"):
        world.provider(name, parent=root, inventory={"DISK_GB": world.inv(100000)})
    made = []
    real = engine.Search._candidate
    monkeypatch.setattr(engine.Search, "_candidate",
                        lambda self, chosen: made.append(1) or real(self, chosen))
    groups = "&".join(f"resources{i}=DISK_GB:{i}" for i in range(1, 11))
    path = f"/allocation_candidates?{groups}&group_policy=none&limit=5"
    for _ in range(2):
        made.clear()
        body = _answer(memory, path, "1.39")[1]
        # The bound's and one more, which tells where the walk stopped.
        assert len(body["allocation_requests"]) == 5 and len(made) == 6
    # Walked again: a part cut short is not kept.
    assert len(by_tree["walked"]) == 2 and by_tree["answers"] == 2
    assert body == _answer(sql, path, "1.39")[1]


def test_a_claim_does_not_widen_a_bounded_answers_scan(db, apps):
    """A bounded answer goes through the trees in order until the bound
    is met; a tree whose usage changed counts, until walked again, what
    it gave last, so one claim does not make the next request go through
    (and read the usage of) every tree after the bound."""
    memory, _sql = apps
    world = Builder(memory, random.Random(SEED))
    flat = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(4)}) for n in range(6)]
    for n in range(5):
        world.provider(f"disk{n}", inventory={"DISK_GB": world.inv(100)})
    query = parse_candidate_request({"resources": ["VCPU:1"], "limit": ["3"]},
                                    query_dialect(Version.parse("1.39")))
    cache = FactsCache()

    def scanned():
        with db.read() as conn:
            snap = cache.current(conn)
            parts = by_tree_module.tree_parts(conn, query, snap, 3, cache.kept)
        assert sum(len(p.candidates) for p in parts.parts) == 3
        (kept,) = [v for k, v in cache.kept.shapes() if k[0] == "answer by tree"]
        return kept.note

    # Nothing kept yet: every tree that can serve VCPU is scanned (the
    # disks' five trees cannot, whatever they use: viable.py), but what is
    # noted for the next answer's first read is the three it needed.
    assert scanned() == 3
    assert scanned() == 3
    assert _claim_on(memory, flat[1])[0] == 204
    assert scanned() == 3


def test_what_a_shape_kept_carries_over_only_where_no_tree_changed(db, apps):
    """A refresh carries a shape's per-provider verdicts and per-tree walks
    over to the new copy (kept.Kept), except for every provider of a
    tree a write touched: a child's verdict reads its root's aggregates,
    a root's reads how many providers its tree has."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    agg = world.aggregates[0]
    root = world.provider("r1", inventory={"DISK_GB": world.inv(100)})
    world.provider("c1", parent=root, inventory={"VCPU": world.inv(8)})
    alone = world.provider("s1", inventory={"VCPU": world.inv(8)})
    others = [world.provider(f"o{n}", inventory={"VCPU": world.inv(8)}) for n in range(3)]
    spans = "/allocation_candidates?resources=VCPU:1&member_of=" + agg
    both = "/allocation_candidates?resources=VCPU:1,DISK_GB:10"
    cache = FactsCache()

    def answers():
        return (_alike(memory, sql, spans)[1]["allocation_requests"],
                _alike(memory, sql, both)[1]["allocation_requests"])

    def put_aggregates(rp, aggs):
        gen = _get(memory, f"/resource_providers/{rp}/aggregates")[
            "resource_provider_generation"]
        assert wsgi(memory, "PUT", f"/resource_providers/{rp}/aggregates", {
            "resource_provider_generation": gen, "aggregates": aggs})[0] == 200

    spanned, joint = answers()
    assert spanned == [] and len(joint) == 1
    # The root joins the aggregate: its child now matches through it.
    put_aggregates(root, [agg])
    spanned, joint = answers()
    assert [list(a["allocations"]) for a in spanned] == [[
        next(u for u, p in world.providers.items() if p["name"] == "c1")]]
    # A provider alone in its tree gets a child with the other class: its
    # tree now serves both classes.
    world.provider("s1-disk", parent=alone, inventory={"DISK_GB": world.inv(100)})
    spanned, joint = answers()
    assert len(joint) == 2
    # A write elsewhere: what the untouched providers had is carried, not
    # worked out again.
    with db.read() as conn:
        before = cache.current(conn)
        found = engine.find(conn, parse_candidate_request(
            {"resources": ["VCPU:1"]}, query_dialect(Version.parse("1.39"))),
            snapshot=before, kept=cache.kept)
    assert found.candidates
    (key, kept), = [(k, v) for k, v in cache.kept.shapes() if not v.by_tree]
    put_aggregates(others[0], [agg])
    with db.read() as conn:
        after = cache.current(conn)
        engine.find(conn, parse_candidate_request(
            {"resources": ["VCPU:1"]}, query_dialect(Version.parse("1.39"))),
            snapshot=after, kept=cache.kept)
    carried = cache.kept.of(after, key)
    assert carried.before is kept and kept.before is None
    moved = before.by_uuid[others[0]]
    assert moved in carried.gone and moved in carried
    untouched = before.by_uuid[others[1]]
    assert untouched not in carried.gone
    assert carried[untouched] is kept[untouched]


def test_a_serving_worker_freezes_the_copy_it_read_at_start(db, apps):
    """The start-up read (app._read_facts, run by a serving worker) moves
    the copy out of the collector's full passes: at 100,000 providers
    each pass walked it for 25-30 ms, every few candidates requests, and
    freed nothing."""
    import gc
    from types import SimpleNamespace
    from placement_lite import app as app_module
    memory, _sql = apps
    world = Builder(memory, random.Random(SEED))
    for n in range(40):
        world.provider(f"cn{n}", inventory={"VCPU": world.inv(8)},
                       traits=["HW_CPU_X86_AVX2"], aggs=[world.aggregates[0]])
    # No checks after the read: the thread would go on checking.
    services = SimpleNamespace(db=db, facts=FactsCache(check_every=0))
    gc.unfreeze()
    try:
        app_module._read_facts(services)
        # The collector's generations (what its passes walk) no longer
        # hold the copy's tables, nor a provider's inventory map in them:
        # frozen after the read, not before it.
        snap = services.facts.latest()
        walked = {id(o) for o in gc.get_objects()}
        held = [snap.inventory, snap.traits, snap.aggregates,
                *list(snap.inventory.values())[:5]]
    finally:
        gc.unfreeze()
    assert services.facts.loads == 1
    assert [id(o) in walked for o in held] == [False] * len(held)
    # Unfrozen, the same objects are the collector's again.
    walked = {id(o) for o in gc.get_objects()}
    assert all(id(o) in walked for o in held)


def test_a_replaced_copy_is_freed_without_the_cycle_collector(db, apps):
    """What makes freezing the start-up copy safe: a copy, and what it
    keeps per request shape, hold no reference cycles, so once a refresh
    replaces them reference counting frees them even when frozen (a
    frozen cycle would never be freed)."""
    import gc
    memory, _sql = apps
    world = Builder(memory, random.Random(SEED))
    rps = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(8)})
           for n in range(5)]
    cache = FactsCache()
    query = parse_candidate_request({"resources": ["VCPU:1"]},
                                    query_dialect(Version.parse("1.39")))
    with db.read() as conn:
        assert engine.find(conn, query, snapshot=cache.current(conn),
                           kept=cache.kept).candidates
    world.call("PUT", f"/resource_providers/{rps[0]}/traits", {
        "resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX2"]})
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with db.read() as conn:
            after = cache.current(conn)
            engine.find(conn, query, snapshot=after, kept=cache.kept)
        assert cache.refreshes == 1
        del cache, after
        gc.collect()
        cyclic = [o for o in gc.garbage
                  if isinstance(o, (snapshot.Snapshot, Kept, FactsCache))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert cyclic == []


def test_a_kept_limit_decides_as_the_capacity_check_does():
    """The filters compare `used` against a bound kept with the copy
    (_most_used); it must decide exactly as Inventory.fits's
    `used + amount <= capacity`, capacity being a float: fractions, the
    infinities, and beyond 2**53, where subtracting from the float rounds
    (2**53 + 1 more fits under 2**53 + 2 when 1 is asked)."""
    caps = [None, 0.0, 10.0, 11.000000000000002, 12.5, -3.0, float(2**53 + 2),
            1e30, float("inf"), float("-inf")]
    used_values = [0, 1, 9, 10, 11, 12, 13, 2**53, 2**53 + 1, 2**53 + 2, 10**31]
    for cap in caps:
        for amount in (1, 2, 11, 2**31):
            most = _most_used(cap, amount)
            for used in used_values:
                want = cap is not None and cap >= used + amount
                assert (used <= most) == want, (cap, amount, used)


# -- refreshes larger than one chunk of ids -------------------------------------

def _pf_world(app, roots=5, children=100, threads=4):
    """The issue's world: `roots` roots, each with `children` children
    holding CUSTOM_PF: 4, written from several client threads."""
    from concurrent.futures import ThreadPoolExecutor

    assert wsgi(app, "PUT", "/resource_classes/CUSTOM_PF", version="1.7")[0] in (201, 204)

    def child(parent, n):
        rp = str(uuidlib.uuid4())
        assert wsgi(app, "POST", "/resource_providers", {
            "name": f"pf-{rp}", "uuid": rp, "parent_provider_uuid": parent})[0] == 200
        status, out = wsgi(app, "PUT", f"/resource_providers/{rp}/inventories", {
            "resource_provider_generation": 0,
            "inventories": {"CUSTOM_PF": {"total": 4}}})
        assert status == 200, out

    with ThreadPoolExecutor(threads) as pool:
        for r in range(roots):
            root = str(uuidlib.uuid4())
            assert wsgi(app, "POST", "/resource_providers",
                        {"name": f"root-{r}", "uuid": root})[0] == 200
            list(pool.map(lambda n, root=root: child(root, n), range(children)))


def test_a_refresh_of_more_providers_than_one_read_holds_keeps_them_all(apps):
    """The issue's reproduction: 505 providers changed since the copy was
    read (more than one chunk of ids); every one of them is a candidate."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    for n in range(20):
        world.provider(f"flat{n}", inventory={"VCPU": world.inv(8)})
    assert len(_alike(memory, sql, "/allocation_candidates?resources=VCPU:1")[1][
        "allocation_requests"]) == 20
    _pf_world(memory)
    _status, body = _alike(memory, sql, "/allocation_candidates?resources=CUSTOM_PF:1")
    assert len(body["allocation_requests"]) == 500
    assert len(body["provider_summaries"]) == 505


def test_a_refresh_read_in_many_chunks_equals_one_read_whole(db, apps, monkeypatch):
    """Refreshes of every size against chunks of a few ids: whatever the
    chunking, the refreshed copy is the one a whole read gives."""
    monkeypatch.setattr(snapshot, "IN_CHUNK", 3)
    memory, _sql = apps
    rng = random.Random(SEED + 5)
    world = Builder(memory, rng)
    world.build()
    cache = FactsCache()
    with db.read() as conn:
        cache.current(conn)
    for batch in (1, 2, 3, 4, 7, 12, 25):
        for _ in range(batch):
            rng.choice(WRITES)(rng, world, memory, rng.choice(sorted(world.providers)))
        _equal_to_a_whole_read(db, cache, batch)
    # Never read whole again; a batch whose writes were all refused
    # changed nothing to refresh.
    assert cache.loads == 1 and cache.refreshes >= 5, (cache.loads, cache.refreshes)


# -- a published copy never changes --------------------------------------------

def _fingerprint(snap) -> dict:
    """Every slot of a copy, by identity and by value."""
    import copy
    return {name: (id(getattr(snap, name)), copy.deepcopy(getattr(snap, name)))
            for name in snapshot.Snapshot.__slots__}


def test_requests_never_change_the_copy_they_read(db, apps):
    """Requests of many shapes, through the engine and the API, derive and
    keep what they like; the copy they read stays as it was built."""
    memory, _sql = apps
    rng = random.Random(SEED + 6)
    world = Builder(memory, rng)
    world.build()
    cache = FactsCache()
    with db.read() as conn:
        snap = cache.current(conn)
    before = _fingerprint(snap)
    for _ in range(30):
        query = parse_candidate_request(
            {k: [v] for k, v in candidate_query(rng, world)},
            query_dialect(Version.parse("1.39")))
        with db.read() as conn:
            assert cache.current(conn) is snap
            try:
                engine.find(conn, query, snapshot=snap, kept=cache.kept)
            except Exception as exc:  # noqa: BLE001 - an unknown name is a 400
                assert type(exc).__name__.startswith(("Unknown", "Bad")), exc
        wsgi(memory, "GET", "/allocation_candidates?" + urlencode(candidate_query(rng, world)))
    assert _fingerprint(snap) == before
    assert len(cache.kept.shapes()) > 5


def test_a_refresh_meeting_requests_of_new_shapes_never_fails(db, apps, monkeypatch):
    """The interleaving that broke the copy: while a refresh carries each
    request shape's kept values over to the new copy, a request on the
    old copy asks for a shape not seen yet. It must neither fail the
    refresh ("dictionary changed size during iteration") nor the request;
    both answers stay right."""
    import threading
    from placement_lite.candidates import kept as kept_module
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    rps = [world.provider(f"cn{n}", inventory={"VCPU": world.inv(8),
                                               "MEMORY_MB": world.inv(4096)})
           for n in range(4)]
    dialect = query_dialect(Version.parse("1.39"))

    def ask(text, snap):
        query = parse_candidate_request(
            {k: [v] for k, v in (p.split("=") for p in text.split("&"))}, dialect)
        with db.read() as conn:
            return len(engine.find(conn, query, snapshot=snap, kept=cache.kept).candidates)

    cache = FactsCache()
    with db.read() as conn:
        old = cache.current(conn)
    assert ask("resources=VCPU:1", old) == ask("resources=MEMORY_MB:128", old) == 4
    assert len(cache.kept.shapes()) >= 2
    asked: list = []
    real = kept_module.Kept.refreshed

    def refreshed(self, gone):
        if not asked:
            # Another thread's request on the old copy, with a new shape,
            # runs now, in the middle of the carrying over.
            asked.append(None)
            worker = threading.Thread(
                target=lambda: asked.append(ask("resources=VCPU:2,MEMORY_MB:256", old)))
            worker.start()
            worker.join(timeout=0.5)
            asked.append(worker)
        return real(self, gone)

    monkeypatch.setattr(kept_module.Kept, "refreshed", refreshed)
    world.call("PUT", f"/resource_providers/{rps[0]}/traits", {
        "resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX2"]})
    with db.read() as conn:
        new = cache.current(conn)
    assert new is not old and cache.refreshes == 1
    worker = next(a for a in asked if isinstance(a, threading.Thread))
    worker.join(timeout=10)
    assert 4 in asked, asked  # the request on the old copy answered
    assert ask("resources=VCPU:2,MEMORY_MB:256", new) == 4
    _alike(memory, sql, "/allocation_candidates?resources=VCPU:2,MEMORY_MB:256")


# -- the self-check -------------------------------------------------------------

def test_a_copy_that_differs_from_the_database_is_found_logged_and_read_again(
        db, apps, monkeypatch, caplog):
    """A copy gone wrong (here: the chunked refresh's old bug, put back)
    is found by the self-check, counted, logged, and replaced by a whole
    read; a right copy checks the same."""
    memory, sql = apps
    world = Builder(memory, random.Random(SEED))
    for n in range(12):
        world.provider(f"cn{n}", inventory={"VCPU": world.inv(8)})
    cache = FactsCache(check_every=3600)
    with db.read() as conn:
        cache.current(conn)
        assert cache.check(conn) == []
    assert cache.checks == {"same": 1, "different": 0, "inconclusive": 0}

    def blanking_read(self, conn, statements, params):
        real_read(self, conn, statements, params)
        for rp in self.uuid:  # every provider read so far, as the bug did
            self.inventory[rp] = {}
    real_read = snapshot._Rows.read
    monkeypatch.setattr(snapshot, "IN_CHUNK", 2)
    monkeypatch.setattr(snapshot._Rows, "read", blanking_read)
    for n in range(5):
        world.provider(f"more{n}", inventory={"VCPU": world.inv(8)})
    with db.read() as conn:
        wrong = cache.current(conn)
    assert sum(1 for inv in wrong.inventory.values() if not inv) >= 4
    monkeypatch.setattr(snapshot._Rows, "read", real_read)
    # The check (a serving process's facts thread runs it every
    # facts_check_seconds) finds it, and the copy is read whole again
    # before anything else reads it.
    with caplog.at_level("ERROR"), db.read() as conn:
        found = cache.check(conn)
        right = cache.current(conn)
    assert found and any("inventory" in line for line in found), found
    assert right is not wrong, cache.checks
    assert cache.checks["different"] == 1 and cache.loads == 2
    assert "differs from the database" in caplog.text and "inventory" in caplog.text
    with db.read() as conn:
        assert cache.check(conn) == []
    query = parse_candidate_request({"resources": ["VCPU:1"]},
                                    query_dialect(Version.parse("1.39")))
    with db.read() as conn:
        assert len(engine.find(conn, query, snapshot=cache.current(conn)).candidates) == 17


def test_a_check_while_a_write_lands_tells_nothing(db, apps, monkeypatch):
    """Heads moved between the check's reads: inconclusive, not a difference."""
    from placement_lite.candidates import selfcheck
    from placement_lite.db import facts_log
    memory, _sql = apps
    world = Builder(memory, random.Random(SEED))
    world.provider("cn", inventory={"VCPU": world.inv(8)})
    cache = FactsCache(check_every=3600)
    real_heads = facts_log.heads
    calls = []

    def heads(conn):
        calls.append(None)
        got = real_heads(conn)
        return got if len(calls) < 3 else ("moved",) + tuple(got[1:])
    with db.read() as conn:
        cache.current(conn)
        monkeypatch.setattr(selfcheck.facts_log, "heads", heads)
        calls.clear()
        assert cache.check(conn) is None
    assert cache.checks["inconclusive"] == 1 and cache.loads == 1


def test_a_parts_text_goes_with_the_part():
    """The API keeps each tree part's text only as long as the engine
    keeps the part: no text outlives it, whatever the format."""
    import gc
    from placement_lite.api.render.candidates import Format, PartTexts, _PartText
    from placement_lite.candidates.by_tree import TreePart
    texts = PartTexts()
    fmts = [Format(True, True, None, True, True), Format(True, False, None, True, False)]
    part = TreePart((None,), ((1, 1),), (), (1,), 0)
    other = TreePart((None,), ((2, 1),), (), (2,), 0)
    assert part.token != other.token
    for fmt in fmts:
        PartTexts.put(texts.table(fmt), part, _PartText("a", ("a",), "s"))
        PartTexts.put(texts.table(fmt), other, _PartText("b", ("b",), "t"))
    assert [len(texts.table(fmt)) for fmt in fmts] == [2, 2]
    token = part.token
    del part
    gc.collect()
    assert [sorted(texts.table(fmt)) for fmt in fmts] == [[other.token]] * 2
    assert token not in texts.table(fmts[0])
