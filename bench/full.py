"""Full clouds: what a scheduler's requests cost once every provider
carries usage, beside the same cloud idle (`python -m bench full`).

A cloud of N compute nodes (the flat perfload shape, all in use in the
full variant: 30-90% of each node's capacity held by several consumers
of a hundred projects) and, after them in id order, POOLS pools of 64
idle nodes, each pool an aggregate of its own with VCPU 14 per node (896
units). Measured, in one alternating run over every side (each tree of
code, each variant):

- the scheduler's filtered query, `resources=VCPU:1,MEMORY_MB:256&
  member_of=<pool 0>&limit=10`, each answer checked complete;
- the scheduler loop: 20 clients, each asking that query of a fresh pool
  `limit=10`, picking one candidate at random and claiming it with PUT
  /allocations, until the pool has no candidate left; loops per second,
  and the pool must end exactly full;
- a claim (PUT /allocations of a new instance on a node of the cloud);
- GET /usages of a project holding USAGE_CONSUMERS consumers.

With --sharing, each pool's aggregate also holds a sharing provider of
DISK_GB (bench/worlds.py's Cloud): the filtered query asks for no disk,
so the answers are the same, but the cloud has sharing providers.

With --placement, OpenStack Placement 16 is a side of each variant too
(`placement-idle`, `placement-full`; bench/placement16.py): its own
server and database on the same backend, the same cloud loaded into its
schema, measured in the same alternating rounds.
"""
from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from urllib.parse import urlencode

from bench.client import Client
from bench.worlds import (
    POOL_SIZE, POOL_VCPU, POOLS, USAGE_CONSUMERS, cloud_shape, cloud_usage_project,
    pool_aggregate, uid)

STATEMENTS = "x-placement-lite-statements"
# The compared code (--compare) runs no scheduler loop where its
# filtered query is slower than this.
SLOW_QUERY_MS = 250


def query_path(k: int = 0, limit: int = 10) -> str:
    return "/allocation_candidates?" + urlencode({
        "resources": "VCPU:1,MEMORY_MB:256", "member_of": pool_aggregate(k),
        "limit": limit})


# ------------------------------------------------------------ workloads
class Failed(RuntimeError):
    """A request of a workload answered an error. On a Placement side it
    is reported in the table (OpenStack Placement 16's GET /usages at
    1.38+ answers 500 on PostgreSQL: a GROUP BY it lacks); on ours it
    stops the run."""


def _exchange(client, method, path, body=None):
    began = time.perf_counter()
    status, raw, headers = client.exchange(method, path, body)
    return time.perf_counter() - began, status, raw, headers


def timed(side, requests, status: int, check=None) -> dict:
    """Each (method, path, body) in turn from one client: wall ms, server
    CPU ms and statements per request; every answer must be `status`
    (Failed otherwise), and pass `check(body bytes)` if given, outside
    the time."""
    client = Client(side.http)
    times, stmts = [], []
    cpu0 = side.cpu()
    for method, path, body in requests:
        elapsed, got, raw, headers = _exchange(client, method, path, body)
        if got != status:
            raise Failed(f"{method} {path} answered {got}, not {status}: "
                         f"{_detail(raw)}")
        if check is not None:
            check(raw)
        times.append(elapsed)
        if headers.get(STATEMENTS):
            stmts.append(int(headers[STATEMENTS]))
    return {"ms": times, "cpu_ms": 1000 * (side.cpu() - cpu0) / len(requests),
            "stmts": statistics.median(stmts) if stmts else None}


def filtered(side, runs: int, expect) -> dict:
    from bench import matrix
    return matrix.latency(side, query_path(0), runs, expect)


def claim(side, runs: int, rnd: int, count: int) -> dict:
    """PUT /allocations of a new instance (VCPU 1, MEMORY_MB 256), each on
    another node of the cloud."""
    project, user = uid("bench-claims"), uid("bench-user")
    return timed(side, [("PUT", f"/allocations/{uuidlib.uuid4()}", {
        "allocations": {uid(f"node-{(rnd * runs + j) * 7919 % count}"): {
            "resources": {"VCPU": 1, "MEMORY_MB": 256}}},
        "project_id": project, "user_id": user,
        "consumer_generation": None, "consumer_type": "INSTANCE"}) for j in range(runs)],
        204)


