"""Provider-side ledger functions against every configured backend."""
from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import insert, select

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.ledger import (
    aggregates, inventories, providers, resource_classes, traits)


def _new(db, name, parent_uuid=None):
    with db.write() as conn:
        return providers.create_provider(conn, name, str(uuid.uuid4()), parent_uuid)


def _allocate(db, provider, class_name, used):
    with db.write() as conn:
        project = conn.execute(insert(t.projects).values(
            external_id=str(uuid.uuid4()))).inserted_primary_key[0]
        user = conn.execute(insert(t.users).values(
            external_id=str(uuid.uuid4()))).inserted_primary_key[0]
        consumer = conn.execute(insert(t.consumers).values(
            uuid=str(uuid.uuid4()), project_id=project, user_id=user,
            generation=0)).inserted_primary_key[0]
        rc_id = resource_classes.ids_for(conn, [class_name])[class_name]
        conn.execute(insert(t.allocations).values(
            resource_provider_id=provider.id, consumer_id=consumer,
            resource_class_id=rc_id, used=used))
        usage_summary.rebuild(conn)


def test_create_and_read_back(db):
    root = _new(db, "root")
    child = _new(db, "child", root.uuid)
    with db.read() as conn:
        got = providers.get_by_uuid(conn, child.uuid)
        assert (got.parent_uuid, got.root_uuid) == (root.uuid, root.uuid)
        assert (got.parent_id, got.root_id) == (root.id, root.id)
        assert got.generation == 0
        assert providers.get_by_uuid(conn, root.uuid).root_id == root.id
        assert providers.find_by_uuid(conn, str(uuid.uuid4())) is None
        with pytest.raises(errors.ResourceProviderNotFound):
            providers.get_by_uuid(conn, str(uuid.uuid4()))


def test_duplicates_are_refused(db):
    first = _new(db, "same")
    with db.write() as conn:
        with pytest.raises(errors.DuplicateName):
            providers.create_provider(conn, "same")
    with db.write() as conn:
        with pytest.raises(errors.DuplicateName) as exc:
            providers.create_provider(conn, "other", first.uuid)
        assert first.uuid in exc.value.detail


def test_list_filters_intersect(db):
    a, b, c = (_new(db, n) for n in ("a", "b", "c"))
    rp = t.resource_providers
    with db.read() as conn:
        assert [p.name for p in providers.list_providers(conn)] == ["a", "b", "c"]
        assert [p.uuid for p in providers.list_providers(conn, name="b")] == [b.uuid]
        assert providers.list_providers(conn, name="b", uuid=a.uuid) == []
        got = providers.list_providers(
            conn, id_filters=[{a.id, b.id},
                              select(rp.c.id).where(rp.c.name != "a")])
        assert [p.name for p in got] == ["b"]
        assert providers.list_providers(conn, ids=[]) == []
        assert [p.name for p in providers.list_providers(conn, ids=[c.id])] == ["c"]


def test_stale_generation_is_a_concurrent_update(db):
    rp = _new(db, "gen")
    with db.write() as conn:
        assert providers.bump_generation(conn, rp, 0) == 1
    with db.write() as conn:
        with pytest.raises(errors.ConcurrentUpdate):
            providers.bump_generation(conn, rp, 0)
    with db.write() as conn:
        assert providers.bump_generation(conn, rp) == 2


