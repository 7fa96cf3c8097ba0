"""bench/reservation_world.py: the reservations benchmark's loader and
its checks from the rows, at a tiny size on SQLite, so neither can rot
between the benchmark's runs; and the checks of candidates answers
against them: a window's (bench/reservations.py), one naming a
reservation's marker (bench/reservation_draws.py), a plain one after a
reservation write (bench/reservation_refresh.py)."""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

import falcon.testing
import pytest
from sqlalchemy import create_engine, insert, select, update

from bench import complete, reservations, serving, worlds
from bench import reservation_draws as draws
from bench import reservation_refresh as refresh
from bench import reservation_world as world
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import tables as t
from placement_lite.ledger import windows

NODES = 40


def test_a_peak_counts_windows_as_half_open_and_within_the_period():
    assert world.peak([(0, 10, 2), (10, 20, 3)], 0, 100) == 3
    assert world.peak([(0, 10, 2), (5, 15, 3)], 0, 100) == 5
    assert world.peak([(0, 10, 2), (5, 15, 3)], 10, 100) == 3
    assert world.peak([(0, 10, 2), (5, 15, 3)], 0, 5) == 2
    assert world.peak([], 0, 100) == 0


def _overbook(conn, node: str, start: int, end: int) -> None:
    """A reservation of the node's whole VCPU capacity, straight into the
    rows: what the ledger would never admit beside its allocations."""
    rp = conn.scalar(select(t.resource_providers.c.id)
                     .where(t.resource_providers.c.uuid == node))
    vcpu = conn.scalar(select(t.resource_classes.c.id)
                       .where(t.resource_classes.c.name == "VCPU"))
    total = conn.scalar(select(t.inventories.c.total).where(
        t.inventories.c.resource_provider_id == rp,
        t.inventories.c.resource_class_id == vcpu))
    windows.widen(conn, start, end)
    rid = conn.execute(insert(t.reservations).values(
        uuid=world.uid("overbooked"), project_id=1, user_id=1, start_at=start,
        end_at=end, generation=1)).inserted_primary_key[0]
    conn.execute(insert(t.reservation_amounts).values(
        reservation_id=rid, resource_provider_id=rp, resource_class_id=vcpu,
        amount=total, start_at=start, end_at=end))


def test_the_loaded_reservations_fit_and_the_check_sees_one_that_does_not(tmp_path):
    url = f"sqlite:///{tmp_path / 'world.sqlite'}"
    worlds.load(url, worlds.cloud_shape("full"), NODES)
    loaded = world.main(url, 25 * NODES)
    assert loaded["reservations"] == 25 * NODES
    engine = create_engine(url)
    with engine.connect() as conn:
        now = world.db_now(conn)
        ra = t.reservation_amounts
        rows = conn.execute(select(ra.c.resource_provider_id, ra.c.start_at,
                                   ra.c.end_at)).all()
        assert world.violations(conn) == []
        first = world.uid("node-0")
        start, end = now + world.DAY, now + 2 * world.DAY
        assert first in world.fitting(conn, start, end, {"VCPU": 1})
        refused = world.refusals(conn, 3, NODES)
    # Every node holds reservations (two classes each), within the year
    # ahead, each window an hour to three weeks long.
    assert len(rows) == 2 * 25 * NODES
    assert len({rp for rp, _s, _e in rows}) == NODES
    assert all(now <= s < e <= now + world.YEAR for _rp, s, e in rows)
    assert all(world.HOUR <= e - s <= world.LONGEST for _rp, s, e in rows)
    # What the refused workload asks for passes what its window leaves.
    assert len(refused) == 3 and all(n >= 1 for _u, _s, _e, n in refused)
    with engine.begin() as conn:
        _overbook(conn, first, start, end)
    with engine.connect() as conn:
        bad = world.violations(conn)
        assert [b["provider_id"] for b in bad] == [conn.scalar(
            select(t.resource_providers.c.id)
            .where(t.resource_providers.c.uuid == first))]
        assert first not in world.fitting(conn, start, end, {"VCPU": 1})
        assert first in world.fitting(conn, start, end, {"VCPU": 1}, reservations=False)
        assert world.uid("node-1") in world.fitting(conn, start, end, {"VCPU": 1})
        allocated, reserved, capacity = world.held_on(conn, first)
        assert reserved >= capacity and allocated > 0
    engine.dispose()


