"""Amounts over time: reservations as step functions of the instant.

A reservation holds `amount` over a half-open window [start, end), in
whole seconds. What is reserved at an instant t on one provider and class
is the sum of the amounts whose windows contain t: a step function that
changes only where a window starts or ends. Everything here is pure, over
plain (start, end, amount) triples, so the rules that admit and refuse
reservations can be tested against a brute-force model without a
database.
"""
from __future__ import annotations

import datetime as dt
from typing import Iterable, NamedTuple, Optional

Window = tuple[int, int, int]  # (start, end, amount), the window [start, end)


class Step(NamedTuple):
    start: int
    end: int
    amount: int


class Short(NamedTuple):
    """Where a window lacks room: [start, end) and what is free there."""
    start: int
    end: int
    free: float


def steps(windows: Iterable[Window], start: int, end: int) -> list[Step]:
    """What is reserved over [start, end), as consecutive steps covering
    it exactly; neighbours differ in amount. Empty when start >= end."""
    if start >= end:
        return []
    change: dict[int, int] = {}
    level = 0
    for s, e, amount in windows:
        if e <= start or s >= end or s >= e or not amount:
            continue
        if s <= start:
            level += amount
        else:
            change[s] = change.get(s, 0) + amount
        if e < end:
            change[e] = change.get(e, 0) - amount
    out: list[Step] = []
    at = start
    for t in sorted(change):
        if not change[t]:
            continue
        _extend(out, at, t, level)
        level += change[t]
        at = t
    _extend(out, at, end, level)
    return out


def _extend(out: list[Step], start: int, end: int, amount: int) -> None:
    if start >= end:
        return
    if out and out[-1].amount == amount:
        out[-1] = Step(out[-1].start, end, amount)
    else:
        out.append(Step(start, end, amount))


def peak(windows: Iterable[Window], start: int, end: int) -> int:
    """The most reserved at any instant of [start, end); 0 when empty."""
    return max((s.amount for s in steps(windows, start, end)), default=0)


def peak_after(windows: Iterable[Window], now: int) -> int:
    """The most reserved at any instant from `now` on: what a claim, which
    holds its room forever, must leave free."""
    windows = [w for w in windows if w[1] > now]
    if not windows:
        return 0
    return peak(windows, now, max(w[1] for w in windows))


def first_short(windows: Iterable[Window], room: float, amount: int,
                start: int, end: int) -> Optional[Short]:
    """The first step of [start, end) where `amount` more does not fit in
    `room` beside what is reserved there. Returned as (start, end, free):
    the step's bounds and what is free in it (room less reserved, which
    may be below zero where a shrunken inventory left reservations
    without room). None when it fits throughout."""
    for s in steps(windows, start, end):
        if s.amount + amount > room:
            free = room - s.amount
            return Short(s.start, s.end,
                         int(free) if float(free).is_integer() else free)
    return None


def iso(seconds: int) -> str:
    """An instant as the API and every message writes it:
    YYYY-MM-DDTHH:MM:SSZ."""
    when = _EPOCH + dt.timedelta(seconds=int(seconds))
    return (f"{when.year:04d}-{when.month:02d}-{when.day:02d}T"
            f"{when.hour:02d}:{when.minute:02d}:{when.second:02d}Z")


_EPOCH = dt.datetime(1970, 1, 1)