def test_one_writer_wins_a_generation_race(db):
    """Writers that all read generation 0 race to replace the inventory:
    exactly one succeeds, the rest get ConcurrentUpdate, on every backend."""
    rp = _new(db, "raced")
    writers = 4
    barrier = threading.Barrier(writers)
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(total):
        barrier.wait()
        try:
            db.run_write(lambda conn: inventories.replace_inventories(
                conn, rp, {"VCPU": inventories.make("VCPU", {"total": total})}, 0),
                retries=0)
            result = "won"
        except errors.ConcurrentUpdate:
            result = "lost"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=write, args=(n + 1,)) for n in range(writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(outcomes) == ["lost"] * (writers - 1) + ["won"]
    with db.read() as conn:
        again = providers.get_by_uuid(conn, rp.uuid)
        assert again.generation == 1
        assert len(inventories.get_inventories(conn, again)) == 1


def test_reparenting_moves_the_subtree(db):
    a = _new(db, "a")
    b = _new(db, "b", a.uuid)
    c = _new(db, "c", b.uuid)
    other = _new(db, "other")
    with db.write() as conn:
        b_now = providers.get_by_uuid(conn, b.uuid)
        with pytest.raises(errors.Invalid):
            providers.update_provider(conn, b_now, "b", other.uuid)
        moved = providers.update_provider(conn, b_now, "b", other.uuid,
                                          allow_reparenting=True)
        assert moved.root_id == other.id
        assert providers.get_by_uuid(conn, c.uuid).root_id == other.id
        assert providers.get_by_uuid(conn, a.uuid).root_id == a.id
    with db.write() as conn:
        b_now = providers.get_by_uuid(conn, b.uuid)
        with pytest.raises(errors.Invalid):
            providers.update_provider(conn, b_now, "b", c.uuid,
                                      allow_reparenting=True)
        root = providers.update_provider(conn, b_now, "b", None,
                                         allow_reparenting=True)
        assert (root.root_id, root.parent_id) == (b.id, None)
        assert providers.get_by_uuid(conn, c.uuid).root_id == b.id
        assert providers.descendant_ids(conn, root) == {c.id}


def test_delete_is_refused_for_parents_and_allocated_providers(db):
    parent = _new(db, "parent")
    child = _new(db, "child", parent.uuid)
    with db.write() as conn:
        inventories.replace_inventories(
            conn, child, {"VCPU": inventories.make("VCPU", {"total": 4})}, 0)
    _allocate(db, child, "VCPU", 2)
    with db.write() as conn:
        with pytest.raises(errors.CannotDeleteParent):
            providers.delete_provider(conn, parent)
    with db.write() as conn:
        with pytest.raises(errors.ProviderInUse):
            providers.delete_provider(conn, providers.get_by_uuid(conn, child.uuid))
    with db.write() as conn:
        conn.execute(t.allocations.delete())
        providers.delete_provider(conn, providers.get_by_uuid(conn, child.uuid))
        providers.delete_provider(conn, providers.get_by_uuid(conn, parent.uuid))
        assert providers.list_providers(conn) == []
        assert conn.execute(select(t.inventories)).first() is None


def test_inventory_usage_checks(db):
    rp = _new(db, "used")
    vcpu = inventories.make("VCPU", {"total": 8})
    disk = inventories.make("DISK_GB", {"total": 100})
    mem = inventories.make("MEMORY_MB", {"total": 1024})
    with db.write() as conn:
        inventories.replace_inventories(
            conn, rp, {"VCPU": vcpu, "DISK_GB": disk, "MEMORY_MB": mem}, 0)
    _allocate(db, rp, "VCPU", 6)
    _allocate(db, rp, "DISK_GB", 10)
    # Removing classes that are allocated is refused, naming every one of
    # them in class order, as Placement does; the refusal rolls the
    # generation bump back with everything else.
    with pytest.raises(errors.InventoryInUse) as exc:
        with db.write() as conn:
            inventories.replace_inventories(conn, rp, {"MEMORY_MB": mem}, 1)
    assert exc.value.detail.startswith(
        f"Inventory for 'VCPU, DISK_GB' on resource provider '{rp.uuid}' in use.")
    assert "6 VCPU" in exc.value.detail and "10 DISK_GB" in exc.value.detail
    with pytest.raises(errors.InventoryInUse):
        with db.write() as conn:
            inventories.delete_all_inventories(conn, rp)
    with pytest.raises(errors.InventoryInUse, match="'VCPU' on"):
        with db.write() as conn:
            inventories.delete_inventory(conn, rp, "VCPU")
    with db.write() as conn:
        assert providers.get_by_uuid(conn, rp.uuid).generation == 1
        # MEMORY_MB has no allocations: it may go.
        inventories.delete_inventory(conn, rp, "MEMORY_MB")
    # Shrinking below the usage is accepted (Placement accepts it): the
    # provider is then over-used until allocations are freed.
    small = inventories.make("VCPU", {"total": 4})
    with db.write() as conn:
        assert inventories.replace_inventories(
            conn, rp, {"VCPU": small, "DISK_GB": disk}, 2) == 3
    held = inventories.make("VCPU", {"total": 8, "reserved": 8})
    with db.write() as conn:
        assert inventories.update_inventory(conn, rp, held, 3) == 4
        assert inventories.get_inventory(conn, rp, "VCPU").reserved == 8


def test_inventory_validation(db):
    rp = _new(db, "strict")
    with pytest.raises(errors.Invalid):
        inventories.validate(rp, inventories.make("VCPU", {"total": 4, "reserved": 4}),
                             reserved_may_equal_total=False)
    inventories.validate(rp, inventories.make("VCPU", {"total": 4, "reserved": 4}))
    with pytest.raises(errors.Invalid):
        inventories.validate(rp, inventories.make("VCPU", {"total": 4, "reserved": 5}))
    with pytest.raises(errors.Invalid):
        inventories.validate(rp, inventories.make(
            "VCPU", {"total": 4, "min_unit": 3, "max_unit": 2}))
    with db.write() as conn:
        with pytest.raises(errors.Invalid) as exc:
            inventories.replace_inventories(conn, rp, {
                "CUSTOM_NOPE": inventories.make("CUSTOM_NOPE", {"total": 1})}, 0)
        assert "CUSTOM_NOPE" in exc.value.detail


def test_custom_classes_use_their_own_id_range(db):
    with db.write() as conn:
        first = resource_classes.create(conn, "CUSTOM_A")
        second = resource_classes.create(conn, "CUSTOM_B")
        assert first.id == t.CUSTOM_CLASS_MIN_ID
        assert second.id == t.CUSTOM_CLASS_MIN_ID + 1
        assert not first.standard and resource_classes.get(conn, "VCPU").standard
        assert resource_classes.ensure(conn, "CUSTOM_A") is False
        assert resource_classes.ensure(conn, "CUSTOM_C") is True
        with pytest.raises(errors.Conflict):
            resource_classes.create(conn, "CUSTOM_A")
        with pytest.raises(errors.Invalid):
            resource_classes.delete_class(conn, "VCPU")
        resource_classes.delete_class(conn, "CUSTOM_B")
        assert resource_classes.find(conn, "CUSTOM_B") is None


def test_trait_prefix_is_literal(db):
    with db.write() as conn:
        for name in ("CUSTOM_AB", "CUSTOM_A_B", "CUSTOM_AXB"):
            traits.ensure(conn, name)
    with db.read() as conn:
        names = [tr.name for tr in traits.list_traits(conn, prefix="CUSTOM_A_")]
        assert names == ["CUSTOM_A_B"]
        assert [tr.name for tr in traits.list_traits(conn, names=["CUSTOM_AB", "NOPE"])] == [
            "CUSTOM_AB"]


def test_aggregates_are_shared_rows(db):
    a, b = _new(db, "a"), _new(db, "b")
    agg = str(uuid.uuid4())
    with db.write() as conn:
        assert aggregates.set_provider_aggregates(conn, a, [agg], 0) == 1
        assert aggregates.set_provider_aggregates(conn, b, [agg], None, bump=False) == 0
        assert aggregates.provider_aggregates(conn, b) == [agg]
        assert len(conn.execute(select(t.placement_aggregates)).all()) == 1
        with pytest.raises(errors.ConcurrentUpdate):
            aggregates.set_provider_aggregates(conn, a, [], 0)


def test_racing_writers_share_a_new_aggregate(db):
    """Providers joining the same new aggregate at once all succeed, each
    with its own generation check, and the aggregate row exists once."""
    rps = [_new(db, f"member{i}") for i in range(4)]
    agg = str(uuid.uuid4())
    barrier = threading.Barrier(len(rps))
    failures: list[BaseException] = []

    def join(rp):
        barrier.wait()
        try:
            db.run_write(lambda conn: aggregates.set_provider_aggregates(
                conn, rp, [agg], 0), retries=0)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=join, args=(rp,)) for rp in rps]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert failures == []
    with db.read() as conn:
        assert len(conn.execute(select(t.placement_aggregates)).all()) == 1
        for rp in rps:
            assert aggregates.provider_aggregates(conn, rp) == [agg]


