"""Every write that changes a provider's facts logs exactly the providers
it changed (db/facts_log), and nothing else moves the heads.

Each process's copy of the facts (existence, tree, inventory but `used`,
traits, aggregates) is only as fresh as this log: a write that changes
facts without logging them leaves processes answering from a stale copy;
a claim that logs would put every claim on the heads' row locks. So
every fact-changing route is driven here through the app, and the log
read back after it: the providers named, and the shards whose heads
moved, are exactly those of the providers changed (a move names the
whole subtree it takes along). Claims, refused writes and writes that
change nothing leave the heads where they were.
"""
from __future__ import annotations

import uuid as uuidlib

import pytest
from falcon import testing
from sqlalchemy import func, select

from placement_lite import errors
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import facts_log, importer
from placement_lite.db import tables as t
from placement_lite.db.engine import Database
from placement_lite.ledger import providers, resource_classes, traits

LATEST = "placement latest"


@pytest.fixture
def client(db):
    app = create_app(Settings(db=db.url), db=db)
    return testing.TestClient(app, headers={
        "x-auth-token": "admin", "openstack-api-version": LATEST})


def _heads(db) -> tuple:
    with db.read() as conn:
        return facts_log.heads(conn)


def _ids(db, *uuids) -> list[int]:
    rp = t.resource_providers
    with db.read() as conn:
        found = dict(conn.execute(select(rp.c.uuid, rp.c.id)
                                  .where(rp.c.uuid.in_(uuids))).all())
    return [found[u] for u in uuids]


def _shards(heads: tuple) -> tuple:
    """The shards' heads, by shard (what comes before them names the
    database)."""
    return heads[-facts_log.SHARDS:]


def _logged_since(db, before: tuple):
    """(what `changes` says changed since `before`, the shards that moved)."""
    with db.read() as conn:
        now = facts_log.heads(conn)
        changed = facts_log.changes(conn, before, now)
    assert now[:-facts_log.SHARDS] == before[:-facts_log.SHARDS]
    moved = {shard for shard, (old, new) in
             enumerate(zip(_shards(before), _shards(now))) if old != new}
    return changed, moved


def _expect(db, before: tuple, ids) -> tuple:
    """Assert the log since `before` names exactly `ids`, in their shards
    only; the heads now, for the next step."""
    changed, moved = _logged_since(db, before)
    assert changed == set(ids)
    assert moved == {facts_log.shard_of(i) for i in ids}
    return _heads(db)


def _unchanged(db, before: tuple) -> None:
    assert _heads(db) == before


def _ok(resp, status=None):
    if status is None:
        assert resp.status_code < 300, resp.text
    else:
        assert resp.status_code == status, resp.text
    return resp


def _create(client, name, parent=None) -> str:
    rp = str(uuidlib.uuid4())
    body = {"name": name, "uuid": rp}
    if parent:
        body["parent_provider_uuid"] = parent
    _ok(client.simulate_post("/resource_providers", json=body))
    return rp


def _generation(client, rp) -> int:
    return _ok(client.simulate_get(f"/resource_providers/{rp}")).json["generation"]


def _set_inventory(client, rp, **totals):
    return _ok(client.simulate_put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": _generation(client, rp),
        "inventories": {rc: {"total": n} for rc, n in totals.items()}}))


def _claim_body(allocations, project, user, generation=None):
    return {"allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": project, "user_id": user,
            "consumer_generation": generation, "consumer_type": "INSTANCE"}


def test_a_fresh_database_logs_nothing_and_a_first_read_reloads_all(db):
    heads = _heads(db)
    assert all(h == facts_log.Head(0, 0) for h in _shards(heads))
    with db.read() as conn:
        assert facts_log.changes(conn, (), heads) is None
        assert facts_log.changes(conn, heads, heads) == set()


