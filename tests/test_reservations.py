"""Reservations in the ledger (ledger/reservations.py and friends), on
every configured backend: admission over the whole window, the claim rule
(claims now leave room for reservations later), changes, cancelling,
ending, shortfalls after an inventory shrank, and what deleting a
provider, an inventory, a class or a project must respect.

Times are relative to the database's own clock (db/clock.py), read at the
start of each test: nothing here depends on the test process's clock.
"""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select, update

from placement_lite import errors
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import (
    allocations, inventories, providers, reservation_reads, reservation_room,
    reservations, resource_classes)
from placement_lite.ledger.allocations import ConsumerWrite
from placement_lite.ledger.reservation_reads import Filters
from placement_lite.quota import projects as quota_projects
from tests import factories

HOUR = 3600


def _now(db) -> int:
    with db.read() as conn:
        return clock.now(conn)


@pytest.fixture
def world(db):
    """One provider with VCPU 8 and MEMORY_MB 1024, and the db's now."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8, MEMORY_MB=1024)
    return rp, _now(db)


def _reserve(db, rp, start, end, vcpu=4, rid=None, project="p1", checks=()):
    return db.run_write(lambda conn: reservations.create(
        conn, rid, project, "u1", start, end, {rp["uuid"]: {"VCPU": vcpu}},
        checks))


def _claim(db, rp, vcpu, consumer=None, generation=None):
    consumer = consumer or str(uuid.uuid4())
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        consumer, "p1", "u1", {rp["uuid"]: {"VCPU": vcpu}},
        expected_generation=generation)]))
    return consumer


def _ended(db, rp, vcpu):
    """A reservation whose window is over, written as time would leave it."""
    r = _reserve(db, rp, _now(db) - HOUR, _now(db) + HOUR, vcpu)
    with db.write() as conn:
        past = clock.now(conn) - 10
        conn.execute(update(t.reservations).where(t.reservations.c.id == r.id)
                     .values(start_at=past - HOUR, end_at=past))
        conn.execute(update(t.reservation_amounts)
                     .where(t.reservation_amounts.c.reservation_id == r.id)
                     .values(start_at=past - HOUR, end_at=past))
    return r


# Admission -------------------------------------------------------------------------

def test_a_reservation_is_admitted_and_read_back(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR, rid=str(uuid.uuid4()))
    assert (r.start, r.end, r.generation, r.status) == (
        now + HOUR, now + 2 * HOUR, 1, "pending")
    with db.read() as conn:
        got = reservation_reads.get(conn, r.uuid)
    assert got.allocations == {rp["uuid"]: {"VCPU": 4}}
    assert (got.project_id, got.user_id, got.short) == ("p1", "u1", ())
    assert got.status == "pending"


def test_a_start_in_the_past_means_now(db, world):
    rp, now = world
    r = _reserve(db, rp, now - 5 * HOUR, now + HOUR)
    assert now <= r.start <= now + 60
    assert r.status == "active"


@pytest.mark.parametrize("start,end", [(2, 1), (2, 2), (-3, -2)])
def test_the_end_must_come_after_the_start(db, world, start, end):
    rp, now = world
    with pytest.raises(errors.Invalid, match="must be after the start"):
        _reserve(db, rp, now + start * HOUR, now + end * HOUR)


def test_windows_that_do_not_overlap_each_take_everything(db, world):
    rp, now = world
    _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=8)
    _reserve(db, rp, now + 2 * HOUR, now + 3 * HOUR, vcpu=8)
    _reserve(db, rp, now, now + HOUR, vcpu=8)


def test_a_refusal_names_the_first_interval_without_room(db, world):
    rp, now = world
    _claim(db, rp, 2)
    _reserve(db, rp, now + 2 * HOUR, now + 4 * HOUR, vcpu=3)
    _reserve(db, rp, now + 3 * HOUR, now + 5 * HOUR, vcpu=1)
    with pytest.raises(errors.ReservationNoRoom) as refused:
        _reserve(db, rp, now + HOUR, now + 6 * HOUR, vcpu=3)
    detail = refused.value.detail
    start, end = (reservation_room.timeline.iso(now + h * HOUR) for h in (3, 4))
    assert detail.startswith(f"Unable to reserve 'VCPU' on resource provider "
                             f"'{rp['uuid']}' from {start} to {end}: ")
    assert "requested 3, free 2 (capacity 8, allocated 2, reserved 4)" in detail
    assert refused.value.code == "placement.reservation.no_room"
    # Two units fit throughout.
    _reserve(db, rp, now + HOUR, now + 6 * HOUR, vcpu=2)


@pytest.mark.parametrize("allocs,words", [
    (lambda rp: {str(uuid.uuid4()): {"VCPU": 1}}, "No such resource provider"),
    (lambda rp: {rp["uuid"]: {"CUSTOM_NOPE": 1}}, "No such resource class"),
    (lambda rp: {rp["uuid"]: {"DISK_GB": 1}}, "has no inventory of that class"),
])
def test_what_cannot_be_reserved_at_all_is_a_bad_request(db, world, allocs, words):
    rp, now = world
    with pytest.raises(errors.Invalid, match=words):
        db.run_write(lambda conn: reservations.create(
            conn, None, "p1", "u1", now + HOUR, now + 2 * HOUR, allocs(rp)))


def test_amounts_follow_the_inventorys_unit_rules(db):
    with db.write() as conn:
        rp = factories.provider(conn)
        factories.inventory(conn, rp, "VCPU", total=16, min_unit=2, max_unit=8,
                            step_size=2)
    now = _now(db)
    for amount in (1, 3, 10):
        with pytest.raises(errors.Invalid, match="inventory constraints"):
            _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=amount)
    _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=8)


def test_an_id_is_reserved_once(db, world):
    rp, now = world
    rid = str(uuid.uuid4())
    _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=1, rid=rid)
    with pytest.raises(errors.ReservationExists):
        _reserve(db, rp, now + 3 * HOUR, now + 4 * HOUR, vcpu=1, rid=rid)


def test_allocations_count_at_every_instant(db, world):
    rp, now = world
    _claim(db, rp, 6)
    with pytest.raises(errors.ReservationNoRoom, match="free 2 "):
        _reserve(db, rp, now + 100 * HOUR, now + 101 * HOUR, vcpu=3)


def test_an_ended_reservation_counts_nowhere(db, world):
    rp, now = world
    _ended(db, rp, 8)
    _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=8)
    with db.read() as conn:
        ended = reservation_reads.list_reservations(conn, Filters(status="ended"))
    assert len(ended) == 1 and ended[0].short == ()


# The claim rule ------------------------------------------------------------------------

def test_a_claim_leaves_room_for_the_peak_reserved_later(db, world):
    rp, now = world
    _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=3)
    _reserve(db, rp, now + 5 * HOUR, now + 6 * HOUR, vcpu=5)
    _reserve(db, rp, now + 5 * HOUR, now + 7 * HOUR, vcpu=1)
    # The peak is 6 (from the fifth hour): two units are free for claims.
    _claim(db, rp, 2)
    with pytest.raises(errors.CapacityExceeded) as refused:
        _claim(db, rp, 1)
    detail = refused.value.detail
    assert "The requested amount would exceed the capacity" in detail
    assert "already used 2, held by reservations 6 (at their peak from now on)" in detail


def test_without_reservations_the_claim_check_says_what_it_always_said(db, world):
    rp, _now_ = world
    _claim(db, rp, 8)
    with pytest.raises(errors.CapacityExceeded) as refused:
        _claim(db, rp, 1)
    assert "held by reservations" not in refused.value.detail
    assert "requested 1, already used 8, capacity 8 ((total 8 - reserved 0) * " \
        "allocation_ratio 1" in refused.value.detail


def test_a_claim_that_raises_no_usage_is_let_through(db, world):
    rp, now = world
    consumer = _claim(db, rp, 4)
    _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=4)
    with db.write() as conn:
        conn.execute(update(t.inventories).values(total=6)
                     .where(t.inventories.c.resource_provider_id == rp["id"]))
    # Over capacity counting what is reserved: rewriting or shrinking the
    # claim is still allowed, growing it is not.
    _claim(db, rp, 4, consumer, generation=1)
    _claim(db, rp, 2, consumer, generation=2)
    with pytest.raises(errors.CapacityExceeded):
        _claim(db, rp, 3, consumer, generation=3)


def test_ended_and_cancelled_reservations_give_claims_their_room(db, world):
    rp, now = world
    _ended(db, rp, 8)
    pending = _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=8)
    with pytest.raises(errors.CapacityExceeded):
        _claim(db, rp, 1)
    db.run_write(lambda conn: reservations.cancel(conn, pending.uuid))
    _claim(db, rp, 8)


def _reads_of_reservations(statements) -> int:
    """Statements that read the reservations' windows themselves (not the
    EXISTS the capacity check's inventory rows carry)."""
    return len([s for s in statements if s.lstrip().upper().startswith("SELECT")
                and "FROM reservation_amounts" in s and "EXISTS" not in s.upper()])


