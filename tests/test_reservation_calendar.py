"""Calendars of reservations (ledger/calendar.py and the
/reservations/calendar routes), on every backend: the steps against a
brute-force count at every instant, the short intervals, history before
now, the console's list with its short flags, the period's bounds and the
errors."""
from __future__ import annotations

import random

import falcon.testing
import pytest

from placement_lite.api.times import parse, text
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import calendar
from tests import factories
from tests.reservation_rows import allocate, reservation

HOUR = 3600
DAY = 86400
# Far ahead of any test run's now: every instant of these worlds is in
# the future, so all of it counts and all of it may be short.
T0 = parse("2100-01-01T00:00:00Z", "t0")
ADMIN = {"X-Auth-Token": "admin"}


def _at(windows, t):
    return sum(a for s, e, a in windows if s <= t < e)


def _random_world(conn, rng, project_tag):
    """Two providers with VCPU and MEMORY_MB, some allocated, and a
    dozen reservations by hours in [T0, T0 + 48h) over both, for two
    projects; returns (providers, {rp id: {class: [windows]}},
    {project: {class: [windows]}}, {uuid: (project, start)})."""
    rps, sizes = [], {}
    for _ in range(2):
        rp = factories.provider(conn)
        sizes[rp["id"]] = {}
        for rc in ("VCPU", "MEMORY_MB"):
            total = rng.randrange(4, 24)
            factories.inventory(conn, rp, rc, total, reserved=rng.randrange(0, 3),
                                allocation_ratio=rng.choice([1.0, 1.5, 2.0]))
            sizes[rp["id"]][rc] = total
        rps.append(rp)
    for rp in rps:
        if rng.random() < 0.7:
            allocate(conn, rp, "VCPU", rng.randrange(1, 4),
                     project=f"{project_tag}-x")
    by_rp = {rp["id"]: {"VCPU": [], "MEMORY_MB": []} for rp in rps}
    by_project: dict = {}
    made = {}
    for _ in range(rng.randrange(0, 13)):
        s = T0 + rng.randrange(0, 48) * HOUR
        e = s + rng.randrange(1, 20) * HOUR
        project = f"{project_tag}-{rng.choice('ab')}"
        amounts = {}
        for rp in rng.sample(rps, rng.randrange(1, 3)):
            amounts[rp["id"]] = {rc: rng.randrange(1, 9) for rc in
                                 rng.sample(["VCPU", "MEMORY_MB"], rng.randrange(1, 3))}
        uuid = reservation(conn, s, e, amounts, project=project)
        made[uuid] = (project, s, e)
        for rp_id, classes in amounts.items():
            for rc, amount in classes.items():
                by_rp[rp_id][rc].append((s, e, amount))
                by_project.setdefault(project, {}).setdefault(rc, []).append(
                    (s, e, amount))
    return rps, by_rp, by_project, made


def _assert_steps_cover(found, start, end, windows):
    """Consecutive, covering [start, end), neighbours differing, each the
    brute-force amount at every hour it spans (bounds fall on hours)."""
    assert found[0].start == start and found[-1].end == end
    for a, b in zip(found, found[1:]):
        assert a.end == b.start and a.amount != b.amount
    for s in found:
        for t in range(s.start, s.end, HOUR):
            assert s.amount == _at(windows, t), (s, t)