def usages(side, runs: int) -> dict:
    """GET /usages of the project with USAGE_CONSUMERS consumers; the
    answer must count them all."""
    path = "/usages?" + urlencode({"project_id": cloud_usage_project()})

    def all_counted(raw):
        # Grouped by consumer type (1.38): these consumers have none.
        counted = sum(g.get("consumer_count", 0)
                      for g in json.loads(raw)["usages"].values())
        if counted != USAGE_CONSUMERS:
            raise Failed(f"GET /usages counted {counted} consumers, not "
                         f"{USAGE_CONSUMERS}: {_detail(raw)}")
    return timed(side, [("GET", path, None)] * runs, 200, all_counted)


def _detail(raw: bytes) -> str:
    """An error answer's detail, in short."""
    try:
        text = json.loads(raw)["errors"][0]["detail"]
    except (ValueError, KeyError, IndexError, TypeError):
        text = raw.decode(errors="replace")
    return " ".join(text.split())[:160]


def scheduler(side, pool: int, clients: int = 20) -> dict:
    """`clients` schedulers racing for pool `pool`: each asks for
    candidates (limit=10), claims one at random, and goes on until none
    is left. Loops (claims granted or refused with 409) per second; the
    pool must end exactly full. An error (another status: OpenStack
    Placement on SQLite answers 500 "database is locked") is counted and
    the client goes on, as a scheduler retries, until 10 in a row."""
    path = query_path(pool)
    project, user = uid("bench-scheduler"), uid("bench-user")
    lock = threading.Lock()
    tally = {"granted": 0, "refused": 0, "errors": 0, "get": [], "put": [], "stmts": []}

    def work(i):
        client = Client(side.http)
        rng = random.Random(i)
        failed = 0  # in a row: a scheduler retries an error, but not forever
        while failed < 10:
            got, status, raw, headers = _exchange(client, "GET", path)
            if status != 200:
                with lock:
                    tally["errors"] += 1
                failed += 1
                continue
            found = json.loads(raw)["allocation_requests"]
            if not found:
                return
            pick = rng.choice(found)
            put, status, raw, h2 = _exchange(
                client, "PUT", f"/allocations/{uuidlib.uuid4()}", {
                    "allocations": pick["allocations"], "project_id": project,
                    "user_id": user, "consumer_generation": None,
                    "consumer_type": "INSTANCE"})
            with lock:
                tally["get"].append(got)
                tally["put"].append(put)
                key = {204: "granted", 409: "refused"}.get(status, "errors")
                tally[key] += 1
                if headers.get(STATEMENTS) and h2.get(STATEMENTS):
                    tally["stmts"].append(int(headers[STATEMENTS]) + int(h2[STATEMENTS]))
            failed = failed + 1 if key == "errors" else 0

    cpu0 = side.cpu()
    began = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - began
    cpu = side.cpu() - cpu0
    loops = tally["granted"] + tally["refused"]
    client = Client(side.http)
    used = sum(client.get(f"/resource_providers/{uid(f'pool-{pool}-{j}')}/usages")[1]
               ["usages"].get("VCPU", 0) for j in range(POOL_SIZE))
    capacity = POOL_SIZE * POOL_VCPU
    # Not exact: the pool ended over (or under) its capacity, or a claim
    # failed otherwise than by a 409; "used" and "errors" say which.
    return {"per_s": loops / wall, "cpu_ms": 1000 * cpu / max(loops, 1),
            "stmts": statistics.median(tally["stmts"]) if tally["stmts"] else None,
            "exact": used == capacity and tally["granted"] == capacity
            and not tally["errors"], "granted": tally["granted"], "used": used,
            "capacity": capacity, "errors": tally["errors"],
            "get_ms": 1000 * statistics.median(tally["get"]) if tally["get"] else None,
            "put_ms": 1000 * statistics.median(tally["put"]) if tally["put"] else None}