def test_a_claim_reads_reservations_once_and_only_where_some_are_ahead(db, world):
    from tests.backends import statements_run

    rp, now = world
    both = {rp["uuid"]: {"VCPU": 2, "MEMORY_MB": 256}}
    with statements_run(db) as seen:
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
            str(uuid.uuid4()), "p1", "u1", both)]))
    assert _reads_of_reservations(seen) == 0
    db.run_write(lambda conn: reservations.create(
        conn, None, "p1", "u1", now + HOUR, now + 2 * HOUR,
        {rp["uuid"]: {"VCPU": 4, "MEMORY_MB": 512}}))
    with statements_run(db) as seen:
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
            str(uuid.uuid4()), "p1", "u1", both)]))
    assert _reads_of_reservations(seen) == 1
    with pytest.raises(errors.CapacityExceeded, match="'MEMORY_MB'"):
        _claim_memory(db, rp, 1)


def _claim_memory(db, rp, mb):
    db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
        str(uuid.uuid4()), "p1", "u1", {rp["uuid"]: {"MEMORY_MB": mb}})]))


# Changing ----------------------------------------------------------------------------------

def _replace(db, r, start, end, vcpu, generation=None, **kw):
    return db.run_write(lambda conn: reservations.replace(
        conn, r.uuid, r.generation if generation is None else generation,
        start, end, {kw.pop("rp", None) or next(iter(r.allocations)): {"VCPU": vcpu}},
        **kw))


