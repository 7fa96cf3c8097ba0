"""The reads of what overlaps a window are bounded by the longest window
stored (ledger/windows.py): they must return exactly the rows the
unbounded condition `end_at > start AND start_at < end` returns, on every
backend, however the windows were written: long ones after short ones,
lengthened by a change, read in the transaction that wrote them, or
committed by a writer racing the read.
"""
from __future__ import annotations

import random
import threading

import pytest
from sqlalchemy import func, select

from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.db.engine import driver_rows
from placement_lite.ledger import (
    reservation_room, reservations, reserved, timeline, windows)
from tests import factories

HOUR, DAY = 3600, 86400
_RA = t.reservation_amounts


def _unbounded(conn, start: int, end: int) -> list[tuple]:
    return sorted(tuple(row) for row in conn.execute(select(
        _RA.c.resource_provider_id, _RA.c.resource_class_id, _RA.c.start_at,
        _RA.c.end_at, _RA.c.amount).where(_RA.c.end_at > start, _RA.c.start_at < end)))


def _bounded(conn, start: int, end: int) -> list[tuple]:
    return sorted(tuple(row) for row in driver_rows(
        conn, reserved._OVERLAPPING, {"w_start": start, "w_end": end}))


def _assert_reads_agree(conn, start: int, end: int, keys) -> None:
    expected = _unbounded(conn, start, end)
    assert _bounded(conn, start, end) == expected, (start, end)
    by_key: dict = {}
    for rp, rc, s, e, amount in expected:
        by_key.setdefault((rp, rc), []).append((s, e, amount))
    peaks = {key: timeline.peak(held, start, end) for key, held in by_key.items()}
    assert reserved.peaks(conn, start, end) == {k: v for k, v in peaks.items() if v}
    room = reservation_room.read(conn, keys, start, end)
    assert {key: sorted((h.start, h.end, h.amount) for h in held)
            for key, held in room.windows.items()} == {
        key: sorted(held) for key, held in by_key.items() if key in keys}


def _longest_covers_every_window(conn) -> None:
    bound = conn.scalar(select(t.reservation_longest.c.seconds))
    for table in (t.reservations, _RA):
        longest = conn.scalar(select(func.max(table.c.end_at - table.c.start_at)))
        assert longest is None or longest <= bound


def _reserve(conn, rp, start, end, vcpu, project="p1", user="u1"):
    return reservations.create(conn, None, project, user, start, end,
                               {rp["uuid"]: {"VCPU": vcpu}})


def test_the_bounded_reads_return_exactly_what_overlaps(db):
    rng = random.Random(28)
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=10 ** 6) for _ in range(3)]
        now = clock.now(conn)
        vcpu = conn.scalar(select(t.resource_classes.c.id)
                           .where(t.resource_classes.c.name == "VCPU"))
    keys = {(rp["id"], vcpu) for rp in rps}
    # Short windows first, then longer and longer ones, each written after
    # windows it outlasts; then short ones again, and some lengthened by a
    # change: every kind of write that could leave the bound behind.
    lengths = ([rng.randrange(1, HOUR) for _ in range(12)]
               + [DAY, 3 * DAY, 7 * DAY + 1, 20 * DAY]
               + [rng.randrange(1, DAY) for _ in range(12)])
    made = []
    for length in lengths:
        start = now + rng.randrange(10, 40 * DAY)
        made.append(db.run_write(lambda conn, s=start, n=length: _reserve(
            conn, rng.choice(rps), s, s + n, rng.randrange(1, 9))))
    for r in rng.sample(made[:12], 4):
        rp = next(iter(r.allocations))
        db.run_write(lambda conn, r=r, rp=rp: reservations.replace(
            conn, r.uuid, r.generation, r.start, r.start + 30 * DAY,
            {rp: {"VCPU": 2}}))
    with db.read() as conn:
        _longest_covers_every_window(conn)
        rows = _unbounded(conn, 0, 2 ** 40)
        assert max(e - s for _rp, _rc, s, e, _n in rows) == 30 * DAY
        # Windows at every edge of every stored window: touching it from
        # either side (not overlapping), one second into it at either end,
        # and its first second alone, where a bound one second short of
        # its length would lose it; then random ones.
        periods = set()
        for _rp, _rc, s, e, _n in rows:
            periods |= {(e, e + HOUR), (e - 1, e), (s - HOUR, s), (s, s + 1),
                        (s - 5, s + 1), (e - 1, e + DAY)}
        for _ in range(60):
            start = now + rng.randrange(-DAY, 80 * DAY)
            periods.add((start, start + rng.choice([1, HOUR, DAY, 7 * DAY, 60 * DAY])))
        for start, end in sorted(periods):
            _assert_reads_agree(conn, start, end, keys)


