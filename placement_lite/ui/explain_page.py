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


def _unit(s: dict) -> str:
    """What a step counts: trees where it counts trees; the limit step
    and a marker request's draws step count candidates (in their provider
    fields); the others providers."""
    if s["trees_before"] is not None or s["trees_after"] is not None:
        return "tree"
    return "candidate" if s["step"] in ("limit", "draws") else "provider"


def _counted(s: dict) -> tuple:
    if _unit(s) == "tree":
        return s["trees_before"], s["trees_after"]
    return s["providers_before"], s["providers_after"]


def count_text(n, unit: str = "") -> str:
    """A count as a person reads it ("1 tree", "3 trees"). A step that does
    not count something (the search's offered step has no "before")
    reports None: a dash."""
    if n is None:
        return "—"
    return f"{n:,} {unit}{'' if n == 1 else 's'}" if unit else f"{n:,}"


def step_counts(s: dict) -> tuple[str, str]:
    """(before, after) in the step's own unit, for the search's table."""
    unit = _unit(s)
    return tuple(count_text(n, unit) for n in _counted(s))


def funnel(steps: list, bar_w: int = 200, height: int = 14) -> Markup:
    """One row per step: its whole name (an HTML label that wraps, so no
    word of it is cut), a bar of what is left after it against the most
    any step counted, and that count with its unit."""
    top = max([n or 0 for s in steps for n in _counted(s)] + [1])
    rows = []
    for s in steps:
        before, after = step_counts(s)
        filled = round(bar_w * (_counted(s)[1] or 0) / top, 1)
        name = f"{s['step']} {s['detail']}"
        rows.append(
            f'<li class="funnel-step"><span class="funnel-label">'
            f'<strong>{escape(s["step"])}</strong> {escape(s["detail"])}</span>'
            f'<svg class="bar" width="{bar_w}" height="{height}" role="img" '
            f'aria-label="{escape(name)}: {escape(before)} → {escape(after)}" '
            f'viewBox="0 0 {bar_w} {height}">'
            f'<rect class="bar-track" x="0" y="0" width="{bar_w}" height="{height}" rx="2"/>'
            f'<rect class="bar-used" x="0" y="0" width="{filled}" height="{height}" rx="2"/>'
            f'</svg><span class="funnel-count">{escape(after)}</span></li>')
    return Markup('<ol class="funnel">' + "".join(rows) + "</ol>")


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
                     answer=answer, error=error, funnel=funnel,
                     step_counts=step_counts, count_text=count_text)
