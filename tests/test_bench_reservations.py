"""bench/reservation_world.py: the reservations benchmark's loader and
its checks from the rows, at a tiny size on SQLite, so neither can rot
between the benchmark's runs; and the check of a window candidates
answer against them (bench/reservations.py)."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, insert, select

from bench import complete, reservations, worlds
from bench import reservation_world as world
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
