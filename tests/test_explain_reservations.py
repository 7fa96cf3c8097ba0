"""GET /explain/allocation_candidates where reservations exist
(docs/explain.md, "Reservations"): its candidates are the route's, its
funnel has a step for what reservations hold, its reasons name their
numbers, it explains a window query, it lists a named provider's short
reservations, and it explains a request naming a reservation's marker.

Through the HTTP API on every configured backend, over the process's copy
of the facts and over SQL alone. Times are the database's (db/clock.py).
"""
from __future__ import annotations

import uuid as uuidlib

import falcon.testing
import pytest

from placement_lite.api.times import text
from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.reservation_api import ADMIN, HOUR, db_now as _now, reserve as _reserve

DAY = 24 * HOUR


@pytest.fixture(params=["memory", "sql"])
def client(db, request):
    return falcon.testing.TestClient(create_app(
        Settings(db=db.url, facts_in_memory=request.param == "memory"), db))


def _host(client, **inventory) -> str:
    rp = str(uuidlib.uuid4())
    got = client.simulate_post("/resource_providers", headers=ADMIN,
                               json={"name": f"rp-{rp}", "uuid": rp})
    assert got.status_code == 200, got.text
    got = client.simulate_put(
        f"/resource_providers/{rp}/inventories", headers=ADMIN,
        json={"resource_provider_generation": 0, "inventories": {
            name: {"total": n} for name, n in (inventory or {"VCPU": 8}).items()}})
    assert got.status_code == 200, got.text
    return rp


def _get(client, path, query, status=200):
    got = client.simulate_get(path, query_string=query, headers=ADMIN)
    assert got.status_code == status, got.text
    return got.json


def _providers(answer) -> list:
    """The providers of each allocation request, in the answer's order."""
    return [sorted(r["allocations"]) for r in answer["allocation_requests"]]


def _explained(answer) -> list:
    return [sorted(c["allocations"]) for c in answer["candidates"]["first"]]


def _step(answer, kind, group=""):
    """The step of that kind in the group's funnel (None: the search's)."""
    steps = answer["search"] if group is None else next(
        g["steps"] for g in answer["groups"] if g["group"] == group)
    found = [s for s in steps if s["step"] == kind]
    assert len(found) <= 1, found
    return found[0] if found else None


def _reasons(answer, uuid) -> list:
    return [(r["step"], r["reason"]) for r in answer["providers"][uuid]["reasons"]]


def _claim(client, rp, resources, project="lab"):
    got = client.simulate_put(f"/allocations/{uuidlib.uuid4()}", headers=ADMIN, json={
        "allocations": {rp: {"resources": resources}}, "project_id": project,
        "user_id": "alice", "consumer_generation": None, "consumer_type": "INSTANCE"})
    assert got.status_code == 204, got.text


def test_explain_leaves_out_what_the_route_leaves_out(db, client):
    a, b = _host(client), _host(client)
    now = _now(db)
    # All of a's room is reserved next week: a claim now would be refused.
    _reserve(client, {a: {"VCPU": 8}}, now + 7 * DAY, now + 8 * DAY)
    real = _get(client, "/allocation_candidates", "resources=VCPU:1")
    assert _providers(real) == [[b]]
    told = _get(client, "/explain/allocation_candidates",
                f"resources=VCPU:1&explain_provider={a}&explain_provider={b}")
    assert told["candidates"]["count"] == 1
    assert _explained(told) == [[b]]
    assert told["providers"][a]["excluded"] is True
    assert told["providers"][b]["excluded"] is False
    # Why: the capacity step lets both through, the reservations' step a
    # alone; the reason names the class and every number.
    capacity = _step(told, "resources")
    assert (capacity["providers_before"], capacity["providers_after"]) == (2, 2)
    ahead = _step(told, "reserved_ahead")
    assert ahead["detail"] == "the most reserved at any instant from now on"
    assert (ahead["providers_before"], ahead["providers_after"]) == (2, 1)
    assert (ahead["trees_before"], ahead["trees_after"]) == (2, 1)
    assert _reasons(told, a) == [
        ("resources", "no provider of the tree (or sharing one) can give VCPU:1"),
        ("reserved_ahead", f"{a}: VCPU: needs 1, free 0 of capacity 8 (used 0, "
         "reserved ahead 8)")]
    assert _reasons(told, b) == []


