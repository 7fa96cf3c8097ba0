"""Using a reservation (docs/reservations.md, "Using a reservation"),
through the HTTP API on every configured backend: the holder's claims
draw from the reservation by naming its marker class, within what it
holds, inside its window; what they draw takes no free room and is not
counted twice (not by the claim rule, not by admission, not by quota);
ending the reservation takes its drawn allocations along.

Times are the database's (db/clock.py), read when a test starts.
"""
from __future__ import annotations

import threading
import time
import uuid as uuidlib

import pytest
from sqlalchemy import func, select

from placement_lite import errors
from placement_lite.api.times import text
from placement_lite.config import Settings
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.ledger import allocations, marker, reservations, resource_classes
from placement_lite.ledger.allocations import ConsumerWrite
from tests import factories
from tests.reservation_api import (
    ADMIN, HOUR, client_for, code, db_now, provider, put_allocations, reserve)
from tests.reservation_rows import move_window


@pytest.fixture
def client(db):
    return client_for(db)


def _provider(client, vcpu=8, memory=1024) -> str:
    return provider(client, VCPU=vcpu, MEMORY_MB=memory)


def _reserve(client, rp, start, end, vcpu=4, project="lab", extra=None):
    return reserve(client, {rp: {"VCPU": vcpu, **(extra or {})}}, start, end, project)


def _claim(client, rp, resources, project="lab", consumer=None):
    consumer = consumer or str(uuidlib.uuid4())
    return consumer, put_allocations(
        client, consumer, {rp: {"resources": resources}}, project)


def _draw(client, rid, rp, vcpu, project="lab", **more):
    return _claim(client, rp, {"VCPU": vcpu, marker.class_name(rid): 1, **more},
                  project)


def _usage(client, rp) -> dict:
    got = client.simulate_get(f"/resource_providers/{rp}/usages", headers=ADMIN)
    assert got.status_code == 200, got.text
    return got.json["usages"]


def _project_usages(client, project) -> dict:
    """GET /usages at 1.39 answers by consumer type: all of them, summed."""
    got = client.simulate_get(f"/usages?project_id={project}", headers=ADMIN)
    assert got.status_code == 200, got.text
    out: dict = {}
    for by_type in got.json["usages"].values():
        for name, n in by_type.items():
            out[name] = out.get(name, 0) + n
    return out


def _ledger_is_consistent(db) -> None:
    """`used` and `drawn` equal the allocation rows' sums, and the usage
    summary equals the allocations (db/usage_summary.drift)."""
    with db.read() as conn:
        assert usage_summary.drift(conn) == []
        inv, a = t.inventories, t.allocations
        for rp, rc, drawn in conn.execute(select(
                inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.drawn)):
            rows = conn.execute(select(a.c.used).where(
                a.c.resource_provider_id == rp, a.c.resource_class_id == rc,
                a.c.reservation_id.is_not(None))).scalars().all()
            assert drawn == sum(rows), (rp, rc)


def test_the_marker_class_comes_and_goes_with_the_reservation(db, client):
    rp = _provider(client)
    now = db_now(db)
    rid = _reserve(client, rp, now + HOUR, now + 2 * HOUR)
    name = marker.class_name(rid)
    assert client.simulate_get(f"/resource_classes/{name}",
                               headers=ADMIN).status_code == 200
    # It cannot be deleted under the reservation.
    got = client.simulate_delete(f"/resource_classes/{name}", headers=ADMIN)
    assert got.status_code == 409, got.text
    assert f"It names reservation {rid}" in got.json["errors"][0]["detail"]
    assert client.simulate_delete(f"/reservations/{rid}",
                                  headers=ADMIN).status_code == 204
    assert client.simulate_get(f"/resource_classes/{name}",
                               headers=ADMIN).status_code == 404