def test_provider_create_rename_and_delete(client, db):
    before = _heads(db)
    root = _create(client, "root")
    before = _expect(db, before, _ids(db, root))
    child = _create(client, "child", parent=root)
    before = _expect(db, before, _ids(db, child))
    _ok(client.simulate_put(f"/resource_providers/{root}", json={"name": "renamed"}))
    before = _expect(db, before, _ids(db, root))
    [child_id] = _ids(db, child)
    _ok(client.simulate_delete(f"/resource_providers/{child}"))
    _expect(db, before, [child_id])


def test_a_move_logs_the_provider_and_every_provider_below_it(client, db):
    """From 1.37 a provider may move under another parent, or become a
    root, taking its subtree along: the root of every one of them changes."""
    root1 = _create(client, "root1")
    root2 = _create(client, "root2")
    a = _create(client, "a", parent=root1)
    b = _create(client, "b", parent=a)
    c = _create(client, "c", parent=a)
    d = _create(client, "d", parent=b)
    _create(client, "beside", parent=root1)
    moved = _ids(db, a, b, c, d)

    before = _heads(db)
    _ok(client.simulate_put(f"/resource_providers/{a}", json={
        "name": "a", "parent_provider_uuid": root2}))
    before = _expect(db, before, moved)
    body = _ok(client.simulate_get(f"/resource_providers/{d}")).json
    assert body["root_provider_uuid"] == root2

    # Un-parented: the subtree's root is now `a`.
    _ok(client.simulate_put(f"/resource_providers/{a}", json={
        "name": "a", "parent_provider_uuid": None}))
    before = _expect(db, before, moved)

    # A root given a parent (allowed before 1.37 too) takes its tree along.
    _ok(client.simulate_put(f"/resource_providers/{a}", json={
        "name": "a", "parent_provider_uuid": root1},
        headers={"openstack-api-version": "placement 1.14"}))
    before = _expect(db, before, moved)

    # Moving below itself is refused: nothing logged.
    _ok(client.simulate_put(f"/resource_providers/{a}", json={
        "name": "a", "parent_provider_uuid": d}), 400)
    _unchanged(db, before)


def test_inventory_writes(client, db):
    rp = _create(client, "cn")
    other = _create(client, "other")
    [rp_id] = _ids(db, rp)
    before = _heads(db)

    _set_inventory(client, rp, VCPU=8, MEMORY_MB=1024)
    before = _expect(db, before, [rp_id])
    _ok(client.simulate_post(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": _generation(client, rp),
        "resource_class": "DISK_GB", "total": 100}))
    before = _expect(db, before, [rp_id])
    _ok(client.simulate_put(f"/resource_providers/{rp}/inventories/VCPU", json={
        "resource_provider_generation": _generation(client, rp), "total": 16}))
    before = _expect(db, before, [rp_id])
    _ok(client.simulate_delete(f"/resource_providers/{rp}/inventories/DISK_GB"))
    before = _expect(db, before, [rp_id])
    _ok(client.simulate_delete(f"/resource_providers/{rp}/inventories"))
    before = _expect(db, before, [rp_id])

    # Refused writes log nothing: a stale generation, an unknown class,
    # a class the provider does not have.
    _ok(client.simulate_put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1}}}), 409)
    _ok(client.simulate_put(f"/resource_providers/{rp}/inventories", json={
        "resource_provider_generation": _generation(client, rp),
        "inventories": {"CUSTOM_NOPE": {"total": 1}}}), 400)
    _ok(client.simulate_delete(f"/resource_providers/{rp}/inventories/VCPU"), 404)
    # Emptying an empty inventory writes no row.
    _ok(client.simulate_delete(f"/resource_providers/{other}/inventories"))
    _unchanged(db, before)


def test_an_inventory_in_use_refuses_its_removal_and_logs_nothing(client, db):
    rp = _create(client, "cn")
    _set_inventory(client, rp, VCPU=8)
    _ok(client.simulate_put(f"/allocations/{uuidlib.uuid4()}", json=_claim_body(
        {rp: {"VCPU": 2}}, str(uuidlib.uuid4()), str(uuidlib.uuid4()))))
    before = _heads(db)
    _ok(client.simulate_delete(f"/resource_providers/{rp}/inventories"), 409)
    _ok(client.simulate_delete(f"/resource_providers/{rp}"), 409)
    _unchanged(db, before)