def test_a_numbered_group_and_a_provider_short_of_room_either_way(db, client):
    a, b = _host(client), _host(client)
    now = _now(db)
    _claim(client, a, {"VCPU": 2})
    _reserve(client, {a: {"VCPU": 4}}, now + DAY, now + 2 * DAY)
    # 4 fit what is allocated (2 of 8), not beside the 4 reserved.
    told = _get(client, "/explain/allocation_candidates",
                f"resources1=VCPU:4&explain_provider={a}")
    assert _explained(told) == [[b]]
    assert [(s["step"], s["providers_after"]) for s in told["groups"][0]["steps"]] == [
        ("resources", 2), ("reserved_ahead", 1)]
    assert _reasons(told, a) == [
        (None, "group 1: no provider of the tree passes its filters"),
        ("reserved_ahead", f"{a}: VCPU: needs 4, free 2 of capacity 8 (used 2, "
         "reserved ahead 4)")]
    # 7 do not fit even what is allocated: the capacity step says so, with
    # what is reserved too, and the reservations' step adds nothing.
    told = _get(client, "/explain/allocation_candidates",
                f"resources1=VCPU:7&explain_provider={a}")
    assert _reasons(told, a)[1:] == [
        ("resources", f"{a}: VCPU: needs 7, free 2 of capacity 8 (used 2, "
         "reserved ahead 4)")]
    assert _step(told, "reserved_ahead", "1")["providers_before"] == 1


def test_explain_without_reservations_answers_as_before(db):
    """The console's world, explained before reservations were counted:
    the same body, byte for byte, and again once the only reservation
    has ended (nothing is held from now on)."""
    from tests.test_ui import CN1, CN2, DISK, NUMA0, NUMA1, _caller, _client, build_world
    client = _client(db, ui=True)
    build_world(_caller(client))
    query = f"resources=VCPU:12,DISK_GB:10&explain_provider={CN1}&explain_provider={CN2}"

    def capacity(rp, free, cap, used):
        return {"group": "", "provider": rp, "step": "resources", "reason":
                f"{rp}: VCPU: needs 12, free {free} of capacity {cap} (used {used})"}

    def none(rp):
        return {"group": "", "provider": rp, "step": "resources",
                "reason": f"{rp}: has no VCPU inventory"}

    def step(name, detail, before, after, trees_before, trees_after):
        return {"step": name, "detail": detail, "providers_before": before,
                "providers_after": after, "trees_before": trees_before,
                "trees_after": trees_after}

    before = {
        "groups": [{"group": "", "steps": [
            step("resources", "DISK_GB:10", 5, 1, 3, 1),
            step("resources", "VCPU:12", 1, 0, 1, 0)]}],
        "search": [
            step("offered", "trees where some group has a provider, or a sharing "
                 "provider serves", None, None, None, 3),
            step("sharing", "every group (and class of the unnumbered group) has a "
                 "provider in the tree or one of 1 sharing providers (serving 3 "
                 "trees); 0 trees by their own providers alone", None, None, 3, 1),
            step("group_policy", "nothing to check", None, None, 1, 1),
            step("limit", "no limit; search bound 1000", 1, 1, None, None)],
        "candidates": {"count": 1, "randomized": False, "first": [{
            "allocations": {DISK: {"resources": {"DISK_GB": 10}},
                            CN2: {"resources": {"VCPU": 12}}},
            "mappings": {"": [CN2, DISK]}}]},
        "providers": {
            CN1: {"tree": CN1, "excluded": True, "candidates": 0, "reasons": [
                {"group": "", "provider": None, "step": "resources", "reason":
                 "no provider of the tree (or sharing one) can give VCPU:12"},
                none(CN1), capacity(NUMA0, 4, 8, 4), capacity(NUMA1, 8, 8, 0),
                none(DISK)]},
            CN2: {"tree": CN2, "excluded": False, "candidates": 1, "reasons": []}}}
    got = client.simulate_get("/explain/allocation_candidates", query_string=query,
                              headers=ADMIN)
    assert got.json == before
    now = _now(db)
    rid = _reserve(client, {CN2: {"VCPU": 4}}, now, now + DAY)
    assert _get(client, "/explain/allocation_candidates", query) != before
    ended = client.simulate_post(f"/reservations/{rid}/end", headers=ADMIN)
    assert ended.status_code == 200, ended.text
    again = client.simulate_get("/explain/allocation_candidates", query_string=query,
                                headers=ADMIN)
    assert again.text == got.text