def test_drawing_from_a_reservation_end_to_end(db, client):
    rp = _provider(client)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR)
    mark = marker.class_name(rid)

    first, got = _draw(client, rid, rp, 2)
    assert got.status_code == 204, got.text
    # Placement's numbers show every allocation, drawn or not (a
    # provider's usages list the classes it has inventory of, as
    # Placement's do; the project's list the marker too).
    assert _usage(client, rp)["VCPU"] == 2
    usages = _project_usages(client, "lab")
    assert usages["VCPU"] == 2 and usages[mark] == 1
    shown = client.simulate_get(f"/allocations/{first}", headers=ADMIN).json
    assert shown["allocations"][rp]["resources"] == {"VCPU": 2, mark: 1}

    # The reservation's 4 stay out of free room: 8 - 4 reserved = 4 open.
    _c, got = _claim(client, rp, {"VCPU": 5}, project="other")
    assert got.status_code == 409, got.text
    assert "held by reservations 4" in got.json["errors"][0]["detail"]
    open_claim, got = _claim(client, rp, {"VCPU": 4}, project="other")
    assert got.status_code == 204, got.text

    # 2 of 4 drawn: 3 more do not fit it, 2 do.
    _c, got = _draw(client, rid, rp, 3)
    assert got.status_code == 409 and code(got) == "placement.reservation.overdrawn"
    assert (f"reservation {rid} holds 4 of VCPU on resource provider {rp}, "
            "2 already drawn; requested 3") in got.json["errors"][0]["detail"]
    second, got = _draw(client, rid, rp, 2)
    assert got.status_code == 204, got.text
    assert _usage(client, rp)["VCPU"] == 8
    _ledger_is_consistent(db)

    # End it early: what was drawn goes with it, and its room is free.
    got = client.simulate_post(f"/reservations/{rid}/end", headers=ADMIN)
    assert got.status_code == 200, got.text
    for consumer in (first, second):
        shown = client.simulate_get(f"/allocations/{consumer}", headers=ADMIN)
        assert shown.json["allocations"] == {}
    assert _usage(client, rp)["VCPU"] == 4
    usages = _project_usages(client, "lab")
    assert usages.get(mark, 0) == 0 and usages.get("VCPU", 0) == 0
    _c, got = _claim(client, rp, {"VCPU": 4}, project="other")
    assert got.status_code == 204, got.text
    _ledger_is_consistent(db)


def test_a_consumer_moves_between_open_and_drawn(db, client):
    rp = _provider(client, vcpu=6)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR, vcpu=4)
    consumer, got = _draw(client, rid, rp, 4)
    assert got.status_code == 204, got.text
    # Leaving the reservation makes the 4 open: with the reservation's 4,
    # 8 would be taken of 6.
    generation = client.simulate_get(f"/allocations/{consumer}",
                                     headers=ADMIN).json["consumer_generation"]
    got = client.simulate_put(f"/allocations/{consumer}", headers=ADMIN, json={
        "allocations": {rp: {"resources": {"VCPU": 4}}},
        "project_id": "lab", "user_id": "alice",
        "consumer_generation": generation, "consumer_type": "INSTANCE"})
    assert got.status_code == 409, got.text
    assert "held by reservations 4" in got.json["errors"][0]["detail"]
    # Resizing inside it is a draw again, within what it holds.
    generation = client.simulate_get(f"/allocations/{consumer}",
                                     headers=ADMIN).json["consumer_generation"]
    got = client.simulate_put(f"/allocations/{consumer}", headers=ADMIN, json={
        "allocations": {rp: {"resources": {"VCPU": 3, marker.class_name(rid): 1}}},
        "project_id": "lab", "user_id": "alice",
        "consumer_generation": generation, "consumer_type": "INSTANCE"})
    assert got.status_code == 204, got.text
    # Open room beside it: 6 - 4 reserved = 2.
    _c, got = _claim(client, rp, {"VCPU": 2}, project="other")
    assert got.status_code == 204, got.text
    got = client.simulate_delete(f"/allocations/{consumer}", headers=ADMIN)
    assert got.status_code == 204
    _ledger_is_consistent(db)


@pytest.mark.parametrize("case", ["other_project", "pending", "not_held",
                                  "ended", "unknown"])
