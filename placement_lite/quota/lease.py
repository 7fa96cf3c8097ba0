"""Lease policy for Blazar's external enforcement filter.

Blazar asks before it creates or updates a lease and tells us when one
ends. Each question runs through a chain of filters, in the configured
order, inside one write transaction: the first filter that refuses
decides, and everything earlier filters wrote (budget charges) rolls back
with it. The api layer turns Blazar's bodies into a LeaseRequest and
renders the answers; here are the rules and their words.

Built-in filters:
  max_duration  a lease may last at most lease_max_duration_hours, except
                for projects in lease_exempt_projects
  max_amount    a reservation may ask for at most lease_max_amount[type]
                hosts, instances or floating IPs
  budget        reserved time is a quota resource, lease:<type>:hours
                (e.g. lease:physical:host:hours), limited under the same
                limits API and model as everything else. check-create
                charges amount x duration, check-update the difference,
                on-end refunds what an early end left unused. Every charge
                and refund is a row in the append-only lease ledger.
Custom filters are LeaseFilter classes published under the entry-point
group `placement_lite.lease_filters`, built with (settings); each answers
every question through `check(conn, request, now)`.
"""
from __future__ import annotations

import abc
import datetime as dt
from dataclasses import dataclass
from importlib import metadata
from typing import Callable, Mapping, Optional

from sqlalchemy import func, insert, or_, select
from sqlalchemy.engine import Connection

# Custom filters refuse with lease.LeaseDenied (docs/quota.md): it is
# named here as well as in placement_lite.errors.
from placement_lite.errors import LeaseDenied, MalformedLease
from placement_lite.db import tables as t
from placement_lite.ledger import consumers
from placement_lite.quota import enforce, models, projects

ENTRY_POINT_GROUP = "placement_lite.lease_filters"
# Ledger entries are amount x seconds in a 64-bit column.
MAX_UNIT_SECONDS = 2 ** 62
MAX_TEXT = 255
DEFAULT_CHAIN = ("max_duration", "max_amount", "budget")

# How a person calls one unit of each Blazar resource type.
UNIT_NAMES = {
    "physical:host": ("host", "hosts"),
    "virtual:instance": ("instance", "instances"),
    "flavor:instance": ("instance", "instances"),
    "virtual:floatingip": ("floating IP", "floating IPs"),
}
# Short spellings accepted in lease_max_amount.
ALIASES = {"host": "physical:host", "hosts": "physical:host",
           "instance": "virtual:instance", "instances": "virtual:instance",
           "floatingip": "virtual:floatingip", "floatingips": "virtual:floatingip",
           "floating_ip": "virtual:floatingip"}


def units(resource_type: str, amount: float) -> str:
    one, many = UNIT_NAMES.get(resource_type, (resource_type, resource_type))
    return f"{fmt(amount)} {one if amount == 1 else many}"


def unit_name(resource_type: str) -> str:
    return UNIT_NAMES.get(resource_type, (resource_type,))[0]


def fmt(number: float) -> str:
    number = round(float(number), 2)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def hours_text(hours: float) -> str:
    return f"{fmt(hours)} hour{'' if hours == 1 else 's'}"


# What Blazar asks about -----------------------------------------------------

@dataclass
class Reservation:
    resource_type: str
    amount: int


@dataclass
class Lease:
    id: Optional[str]
    name: Optional[str]
    start: dt.datetime
    end: dt.datetime
    reservations: list[Reservation]

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600.0

    def amounts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.reservations:
            out[r.resource_type] = out.get(r.resource_type, 0) + r.amount
        return out


EVENTS = ("create", "update", "end")


@dataclass
class LeaseRequest:
    event: str  # one of EVENTS
    project_id: str
    user_id: Optional[str]
    lease: Lease
    current: Optional[Lease] = None


def check_lease(lease: Lease, where: str = "lease") -> Lease:
    """The rules a lease's shape cannot say; `where` names it in errors."""
    if lease.end < lease.start:
        raise MalformedLease(f"{where}.end_date is before its start_date.")
    total = (sum(r.amount for r in lease.reservations)
             * (lease.end - lease.start).total_seconds())
    if total > MAX_UNIT_SECONDS:
        raise MalformedLease(f"{where} reserves more than can be accounted "
                             "for; check its dates and amounts.")
    return lease