class _BruteForce:
    """Stands in for bench/reservations.py's BruteForce: the providers
    with room, and their count up to the limit."""
    source = "the rows"

    def __init__(self, fits, limit):
        self.fits, self.limit = set(fits), limit

    def count(self, path):
        return min(len(self.fits), self.limit)


def _answer(*rps: str) -> bytes:
    return json.dumps({"allocation_requests": [
        {"allocations": {rp: {"resources": {"VCPU": 12}}}} for rp in rps],
        "provider_summaries": {}}).encode()


def test_a_window_answer_must_name_only_providers_with_room():
    expect = reservations.Fits("w", _BruteForce({"a", "b", "c"}, 2), "/q")
    expect.check(_answer("a", "c"))
    with pytest.raises(complete.Incomplete, match="expected 2.*got 1"):
        expect.check(_answer("a"))
    with pytest.raises(complete.Incomplete, match="1 candidates have no room.*'x'"):
        expect.check(_answer("a", "x"))


# ---------------------------------------------------- drawing (bench/reservation_draws.py)
ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"}


def _post(client, owner, start, end, amounts) -> str:
    got = client.simulate_post("/reservations", headers=ADMIN, json={
        **owner, "start": world.iso(start), "end": world.iso(end),
        "allocations": {rp: {"resources": held} for rp, held in amounts.items()}})
    assert got.status_code == 201 and got.json["status"] == "active", got.text
    return got.json["id"]


def _put(client, node, r_uuid, resources):
    """A claim drawing from the reservation, as the benchmark makes it."""
    _method, path, body = draws._claim(node, r_uuid, resources)
    got = client.simulate_put(path, headers=ADMIN, json=body)
    assert got.status_code == 204, got.text


@pytest.fixture
def drawn_world(tmp_path):
    """A tiny world with reservations, then, through the API in process:
    reservation R1 of all the VCPU a node has free for a day, drawn dry;
    the probe P on three nodes, drawn dry on the first and half on the
    second, as bench/reservation_draws.py's setup leaves it; and one of
    HOLD on a fifth node, with one claim drawn from it, as the timed
    claims draw."""
    url = f"sqlite:///{tmp_path / 'world.sqlite'}"
    worlds.load(url, worlds.cloud_shape("full"), NODES)
    world.main(url, 5 * NODES)
    db = worlds.open_db(url)
    client = falcon.testing.TestClient(create_app(Settings(db=url), db))
    engine = create_engine(url)
    with engine.connect() as conn:
        now = world.db_now(conn)
        walk = iter(world.uid(f"node-{i}") for i in range(NODES))
        side = SimpleNamespace(nodes=NODES, rows=SimpleNamespace(engine=engine))
        nodes = draws._nodes(side, 5, now, now + world.DAY, lambda: next(walk))
        vcpu = int(draws.room(conn, nodes[:1], now, now + world.DAY)[nodes[0]]["VCPU"])
    r1 = _post(client, draws.OWNER, now, now + world.DAY, {nodes[0]: {"VCPU": vcpu}})
    _put(client, nodes[0], r1, {"VCPU": vcpu})
    probe = _post(client, draws.OWNER, now, now + world.DAY,
                  {node: draws.PROBE for node in nodes[1:4]})
    _put(client, nodes[1], probe, draws.PROBE)
    _put(client, nodes[2], probe, draws.SMALL)
    held = _post(client, draws.OWNER, now, now + world.DAY, {nodes[4]: draws.HOLD})
    _put(client, nodes[4], held, draws.SMALL)
    yield SimpleNamespace(client=client, engine=engine, nodes=nodes, r1=r1, vcpu=vcpu,
                          probe=probe, held=held, side=side)
    engine.dispose()
    db.dispose()