def test_trait_writes(client, db):
    rp = _create(client, "cn")
    [rp_id] = _ids(db, rp)
    before = _heads(db)
    path = f"/resource_providers/{rp}/traits"
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": _generation(client, rp),
        "traits": ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"]}))
    before = _expect(db, before, [rp_id])
    # The same traits again: the generation moves, the facts do not.
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": _generation(client, rp),
        "traits": ["STORAGE_DISK_SSD", "HW_CPU_X86_AVX2"]}))
    _unchanged(db, before)
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": _generation(client, rp),
        "traits": ["HW_CPU_X86_AVX2"]}))
    before = _expect(db, before, [rp_id])
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": 0, "traits": []}), 409)
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": _generation(client, rp),
        "traits": ["CUSTOM_NO_SUCH_TRAIT"]}), 400)
    _unchanged(db, before)
    _ok(client.simulate_delete(path))
    _expect(db, before, [rp_id])


def test_aggregate_writes(client, db):
    rp = _create(client, "cn")
    [rp_id] = _ids(db, rp)
    agg_a, agg_b = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    path = f"/resource_providers/{rp}/aggregates"
    before = _heads(db)
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": _generation(client, rp),
        "aggregates": [agg_a, agg_b]}))
    before = _expect(db, before, [rp_id])
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": _generation(client, rp),
        "aggregates": [agg_b, agg_a]}))
    _unchanged(db, before)
    # Before 1.19 the aggregates change without a generation bump: they
    # are logged all the same.
    _ok(client.simulate_put(path, json=[agg_b],
                            headers={"openstack-api-version": "placement 1.18"}))
    before = _expect(db, before, [rp_id])
    _ok(client.simulate_put(path, json={
        "resource_provider_generation": 0, "aggregates": []}), 409)
    _unchanged(db, before)


def _reshape_world(client):
    cn = _create(client, "cn")
    _set_inventory(client, cn, VCPU=8, MEMORY_MB=4096)
    numa = _create(client, "numa0", parent=cn)
    project, user = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    instance = str(uuidlib.uuid4())
    _ok(client.simulate_put(f"/allocations/{instance}", json=_claim_body(
        {cn: {"VCPU": 2, "MEMORY_MB": 1024}}, project, user)))
    return cn, numa, project, user, instance


def _reshape_body(client, cn, numa, project, user, instance, consumer_generation):
    return {
        "inventories": {
            cn: {"resource_provider_generation": _generation(client, cn),
                 "inventories": {"MEMORY_MB": {"total": 4096}}},
            numa: {"resource_provider_generation": _generation(client, numa),
                   "inventories": {"VCPU": {"total": 8}}}},
        "allocations": {instance: _claim_body(
            {cn: {"MEMORY_MB": 1024}, numa: {"VCPU": 2}}, project, user,
            consumer_generation)}}


def test_a_reshape_logs_every_provider_whose_inventory_it_replaces(client, db):
    cn, numa, project, user, instance = _reshape_world(client)
    before = _heads(db)
    # A stale consumer generation refuses the reshape after its interim
    # inventory was written: rolled back, nothing logged.
    _ok(client.simulate_post("/reshaper", json=_reshape_body(
        client, cn, numa, project, user, instance, 7)), 409)
    _unchanged(db, before)
    _ok(client.simulate_post("/reshaper", json=_reshape_body(
        client, cn, numa, project, user, instance, 1)))
    before = _expect(db, before, _ids(db, cn, numa))
    usages = _ok(client.simulate_get(f"/resource_providers/{numa}/usages")).json
    assert usages["usages"] == {"VCPU": 2}