def test_a_write_reads_the_windows_it_wrote_in_its_own_transaction(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=100)
        vcpu = conn.scalar(select(t.resource_classes.c.id)
                           .where(t.resource_classes.c.name == "VCPU"))
    with db.read() as conn:
        now = clock.now(conn)
    start = now + DAY

    def write(conn):
        _reserve(conn, rp, start, start + HOUR, 3)
        # Longer than anything committed: only this transaction's own
        # widening covers it.
        _reserve(conn, rp, start, start + 50 * DAY, 5)
        late = start + 40 * DAY
        return (reserved.peaks(conn, late, late + 1),
                reservation_room.read(conn, {(rp["id"], vcpu)}, late, late + 1).others(
                    (rp["id"], vcpu), None))
    peaks, others = db.run_write(write)
    assert peaks == {(rp["id"], vcpu): 5}
    assert others == [(start, start + 50 * DAY, 5)]


def test_a_longer_window_committed_meanwhile_is_read_afterwards(db):
    """A writer lengthening the bound holds its row until it commits;
    another writer that does not lengthen it neither waits for it nor is
    refused, and once the first commits, every later read sees its
    window."""
    if db.backend == "sqlite":
        pytest.skip("one writer at a time: nothing runs meanwhile")
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=100) for _ in range(2)]
        vcpu = conn.scalar(select(t.resource_classes.c.id)
                           .where(t.resource_classes.c.name == "VCPU"))
        now = clock.now(conn)
    start = now + DAY
    db.run_write(lambda conn: _reserve(conn, rps[0], start, start + 2 * DAY, 1))
    late = start + 20 * DAY
    with db.engine.connect() as long_writer:
        trans = long_writer.begin()
        _reserve(long_writer, rps[0], start, start + 30 * DAY, 7, "pa", "ua")
        done = []

        def short_write():
            done.append(db.run_write(lambda conn: _reserve(
                conn, rps[1], start, start + HOUR, 2, "pb", "ub")))
        other = threading.Thread(target=short_write)
        other.start()
        other.join(timeout=20)
        assert done, "a write not lengthening the bound waited for one that does"
        with db.read() as conn:
            assert reserved.peaks(conn, late, late + 1) == {}
        trans.commit()
    with db.read() as conn:
        assert reserved.peaks(conn, late, late + 1) == {(rps[0]["id"], vcpu): 7}
        assert conn.scalar(select(t.reservation_longest.c.seconds)) == 30 * DAY
        _longest_covers_every_window(conn)


def test_the_bound_only_grows(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=100)
        now = clock.now(conn)
    r = db.run_write(lambda conn: _reserve(conn, rp, now + DAY, now + 9 * DAY, 1))
    db.run_write(lambda conn: reservations.replace(
        conn, r.uuid, r.generation, now + DAY, now + 2 * DAY, {rp["uuid"]: {"VCPU": 1}}))
    with db.write() as conn:
        windows.widen(conn, 0, HOUR)
        assert conn.scalar(select(t.reservation_longest.c.seconds)) == 8 * DAY


@pytest.mark.parametrize("keys", [1, 3, 40])
def test_the_fold_of_the_windows_read_is_the_step_functions_peak(monkeypatch, keys):
    """reserved.peaks folds the rows it reads three ways (one window a
    key, a few keys repeated, most repeated) and two or a few windows by
    shortcuts: each agrees with timeline.peak."""
    rng = random.Random(keys)
    start, end = 100, 200
    for _ in range(400):
        rows = []
        for _ in range(rng.randrange(0, 60)):
            s = rng.randrange(0, 250)
            e = s + rng.randrange(1, 120)
            if e > start and s < end:
                rows.append((rng.randrange(keys), rng.randrange(2), s, e,
                             rng.randrange(1, 5)))
        monkeypatch.setattr(reserved, "driver_rows",
                            lambda conn, stmt, params, rows=rows: list(rows))
        held: dict = {}
        for rp, rc, s, e, amount in rows:
            held.setdefault((rp, rc), []).append((s, e, amount))
        assert reserved.peaks(None, start, end) == {
            key: timeline.peak(w, start, end) for key, w in held.items()}
