"""Quota for reservations: the check a reservation write runs, and the
lease hours it charges.

The reservation writes of ledger/reservations.py take it among their
`checks`: the api layer passes `reserved.check_for(services.enforcer)` (a
ReservationCheck; not the Enforcer itself, whose claim check reads no
reservations again after the write). In each write's transaction, on its
one connection, the ledger calls:

    after = check.before_write(conn, {project_id, ...})  # step 0
    ... lock the reservation row, then its providers; check room; write ...
    after(conn)                                          # step 4
    after.charge(conn, project_id, reservation_uuid, old, new, now=now)

- `before_write` (phase one) follows ledger.allocations.ClaimCheck's
  protocol. It locks the project's tree, as a claim's quota check does,
  and reads the limits, the usage and what the tree has reserved. Call it
  before locking the reservation row or any provider. Claims take the
  tree lock before their providers too, so a claim and a reservation
  never wait for each other's locks in opposite orders.
- `after(conn)` (phase two) reads the tree's reservations again. It
  raises errors.OverLimit (403 placement.quota.over_limit) if the write
  takes the project, or under strict-two-level its tree, over a limit at
  some instant from now on (booked.py has the rule). The detail names the
  project, the resource, the limit, what is in use, what is reserved and
  the first instant that is over. With enforcement off, it checks nothing.
- `after.charge` writes the lease hours to the append-only lease ledger,
  against the budgets `lease:<CLASS>:hours`. `old` and `new` are the
  reservation before and after the write, each a Held (window and amounts
  per class, or any (start, end, amounts) triple) or None. Held.of builds
  one from Placement-shaped allocations. `event` names the ledger entry
  (by default reserve, change, end or cancel, as the change reads). Per class, the charge is the amount times the part of the
  window from now on, new less old:
    * a new reservation is charged in full;
    * a change is charged (or refunded) the difference from now on;
    * an early end (new end = now) or a cancel (new None) refunds what
      was left.
  Time already past is never charged again. With enforcement on, a charge
  that takes a budget over its limit raises OverLimit. The check uses
  what phase one read, so it costs no statement. Refunds are never
  refused. With enforcement off, the ledger still records the charge,
  because it is the account of what was reserved.
- `charge(conn, enforcer, project_id, ...)` does the same without a check
  object, for writes that need no check at every instant, such as an end
  or a cancel. A refund takes no lock. A charge that grows a budget runs
  phase one itself first.

`now` is the database's (db/clock.py): pass the instant the write acted
on, or leave it out and it is read.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple, Optional

from sqlalchemy import bindparam, insert, select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import consumers
from placement_lite.quota import enforce, lease


class Held(NamedTuple):
    """A reservation as lease hours see it: its window [start, end) in
    seconds since the epoch, and its amounts per class, summed over its
    providers."""
    start: int
    end: int
    amounts: Mapping[str, int]

    @classmethod
    def of(cls, start: int, end: int, allocations: Mapping) -> "Held":
        """From allocations in Placement's shape, {provider: {"resources":
        {class: amount}}}, or without the "resources" level."""
        amounts: dict[str, int] = defaultdict(int)
        for held in allocations.values():
            for rc, amount in held.get("resources", held).items():
                amounts[rc] += int(amount)
        return cls(int(start), int(end), dict(amounts))


def unit_seconds(old: Optional[Held], new: Optional[Held], now: int
                 ) -> dict[str, int]:
    """Per class, amount x seconds to charge (below zero: to refund) when
    a reservation goes from `old` to `new` at `now`. Each counts only the
    part of its window from now on: what is past was charged already."""
    out: dict[str, int] = defaultdict(int)
    for held, sign in ((new, 1), (old, -1)):
        if held is None:
            continue
        seconds = max(0, held.end - max(held.start, now))
        for rc, amount in held.amounts.items():
            out[rc] += sign * amount * seconds
    return {rc: v for rc, v in out.items() if v}


def event_of(old: Optional[Held], new: Optional[Held], now: int) -> str:
    """What the lease ledger calls the write."""
    if old is None:
        return "reserve"
    if new is None:
        return "cancel"
    if new.end <= now < old.end:
        return "end"
    return "change"


class ReservationCheck:
    """The quota check of reservation writes, in ClaimCheck's protocol:
    before_write(conn, project_ids) returns phase two (a Decision). It
    holds no per-write state, so threads share it."""

    def __init__(self, enforcer: enforce.Enforcer):
        self.enforcer = enforcer

    def before_write(self, conn: Connection, project_ids: Iterable[str]
                     ) -> "Decision":
        return Decision(self.enforcer.guard(conn, project_ids, reserves=True))


def check_for(enforcer: enforce.Enforcer) -> ReservationCheck:
    return ReservationCheck(enforcer)


@dataclass(frozen=True)
class Decision:
    """Phase two of a reservation write's quota check, and its charge."""
    after: enforce.AfterWrite

    def __call__(self, conn: Connection) -> None:
        self.after(conn)

    def charge(self, conn: Connection, project_id: str, reservation: str,
               old: Optional[Held], new: Optional[Held], *,
               now: Optional[int] = None, event: Optional[str] = None
               ) -> dict[str, int]:
        """Charge the write's lease hours; returns the unit-seconds per
        class (below zero: refunded)."""
        if project_id not in self.after.project_ids:
            raise ValueError(f"this decision was taken for "
                             f"{', '.join(self.after.project_ids) or 'nobody'}"
                             f", not for project {project_id}")
        return _charge(conn, self.after, project_id, reservation, _held(old),
                       _held(new), now, event)


