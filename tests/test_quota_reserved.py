"""Quota at every instant, and lease hours, with reservations, on every
backend.

Claims go through ledger.allocations.replace with the quota claim check,
and reservations through ledger.reservations with the reservation check
(quota.reserved), as the API runs them. Times are offsets from T0, the
database's now when the test began, so every window is in the future for
the whole test.
"""
from __future__ import annotations

import threading
import uuid as uuidlib

import pytest
from sqlalchemy import func, select

from placement_lite import errors
from placement_lite.config import Settings
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import allocations, reservations, timeline
from placement_lite.quota import booked, catalog, enforce, lease, limits, projects
from placement_lite.quota import reserved
from tests import factories
from tests.backends import statements_run

VCPU = "class:VCPU"
HOUR = 3600


# Rows straight into the reservation tables -----------------------------------

reservation_rows = factories.reservation


class World:
    def __init__(self, db, model="flat", **settings):
        self.db = db
        self.settings = Settings(db=db.url, quota_enforce=True,
                                 quota_model=model, **settings)
        self.enforcer = enforce.Enforcer(self.settings)
        self.check = reserved.check_for(self.enforcer)
        with db.write() as conn:
            self.service = catalog.create_service(conn, type="placement")["id"]
            self.rp = factories.provider_with(conn, VCPU=10000, MEMORY_MB=10000)
            self.t0 = clock.now(conn)
        self.held: dict[str, tuple] = {}

    def at(self, hours: float) -> int:
        return self.t0 + int(hours * HOUR)

    def register(self, name, default):
        with self.db.write() as conn:
            limits.create_registered(conn, [{
                "service_id": self.service, "resource_name": name,
                "default_limit": default}])

    def project(self, ext, parent=None):
        with self.db.write() as conn:
            projects.create(conn, external_id=ext, name=ext, parent=parent,
                            max_depth=self.enforcer.model.max_depth)

    def limit(self, ext, name, value):
        with self.db.write() as conn:
            limits.create_limits(conn, [{
                "project_id": ext, "service_id": self.service,
                "resource_name": name, "resource_limit": value}],
                self.enforcer.model)

    def claim(self, project, amount, rc="VCPU", rp=None):
        write = allocations.ConsumerWrite(
            str(uuidlib.uuid4()), project, "u",
            {(rp or self.rp)["uuid"]: {rc: amount}})
        self.db.run_write(lambda conn: allocations.replace(
            conn, [write], [self.enforcer]), retries=50)

    def reserve(self, project, amount, start, end, rc="VCPU", rp=None):
        """A new reservation, checked and charged; returns its id."""
        r = self.db.run_write(lambda conn: reservations.create(
            conn, None, project, "u", start, end,
            {(rp or self.rp)["uuid"]: {rc: amount}}, [self.check]), retries=50)
        self.held[r.uuid] = r
        return r.uuid

    def change(self, ident, start, end, amount=None, rc="VCPU", project=None):
        r = self.held[ident]
        amount = r.allocations[self.rp["uuid"]][rc] if amount is None else amount
        self.held[ident] = self.db.run_write(lambda conn: reservations.replace(
            conn, ident, r.generation, start, end,
            {self.rp["uuid"]: {rc: amount}}, project_id=project,
            checks=[self.check]))

    def cancel(self, ident):
        self.db.run_write(lambda conn: reservations.cancel(
            conn, ident, [self.check]))

    def end(self, ident):
        self.db.run_write(lambda conn: reservations.end(
            conn, ident, [self.check]))

    def refused(self, write, *args, **kwargs) -> list[dict]:
        with pytest.raises(errors.OverLimit) as info:
            write(*args, **kwargs)
        assert info.value.code == "placement.quota.over_limit"
        self.detail = str(info.value)
        return info.value.over

    def hours(self, project, rc="VCPU") -> float:
        with self.db.read() as conn:
            entries = lease.ledger(conn, project)
        return lease.balance(entries).get(lease.budget_name(rc), 0)


def one(over):
    assert len(over) == 1, over
    return over[0]


# Claims now respect reservations later ---------------------------------------

