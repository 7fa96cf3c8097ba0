"""`placement-lite report`: the fleet and quota summaries the console
shows, as terminal tables or JSON, read straight from the database with
the same read functions (ledger/fleet.py, quota/overview.py)."""
from __future__ import annotations

import json
from typing import Optional

from placement_lite.ledger import fleet
from placement_lite.quota import enforce, overview

# Trees are read a page at a time: the report's memory stays bounded by
# the page, not the number of projects.
_PAGE = 500


def collect(conn, settings) -> dict:
    classes = fleet.class_summaries(conn)
    enforcement = enforce.current(conn, settings)
    trees = []
    offset = 0
    while True:
        page = overview.tree_page(conn, settings, offset=offset, limit=_PAGE)
        trees.extend(_tree(t) for t in page)
        if len(page) < _PAGE:
            break
        offset += _PAGE
    return {
        "fleet": {
            "providers": fleet.count_providers(conn),
            "classes": [{"resource_class": c.resource_class,
                         "providers": c.providers, "capacity": c.capacity,
                         "used": c.used, "free": c.free} for c in classes],
        },
        "quota": {"enforced": enforcement.enforce, "model": enforcement.model,
                  "trees": trees},
    }


def _tree(tree: overview.Tree) -> dict:
    return {
        "root": tree.root.external_id,
        "over": tree.over,
        "children": [c.external_id for c in tree.children],
        "resources": [{
            "resource": r.name,
            "projects": [{"project": line.project, "limit": line.limit,
                          "source": line.source, "usage": line.usage,
                          "headroom": line.headroom, "over": line.over}
                         for line in r.lines],
            **({"tree": {"limit": r.tree_limit, "usage": r.tree_usage,
                         "headroom": r.tree_headroom, "over": r.tree_over}}
               if r.tree_limit is not None else {}),
        } for r in tree.resources],
    }


def _num(value) -> str:
    if value is None:
        return "unlimited"
    value = float(value)
    return f"{int(value):,}" if value.is_integer() else f"{value:,.2f}"


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(headers), line(["-" * w for w in widths]), *map(line, rows)]


def render_text(data: dict) -> str:
    f = data["fleet"]
    out = [f"Fleet: {f['providers']:,} resource providers", ""]
    if f["classes"]:
        rows = []
        for c in f["classes"]:
            share = (f"{100.0 * c['used'] / c['capacity']:.1f}%"
                     if c["capacity"] > 0 else "-")
            rows.append([c["resource_class"], _num(c["providers"]),
                         _num(c["capacity"]), _num(c["used"]), _num(c["free"]), share])
        out += _table(["RESOURCE CLASS", "PROVIDERS", "CAPACITY", "USED", "FREE",
                       "USED%"], rows, {1, 2, 3, 4, 5})
    else:
        out.append("(no inventory)")
    q = data["quota"]
    over = sum(1 for t in q["trees"] if t["over"])
    out += ["", f"Quota: enforcement {'on' if q['enforced'] else 'off'}, model "
            f"{q['model']}; {len(q['trees'])} project trees, {over} over a limit", ""]
    rows = []
    for t in q["trees"]:
        for r in t["resources"]:
            for p in r["projects"]:
                rows.append([t["root"], p["project"], r["resource"],
                             _num(p["limit"]), p["source"], _num(p["usage"]),
                             _num(p["headroom"]) if p["limit"] is not None else "-",
                             "OVER" if p["over"] else ""])
            if "tree" in r:
                tr = r["tree"]
                rows.append([t["root"], "(whole tree)", r["resource"],
                             _num(tr["limit"]), "", _num(tr["usage"]),
                             _num(tr["headroom"]), "OVER" if tr["over"] else ""])
    if rows:
        out += _table(["TREE", "PROJECT", "RESOURCE", "LIMIT", "FROM", "USAGE",
                       "HEADROOM", ""], rows, {3, 5, 6})
    else:
        out.append("(no limits registered, or no projects)")
    return "\n".join(out) + "\n"


def render(data: dict, fmt: Optional[str] = "text") -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    return render_text(data)
