"""The ledger's allocation writes, reads and usage sums, on every backend."""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event, func, select

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.ledger import allocations, consumers, usages
from placement_lite.ledger.allocations import ConsumerWrite
from tests import factories


def _uuid():
    return str(uuid.uuid4())


def _write(db, *writes, checks=()):
    db.run_write(lambda conn: allocations.replace(conn, list(writes), checks))


def _generation(db, rp):
    with db.read() as conn:
        return conn.scalar(select(t.resource_providers.c.generation).where(
            t.resource_providers.c.id == rp["id"]))


def test_write_read_and_replace(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8, MEMORY_MB=1024)
    consumer = _uuid()
    _write(db, ConsumerWrite(consumer, "p1", "u1",
                             {rp["uuid"]: {"VCPU": 2, "MEMORY_MB": 512}}))
    assert _generation(db, rp) == 1
    with db.read() as conn:
        found, allocs, _ = allocations.for_consumer(conn, consumer)
        assert found.generation == 1 and found.project_id == "p1"
        assert allocs == {rp["uuid"]: {"generation": 1, "resources": {
            "VCPU": 2, "MEMORY_MB": 512}}}
        gen, by_consumer, _ = allocations.for_provider(conn, rp["uuid"])
        assert by_consumer == {consumer: ({"VCPU": 2, "MEMORY_MB": 512}, 1)}
    # Replacing releases the old claim before checking the new one.
    _write(db, ConsumerWrite(consumer, "p1", "u1", {rp["uuid"]: {"VCPU": 8}},
                             expected_generation=1))
    with db.read() as conn:
        assert usages.for_provider(conn, rp["uuid"])[1] == {
            "VCPU": 8, "MEMORY_MB": 0}
        assert consumers.get(conn, consumer).generation == 2


def test_stale_consumer_generation_is_refused(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    consumer = _uuid()
    _write(db, ConsumerWrite(consumer, "p", "u", {rp["uuid"]: {"VCPU": 1}},
                             expected_generation=None))
    for stale in (None, 0, 5):
        with pytest.raises(errors.ConcurrentUpdate):
            _write(db, ConsumerWrite(consumer, "p", "u",
                                     {rp["uuid"]: {"VCPU": 1}},
                                     expected_generation=stale))
    with pytest.raises(errors.ConcurrentUpdate):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": 1}},
                                 expected_generation=1))


@pytest.mark.parametrize("inv, amount, fragment", [
    ({"total": 4, "max_unit": 8}, 5, "exceed the capacity"),
    ({"total": 4, "reserved": 2}, 3, "capacity 2 "),
    ({"total": 4, "min_unit": 2}, 1, "min_unit 2"),
    ({"total": 8, "max_unit": 2}, 3, "max_unit 2"),
    ({"total": 8, "step_size": 2}, 3, "step_size 2"),
])
def test_capacity_and_constraints(db, inv, amount, fragment):
    with db.write() as conn:
        rp = factories.provider(conn)
        factories.inventory(conn, rp, "VCPU", **inv)
    with pytest.raises(errors.CapacityExceeded) as caught:
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": amount}}))
    assert fragment in caught.value.detail
    assert rp["uuid"] in caught.value.detail and "VCPU" in caught.value.detail
    with db.read() as conn:
        assert conn.scalar(select(func.count()).select_from(t.allocations)) == 0
        assert conn.scalar(select(func.count()).select_from(t.consumers)) == 0


def test_allocation_ratio_allows_overcommit(db):
    with db.write() as conn:
        rp = factories.provider(conn)
        factories.inventory(conn, rp, "VCPU", total=4, allocation_ratio=1.5,
                            max_unit=4)
    for _ in range(3):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": 2}}))
    with pytest.raises(errors.CapacityExceeded):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": 1}}))


def test_unknown_provider_class_and_missing_inventory(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    ghost = _uuid()
    with pytest.raises(errors.Invalid, match=ghost):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {ghost: {"VCPU": 1}}))
    with pytest.raises(errors.Invalid, match="CUSTOM_NOPE"):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"CUSTOM_NOPE": 1}}))
    with pytest.raises(errors.CapacityExceeded, match="DISK_GB"):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"DISK_GB": 1}}))