def test_shrinking_inventory_races_claims_without_overcommit(db):
    """Claims and an inventory shrink race on one provider. The shrink may
    leave usage above capacity (Placement allows it), but no claim may
    ever be granted past the capacity in force when it commits: each
    claim reads usage and inventory inside its own transaction, after its
    write, and those must fit."""
    from placement_lite.ledger import allocations, capacity

    rp = _new(db, "contested")
    with db.write() as conn:
        inventories.replace_inventories(
            conn, rp, {"VCPU": inventories.make("VCPU", {"total": 12})}, 0)
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    _allocate(db, rp, "VCPU", 2)
    claimed = threading.Event()
    seen = []
    shrunk = []

    def claim():
        for _ in range(6):
            write = allocations.ConsumerWrite(
                consumer_uuid=str(uuid.uuid4()), project_id=project,
                user_id=user, allocations={rp.uuid: {"VCPU": 1}})

            def step(conn, write=write):
                allocations.replace(conn, [write])
                inv = inventories.get_inventory(conn, rp, "VCPU")
                used = sum(capacity.usage(conn, [rp.id]).values())
                return used, inv.capacity
            try:
                seen.append(db.run_write(step))
                claimed.set()
            except errors.Conflict:
                pass

    def shrink():
        # Start once claims are landing, so the two really interleave.
        claimed.wait(timeout=30)
        for total in range(11, 0, -1):
            def step(conn, total=total):
                current = providers.get_by_uuid(conn, rp.uuid)
                inventories.replace_inventories(
                    conn, current,
                    {"VCPU": inventories.make("VCPU", {"total": total})},
                    current.generation)
            try:
                db.run_write(step)
                shrunk.append(total)
            except errors.ConcurrentUpdate:
                # A claim moved the generation between our read and our
                # write: nothing shrank.
                pass

    threads = [threading.Thread(target=claim) for _ in range(3)]
    threads.append(threading.Thread(target=shrink))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen and shrunk
    assert [s for s in seen if s[0] > s[1]] == []
    with db.read() as conn:
        total = inventories.get_inventory(conn, rp, "VCPU").total
        used = sum(capacity.usage(conn, [rp.id]).values())
        assert usage_summary.drift(conn) == []
    assert total == shrunk[-1]
    assert used == 2 + len(seen)


def test_a_created_provider_answers_with_the_stored_creation_time(db):
    """POST /resource_providers answers (Last-Modified) from the row it
    wrote: it must be what a later read of the row gives."""
    created = db.run_write(lambda conn: providers.create_provider(conn, "stamped"))
    with db.read() as conn:
        stored = providers.get_by_uuid(conn, created.uuid)
    assert created.created_at == stored.created_at