def test_a_claim_leaves_room_for_the_projects_future_reservation(db):
    w = World(db)
    w.register(VCPU, 10)
    w.project("p")
    w.claim("p", 2)
    w.reserve("p", 6, w.at(1), w.at(2))
    # Another project's reservation takes nothing from p.
    w.reserve("q", 10, w.at(1), w.at(2))
    w.claim("p", 2)  # 4 used + 6 reserved later: exactly the limit
    o = one(w.refused(w.claim, "p", 1))
    assert (o["project_id"], o["scope"], o["limit"]) == ("p", "project", 10)
    assert (o["current_usage"], o["reserved"], o["delta"]) == (4, 6, 1)
    assert o["at"] == booked.iso(w.at(1))
    assert (f"class:VCPU for project p would be 11 from {booked.iso(w.at(1))}, "
            "over its limit of 10 (in use 4, reserved then 6, requested 1)"
            ) in w.detail


def test_a_claim_counts_the_most_reserved_at_any_instant(db):
    w = World(db)
    w.register(VCPU, 10)
    w.reserve("p", 3, w.at(1), w.at(3))
    w.reserve("p", 4, w.at(2), w.at(4))  # 7 over [2h, 3h)
    w.reserve("p", 5, w.at(10), w.at(11))
    w.claim("p", 3)
    o = one(w.refused(w.claim, "p", 1))
    assert (o["reserved"], o["at"]) == (7, booked.iso(w.at(2)))


def test_reservations_that_ended_count_nowhere(db):
    w = World(db)
    w.register(VCPU, 10)
    with db.write() as conn:
        reservation_rows(conn, "p", w.t0 - 2 * HOUR, w.t0 - HOUR,
                         {w.rp["id"]: {"VCPU": 10}})
        reservation_rows(conn, "p", w.t0 - 2 * HOUR, w.t0,
                         {w.rp["id"]: {"VCPU": 10}})
    w.claim("p", 10)


def test_without_reservations_a_refusal_says_what_it_always_said(db):
    w = World(db)
    w.register(VCPU, 10)
    w.claim("p", 8)
    o = one(w.refused(w.claim, "p", 3))
    assert set(o) == {"resource_name", "limit", "current_usage", "delta",
                      "project_id", "scope"}
    assert w.detail == ("Quota exceeded: class:VCPU for project p would be "
                        "11, over its limit of 10 (in use 8, requested 3).")


def test_a_claim_that_does_not_grow_passes_beside_reservations(db):
    w = World(db)
    w.register(VCPU, 10)
    w.claim("p", 5)
    w.reserve("p", 5, w.at(1), w.at(2))
    w.limit("p", VCPU, 4)  # p is now over at every instant
    w.claim("p", 3, rc="MEMORY_MB")
    w.refused(w.claim, "p", 1)


def test_names_that_alias_a_class_count_its_reservations(db):
    w = World(db, quota_resource_usage={"cores": VCPU})
    w.register("cores", 4)
    w.reserve("p", 3, w.at(1), w.at(2))
    o = one(w.refused(w.claim, "p", 2))
    assert (o["resource_name"], o["reserved"]) == ("cores", 3)


# Reservations are checked at every instant of their windows -------------------

def test_a_reservation_is_refused_at_a_later_instant_only(db):
    w = World(db)
    w.register(VCPU, 10)
    w.claim("p", 2)
    w.reserve("p", 5, w.at(2), w.at(4))
    # Fits over [1h, 2h) (2 + 4), not over [2h, 3h) (2 + 5 + 4).
    o = one(w.refused(w.reserve, "p", 4, w.at(1), w.at(3)))
    assert (o["current_usage"], o["reserved"], o["delta"]) == (2, 5, 4)
    assert o["at"] == booked.iso(w.at(2))
    assert f"would be 11 from {booked.iso(w.at(2))}" in w.detail
    # Beside the other window, not across it, it fits.
    w.reserve("p", 4, w.at(1), w.at(2))
    w.reserve("p", 8, w.at(4), w.at(5))
    # Nothing was charged for the refused one.
    assert w.hours("p") == 5 * 2 + 4 * 1 + 8 * 1


def test_a_reservation_starting_before_now_counts_from_now(db):
    w = World(db)
    w.register(VCPU, 10)
    w.claim("p", 4)
    o = one(w.refused(w.reserve, "p", 7, w.t0 - HOUR, w.at(1)))
    assert o["at"] >= booked.iso(w.t0)
    assert o["reserved"] == 0 and o["delta"] == 7


def test_moving_a_reservation_is_checked_where_it_lands(db):
    w = World(db)
    w.register(VCPU, 10)
    a = w.reserve("p", 6, w.at(1), w.at(2))
    w.reserve("p", 6, w.at(3), w.at(4))
    # Its own old window does not count against it.
    w.change(a, w.at(1), w.at(3), 4)
    o = one(w.refused(w.change, a, w.at(2), w.at(4), 5))
    assert (o["reserved"], o["delta"], o["at"]) == (6, 5, booked.iso(w.at(3)))
    w.change(a, w.at(5), w.at(6), 10)