def test_multi_consumer_write_is_all_or_nothing(db):
    with db.write() as conn:
        rp1 = factories.provider_with(conn, VCPU=4)
        rp2 = factories.provider_with(conn, VCPU=1)
    first, second = _uuid(), _uuid()
    with pytest.raises(errors.CapacityExceeded):
        _write(db, ConsumerWrite(first, "p", "u", {rp1["uuid"]: {"VCPU": 2}}),
               ConsumerWrite(second, "p", "u", {rp2["uuid"]: {"VCPU": 2}}))
    with db.read() as conn:
        assert consumers.get(conn, first) is None
        assert usages.for_provider(conn, rp1["uuid"])[1] == {"VCPU": 0}
    # Two consumers on one provider are checked together.
    with pytest.raises(errors.CapacityExceeded):
        _write(db, ConsumerWrite(first, "p", "u", {rp2["uuid"]: {"VCPU": 1}}),
               ConsumerWrite(second, "p", "u", {rp2["uuid"]: {"VCPU": 1}}))
    # A move: the source consumer's claim is released in the same write.
    _write(db, ConsumerWrite(first, "p", "u", {rp2["uuid"]: {"VCPU": 1}}))
    _write(db, ConsumerWrite(first, "p", "u", {}),
           ConsumerWrite(second, "p", "u", {rp2["uuid"]: {"VCPU": 1}}))
    with db.read() as conn:
        assert consumers.get(conn, first) is None
        assert consumers.get(conn, second) is not None


def test_generations_move_as_placement_moves_them(db):
    """An allocation write bumps each provider it claims on once, and the
    providers of a consumer it empties; the provider a consumer moves
    away from keeps its generation; a delete bumps none."""
    with db.write() as conn:
        rp1 = factories.provider_with(conn, VCPU=8)
        rp2 = factories.provider_with(conn, VCPU=8)
    a, b = _uuid(), _uuid()
    _write(db, ConsumerWrite(a, "p", "u", {rp1["uuid"]: {"VCPU": 1}}),
           ConsumerWrite(b, "p", "u", {rp1["uuid"]: {"VCPU": 1}}))
    assert (_generation(db, rp1), _generation(db, rp2)) == (1, 0)
    # a moves from rp1 to rp2: only rp2 moves.
    _write(db, ConsumerWrite(a, "p", "u", {rp2["uuid"]: {"VCPU": 1}}))
    assert (_generation(db, rp1), _generation(db, rp2)) == (1, 1)
    # Emptying b touches the provider it held.
    _write(db, ConsumerWrite(b, "p", "u", {}))
    assert (_generation(db, rp1), _generation(db, rp2)) == (2, 1)
    db.run_write(lambda conn: allocations.delete_for_consumer(conn, a))
    assert (_generation(db, rp1), _generation(db, rp2)) == (2, 1)


def _shrink(db, rp, **values):
    with db.write() as conn:
        conn.execute(t.inventories.update().where(
            t.inventories.c.resource_provider_id == rp["id"]).values(**values))


def test_an_over_used_provider_admits_no_new_claim_but_lets_usage_fall(db):
    """Capacity fell below usage (nova's ironic driver reserving a node in
    use): new claims are refused until usage is back under capacity, while
    writes that keep or lower the usage go through."""
    with db.write() as conn:
        rp = factories.provider(conn)
        factories.inventory(conn, rp, "VCPU", total=8)
    a, b, c = _uuid(), _uuid(), _uuid()
    _write(db, ConsumerWrite(a, "p", "u", {rp["uuid"]: {"VCPU": 4}}),
           ConsumerWrite(b, "p", "u", {rp["uuid"]: {"VCPU": 2}}))
    _shrink(db, rp, reserved=5)        # capacity 3, usage 6
    with pytest.raises(errors.CapacityExceeded, match="exceed the capacity"):
        _write(db, ConsumerWrite(c, "p", "u", {rp["uuid"]: {"VCPU": 1}}))
    with pytest.raises(errors.CapacityExceeded):
        _write(db, ConsumerWrite(a, "p", "u", {rp["uuid"]: {"VCPU": 5}}))
    # Rewriting the same claim, and shrinking one, are fine.
    _write(db, ConsumerWrite(a, "p", "u", {rp["uuid"]: {"VCPU": 4}}))
    _write(db, ConsumerWrite(a, "p", "u", {rp["uuid"]: {"VCPU": 3}}))
    # Moving usage between consumers written together keeps the total.
    _write(db, ConsumerWrite(b, "p", "u", {}),
           ConsumerWrite(c, "p", "u", {rp["uuid"]: {"VCPU": 2}}))
    # But a new consumer taking more than the emptied one held does not.
    with pytest.raises(errors.CapacityExceeded):
        _write(db, ConsumerWrite(c, "p", "u", {}),
               ConsumerWrite(b, "p", "u", {rp["uuid"]: {"VCPU": 3}}))
    with db.read() as conn:
        assert usages.for_provider(conn, rp["uuid"])[1] == {"VCPU": 5}
    # Once usage is back under capacity, claims fit exactly as before.
    db.run_write(lambda conn: allocations.delete_for_consumer(conn, a))
    _write(db, ConsumerWrite(b, "p", "u", {rp["uuid"]: {"VCPU": 1}}))
    with pytest.raises(errors.CapacityExceeded):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": 1}}))


