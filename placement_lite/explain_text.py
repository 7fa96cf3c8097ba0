"""`placement-lite explain`: ask a running service's explain route about a
candidates query and print the answer for a terminal."""
from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Optional


def query_part(query: str) -> str:
    """The query string of `query`: given as is, or as a path or URL of
    the candidates query (whatever precedes '?' is dropped)."""
    query = query.strip()
    return query.split("?", 1)[1] if "?" in query else query


def fetch(url: str, query: str, token: Optional[str], microversion: str,
          timeout: float = 60.0) -> dict:
    target = url.rstrip("/") + "/explain/allocation_candidates?" + query_part(query)
    headers = {"accept": "application/json",
               "openstack-api-version": f"placement {microversion}"}
    if token:
        headers["x-auth-token"] = token
    with urllib.request.urlopen(urllib.request.Request(target, headers=headers),
                                timeout=timeout) as resp:
        return json.load(resp)


def _count(n) -> str:
    # A step that does not count this (the search's offered step has no
    # "before", the limit step counts no trees) reports None: a dash, not
    # Python's None, is what a reader of the table understands.
    return "-" if n is None else str(n)


def _counts(before, after) -> str:
    if before is None and after is None:
        return "-"
    return f"{_count(before)} -> {_count(after)}"


def _steps(lines: list, steps: list) -> None:
    lines.append(f"  {'step':<22} {'providers':>14} {'trees':>14}  detail")
    for s in steps:
        lines.append(f"  {s['step']:<22} "
                     f"{_counts(s['providers_before'], s['providers_after']):>14} "
                     f"{_counts(s['trees_before'], s['trees_after']):>14}  {s['detail']}")


def render(answer: dict) -> str:
    lines = []
    cands = answer["candidates"]
    shown = cands["first"]
    lines.append(f"Candidates: {cands['count']}"
                 + (f" (first {len(shown)} shown)" if shown else "")
                 + (" (a random sample)" if cands.get("randomized") else ""))
    for i, cand in enumerate(shown, 1):
        parts = ["%s: %s" % (uuid, ", ".join(f"{rc} {n}" for rc, n in
                                              alloc["resources"].items()))
                 for uuid, alloc in cand["allocations"].items()]
        lines.append(f"  {i}. " + "; ".join(parts))
    for group in answer["groups"]:
        name = group["group"] or "(unnumbered)"
        lines.append("")
        lines.append(f"Group {name}:")
        _steps(lines, group["steps"])
    lines.append("")
    lines.append("Search:")
    _steps(lines, answer["search"])
    for uuid, report in answer.get("providers", {}).items():
        lines.append("")
        # No tree for a uuid no provider has, nor when in_tree names no
        # provider (nothing was searched): the reason says which.
        tree = f" (tree {report['tree']})" if report.get("tree") else ""
        if report["excluded"]:
            lines.append(f"Provider {uuid}{tree}: not in the answer")
        else:
            lines.append(f"Provider {uuid}{tree}: in the answer "
                         f"({report['candidates']} candidates)")
        for reason in report["reasons"]:
            where = reason["step"] or ""
            if reason["group"] is not None:
                where = f"group {reason['group'] or '(unnumbered)'}, {where}"
            lines.append(f"  - [{where}] {reason['reason']}")
        for short in report.get("short", ()):
            lines.append(f"  ! reservation {short['reservation']}: "
                         f"{short['resource_class']} lacks {short['missing']} "
                         f"from {short['start']}")
    return "\n".join(lines) + "\n"


def main(args) -> int:
    try:
        answer = fetch(args.url, args.query, args.token, args.microversion)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        try:
            detail = "; ".join(e.get("detail", "") for e in json.loads(detail)["errors"])
        except (ValueError, KeyError, TypeError):
            pass
        print(f"placement-lite explain: {exc.code} {exc.reason}: {detail}",
              file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"placement-lite explain: cannot reach {args.url}: {exc}",
              file=sys.stderr)
        return 1
    sys.stdout.write(render(answer))
    return 0