def test_a_change_does_not_count_its_own_old_amounts(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 3 * HOUR, vcpu=6)
    changed = _replace(db, r, now + 2 * HOUR, now + 4 * HOUR, 8)
    assert (changed.start, changed.end, changed.generation) == (
        now + 2 * HOUR, now + 4 * HOUR, 2)
    with db.read() as conn:
        got = reservation_reads.get(conn, r.uuid)
        rows = conn.execute(select(t.reservation_amounts)).all()
    assert got.allocations == {rp["uuid"]: {"VCPU": 8}} and got.generation == 2
    assert [(row.amount, row.start_at, row.end_at) for row in rows] == [
        (8, now + 2 * HOUR, now + 4 * HOUR)]


def test_a_change_is_checked_against_the_others(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=4)
    _reserve(db, rp, now + 2 * HOUR, now + 3 * HOUR, vcpu=6)
    with pytest.raises(errors.ReservationNoRoom, match="free 2 "):
        _replace(db, r, now + HOUR, now + 3 * HOUR, 4)
    with db.read() as conn:
        assert reservation_reads.get(conn, r.uuid).end == now + 2 * HOUR


def test_a_stale_generation_is_a_conflict(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR)
    _replace(db, r, now + HOUR, now + 2 * HOUR, 2)
    with pytest.raises(errors.ConcurrentUpdate, match="generation 2"):
        _replace(db, r, now + HOUR, now + 2 * HOUR, 3)


