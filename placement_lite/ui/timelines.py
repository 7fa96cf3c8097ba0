"""Reservation timelines drawn on the server as inline SVG, as the other
charts are (ui/charts.py): no script, presentation from console.css.

One chart per resource class over a period [start, end): time runs left
to right, amounts bottom to top. A provider's chart draws its capacity
as a line, what is allocated now as a band (from now on: allocations
have no end, and no history), what is reserved as steps stacked on the
allocations (on nothing before now), and the intervals that are short in
red. A project's chart draws its reserved steps alone. The time axis is
labelled in UTC with dates a person reads ("06:00", "Mon 4", "Jan 2100"),
and every bar and red interval says what it is in its tooltip.
"""
from __future__ import annotations

import datetime as dt
import math
from typing import Iterable, Optional

from markupsafe import Markup, escape

HOUR = 3600
DAY = 86400
WIDTH, HEIGHT = 960, 210
LEFT, RIGHT, TOP, BOTTOM = 58, 18, 16, 44
# The tick steps an axis may use: (seconds, unit). Months are calendar
# months, weeks start on Mondays; the first step giving at most
# MAX_TICKS ticks wins.
_STEPS = [(HOUR, "hour"), (3 * HOUR, "hour"), (6 * HOUR, "hour"),
          (12 * HOUR, "hour"), (DAY, "day"), (2 * DAY, "day"),
          (7 * DAY, "week"), (0, "month"), (0, "quarter")]
MAX_TICKS = 16
# Longer periods are labelled by days even where hours would fit: a week
# reads better as seven days than as fourteen noons and midnights.
HOUR_AXIS_DAYS = 3
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep",
           "Oct", "Nov", "Dec")


