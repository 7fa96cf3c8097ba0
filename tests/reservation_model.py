"""A brute-force model of the ledger with reservations (docs/reservations.md).

Time is a grid of slots. Slot k (k >= 0) is [base + k*SLOT, base +
(k+1)*SLOT), where base lies a day past the database's now, so no window
boundary is crossed while a test runs. Slot NOW (-1) is [now, base): the
room before the grid, which only reservations "from now" (a start in the
past, stored as now) cover. Every reservation that covers it covers all of
it from the current instant on, so one number per slot is exact.

The model decides every request by counting, for every slot, what
allocations and reservations hold there, against the capacity
`(total - reserved) * allocation_ratio`. It shares no code with the
service: it is the doc's rules, written as plainly as they read.

A decision is a set of acceptable outcomes: a single one where the doc
fixes it, several where two conditions hold at once and the doc does not
say which is reported first (the test records which the service chose).

Draws (docs/reservations.md, "Using a reservation"): a consumer's
allocation on provider P that names reservation R's marker class draws
its other classes on P from R. The model keeps the marker row as the
service shows it (a key (P, marker class) of amount 1), and reads from it
which allocations are drawn. `allocated` is then what is held open (not
drawn): the room rules above read it; `used` (every allocation) is what
usages show.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

SLOT = 3600
NOW = -1

Key = tuple[str, str]  # (provider uuid, resource class)

OK = (200, None)
CREATED = (201, None)
GONE = (204, None)
NOT_FOUND = (404, None)
BAD = (400, None)
NO_ROOM = (409, "placement.reservation.no_room")
EXISTS = (409, "placement.reservation.exists")
STALE = (409, "placement.concurrent_update")
ENDED = (409, "placement.reservation.ended")
STARTED = (409, "placement.reservation.started")
NOT_STARTED = (409, "placement.reservation.not_started")
CLAIM_REFUSED = (409, "placement.undefined_code")
# A reservation's amount outside min_unit/max_unit/step_size: "Amounts
# follow each inventory's min_unit, max_unit and step_size, as a claim's
# do" names the rule, not the answer. A claim answers 409; the doc's 400
# covers "a bad body". Either is taken, and the choice is recorded.
UNITS = frozenset({BAD, CLAIM_REFUSED})
NOT_ACTIVE = (409, "placement.reservation.not_active")
OTHER_PROJECT = (409, "placement.reservation.other_project")
NOT_HELD = (409, "placement.reservation.not_held")
OVERDRAWN = (409, "placement.reservation.overdrawn")
MARKER = "CUSTOM_RESERVATION_"


def marker_class(rid: str) -> str:
    """The class naming reservation `rid`: its id upper-cased, dashes as
    underscores (the doc's spelling)."""
    return MARKER + rid.upper().replace("-", "_")


def marker_rid(rc: str) -> Optional[str]:
    if not rc.startswith(MARKER):
        return None
    hexes = rc[len(MARKER):].lower().split("_")
    return "-".join(hexes)


@dataclass(frozen=True)
class Inventory:
    total: int
    reserved: int = 0
    allocation_ratio: float = 1.0
    min_unit: int = 1
    max_unit: int = 2**31 - 1
    step_size: int = 1

    @property
    def capacity(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio

    def allows(self, amount: int) -> bool:
        return (self.min_unit <= amount <= self.max_unit
                and amount % self.step_size == 0)

    def body(self) -> dict:
        return {"total": self.total, "reserved": self.reserved,
                "allocation_ratio": self.allocation_ratio,
                "min_unit": self.min_unit, "max_unit": self.max_unit,
                "step_size": self.step_size}


@dataclass
class Reservation:
    rid: str
    start: int                 # a slot, or NOW once started
    end: int                   # the first slot after the window
    amounts: dict[Key, int]
    generation: Optional[int] = None
    ended: bool = False
    # Instants as the service stored them, where the grid cannot say:
    # the start of one started "from now", the end of one ended early.
    start_at: Optional[int] = None
    end_at: Optional[int] = None

    @property
    def status(self) -> str:
        if self.ended:
            return "ended"
        return "active" if self.start == NOW else "pending"

    def covers(self, k: int) -> bool:
        return not self.ended and self.start <= k < self.end


class Shortfall(NamedTuple):
    """Where an amount lacks room: slots [start, end) of one key, what is
    free there, and the figures the refusal's detail gives."""
    rp: str
    rc: str
    start: int
    end: int
    free: float
    capacity: float = 0
    allocated: int = 0
    reserved: int = 0
    requested: int = 0


@dataclass
class Decision:
    outcomes: frozenset
    # For a refusal for want of room: the first short interval of each
    # key that lacks it (any one of them may be named).
    shortfalls: tuple = ()
    apply: Optional[Callable[[dict], None]] = None
    note: str = ""  # what is remarkable about it, for the test's counts

    @property
    def accepts(self) -> bool:
        return self.apply is not None


def _refuse(*reasons, shortfalls=()) -> Decision:
    outcomes = set()
    for reason in reasons:
        outcomes |= reason if isinstance(reason, frozenset) else {reason}
    return Decision(frozenset(outcomes), tuple(shortfalls))


@dataclass
class Model:
    slots: int
    inventories: dict[str, dict[str, Inventory]] = field(default_factory=dict)
    allocations: dict[str, dict[Key, int]] = field(default_factory=dict)
    reservations: dict[str, Reservation] = field(default_factory=dict)
    # The reservations whose marker class exists: made with the
    # reservation, gone with it (nothing else here refers to one).
    markers: set = field(default_factory=set)
    project: str = ""  # the one project that holds every reservation

    # What is held -------------------------------------------------------

    def instants(self) -> range:
        return range(NOW, self.slots)

    def capacity(self, key: Key) -> float:
        rp, rc = key
        return self.inventories[rp][rc].capacity

    @staticmethod
    def drawn_from(held: dict[Key, int], rp: str) -> Optional[str]:
        """The reservation a consumer's allocation on `rp` draws from."""
        for (p, rc) in held:
            if p == rp and marker_rid(rc) is not None:
                return marker_rid(rc)
        return None

    def allocated(self, key: Key) -> int:
        """What is held open at `key`: what takes room at every instant."""
        return sum(held.get(key, 0) for held in self.allocations.values()
                   if self.drawn_from(held, key[0]) is None)

    def used(self, key: Key) -> int:
        return sum(held.get(key, 0) for held in self.allocations.values())

    def drawn(self, rid: str, key: Key, without: str = "") -> int:
        """What reservation `rid` has given out at `key` (but to
        consumer `without`)."""
        return sum(held.get(key, 0) for c, held in self.allocations.items()
                   if c != without and self.drawn_from(held, key[0]) == rid)

    def drawing(self) -> dict[str, dict[Key, int]]:
        """Per reservation, what it has given out at each key."""
        out: dict = {}
        for held in self.allocations.values():
            for (rp, rc), n in held.items():
                rid = self.drawn_from(held, rp)
                if rid is not None and marker_rid(rc) is None:
                    out.setdefault(rid, {}).setdefault((rp, rc), 0)
                    out[rid][(rp, rc)] += n
        return out

    def reserved(self, key: Key, k: int, without: str = "") -> int:
        return sum(r.amounts.get(key, 0) for r in self.reservations.values()
                   if r.rid != without and r.covers(k))

    def peak(self, key: Key) -> int:
        return max(self.reserved(key, k) for k in self.instants())

    def keys(self) -> list[Key]:
        """Every (provider, class), providers in the order made."""
        return [(rp, rc) for rp, invs in self.inventories.items()
                for rc in sorted(invs)]

    # Reservations -------------------------------------------------------

    def shortfalls(self, amounts: dict[Key, int], start: int, end: int,
                   without: str = "", checked=None) -> list[Shortfall]:
        """The first interval lacking room of each key, for `amounts`
        over slots [start, end) beside every other reservation (only the
        slots `checked(key)` gives, when given). An interval runs while
        what the others reserve stays the same, so one figure of free
        room holds throughout it, and ends where the checked slots do."""
        found = []
        for key in sorted(amounts):
            cap, alloc = self.capacity(key), self.allocated(key)
            slots = [k for k in range(max(start, NOW), end)
                     if checked is None or k in checked(key)]
            others = {k: self.reserved(key, k, without) for k in slots}
            short = [k for k, r in others.items()
                     if alloc + r + amounts[key] > cap]
            if not short:
                continue
            first = last = short[0]
            while others.get(last + 1, None) == others[first]:
                last += 1
            found.append(Shortfall(*key, first, last + 1,
                                   cap - alloc - others[first], cap, alloc,
                                   others[first], amounts[key]))
        return found

    def _unit_violations(self, amounts: dict[Key, int]) -> bool:
        return any(not self.inventories[rp][rc].allows(a)
                   for (rp, rc), a in amounts.items())

    def _admit(self, reasons: list, amounts, start, end, without="",
               checked=None) -> list:
        if self._unit_violations(amounts):
            reasons.append(UNITS)
        short = self.shortfalls(amounts, start, end, without, checked)
        if short:
            reasons.append(NO_ROOM)
        return short

    def create(self, rid: str, start: int, end: int,
               amounts: dict[Key, int]) -> Decision:
        reasons: list = []
        if end <= start:
            reasons.append(BAD)
        if rid in self.reservations:
            reasons.append(EXISTS)
        short = self._admit(reasons, amounts, start, end) if end > start else []
        if reasons:
            return _refuse(*reasons, shortfalls=short)

        def apply(answer: dict) -> None:
            self.reservations[rid] = Reservation(
                rid, start, end, dict(amounts), answer.get("generation"))
            self.markers.add(rid)
        return Decision(frozenset({CREATED}), apply=apply)

    def replace(self, rid: str, generation_ok: bool, start: int, end: int,
                amounts: dict[Key, int], same_start: bool) -> Decision:
        """PUT: `start` is a slot, or NOW for a start in the past (for an
        active reservation, its stored start given back: `same_start`)."""
        r = self.reservations.get(rid)
        if r is None:
            return _refuse(NOT_FOUND)
        reasons: list = []
        if not generation_ok:
            reasons.append(STALE)
        if r.ended:
            reasons.append(ENDED)
        elif r.status == "active" and not same_start:
            reasons.append(STARTED)
        if end <= start:
            reasons.append(BAD)
        short = []
        if not reasons and r.status == "active" and any(
                amounts.get(key, 0) < n
                for key, n in self.drawing().get(rid, {}).items()):
            # "A change of an active reservation may not make it hold
            # less than it has given out", checked before room is.
            return _refuse(OVERDRAWN)
        if end > start and not reasons:
            short = self._admit(reasons, amounts, start, end, without=rid,
                                checked=self._raised(r, amounts))
        if reasons:
            return _refuse(*reasons, shortfalls=short)

        def apply(answer: dict) -> None:
            r.start, r.end, r.amounts = start, end, dict(amounts)
            r.generation = answer.get("generation")
        return Decision(frozenset({OK}), apply=apply)

    def _raised(self, old: Reservation, amounts: dict[Key, int]):
        """For a change, the slots where room is checked: those where the
        reservation would hold more of a key than it did. A change that
        holds no more anywhere is let through, as a claim that raises no
        usage is, even where an inventory shrank under it. (The doc says
        the new window and amounts are "re-checked"; this reading of it
        is the service's, and the claim rule's.)"""
        every = set(self.instants())
        before = set(range(old.start, old.end))

        def checked(key: Key) -> set:
            return every if amounts[key] > old.amounts.get(key, 0) else every - before
        return checked

    def cancel(self, rid: str) -> Decision:
        r = self.reservations.get(rid)
        if r is None:
            return _refuse(NOT_FOUND)
        if r.status == "active":
            return _refuse(STARTED)

        def apply(_answer: dict) -> None:
            self.release(rid)
            self.reservations.pop(rid)
            self.markers.discard(rid)
        return Decision(frozenset({GONE}), apply=apply)

    def release(self, rid: str) -> None:
        """Remove what `rid` gave out (its drawn allocations and marker
        rows); consumers left with nothing go."""
        for consumer, held in list(self.allocations.items()):
            rps = {rp for rp, _rc in held if self.drawn_from(held, rp) == rid}
            kept = {k: n for k, n in held.items() if k[0] not in rps}
            if kept:
                self.allocations[consumer] = kept
            else:
                self.allocations.pop(consumer)

    def end(self, rid: str) -> Decision:
        r = self.reservations.get(rid)
        if r is None:
            return _refuse(NOT_FOUND)
        if r.status == "pending":
            return _refuse(NOT_STARTED)
        if r.ended:
            return _refuse(ENDED)

        def apply(answer: dict) -> None:
            r.ended = True
            r.generation = answer.get("generation")
            self.release(rid)
        return Decision(frozenset({OK}), apply=apply)

    def short(self, rid: str) -> list[Shortfall]:
        """The reservation's intervals without room, from now on: where
        what is free beside the allocations and the other reservations
        is less than its amount. Consecutive slots with the same free
        room are one interval. An ended reservation is short nowhere."""
        r = self.reservations[rid]
        out: list[Shortfall] = []
        for key in sorted(r.amounts):
            cap, alloc = self.capacity(key), self.allocated(key)
            amount = r.amounts[key]
            last = None
            for k in range(max(r.start, NOW), NOW if r.ended else r.end):
                free = cap - alloc - self.reserved(key, k, without=rid)
                if free >= amount:
                    last = None
                    continue
                if last is not None and out[last].free == free:
                    out[last] = out[last]._replace(end=k + 1)
                else:
                    last = len(out)
                    out.append(Shortfall(*key, k, k + 1, free))
        return out

    # Claims and inventories -------------------------------------------

    def claim(self, consumer: str, amounts: dict[Key, int],
              project: str = "") -> Decision:
        """PUT /allocations/{consumer}: the consumer then holds `amounts`
        (and nothing else), as `project`'s (the reservations' one when
        not given). A provider's amounts that name a marker class are
        drawn from its reservation, which must be active, the project's,
        hold each class there and have that much left to give; drawn
        amounts take no free room. Each amount follows its inventory's
        units; a key whose open usage rises must leave room for the most
        reserved there at any instant from now on. A key whose open usage
        does not rise is let through, over capacity or not."""
        project = project or self.project
        held = self.allocations.get(consumer, {})
        draws: dict[str, str] = {}
        for rp, rc in amounts:
            rid = marker_rid(rc)
            if rid is None:
                continue
            if rid not in self.markers:
                return _refuse(BAD)  # Placement's "No such resource class"
            if draws.setdefault(rp, rid) != rid:
                return _refuse(BAD)  # two reservations on one provider
        for rp in sorted(draws):
            r = self.reservations.get(draws[rp])
            if r is None or r.status != "active":
                return _refuse(NOT_ACTIVE)
            if project != self.project:
                return _refuse(OTHER_PROJECT)
            if any(p == rp and marker_rid(rc) is None and (p, rc) not in r.amounts
                   for p, rc in amounts):
                return _refuse(NOT_HELD)
        for key in sorted(amounts):
            rid = draws.get(key[0])
            if rid is None or marker_rid(key[1]) is not None:
                continue
            if self.drawn(rid, key, without=consumer) + amounts[key] > \
                    self.reservations[rid].amounts[key]:
                return _refuse(OVERDRAWN)
        for key in sorted(amounts):
            rp, rc = key
            if marker_rid(rc) is not None:
                continue  # a marker row needs no inventory, takes no room
            inv = self.inventories[rp][rc]
            if not inv.allows(amounts[key]):
                return _refuse(CLAIM_REFUSED)
            open_claim = 0 if rp in draws else amounts[key]
            held_open = (held.get(key, 0) if self.drawn_from(held, rp) is None
                         else 0)
            if open_claim > held_open:
                after = self.allocated(key) - held_open + open_claim
                if after + self.peak(key) > inv.capacity:
                    refused = _refuse(CLAIM_REFUSED)
                    if after <= inv.capacity:
                        refused.note = "refused for what is reserved ahead"
                    return refused

        def apply(_answer: dict) -> None:
            self.allocations[consumer] = {k: a for k, a in amounts.items() if a}
        return Decision(frozenset({GONE}), apply=apply)

    def unclaim(self, consumer: str) -> Decision:
        if not self.allocations.get(consumer):
            return _refuse(NOT_FOUND)
        return Decision(frozenset({GONE}),
                        apply=lambda _a: self.allocations.pop(consumer))

    def set_inventories(self, rp: str, invs: dict[str, Inventory]) -> Decision:
        """Placement's rule: an inventory may shrink below what is
        allocated or reserved. Nothing is refused; reservations left
        without room become short."""
        def apply(_answer: dict) -> None:
            self.inventories[rp] = dict(invs)
        return Decision(frozenset({OK}), apply=apply)

    def usage(self, rp: str) -> dict[str, int]:
        return {rc: self.used((rp, rc)) for rc in self.inventories[rp]}

    @staticmethod
    def steps(amount_at: Callable[[int], int], first: int, last: int) -> list:
        """An amount over slots [first, last) as consecutive steps
        (first slot, end slot, amount), neighbours differing."""
        out: list = []
        for k in range(first, last):
            amount = amount_at(k)
            if out and out[-1][2] == amount:
                out[-1] = (out[-1][0], k + 1, amount)
            else:
                out.append((k, k + 1, amount))
        return out

    def calendar(self, rp: str, first: int, last: int) -> dict[str, list]:
        """Per class of the provider, what is reserved over slots
        [first, last) as steps."""
        return {rc: self.steps(lambda k, key=(rp, rc): self.reserved(key, k),
                               first, last)
                for rc in sorted(self.inventories[rp])}

    def project_calendar(self, first: int, last: int) -> dict[str, list]:
        """What the project (every reservation here is the test's one
        project's) reserves per class over slots [first, last), summed
        over providers: the classes it reserves there only."""
        out = {}
        for rc in sorted({rc for invs in self.inventories.values() for rc in invs}):
            steps = self.steps(lambda k: sum(
                self.reserved((rp, rc), k) for rp in self.inventories), first, last)
            if any(n for _a, _b, n in steps):
                out[rc] = steps
        return out