def _window(start, end) -> str:
    return f"start={text(start)}&end={text(end)}".replace("+", "%2B")


def test_a_window_query_is_explained_as_the_window_route_answers_it(db, client):
    a, b = _host(client), _host(client)
    now = _now(db)
    _reserve(client, {a: {"VCPU": 6}}, now + 7 * DAY, now + 8 * DAY)
    inside = _window(now + 7 * DAY + HOUR, now + 7 * DAY + 2 * HOUR)
    before = _window(now + DAY, now + 2 * DAY)
    query = "resources=VCPU:4"
    for span, kept in ((inside, [[b]]), (before, sorted([[a], [b]]))):
        real = _get(client, "/reservations/allocation_candidates", f"{query}&{span}")
        assert sorted(_providers(real)) == kept
        told = _get(client, "/explain/allocation_candidates",
                    f"{query}&{span}&explain_provider={a}")
        assert sorted(_explained(told)) == kept
        assert told["candidates"]["count"] == len(kept)
    # Inside the window, a is out for what is reserved in it.
    told = _get(client, "/explain/allocation_candidates",
                f"{query}&{inside}&explain_provider={a}")
    assert _step(told, "reserved_ahead")["detail"] == (
        f"the most reserved at any instant from {text(now + 7 * DAY + HOUR)} to "
        f"{text(now + 7 * DAY + 2 * HOUR)}")
    assert _reasons(told, a)[-1] == (
        "reserved_ahead", f"{a}: VCPU: needs 4, free 2 of capacity 8 (used 0, "
        "reserved in the window 6)")
    # Nothing reserved in a window before it: no step, no reason.
    told = _get(client, "/explain/allocation_candidates",
                f"{query}&{before}&explain_provider={a}")
    assert _step(told, "reserved_ahead") is None
    assert told["providers"][a]["excluded"] is False


@pytest.mark.parametrize("window, code", [
    ("start={s}", "placement.query.missing_value"),
    ("end={e}", "placement.query.missing_value"),
    ("start={s}&start={s}&end={e}", "placement.query.duplicate_key"),
    ("start=tomorrow&end={e}", "placement.query.bad_value"),
    ("start={s}.5&end={e}", "placement.query.bad_value"),
    ("start={e}&end={s}", "placement.query.bad_value"),
    ("start=2001-01-01T00:00:00Z&end=2001-01-02T00:00:00Z", "placement.query.bad_value"),
])
def test_a_window_is_refused_as_the_window_route_refuses_it(db, client, window, code):
    now = _now(db)
    span = window.format(s=text(now + DAY).rstrip("Z"), e=text(now + 2 * DAY).rstrip("Z"))
    answers = []
    for path in ("/reservations/allocation_candidates", "/explain/allocation_candidates"):
        got = client.simulate_get(path, query_string=f"resources=VCPU:1&{span}",
                                  headers=ADMIN)
        assert got.status_code == 400, got.text
        answers.append((got.json["errors"][0]["code"], got.json["errors"][0]["detail"]))
    assert answers[0] == answers[1]
    assert answers[0][0] == code


def test_a_window_query_speaks_the_window_routes_version(db, client):
    """At an older microversion the header alone would refuse the 1.39
    language; the window route reads it whatever the header says."""
    a = _host(client)
    now = _now(db)
    query = f"resources=VCPU:1&root_required=!HW_CPU_X86_AVX&{_window(now + DAY, now + 2 * DAY)}"
    old = {**ADMIN, "OpenStack-API-Version": "placement 1.20"}
    real = client.simulate_get("/reservations/allocation_candidates",
                               query_string=query, headers=old)
    told = client.simulate_get("/explain/allocation_candidates", query_string=query,
                               headers=old)
    assert real.status_code == told.status_code == 200, (real.text, told.text)
    assert _explained(told.json) == _providers(real.json) == [[a]]