def charge(conn: Connection, enforcer: enforce.Enforcer, project_id: str,
           reservation: str, old: Optional[Held], new: Optional[Held], *,
           now: Optional[int] = None, event: Optional[str] = None
           ) -> dict[str, int]:
    """Decision.charge without a decision taken before the write: phase
    one runs here, and only when the charge grows a budget."""
    now = clock.now(conn) if now is None else now
    old, new = _held(old), _held(new)
    deltas = unit_seconds(old, new, now)
    after = None
    if deltas:
        consumers.ensure_project(conn, project_id)
    if any(v > 0 for v in deltas.values()):
        after = enforcer.guard(conn, [project_id], reserves=True)
    return _charge(conn, after, project_id, reservation, old, new, now, event)


def _held(held) -> Optional[Held]:
    """A Held from any (start, end, amounts) triple: the ledger passes
    plain tuples."""
    return None if held is None else Held(*held)


def _charge(conn: Connection, after: Optional[enforce.AfterWrite],
            project_id: str, reservation: str, old: Optional[Held],
            new: Optional[Held], now: Optional[int], event: Optional[str]
            ) -> dict[str, int]:
    now = clock.now(conn) if now is None else now
    deltas = unit_seconds(old, new, now)
    if not deltas:
        return {}
    if any(abs(v) > lease.MAX_UNIT_SECONDS for v in deltas.values()):
        raise errors.MalformedLease(
            f"Reservation {reservation} holds more amount-time than the "
            "lease-hours ledger can account for; shorten it or reserve less.")
    growing = {lease.budget_name(rc): v / 3600.0
               for rc, v in deltas.items() if v > 0}
    if growing and after is not None and after.model is not None:
        enforce.refuse(after.model.over_baseline_with(after.baseline, growing,
                                                      project_id))
    event = event or event_of(old, new, now)
    # The project's row exists (the reservation's write made it): its id
    # is found by the insert itself, not by a statement of its own.
    conn.execute(_RECORD, [
        {"project_ext": project_id, "resource_name": lease.budget_name(rc),
         "lease_id": reservation, "lease_name": None, "event": event,
         "unit_seconds": v, "reason": _reason(reservation, event, rc, v)}
        for rc, v in sorted(deltas.items())])
    return deltas


_RECORD = insert(t.lease_ledger).values(project_id=select(t.projects.c.id).where(
    t.projects.c.external_id == bindparam("project_ext")).scalar_subquery())


def _reason(reservation: str, event: str, rc: str, seconds: int) -> str:
    verb = "charged" if seconds > 0 else "refunded"
    return (f"reservation {reservation} {event}: {verb} "
            f"{lease.fmt(abs(seconds) / 3600.0)} {rc}-hours")
