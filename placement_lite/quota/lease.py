"""Lease policy for Blazar's external enforcement filter.

Blazar asks before it creates or updates a lease and tells us when one
ends. Each question runs through a chain of filters, in the configured
order, inside one write transaction: the first filter that refuses
decides, and everything earlier filters wrote (budget charges) rolls back
with it.

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
Custom filters are classes published under the entry-point group
`placement_lite.lease_filters`, built with (settings), offering the same
three methods as the built-ins.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from importlib import metadata
from typing import Callable, Mapping, Optional

from sqlalchemy import func, insert, or_, select
from sqlalchemy.engine import Connection

from placement_lite.db import tables as t
from placement_lite.ledger import consumers, errors
from placement_lite.quota import enforce, models, projects

ENTRY_POINT_GROUP = "placement_lite.lease_filters"
MAX_AMOUNT = 2147483647
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


class LeaseDenied(errors.Forbidden):
    """A filter refuses the lease; the detail is shown to the user."""
    code = "placement.lease.denied"


class MalformedLease(errors.Invalid):
    code = "placement.lease.malformed"


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


# Parsing Blazar's bodies ---------------------------------------------------

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


@dataclass
class LeaseRequest:
    event: str  # create | update | end
    project_id: str
    user_id: Optional[str]
    lease: Lease
    current: Optional[Lease] = None


def _date(value, where: str) -> dt.datetime:
    if not isinstance(value, str) or not value:
        raise MalformedLease(f"{where} must be an ISO 8601 date and time, "
                             f"like 2030-01-01T12:00:00.")
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise MalformedLease(f"{where} is not a date and time: {value!r}; use "
                             "ISO 8601, like 2030-01-01T12:00:00.")
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when


def _count(value, where: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise MalformedLease(f"{where} must be a whole number, not {value!r}.")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise MalformedLease(f"{where} must be a whole number, not {value!r}.")
    if number < 0:
        raise MalformedLease(f"{where} must not be negative.")
    if number > MAX_AMOUNT:
        raise MalformedLease(f"{where} must be at most {MAX_AMOUNT}.")
    return number


def _reservation(raw, where: str) -> Reservation:
    if not isinstance(raw, dict):
        raise MalformedLease(f"{where} must be an object.")
    rtype = raw.get("resource_type")
    if not isinstance(rtype, str) or not rtype:
        raise MalformedLease(f"{where}.resource_type is missing.")
    allocated = raw.get("allocations")
    if allocated is not None and not isinstance(allocated, list):
        raise MalformedLease(f"{where}.allocations must be a list.")
    # What Blazar actually holds for the lease, else what it asks for.
    amount = len(allocated) if allocated else None
    for key in ("amount", "max", "min"):
        if amount is None:
            amount = _count(raw.get(key), f"{where}.{key}")
    return Reservation(rtype, 1 if amount is None else amount)


def parse_lease(raw, where: str = "lease") -> Lease:
    if not isinstance(raw, dict):
        raise MalformedLease(f"'{where}' must be an object describing the lease.")
    start = _date(raw.get("start_date"), f"{where}.start_date")
    end = _date(raw.get("end_date"), f"{where}.end_date")
    if end < start:
        raise MalformedLease(f"{where}.end_date is before its start_date.")
    reservations = raw.get("reservations", [])
    if not isinstance(reservations, list):
        raise MalformedLease(f"{where}.reservations must be a list.")
    ident = raw.get("id")
    name = raw.get("name")
    for key, value in (("id", ident), ("name", name)):
        if value is not None and len(str(value)) > MAX_TEXT:
            raise MalformedLease(
                f"{where}.{key} is longer than {MAX_TEXT} characters.")
    lease = Lease(id=str(ident) if ident is not None else None,
                  name=str(name) if name is not None else None,
                  start=start, end=end,
                  reservations=[_reservation(r, f"{where}.reservations[{i}]")
                                for i, r in enumerate(reservations)])
    total = (sum(r.amount for r in lease.reservations)
             * (end - start).total_seconds())
    if total > MAX_UNIT_SECONDS:
        raise MalformedLease(f"{where} reserves more than can be accounted "
                             "for; check its dates and amounts.")
    return lease


def parse_request(event: str, body) -> LeaseRequest:
    if not isinstance(body, dict):
        raise MalformedLease("The body must be a JSON object with 'context' "
                             "and 'lease'.")
    context = body.get("context")
    if not isinstance(context, dict):
        raise MalformedLease("'context' must be an object with the project_id "
                             "and user_id of the lease.")
    lease_raw = body.get("lease")
    project_id = context.get("project_id")
    if project_id is None and isinstance(lease_raw, dict):
        project_id = lease_raw.get("project_id")
    if not isinstance(project_id, str) or not project_id:
        raise MalformedLease("context.project_id is missing.")
    if len(project_id) > MAX_TEXT:
        raise MalformedLease(
            f"context.project_id is longer than {MAX_TEXT} characters.")
    user_id = context.get("user_id")
    current = None
    if event == "update":
        if "current_lease" not in body:
            raise MalformedLease("check-update needs 'current_lease' as well "
                                 "as 'lease'.")
        current = parse_lease(body["current_lease"], "current_lease")
    lease = parse_lease(lease_raw)
    if current is not None and lease.id is None:
        lease.id = current.id
    return LeaseRequest(event, project_id,
                        str(user_id) if user_id is not None else None,
                        lease, current)


# Filters -------------------------------------------------------------------

class LeaseFilter:
    """Base: allow everything. Refuse by raising LeaseDenied."""
    name = "allow"

    def __init__(self, settings):
        self.settings = settings

    def check_create(self, conn: Connection, req: LeaseRequest, now) -> None:
        pass

    def check_update(self, conn: Connection, req: LeaseRequest, now) -> None:
        pass

    def on_end(self, conn: Connection, req: LeaseRequest, now) -> None:
        pass


class MaxDuration(LeaseFilter):
    name = "max_duration"

    def _check(self, req: LeaseRequest) -> None:
        limit = self.settings.lease_max_duration_hours
        if limit is None or req.project_id in self.settings.lease_exempt_projects:
            return
        if req.lease.hours > limit:
            raise LeaseDenied(
                f"Your lease exceeds the maximum length of {hours_text(limit)}."
                f" It lasts {hours_text(req.lease.hours)}: shorten it, or ask "
                "an administrator to exempt your project.")

    def check_create(self, conn, req, now):
        self._check(req)

    def check_update(self, conn, req, now):
        self._check(req)


class MaxAmount(LeaseFilter):
    name = "max_amount"

    def __init__(self, settings):
        super().__init__(settings)
        self.maximum = {ALIASES.get(k, k): int(v)
                        for k, v in (settings.lease_max_amount or {}).items()}

    def _check(self, req: LeaseRequest) -> None:
        for r in req.lease.reservations:
            most = self.maximum.get(r.resource_type)
            if most is not None and r.amount > most:
                raise LeaseDenied(
                    f"Your lease asks for {units(r.resource_type, r.amount)} in "
                    f"one reservation; at most {units(r.resource_type, most)} "
                    "may be reserved at once.")

    def check_create(self, conn, req, now):
        self._check(req)

    def check_update(self, conn, req, now):
        self._check(req)


def budget_name(resource_type: str) -> str:
    return f"lease:{resource_type}:hours"


class Budget(LeaseFilter):
    name = "budget"

    def __init__(self, settings):
        super().__init__(settings)
        self.enforcer = enforce.Enforcer(settings)

    def _charge(self, conn, req: LeaseRequest, deltas: Mapping[str, float],
                event: str) -> None:
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
                raise LeaseDenied(self._refusal(over, deltas))
        project_id = targets[0].id
        rows = [{"project_id": project_id, "resource_name": budget_name(rt),
                 "lease_id": req.lease.id, "lease_name": req.lease.name,
                 "event": event, "unit_seconds": round(hours * 3600),
                 "reason": reason}
                for rt, (hours, reason) in self._reasons(req, deltas).items()
                if round(hours * 3600) != 0]
        if rows:
            conn.execute(insert(t.lease_ledger), rows)

    def _reasons(self, req, deltas):
        out = {}
        for rt, hours in deltas.items():
            verb = "charged" if hours > 0 else "refunded"
            out[rt] = (hours, f"{req.event}: {verb} {fmt(abs(hours))} "
                              f"{unit_name(rt)}-hours")
        return out

    @staticmethod
    def _refusal(over: list[models.Over], deltas) -> str:
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

    def check_create(self, conn, req, now):
        self._charge(conn, req, self._hours(req.lease), "create")

    def check_update(self, conn, req, now):
        new, old = self._hours(req.lease), self._hours(req.current)
        deltas = {rt: new.get(rt, 0) - old.get(rt, 0) for rt in set(new) | set(old)}
        self._charge(conn, req, {k: v for k, v in deltas.items() if v}, "update")

    def on_end(self, conn, req, now):
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
        self._charge(conn, req, refunds, "end")

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


BUILT_IN = {f.name: f for f in (MaxDuration, MaxAmount, Budget)}


def load_filter(name: str, settings) -> LeaseFilter:
    if name in BUILT_IN:
        return BUILT_IN[name](settings)
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

    def __init__(self, settings,
                 clock: Callable[[], dt.datetime] = None):
        names = tuple(settings.lease_policy_filters) or DEFAULT_CHAIN
        self.filters = [load_filter(n, settings) for n in names]
        self.clock = clock or (lambda: dt.datetime.now(dt.timezone.utc)
                               .replace(tzinfo=None))

    def run(self, conn: Connection, req: LeaseRequest) -> None:
        now = self.clock()
        method = {"create": "check_create", "update": "check_update",
                  "end": "on_end"}[req.event]
        for f in self.filters:
            getattr(f, method)(conn, req, now)


def ledger(conn: Connection, project_external_id: str) -> dict:
    """Every ledger entry of a project and its balance per resource."""
    project = projects.get(conn, project_external_id)
    lg = t.lease_ledger
    rows = conn.execute(select(lg).where(lg.c.project_id == project.id)
                        .order_by(lg.c.id)).mappings().all()
    balance: dict[str, float] = {}
    entries = []
    for r in rows:
        hours = r["unit_seconds"] / 3600.0
        balance[r["resource_name"]] = balance.get(r["resource_name"], 0) + hours
        entries.append({"id": r["id"], "resource_name": r["resource_name"],
                        "lease_id": r["lease_id"], "lease_name": r["lease_name"],
                        "event": r["event"], "hours": round(hours, 6),
                        "reason": r["reason"],
                        "created_at": r["created_at"].isoformat()
                        if r["created_at"] else None})
    return {"project_id": project_external_id, "entries": entries,
            "balance": {k: round(v, 6) for k, v in sorted(balance.items())}}