def test_multi_consumer_lookups_do_not_grow_with_consumers(db):
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=100, MEMORY_MB=1000)
               for _ in range(3)]
    owners = [_uuid() for _ in range(12)]

    def writes(shift):
        return [ConsumerWrite(c, "p", "u", {rps[(i + shift) % 3]["uuid"]: {
            "VCPU": 1, "MEMORY_MB": 10}}) for i, c in enumerate(owners)]

    _write(db, *writes(0))
    statements = []

    def count(conn, cursor, statement, *args):
        statements.append(" ".join(statement.split()))

    event.listen(db.engine, "before_cursor_execute", count)
    try:
        _write(db, *writes(1))
    finally:
        event.remove(db.engine, "before_cursor_execute", count)

    def reads_of(table):
        return sum(1 for s in statements
                   if s.startswith("SELECT") and f"FROM {table} " in s + " ")
    # Names, uuids and stored consumers are looked up once for the whole
    # write, not once per consumer (standard classes, once read, not at
    # all: ledger.lookup.PERMANENT).
    assert reads_of("resource_classes") <= 1
    assert reads_of("consumers") == 1
    assert reads_of("resource_providers") <= 2 + len(rps)
    with db.read() as conn:
        for i, c in enumerate(owners):
            found, allocs, _ = allocations.for_consumer(conn, c)
            assert found.generation == 2
            assert list(allocs) == [rps[(i + 1) % 3]["uuid"]]


