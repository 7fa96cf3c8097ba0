"""Racing reservations never oversell a provider, whether they race each
other for the last room of a window or race claims for it.

Real processes (each with its own engine and pool) each run several
threads that reserve or claim one unit at a time until every provider
refuses them. Afterwards, for every provider and class,

    allocated + max over t >= now of reserved(t) <= capacity

(the claims' invariant, extended to time), every grant is in the ledger,
and where every writer wants the same window the grants add up to the
capacity exactly: each unit went to exactly one writer. The same race
through HTTP against two worker processes sees only 201s, 204s and 409s.
"""
from __future__ import annotations

import random
import threading
import uuid

from sqlalchemy import func, select

from placement_lite import errors
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import allocations, reservations, reserved_ahead
from placement_lite.ledger.allocations import ConsumerWrite
from tests import factories, ledger_races, races

PROCESSES = 2
THREADS = 4
HOUR = 3600
# (total, reserved, allocation_ratio): capacities 12, 9 and 7 (7.5).
INVENTORIES = [(12, 0, 1.0), (10, 1, 1.0), (6, 1, 1.5)]
EXPECTED = (12, 9, 7)


def _providers(db) -> list[str]:
    with db.write() as conn:
        rps = []
        for total, held_back, ratio in INVENTORIES:
            rp = factories.provider(conn)
            factories.inventory(conn, rp, "VCPU", total=total, reserved=held_back,
                                allocation_ratio=ratio)
            rps.append(rp["uuid"])
    return rps


def _attempt(db, kind: str, rp: str, window: tuple[int, int]) -> None:
    """One unit: a claim (no end) or a reservation over `window`."""
    if kind == "claim":
        db.run_write(lambda conn: allocations.replace(conn, [ConsumerWrite(
            str(uuid.uuid4()), "claims", "u", {rp: {"VCPU": 1}},
            expected_generation=None)]))
    else:
        db.run_write(lambda conn: reservations.create(
            conn, None, "reservations", "u", window[0], window[1],
            {rp: {"VCPU": 1}}))


def _worker(db, kind: str, rps: list[str], windows: list, out: dict,
            lock: threading.Lock) -> None:
    """Take one unit at a time (on a random provider, in a random one of
    `windows`) until every provider has refused every window."""
    rng = random.Random()
    todo = [(rp, w) for rp in rps for w in windows]
    while todo:
        rp, window = rng.choice(todo)
        got = ledger_races.one_write(
            lambda: _attempt(db, kind, rp, window),
            (errors.CapacityExceeded, errors.ReservationNoRoom), out, lock)
        if got is None:
            return
        if got == "refused":
            todo.remove((rp, window))
        elif got == "granted":
            with lock:
                out["granted"].append((kind, rp, window))


def _process(url: str, kinds: list[str], rps: list[str], windows: list,
             queue) -> None:
    out = {"granted": [], "unexpected": [], "gave_up": 0}
    ledger_races.in_threads(url, _worker, [(kinds[i % len(kinds)], rps, windows)
                                           for i in range(THREADS)], out, queue, None)


def _race(db, kinds: list[str], rps: list[str], windows: list) -> list:
    results = ledger_races.in_processes(
        _process, [(db.url, kinds, rps, windows)] * PROCESSES, timeout=300)
    return [g for _label, out in results for g in out["granted"]]


def room_invariant(conn) -> dict[tuple[int, int], tuple[int, int, float]]:
    """(provider id, class id) -> (allocated, the peak reserved from now
    on, capacity), from the rows themselves; asserts the first two fit
    the third everywhere."""
    a, inv = t.allocations, t.inventories
    allocated = dict(((rp, rc), int(n)) for rp, rc, n in conn.execute(
        select(a.c.resource_provider_id, a.c.resource_class_id, func.sum(a.c.used))
        .group_by(a.c.resource_provider_id, a.c.resource_class_id)))
    out = {}
    rows = conn.execute(select(inv)).all()
    peaks = reserved_ahead.peaks(conn, [(r.resource_provider_id, r.resource_class_id)
                                        for r in rows])
    for row in rows:
        key = (row.resource_provider_id, row.resource_class_id)
        capacity = (row.total - row.reserved) * row.allocation_ratio
        out[key] = (allocated.get(key, 0), peaks.get(key, 0), capacity)
        assert out[key][0] + out[key][1] <= capacity, (key, out[key])
        assert row.used == out[key][0]
    return out