def test_a_drawn_allocation_counts_once_in_the_invariant(drawn_world):
    """R1 holds all the node's free VCPU and has given it all out: the
    drawn rows live inside R1's amount (and its marker's row takes no
    room), so the node is full, not over."""
    w = drawn_world
    with w.engine.connect() as conn:
        assert world.violations(conn) == []
        rp = conn.scalar(select(t.resource_providers.c.id)
                         .where(t.resource_providers.c.uuid == w.nodes[0]))
        vcpu = conn.scalar(select(t.resource_classes.c.id)
                           .where(t.resource_classes.c.name == "VCPU"))
        open_, every = world.allocated(conn, {rp}), world.allocated(conn, {rp}, drawn=True)
        assert every[(rp, vcpu)] - open_[(rp, vcpu)] == w.vcpu
        assert draws.given(conn, w.r1) == {(w.nodes[0], "VCPU"): w.vcpu,
                                           (w.nodes[0], draws.marker_name(w.r1)): 1}
        free = draws.room(conn, w.nodes[:1], world.db_now(conn),
                          world.db_now(conn) + world.DAY)
        assert free[w.nodes[0]]["VCPU"] == 0


def test_the_rows_of_draws_agree_and_the_check_sees_where_they_do_not(drawn_world):
    w = drawn_world
    with w.engine.connect() as conn:
        assert draws.draws_disagree(conn) == []
        rp = conn.scalar(select(t.resource_providers.c.id)
                         .where(t.resource_providers.c.uuid == w.nodes[0]))
    inv, ra = t.inventories, t.reservation_amounts
    with w.engine.begin() as conn:
        conn.execute(update(inv).where(inv.c.resource_provider_id == rp)
                     .values(drawn=inv.c.drawn + 1))
        conn.execute(update(ra).where(ra.c.resource_provider_id == rp)
                     .values(amount=ra.c.amount - 1))
    with w.engine.connect() as conn:
        wrong = draws.draws_disagree(conn)
    assert any("(used, drawn) kept" in line and "VCPU" in line for line in wrong), wrong
    assert any(f"reservation {w.r1} gave out {w.vcpu} of VCPU" in line
               for line in wrong), wrong


def test_a_marker_answer_must_offer_exactly_the_providers_with_room_left(drawn_world):
    """The server's answer for the probe passes the check; the brute force
    leaves out the provider drawn dry, and an answer that offers it, or
    leaves one out, or misstates the room, is wrong."""
    w = drawn_world
    path = "/allocation_candidates?resources=VCPU:1,MEMORY_MB:256," + \
        f"{draws.marker_name(w.probe)}:1"
    ref = draws.Drawable(SimpleNamespace(engine=w.engine), w.probe)
    expect = draws.Offered("marker", ref, path)
    assert set(ref.room) == set(w.nodes[2:4])
    assert ref.room[w.nodes[2]] == {"room": {"VCPU": 1, "MEMORY_MB": 256}, "marker": 1}
    assert ref.room[w.nodes[3]] == {"room": draws.PROBE, "marker": 0}
    got = w.client.simulate_get(path, headers=ADMIN)
    assert got.status_code == 200, got.text
    expect.check(got.content)
    answer = got.json
    fewer = dict(answer, allocation_requests=answer["allocation_requests"][:1])
    with pytest.raises(complete.Incomplete, match="expected 2.*got 1"):
        expect.check(json.dumps(fewer).encode())
    other = json.loads(got.content)
    other["allocation_requests"][0]["allocations"] = {
        w.nodes[1]: other["allocation_requests"][0]["allocations"].popitem()[1]}
    with pytest.raises(complete.Incomplete, match="WRONG ANSWER.*name"):
        expect.check(json.dumps(other).encode())
    shown = json.loads(got.content)
    shown["provider_summaries"][w.nodes[2]]["resources"]["VCPU"]["used"] -= 1
    with pytest.raises(complete.Incomplete, match=f"WRONG ANSWER.*{w.nodes[2]} shows"):
        expect.check(json.dumps(shown).encode())