def test_a_new_consumer_of_a_known_owner_costs_one_statement(db):
    """Once a project, user and type have rows, a new consumer of theirs is
    inserted by one statement that finds those rows by name too; an owner
    with a name not seen yet is created first, as before. Either way the
    consumer is stored, and counted, under the right owner."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=100)
    _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": 1}},
                             consumer_type="INSTANCE"))
    statements = []

    def count(conn, cursor, statement, *args):
        statements.append(" ".join(statement.split()))

    known, untyped, new_user = _uuid(), _uuid(), _uuid()
    event.listen(db.engine, "before_cursor_execute", count)
    try:
        _write(db, ConsumerWrite(known, "p", "u", {rp["uuid"]: {"VCPU": 2}},
                                 consumer_type="INSTANCE"))
    finally:
        event.remove(db.engine, "before_cursor_execute", count)
    _write(db, ConsumerWrite(untyped, "p", "u", {rp["uuid"]: {"VCPU": 3}}))
    _write(db, ConsumerWrite(new_user, "p", "u2", {rp["uuid"]: {"VCPU": 4}},
                             consumer_type="MIGRATION"))

    if db.engine.dialect.insert_returning:
        owner_reads = [s for s in statements if s.startswith("SELECT")
                       and ("FROM projects" in s or "FROM users" in s)]
        assert owner_reads == []
        assert len([s for s in statements if s.startswith("INSERT INTO consumers")]) == 1
    with db.read() as conn:
        for uuid_, user, ctype in ((known, "u", "INSTANCE"), (untyped, "u", None),
                                   (new_user, "u2", "MIGRATION")):
            found = consumers.get(conn, uuid_)
            assert (found.project_id, found.user_id, found.consumer_type,
                    found.generation) == ("p", user, ctype, 1)
        assert usages.for_project(conn, "p") == {"VCPU": 10}
        assert usages.for_project(conn, "p", "u2") == {"VCPU": 4}
        assert usage_summary.drift(conn) == []


def test_unknown_name_is_reported_for_the_consumer_using_it(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    good, bad, ghost = _uuid(), _uuid(), _uuid()
    with pytest.raises(errors.Invalid,
                       match=f"for consumer {bad}: No such resource class "
                             "CUSTOM_NOPE"):
        _write(db, ConsumerWrite(good, "p", "u", {rp["uuid"]: {"VCPU": 1}}),
               ConsumerWrite(bad, "p", "u", {rp["uuid"]: {"CUSTOM_NOPE": 1}}))
    with pytest.raises(errors.Invalid, match=f"'{ghost}' that does not exist"):
        _write(db, ConsumerWrite(good, "p", "u", {rp["uuid"]: {"VCPU": 1}}),
               ConsumerWrite(bad, "p", "u", {ghost: {"VCPU": 1}}))
    with db.read() as conn:
        assert consumers.get(conn, good) is None


def test_empty_write_and_delete_remove_the_consumer(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    consumer = _uuid()
    _write(db, ConsumerWrite(consumer, "p", "u", {rp["uuid"]: {"VCPU": 1}}))
    _write(db, ConsumerWrite(consumer, "p", "u", {}))
    with db.read() as conn:
        assert consumers.get(conn, consumer) is None
    _write(db, ConsumerWrite(consumer, "p", "u", {rp["uuid"]: {"VCPU": 1}}))
    before = _generation(db, rp)
    db.run_write(lambda conn: allocations.delete_for_consumer(conn, consumer))
    # As in Placement, deleting a consumer's allocations leaves the
    # providers' generations alone (callers cache them).
    assert _generation(db, rp) == before
    with db.read() as conn:
        assert consumers.get(conn, consumer) is None
    with pytest.raises(errors.NotFound):
        db.run_write(lambda conn: allocations.delete_for_consumer(conn, consumer))


class TwoPhaseCheck:
    """A claim check made of a function before the write and one after."""

    def __init__(self, before, after=lambda conn: None):
        self.before, self.after = before, after

    def before_write(self, conn, projects):
        self.before(conn, projects)
        return self.after


def test_claim_checks_run_inside_the_write_and_can_refuse(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    seen = []

    def after_write(conn):
        total = usages.for_project(conn, "p").get("VCPU", 0)
        if total > 3:
            raise errors.OverLimit(f"project p would use {total} VCPU")

    check = TwoPhaseCheck(lambda conn, projects: seen.append(set(projects)),
                          after_write)
    _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": 3}}),
           checks=[check])
    with pytest.raises(errors.OverLimit):
        _write(db, ConsumerWrite(_uuid(), "p", "u", {rp["uuid"]: {"VCPU": 1}}),
               checks=[check])
    assert seen == [{"p"}, {"p"}]
    with db.read() as conn:
        assert usages.for_project(conn, "p") == {"VCPU": 3}


def test_project_usage_sums_and_type_breakdown(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=100, MEMORY_MB=10000)
    plan = [("p", "u1", "INSTANCE", 1), ("p", "u1", "INSTANCE", 2),
            ("p", "u2", "MIGRATION", 4), ("p", "u2", None, 8),
            ("other", "u1", "INSTANCE", 16)]
    for project, user, ctype, vcpu in plan:
        _write(db, ConsumerWrite(_uuid(), project, user,
                                 {rp["uuid"]: {"VCPU": vcpu, "MEMORY_MB": 10}},
                                 consumer_type=ctype))
    with db.read() as conn:
        assert usages.for_project(conn, "p") == {"VCPU": 15, "MEMORY_MB": 40}
        assert usages.for_project(conn, "p", "u1") == {"VCPU": 3, "MEMORY_MB": 20}
        assert usages.for_project(conn, "nobody") == {}
        assert usages.for_project_by_type(conn, "p") == {
            "INSTANCE": {"consumer_count": 2, "VCPU": 3, "MEMORY_MB": 20},
            "MIGRATION": {"consumer_count": 1, "VCPU": 4, "MEMORY_MB": 10},
            "unknown": {"consumer_count": 1, "VCPU": 8, "MEMORY_MB": 10}}
        assert usages.for_project_by_type(conn, "p", consumer_type="all") == {
            "all": {"consumer_count": 4, "VCPU": 15, "MEMORY_MB": 40}}
        assert usages.for_project_by_type(conn, "p", "u2", "unknown") == {
            "unknown": {"consumer_count": 1, "VCPU": 8, "MEMORY_MB": 10}}
        assert usages.for_project_by_type(conn, "p", consumer_type="MIGRATION") == {
            "MIGRATION": {"consumer_count": 1, "VCPU": 4, "MEMORY_MB": 10}}
        assert usages.for_project_by_type(conn, "nobody", consumer_type="all") == {}


def test_project_usage_is_exact_over_many_allocations(db):
    """120,000 allocations across 12,000 consumers: the single-query sums
    match sums computed here, per project, per user and per type."""
    from collections import Counter

    from sqlalchemy import insert

    n_consumers, per_consumer = 12_000, 10
    classes = ["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_A", "CUSTOM_B"]
    with db.write() as conn:
        rps = [factories.provider(conn)["id"] for _ in range(4)]
        rc_ids = [factories.class_id(conn, name) for name in classes]
        conn.execute(insert(t.projects), [{"external_id": f"p{i}"} for i in range(5)])
        conn.execute(insert(t.users), [{"external_id": f"u{i}"} for i in range(3)])
        conn.execute(insert(t.consumer_types), [{"name": "INSTANCE"}])
        project_ids = dict(conn.execute(select(t.projects.c.external_id, t.projects.c.id)).all())
        user_ids = dict(conn.execute(select(t.users.c.external_id, t.users.c.id)).all())
        type_id = conn.scalar(select(t.consumer_types.c.id))
        rows = [{"uuid": str(uuid.UUID(int=i + 1)),
                 "project_id": project_ids[f"p{i % 5}"],
                 "user_id": user_ids[f"u{i % 3}"],
                 "consumer_type_id": type_id if i % 2 else None,
                 "generation": 1} for i in range(n_consumers)]
        conn.execute(insert(t.consumers), rows)
        ids = dict(conn.execute(select(t.consumers.c.uuid, t.consumers.c.id)).all())
        expected: dict = {}
        allocs = []
        for i in range(n_consumers):
            cid = ids[str(uuid.UUID(int=i + 1))]
            for j in range(per_consumer):
                used = (i * 7 + j) % 13 + 1
                rc = j % len(classes)
                allocs.append({"resource_provider_id": rps[(i + j) % 4],
                               "consumer_id": cid,
                               "resource_class_id": rc_ids[rc], "used": used})
                for key in ((f"p{i % 5}", None, None), (f"p{i % 5}", f"u{i % 3}", None),
                            (f"p{i % 5}", None, "INSTANCE" if i % 2 else "unknown")):
                    expected.setdefault(key, Counter())[classes[rc]] += used
        for start in range(0, len(allocs), 20_000):
            conn.execute(insert(t.allocations), allocs[start:start + 20_000])
        # Rows written around the ledger, as an import writes them.
        usage_summary.rebuild(conn)
    statements = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(db.engine, "before_cursor_execute", count)
    with db.read() as conn:
        before = len(statements)
        usages.for_project(conn, "p1", "u2")
        usages.for_project_by_type(conn, "p1", "u2")
        # One statement each, whatever the number of consumers.
        assert len(statements) - before == 2
    event.remove(db.engine, "before_cursor_execute", count)
    with db.read() as conn:
        for project in ("p0", "p3"):
            assert usages.for_project(conn, project) == dict(expected[(project, None, None)])
            assert usages.for_project(conn, project, "u1") == dict(
                expected[(project, "u1", None)])
            by_type = usages.for_project_by_type(conn, project)
            assert by_type["INSTANCE"].pop("consumer_count") == 1200
            assert by_type["unknown"].pop("consumer_count") == 1200
            assert by_type == {
                "INSTANCE": dict(expected[(project, None, "INSTANCE")]),
                "unknown": dict(expected[(project, None, "unknown")])}


def test_reshape_moves_inventory_and_allocations_together(db):
    from placement_lite.ledger import inventories, reshaper
    from placement_lite.ledger.reshaper import ProviderInventories

    with db.write() as conn:
        parent = factories.provider_with(conn, VCPU=8, MEMORY_MB=4096)
        child = factories.provider(conn)
    moving, staying = _uuid(), _uuid()
    _write(db, ConsumerWrite(moving, "p", "u", {parent["uuid"]: {"VCPU": 2, "MEMORY_MB": 1024}}),
           ConsumerWrite(staying, "q", "u", {parent["uuid"]: {"MEMORY_MB": 512}}))

    def plan(vcpu_total, parent_generation=1):
        return {parent["uuid"]: ProviderInventories(parent_generation, {
                    "MEMORY_MB": inventories.make("MEMORY_MB", {"total": 4096})}),
                child["uuid"]: ProviderInventories(0, {
                    "VCPU": inventories.make("VCPU", {"total": vcpu_total})})}

    move = ConsumerWrite(moving, "p", "u", {parent["uuid"]: {"MEMORY_MB": 1024},
                                             child["uuid"]: {"VCPU": 2}},
                         expected_generation=1)
    checked = []
    with pytest.raises(errors.ConcurrentUpdate):
        db.run_write(lambda conn: reshaper.reshape(conn, plan(8, 0), [move]))
    with pytest.raises(errors.CapacityExceeded):
        db.run_write(lambda conn: reshaper.reshape(conn, plan(1), [move]))
    # Without moving the VCPU allocation the parent's VCPU cannot go.
    with pytest.raises(errors.InventoryInUse,
                       match=f"'VCPU' on resource provider '{parent['uuid']}'"):
        db.run_write(lambda conn: reshaper.reshape(conn, plan(8), []))
    with db.read() as conn:
        assert usages.for_provider(conn, parent["uuid"])[1] == {"VCPU": 2, "MEMORY_MB": 1536}
        assert usages.for_provider(conn, child["uuid"])[1] == {}
    db.run_write(lambda conn: reshaper.reshape(
        conn, plan(8), [move], [TwoPhaseCheck(lambda conn, projects: checked.append(projects))]))
    assert checked == [{"p"}]
    # Placement's count: interim inventory, allocations, final inventory
    # for each provider given inventory and claimed on.
    assert (_generation(db, parent), _generation(db, child)) == (4, 3)
    with db.read() as conn:
        assert usages.for_provider(conn, parent["uuid"])[1] == {"MEMORY_MB": 1536}
        assert usages.for_provider(conn, child["uuid"])[1] == {"VCPU": 2}
        assert usages.for_project(conn, "p") == {"VCPU": 2, "MEMORY_MB": 1024}
        assert consumers.get(conn, moving).generation == 2
        assert consumers.get(conn, staying).generation == 1


def test_reshape_generations_and_shrinks_follow_placement(db):
    """Each provider's generation moves as Placement's reshape moves it:
    +1 for a non-empty interim inventory, +1 when allocations are written
    on it, +1 for the final inventory. A reshape may leave a class below
    its usage (only removing an allocated class is refused)."""
    from placement_lite.ledger import inventories, reshaper
    from placement_lite.ledger.reshaper import ProviderInventories

    with db.write() as conn:
        a = factories.provider_with(conn, VCPU=8)
        b = factories.provider_with(conn, VCPU=8)
        c = factories.provider_with(conn, VCPU=8)
        d = factories.provider(conn)
    held = _uuid()
    _write(db, ConsumerWrite(held, "p", "u", {a["uuid"]: {"VCPU": 4}}))
    assert _generation(db, a) == 1
    vcpu = {"VCPU": inventories.make("VCPU", {"total": 2})}
    db.run_write(lambda conn: reshaper.reshape(conn, {
        # a: shrunk below its usage of 4, no allocation written: +2.
        a["uuid"]: ProviderInventories(1, vcpu),
        # b: given an empty inventory: +1 (the final step only).
        b["uuid"]: ProviderInventories(0, {}),
        # d: only claimed on... after getting inventory: +3.
        d["uuid"]: ProviderInventories(0, vcpu),
    }, [ConsumerWrite(_uuid(), "p", "u", {d["uuid"]: {"VCPU": 1},
                                         c["uuid"]: {"VCPU": 1}})]))
    # c: only claimed on: +1.
    assert [_generation(db, rp) for rp in (a, b, c, d)] == [3, 1, 1, 3]
    with db.read() as conn:
        assert usages.for_provider(conn, a["uuid"])[1] == {"VCPU": 4}
    # A stale generation is refused before anything moves.
    with pytest.raises(errors.ConcurrentUpdate, match="actual: 3, given: 2"):
        db.run_write(lambda conn: reshaper.reshape(
            conn, {a["uuid"]: ProviderInventories(2, vcpu)}, []))
    # Emptying a's inventory while its VCPU is allocated is refused.
    with pytest.raises(errors.InventoryInUse, match="'VCPU' on resource"):
        db.run_write(lambda conn: reshaper.reshape(
            conn, {a["uuid"]: ProviderInventories(3, {})}, []))
    assert _generation(db, a) == 3