def test_shrinking_a_reservation_passes_when_over(db):
    w = World(db)
    w.register(VCPU, 10)
    a = w.reserve("p", 8, w.at(1), w.at(3))
    w.limit("p", VCPU, 5)
    w.change(a, w.at(1), w.at(2), 7)
    w.refused(w.change, a, w.at(1), w.at(2), 8)


def test_unregistered_classes_are_zero_for_reservations_too(db):
    w = World(db, quota_unregistered_is_zero=True)
    w.register(VCPU, 10)
    # Its lease hours are a resource too: zero until registered.
    o = one(w.refused(w.reserve, "p", 5, w.at(1), w.at(2)))
    assert (o["resource_name"], o["limit"]) == ("lease:VCPU:hours", 0)
    w.register("lease:VCPU:hours", -1)
    w.reserve("p", 5, w.at(1), w.at(2))
    o = one(w.refused(w.reserve, "p", 1, w.at(1), w.at(2), rc="MEMORY_MB"))
    assert (o["resource_name"], o["limit"]) == ("class:MEMORY_MB", 0)


def test_enforcement_off_checks_nothing(db):
    w = World(db)
    w.register(VCPU, 1)
    enforce.change(db, enforce=False)
    w.reserve("p", 5, w.at(1), w.at(2))
    w.claim("p", 5)


# strict_two_level: the tree's limit at every instant --------------------------

@pytest.fixture
def tree(db):
    w = World(db, "strict_two_level")
    w.register(VCPU, 10)
    w.project("A")
    w.project("B", parent="A")
    w.project("C", parent="A")
    w.limit("A", VCPU, 20)
    return w


def test_strict_a_siblings_reservation_holds_room_in_the_tree(tree):
    tree.claim("B", 8)
    tree.reserve("C", 10, tree.at(1), tree.at(2))  # C at its 10, tree at 18
    over = {o["scope"]: o for o in tree.refused(tree.claim, "A", 3)}
    o = over["tree"]
    assert (o["project_id"], o["limit"], o["current_usage"], o["reserved"],
            o["delta"]) == ("A", 20, 8, 10, 3)
    assert "project" not in over
    assert "project tree A would be 21 from" in tree.detail
    tree.claim("A", 2)
    # The tree is full over [1h, 2h) only.
    o = one(tree.refused(tree.reserve, "B", 1, tree.at(0.5), tree.at(1.5)))
    assert o["at"] == booked.iso(tree.at(1)) and o["scope"] == "tree"
    tree.reserve("B", 2, tree.at(2), tree.at(3))


def test_strict_a_childs_own_limit_holds_at_every_instant(tree):
    tree.reserve("B", 6, tree.at(1), tree.at(2))
    o = one(tree.refused(tree.reserve, "B", 5, tree.at(1.5), tree.at(3)))
    assert (o["project_id"], o["scope"], o["limit"]) == ("B", "project", 10)
    assert o["at"] == booked.iso(tree.at(1.5))


# Lease hours -------------------------------------------------------------------

def test_lease_hours_charge_change_end_and_cancel(db):
    w = World(db)
    a = w.reserve("p", 4, w.at(1), w.at(3))
    assert w.hours("p") == 8
    w.change(a, w.at(1), w.at(5), 4)  # two hours more
    assert w.hours("p") == 16
    w.change(a, w.at(1), w.at(5), 2)  # half the amount, all ahead
    assert w.hours("p") == 8
    b = w.reserve("p", 1, w.at(1), w.at(2))
    w.cancel(b)
    assert w.hours("p") == 8
    # Moved to another project: refunded here, charged there.
    w.change(a, w.at(1), w.at(3), 2, project="q")
    assert (w.hours("p"), w.hours("q")) == (0, 4)
    # Active for a moment, then ended: all but that moment comes back.
    c = w.reserve("p", 3600, w.t0 - HOUR, w.at(1))
    w.end(c)
    assert 0 <= w.hours("p") <= 5  # 3600 VCPU for a second or so
    with db.read() as conn:
        events = [(e.event, e.hours) for e in lease.ledger(conn, "p")]
        assert [e.lease_id for e in lease.ledger(conn, "q")] == [a]
    assert events[:6] == [("reserve", 8), ("change", 8), ("change", -8),
                          ("reserve", 1), ("cancel", -1), ("change", -8)]
    with db.read() as conn:
        assert [e.event for e in lease.ledger(conn, "q")] == ["change"]
    assert [e for e, _h in events[6:]] == ["reserve", "end"]