def test_what_may_not_draw(db, client, case):
    rp = _provider(client)
    now = db_now(db)
    start = now + HOUR if case == "pending" else now
    rid = _reserve(client, rp, start, start + HOUR)
    if case == "ended":
        assert client.simulate_post(f"/reservations/{rid}/end",
                                    headers=ADMIN).status_code == 200
    if case == "unknown":
        # A class of the marker's shape that names no reservation.
        rid = str(uuidlib.uuid4())
        with db.write() as conn:
            resource_classes.ensure(conn, marker.class_name(rid))
    _c, got = _draw(client, rid, rp, 1,
                    project="stranger" if case == "other_project" else "lab",
                    **({"MEMORY_MB": 64} if case == "not_held" else {}))
    assert got.status_code == 409, got.text
    detail = got.json["errors"][0]["detail"]
    expected = {
        "other_project": ("placement.reservation.other_project",
                          f"reservation {rid} is held by project lab"),
        "pending": ("placement.reservation.not_active", "it starts at"),
        "ended": ("placement.reservation.not_active", "it ended at"),
        "unknown": ("placement.reservation.not_active", "does not exist"),
        "not_held": ("placement.reservation.not_held", "holds no MEMORY_MB"),
    }[case]
    assert code(got) == expected[0] and expected[1] in detail, detail
    # Nothing was written.
    assert _usage(client, rp).get("VCPU", 0) == 0


def test_a_marker_class_unknown_to_the_service_is_placements_400(db, client):
    rp = _provider(client)
    _c, got = _draw(client, str(uuidlib.uuid4()), rp, 1)
    assert got.status_code == 400, got.text
    assert "No such resource class" in got.json["errors"][0]["detail"]


def test_two_reservations_on_one_provider_of_one_consumer_is_a_400(db, client):
    rp = _provider(client)
    now = db_now(db)
    a = _reserve(client, rp, now, now + HOUR, vcpu=2)
    b = _reserve(client, rp, now, now + HOUR, vcpu=2)
    _c, got = _claim(client, rp, {"VCPU": 1, marker.class_name(a): 1,
                                  marker.class_name(b): 1})
    assert got.status_code == 400, got.text


def test_unit_limits_still_apply_to_a_draw(db, client):
    rp = _provider(client)
    got = client.simulate_put(
        f"/resource_providers/{rp}/inventories", headers=ADMIN,
        json={"resource_provider_generation": 1, "inventories": {
            "VCPU": {"total": 8, "step_size": 2}, "MEMORY_MB": {"total": 1024}}})
    assert got.status_code == 200, got.text
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR)
    _c, got = _draw(client, rid, rp, 3)
    assert got.status_code == 409
    assert "step_size 2" in got.json["errors"][0]["detail"]


def test_back_to_back_booking_while_drawn_allocations_remain(db, client):
    """A reservation right after R on the same provider is admitted while
    R's drawn allocations exist: they end with R, so they do not take the
    room after it (with `used` alone they would)."""
    rp = _provider(client, vcpu=4)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR, vcpu=4)
    _c, got = _draw(client, rid, rp, 4)
    assert got.status_code == 204, got.text
    _reserve(client, rp, now + HOUR, now + 2 * HOUR, vcpu=4, project="next")
    # ... and not one during R's window.
    got = client.simulate_post("/reservations", headers=ADMIN, json={
        "project_id": "next", "user_id": "bob", "start": text(now),
        "end": text(now + 2 * HOUR),
        "allocations": {rp: {"resources": {"VCPU": 1}}}})
    assert got.status_code == 409, got.text
    # The calendar shows no open allocation there: R's 4 are inside it.
    cal = client.simulate_get(f"/reservations/calendar/resource_providers/{rp}",
                              headers=ADMIN).json
    assert cal["classes"]["VCPU"]["allocated"] == 0
    assert cal["classes"]["VCPU"]["short"] == []


def test_a_reservation_cannot_shrink_below_what_it_gave_out(db, client):
    rp = _provider(client)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR, vcpu=4)
    _c, got = _draw(client, rid, rp, 3)
    assert got.status_code == 204, got.text
    current = client.simulate_get(f"/reservations/{rid}", headers=ADMIN).json

    def change(vcpu):
        return client.simulate_put(f"/reservations/{rid}", headers=ADMIN, json={
            "generation": current["generation"], "start": current["start"],
            "end": current["end"],
            "allocations": {rp: {"resources": {"VCPU": vcpu}}}})
    got = change(2)
    assert got.status_code == 409 and code(got) == "placement.reservation.overdrawn"
    assert change(3).status_code == 200


def _drawn_then_ended(db, client):
    """A reservation of all 4 VCPU of a provider, all drawn by one
    consumer, whose window then ends naturally."""
    rp = _provider(client, vcpu=4)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR, vcpu=4)
    consumer, got = _draw(client, rid, rp, 4)
    assert got.status_code == 204, got.text
    _end_naturally(db, rid)
    return rp, rid, consumer, now


