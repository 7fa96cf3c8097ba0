"""The console scenario: page times of /ui/ at 10k providers.

The flat world (bench/loader.py) gets what the console's pages read
besides providers: project trees (a top-level project with two children
each) with a registered limit and overrides, and consumers with
allocations on the providers (one in two providers is in use), so the
Fleet, Projects and Provider pages sum real usage.
"""
from __future__ import annotations

import http.client
import statistics
import time
import uuid as uuidlib
from urllib.parse import urlsplit

from sqlalchemy import func, insert, select

from bench import loader
from placement_lite.db import tables as t
from placement_lite.db import usage_summary
from placement_lite.db.engine import Database

COOKIE = "placement_lite_console=admin"


def load_quota_and_usage(db: Database, trees: int = 500,
                         consumers: int = 5000) -> dict:
    """Projects, limits, consumers and allocations; returns names the
    pages are timed on."""
    with db.write() as conn:
        P = t.projects
        base = (conn.scalar(select(func.max(P.c.id))) or 0) + 1
        rows, ids = [], []
        for i in range(trees):
            root = base + len(rows)
            rows.append(dict(id=root, external_id=f"proj-{i:04d}", name=f"Project {i}",
                             parent_id=None, is_domain=False, enabled=True))
            ids.append(root)
            for c in range(2):
                rows.append(dict(id=base + len(rows), external_id=f"proj-{i:04d}-{c}",
                                 name=f"Project {i} child {c}", parent_id=root,
                                 is_domain=False, enabled=True))
        conn.execute(insert(P), rows)
        project_ids = [r["id"] for r in rows]
        conn.execute(insert(t.quota_services).values(id="bench-svc", type="placement"))
        conn.execute(insert(t.registered_limits).values(
            id="bench-vcpu", service_id="bench-svc", region_key="",
            resource_name="class:VCPU", default_limit=40))
        conn.execute(insert(t.project_limits), [
            dict(id=f"bench-lim-{i}", owner_id=pid, service_id="bench-svc",
                 region_key="", resource_name="class:VCPU", resource_limit=100)
            for i, pid in enumerate(ids[::3])])
        user = conn.execute(insert(t.users).values(external_id="bench-user")
                            ).inserted_primary_key[0]
        rp_ids = list(conn.scalars(select(t.resource_providers.c.id)
                                   .order_by(t.resource_providers.c.id)))
        rc = dict(conn.execute(select(t.resource_classes.c.name,
                                      t.resource_classes.c.id)).all())
        cbase = (conn.scalar(select(func.max(t.consumers.c.id))) or 0) + 1
        cons, allocs = [], []
        for i in range(consumers):
            cid = cbase + i
            cons.append(dict(id=cid, uuid=str(uuidlib.uuid4()),
                             project_id=project_ids[i % len(project_ids)],
                             user_id=user, generation=1))
            rp = rp_ids[(2 * i) % len(rp_ids)]
            allocs += [dict(resource_provider_id=rp, consumer_id=cid,
                            resource_class_id=rc["VCPU"], used=4),
                       dict(resource_provider_id=rp, consumer_id=cid,
                            resource_class_id=rc["MEMORY_MB"], used=4096)]
        for start in range(0, len(cons), loader.BATCH):
            conn.execute(insert(t.consumers), cons[start:start + loader.BATCH])
        for start in range(0, len(allocs), loader.BATCH):
            conn.execute(insert(t.allocations), allocs[start:start + loader.BATCH])
        # Written around the ledger: its usage sums are recomputed.
        usage_summary.rebuild(conn)
        provider = conn.scalar(select(t.resource_providers.c.uuid)
                               .where(t.resource_providers.c.id == rp_ids[0]))
    return {"provider": provider, "consumer": cons[0]["uuid"],
            "project": "proj-0000", "middle_page": max(1, len(rp_ids) // 100)}


def pages(names: dict) -> list[tuple[str, str]]:
    return [
        ("fleet", "/ui/"),
        ("fleet_filtered", f"/ui/?aggregate={loader.AGGREGATE}&trait={loader.AVX2}"),
        ("providers_first_page", "/ui/providers"),
        ("providers_middle_page", f"/ui/providers?page={names['middle_page']}"),
        ("providers_search", "/ui/providers?q=cn-999"),
        ("provider", f"/ui/providers/{names['provider']}"),
        ("projects", "/ui/projects"),
        ("project", f"/ui/projects/{names['project']}"),
        ("consumer", f"/ui/consumers/{names['consumer']}"),
    ]


def _get(conn, path):
    start = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": COOKIE, "Accept": "text/html"})
    resp = conn.getresponse()
    body = resp.read()
    return time.perf_counter() - start, resp.status, body


def time_pages(url: str, names: dict, runs: int = 20, cpu=None) -> dict:
    """Median and p95 per page; with `cpu` (the server's CPU seconds so
    far), also the server's CPU time per page, which a busy machine
    inflates far less than the wall time."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=120)
    out = {}
    for label, path in pages(names):
        _get(conn, path)  # warm the connection and the templates
        times = []
        before = cpu() if cpu else None
        for _ in range(runs):
            elapsed, status, body = _get(conn, path)
            if status != 200:
                raise RuntimeError(f"GET {path} answered {status}: {body[:300]!r}")
            times.append(elapsed)
        ordered = sorted(times)
        out[label] = {"path": path, "bytes": len(body),
                      "median_ms": round(1000 * statistics.median(times), 2),
                      "p95_ms": round(1000 * ordered[int(round(0.95 * (len(ordered) - 1)))], 2)}
        if cpu:
            out[label]["server_cpu_ms"] = round(1000 * (cpu() - before) / runs, 2)
    conn.close()
    return out
