"""Plain GET /allocation_candidates leaves room for what is reserved from
now on (candidates/ahead.py), as a claim does; against a brute force.

- Random worlds (nested trees, sharing providers), random reservations
  (ended, active, pending, ending within seconds), written both straight
  into the tables (with the instants chosen) and through the API
  (create, change, cancel, end), random claims of offered candidates
  (which must all succeed) and deletions between requests. Every plain
  answer, of the app over the process's copy of the facts (its overlay
  kept between requests) and of the app asking SQL for everything, must
  be, byte for byte, the answer Placement's rule gives when each
  inventory's `used` is raised by the most reserved at any instant from
  the database's now on, that worked out by brute force from the rows.
- Time passes with the caches warm: windows end a few seconds ahead.
- With nothing reserved ahead, answers and statements are today's.
- Two server processes: a reservation written through one is left room
  for by the other's next answer.
"""
from __future__ import annotations

import os
import random
import time
from contextlib import contextmanager
from urllib.parse import urlencode

import pytest
from sqlalchemy import event, func, select

from placement_lite.api.services import Services
from placement_lite.db import clock, facts_log
from placement_lite.db import tables as t
from tests.backends import backend_id, backend_urls, fresh_url
from tests.peaks_oracle import both_apps, inventory_rows, peaks_allocated, raw
from tests.random_world import Builder, candidate_query, wsgi
from tests.reservation_rows import reservation
from tests.servers import serve

SEED = int(os.environ.get("PLACEMENT_LITE_AHEAD_SEED", "3107"))
PLAIN = "/allocation_candidates?"
HOUR = 3600
SIMPLE = [[("resources", "VCPU:1")], [("resources", "VCPU:2,MEMORY_MB:1024")],
          [("resources", "MEMORY_MB:2048")], [("resources", "DISK_GB:100")],
          [("resources", "VCPU:1,DISK_GB:50,IPV4_ADDRESS:1")],
          [("resources", "MEMORY_MB:512"), ("resources1", "VCPU:2"),
           ("resources2", "SRIOV_NET_VF:2"), ("group_policy", "none")],
          [("resources1", "VCPU:2"), ("resources2", "VCPU:1"), ("group_policy", "none")],
          [("resources", "CUSTOM_GPU:1,VCPU:1")]]


@pytest.fixture
def apps(db):
    return both_apps(db)


@contextmanager
def _allocations_alone():
    """Plain candidates as Placement answers them: from allocations alone."""
    kept = Services.reserved_ahead
    Services.reserved_ahead = lambda self, conn, snapshot: None
    try:
        yield
    finally:
        Services.reserved_ahead = kept


def _brute_peaks(db) -> tuple[int, dict]:
    """(the database's now, (provider, class) -> the most reserved at any
    instant from now on): at each instant where something may rise (now,
    and each window's start after it), the sum of the windows holding it."""
    ra = t.reservation_amounts
    with db.read() as conn:
        now = clock.now(conn)
        rows = conn.execute(select(ra.c.resource_provider_id, ra.c.resource_class_id,
                                   ra.c.start_at, ra.c.end_at, ra.c.amount)).all()
    by_key: dict = {}
    for rp, rc, start, end, amount in rows:
        by_key.setdefault((rp, rc), []).append((start, end, amount))
    peaks = {}
    for key, windows in by_key.items():
        instants = {now} | {s for s, _e, _a in windows if s > now}
        top = max(sum(a for s, e, a in windows if s <= i < e) for i in instants)
        if top:
            peaks[key] = top
    return now, peaks


def _expected(db, oracle_app, path: str) -> tuple:
    """(peaks, the answer with `used` raised by them) at the database's now."""
    _now, peaks = _brute_peaks(db)
    with peaks_allocated(db, peaks), _allocations_alone():
        return peaks, raw(oracle_app, path)


def _compare(db, memory, sql, params: list) -> bytes:
    """Both apps' answers equal the brute force's; retried when a window
    ended between the oracle's reading and the answers (the peaks moved)."""
    path = PLAIN + urlencode(params)
    for _attempt in range(4):
        peaks, expected = _expected(db, sql, path)
        got = [raw(memory, path), raw(sql, path)]
        if _brute_peaks(db)[1] != peaks:
            continue
        assert got[0] == expected, ("copy", params, _difference(got[0], expected), peaks)
        assert got[1] == expected, ("sql", params, _difference(got[1], expected), peaks)
        return expected[1]
    raise AssertionError(f"the peaks kept moving: {params}")


