"""What projects have reserved over time: quota at every instant.

A reservation holds its amounts over [start, end). For quota, what a
project has reserved of a class at an instant t is the sum of the amounts
of its reservations whose windows contain t, over all providers. While
enforcement is on, a project's limit (and under strict-two-level, its
tree's) must hold at every instant from now on:

    used(project, c) + reserved(project, c, t) <= limit(project, c)

A write is judged the way claims always have been, but instant by
instant. It is refused if, at some t >= now, the total is over the limit
and the write raised the total there. A claim raises it at every instant,
because an allocation has no end. So a claim must leave room for the most
the project has reserved at any instant from now on. A reservation raises
the total only inside its window. Without reservations the only instant
is now, and the check is the check claims have always had.

The quota check reads these windows with the trees locked (enforce.py).
No other writer in the tree can change them before the decision commits.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import timeline
from placement_lite.quota import limits as lim
from placement_lite.quota import usage

# {class name: {project id: ((start, end, amount), ...)}}
Windows = Mapping[str, Mapping[int, tuple[timeline.Window, ...]]]


@dataclass(frozen=True)
class Booked:
    """The windows of reservations that end after `now`, per class and
    project. `now` is the database's, as the read saw it (None: no window
    was read, so no instant was needed)."""
    now: Optional[int] = None
    windows: Windows = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.windows

    def of(self, name: str, aliases: Mapping[str, str]
           ) -> Mapping[int, tuple[timeline.Window, ...]]:
        """The windows that count for a quota name (a class:, or a name
        that aliases one), per project id."""
        src = usage.source(name, aliases)
        if src is None or src[0] != "class":
            return {}
        return self.windows.get(src[1], {})

    def names(self) -> set[str]:
        return {f"class:{c}" for c in self.windows}


NONE = Booked()

_R, _A, _RC = t.reservations, t.reservation_amounts, t.resource_classes
# Statements built once per dialect (and service type): every enforced
# claim sends one, so it should cost no compiling.
_READS: dict[str, object] = {}
_SCOPES: dict[tuple[str, str], object] = {}


def _read_query(dialect: str):
    """Built once per dialect: reservations with amounts that have not
    ended, grouped per project, class and window, and the database's now
    (a constant column, so any row carries it)."""
    if dialect not in _READS:
        now = clock.now_expr(dialect)
        _READS[dialect] = (
            select(_R.c.project_id, _RC.c.name, _R.c.start_at, _R.c.end_at,
                   func.sum(_A.c.amount), now)
            .select_from(_R.join(_A, _A.c.reservation_id == _R.c.id)
                         .join(_RC, _RC.c.id == _A.c.resource_class_id))
            .where(_R.c.project_id.in_(bindparam("ids", expanding=True)),
                   _R.c.end_at > now)
            .group_by(_R.c.project_id, _RC.c.name, _R.c.start_at, _R.c.end_at))
    return _READS[dialect]


def read(conn: Connection, project_ids: Iterable[Optional[int]]) -> Booked:
    """What these projects have reserved, from now on: one SELECT."""
    ids = sorted({p for p in project_ids if p is not None})
    if not ids:
        return NONE
    found: dict = defaultdict(lambda: defaultdict(list))
    now = None
    for pid, cls, start, end, amount, now_ in conn.execute(
            _read_query(conn.dialect.name), {"ids": ids}):
        now = int(now_)
        if amount:
            found[cls][pid].append((int(start), int(end), int(amount)))
    return Booked(now, {c: {p: tuple(w) for p, w in by.items()}
                        for c, by in found.items()})


def scope(conn: Connection, service_type: str, region_id: Optional[str],
          project_ids: Iterable[Optional[int]]
          ) -> tuple[Optional[tuple[str, str]], Optional[bool]]:
    """The limits' scope (as limits.resolve_scope finds it) and, in the
    same round trip, whether any of these projects holds a reservation
    that has not ended. Returns (scope, booked). booked is None when it
    was not asked (no project) or no scope row came back to say."""
    ids = sorted({p for p in project_ids if p is not None})
    if not ids:
        return lim.resolve_scope(conn, service_type, region_id), None
    key = (conn.dialect.name, service_type)
    if key not in _SCOPES:
        _SCOPES[key] = lim.scope_query(service_type).add_columns(
            select(_R.c.id).where(
                _R.c.project_id.in_(bindparam("ids", expanding=True)),
                _R.c.end_at > clock.now_expr(key[0])).exists())
    row = conn.execute(_SCOPES[key], {"ids": ids}).first()
    if row is None:
        return None, None
    return (row[0], lim.region_key(region_id)), bool(row[1])


def matters(names: Iterable[str], aliases: Mapping[str, str],
            unregistered_is_zero: bool) -> bool:
    """Can a reservation bear on a decision about these names? Only
    classes are reserved; with unregistered resources at zero, any class
    a reservation holds is limited."""
    return unregistered_is_zero or any(
        (usage.source(n, aliases) or ("",))[0] == "class" for n in names)


# Instants as the API and every message writes them.
iso = timeline.iso


# Judging at every instant ----------------------------------------------------

# check(target, name, used, added) -> the model's Over entries for one
# target and name, given usage and what the write adds, per project id.
Check = Callable[[object, str, Mapping, Mapping], list]


def judge(targets: list, names: Iterable[str], check: Check, *,
          used_before: Mapping[str, Mapping[int, float]],
          used_after: Mapping[str, Mapping[int, float]],
          before: Booked, after: Booked,
          aliases: Mapping[str, str], grown_only: bool = True) -> list:
    """The Over entries of a write, judged at every instant from now on.

    At an instant t, a project's total is its usage plus what it has
    reserved at t, before the write and after it. The model's check is
    asked at each instant where the write can first go over: now, where
    a window of `after` starts, and where a window of `before` ends.
    Between two such instants neither the total after the write nor the
    write's increase can grow. An entry is kept where the write raised
    the total (delta > 0; any, without `grown_only`). It names the first
    such instant (`at`), and splits what was there before into usage
    (`current_usage`) and what was reserved (`reserved`)."""
    now = max((b.now for b in (before, after) if b.now is not None), default=0)
    over: dict[tuple, object] = {}
    for target in targets:
        for name in sorted(names):
            wb = before.of(name, aliases) if before.windows else {}
            wa = after.of(name, aliases) if after.windows else {}
            ub, ua = used_before.get(name, {}), used_after.get(name, {})
            if (wb or wa) and not _may_exceed(check, target, name, ua, wa, now):
                continue
            for at, rb, used, added in _moments(ub, ua, wb, wa, now):
                for o in check(target, name, used, added):
                    key = (o.resource_name, o.project_id, o.tree)
                    if (grown_only and o.delta <= 0) or key in over:
                        continue
                    if at is not None:
                        scope = target.tree if o.tree else [target.id]
                        o.reserved = sum(rb.get(pid, 0) for pid in scope)
                        o.current_usage -= o.reserved
                        o.at = at
                    over[key] = o
    return list(over.values())


def judge_added(targets: list, deltas: Mapping[str, float], check: Check, *,
                used: Mapping[str, Mapping[int, float]], held: Booked,
                aliases: Mapping[str, str]) -> list:
    """judge for a quota check, which writes nothing: each target's own
    usage grows by `deltas`, at every instant, beside what is reserved."""
    over: dict[tuple, object] = {}
    for target in targets:
        after = {n: {**used.get(n, {}),
                     target.id: used.get(n, {}).get(target.id, 0) + d}
                 for n, d in deltas.items()}
        for o in judge([target], deltas, check, used_before=used,
                       used_after=after, before=held, after=held,
                       aliases=aliases, grown_only=False):
            over.setdefault((o.resource_name, o.project_id, o.tree), o)
    return list(over.values())


def _may_exceed(check: Check, target, name: str, ua, wa, now: int) -> bool:
    """Could the total after the write exceed a limit at any instant? A
    model judges totals (usage plus what is added), and more never fits
    where less did not: so if each project's most at any instant, taken
    all at once, is within the limits, every instant is. Most writes pass
    this way without a walk through the instants."""
    most = {pid: ua.get(pid, 0) + _peak_after(wa.get(pid, ()), now)
            for pid in set(ua) | set(wa)}
    return bool(check(target, name, {}, most))


def _peak_after(windows, now: int) -> int:
    """timeline.peak_after, without building the steps: a claim in a
    project with many reservations asks it of every one of them."""
    changes = sorted([(max(s, now), a) for s, e, a in windows if e > now]
                     + [(e, -a) for _s, e, a in windows if e > now])
    # At one instant, ends sort before starts: windows are half-open.
    level = most = 0
    for _at, change in changes:
        level += change
        most = max(most, level)
    return most


def _moments(ub, ua, wb, wa, now):
    """(instant, reserved before, total before, what the write adds), per
    project id, at each instant where the write can first go over; one
    moment with no instant (None) when nothing is reserved."""
    ids = set(ub) | set(ua) | set(wb) | set(wa)
    if not wb and not wa:
        yield None, {}, ub, {pid: ua.get(pid, 0) - ub.get(pid, 0) for pid in ids}
        return
    instants = sorted({now}
                      | {s for ws in wa.values() for s, e, _ in ws if s > now}
                      | {e for ws in wb.values() for _s, e, _ in ws if e > now})
    rb_at = {pid: _levels(wb.get(pid, ()), instants) for pid in ids}
    ra_at = {pid: _levels(wa.get(pid, ()), instants) for pid in ids}
    for i, at in enumerate(instants):
        rb = {pid: rb_at[pid][i] for pid in ids}
        total_before = {pid: ub.get(pid, 0) + rb[pid] for pid in ids}
        added = {pid: ua.get(pid, 0) + ra_at[pid][i] - total_before[pid]
                 for pid in ids}
        yield at, rb, total_before, added


def _levels(windows, instants: list[int]) -> list[int]:
    """What `windows` hold at each of the sorted `instants`."""
    if not windows:
        return [0] * len(instants)
    horizon = max(instants[-1], max(e for _s, e, _a in windows)) + 1
    steps = timeline.steps(windows, instants[0], horizon)
    starts = [s.start for s in steps]
    return [steps[bisect_right(starts, at) - 1].amount for at in instants]