def test_an_active_reservation_keeps_its_start(db, world):
    rp, now = world
    r = _reserve(db, rp, now - HOUR, now + HOUR)
    with pytest.raises(errors.ReservationStarted):
        _replace(db, r, r.start + 60, now + 2 * HOUR, 4)
    with pytest.raises(errors.ReservationStarted):
        _replace(db, r, r.start - 60, now + 2 * HOUR, 4)
    longer = _replace(db, r, r.start, now + 2 * HOUR, 5)
    assert (longer.start, longer.end, longer.status) == (
        r.start, now + 2 * HOUR, "active")


def test_an_ended_reservation_cannot_change_or_end(db, world):
    rp, _now_ = world
    r = _ended(db, rp, 2)
    with pytest.raises(errors.ReservationEnded):
        _replace(db, r, r.start, r.end + 10 * HOUR, 2)
    with pytest.raises(errors.ReservationEnded):
        db.run_write(lambda conn: reservations.end(conn, r.uuid))


def test_a_short_reservation_may_shrink_but_not_grow(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 4 * HOUR, vcpu=6)
    with db.write() as conn:
        conn.execute(update(t.inventories).values(total=4).where(
            t.inventories.c.resource_provider_id == rp["id"],
            t.inventories.c.resource_class_id == factories.class_id(conn, "VCPU")))
    shorter = _replace(db, r, now + HOUR, now + 2 * HOUR, 5)
    assert [(s.start, s.end, s.free) for s in shorter.short] == [
        (now + HOUR, now + 2 * HOUR, 4)]
    for start, end, vcpu in ((now + HOUR, now + 3 * HOUR, 5),
                             (now + HOUR, now + 2 * HOUR, 6)):
        with pytest.raises(errors.ReservationNoRoom):
            _replace(db, shorter, start, end, vcpu)


def test_a_change_may_move_to_another_provider_and_owner(db, world):
    rp, now = world
    with db.write() as conn:
        other = factories.provider_with(conn, VCPU=2)
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=8)
    moved = _replace(db, r, now + HOUR, now + 2 * HOUR, 2, rp=other["uuid"],
                     project_id="p2", user_id="u2")
    assert (moved.project_id, moved.user_id) == ("p2", "u2")
    with db.read() as conn:
        assert reservation_reads.get(conn, r.uuid).allocations == {
            other["uuid"]: {"VCPU": 2}}
    _claim(db, rp, 8)


def test_a_change_creates_a_new_owner_before_locking_providers(db, world):
    """As a claim creates its consumer's owner before the providers' locks
    (ledger/allocations.py, step 1), and as a create does: a change that
    inserted the new owner's rows under those locks waited, provider
    locked, for a claim creating the same project, which waited for the
    provider: a deadlock on MariaDB and PostgreSQL."""
    from tests.backends import statements_run

    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR)
    with statements_run(db) as seen:
        _replace(db, r, now + HOUR, now + 2 * HOUR, 4, project_id="p-new",
                 user_id="u-new")
    upper = [s.upper() for s in seen]

    def first(*words):
        return next(i for i, s in enumerate(upper) if all(w in s for w in words))
    booked = first("UPDATE INVENTORIES", "BOOKED")
    assert first("INSERT INTO PROJECTS") < booked
    assert first("INSERT INTO USERS") < booked


# Cancelling and ending -----------------------------------------------------------------------------

def test_cancel_a_pending_one_and_forget_an_ended_one(db, world):
    rp, now = world
    pending = _reserve(db, rp, now + HOUR, now + 2 * HOUR)
    ended = _ended(db, rp, 2)
    active = _reserve(db, rp, now - HOUR, now + HOUR)
    for r in (pending, ended):
        db.run_write(lambda conn: reservations.cancel(conn, r.uuid))
    with pytest.raises(errors.ReservationStarted, match="End it with POST"):
        db.run_write(lambda conn: reservations.cancel(conn, active.uuid))
    with db.read() as conn:
        left = reservation_reads.list_reservations(conn, Filters())
        assert [r.uuid for r in left] == [active.uuid]
        assert len(conn.execute(select(t.reservation_amounts)).all()) == 1
        with pytest.raises(errors.ReservationNotFound):
            reservation_reads.get(conn, pending.uuid)