@pytest.mark.parametrize("seed", range(6))
def test_calendars_equal_a_brute_force_count(db, seed):
    rng = random.Random(seed)
    for round_ in range(5):
        with db.write() as conn:
            rps, by_rp, by_project, made = _random_world(
                conn, rng, f"s{seed}r{round_}")
        start = T0 + rng.randrange(-6, 40) * HOUR
        end = start + rng.randrange(1, 30) * HOUR
        with db.read() as conn:
            for rp in rps:
                cal = calendar.provider_calendar(conn, rp["uuid"], start, end)
                assert cal.now < T0
                assert [c.resource_class for c in cal.classes] == ["MEMORY_MB", "VCPU"]
                for c in cal.classes:
                    windows = by_rp[rp["id"]][c.resource_class]
                    _assert_steps_cover(c.steps, start, end, windows)
                    # Short: where something is reserved and it does not fit.
                    want = [t for t in range(start, end, HOUR)
                            if _at(windows, t) and c.allocated + _at(windows, t) > c.capacity]
                    got = [t for s in c.short for t in range(s.start, s.end, HOUR)]
                    assert got == want
                    for s in c.short:
                        assert s.free == pytest.approx(
                            c.capacity - c.allocated - s.reserved) and s.free < 0
            for project in (f"s{seed}r{round_}-a", f"s{seed}r{round_}-b"):
                cal = calendar.project_calendar(conn, project, start, end)
                # The classes it reserved in the period, and only those.
                want_classes = {rc: w for rc, w in by_project.get(project, {}).items()
                                if any(e > start and s < end for s, e, _a in w)}
                assert set(cal.classes) == set(want_classes)
                for rc, found in cal.classes.items():
                    _assert_steps_cover(found, start, end, want_classes[rc])
                counted = sorted((s, u) for u, (p, s, e) in made.items()
                                 if p == project and e > start and s < end)
                assert list(cal.reservations) == [u for _s, u in counted]


def test_history_before_now_and_short_only_from_now(db):
    """A reservation that ended still counts where it was; one that is
    running counts from its start; only the part from now on is short."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=4)
        now = clock.now(conn)
        ended = reservation(conn, now - 5 * HOUR, now - 3 * HOUR, {rp["id"]: {"VCPU": 6}})
        running = reservation(conn, now - 2 * HOUR, now + 2 * HOUR, {rp["id"]: {"VCPU": 5}})
    with db.read() as conn:
        cal = calendar.provider_calendar(conn, rp["uuid"], now - 6 * HOUR,
                                         now + 3 * HOUR)
        (vcpu,) = cal.classes
        assert [(s.start - now, s.end - now, s.amount) for s in vcpu.steps] == [
            (-6 * HOUR, -5 * HOUR, 0), (-5 * HOUR, -3 * HOUR, 6),
            (-3 * HOUR, -2 * HOUR, 0), (-2 * HOUR, 2 * HOUR, 5),
            (2 * HOUR, 3 * HOUR, 0)]
        # The ended one was over capacity too, but that is history.
        assert [(s.start, s.end, s.reserved, s.free) for s in vcpu.short] == [
            (cal.now, now + 2 * HOUR, 5, -1)]
        project = calendar.project_calendar(conn, "p1", now - 6 * HOUR, now)
        assert project.reservations == (ended, running)
        assert calendar.project_calendar(conn, "p1", now + 2 * HOUR,
                                         now + 3 * HOUR).reservations == ()


def test_a_class_reserved_without_inventory_has_no_capacity(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=4)
        reservation(conn, T0, T0 + HOUR, {rp["id"]: {"DISK_GB": 10}})
    with db.read() as conn:
        cal = calendar.provider_calendar(conn, rp["uuid"], T0, T0 + 2 * HOUR)
    disk, vcpu = cal.classes
    assert (disk.resource_class, disk.inventory, disk.capacity) == ("DISK_GB", False, 0)
    assert [tuple(s) for s in disk.short] == [(T0, T0 + HOUR, 10, -10)]
    assert vcpu.inventory and vcpu.capacity == 4 and vcpu.short == ()


def test_nothing_reserved_is_never_short(db):
    """A provider over its capacity (its inventory shrank under its
    allocations) with nothing reserved: no reservation lacks room."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
        allocate(conn, rp, "VCPU", 6)
        conn.execute(t.inventories.update().where(
            t.inventories.c.resource_provider_id == rp["id"]).values(total=4))
        reservation(conn, T0 + HOUR, T0 + 2 * HOUR, {rp["id"]: {"VCPU": 1}})
    with db.read() as conn:
        (vcpu,) = calendar.provider_calendar(conn, rp["uuid"], T0, T0 + 3 * HOUR).classes
    assert (vcpu.capacity, vcpu.allocated) == (4, 6)
    assert [tuple(s) for s in vcpu.short] == [(T0 + HOUR, T0 + 2 * HOUR, 1, -3)]