# Filters -------------------------------------------------------------------

class LeaseFilter(abc.ABC):
    """One link of the chain, built with (settings). `check` answers every
    question (req.event: create, update or end): it refuses by raising
    LeaseDenied, and may write in the chain's transaction."""
    name = ""

    def __init__(self, settings):
        self.settings = settings

    @abc.abstractmethod
    def check(self, conn: Connection, req: LeaseRequest, now: dt.datetime
              ) -> None:
        """Refuse by raising LeaseDenied; return to let the chain go on."""


class MaxDuration(LeaseFilter):
    name = "max_duration"

    def check(self, conn, req, now):
        limit = self.settings.lease_max_duration_hours
        if (req.event == "end" or limit is None
                or req.project_id in self.settings.lease_exempt_projects):
            return
        if req.lease.hours > limit:
            raise LeaseDenied(
                f"Your lease exceeds the maximum length of {hours_text(limit)}."
                f" It lasts {hours_text(req.lease.hours)}: shorten it, or ask "
                "an administrator to exempt your project.")


class MaxAmount(LeaseFilter):
    name = "max_amount"

    def __init__(self, settings):
        super().__init__(settings)
        self.maximum = {ALIASES.get(k, k): int(v)
                        for k, v in (settings.lease_max_amount or {}).items()}

    def check(self, conn, req, now):
        if req.event == "end":
            return
        for r in req.lease.reservations:
            most = self.maximum.get(r.resource_type)
            if most is not None and r.amount > most:
                raise LeaseDenied(
                    f"Your lease asks for {units(r.resource_type, r.amount)} in "
                    f"one reservation; at most {units(r.resource_type, most)} "
                    "may be reserved at once.")


def budget_name(resource_type: str) -> str:
    return f"lease:{resource_type}:hours"


class Budget(LeaseFilter):
    """Reserved time against the lease:<type>:hours limits, decided by the
    process's quota enforcer under the deployment's model."""
    name = "budget"

    def __init__(self, settings, enforcer: enforce.Enforcer):
        super().__init__(settings)
        self.enforcer = enforcer

    def check(self, conn, req, now):
        if req.event == "create":
            self._charge(conn, req, self._hours(req.lease))
        elif req.event == "update":
            new, old = self._hours(req.lease), self._hours(req.current)
            deltas = {rt: new.get(rt, 0) - old.get(rt, 0)
                      for rt in set(new) | set(old)}
            self._charge(conn, req, {k: v for k, v in deltas.items() if v})
        else:
            self._refund_unused(conn, req, now)

    def _charge(self, conn, req: LeaseRequest,
                deltas: Mapping[str, float]) -> None:
        """Check the positive deltas against the limits, then record all."""
        if not deltas:
            return
        consumers.ensure_project(conn, req.project_id)
        targets = self.enforcer.locked_targets(conn, [req.project_id])
        wanted = {budget_name(rt): hours for rt, hours in deltas.items()
                  if hours > 0}
        if wanted:
            over = self.enforcer.over_if_added(conn, targets, wanted)
            if over:
                raise LeaseDenied(self._refusal(over))
        project_id = targets[0].id
        rows = [{"project_id": project_id, "resource_name": budget_name(rt),
                 "lease_id": req.lease.id, "lease_name": req.lease.name,
                 "event": req.event, "unit_seconds": round(hours * 3600),
                 "reason": self._reason(req.event, rt, hours)}
                for rt, hours in deltas.items() if round(hours * 3600) != 0]
        if rows:
            conn.execute(insert(t.lease_ledger), rows)

    @staticmethod
    def _reason(event: str, resource_type: str, hours: float) -> str:
        verb = "charged" if hours > 0 else "refunded"
        return (f"{event}: {verb} {fmt(abs(hours))} "
                f"{unit_name(resource_type)}-hours")

    @staticmethod
    def _refusal(over: list[models.Over]) -> str:
        parts = []
        for o in over:
            rtype = o.resource_name[len("lease:"):-len(":hours")]
            unit = unit_name(rtype)
            left = max(0.0, o.limit - o.current_usage)
            whose = (f"the projects under {o.project_id} together have"
                     if o.tree else f"project {o.project_id} has")
            parts.append(
                f"Your lease needs {fmt(o.delta)} {unit}-hours, but {whose} "
                f"only {fmt(left)} of {fmt(o.limit)} {unit}-hours left.")
        return " ".join(parts) + (" Shorten the lease, reserve less, or ask "
                                  "for a larger allowance.")

    @staticmethod
    def _hours(lease: Lease) -> dict[str, float]:
        return {rt: amount * lease.hours for rt, amount in lease.amounts().items()}

    def _refund_unused(self, conn, req: LeaseRequest, now) -> None:
        if now >= req.lease.end:
            return
        remaining = (req.lease.end - max(now, req.lease.start)).total_seconds()
        refunds = {}
        project = projects.find(conn, req.project_id)
        if project is None:
            return
        for rt, amount in req.lease.amounts().items():
            # Never refund more than this lease was charged, net.
            charged = self._net(conn, project.id, budget_name(rt), req.lease)
            refund = min(amount * remaining, charged)
            if refund > 0:
                refunds[rt] = -refund / 3600.0
        self._charge(conn, req, refunds)

    @staticmethod
    def _net(conn, project_id: int, name: str, lease: Lease) -> int:
        lg = t.lease_ledger
        match = []
        if lease.id is not None:
            match.append(lg.c.lease_id == lease.id)
        if lease.name is not None:
            # check-create carries no lease id yet: its charge has the name.
            match.append((lg.c.lease_id.is_(None)) & (lg.c.lease_name == lease.name))
        if not match:
            return 0
        return int(conn.scalar(select(func.coalesce(func.sum(lg.c.unit_seconds), 0))
                               .where(lg.c.project_id == project_id,
                                      lg.c.resource_name == name,
                                      or_(*match))) or 0)