def test_claims_never_touch_the_heads(client, db):
    cn = _create(client, "cn")
    other = _create(client, "other")
    _set_inventory(client, cn, VCPU=8, MEMORY_MB=4096)
    _set_inventory(client, other, VCPU=8)
    project, user = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    first, second = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    before = _heads(db)
    _ok(client.simulate_put(f"/allocations/{first}", json=_claim_body(
        {cn: {"VCPU": 2}}, project, user)))
    _ok(client.simulate_put(f"/allocations/{first}", json=_claim_body(
        {cn: {"VCPU": 1}, other: {"VCPU": 1}}, project, user, 1)))
    _ok(client.simulate_post("/allocations", json={
        first: _claim_body({cn: {"MEMORY_MB": 512}}, project, user, 2),
        second: _claim_body({other: {"VCPU": 3}}, project, user)}))
    _ok(client.simulate_put(f"/allocations/{uuidlib.uuid4()}", json=_claim_body(
        {cn: {"VCPU": 100}}, project, user)), 409)
    _ok(client.simulate_delete(f"/allocations/{first}"))
    _ok(client.simulate_delete(f"/allocations/{second}"))
    _unchanged(db, before)


def _new_names(db, name):
    with db.write() as conn:
        resource_classes.create(conn, name)
        traits.ensure(conn, name)


def test_class_and_trait_names(client, db):
    """Creating or deleting a custom class or trait changes no provider
    (neither can be deleted while a provider uses it); renaming a class
    (before 1.7) changes what every provider holding it shows, so every
    process reloads all."""
    # Created through the ledger: the 201 with no body these PUTs answer
    # (as Placement does) has no content type, which the test client's
    # WSGI checker refuses.
    before = _heads(db)
    _new_names(db, "CUSTOM_GONE")
    _ok(client.simulate_delete("/resource_classes/CUSTOM_GONE"))
    _ok(client.simulate_delete("/traits/CUSTOM_GONE"))
    _unchanged(db, before)

    rp = _create(client, "cn")
    _new_names(db, "CUSTOM_OLD")
    _new_names(db, "CUSTOM_USED")
    _set_inventory(client, rp, CUSTOM_OLD=4)
    _ok(client.simulate_put(f"/resource_providers/{rp}/traits", json={
        "resource_provider_generation": _generation(client, rp),
        "traits": ["CUSTOM_USED"]}))
    before = _heads(db)
    _ok(client.simulate_delete("/resource_classes/CUSTOM_OLD"), 409)
    _ok(client.simulate_delete("/traits/CUSTOM_USED"), 409)
    _unchanged(db, before)

    old = {"openstack-api-version": "placement 1.6"}
    _ok(client.simulate_put("/resource_classes/CUSTOM_OLD",
                            json={"name": "CUSTOM_OLD"}, headers=old))
    _unchanged(db, before)
    _ok(client.simulate_put("/resource_classes/CUSTOM_OLD",
                            json={"name": "CUSTOM_NEW"}, headers=old))
    changed, moved = _logged_since(db, before)
    assert changed is None
    assert moved == set(range(facts_log.SHARDS))


def test_a_write_that_fails_after_touching_logs_nothing_and_leaves_nothing_behind(db):
    """Rolled back after its touches: the heads stay, and the next write
    on the same pooled connection logs only its own providers."""
    single = Database(db.url, pool_size=1)
    try:
        first = single.run_write(lambda conn: providers.create_provider(conn, "first"))
        second = single.run_write(lambda conn: providers.create_provider(conn, "second"))
        before = _heads(db)
        seen = []

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            with single.write() as conn:
                seen.append(conn.connection.dbapi_connection)
                traits.set_provider_traits(conn, first, ["HW_CPU_X86_AVX2"], None)
                raise Boom()
        _unchanged(db, before)
        with single.write() as conn:
            seen.append(conn.connection.dbapi_connection)
            traits.set_provider_traits(conn, second, ["HW_CPU_X86_AVX2"], None)
        assert seen[0] is seen[1]
        _expect(db, before, [second.id])

        # A touch made in a bare transaction (not Database.write) is never
        # flushed there, and not by the next write either.
        before = _heads(db)
        with single.engine.begin() as conn:
            facts_log.touch(conn, [first.id])
        with single.write() as conn:
            traits.set_provider_traits(conn, second, [], None)
        _expect(db, before, [second.id])
    finally:
        single.dispose()