def _difference(got: tuple, expected: tuple) -> dict:
    """What differs between two answers, for a failure's message."""
    import json
    if got[0] != expected[0]:
        return {"status": (got[0], expected[0])}
    a, b = json.loads(got[1]), json.loads(expected[1])
    out = {"requests": (len(a["allocation_requests"]), len(b["allocation_requests"]))}
    for rp in set(a["provider_summaries"]) | set(b["provider_summaries"]):
        x, y = a["provider_summaries"].get(rp), b["provider_summaries"].get(rp)
        if x != y:
            out[rp] = (x and x["resources"], y and y["resources"])
    return out


def _now(db) -> int:
    with db.read() as conn:
        return clock.now(conn)


def _write_rows(db, rng, count: int, soon: bool = False) -> None:
    """`count` reservations written straight into the tables, with the
    instants chosen: ended, active, pending, or (soon) ending within a few
    seconds; their providers logged as a reservation write logs them."""
    rows, now = inventory_rows(db), _now(db)
    with db.write() as conn:
        for _ in range(count):
            kind = "soon" if soon else rng.choice(["ended", "active", "pending", "pending"])
            if kind == "ended":
                start = now - rng.randint(2, 10) * HOUR
                end = now - rng.randint(0, 1) * HOUR
            elif kind == "active":
                start, end = now - rng.randint(0, 3) * HOUR, now + rng.randint(1, 9) * HOUR
            elif kind == "pending":
                start = now + rng.randint(1, 30) * HOUR + rng.randint(0, 59)
                end = start + rng.randint(1, 12) * HOUR
            else:
                start, end = now - rng.randint(0, 60), now + rng.randint(4, 8)
            amounts = {}
            for rp, rc, total, held, ratio in rng.sample(rows, rng.randint(1, 3)):
                room = max(1, int((total - held) * ratio))
                amounts[(rp, rc)] = rng.randint(1, max(1, room // 2))
            reservation(conn, start, end, amounts)
            facts_log.touch(conn, {rp for rp, _rc in amounts})


def _write_api(app, world: Builder, rng, made: list, now: int) -> None:
    """One reservation write through the API: create (often refused for
    want of room), change, cancel or end."""
    choice = rng.random()
    if made and choice < 0.45:
        rid = rng.choice(made)
        status, body = wsgi(app, "GET", f"/reservations/{rid}")
        if status != 200:
            made.remove(rid)
            return
        if body["status"] == "active" and choice < 0.2:
            wsgi(app, "POST", f"/reservations/{rid}/end")
        elif body["status"] == "pending" and choice < 0.2:
            assert wsgi(app, "DELETE", f"/reservations/{rid}")[0] == 204
            made.remove(rid)
        elif body["status"] != "ended":
            allocations = body["allocations"]
            for rp in allocations:
                for rc in allocations[rp]["resources"]:
                    allocations[rp]["resources"][rc] = rng.randint(1, 3)
            wsgi(app, "PUT", f"/reservations/{rid}", {
                "start": body["start"], "end": body["end"],
                "generation": body["generation"], "allocations": allocations})
        return
    from placement_lite.api.times import text
    start = now + rng.choice([-HOUR, 0, HOUR, 5 * HOUR])
    end = max(start, now) + rng.randint(1, 8) * HOUR
    rp = rng.choice([u for u, p in world.providers.items() if p["inventory"]])
    rc = rng.choice(sorted(world.providers[rp]["inventory"]))
    status, body = wsgi(app, "POST", "/reservations", {
        "project_id": "proj-1", "user_id": "user-1",
        "start": text(start), "end": text(end),
        "allocations": {rp: {"resources": {rc: rng.randint(1, 3)}}}})
    assert status in (201, 400, 409), (status, body)
    if status == 201:
        made.append(body["id"])


def _claim(app, world: Builder, rng, answer: bytes) -> None:
    """Claim one offered candidate: it must be granted."""
    import json
    found = json.loads(answer).get("allocation_requests") or []
    if not found:
        return
    pick = rng.choice(found)
    consumer = world.uuid()
    status, body = wsgi(app, "PUT", f"/allocations/{consumer}", {
        "allocations": pick["allocations"], "project_id": "proj-1",
        "user_id": "user-1", "consumer_generation": None,
        "consumer_type": "INSTANCE"}, "1.38")
    assert status == 204, ("an offered candidate was refused", pick, body)
    world.consumers[consumer] = {"project": "proj-1", "user": "user-1",
                                 "type": "INSTANCE", "generation": 1}


def _queries(rng, world, count: int) -> list:
    out = []
    for _ in range(count):
        params = (list(rng.choice(SIMPLE)) if rng.random() < 0.4
                  else candidate_query(rng, world))
        if rng.random() < 0.2:
            params.append(("limit", str(rng.randint(1, 4))))
        out.append(params)
    return out


@pytest.mark.parametrize("seed,sharing", [(SEED, True), (SEED + 1, False)])
def test_plain_candidates_leave_room_for_the_most_reserved_from_now_on(
        apps, seed, sharing):
    db, memory, sql = apps
    rng = random.Random(seed)
    world = Builder(memory, rng)
    world.build(sharing)
    made: list = []
    compared = bitten = 0
    for round_no in range(8):
        # Writes of every size between reads: rows with chosen instants,
        # API writes, claims of offered candidates, deletions.
        size = [1, 12, 3, 0, 25, 2, 6, 1][round_no]
        _write_rows(db, rng, size)
        for _ in range(rng.randint(0, 4)):
            _write_api(rng.choice([memory, sql]), world, rng, made, _now(db))
        for params in _queries(rng, world, 10):
            with _allocations_alone():
                plain = raw(sql, PLAIN + urlencode(params))
            answer = _compare(db, memory, sql, params)
            compared += 1
            bitten += answer != plain[1]
            if rng.random() < 0.3:
                _claim(rng.choice([memory, sql]), world, rng, answer)
        if world.consumers and rng.random() < 0.5:
            consumer = rng.choice(sorted(world.consumers))
            wsgi(memory, "DELETE", f"/allocations/{consumer}")
            del world.consumers[consumer]
    assert bitten >= 5, bitten  # reservations changed some answers
    assert compared == 80


def test_windows_ending_while_the_overlay_is_kept(apps):
    """Windows end 4-8 seconds ahead: every answer, before, across and
    after their ends, is the brute force's; once they have all ended, the
    kept overlay is one made after them. (How long the requests take
    decides which answers fall before the ends: the test asserts nothing
    of that.)"""
    db, memory, sql = apps
    rng = random.Random(SEED + 7)
    world = Builder(memory, rng)
    world.build(False)
    _write_rows(db, rng, 6)
    _write_rows(db, rng, 8, soon=True)
    ends = t.reservation_amounts.c.end_at
    with db.read() as conn:
        now = clock.now(conn)
        soon = conn.execute(select(func.min(ends), func.max(ends))
                            .where(ends > now, ends <= now + 10)).one()
    first_end, last_end = soon
    queries = _queries(rng, world, 12)
    ahead = memory_services(memory).facts.ahead
    bodies = [_compare(db, memory, sql, params) for params in queries]
    before_ends = _now(db) < first_end
    for params in queries:  # the same instant or close: mostly kept
        _compare(db, memory, sql, params)
    while _now(db) < last_end:
        time.sleep(0.5)
    later = [_compare(db, memory, sql, params) for params in queries]
    assert ahead._last.at >= last_end  # made again once they had ended
    if before_ends:
        assert later != bodies  # the room of the ended windows came back


def memory_services(app) -> Services:
    """The Services an app's resources were built with."""
    kept = []
    real = Services.reserved_ahead

    def spy(self, conn, snapshot):
        kept.append(self)
        return real(self, conn, snapshot)
    Services.reserved_ahead = spy
    try:
        raw(app, PLAIN + "resources=VCPU:1")
    finally:
        Services.reserved_ahead = real
    return kept[0]


def _selects(db):
    seen = []

    def count(conn, cursor, statement, *args):
        seen.append(statement)
    event.listen(db.engine, "before_cursor_execute", count)
    return seen, lambda: event.remove(db.engine, "before_cursor_execute", count)


def test_nothing_reserved_ahead_answers_and_costs_as_before(apps):
    """No reservation, then only ended ones: the same bytes and, over the
    copy, the same statements as from allocations alone (none more)."""
    db, memory, sql = apps
    rng = random.Random(SEED + 9)
    world = Builder(memory, rng)
    world.build()
    queries = _queries(rng, world, 25)

    def same(count_extra: int) -> None:
        for params in queries:
            path = PLAIN + urlencode(params)
            # The copies current (after a write, each reads what the log
            # names once), and the overlays made.
            raw(memory, path)
            raw(sql, path)
            with _allocations_alone():
                seen, stop = _selects(db)
                try:
                    expected = [raw(memory, path), raw(sql, path)]
                finally:
                    stop()
                before = len(seen)
            seen, stop = _selects(db)
            try:
                got = [raw(memory, path), raw(sql, path)]
            finally:
                stop()
            assert got == expected, params
            # The copy: nothing more. SQL alone: the facts log's heads.
            assert len(seen) == before + count_extra, (params, seen)
    same(1)
    rows, now = inventory_rows(db), _now(db)
    with db.write() as conn:
        for rp, rc, *_rest in rows[:5]:
            reservation(conn, now - 5 * HOUR, now - HOUR, {(rp, rc): 1})
            facts_log.touch(conn, {rp})
    same(1)


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_a_reservation_through_one_process_is_left_room_by_another(backend):
    from placement_lite.api.times import text
    with fresh_url(backend) as url, serve(url) as one, serve(url) as other:
        status, _h, _b = one.request("POST", "/resource_providers", {
            "name": "cn1", "uuid": "7b7ad3a4-0000-4000-8000-000000000001"}, version="1.39")
        assert status == 200
        rp = "7b7ad3a4-0000-4000-8000-000000000001"
        status, _h, _b = one.request("PUT", f"/resource_providers/{rp}/inventories", {
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 8}}}, version="1.39")
        assert status == 200

        def offered(server, n: int) -> bool:
            status, _h, body = server.request(
                "GET", f"/allocation_candidates?resources=VCPU:{n}", version="1.39")
            assert status == 200, body
            return bool(body["allocation_requests"])
        # Both processes have read their copies, with nothing reserved.
        assert offered(one, 6) and offered(other, 6)
        now = int(time.time())
        status, _h, made = one.request("POST", "/reservations", {
            "project_id": "p1", "user_id": "u1", "start": text(now + 2 * HOUR),
            "end": text(now + 3 * HOUR),
            "allocations": {rp: {"resources": {"VCPU": 4}}}})
        assert status == 201, made
        # The other's very next answer leaves room for it; a claim agrees.
        assert not offered(other, 5) and offered(other, 4)
        status, _h, body = other.request("PUT", "/allocations/" + "7b7ad3a4-0000-4000-8000-0000000000c1", {
            "allocations": {rp: {"resources": {"VCPU": 5}}}, "project_id": "p1",
            "user_id": "u1", "consumer_generation": None,
            "consumer_type": "INSTANCE"}, version="1.38")
        assert status == 409, body
        # Changed, then cancelled through the other: the first follows.
        status, _h, body = other.request("PUT", f"/reservations/{made['id']}", {
            "start": made["start"], "end": made["end"], "generation": made["generation"],
            "allocations": {rp: {"resources": {"VCPU": 2}}}})
        assert status == 200, body
        assert offered(one, 6) and not offered(one, 7)
        assert other.request("DELETE", f"/reservations/{made['id']}")[0] == 204
        assert offered(one, 8) and offered(other, 8)
        # An active one, ended through the first.
        status, _h, made = one.request("POST", "/reservations", {
            "project_id": "p1", "user_id": "u1", "start": text(now - HOUR),
            "end": text(now + HOUR),
            "allocations": {rp: {"resources": {"VCPU": 3}}}})
        assert status == 201, made
        assert not offered(other, 6) and offered(other, 5)
        status, _h, body = one.request("POST", f"/reservations/{made['id']}/end")
        assert status == 200, body
        assert offered(other, 8)