def test_the_consoles_list_filters_and_flags_what_is_short(db):
    with db.write() as conn:
        a = factories.provider_with(conn, VCPU=8)
        b = factories.provider_with(conn, VCPU=8, MEMORY_MB=100)
        now = clock.now(conn)
        done = reservation(conn, now - 2 * HOUR, now - HOUR, {a["id"]: {"VCPU": 20}},
                           project="acme")
        fits = reservation(conn, T0, T0 + HOUR, {a["id"]: {"VCPU": 4}}, project="acme")
        # Together 10 of 8 from T0 + 30 min to T0 + 1 h: both are short.
        over = reservation(conn, T0 + HOUR // 2, T0 + 2 * HOUR,
                           {a["id"]: {"VCPU": 6}, b["id"]: {"MEMORY_MB": 10}},
                           project="beta", user="bob")
        later = reservation(conn, T0 + 3 * HOUR, T0 + 4 * HOUR,
                            {b["id"]: {"MEMORY_MB": 100}}, project="beta")
    search = calendar.ReservationSearch
    with db.read() as conn:
        rows = calendar.reservation_page(conn, search())
        assert calendar.count_reservations(conn, search()) == 4
        assert [r.uuid for r in rows] == [done, fits, over, later]
        assert [r.status for r in rows] == ["ended", "pending", "pending", "pending"]
        # The ended one was over capacity; it is history, not short.
        assert [r.short for r in rows] == [False, True, True, False]
        assert rows[2].short_classes == (f"VCPU on {_name(conn, a)}",)
        assert [(x.provider_uuid, x.resources) for x in rows[2].amounts] == sorted(
            [(a["uuid"], {"VCPU": 6}), (b["uuid"], {"MEMORY_MB": 10})],
            key=lambda p: _name(conn, {"uuid": p[0]}))
        assert rows[2].project == "beta" and rows[2].user == "bob"
        assert [r.uuid for r in calendar.reservation_page(
            conn, search(project="beta"))] == [over, later]
        assert [r.uuid for r in calendar.reservation_page(
            conn, search(provider=b["uuid"]))] == [over, later]
        assert [r.uuid for r in calendar.reservation_page(
            conn, search(status="ended"))] == [done]
        assert [r.uuid for r in calendar.reservation_page(
            conn, search(start=T0 + HOUR, end=T0 + 3 * HOUR))] == [over]
        assert [r.uuid for r in calendar.reservation_page(
            conn, search(), offset=1, limit=2)] == [fits, over]
        assert calendar.count_reservations(conn, search(project="nobody")) == 0


def _name(conn, rp):
    from placement_lite.ledger import providers
    return providers.get_by_uuid(conn, rp["uuid"]).name


# The routes -----------------------------------------------------------------------

@pytest.fixture
def client(db):
    return falcon.testing.TestClient(create_app(Settings(db=db.url), db))


def test_the_provider_route_answers_the_ledgers_calendar(db, client):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
        allocate(conn, rp, "VCPU", 2)
        first = reservation(conn, T0, T0 + 2 * HOUR, {rp["id"]: {"VCPU": 4}})
        reservation(conn, T0 + HOUR, T0 + 3 * HOUR, {rp["id"]: {"VCPU": 3}})
    got = client.simulate_get(
        f"/reservations/calendar/resource_providers/{rp['uuid']}",
        params={"from": "2100-01-01T01:00:00+01:00", "to": "2100-01-01 04:00"},
        headers=ADMIN)
    assert got.status_code == 200, got.text
    body = got.json
    assert (body["resource_provider"], body["from"], body["to"]) == (
        rp["uuid"], "2100-01-01T00:00:00Z", "2100-01-01T04:00:00Z")
    assert body["now"] < body["from"]
    assert body["classes"] == {"VCPU": {
        "capacity": 8, "allocated": 2,
        "steps": [{"start": "2100-01-01T00:00:00Z", "end": "2100-01-01T01:00:00Z", "reserved": 4},
                  {"start": "2100-01-01T01:00:00Z", "end": "2100-01-01T02:00:00Z", "reserved": 7},
                  {"start": "2100-01-01T02:00:00Z", "end": "2100-01-01T03:00:00Z", "reserved": 3},
                  {"start": "2100-01-01T03:00:00Z", "end": "2100-01-01T04:00:00Z", "reserved": 0}],
        "short": [{"start": "2100-01-01T01:00:00Z", "end": "2100-01-01T02:00:00Z",
                   "reserved": 7, "free": -1}]}}
    project = client.simulate_get("/reservations/calendar/projects/p1",
                                  params={"from": "2100-01-01T00:00:00Z", "to": "2100-01-02T00:00Z"},
                                  headers=ADMIN).json
    assert project["reservations"][0] == first and len(project["reservations"]) == 2
    assert project["classes"]["VCPU"]["steps"][1]["reserved"] == 7