def test_lease_hours_of_an_early_end_refund_what_was_left():
    held = reserved.Held(1000, 1000 + 10 * HOUR, {"VCPU": 3, "MEMORY_MB": 0})
    now = 1000 + 4 * HOUR
    ended = held._replace(end=now)
    assert reserved.unit_seconds(held, ended, now) == {"VCPU": -3 * 6 * HOUR}
    assert reserved.event_of(held, ended, now) == "end"
    # Past its end, nothing is left to refund, whatever the write.
    assert reserved.unit_seconds(held, None, held.end + 1) == {}
    # A change while active charges the new amount from now on only.
    assert reserved.unit_seconds(held, held._replace(amounts={"VCPU": 5}),
                                 now) == {"VCPU": 2 * 6 * HOUR}
    assert reserved.Held.of(1, 2, {"a": {"resources": {"VCPU": 2}},
                                   "b": {"VCPU": 3}}).amounts == {"VCPU": 5}


def test_lease_hours_budgets_refuse_and_stay_exact(db):
    w = World(db)
    w.register("lease:VCPU:hours", 10)
    w.reserve("p", 2, w.at(1), w.at(4))  # 6 hours
    o = one(w.refused(w.reserve, "p", 5, w.at(1), w.at(2)))
    assert (o["resource_name"], o["limit"], o["current_usage"], o["delta"]
            ) == ("lease:VCPU:hours", 10, 6, 5)
    assert "at" not in o
    w.reserve("p", 4, w.at(1), w.at(2))
    assert w.hours("p") == 10
    # A refund is never refused, even over a lowered budget.
    w.limit("p", "lease:VCPU:hours", 1)
    a = next(i for i, r in w.held.items()
             if r.allocations[w.rp["uuid"]]["VCPU"] == 2)
    w.change(a, w.at(1), w.at(2), 2)
    assert w.hours("p") == 6


def test_lease_hours_are_recorded_with_enforcement_off(db):
    w = World(db)
    w.register("lease:VCPU:hours", 1)
    enforce.change(db, enforce=False)
    w.reserve("p", 2, w.at(1), w.at(4))
    assert w.hours("p") == 6


def test_strict_lease_hours_of_the_tree(tree):
    tree.register("lease:VCPU:hours", 10)
    tree.reserve("B", 1, tree.at(1), tree.at(7))
    over = tree.refused(tree.reserve, "C", 1, tree.at(1), tree.at(6))
    assert {(o["project_id"], o["scope"]) for o in over} == {("A", "tree")}


# What a claim pays for all this -------------------------------------------------

def _claim_statements(w, project):
    with statements_run(w.db) as seen:
        w.claim(project, 1)
    return seen


def test_a_claim_without_reservations_reads_none(db):
    w = World(db)
    w.register(VCPU, 10)
    w.reserve("busy", 1, w.at(1), w.at(2))
    # Each project's first claims create rows; the third is a plain one.
    quiet = [_claim_statements(w, "p") for _ in range(3)][-1]
    busy = [_claim_statements(w, "busy") for _ in range(3)][-1]
    # (Both claim on a provider with a reservation ahead, so the capacity
    # check reads that alike for both: ledger/reserved_ahead.py.)
    mentions = [s for s in quiet if "reservations.project_id" in s]
    # Asked once, folded into the read of the limits' scope.
    assert len(mentions) == 1 and "quota_services" in mentions[0], mentions
    # With reservations, one more statement reads their windows.
    assert len(busy) == len(quiet) + 1
    assert len([s for s in busy if "reservations.project_id" in s]) == 2


# Races -----------------------------------------------------------------------------

ROUNDS = 6