# --------------------------------------------------------------- driver
def run(args) -> dict:
    from bench import complete, matrix, placement16
    workdir = tempfile.mkdtemp(prefix="pl-full-", dir=args.workdir)
    trees = [("new", matrix.REPO)]
    worktrees: list = []
    if args.compare:
        trees.insert(0, ("base", matrix.checkout(workdir, "base", args.compare, worktrees)))
    variants = [v for v in ("idle", "full") if v in args.variants.split(",")]
    rows: dict = {}
    checked = [0]
    started = time.time()
    port = args.port
    try:
        for count in [int(x) for x in args.sizes.split(",")]:
            sides = []
            try:
                for variant in variants:
                    for label, tree in trees:
                        port += 1
                        side = matrix.Side(f"{label}-{variant}", tree, args.db, workdir, port,
                                           args.workers, args.threads,
                                           [(cloud_shape(variant, args.sharing), count)])
                        side.variant, side.code = variant, label
                        sides.append(side)
                        print(f"# {side.label} {count}: loaded {side.load_seconds}",
                              file=sys.stderr)
                    if args.placement:
                        port += 1
                        side = placement16.PlacementSide(
                            variant, args.db, workdir, port, args.workers, args.threads,
                            count, args.sharing)
                        # Checked against placement-lite's reference in the
                        # same world (its own database holds the same Cloud).
                        side.reference = placement16.SameWorld(
                            next(s.reference for s in sides
                                 if s.variant == variant and s.code == "new"))
                        sides.append(side)
                        print(f"# {side.label} {count}: loaded {side.load_seconds}",
                              file=sys.stderr)
                _measure(sides, count, args, rows, checked, complete)
            finally:
                for side in sides:
                    side.stop()
    finally:
        matrix.remove_worktrees(worktrees)
    return {"db": args.db, "workers": args.workers, "threads": args.threads,
            "compare": args.compare, "placement": args.placement,
            "sharing": args.sharing,
            "minutes": round((time.time() - started) / 60, 1),
            "load_average": [round(x, 2) for x in __import__("os").getloadavg()],
            "rows": rows, "answers_checked": checked[0]}