def test_reservations_racing_for_one_window_take_exactly_its_room(db):
    rps = _providers(db)
    with db.read() as conn:
        now = clock.now(conn)
    window = (now + HOUR, now + 2 * HOUR)
    granted = _race(db, ["reserve"], rps, [window])
    assert len(granted) == sum(EXPECTED)
    with db.read() as conn:
        room = room_invariant(conn)
        stored = conn.scalar(select(func.count()).select_from(t.reservations))
        ids = dict(conn.execute(select(t.resource_providers.c.uuid,
                                       t.resource_providers.c.id)).all())
    assert stored == len(granted)
    for rp, expected in zip(rps, EXPECTED):
        assert [n for key, (_a, n, _c) in room.items() if key[0] == ids[rp]] == [expected]
        assert len([g for g in granted if g[1] == rp]) == expected


def test_reservations_and_claims_racing_never_both_win_the_last_room(db):
    """Claims (which hold their room forever) race reservations over three
    overlapping windows: whatever the interleaving, no instant is
    oversold, and every unit of every provider went to a claim or is
    reserved at the busiest instant."""
    rps = _providers(db)
    with db.read() as conn:
        now = clock.now(conn)
    windows = [(now + HOUR, now + 3 * HOUR), (now + 2 * HOUR, now + 4 * HOUR),
               (now + 5 * HOUR, now + 6 * HOUR)]
    granted = _race(db, ["claim", "reserve"], rps, windows)
    kinds = {kind for kind, _rp, _w in granted}
    assert kinds == {"claim", "reserve"}, granted
    with db.read() as conn:
        room = room_invariant(conn)
        ids = dict(conn.execute(select(t.resource_providers.c.uuid,
                                       t.resource_providers.c.id)).all())
        claimed = conn.scalar(select(func.count()).select_from(t.allocations))
    assert claimed == len([g for g in granted if g[0] == "claim"])
    for rp, expected in zip(rps, EXPECTED):
        (allocated, peak, _cap), = [v for key, v in room.items() if key[0] == ids[rp]]
        # Full: neither a claim nor a unit in the busiest window fits.
        assert allocated + peak == expected


def _changer(db, rp: str, mine: list, window: tuple[int, int], out: dict,
             lock: threading.Lock) -> None:
    """Grow this thread's reservations one unit at a time by changing
    them (PUT), until no change fits."""
    for r in mine:
        generation, amount = r.generation, 1
        while True:
            try:
                changed = db.run_write(lambda conn: reservations.replace(
                    conn, r.uuid, generation, window[0], window[1],
                    {rp: {"VCPU": amount + 1}}))
            except errors.ReservationNoRoom:
                break
            except Exception as exc:  # noqa: BLE001 - reported below
                with lock:
                    out["unexpected"].append(repr(exc))
                return
            generation, amount = changed.generation, amount + 1
            with lock:
                out["grown"] += 1


def test_changes_racing_creates_keep_the_window_exact(db):
    """Threads growing their reservations by changes race threads making
    new ones: the window ends exactly full."""
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=40)["uuid"]
        now = clock.now(conn)
    window = (now + HOUR, now + 2 * HOUR)
    mine = [[db.run_write(lambda conn: reservations.create(
        conn, None, "p", "u", *window, {rp: {"VCPU": 1}})) for _ in range(2)]
        for _ in range(3)]
    out = {"granted": [], "unexpected": [], "gave_up": 0, "grown": 0}
    lock = threading.Lock()
    threads = [threading.Thread(target=_changer, args=(db, rp, m, window, out, lock))
               for m in mine]
    threads += [threading.Thread(target=_worker, args=(
        db, "reserve", [rp], [window], out, lock)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert out["unexpected"] == []
    assert out["grown"] > 0 and out["granted"]
    with db.read() as conn:
        (allocated, peak, capacity), = room_invariant(conn).values()
        total = conn.scalar(select(func.sum(t.reservation_amounts.c.amount)))
    assert (allocated, peak, capacity, total) == (0, 40, 40, 40)
    assert total == 6 + out["grown"] + len(out["granted"])


def test_racing_http_reservations_and_claims_against_two_worker_processes(db):
    """The same race through the API, served by two worker processes:
    every answer is a 201, 204 or 409, never a 500, and nothing is
    oversold."""
    from tests.servers import serve

    capacities = {str(uuid.uuid4()): total for total in (6, 9)}
    with serve(db.url, "--workers", "2", "--threads", "4") as srv:
        races.make_vcpu_providers(srv.request, capacities, "1.38")
        race = races.reserve_and_claim_until_full(srv.request, capacities, "1.38")
    assert set(race.statuses) <= {201, 204, 409}, race.statuses
    assert race.granted["claim"] and race.granted["reserve"]
    with db.read() as conn:
        room = room_invariant(conn)
    assert sorted(a + p for a, p, _c in room.values()) == sorted(capacities.values())