def test_ending_returns_the_room_from_now_on(db, world):
    rp, now = world
    active = _reserve(db, rp, now - HOUR, now + 5 * HOUR, vcpu=8)
    pending = _reserve(db, rp, now + 6 * HOUR, now + 7 * HOUR, vcpu=1)
    with pytest.raises(errors.ReservationNotStarted):
        db.run_write(lambda conn: reservations.end(conn, pending.uuid))
    with pytest.raises(errors.CapacityExceeded):
        _claim(db, rp, 1)
    ended = db.run_write(lambda conn: reservations.end(conn, active.uuid))
    assert ended.status == "ended" and ended.generation == 2
    assert active.start <= ended.end <= _now(db)
    with db.read() as conn:
        ends = set(conn.scalars(select(t.reservation_amounts.c.end_at).where(
            t.reservation_amounts.c.reservation_id == active.id)))
    assert ends == {ended.end}
    _claim(db, rp, 7)


# Shortfalls --------------------------------------------------------------------------------------------

def test_a_shrunken_inventory_leaves_reservations_short_and_says_so(db, world):
    rp, now = world
    first = _reserve(db, rp, now + HOUR, now + 3 * HOUR, vcpu=4)
    second = _reserve(db, rp, now + 2 * HOUR, now + 4 * HOUR, vcpu=4)
    with db.read() as conn:
        assert reservation_room.count_short(conn) == 0
    with db.write() as conn:
        provider = providers.get_by_uuid(conn, rp["uuid"])
        stored = inventories.get_inventories(conn, provider)
        inventories.replace_inventories(conn, provider, {
            "VCPU": inventories.make("VCPU", {"total": 6}),
            "MEMORY_MB": stored["MEMORY_MB"]}, None)
    with db.read() as conn:
        got = {r.uuid: r for r in reservation_reads.list_reservations(conn, Filters())}
        assert reservation_room.count_short(conn) == 2
    assert [(s.resource_provider, s.resource_class, s.start, s.end, s.free)
            for s in got[first.uuid].short] == [
        (rp["uuid"], "VCPU", now + 2 * HOUR, now + 3 * HOUR, 2)]
    assert [(s.start, s.end, s.free) for s in got[second.uuid].short] == [
        (now + 2 * HOUR, now + 3 * HOUR, 2)]
    # Nothing was dropped.
    assert got[first.uuid].allocations == {rp["uuid"]: {"VCPU": 4}}


# Deleting what reservations hold --------------------------------------------------------------------------

def test_a_provider_with_live_reservations_cannot_be_deleted(db, world):
    rp, now = world
    pending = _reserve(db, rp, now + HOUR, now + 2 * HOUR)
    _ended(db, rp, 2)
    with pytest.raises(errors.ProviderInUse, match="has reservations"):
        db.run_write(lambda conn: providers.delete_provider(
            conn, providers.get_by_uuid(conn, rp["uuid"])))
    db.run_write(lambda conn: reservations.cancel(conn, pending.uuid))
    db.run_write(lambda conn: providers.delete_provider(
        conn, providers.get_by_uuid(conn, rp["uuid"])))
    with db.read() as conn:
        (ended,) = reservation_reads.list_reservations(conn, Filters())
    assert ended.status == "ended" and ended.allocations == {}


def test_an_inventory_live_reservations_hold_cannot_be_removed(db, world):
    rp, now = world
    _reserve(db, rp, now - HOUR, now + HOUR)
    with pytest.raises(errors.InventoryInUse, match="Reservations that have not ended"):
        db.run_write(lambda conn: inventories.delete_inventory(
            conn, providers.get_by_uuid(conn, rp["uuid"]), "VCPU"))
    db.run_write(lambda conn: inventories.delete_inventory(
        conn, providers.get_by_uuid(conn, rp["uuid"]), "MEMORY_MB"))