def _utc(seconds: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(seconds=int(seconds))


def _seconds(when: dt.datetime) -> int:
    return int((when - dt.datetime(1970, 1, 1)).total_seconds())


def when_text(seconds: int) -> str:
    """An instant as a person reads it: 2100-01-01 09:00 UTC (seconds
    only when there are some)."""
    when = _utc(seconds)
    text = when.strftime("%H:%M:%S" if when.second else "%H:%M")
    return f"{when.year:04d}-{when.month:02d}-{when.day:02d} {text} UTC"


def span_text(start: int, end: int) -> str:
    """from 2100-01-01 09:00 to 17:00 UTC (the end's date when it differs)."""
    a, b = when_text(start)[:-4], when_text(end)[:-4]
    if a[:10] == b[:10]:
        b = b[11:]
    return f"from {a} to {b} UTC"


def _months(start: int, end: int, every: int) -> list[int]:
    when = _utc(start)
    year, month = when.year, when.month
    out = []
    while True:
        first = dt.datetime(year, month, 1)
        t = _seconds(first)
        if t >= end:
            return out
        if t >= start and (month - 1) % every == 0:
            out.append(t)
        month += 1
        if month > 12:
            year, month = year + 1, 1


def ticks(start: int, end: int) -> tuple[list[int], str]:
    """The instants to label on an axis over [start, end), aligned to
    whole hours, midnights, Mondays or firsts of months (UTC), and the
    unit they step by."""
    for step, unit in _STEPS:
        if unit in ("month", "quarter"):
            found = _months(start, end, 1 if unit == "month" else 3)
            if len(found) <= MAX_TICKS or unit == "quarter":
                return found, unit
            continue
        if (end - start) / step > MAX_TICKS or (
                unit == "hour" and end - start > HOUR_AXIS_DAYS * DAY):
            continue
        # Mondays: the epoch was a Thursday, 3 days after a Monday.
        shift = 3 * DAY if unit == "week" else 0
        first = math.ceil((start + shift) / step) * step - shift
        return list(range(first, end, step)), unit
    return [], "quarter"


def tick_label(seconds: int, unit: str) -> tuple[str, str]:
    """(what the tick says, its context: shown when it changes)."""
    when = _utc(seconds)
    day = f"{_WEEKDAYS[when.weekday()]} {when.day}"
    month = f"{_MONTHS[when.month - 1]} {when.year:04d}"
    if unit == "hour":
        return when.strftime("%H:%M"), f"{day} {month}"
    if unit in ("day", "week"):
        return day, month
    return _MONTHS[when.month - 1], f"{when.year:04d}"


def _num(value) -> str:
    value = float(value)
    return f"{int(value):,}" if value.is_integer() else f"{value:,.4g}"


def y_ticks(value: float, count: int = 5) -> list[float]:
    """Round values from 0 to at or above `value`, about `count` steps:
    each step 1, 2 or 5 times a power of ten, and whole (amounts are)."""
    rough = max(value, 1) / count
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    step = max(step, 1)
    top = math.ceil(max(value, 1) / step) * step
    return [k * step for k in range(int(round(top / step)) + 1)]


class _Frame:
    """Where an instant and an amount land in the chart."""

    def __init__(self, start: int, end: int, levels: list[float]):
        self.start, self.end = start, end
        self.levels, self.top = levels, levels[-1]
        self.plot_w = WIDTH - LEFT - RIGHT
        self.plot_h = HEIGHT - TOP - BOTTOM
        self.base = TOP + self.plot_h

    def x(self, t: int) -> float:
        t = min(max(t, self.start), self.end)
        return round(LEFT + (t - self.start) / (self.end - self.start) * self.plot_w, 1)

    def y(self, value: float) -> float:
        return round(self.base - min(value, self.top) / self.top * self.plot_h, 1)


def _rect(cls: str, x0: float, y0: float, x1: float, y1: float) -> str:
    return (f'<rect class="{cls}" x="{x0}" y="{min(y0, y1)}" '
            f'width="{round(max(x1 - x0, 0.5), 1)}" height="{round(abs(y1 - y0), 1)}"/>')


def _axes(f: _Frame) -> list[str]:
    parts = []
    for v in f.levels:
        y = f.y(v)
        parts.append(f'<line class="tl-grid" x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}"/>'
                     f'<text class="tl-ylabel" x="{LEFT - 6}" y="{y + 3}" '
                     f'text-anchor="end">{_num(v)}</text>')
    found, unit = ticks(f.start, f.end)
    context = None
    for t in found:
        x = f.x(t)
        main, ctx = tick_label(t, unit)
        parts.append(f'<line class="tl-tick" x1="{x}" y1="{TOP}" x2="{x}" y2="{f.base + 4}"/>'
                     f'<text class="tl-xlabel" x="{x}" y="{f.base + 16}" '
                     f'text-anchor="middle">{escape(main)}</text>')
        if ctx != context:
            parts.append(f'<text class="tl-xcontext" x="{x}" y="{f.base + 30}" '
                         f'text-anchor="middle">{escape(ctx)}</text>')
            context = ctx
    parts.append(f'<text class="tl-utc" x="{WIDTH - RIGHT}" y="{HEIGHT - 2}" '
                 f'text-anchor="end">times in UTC</text>')
    parts.append(f'<line class="tl-axis" x1="{LEFT}" y1="{f.base}" '
                 f'x2="{WIDTH - RIGHT}" y2="{f.base}"/>')
    return parts


def _steps(f: _Frame, what: str, steps: Iterable, allocated: float,
           now: Optional[int]) -> list[str]:
    """One group per step with something reserved: its bar stacked on the
    allocations from now on (on nothing before), and its tooltip."""
    parts = []
    for s in steps:
        if not s.amount:
            continue
        pieces = [(s.start, s.end)]
        if now is not None and s.start < now < s.end:
            pieces = [(s.start, now), (now, s.end)]
        rects = []
        for a, b in pieces:
            base = allocated if now is not None and a >= now else 0
            rects.append(_rect("tl-reserved", f.x(a), f.y(base), f.x(b),
                               f.y(base + s.amount)))
        tip = f"{what}: {_num(s.amount)} reserved {span_text(s.start, s.end)}"
        parts.append(f'<g class="tl-step" data-reserved="{s.amount}"><title>'
                     f'{escape(tip)}</title>{"".join(rects)}</g>')
    return parts


def _short_zones(f: _Frame, short: Iterable) -> list[str]:
    """Behind the bars: each short interval shaded across the chart."""
    return [_rect("tl-short-zone", f.x(s.start), TOP, f.x(s.end), f.base)
            for s in short]


def _short(f: _Frame, what: str, short: Iterable, capacity: float) -> list[str]:
    """Over the bars: in red, the part of each short interval's bar above
    the capacity (what does not fit) and a strip along the axis."""
    parts = []
    for s in short:
        tip = (f"{what} short {span_text(s.start, s.end)}: {_num(s.reserved)} "
               f"reserved, {_num(-s.free)} more than the room left")
        x0, x1 = f.x(s.start), f.x(s.end)
        over = _rect("tl-overflow", x0, f.y(max(capacity, 0)), x1,
                     f.y(max(capacity, 0) - s.free))
        parts.append(f'<g class="tl-short-interval"><title>{escape(tip)}</title>'
                     + over + _rect("tl-short", x0, f.base - 5, x1, f.base) + "</g>")
    return parts


def timeline(what: str, start: int, end: int, steps: Iterable,
             now: Optional[int] = None, capacity: Optional[float] = None,
             allocated: float = 0, short: Iterable = ()) -> Markup:
    """The chart of one class over [start, end). With `capacity` (a
    provider's), the capacity line, the allocated band and `short`."""
    steps, short = list(steps), list(short)
    peak = max((s.amount for s in steps), default=0)
    f = _Frame(start, end, y_ticks(max(peak + allocated, capacity or 0) * 1.08))
    shown_now = now if now is not None and start < now < end else None
    label = f"{what} {span_text(start, end)}: most reserved {_num(peak)}"
    if capacity is not None:
        label += (f", capacity {_num(capacity)}, allocated {_num(allocated)}, "
                  f"{len(short)} short interval{'' if len(short) == 1 else 's'}")
    parts = [f'<svg class="timeline" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="{escape(label)}" viewBox="0 0 {WIDTH} {HEIGHT}">',
             f"<title>{escape(label)}</title>"]
    parts += _axes(f)
    parts += _short_zones(f, short)
    if capacity is not None and allocated and (now is None or now < end):
        x0 = f.x(max(start, now if now is not None else start))
        parts.append(f'<g class="tl-allocated-band"><title>{escape(what)}: '
                     f'{_num(allocated)} allocated now (held from now on)</title>'
                     + _rect("tl-allocated", x0, f.y(0), f.x(end), f.y(allocated))
                     + "</g>")
    parts += _steps(f, what, steps, allocated if capacity is not None else 0, now)
    parts += _short(f, what, short, capacity or 0)
    if capacity is not None:
        y = f.y(capacity)
        parts.append(f'<g class="tl-capacity-line"><title>{escape(what)}: capacity '
                     f'{_num(capacity)}</title><line class="tl-capacity" x1="{LEFT}" '
                     f'y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}"/>'
                     f'<text class="tl-capacity-label" x="{WIDTH - RIGHT - 4}" '
                     f'y="{y - 4}" text-anchor="end">capacity {_num(capacity)}</text></g>')
    if shown_now is not None:
        x = f.x(shown_now)
        parts.append(f'<line class="tl-now" x1="{x}" y1="{TOP - 4}" x2="{x}" y2="{f.base}"/>'
                     f'<text class="tl-now-label" x="{x + 3}" y="{TOP + 6}">now</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
