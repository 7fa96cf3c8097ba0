"""The console's Explain page: paste a candidates query, see the funnel
of the search's steps (inline SVG) and why named providers are out.

It runs what GET /explain/allocation_candidates runs (api/explain.run),
under that route's policy rule.
"""
from __future__ import annotations

from urllib.parse import parse_qs

from markupsafe import Markup, escape

from placement_lite import errors as domain_errors
from placement_lite.api import errors as api_errors
from placement_lite.api.resources import explain as explain_api
from placement_lite.api.versions import ALLOCATION_CANDIDATES, MAX_VERSION, Version
from placement_lite.ui import pages

RULE = "placement:explain:allocation_candidates"


def funnel(steps: list, width: int = 360, row: int = 18) -> Markup:
    """One bar per step, its length the trees left after it against the
    most any step started from (providers where a step counts no trees)."""
    def left(s):
        return s["trees_after"] if s["trees_after"] is not None else s["providers_after"]

    def start(s):
        return s["trees_before"] if s["trees_before"] is not None else s["providers_before"]

    top = max([start(s) or 0 for s in steps] + [left(s) or 0 for s in steps] + [1])
    label_w = 150
    bar_w = width - label_w - 60
    height = row * len(steps) + 4
    parts = [f'<svg class="bar funnel" width="{width}" height="{height}" role="img" '
             f'aria-label="funnel of the steps" viewBox="0 0 {width} {height}">']
    for i, s in enumerate(steps):
        y = i * row + 2
        after = left(s) or 0
        filled = round(bar_w * after / top, 1)
        name = f"{s['step']} {s['detail']}"
        short = name if len(name) <= 22 else name[:21] + "…"
        parts.append(
            f'<g class="funnel-step"><title>{escape(name)}: {start(s)} → {after}</title>'
            f'<text x="0" y="{y + row - 6}">{escape(short)}</text>'
            f'<rect class="bar-track" x="{label_w}" y="{y}" width="{bar_w}" '
            f'height="{row - 4}" rx="2"/>'
            f'<rect class="bar-used" x="{label_w}" y="{y}" width="{filled}" '
            f'height="{row - 4}" rx="2"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y + row - 6}">{after}</text></g>')
    parts.append("</svg>")
    return Markup("".join(parts))


def parse_query(text: str) -> dict:
    """A pasted query string, path or URL -> name -> [values]."""
    text = text.strip()
    if "?" in text:
        text = text.split("?", 1)[1]
    return parse_qs(text, keep_blank_values=True)


class ExplainPage(pages.Page):
    rules = (RULE,)
    nav = "Explain"

    def show(self, req, resp, identity):
        query = (req.get_param("q") or "").strip()
        named = [u.strip() for u in (req.get_param("providers") or "").replace(
            ",", " ").split() if u.strip()]
        version_text = (req.get_param("version") or str(MAX_VERSION)).strip()
        answer, error = None, None
        if query:
            try:
                version = Version.parse(version_text)
                if not (ALLOCATION_CANDIDATES.since <= version <= MAX_VERSION):
                    raise ValueError(f"the candidates query exists from "
                                     f"{ALLOCATION_CANDIDATES.since} to {MAX_VERSION}")
                params = parse_query(query)
                if named:
                    params[explain_api.PROVIDER_PARAM] = (
                        params.get(explain_api.PROVIDER_PARAM, []) + named)
                answer = explain_api.body(explain_api.run(self.services, params, version))
            except api_errors.ApiError as exc:
                error = exc.description
            except (domain_errors.DomainError, ValueError) as exc:
                error = str(exc)
        pages.render(resp, "explain.html", identity=identity, active=self.nav,
                     query=query, providers=" ".join(named), version=version_text,
                     answer=answer, error=error, funnel=funnel)