def test_a_class_live_reservations_hold_cannot_be_deleted(db):
    with db.write() as conn:
        rp = factories.provider(conn)
        factories.inventory(conn, rp, "CUSTOM_GPU", total=4)
    now = _now(db)
    r = db.run_write(lambda conn: reservations.create(
        conn, None, "p1", "u1", now - HOUR, now + HOUR,
        {rp["uuid"]: {"CUSTOM_GPU": 2}}))
    db.run_write(lambda conn: reservations.end(conn, r.uuid))
    db.run_write(lambda conn: inventories.delete_all_inventories(
        conn, providers.get_by_uuid(conn, rp["uuid"])))
    db.run_write(lambda conn: resource_classes.delete_class(conn, "CUSTOM_GPU"))
    with db.read() as conn:
        assert conn.execute(select(t.reservation_amounts)).all() == []


def test_a_project_that_owns_reservations_cannot_be_deleted(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR, project="owner")
    with pytest.raises(errors.ProjectInUse, match="reservations"):
        db.run_write(lambda conn: quota_projects.delete_project(
            conn, quota_projects.get(conn, "owner")))
    db.run_write(lambda conn: reservations.cancel(conn, r.uuid))
    db.run_write(lambda conn: quota_projects.delete_project(
        conn, quota_projects.get(conn, "owner")))


def test_deleting_a_project_racing_its_first_reservation_is_a_conflict(db, world):
    """A reservation written but not yet committed when the project's
    deletion checked found nothing: the deletion then hit the foreign key
    (a 500) once the reservation committed. Locking the project row first
    makes the deletion wait and see it."""
    import threading
    import time

    rp, now = world
    with db.write() as conn:
        quota_projects.create(conn, external_id="racer", name="racer")
    outcome: list = []

    def delete():
        try:
            db.run_write(lambda conn: quota_projects.delete_project(
                conn, quota_projects.get(conn, "racer")), retries=0)
            outcome.append("deleted")
        except Exception as exc:  # what the route would have turned into a 500
            outcome.append(exc)
    with db.write() as conn:
        reservations.create(conn, None, "racer", "u1", now + HOUR,
                            now + 2 * HOUR, {rp["uuid"]: {"VCPU": 1}})
        deleter = threading.Thread(target=delete)
        deleter.start()
        time.sleep(1.0)  # the deletion reaches the rows this one holds
    deleter.join(30)
    (got,) = outcome
    assert isinstance(got, errors.ProjectInUse), repr(got)


# Listing -------------------------------------------------------------------------------------------------

def test_lists_filter_order_and_page(db, world):
    rp, now = world
    with db.write() as conn:
        other = factories.provider_with(conn, VCPU=8)
    made = [_reserve(db, rp, now + h * HOUR, now + (h + 1) * HOUR, vcpu=1,
                     project=f"q{h % 2}") for h in (3, 1, 2)]
    on_other = _reserve(db, other, now + HOUR, now + 2 * HOUR, vcpu=1)
    active = _reserve(db, rp, now - HOUR, now + HOUR, vcpu=1)

    def ids(filters=Filters(), **kw):
        with db.read() as conn:
            return [r.uuid for r in
                    reservation_reads.list_reservations(conn, filters, **kw)]

    # By start, then by id.
    by_start = [active.uuid] + sorted([made[1].uuid, on_other.uuid]) + [
        made[2].uuid, made[0].uuid]
    assert ids() == by_start
    assert ids(Filters(project_id="q1")) == [made[1].uuid, made[0].uuid]
    assert ids(Filters(project_id="nobody")) == []
    assert ids(Filters(resource_provider=other["uuid"])) == [on_other.uuid]
    assert ids(Filters(status="active")) == [active.uuid]
    assert ids(Filters(status="pending")) == by_start[1:]
    assert ids(Filters(start=now + 2 * HOUR, end=now + 3 * HOUR)) == [made[2].uuid]
    assert ids(Filters(end=now + HOUR)) == [active.uuid]
    assert ids(limit=2) == by_start[:2]
    assert ids(limit=2, marker=by_start[1]) == by_start[2:4]
    assert ids(marker=by_start[-1]) == []
    with pytest.raises(errors.Invalid, match="Marker"):
        ids(marker=str(uuid.uuid4()))