def test_after_the_natural_end_drawn_rows_count_nowhere_until_deleted(db, client):
    rp, rid, consumer, now = _drawn_then_ended(db, client)
    # Still on record, as Placement shows it ...
    assert _usage(client, rp)["VCPU"] == 4
    # ... but taking no room in time: a reservation of everything fits.
    _reserve(client, rp, now + HOUR, now + 2 * HOUR, vcpu=4, project="next")
    # Drawing from it again is refused, as from any ended reservation.
    _c, got = _draw(client, rid, rp, 1)
    assert got.status_code == 409 and code(got) == "placement.reservation.not_active"
    # Deleting the ended reservation from the records takes them along.
    assert client.simulate_delete(f"/reservations/{rid}",
                                  headers=ADMIN).status_code == 204
    assert client.simulate_get(f"/allocations/{consumer}",
                               headers=ADMIN).json["allocations"] == {}
    assert _usage(client, rp)["VCPU"] == 0
    _ledger_is_consistent(db)


def test_the_sweep_removes_what_ended_reservations_gave_out(db, client, capsys):
    from placement_lite import cli

    rp, rid, consumer, _now_ = _drawn_then_ended(db, client)
    live = _reserve(client, rp, db_now(db), db_now(db) + HOUR, vcpu=4, project="next")
    kept, got = _draw(client, live, rp, 1, project="next")
    assert got.status_code == 204, got.text
    assert cli.main(["db", "sweep-draws", "--db", db.url]) == 0
    assert capsys.readouterr().out.strip() == (
        "2 drawn allocation rows of 1 ended reservations removed")
    assert client.simulate_get(f"/allocations/{consumer}",
                               headers=ADMIN).json["allocations"] == {}
    # A live reservation's draws stay, and the ended one stays on record.
    assert client.simulate_get(f"/allocations/{kept}",
                               headers=ADMIN).json["allocations"] != {}
    assert client.simulate_get(f"/reservations/{rid}", headers=ADMIN).status_code == 200
    assert _usage(client, rp)["VCPU"] == 1
    _ledger_is_consistent(db)


def _end_naturally(db, rid) -> None:
    with db.write() as conn:
        # As time would leave it: the window is over.
        past = clock.now(conn) - 10
        move_window(conn, rid, past - HOUR, past)


# Races -------------------------------------------------------------------------------

def _until_refused(db, write, out: dict, lock: threading.Lock, kind: str) -> None:
    """Take one unit at a time with `write` until it is refused."""
    while True:
        try:
            db.run_write(write)
        except (errors.CapacityExceeded, errors.ReservationOverdrawn,
                errors.ReservationNotActive):
            return
        except Exception as exc:  # noqa: BLE001 - the test reports every one
            with lock:
                out["unexpected"].append(repr(exc))
            return
        with lock:
            out[kind] += 1


def _one_unit(rp: str, project: str, rid: str | None = None):
    resources = {"VCPU": 1, **({marker.class_name(rid): 1} if rid else {})}
    return lambda conn: allocations.replace(conn, [ConsumerWrite(
        str(uuidlib.uuid4()), project, "u", {rp: resources},
        expected_generation=None)])


def _run(threads) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_draws_and_claims_racing_take_exactly_the_room(db):
    """Threads drawing one unit at a time from R race threads claiming
    plain units on the same provider: R gives out exactly what it holds,
    the plain claims exactly the rest, and no instant is oversold."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=10)["uuid"]
        now = clock.now(conn)
    rid = db.run_write(lambda conn: reservations.create(
        conn, None, "lab", "u", now, now + HOUR, {rp: {"VCPU": 6}})).uuid
    out = {"drawn": 0, "open": 0, "unexpected": []}
    lock = threading.Lock()
    _run([threading.Thread(target=_until_refused, args=(
        db, _one_unit(rp, "lab", rid) if i % 2 else _one_unit(rp, "other"),
        out, lock, "drawn" if i % 2 else "open")) for i in range(6)])
    assert out["unexpected"] == []
    assert (out["drawn"], out["open"]) == (6, 4)
    with db.read() as conn:
        row = conn.execute(select(t.inventories)).one()
    assert (row.used, row.drawn) == (10, 6)
    _ledger_is_consistent(db)


def test_draws_racing_the_reservations_end_leave_nothing_drawn(db):
    """Draws racing an early end: each draw commits before the end (and
    goes with it) or after it (and is refused); none outlives it."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=64)["uuid"]
        now = clock.now(conn)
    rid = db.run_write(lambda conn: reservations.create(
        conn, None, "lab", "u", now, now + HOUR, {rp: {"VCPU": 64}})).uuid
    out = {"drawn": 0, "unexpected": []}
    lock = threading.Lock()
    threads = [threading.Thread(target=_until_refused, args=(
        db, _one_unit(rp, "lab", rid), out, lock, "drawn")) for _ in range(4)]
    for thread in threads:
        thread.start()
    while out["drawn"] < 3 and any(thread.is_alive() for thread in threads):
        threading.Event().wait(0.01)
    db.run_write(lambda conn: reservations.end(conn, rid))
    for thread in threads:
        thread.join()
    assert out["unexpected"] == []
    assert out["drawn"] >= 3
    with db.read() as conn:
        assert conn.scalar(select(func.count()).select_from(t.allocations)) == 0
        row = conn.execute(select(t.inventories)).one()
    assert (row.used, row.drawn) == (0, 0)
    _ledger_is_consistent(db)