def test_the_period_defaults_to_thirty_days_from_now(db, client):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    body = client.simulate_get(
        f"/reservations/calendar/resource_providers/{rp['uuid']}", headers=ADMIN).json
    assert body["from"] == body["now"]
    assert parse(body["to"], "to") - parse(body["from"], "from") == 30 * DAY
    assert body["classes"]["VCPU"]["steps"] == [
        {"start": body["from"], "end": body["to"], "reserved": 0}]
    body = client.simulate_get("/reservations/calendar/projects/nobody",
                               params={"from": "2100-02-01T00:00:00Z"}, headers=ADMIN).json
    assert body == {"project_id": "nobody", "from": "2100-02-01T00:00:00Z",
                    "to": "2100-03-03T00:00:00Z", "now": body["now"],
                    "classes": {}, "reservations": []}


@pytest.mark.parametrize("params,words", [
    ({"from": "2100-01-02T00:00:00Z", "to": "2100-01-01T00:00:00Z"},
     "'to' (2100-01-01T00:00:00Z) must be after 'from' (2100-01-02T00:00:00Z)."),
    ({"from": "2100-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}, "must be after 'from'"),
    ({"from": "2100-01-01T00:00:00Z", "to": "2101-01-02T00:00:01"}, "longer than 366 days"),
    ({"from": "2100-01-01T00:00:00.5Z"}, "'from' has fractional seconds"),
    ({"to": "tomorrow"}, "'to' is not an ISO 8601 date and time: 'tomorrow'"),
    ({"to": "2100-01-01"}, "'to' is not an ISO 8601 date and time"),
    ({"from": "2100-02-30T00:00:00Z"}, "'from' is not a valid date and time"),
    ({"from": "0001-01-01T00:00:00+01:00"}, "'from' is not a valid date and time"),
    ({"since": "2100-01-01T00:00:00Z"}, "Additional properties are not allowed"),
    ({"from": "x" * 65}, "is too long"),
])
def test_a_bad_period_is_a_400_that_says_why(db, client, params, words):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    for path in (f"/reservations/calendar/resource_providers/{rp['uuid']}",
                 "/reservations/calendar/projects/p1"):
        got = client.simulate_get(path, params=params, headers=ADMIN)
        assert got.status_code == 400, got.text
        (err,) = got.json["errors"]
        assert err["detail"].startswith("Invalid query string parameters: "), err
        assert words in err["detail"], err
        assert err["code"] and err["request_id"].startswith("req-")


def test_a_year_and_a_day_is_the_longest_period(db, client):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)
    got = client.simulate_get(
        f"/reservations/calendar/resource_providers/{rp['uuid']}",
        params={"from": "2100-01-01T00:00:00Z", "to": text(T0 + 366 * DAY)}, headers=ADMIN)
    assert got.status_code == 200, got.text


def test_unknown_provider_and_policy(db, client):
    missing = "7f0c0c0c-0000-4000-8000-000000000001"
    got = client.simulate_get(f"/reservations/calendar/resource_providers/{missing}",
                              headers=ADMIN)
    assert got.status_code == 404
    assert got.json["errors"][0]["detail"] == f"No resource provider with uuid {missing} found."
    for path in (f"/reservations/calendar/resource_providers/{missing}",
                 "/reservations/calendar/projects/alice-project"):
        got = client.simulate_get(path, headers={"X-Auth-Token": "alice:alice-project"})
        assert got.status_code == 403
        assert got.json["errors"][0]["detail"].startswith(
            "Policy does not allow placement:reservations:calendar to be performed.")


def test_a_policy_file_can_open_a_projects_calendar_to_its_members(db, tmp_path):
    rules = tmp_path / "policy.yaml"
    rules.write_text('"placement:reservations:calendar": '
                     '"rule:admin_api or project_id:%(project_id)s"\n')
    client = falcon.testing.TestClient(create_app(
        Settings(db=db.url, policy_file=str(rules)), db))
    alice = {"X-Auth-Token": "alice:acme"}
    assert client.simulate_get("/reservations/calendar/projects/acme",
                               headers=alice).status_code == 200
    assert client.simulate_get("/reservations/calendar/projects/beta",
                               headers=alice).status_code == 403


@pytest.mark.parametrize("profile", ["legacy", "secure-rbac"])
def test_the_calendar_is_the_admins_in_any_scope(db, profile):
    client = falcon.testing.TestClient(create_app(
        Settings(db=db.url, policy_profile=profile), db))
    callers = {
        "admin": ({"X-Auth-Token": "admin"}, 200),
        "system admin": ({"X-Auth-Token": "root", "X-Roles": "admin",
                          "OpenStack-System-Scope": "all"}, 200),
        "service": ({"X-Auth-Token": "nova", "X-Roles": "service",
                     "X-Project-Id": "services"}, 403),
        "the project's reader": ({"X-Auth-Token": "carol:acme", "X-Roles": "reader"}, 403),
    }
    for who, (headers, status) in callers.items():
        got = client.simulate_get("/reservations/calendar/projects/acme", headers=headers)
        assert got.status_code == status, (who, got.text)


def test_the_calendar_docs_show_is_the_services(db, client):
    """docs/reservations.md's provider calendar, asked for again as the
    text tells it (only `now` may differ)."""
    from tests.test_docs import example

    shown = example("docs/reservations.md",
                    lambda doc: doc.get("resource_provider", "").startswith("c0c0"))
    day = parse("2099-12-01T00:00:00Z", "day")
    with db.write() as conn:
        rp = factories.provider(conn, "cn1", shown["resource_provider"])
        factories.inventory(conn, rp, "VCPU", 16, allocation_ratio=4.0)
        for used in (16, 16, 8):
            allocate(conn, rp, "VCPU", used)
        reservation(conn, day + 9 * HOUR, day + 17 * HOUR, {rp["id"]: {"VCPU": 16}})
        reservation(conn, day + 12 * HOUR, day + 20 * HOUR, {rp["id"]: {"VCPU": 16}})
    got = client.simulate_get(
        f"/reservations/calendar/resource_providers/{rp['uuid']}",
        params={"from": shown["from"], "to": shown["to"]}, headers=ADMIN).json
    assert {**got, "now": shown["now"]} == shown


@pytest.mark.parametrize("count", [3, 60])
def test_a_calendar_is_a_fixed_number_of_statements(db, count):
    """However many reservations there are: the provider, the clock, the
    amounts and the inventories for a provider's calendar; the clock and
    one join for a project's; the page, its amounts, the windows on its
    keys and their inventories for the console's list."""
    from tests.backends import statements_run

    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=8, MEMORY_MB=64) for _ in range(3)]
        for k in range(count):
            reservation(conn, T0 + k * HOUR, T0 + (k + 5) * HOUR,
                        {rps[k % 3]["id"]: {"VCPU": 5}, rps[(k + 1) % 3]["id"]: {"MEMORY_MB": 20}})
    with db.read() as conn, statements_run(db) as seen:
        calendar.provider_calendar(conn, rps[0]["uuid"], T0, T0 + 30 * DAY)
        provider = len(seen)
        calendar.project_calendar(conn, "p1", T0, T0 + 30 * DAY)
        project = len(seen) - provider
        rows = calendar.reservation_page(conn, calendar.ReservationSearch(), 0, 50)
        listing = len(seen) - provider - project
    assert (provider, project, listing) == (4, 2, 5)
    assert len(rows) == min(count, 50) and any(r.short for r in rows) == (count > 3)