def _measure(sides, count, args, rows, checked, complete) -> None:
    from bench import matrix
    size = f"{count // 1000}k" if count >= 1000 else str(count)

    def rounds(name, work, n_rounds, applies=lambda side: True):
        per = {s.label: [] for s in sides if applies(s)}
        failed = {}
        for rnd in range(n_rounds):
            order = sides if rnd % 2 == 0 else sides[::-1]
            for side in order:
                if applies(side) and side.label not in failed:
                    try:
                        per[side.label].append(work(side, rnd))
                    except Failed as exc:
                        if side.code != "placement":
                            raise
                        failed[side.label] = str(exc)
        rows[name] = {label: {"failed": failed[label]} if label in failed
                      else matrix._merge(res) for label, res in per.items()}
        for label, res in per.items():
            if label in failed:
                continue
            for key in ("get_ms", "put_ms"):
                if res and key in res[0]:
                    got = [r[key] for r in res if r[key] is not None]
                    rows[name][label][key] = statistics.median(got) if got else None
            for key in ("used", "capacity", "errors"):
                if res and key in res[0]:
                    rows[name][label][key] = [r[key] for r in res]
        print(f"# {name}: " + json.dumps(rows[name]), file=sys.stderr)

    def query(side, rnd):
        # Pool 0's 64 idle nodes, which no workload claims from: 10.
        expect = complete.Expected(f"cloud {size}: filtered limit=10 [{side.label}]",
                                   side.reference, query_path(0),
                                   complete.bounded(POOL_SIZE, 10))
        out = filtered(side, max(2, args.runs // args.rounds), expect)
        expect.settle()
        checked[0] += expect.checked
        return out

    rounds(f"cloud {size}: filtered query, limit=10", query, args.rounds)
    rounds(f"cloud {size}: claim (PUT /allocations)",
           lambda side, rnd: claim(side, max(2, args.runs // args.rounds), rnd, count),
           args.rounds)
    rounds(f"cloud {size}: GET /usages, {USAGE_CONSUMERS} consumers",
           lambda side, rnd: usages(side, max(2, args.runs // args.rounds)), args.rounds,
           applies=lambda side: side.variant == "full")
    loops = min(args.loops, POOLS - 1)
    query = rows[f"cloud {size}: filtered query, limit=10"]
    if loops:
        # The code before (--compare) whose filtered query takes a second
        # would take most of an hour for one race: it is left out (its
        # cell shows "-"). Placement always races: its rate is a target's.
        rounds(f"cloud {size}: scheduler loop, 20 clients", lambda side, rnd:
               scheduler(side, 1 + rnd), loops,
               applies=lambda side: side.code != "base" or query.get(
                   side.label, {}).get("median", 0) < SLOW_QUERY_MS)


def add_parser(sub):
    p = sub.add_parser("full", help="issue 29: full clouds beside idle ones, "
                       "optionally against another commit, alternately")
    p.add_argument("--db", choices=("sqlite", "mysql", "mysqldb", "postgresql"),
                   default="sqlite")
    p.add_argument("--sizes", default="3000,10000",
                   help="cloud sizes (compute nodes besides the pools)")
    p.add_argument("--variants", default="idle,full")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--compare", help="a commit to run alternately against this tree")
    p.add_argument("--placement", action="store_true",
                   help="OpenStack Placement 16 as a side of each variant too "
                   "(--workers processes x --threads threads under waitress)")
    p.add_argument("--sharing", action="store_true",
                   help="a sharing provider of DISK_GB in each pool's aggregate")
    p.add_argument("--runs", type=int, default=40, help="requests per latency figure")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--loops", type=int, default=2,
                   help=f"scheduler rounds per side (at most {POOLS - 1})")
    p.add_argument("--port", type=int, default=19300)
    p.add_argument("--workdir", default=None)
    p.add_argument("--json", action="store_true")
    return p


def table(result) -> str:
    """One line per figure: each side's median (CPU, statements; "-" where
    a side does not count them), then new against base and against
    Placement per variant, and full against idle for the new code."""
    rows = result["rows"]
    order = [f"{code}-{variant}" for variant in ("idle", "full")
             for code in ("base", "new", "placement")]
    labels = [lab for lab in order if any(lab in per for per in rows.values())]
    # (heading, the other side, the new side): > 1, the new side is better.
    ratios = [(f"new/{code} {variant}", f"{code}-{variant}", f"new-{variant}")
              for code in ("base", "placement") for variant in ("idle", "full")
              if f"{code}-{variant}" in labels and f"new-{variant}" in labels]
    if "new-idle" in labels and "new-full" in labels:
        ratios.append(("full/idle (new)", "new-idle", "new-full"))
    head = ["figure"] + labels + [r[0] for r in ratios]
    lines = [f"{result['db']}{', sharing providers' if result.get('sharing') else ''}, "
             f"{result['workers']} workers x {result['threads']} threads, "
             f"load average {result['load_average']}, {result['minutes']} min; "
             f"{result['answers_checked']} timed candidates answers checked complete",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def ratio(per, a, b):
        x, y = per.get(a, {}).get("median"), per.get(b, {}).get("median")
        if not x or not y:
            return "-"
        unit = per[a]["unit"]
        return f"{(x / y if unit in ('ms', 'MiB') else y / x):.2f}x"

    for name, per in rows.items():
        cells = [name] + [_cell(per.get(lab)) for lab in labels]
        cells += [ratio(per, other, new) for _h, other, new in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(fig) -> str:
    if not fig:
        return "-"
    if fig.get("failed"):
        return f"FAILS: {fig['failed']}"
    text = f"{fig['median']:.2f} {fig['unit']}"
    if fig.get("exact") is not None:
        text += " exact" if fig["exact"] else " NOT EXACT"
        if not fig["exact"] and fig.get("used"):
            text += (f" (VCPU used {'/'.join(map(str, fig['used']))} of "
                     f"{fig['capacity'][0]}, granted {'/'.join(map(str, fig['granted']))}"
                     f", errors {'/'.join(map(str, fig['errors']))})")
    stmts = f"{fig['stmts']:g}" if fig.get("stmts") else "-"
    text += f" ({fig['cpu_ms']:.1f} ms CPU, {stmts} stmts)"
    if fig.get("get_ms") is not None:
        text += f"; GET {fig['get_ms']:.1f} / PUT {fig['put_ms']:.1f} ms"
    return text