# Quota ---------------------------------------------------------------------------------

def test_a_draw_is_not_charged_twice_by_quota(db):
    """With enforcement on and lab's VCPU limit 4: a reservation of 4
    fills the limit at every instant of its window, and a draw inside it
    is not refused (it is charged through the reservation already),
    while a plain claim is; a draw by the reservation's marker is no
    quota resource of its own, even with unregistered names at zero."""
    from placement_lite.quota import catalog, enforce, limits, projects, reserved

    settings = Settings(db=db.url, quota_enforce=True,
                        quota_unregistered_is_zero=True)
    enforcer = enforce.Enforcer(settings)
    with db.write() as conn:
        service = catalog.create_service(conn, type="placement")["id"]
        rp = factories.provider_with(conn, VCPU=100)["uuid"]
        limits.create_registered(conn, [
            {"service_id": service, "resource_name": name, "default_limit": 1000}
            for name in ("class:VCPU", "lease:VCPU:hours", "consumers:unknown")])
        now = clock.now(conn)
    with db.write() as conn:
        projects.create(conn, external_id="lab", name="lab", parent=None,
                        max_depth=enforcer.model.max_depth)
        limits.create_limits(conn, [{
            "project_id": "lab", "service_id": service,
            "resource_name": "class:VCPU", "resource_limit": 4}], enforcer.model)
    rid = db.run_write(lambda conn: reservations.create(
        conn, None, "lab", "u", now, now + HOUR, {rp: {"VCPU": 4}},
        [reserved.check_for(enforcer)])).uuid

    def write(resources, consumer=None):
        return lambda conn: allocations.replace(conn, [ConsumerWrite(
            consumer or str(uuidlib.uuid4()), "lab", "u", {rp: resources},
            expected_generation=None)], [enforcer])
    with pytest.raises(errors.OverLimit):
        db.run_write(write({"VCPU": 1}))
    db.run_write(write({"VCPU": 3, marker.class_name(rid): 1}))
    db.run_write(write({"VCPU": 1, marker.class_name(rid): 1}))
    # Once it ends, what it gave out is gone, and its room in the limit
    # is open to plain claims.
    db.run_write(lambda conn: reservations.end(conn, rid, [reserved.check_for(enforcer)]))
    db.run_write(write({"VCPU": 4}))
    with pytest.raises(errors.OverLimit):
        db.run_write(write({"VCPU": 1}))


def test_window_candidates_count_a_drawn_allocation_once(db, client):
    """Inside R's window its drawn allocations are inside R's amount:
    8 VCPU, R holds 4 and all 4 are drawn, so 4 are free there (not 0),
    and `used` in the summaries is what takes room: 4."""
    rp = _provider(client)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR, vcpu=4)
    _c, got = _draw(client, rid, rp, 4)
    assert got.status_code == 204, got.text

    def ask(vcpu):
        got = client.simulate_get("/reservations/allocation_candidates", headers=ADMIN,
                                  params={"start": text(now), "end": text(now + HOUR),
                                          "resources": f"VCPU:{vcpu}"})
        assert got.status_code == 200, got.text
        return got.json
    found = ask(4)
    assert [list(a["allocations"]) for a in found["allocation_requests"]] == [[rp]]
    assert found["provider_summaries"][rp]["resources"]["VCPU"]["used"] == 4
    assert ask(5)["allocation_requests"] == []