def _shrink(client, rp, vcpu):
    got = client.simulate_get(f"/resource_providers/{rp}", headers=ADMIN)
    got = client.simulate_put(f"/resource_providers/{rp}/inventories/VCPU", headers=ADMIN,
                              json={"resource_provider_generation": got.json["generation"],
                                    "total": vcpu})
    assert got.status_code == 200, got.text


def test_a_named_providers_short_reservations_are_listed(db, client):
    a, b = _host(client), _host(client)
    now = _now(db)
    first = _reserve(client, {a: {"VCPU": 6}}, now + DAY, now + 3 * DAY)
    second = _reserve(client, {a: {"VCPU": 2}, b: {"VCPU": 2}},
                      now + 2 * DAY, now + 4 * DAY)
    ended = _reserve(client, {a: {"VCPU": 2}}, now, now + HOUR)
    query = f"resources=VCPU:1&explain_provider={a}&explain_provider={b}"
    told = _get(client, "/explain/allocation_candidates", query)
    # All is well: no list at all, as before reservations were counted.
    assert all("short" not in report for report in told["providers"].values())
    assert client.simulate_post(f"/reservations/{ended}/end",
                                headers=ADMIN).status_code == 200
    # 8 -> 5: from day 2 both lack room on a (6 + 2 held, 5 there); the
    # first lacks 1 from its own start already.
    _shrink(client, a, 5)
    told = _get(client, "/explain/allocation_candidates", query)
    assert told["providers"][a]["short"] == [
        {"reservation": first, "resource_class": "VCPU", "start": text(now + DAY),
         "missing": 1},
        {"reservation": second, "resource_class": "VCPU", "start": text(now + 2 * DAY),
         "missing": 3}]
    assert "short" not in told["providers"][b]
    # The reservations say the same of themselves.
    for rid, report in zip((first, second), told["providers"][a]["short"]):
        short = _get(client, f"/reservations/{rid}", "")["short"]
        assert short[0]["start"] == report["start"]
        assert short[0]["resource_provider"] == a
    # Its reasons for being out of the answer are the usual ones.
    assert told["providers"][a]["excluded"] is True


def _flavor(rid, vcpu=2, memory=1024) -> str:
    from placement_lite.ledger import marker
    return f"resources=VCPU:{vcpu},MEMORY_MB:{memory},{marker.class_name(rid)}:1"


def test_a_request_naming_a_marker_is_explained_as_the_route_answers_it(db, client):
    a, b = _host(client, VCPU=8, MEMORY_MB=8192), _host(client, VCPU=8, MEMORY_MB=8192)
    now = _now(db)
    rid = _reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now, now + DAY)
    real = _get(client, "/allocation_candidates", _flavor(rid))
    told = _get(client, "/explain/allocation_candidates",
                f"{_flavor(rid)}&explain_provider={a}&explain_provider={b}")
    assert told["candidates"]["count"] == len(real["allocation_requests"]) == 1
    assert told["candidates"]["first"] == real["allocation_requests"]
    first = told["search"][0]
    assert first["step"] == "reservation"
    assert first["detail"].startswith(f"reservation {rid} is active until ")
    assert (first["trees_before"], first["trees_after"]) == (2, 1)
    draws = _step(told, "draws", None)
    assert (draws["providers_before"], draws["providers_after"]) == (1, 1)
    assert told["search"][-1]["step"] == "limit"
    assert told["providers"][a]["excluded"] is False
    assert _reasons(told, b) == [(
        "reservation", f"not in the tree of any of reservation {rid}'s providers: "
        f"a request naming {_flavor(rid).rsplit(',', 1)[1][:-2]} is searched there alone")]
    # More than it has left: the reservation's step keeps a out, and says
    # what the reservation has left there.
    told = _get(client, "/explain/allocation_candidates",
                f"{_flavor(rid, vcpu=6)}&explain_provider={a}")
    assert told["candidates"]["count"] == 0
    assert _get(client, "/allocation_candidates", _flavor(rid, vcpu=6))[
        "allocation_requests"] == []
    assert _reasons(told, a)[-1] == (
        "reserved_ahead", f"{a}: VCPU: needs 6, reservation {rid} has 4 of it left "
        "here (capacity 8, used 0)")


