"""Reservations against a brute-force model (tests/reservation_model.py).

Random providers, claims, inventory changes and reservations (made,
replaced, cancelled, ended) on a grid of hourly slots a day ahead, driven
through the API in-process; and claims drawing from reservations
(docs/reservations.md, "Using a reservation"): by the holder's project
and by another, within what is left to give and one step over, released,
ended under them, shrunk below them, and bookings right after them.
Reservations drawn from start in the past (stored as the database's
now), as only those are active. After every step the service and the model
must agree on the answer (status and code; for a refusal for want of
room, the provider, class, first interval and figures of its detail),
and then on every reservation (window, status, amounts, generation,
`short`), every provider's usage, (where the route exists) each
provider's calendar, and consumers' allocations (marker rows included).

SQLite always; MariaDB and PostgreSQL when PLACEMENT_LITE_TEST_DB_URLS
names them. RESERVATION_MODEL_EXAMPLES and RESERVATION_MODEL_STEPS size a
run (examples x steps per backend), RESERVATION_MODEL_SEED picks the
sequences (the same on every backend). A failure prints hypothesis's
shortest sequence of steps, and the seed replays it;
RESERVATION_MODEL_SHRINK=0 reports the first failure as found.
`pytest -s` shows how many requests of each kind were accepted and
refused, and what else was checked.
"""
from __future__ import annotations

import collections
import os
import uuid as uuidlib

import falcon.testing
from hypothesis import HealthCheck, Phase, seed, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, get_state_machine_test,
                                 initialize, invariant, precondition, rule)

from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import clock
from tests import reservation_model as m
from tests.reservation_checks import Checker, at, iso

EXAMPLES = int(os.environ.get("RESERVATION_MODEL_EXAMPLES", "40"))
STEPS = int(os.environ.get("RESERVATION_MODEL_STEPS", "50"))
# The same steps on every run and every backend unless asked otherwise:
# the service's answers do not depend on the hour, so a seed replays.
SEED = int(os.environ.get("RESERVATION_MODEL_SEED", "2028"))
PHASES = (tuple(Phase) if os.environ.get("RESERVATION_MODEL_SHRINK", "1") != "0"
          else (Phase.generate,))
SLOTS = 6
CLASSES = ("VCPU", "DISK_GB")
CONSUMERS = 4
# Consumers that only draws write (besides releases and ends): what they
# draw outlives the plain claims' rewrites, so the rules about changes
# and bookings beside drawn allocations have some to work with.
DRAWERS = 2

slot = st.integers(0, SLOTS - 1)
start_slot = st.sampled_from([m.NOW, m.NOW] + list(range(SLOTS)))
# Mostly a window of one slot or more; now and then one that ends at or
# before its start.
length = st.sampled_from([1, 1, 2, 2, 3, 4, 5, 6, 0, -1])
amount = st.integers(1, 5)
# Key indices (into the model's sorted keys) and amounts.
amounts = st.dictionaries(st.integers(0, 7), amount, min_size=1, max_size=2)


def inventory(rc: str):
    """A small inventory, so that requests collide: sometimes with a
    ratio that makes capacity fractional, units above 1, a max_unit below
    the total."""
    @st.composite
    def build(draw):
        total = draw(st.integers(3, 16))
        return m.Inventory(
            total=total, reserved=draw(st.sampled_from([0, 0, 1, 2])),
            allocation_ratio=draw(st.sampled_from([1.0, 1.0, 1.5, 2.0, 0.5])),
            min_unit=draw(st.sampled_from([1] * 7 + [2])),
            max_unit=draw(st.sampled_from([total, total, 2**31 - 1, 4])),
            step_size=draw(st.sampled_from([1] * 7 + [2])))
    return build().filter(lambda i: i.min_unit <= i.max_unit)