# The built-ins by name, each built from (settings, the process's enforcer).
BUILT_IN: dict[str, Callable[..., LeaseFilter]] = {
    MaxDuration.name: lambda settings, _enforcer: MaxDuration(settings),
    MaxAmount.name: lambda settings, _enforcer: MaxAmount(settings),
    Budget.name: Budget,
}


def load_filter(name: str, settings, enforcer: enforce.Enforcer) -> LeaseFilter:
    if name in BUILT_IN:
        return BUILT_IN[name](settings, enforcer)
    found = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
             if ep.name == name]
    if not found:
        raise ValueError(
            f"unknown lease policy filter {name!r}: not one of "
            f"{', '.join(sorted(BUILT_IN))} and no entry point of that name in "
            f"group {ENTRY_POINT_GROUP}")
    return found[0].load()(settings)


class LeasePolicy:
    """The configured chain, run inside the caller's write transaction."""

    def __init__(self, settings, enforcer: enforce.Enforcer,
                 clock: Callable[[], dt.datetime] = None):
        names = tuple(settings.lease_policy_filters) or DEFAULT_CHAIN
        self.filters = [load_filter(n, settings, enforcer) for n in names]
        self.clock = clock or (lambda: dt.datetime.now(dt.timezone.utc)
                               .replace(tzinfo=None))

    def run(self, conn: Connection, req: LeaseRequest) -> None:
        now = self.clock()
        for f in self.filters:
            f.check(conn, req, now)


# The ledger, for audit -------------------------------------------------------

@dataclass(frozen=True)
class LedgerEntry:
    id: int
    resource_name: str
    lease_id: Optional[str]
    lease_name: Optional[str]
    event: str
    hours: float
    reason: Optional[str]
    created_at: Optional[dt.datetime]


def ledger(conn: Connection, project_external_id: str) -> list[LedgerEntry]:
    """Every ledger entry of a project, oldest first."""
    project = projects.get(conn, project_external_id)
    lg = t.lease_ledger
    rows = conn.execute(select(lg).where(lg.c.project_id == project.id)
                        .order_by(lg.c.id))
    return [LedgerEntry(r.id, r.resource_name, r.lease_id, r.lease_name,
                        r.event, r.unit_seconds / 3600.0, r.reason, r.created_at)
            for r in rows]


def balance(entries: list[LedgerEntry]) -> dict[str, float]:
    """Hours charged net of refunds, per resource."""
    out: dict[str, float] = {}
    for e in entries:
        out[e.resource_name] = out.get(e.resource_name, 0) + e.hours
    return out