# The checks' protocol ---------------------------------------------------------------------------------------

class _Recorder:
    def __init__(self, refuse=False):
        self.seen, self.refuse = [], refuse

    def before_write(self, conn, project_ids):
        self.seen.append(("before", set(project_ids)))

        def after(conn):
            self.seen.append(("after",))
            if self.refuse:
                raise errors.OverLimit("Quota exceeded: a test said so.")
        return after


def test_every_write_runs_the_checks_in_two_phases(db, world):
    rp, now = world
    check = _Recorder()
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR, checks=[check])
    db.run_write(lambda conn: reservations.replace(
        conn, r.uuid, 1, now + HOUR, now + 2 * HOUR, {rp["uuid"]: {"VCPU": 1}},
        project_id="p2", checks=[check]))
    db.run_write(lambda conn: reservations.cancel(conn, r.uuid, [check]))
    assert check.seen == [("before", {"p1"}), ("after",),
                          ("before", {"p1", "p2"}), ("after",),
                          ("before", {"p2"}), ("after",)]


def test_a_check_that_refuses_rolls_the_write_back(db, world):
    rp, now = world
    with pytest.raises(errors.OverLimit):
        _reserve(db, rp, now + HOUR, now + 2 * HOUR, checks=[_Recorder(True)])
    with db.read() as conn:
        assert conn.execute(select(t.reservations)).all() == []
        assert conn.execute(select(t.reservation_amounts)).all() == []


def test_reserving_leaves_provider_generations_alone(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR)
    _replace(db, r, now + HOUR, now + 3 * HOUR, 3)
    with db.read() as conn:
        assert conn.scalar(select(t.resource_providers.c.generation).where(
            t.resource_providers.c.id == rp["id"])) == 0


def test_status_is_the_databases(db, world):
    rp, now = world
    r = _reserve(db, rp, now + HOUR, now + 2 * HOUR)
    with db.write() as conn:
        # Written as if the database's clock had moved on an hour and a half.
        conn.execute(update(t.reservations).values(
            start_at=now - HOUR // 2, end_at=now + HOUR // 2))
    with db.read() as conn:
        assert reservation_reads.get(conn, r.uuid).status == "active"


def test_a_reshape_respects_reservations_both_ways(db, world):
    """A reshape's claims leave room for what is reserved ahead, and its
    final inventory may not take away a class reservations hold."""
    from placement_lite.ledger import reshaper

    rp, now = world
    consumer = _claim(db, rp, 2)
    _reserve(db, rp, now + HOUR, now + 2 * HOUR, vcpu=6)

    def reshape(vcpu, keep_vcpu=True):
        with db.read() as conn:
            provider = providers.get_by_uuid(conn, rp["uuid"])
            stored = inventories.get_inventories(conn, provider)
        wanted = dict(stored) if keep_vcpu else {"MEMORY_MB": stored["MEMORY_MB"]}
        db.run_write(lambda conn: reshaper.reshape(
            conn, {rp["uuid"]: reshaper.ProviderInventories(provider.generation, wanted)},
            [ConsumerWrite(consumer, "p1", "u1", {rp["uuid"]: {"VCPU": vcpu}}
                           if vcpu else {rp["uuid"]: {"MEMORY_MB": 1}})]))

    with pytest.raises(errors.CapacityExceeded, match="held by reservations 6"):
        reshape(3)
    with pytest.raises(errors.InventoryInUse, match="Reservations that have not ended"):
        reshape(0, keep_vcpu=False)
    reshape(2)