def _extra(made) -> dict:
    return made.overlay.extra if made.overlay is not None else {}


def test_the_overlay_worked_out_again_where_windows_ended_is_the_whole_one():
    """Ahead.at from the last overlay (only keys whose windows ended since,
    or whose provider's windows were read again, worked out again) against
    Ahead.at from nothing, and both against a brute force, at increasing
    instants through many window ends and reservation writes: several
    writes between two overlays (past the lineage remembered, too), and
    enough of them that the index's layers merge many times. Some keys
    have allocations drawn from reservations (in `used` already), with or
    without windows left: their extra is the peak less that, below 0
    where the drawn rows outlive the windows."""
    from placement_lite.candidates import ahead as ahead_mod
    from placement_lite.candidates.ahead import Ahead
    rng = random.Random(SEED + 11)

    def add(windows, count, lo):
        for _ in range(count):
            key = (rng.randint(1, 6), rng.randint(0, 2))
            start = rng.randint(lo, lo + 200)
            windows.setdefault(key, []).append(
                (start, start + rng.randint(1, 80), rng.randint(1, 5)))
    def draw(drawn, rps):
        for rp in rps:
            for rc in range(3):
                drawn.pop((rp, rc), None)
                if rng.random() < 0.25:
                    drawn[(rp, rc)] = rng.randint(1, 6)
    merges = 0
    for _world in range(60):
        windows: dict = {}
        drawn: dict = {}
        add(windows, rng.randint(1, 60), 0)
        draw(drawn, range(1, 7))
        ahead = Ahead({k: tuple(sorted(ws)) for k, ws in windows.items()}, drawn=drawn)
        last, now = None, rng.randint(-10, 40)
        while now < 320:
            for _write in range(rng.choice((0, 0, 1, 1, 2, 3, ahead_mod.LINEAGE + 1))):
                # A write: some providers' windows read again (some gone,
                # some new), the rest as they were.
                changed = set(rng.sample(range(1, 7), rng.randint(1, 3)))
                windows = {k: ws for k, ws in windows.items()
                           if k[0] not in changed or rng.random() < 0.5}
                fresh: dict = {}
                add(fresh, rng.randint(0, 8), now - 20)
                for key, ws in fresh.items():
                    if key[0] in changed:
                        windows.setdefault(key, []).extend(ws)
                # Those read again hold only windows not ended; the
                # others are carried over as they were.
                windows = {k: ws for k, ws in windows.items() if k[0] not in changed
                           or any(e > now for _s, e, _a in ws)}
                draw(drawn, changed)
                layers = len(ahead.layers)
                # As read_again makes it from the rows it read.
                read = {k: tuple(sorted(ws)) for k, ws in windows.items()
                        if k[0] in changed}
                ahead = ahead_mod.again(ahead, read, {
                    k: n for k, n in drawn.items() if k[0] in changed}, changed)
                merges += len(ahead.layers) <= layers
            made = ahead.at(now, last)
            # From nothing, and from the whole mappings read afresh.
            whole = Ahead({k: tuple(sorted(ws)) for k, ws in windows.items()},
                          drawn=drawn).at(now)
            extra = _extra(made)
            assert extra == _extra(whole) == _extra(ahead.at(now))
            assert made.until == whole.until
            if made.overlay is not None:
                # What the readers walk: each provider's keys, exactly.
                assert made.overlay.by_provider == whole.overlay.by_provider or {
                    rp: sorted(rows) for rp, rows in made.overlay.by_provider.items()} == {
                    rp: sorted(rows) for rp, rows in whole.overlay.by_provider.items()}
            brute = {}
            for key in windows.keys() | drawn.keys():
                ws = windows.get(key, ())
                instants = {now} | {s for s, _e, _a in ws if s > now}
                top = max(sum(a for s, e, a in ws if s <= i < e)
                          for i in instants) - drawn.get(key, 0)
                if top:
                    brute[key] = top
            assert extra == brute, (now, windows)
            ends = [e for ws in windows.values() for _s, e, _a in ws if e > now]
            assert made.until == (min(ends) if ends else None)
            if rng.random() < 0.7:
                # Otherwise the next overlay is made from an older one.
                last = made
            now += rng.randint(0, 30)
    assert merges > 100