@pytest.mark.parametrize("in_memory", [True, False], ids=["copy", "sql"])
def test_plain_candidates_count_a_drawn_allocation_once(db, in_memory):
    """Plain candidates leave room for what is reserved from now on; what
    R's consumers drew is inside R's amount, so it is not taken off again:
    8 VCPU, R holds 4 and has given out all 4, so 4 are free for anyone,
    with the process's copy of the facts warm from before the draw, and
    without a copy."""
    client = client_for(db, facts_in_memory=in_memory)
    rp = _provider(client)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR, vcpu=4)

    def offered(vcpu) -> bool:
        got = client.simulate_get("/allocation_candidates", headers=ADMIN,
                                  params={"resources": f"VCPU:{vcpu}"})
        assert got.status_code == 200, got.text
        return [list(a["allocations"]) for a in got.json["allocation_requests"]] == [[rp]]
    assert offered(4) and not offered(5)
    consumer, got = _draw(client, rid, rp, 4)
    assert got.status_code == 204, got.text
    assert offered(4) and not offered(5)
    # and the room offered is the room a claim gets
    _c, got = _claim(client, rp, {"VCPU": 4}, project="other")
    assert got.status_code == 204, got.text
    assert not offered(1)
    _ledger_is_consistent(db)


def test_plain_candidates_give_back_what_an_ended_reservation_gave_out(db):
    """Expiry is exact before any sweep: once R has ended, what its
    consumers drew takes no room (a claim of everything is granted), and
    plain candidates from the process's copy of the facts offer that
    room at once, with the copy warm from before the end. Without a copy
    (the SQL reader, which knows only `used`) the answer stays on the
    safe side until the sweep: docs/reservations.md says so."""
    client = client_for(db, facts_in_memory=True)
    rp = _provider(client, vcpu=4)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + 3, vcpu=4)
    _c, got = _draw(client, rid, rp, 4)
    assert got.status_code == 204, got.text

    def offered(vcpu) -> bool:
        got = client.simulate_get("/allocation_candidates", headers=ADMIN,
                                  params={"resources": f"VCPU:{vcpu}"})
        assert got.status_code == 200, got.text
        return [list(a["allocations"]) for a in got.json["allocation_requests"]] == [[rp]]
    assert not offered(1)  # R holds everything and has given it all out
    while db_now(db) < now + 3:  # R ends as time passes, no write in between
        time.sleep(0.2)
    assert offered(4) and not offered(5)
    got = client.simulate_get("/allocation_candidates", headers=ADMIN,
                              params={"resources": "VCPU:4"})
    assert got.json["provider_summaries"][rp]["resources"]["VCPU"]["used"] == 0
    _c, got = _claim(client, rp, {"VCPU": 4}, project="other")
    assert got.status_code == 204, got.text
    assert not offered(1)
    _ledger_is_consistent(db)


@pytest.mark.parametrize("in_memory", [True, False], ids=["copy", "sql"])
def test_window_candidates_after_the_reservation_leave_out_what_it_gave(db, in_memory):
    """R holds 4 of 8 VCPU for the next hour and has given all 4 out:
    for the hour after R, its drawn allocations have ended with it, so all
    8 are free there, as admission judges (a reservation of 8 fits). From
    the copy of the facts the candidates say so; without one they stay on
    the safe side (4), never offering more than admission would grant."""
    client = client_for(db, facts_in_memory=in_memory)
    rp = _provider(client, vcpu=8)
    now = db_now(db)
    rid = _reserve(client, rp, now, now + HOUR, vcpu=4)
    _c, got = _draw(client, rid, rp, 4)
    assert got.status_code == 204, got.text

    def most_offered() -> int:
        for vcpu in range(8, 0, -1):
            got = client.simulate_get(
                "/reservations/allocation_candidates", headers=ADMIN,
                params={"start": text(now + HOUR), "end": text(now + 2 * HOUR),
                        "resources": f"VCPU:{vcpu}"})
            assert got.status_code == 200, got.text
            if got.json["allocation_requests"]:
                return vcpu
        return 0
    assert most_offered() == (8 if in_memory else 4)
    _reserve(client, rp, now + HOUR, now + 2 * HOUR, vcpu=8, project="next")
    assert most_offered() == 0