def test_after_the_drawing_claims_the_rows_must_hold_what_they_drew(drawn_world):
    """One claim drew from the fifth node's reservation: the check agrees
    with one, not with two (a claim the rows do not show), and not with
    R1's, which gave out more than a small claim."""
    w = drawn_world
    draws.check(w.side, draws.Draws(held=[(w.held, w.nodes[4])], made=1))
    with pytest.raises(RuntimeError, match=f"reservation {w.held} gave out"):
        draws.check(w.side, draws.Draws(held=[(w.held, w.nodes[4])], made=2))
    with pytest.raises(RuntimeError, match=f"reservation {w.r1} gave out"):
        draws.check(w.side, draws.Draws(held=[(w.r1, w.nodes[0])], made=1))
    # The node shrunk under what is held there (Placement lets an
    # inventory shrink below it): over capacity.
    inv = t.inventories
    with w.engine.begin() as conn:
        rp = conn.scalar(select(t.resource_providers.c.id)
                         .where(t.resource_providers.c.uuid == w.nodes[4]))
        conn.execute(update(inv).where(inv.c.resource_provider_id == rp)
                     .values(total=inv.c.reserved + 1, allocation_ratio=1.0))
    with pytest.raises(RuntimeError, match="over capacity"):
        draws.check(w.side, draws.Draws(held=[(w.held, w.nodes[4])], made=1))


# ------------------------------- plain candidates after a write (bench/reservation_refresh.py)
@pytest.fixture
def refresh_world(drawn_world):
    """drawn_world (its first node full for a day, drawn dry), and on its
    last node a reservation from now for a day of all the VCPU free there
    but one, drawn whole: open usage (used - drawn) + the peak reserved
    leaves that one, which counting the drawn rows twice would not."""
    w = drawn_world
    last = world.uid(f"node-{NODES - 1}")
    assert last not in w.nodes
    with w.engine.connect() as conn:
        now = world.db_now(conn)
        free = int(draws.room(conn, [last], now, now + world.DAY)[last]["VCPU"])
    assert free >= 2
    held = _post(w.client, draws.OWNER, now, now + world.DAY, {last: {"VCPU": free - 1}})
    _put(w.client, last, held, {"VCPU": free - 1})
    w.last, w.last_drawn = last, free - 1
    return w


def _plain(w, node: str) -> tuple[bytes, int]:
    """A reservation written as the benchmark writes one, on `node`, then
    the plain request: (its answer, the database's now read before it)."""
    with w.engine.connect() as conn:
        now = world.db_now(conn)
    body = refresh._write(random.Random(0), lambda: node, now)
    got = w.client.simulate_post("/reservations", headers=ADMIN, json=body)
    assert got.status_code == 201, got.text
    with w.engine.connect() as conn:
        before = world.db_now(conn)
    got = w.client.simulate_get(refresh.PATH, headers=ADMIN)
    assert got.status_code == 200, got.text
    return got.content, before


def _judged(w, answer, before, limit=refresh.LIMIT) -> list[tuple[str, str]]:
    raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
    with w.engine.connect() as conn:
        return refresh.judge(conn, raw, before, limit)


def test_a_plain_answer_after_a_write_holds_every_provider_with_room(refresh_world):
    """The server's answer passes: every provider with room (fewer than
    the limit in this world), the node full for a day left out, the one
    whose reservation is drawn whole offered with its last VCPU."""
    w = refresh_world
    raw, before = _plain(w, world.uid("node-7"))
    assert _judged(w, raw, before) == []
    named = {rp for req in json.loads(raw)["allocation_requests"] for rp in req["allocations"]}
    assert w.last in named and w.nodes[0] not in named
    with w.engine.connect() as conn:
        assert named == world.fitting(conn, before, refresh.FOREVER, refresh.WANTED)
        assert len(named) < refresh.LIMIT
    side = SimpleNamespace(rows=SimpleNamespace(engine=w.engine))
    refresh.check(side, raw, before, "after a write")