def test_a_generation_conflict_in_the_ledger_logs_nothing(db):
    rp = db.run_write(lambda conn: providers.create_provider(conn, "cn"))
    before = _heads(db)
    with pytest.raises(errors.ConcurrentUpdate):
        db.run_write(lambda conn: traits.set_provider_traits(
            conn, rp, ["HW_CPU_X86_AVX2"], rp.generation + 5))
    _unchanged(db, before)


def _touch(db, ids):
    with db.write() as conn:
        facts_log.touch(conn, ids)


def test_the_log_is_pruned_and_an_older_copy_reloads_everything(db, monkeypatch):
    monkeypatch.setattr(facts_log, "KEEP", 6)
    monkeypatch.setattr(facts_log, "PRUNE_EVERY", 4)
    shard = 3
    a, b = shard, shard + facts_log.SHARDS  # two providers of one shard
    elsewhere = shard + 1
    oldest = _heads(db)
    _touch(db, [a])
    after_first = _heads(db)
    for _ in range(9):
        _touch(db, [a])
    # Serial 10: the last prune was at 8, keeping the serials above 2.
    heads = _heads(db)
    assert _shards(heads)[shard] == facts_log.Head(10, 2)
    with db.read() as conn:
        kept = sorted(conn.scalars(select(t.facts_changes.c.serial)
                                   .where(t.facts_changes.c.shard == shard)))
    assert kept == list(range(3, 11))
    before_b = heads
    _touch(db, [b, elsewhere])
    now = _heads(db)
    with db.read() as conn:
        assert facts_log.changes(conn, oldest, now) is None
        assert facts_log.changes(conn, after_first, now) is None
        assert facts_log.changes(conn, heads, now) == {b, elsewhere}
        # Serial 2 is the floor itself: everything after it is still logged.
        at_floor = list(before_b)
        at_floor[len(before_b) - facts_log.SHARDS + shard] = facts_log.Head(2, 0)
        at_floor = tuple(at_floor)
        assert facts_log.changes(conn, at_floor, now) == {a, b, elsewhere}
    for _ in range(5):
        _touch(db, [a])
    # Serial 16: pruned again, up to 10.
    with db.read() as conn:
        now = facts_log.heads(conn)
        assert _shards(now)[shard] == facts_log.Head(16, 10)
        assert conn.scalar(select(func.min(t.facts_changes.c.serial))
                           .where(t.facts_changes.c.shard == shard)) == 11
        assert facts_log.changes(conn, at_floor, now) is None
        # Serial 10 is the new floor: still told.
        assert facts_log.changes(conn, before_b, now) == {a, b, elsewhere}
        # The other shards were never pruned.
        assert _shards(now)[shard + 1] == facts_log.Head(1, 0)


def test_an_import_makes_every_process_reload_everything(db, tmp_path):
    from tests.test_import import build_placement

    db.run_write(lambda conn: providers.create_provider(conn, "before"))
    before = _heads(db)
    importer.run(build_placement(tmp_path / "placement.sqlite"), db, force=True)
    changed, moved = _logged_since(db, before)
    assert changed is None
    assert moved == set(range(facts_log.SHARDS))
    # A dry run writes nothing.
    before = _heads(db)
    importer.run(build_placement(tmp_path / "again.sqlite"), db, dry_run=True,
                 force=True)
    _unchanged(db, before)


def test_a_bulk_load_makes_every_process_reload_everything(db):
    from bench.worlds import Bulk

    before = _heads(db)
    with db.write() as conn:
        bulk = Bulk(conn)
        bulk.provider("bulk-1", inventory={"VCPU": 8}, traits=["HW_CPU_X86_AVX2"],
                      aggregate=True)
        bulk.flush()
    changed, _moved = _logged_since(db, before)
    assert changed is None
