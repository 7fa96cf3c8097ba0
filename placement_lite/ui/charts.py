"""Charts drawn on the server as inline SVG: no script, no external file,
nothing for a browser in an air-gapped cloud to fetch.

Bars and histograms only use SVG presentation attributes and classes from
console.css (no inline style), so the console's Content-Security-Policy
needs no 'unsafe-inline'.
"""
from __future__ import annotations

from markupsafe import Markup, escape


def _num(value) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:.4g}"


def usage_bar(used, capacity, width: int = 220, height: int = 14) -> Markup:
    """A horizontal bar: the used share of capacity filled, over-use (used
    beyond capacity) drawn in the warning colour across the whole bar."""
    capacity = float(capacity or 0)
    used = float(used or 0)
    share = 1.0 if capacity <= 0 and used > 0 else (
        0.0 if capacity <= 0 else min(used / capacity, 1.0))
    over = used > capacity
    filled = round(share * width, 1)
    label = f"{_num(used)} of {_num(capacity)} used"
    cls = "bar-used over" if over else ("bar-used high" if share >= 0.9 else "bar-used")
    return Markup(
        f'<svg class="bar" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}" viewBox="0 0 {width} {height}">'
        f'<title>{escape(label)}</title>'
        f'<rect class="bar-track" x="0" y="0" width="{width}" height="{height}" rx="2"/>'
        f'<rect class="{cls}" x="0" y="0" width="{filled}" height="{height}" rx="2"/>'
        "</svg>")


def histogram(counts, edges, titles, width: int = 340, height: int = 96,
              title: str = "") -> Markup:
    """Vertical bars, one per bucket, each with its count above it.

    `edges` (one more than the buckets) label the boundaries under the
    bars, so each bar reads as the range between the labels at its sides;
    `titles` say each bucket's range in words (the bar's tooltip)."""
    counts = list(counts)
    top = max(counts) if counts and max(counts) > 0 else 1
    n = max(len(counts), 1)
    gap, margin = 3, 14  # the margins leave room for the outer edge labels
    step = (width - 2 * margin + gap) / n
    bar_w = step - gap
    plot_h = height - 30  # room for the count above and the edge labels below
    base = 14 + plot_h
    parts = [f'<svg class="histogram" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}" viewBox="0 0 {width} {height}">',
             f"<title>{escape(title)}</title>"]
    for i, (count, words) in enumerate(zip(counts, titles)):
        x = round(margin + i * step, 1)
        h = round(plot_h * count / top, 1)
        y = round(base - h, 1)
        parts.append(
            f'<g class="bin"><title>{escape(words)}: {count} provider'
            f'{"" if count == 1 else "s"}</title>'
            f'<rect class="hist-bar" x="{x}" y="{y}" width="{round(bar_w, 1)}" '
            f'height="{h}"/>'
            f'<text class="hist-count" x="{round(x + bar_w / 2, 1)}" y="{round(y - 3, 1)}" '
            f'text-anchor="middle">{count}</text></g>')
    for i, label in enumerate(edges):
        # Between two bars an edge sits in the middle of their gap.
        x = round(margin + i * step - (gap / 2 if 0 < i < n else 0)
                  - (gap if i == n else 0), 1)
        parts.append(
            f'<line class="hist-tick" x1="{x}" y1="{base}" x2="{x}" y2="{base + 4}"/>'
            f'<text class="hist-edge" x="{x}" y="{height - 2}" '
            f'text-anchor="middle">{escape(label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