def test_a_marker_of_a_reservation_not_active_explains_no_candidates(db, client):
    a = _host(client, VCPU=8, MEMORY_MB=8192)
    now = _now(db)
    rid = _reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now + DAY, now + 2 * DAY)
    told = _get(client, "/explain/allocation_candidates",
                f"{_flavor(rid)}&explain_provider={a}")
    assert _get(client, "/allocation_candidates", _flavor(rid))["allocation_requests"] == []
    assert told["candidates"]["count"] == 0
    state = (f"reservation {rid} is pending: it starts at {text(now + DAY)}")
    assert told["search"][0]["detail"].startswith(state)
    assert told["search"][0]["trees_after"] == 0
    [(step, reason)] = _reasons(told, a)
    assert step == "reservation" and reason.startswith(state)


def test_a_marker_request_the_route_refuses_explain_refuses_alike(db, client):
    a = _host(client, VCPU=8, MEMORY_MB=8192)
    now = _now(db)
    one = _reserve(client, {a: {"VCPU": 2}}, now, now + DAY)
    two = _reserve(client, {a: {"VCPU": 2}}, now, now + DAY)
    both = _flavor(one) + "," + _flavor(two).rsplit(",", 1)[1]
    for path in ("/allocation_candidates", "/explain/allocation_candidates"):
        got = client.simulate_get(path, query_string=both, headers=ADMIN)
        assert got.status_code == 400, got.text
        assert "names 2 reservations' marker classes" in got.json["errors"][0]["detail"]


def test_candidates_a_claim_would_not_draw_as_asked_are_told(db, client):
    a = _host(client, VCPU=8, MEMORY_MB=8192)
    now = _now(db)
    # It holds no memory: a claim putting memory beside the marker on a
    # would be refused (not_held), so the route offers nothing.
    rid = _reserve(client, {a: {"VCPU": 4}}, now, now + DAY)
    assert _get(client, "/allocation_candidates", _flavor(rid))["allocation_requests"] == []
    told = _get(client, "/explain/allocation_candidates",
                f"{_flavor(rid)}&explain_provider={a}")
    assert told["candidates"]["count"] == 0
    draws = _step(told, "draws", None)
    assert (draws["providers_before"], draws["providers_after"]) == (1, 0)
    assert told["search"][-1]["providers_before"] == 0
    assert _reasons(told, a) == [(
        "draws", f"no candidate of its tree draws from reservation {rid} as asked: the "
        "classes it holds must all come from one of its providers, with nothing else "
        "on that provider")]


def test_the_console_and_the_terminal_show_the_step_the_reasons_and_the_short(db):
    """The console's world with its reservations (tests/test_ui.py): on
    cn2, R1 and R2 hold 14 VCPU together in 2100, beside 12 allocated of
    24, and lack 2 each there."""
    from urllib.parse import urlencode
    from placement_lite import explain_text
    from tests.test_ui import (
        CN2, R1, R2, _caller, _client, build_world, page, reserve_world)
    from tests.test_ui import text as seen_text
    client = _client(db, ui=True)
    build_world(_caller(client))
    reserve_world(db)
    query = "resources=VCPU:4"
    shown = page(client, "/ui/explain?" + urlencode({"q": query, "providers": CN2}))
    assert shown.status_code == 200
    seen = seen_text(shown)
    assert "reserved_ahead the most reserved at any instant from now on" in seen
    assert (f"reserved_ahead (group unnumbered): {CN2}: VCPU: needs 4, free -2 of "
            "capacity 24 (used 12, reserved ahead 14)") in seen
    assert "Reservations short of room on it from now on:" in seen
    assert (f"reservation {R1}: VCPU lacks 2 from 2100-01-01T12:00:00Z "
            f"reservation {R2}: VCPU lacks 2 from 2100-01-01T12:00:00Z") in seen
    # The route's answer and explain's agree: cn2 is not offered.
    real = _get(client, "/allocation_candidates", query)
    assert all(CN2 not in r["allocations"] for r in real["allocation_requests"])
    # The terminal's rendering of the same answer.
    told = _get(client, "/explain/allocation_candidates",
                f"{query}&explain_provider={CN2}")
    out = explain_text.render(told)
    assert "reserved_ahead" in out
    assert (f"  - [group (unnumbered), reserved_ahead] {CN2}: VCPU: needs 4, free -2 "
            "of capacity 24 (used 12, reserved ahead 14)\n") in out
    assert (f"  ! reservation {R1}: VCPU lacks 2 from 2100-01-01T12:00:00Z\n"
            f"  ! reservation {R2}: VCPU lacks 2 from 2100-01-01T12:00:00Z\n") in out