def machine(client, db, base: int, counts: collections.Counter,
            notes: collections.Counter):

    class Reservations(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.project = f"p-{uuidlib.uuid4().hex[:12]}"
            self.model = m.Model(SLOTS, project=self.project)
            self.consumers = [str(uuidlib.uuid4())
                              for _ in range(CONSUMERS + DRAWERS)]
            self.check = Checker(client, db, base, self.model, counts, notes)
            self.notes = notes
            self.listed = self.steps = 0

        @initialize(data=st.data(), n=st.integers(1, 3))
        def providers(self, data, n):
            for i in range(n):
                rp = str(uuidlib.uuid4())
                self.check.call("POST", "/resource_providers",
                                {"name": f"rm-{rp[:8]}-{i}", "uuid": rp}, want=200)
                self.check.names[f"rm-{rp[:8]}-{i}"] = rp
                self.model.inventories[rp] = {}
                self._put_inventories(rp, {rc: data.draw(inventory(rc))
                                           for rc in CLASSES}, "setup")

        # Helpers ---------------------------------------------------------

        def _key_amounts(self, picks: dict) -> dict:
            keys = self.model.keys()
            out = {}
            for i, a in picks.items():
                out[keys[i % len(keys)]] = a
            return out

        def _pick(self, which: int):
            # In the order made: ids are random, and a choice must pick
            # the same reservation when hypothesis replays the steps.
            ids = list(self.model.reservations)
            return ids[which % len(ids)] if ids else None

        def _put_inventories(self, rp: str, invs: dict, kind="inventories"):
            gen = self.check.call("GET", f"/resource_providers/{rp}",
                                  want=200)[1]["generation"]
            decision = self.model.set_inventories(rp, invs)
            self.check.decide(kind, decision, "PUT",
                              f"/resource_providers/{rp}/inventories",
                              {"resource_provider_generation": gen,
                               "inventories": {rc: inv.body()
                                               for rc, inv in invs.items()}})

        def _shrink_under(self, r: m.Reservation) -> None:
            """Shrink the inventory of one of `r`'s keys so that its
            fullest instant lacks a unit of room (total - reserved at
            least 1, ratio 1)."""
            # The first of its keys in the order made: ids are random,
            # and the same steps must shrink the same inventory on replay.
            rp, rc = key = next(k for k in self.model.keys() if k in r.amounts)
            most = max(self.model.allocated(key) + self.model.reserved(key, k)
                       for k in range(max(r.start, m.NOW), r.end))
            invs = dict(self.model.inventories[rp])
            old = invs[rc]
            invs[rc] = m.Inventory(total=max(1, most - 1 + old.reserved),
                                   reserved=old.reserved, allocation_ratio=1.0,
                                   min_unit=old.min_unit, max_unit=old.max_unit,
                                   step_size=old.step_size)
            self._put_inventories(rp, invs, "inventories")

        def _edge(self, key, room: float, over: bool) -> int:
            """The most that fits in `room` in the key's units (or one
            step more), kept within min_unit and max_unit."""
            rp, rc = key
            inv = self.model.inventories[rp][rc]
            amount = int(room // 1)
            amount -= amount % inv.step_size
            amount += inv.step_size if over else 0
            return min(max(amount, inv.min_unit), inv.max_unit)

        def _window(self, start: int, length: int) -> tuple[int, int]:
            """Slots [start, end) clipped to the grid; a length below 1
            gives a window ending at or before its start."""
            if start == m.NOW:  # any end on the grid is after now
                return start, max(0, min(SLOTS, length))
            return start, min(SLOTS, start + length)

        # Reservations ----------------------------------------------------

        @rule(start=start_slot, length=length, picks=amounts,
              reuse=st.integers(0, 9), which=st.integers(0, 50))
        def create(self, start, length, picks, reuse, which):
            start, end = self._window(start, length)
            rid = self._pick(which) if reuse == 0 else None
            rid = rid or str(uuidlib.uuid4())
            want = self._key_amounts(picks)
            decision = self.model.create(rid, start, end, want)
            body = {"id": rid, "project_id": self.project, "user_id": "u1",
                    "start": self.check.start_text(start), "end": iso(at(base, end)),
                    "allocations": self.check.allocations_body(want)}
            self.check.decide("create", decision, "POST", "/reservations", body,
                              rid=rid)

        @rule(start=start_slot, length=length, which=st.integers(0, 7),
              over=st.booleans())
        def create_to_the_edge(self, start, length, which, over):
            """A reservation of all the room a key has at the fullest
            instant of its window, or one unit more."""
            start, end = self._window(start, max(1, length))
            key = self.model.keys()[which % len(self.model.keys())]
            room = min(self.model.capacity(key) - self.model.allocated(key)
                       - self.model.reserved(key, k) for k in range(start, end))
            want = {key: self._edge(key, room, over)}
            rid = str(uuidlib.uuid4())
            body = {"id": rid, "project_id": self.project, "user_id": "u1",
                    "start": self.check.start_text(start), "end": iso(at(base, end)),
                    "allocations": self.check.allocations_body(want)}
            self.check.decide("create (edge)", self.model.create(rid, start, end, want),
                              "POST", "/reservations", body, rid=rid)

        @precondition(lambda self: self.model.reservations)
        @rule(which=st.integers(0, 50), start=start_slot,
              length=length, picks=amounts,
              stale=st.integers(0, 9), move=st.integers(0, 4))
        def replace(self, which, start, length, picks, stale, move):
            rid = self._pick(which)
            r = self.model.reservations[rid]
            same_start = r.start == m.NOW and move != 0
            if same_start:
                start, start_text = m.NOW, iso(r.start_at)
            elif r.start == m.NOW and start == m.NOW:
                start = 0  # an active reservation asked to move
                start_text = self.check.start_text(start)
            else:
                start_text = self.check.start_text(start)
            start, end = self._window(start, length)
            want = self._key_amounts(picks)
            generation = r.generation + (1 if stale == 0 else 0)
            decision = self.model.replace(rid, stale != 0, start, end, want,
                                          same_start)
            body = {"generation": generation, "start": start_text,
                    "end": iso(at(base, end)),
                    "allocations": self.check.allocations_body(want)}
            self.check.decide("replace", decision, "PUT", f"/reservations/{rid}",
                              body, rid=rid, before=r.generation)

        @precondition(lambda self: any(not r.ended for r in
                                       self.model.reservations.values()))
        @rule(which=st.integers(0, 50), shift=st.sampled_from([0, 0, -1, 1]),
              trim=st.sampled_from([(0, 0), (1, 0), (0, 1)]), less=st.booleans(),
              shrink=st.booleans())
        def replace_within(self, which, shift, trim, less, shrink):
            """A change that holds no more (the same or smaller amounts,
            the window shortened), or the same amounts moved by a slot:
            only where it would hold more is room checked, so one left
            short by an inventory may still shrink. With `shrink`, an
            inventory it holds first shrinks to a unit below what it
            needs."""
            live = [rid for rid, r in self.model.reservations.items() if not r.ended]
            rid = live[which % len(live)]
            r = self.model.reservations[rid]
            if shrink:
                self._shrink_under(r)
            if self.model.short(rid):
                self.notes[("replace (within)", "of a short reservation")] += 1
            if r.start == m.NOW:
                start, start_text = m.NOW, iso(r.start_at)
                end = max(0, r.end - trim[1] + shift)
            else:
                start = max(0, min(SLOTS - 1, r.start + shift + trim[0]))
                start_text = self.check.start_text(start)
                end = max(start + 1, min(SLOTS, r.end + shift - trim[1]))
            want = {}
            for (rp, rc), a in r.amounts.items():
                step = self.model.inventories[rp][rc].step_size
                want[(rp, rc)] = a - step if less and a > step else a
            decision = self.model.replace(rid, True, start, end, want,
                                          r.start == m.NOW)
            body = {"generation": r.generation, "start": start_text,
                    "end": iso(at(base, end)),
                    "allocations": self.check.allocations_body(want)}
            self.check.decide("replace (within)", decision, "PUT",
                              f"/reservations/{rid}", body, rid=rid,
                              before=r.generation)

        @precondition(lambda self: self.model.reservations)
        @rule(which=st.integers(0, 50), unknown=st.integers(0, 9))
        def cancel(self, which, unknown):
            rid = (None if unknown == 0 else self._pick(which)) or str(uuidlib.uuid4())
            decision = self.model.cancel(rid)
            self.check.decide("cancel", decision, "DELETE", f"/reservations/{rid}")
            if decision.accepts:
                self.check.call("GET", f"/reservations/{rid}", want=404)
                for consumer in self.consumers:
                    self.check.consumer(consumer)

        @precondition(lambda self: self.model.reservations)
        @rule(which=st.integers(0, 50), unknown=st.integers(0, 9))
        def end(self, which, unknown):
            # Mostly an active one, where there is one: few are.
            active = [rid for rid, r in self.model.reservations.items()
                      if r.status == "active"]
            rid = (None if unknown == 0 else
                   active[which % len(active)] if active and unknown > 3 else
                   self._pick(which)) or str(uuidlib.uuid4())
            decision = self.model.end(rid)
            if decision.accepts and self.model.drawing().get(rid):
                self.notes[("end", "of one with draws (they go with it)")] += 1
            self.check.decide("end", decision, "POST", f"/reservations/{rid}/end",
                              rid=rid)
            if decision.accepts:
                for consumer in self.consumers:
                    self.check.consumer(consumer)

        # Claims and inventories -------------------------------------------

        @rule(who=st.integers(0, CONSUMERS - 1), picks=amounts)
        def claim(self, who, picks):
            self._claim("claim", self.consumers[who], self._key_amounts(picks))

        @rule(who=st.integers(0, CONSUMERS - 1), which=st.integers(0, 7),
              over=st.booleans())
        def claim_to_the_edge(self, who, which, over):
            """A claim of all the room a key has beside the most reserved
            ahead, or one unit more: the rule's boundary exactly."""
            consumer = self.consumers[who]
            key = self.model.keys()[which % len(self.model.keys())]
            held = self.model.allocations.get(consumer, {})
            room = (self.model.capacity(key) - self.model.allocated(key)
                    + held.get(key, 0) - self.model.peak(key))
            want = dict(held)
            want[key] = self._edge(key, room, over)
            self._claim("claim (edge)", consumer, want)

        def _claim(self, kind: str, consumer: str, want: dict,
                   project: str = "") -> None:
            gen = self.check.call("GET", f"/allocations/{consumer}",
                                  want=200)[1].get("consumer_generation")
            decision = self.model.claim(consumer, want, project)
            self.check.decide(kind, decision, "PUT", f"/allocations/{consumer}", {
                "allocations": self.check.allocations_body(want),
                "project_id": project or self.project, "user_id": "u1",
                "consumer_generation": gen, "consumer_type": "INSTANCE"})

        # Draws ----------------------------------------------------------

        def _drawn_keys(self) -> list:
            """(reservation, key) pairs where something is drawn, in a
            replayable order."""
            given = self.model.drawing()
            return [(rid, key) for rid in self.model.reservations
                    for key in self.model.keys() if key in given.get(rid, {})]

        def _active(self) -> list:
            return [rid for rid, r in self.model.reservations.items()
                    if r.status == "active"]

        @precondition(lambda self: self._active())
        @rule(which=st.integers(0, 7), length=st.integers(1, SLOTS),
              part=st.sampled_from([1, 2, 2, 3]))
        def reserve_from_now(self, which, length, part):
            """A reservation from now of a part (all, half, a third) of
            the room a key has: one to draw from."""
            key = self.model.keys()[which % len(self.model.keys())]
            room = min(self.model.capacity(key) - self.model.allocated(key)
                       - self.model.reserved(key, k) for k in range(m.NOW, length))
            want = {key: self._edge(key, room / part, False)}
            rid = str(uuidlib.uuid4())
            body = {"id": rid, "project_id": self.project, "user_id": "u1",
                    "start": self.check.start_text(m.NOW), "end": iso(at(base, length)),
                    "allocations": self.check.allocations_body(want)}
            self.check.decide("create (from now)",
                              self.model.create(rid, m.NOW, length, want),
                              "POST", "/reservations", body, rid=rid)

        @precondition(lambda self: self._active())
        @rule(who=st.integers(0, CONSUMERS + DRAWERS - 1), which=st.integers(0, 50),
              mode=st.sampled_from(["edge", "edge", "over", "some", "some",
                                    "other project", "not held"]),
              keep=st.booleans(), n=st.integers(1, 3))
        def draw(self, who, which, mode, keep, n):
            """A claim drawing from an active reservation on one of its
            providers: all it has left to give there, one step more, or
            some; by another project; naming a class it does not hold
            there. With `keep`, the consumer keeps what it holds on other
            providers (open or drawn)."""
            active = self._active()
            self._draw(who, active[which % len(active)], which, mode, keep, n)

        @precondition(lambda self: self.model.reservations)
        @rule(who=st.integers(0, CONSUMERS + DRAWERS - 1), which=st.integers(0, 50),
              n=st.integers(1, 3))
        def draw_any(self, who, which, n):
            """A draw from any reservation: pending or ended ones too."""
            self._draw(who, self._pick(which), which, "any", False, n)

        def _draw(self, who, rid, which, mode, keep, n):
            r = self.model.reservations[rid]
            consumer = self.consumers[who]
            # In the order made: ids are random (see _pick).
            rps = [rp for rp in self.model.inventories
                   if any(k[0] == rp for k in r.amounts)]
            rp = rps[which % len(rps)]
            held = self.model.allocations.get(consumer, {})
            want = {k: a for k, a in held.items() if keep and k[0] != rp}
            for key in self.model.keys():
                if key[0] != rp or key not in r.amounts:
                    continue
                amount = r.amounts[key]
                left = amount - self.model.drawn(rid, key, without=consumer)
                want[key] = (self._edge(key, left, mode == "over")
                             if mode in ("edge", "over") else
                             self._edge(key, min(left, n), False))
            if mode == "not held":
                missing = [rc for rc in CLASSES if (rp, rc) not in r.amounts]
                if missing:
                    want[(rp, missing[0])] = self._edge((rp, missing[0]), n, False)
            want[(rp, m.marker_class(rid))] = 1
            self._claim(f"draw ({mode})", consumer, want,
                        f"other-{self.project}" if mode == "other project" else "")

        @precondition(lambda self: self.model.drawing())
        @rule(which=st.integers(0, 50))
        def release_drawn(self, which):
            """DELETE /allocations of a consumer that draws."""
            drawing = [c for c, held in self.model.allocations.items()
                       if any(self.model.drawn_from(held, rp) for rp, _rc in held)]
            consumer = sorted(drawing, key=self.consumers.index)[
                which % len(drawing)]
            self.check.decide("unclaim (drawn)", self.model.unclaim(consumer),
                              "DELETE", f"/allocations/{consumer}")

        @precondition(lambda self: self.model.drawing())
        @rule(which=st.integers(0, 50), by=st.sampled_from([-1, 0, 0, 1]))
        def shrink_drawn(self, which, by):
            """A change of a reservation with draws: one drawn key's
            amount set to what it gave out, a step below (overdrawn) or a
            step above; the rest, and the window, kept."""
            rid, key = self._drawn_keys()[which % len(self._drawn_keys())]
            r = self.model.reservations[rid]
            step = self.model.inventories[key[0]][key[1]].step_size
            want = dict(r.amounts)
            want[key] = self.model.drawn(rid, key) + by * step
            if want[key] < 1:
                # Below what it gave out: without the key, where it
                # holds another.
                if len(want) > 1:
                    del want[key]
                else:
                    want[key] = step
            start_text = (iso(r.start_at) if r.start == m.NOW
                          else self.check.start_text(r.start))
            decision = self.model.replace(rid, True, r.start, r.end, want,
                                          r.start == m.NOW)
            body = {"generation": r.generation, "start": start_text,
                    "end": iso(at(base, r.end)),
                    "allocations": self.check.allocations_body(want)}
            self.check.decide(f"replace (drawn, {by:+d})", decision, "PUT",
                              f"/reservations/{rid}", body, rid=rid,
                              before=r.generation)

        @precondition(lambda self: self.model.drawing())
        @rule(which=st.integers(0, 50), length=st.integers(1, SLOTS),
              over=st.sampled_from([False, False, True]))
        def book_after_drawn(self, which, length, over):
            """The back-to-back booking: a reservation from the end of
            one with draws, of all the room a drawn key has there (or one
            unit more). Drawn allocations count inside their reservation
            only, so they take none of it."""
            rid, key = self._drawn_keys()[which % len(self._drawn_keys())]
            r = self.model.reservations[rid]
            if r.end >= SLOTS:
                return
            start, end = r.end, min(SLOTS, r.end + length)
            room = min(self.model.capacity(key) - self.model.allocated(key)
                       - self.model.reserved(key, k) for k in range(start, end))
            want = {key: self._edge(key, room, over)}
            new = str(uuidlib.uuid4())
            decision = self.model.create(new, start, end, want)
            if decision.accepts and (self.model.allocated(key) + want[key] + max(
                    self.model.reserved(key, k) for k in range(start, end))
                    + self.model.drawn(rid, key) > self.model.capacity(key)):
                self.notes[("create (after drawn)",
                            "admitted only as drawn ones are not counted")] += 1
            body = {"id": new, "project_id": self.project, "user_id": "u1",
                    "start": self.check.start_text(start), "end": iso(at(base, end)),
                    "allocations": self.check.allocations_body(want)}
            self.check.decide("create (after drawn)", decision, "POST",
                              "/reservations", body, rid=new)

        @precondition(lambda self: self.model.allocations)
        @rule(who=st.integers(0, CONSUMERS - 1))
        def unclaim(self, who):
            consumer = self.consumers[who]
            self.check.decide("unclaim", self.model.unclaim(consumer), "DELETE",
                              f"/allocations/{consumer}")

        # Every third step at most: hypothesis otherwise often spends most
        # steps here, leaving little time for what the inventories hold.
        @precondition(lambda self: self.steps % 3 == 0)
        @rule(data=st.data(), which=st.integers(0, 2))
        def change_inventory(self, data, which):
            rps = list(self.model.inventories)
            rp = rps[which % len(rps)]
            self._put_inventories(rp, {rc: data.draw(inventory(rc))
                                       for rc in CLASSES})

        # What must agree after every step -------------------------------------

        @invariant()
        def reservations_agree(self):
            self.steps += 1
            self.check.listing(self.project)
            self.filtered_listing_agrees()

        def filtered_listing_agrees(self):
            """One filter of GET /reservations, and paging, each step in
            turn, against the model's own reading of it."""
            self.listed += 1
            n = self.listed
            limit = (None, 1, 2, 3)[n % 4]
            if n % 3 == 0:
                status = ("pending", "active", "ended")[n // 3 % 3]
                query, keep = {"status": status}, lambda r: r.status == status
            elif n % 3 == 1:
                rps = list(self.model.inventories)
                rp = rps[n // 3 % len(rps)]
                query = {"resource_provider": rp}
                keep = lambda r: any(k[0] == rp for k in r.amounts)  # noqa: E731
            else:
                first = n // 3 % SLOTS
                low = at(base, first)
                high = at(base, min(SLOTS, first + 1 + n // 7 % 3))
                query = {"from": iso(low), "to": iso(high)}

                def keep(r):
                    start, end = self.check.window(r)
                    return start < high and end > low
            self.notes[("list", f"by {next(iter(query))}, checked")] += 1
            self.check.listing(self.project, query, keep, limit)

        @invariant()
        def usages_and_calendars_agree(self):
            # From now on every other step, else a part of the grid.
            n = self.steps
            first = n // 2 % SLOTS
            period = None if n % 2 == 0 else (first, min(SLOTS, first + 1 + n % 5))
            for rp in self.model.inventories:
                self.check.usages(rp)
                self.check.calendar(rp, period)
            self.check.project_calendar(self.project, period)
            # One consumer's allocations a step, in turn; every one's
            # after an end or a cancel (which remove what was drawn).
            self.check.consumer(self.consumers[n % len(self.consumers)])

    return Reservations


def test_reservations_agree_with_the_model(db):
    client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
    with db.engine.connect() as conn:
        now = clock.now(conn)
    base = (now // m.SLOT + 1) * m.SLOT + 86400
    counts: collections.Counter = collections.Counter()
    notes: collections.Counter = collections.Counter()
    run = get_state_machine_test(
        machine(client, db, base, counts, notes),
        settings=settings(max_examples=EXAMPLES, stateful_step_count=STEPS,
                          deadline=None, database=None, print_blob=True,
                          suppress_health_check=list(HealthCheck), phases=PHASES))
    print(f"\nreservation model, {db.engine.dialect.name}, seed {SEED}: ", end="")
    seed(SEED)(run)()
    print(f"{sum(counts.values())} requests")
    for (kind, outcome), n in sorted(counts.items()):
        print(f"  {kind:12} {outcome:46} {n:6}")
    print("  and checked:")
    for (kind, note), n in sorted(notes.items()):
        print(f"  {kind:12} {note:46} {n:6}")
    # The run reached what the rules are about (a seed or size that does
    # not is too small a run to say anything).
    accepted = {k for (k, o), n in counts.items() if o == "accepted"}
    assert {"create", "replace", "claim", "end", "cancel"} <= accepted, counts
    seen = {note for (_kind, note), n in notes.items()}
    assert {"refused for what is reserved ahead", "of a short reservation",
            "a short reservation, checked", "detail checked, interval ahead",
            "detail checked, interval from now",
            "of one with draws (they go with it)",
            "drawing allocations, checked"} <= seen, notes
    # Draws were taken, and refused for each of the doc's reasons.
    drew = {o for (k, o), n in counts.items() if k.startswith("draw")}
    assert {"accepted"} | {f"refused 409 placement.reservation.{code}" for code in
                           ("not_active", "other_project", "not_held",
                            "overdrawn")} <= drew, counts


def test_the_model_reads_the_docs_example():
    """docs/reservations.md's refusal: capacity 64, 40 allocated, 16
    reserved over the first three hours; 16 more over eight hours lacks
    room over those three, with 8 free."""
    model = m.Model(8)
    model.inventories["cn1"] = {"VCPU": m.Inventory(total=64)}
    model.allocations["c"] = {("cn1", "VCPU"): 40}
    model.reservations["a"] = m.Reservation("a", 0, 3, {("cn1", "VCPU"): 16})
    decision = model.create("b", 0, 8, {("cn1", "VCPU"): 16})
    assert decision.outcomes == {m.NO_ROOM}
    assert decision.shortfalls == (
        m.Shortfall("cn1", "VCPU", 0, 3, 8, 64, 40, 16, 16),)
    assert model.create("b", 3, 8, {("cn1", "VCPU"): 24}).accepts
    # A claim leaves room for the most reserved at any instant from now.
    assert not model.claim("d", {("cn1", "VCPU"): 9}).accepts
    assert model.claim("d", {("cn1", "VCPU"): 8}).accepts
    # Shrunk below what is held: the reservation is short where it lacks
    # room, and a write that does not raise usage is let through.
    model.inventories["cn1"] = {"VCPU": m.Inventory(total=50)}
    assert model.short("a") == [m.Shortfall("cn1", "VCPU", 0, 3, 10)]
    assert model.claim("c", {("cn1", "VCPU"): 39}).accepts


def test_a_reservations_link_starts_at_the_mount_point():
    """As docs/reservations.md shows it and as Placement's links are: a
    path from the mount point (SCRIPT_NAME), not an absolute URL. The
    Location header may stay absolute."""
    from tests.backends import fresh_database
    from tests.reservation_checks import ADMIN
    with fresh_database("sqlite") as db:
        client = falcon.testing.TestClient(create_app(Settings(db=db.url), db))
        rp, rid = str(uuidlib.uuid4()), str(uuidlib.uuid4())
        client.simulate_post("/resource_providers", headers=ADMIN,
                             json={"name": "cn1", "uuid": rp})
        client.simulate_put(f"/resource_providers/{rp}/inventories", headers=ADMIN,
                            json={"resource_provider_generation": 0,
                                  "inventories": {"VCPU": {"total": 8}}})
        made = client.simulate_post("/reservations", headers=ADMIN, json={
            "id": rid, "project_id": "p", "user_id": "u",
            "start": "2999-01-01T00:00:00Z", "end": "2999-01-02T00:00:00Z",
            "allocations": {rp: {"resources": {"VCPU": 2}}}})
        assert made.status_code == 201, made.text
        mounted = client.simulate_get(f"/reservations/{rid}", headers=ADMIN,
                                      extras={"SCRIPT_NAME": "/placement"})
        for answer, root in ((made.json, ""), (mounted.json, "/placement")):
            assert answer["links"] == [
                {"rel": "self", "href": f"{root}/reservations/{rid}"}]