def test_a_reservation_and_a_claim_race_for_the_last_unit(db):
    """In each round a project has one unit left; a reservation and a
    claim of one unit each, on providers of their own, start together.
    Exactly one wins; the limit holds at every instant."""
    w = World(db)
    w.register(VCPU, 10)
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=100) for _ in range(2)]
    outcomes = []
    for round_ in range(ROUNDS):
        project = f"race-{round_}"
        w.claim(project, 9)
        start = threading.Barrier(2)
        won = []

        def run(write):
            start.wait()
            try:
                write()
            except errors.OverLimit:
                return
            won.append(write)

        threads = [
            threading.Thread(target=run, args=(lambda: w.claim(
                project, 1, rp=rps[0]),)),
            threading.Thread(target=run, args=(lambda: w.reserve(
                project, 1, w.at(1), w.at(2), rp=rps[1]),))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        outcomes.append(len(won))
        with db.read() as conn:
            pid = projects.get(conn, project).id
            used = conn.scalar(select(func.sum(t.usage_summary.c.amount)).where(
                t.usage_summary.c.project_id == pid,
                t.usage_summary.c.resource_class_id == factories.class_id(
                    conn, "VCPU"))) or 0
            held = booked.read(conn, [pid])
        peak = max((sum(a for _s, _e, a in ws) for ws in
                    held.windows.get("VCPU", {}).values()), default=0)
        assert used + peak == 10, (round_, used, peak)
    assert outcomes == [1] * ROUNDS


def test_two_reservations_race_for_the_last_unit(db):
    """Strict two-level: in each round a tree has one unit left over
    [1h, 2h) and five over [3h, 4h); its two children each reserve one
    unit in both, all four writers starting together, each on a provider
    of its own: only quota's lock orders them. Three win."""
    w = World(db, "strict_two_level")
    w.register(VCPU, 5)
    with db.write() as conn:
        rps = [factories.provider_with(conn, VCPU=100) for _ in range(4)]
    for round_ in range(ROUNDS):
        root, kids = f"R{round_}", (f"R{round_}-b", f"R{round_}-c")
        w.project(root)
        for kid in kids:
            w.project(kid, parent=root)
        w.reserve(root, 4, w.at(1), w.at(2))
        start = threading.Barrier(4)
        won = []

        def run(project, begin, rp):
            start.wait()
            try:
                w.reserve(project, 1, w.at(begin), w.at(begin + 1), rp=rp)
            except errors.OverLimit:
                return
            won.append(project)

        threads = [threading.Thread(target=run, args=(kid, begin, rps[i]))
                   for i, (begin, kid) in enumerate(
                       (b, k) for b in (1, 3) for k in kids)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(won) == 3, (round_, won)
        with db.read() as conn:
            held = booked.read(conn, projects.descendants(
                conn, projects.get(conn, root).id))
        windows = [win for ws in held.windows["VCPU"].values() for win in ws]
        assert timeline.peak(windows, w.t0, w.at(5)) == 5


@pytest.mark.parametrize("seed", range(100))
def test_the_quick_peak_is_timelines(seed):
    import random
    rng = random.Random(seed)
    windows = [(s, s + rng.randrange(0, 8), rng.randrange(0, 5))
               for s in (rng.randrange(30) for _ in range(rng.randrange(8)))]
    now = rng.randrange(-3, 35)
    assert booked._peak_after(windows, now) == timeline.peak_after(windows, now)


def test_asking_before_claiming_counts_reservations(db):
    w = World(db)
    w.register(VCPU, 10)
    w.claim("p", 4)
    with db.read() as conn:
        w.enforcer.check_deltas(conn, "p", {VCPU: 6})
    w.reserve("p", 6, w.at(1), w.at(2))
    with db.read() as conn:
        w.enforcer.check_deltas(conn, "p", {VCPU: 0})
        with pytest.raises(errors.OverLimit) as info:
            w.enforcer.check_deltas(conn, "p", {VCPU: 1})
    o = one(info.value.over)
    assert (o["current_usage"], o["reserved"], o["delta"], o["at"]) == (
        4, 6, 1, booked.iso(w.at(1)))


def test_charging_without_a_decision(db):
    """reserved.charge, for a write that took no decision before it: a
    refund is written at once, a charge that grows a budget is checked."""
    w = World(db)
    w.register("lease:VCPU:hours", 3)
    held = (w.at(1), w.at(3), {"VCPU": 1})
    db.run_write(lambda conn: reserved.charge(conn, w.enforcer, "p", "r1",
                                              None, held))
    with statements_run(db) as seen:
        db.run_write(lambda conn: reserved.charge(
            conn, w.enforcer, "p", "r1", held, None, now=w.t0))
    assert not [s for s in seen if "quota_tree_locks" in s]
    assert w.hours("p") == 0
    with pytest.raises(errors.OverLimit):
        db.run_write(lambda conn: reserved.charge(
            conn, w.enforcer, "p", "r2", None, (w.at(1), w.at(5), {"VCPU": 1})))
    assert w.hours("p") == 0