def test_the_console_explains_a_marker_request_and_counts_its_draws_in_candidates(db):
    from urllib.parse import urlencode
    from tests.test_ui import _client, page
    from tests.test_ui import text as seen_text
    client = _client(db, ui=True)
    a = _host(client, VCPU=8, MEMORY_MB=8192)
    now = _now(db)
    rid = _reserve(client, {a: {"VCPU": 4, "MEMORY_MB": 4096}}, now, now + DAY)
    shown = page(client, "/ui/explain?" + urlencode({"q": _flavor(rid)}))
    seen = seen_text(shown)
    assert "1 candidate " in seen
    assert f"reservation reservation {rid} is active until" in seen
    assert "draws candidates a claim drawing from reservation" in seen
    # The draws step counts candidates, as the limit step does.
    import re
    row = re.search(r"<tr><td>draws</td>.*?</tr>", shown.text).group(0)
    assert re.findall(r'<td class="n">([^<]*)</td>', row) == ["1 candidate", "1 candidate"]


@pytest.mark.parametrize("seed,sharing", [(4201, True), (4202, False)])
def test_explains_candidates_are_the_routes_on_random_worlds(db, seed, sharing):
    """Random worlds (nested trees, sharing providers) and reservations
    (ended, active, pending), random queries, plain and over random
    windows: explain's count and first candidates are the route's, over
    the copy of the facts and over SQL; a provider in the route's answer
    is never reported out of it, one out of it always has a reason."""
    import random
    from urllib.parse import urlencode
    from tests.random_world import Builder, candidate_query
    from tests.test_plain_candidates_ahead import SIMPLE, _write_rows
    apps = [falcon.testing.TestClient(create_app(
        Settings(db=db.url, facts_in_memory=memory), db)) for memory in (True, False)]
    rng = random.Random(seed)
    world = Builder(apps[0].app, rng)
    world.build(sharing)
    uuids = sorted(world.providers)
    bitten = 0
    for _round in range(3):
        _write_rows(db, rng, rng.randint(2, 8))
        now = _now(db)
        for _ in range(6):
            params = (list(rng.choice(SIMPLE)) if rng.random() < 0.4
                      else candidate_query(rng, world))
            query = urlencode(params)
            path = "/allocation_candidates"
            if rng.random() < 0.4:
                start = now + rng.randint(-2, 30) * HOUR
                query += "&" + _window(start, max(start, now) + rng.randint(1, 12) * HOUR)
                path = "/reservations/allocation_candidates"
            named = rng.sample(uuids, 3)
            asked = query + "".join(f"&explain_provider={u}" for u in named)
            for client in apps:
                real = _get(client, path, query)["allocation_requests"]
                told = _get(client, "/explain/allocation_candidates", asked)
                assert told["candidates"]["count"] == len(real), (path, query)
                assert told["candidates"]["first"] == real[:5], (path, query)
                offered = {rp for r in real for rp in r["allocations"]}
                for uuid, report in told["providers"].items():
                    if uuid in offered:
                        assert not report["excluded"], (uuid, report)
                    assert bool(report["reasons"]) == report["excluded"], (uuid, report)
                bitten += any(s["step"] == "reserved_ahead"
                              for g in told["groups"] for s in g["steps"])
    assert bitten, "no query met a reservation"