def test_the_check_counts_a_drawn_allocation_once(refresh_world):
    """The room left on the last node is one VCPU beside the open usage;
    with the drawn rows counted as well it would be none."""
    w = refresh_world
    with w.engine.connect() as conn:
        now = world.db_now(conn)
        assert world.fitting(conn, now, refresh.FOREVER, refresh.WANTED,
                             among=[w.last]) == {w.last}
        rp = conn.scalar(select(t.resource_providers.c.id)
                         .where(t.resource_providers.c.uuid == w.last))
        vcpu = conn.scalar(select(t.resource_classes.c.id)
                           .where(t.resource_classes.c.name == "VCPU"))
        open_ = world.free_over(conn, now, refresh.FOREVER, {rp})[(rp, vcpu)]
        every = world.allocated(conn, {rp}, drawn=True)[(rp, vcpu)]
        assert open_ == 1
        assert open_ - (every - world.allocated(conn, {rp})[(rp, vcpu)]) < 1


def test_a_tampered_plain_answer_is_rejected(refresh_world):
    w = refresh_world
    raw, before = _plain(w, world.uid("node-9"))
    answer = json.loads(raw)
    reqs = answer["allocation_requests"]

    def tampered(new_reqs):
        return dict(answer, allocation_requests=new_reqs)

    # One provider with room left out of an answer under the limit.
    (kind, detail), = _judged(w, tampered(reqs[1:]), before)
    assert kind == refresh.INCOMPLETE
    assert f"expected {len(reqs)} candidates" in detail and f"got {len(reqs) - 1}" in detail
    # The node full for a day offered in one's place: no room, and one left out.
    full_node = {"allocations": {w.nodes[0]: {"resources": dict(refresh.WANTED)}}}
    wrong = _judged(w, tampered(reqs[1:] + [full_node]), before)
    assert [k for k, _d in wrong] == [refresh.WRONG, refresh.INCOMPLETE]
    assert "1 candidates have no room" in wrong[0][1] and w.nodes[0] in wrong[0][1]
    # A provider the database does not hold.
    ghost = {"allocations": {world.uid("ghost"): {"resources": dict(refresh.WANTED)}}}
    assert [k for k, _d in _judged(w, tampered(reqs + [ghost]), before)] == [refresh.WRONG]
    # A provider named twice, and a candidate of other amounts.
    twice = _judged(w, tampered(reqs + reqs[:1]), before)
    assert any("named twice" in d for _k, d in twice)
    other = json.loads(raw)
    first = next(iter(other["allocation_requests"][0]["allocations"].values()))
    first["resources"]["VCPU"] = 2
    assert any("allocates" in d for _k, d in _judged(w, other, before))
    # Under a limit of 2, two with room are a whole answer, three too many.
    assert _judged(w, tampered(reqs[:2]), before, limit=2) == []
    assert any("more than the limit 2" in d
               for _k, d in _judged(w, tampered(reqs[:3]), before, limit=2))
    side = SimpleNamespace(rows=SimpleNamespace(engine=w.engine))
    with pytest.raises(complete.Incomplete,
                       match=r"WRONG ANSWER: after a write: 1 candidates have no room"):
        refresh.check(side, json.dumps(tampered(reqs + [full_node])).encode(), before,
                      "after a write")


def test_each_worker_process_gets_a_client_of_its_own(tmp_path):
    """With 2 worker processes the figure's clients are held by both
    (each connection by the worker that answers on it, and by no other
    process), so a write reaches each process's copy in turn."""
    url = f"sqlite:///{tmp_path / 'served.sqlite'}"
    server = serving.ServerProcess(url, serving.free_port(), 2)
    try:
        workers = server.pids()[1:]
        assert len(workers) == 2
        served = refresh.clients(server)
        assert sorted(pid for _c, pid in served) == sorted(workers)
        for client, pid in served:
            client.exchange("GET", "/")
            assert refresh.serving_pid(server, client) == pid
            client.conn.close()
    finally:
        server.stop()
