"""python -m bench answer-memory: a worker's resident memory across one
huge candidates answer.

The world is `--trees` trees, each a root with `--children` children of
`--units` CUSTOM_WIDE; the query asks for G granular groups of
CUSTOM_WIDE:1 with group_policy=none, so each tree holds children**G
candidates and the answer is as big as the request's combination budget
allows (candidates/combiner.py, REQUEST_STEPS): about 0.9 million
candidates, hundreds of MB of JSON. The server runs one worker with
`--max-allocation-candidates -1` (no cap, as Placement), a fresh one per
query (`--from-sql`: with facts_in_memory off, so the search reads
everything from the database). After a warm-up request (`limit=1`, so the worker holds its copy
of the facts and has built the query's statements) and a pause, the
worker's VmRSS is its idle size; during the answer it is sampled every
20 ms (peak), and read again 3 s after the last byte (after).

The client reads the answer in 1 MiB pieces and keeps none of it: it
counts bytes and candidates and takes a sha256 of the body, so two trees
can be compared byte for byte on the same world (uuids are uuid5 of the
providers' names).
"""
from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import threading
import time
from urllib.parse import urlencode

from sqlalchemy import func, insert, select

from bench import worlds
from bench.serving import ServerProcess, tree_env
from placement_lite.db import tables as t

WIDE = "CUSTOM_WIDE"
_KEY = b'"allocations"'


def load(db, trees: int, children: int, units: int) -> None:
    rc = t.resource_classes
    with db.write() as conn:
        if conn.execute(select(rc.c.id).where(rc.c.name == WIDE)).scalar() is None:
            top = conn.execute(select(func.max(rc.c.id))).scalar() or 0
            conn.execute(insert(rc).values(id=max(top + 1, t.CUSTOM_CLASS_MIN_ID),
                                           name=WIDE))
        bulk = worlds.Bulk(conn)
        for i in range(trees):
            root = bulk.provider(f"mem-{i}")
            for c in range(children):
                bulk.provider(f"mem-{i}-{c}", parent=root, root=root,
                              inventory={WIDE: units})
        bulk.flush()


def path(groups: int, limit=None) -> str:
    params = {f"resources{i}": f"{WIDE}:1" for i in range(1, groups + 1)}
    params["group_policy"] = "none"
    if limit:
        params["limit"] = str(limit)
    return "/allocation_candidates?" + urlencode(params)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


class Sampler(threading.Thread):
    """The largest VmRSS of `pid` seen while it runs, every `every` s."""

    def __init__(self, pid: int, every: float = 0.02):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.peak = 0
        self.samples = 0
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            self.peak = max(self.peak, rss_kb(self.pid))
            self.samples += 1
            self._done.wait(self.every)

    def stop(self):
        self._done.set()
        self.join()
        self.peak = max(self.peak, rss_kb(self.pid))


def fetch(url: str, target: str) -> dict:
    """One GET, read in pieces and not kept: status, bytes, candidates,
    sha256, seconds to the first byte and to the last."""
    host, port = url.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    started = time.perf_counter()
    conn.request("GET", target, headers={
        "x-auth-token": "admin", "accept": "application/json",
        "openstack-api-version": "placement latest"})
    resp = conn.getresponse()
    first = None
    digest = hashlib.sha256()
    size = count = 0
    tail = b""
    while True:
        piece = resp.read(1 << 20)
        if not piece:
            break
        if first is None:
            first = time.perf_counter() - started
        digest.update(piece)
        size += len(piece)
        # The key counted across a piece boundary too.
        joined = tail + piece
        count += joined.count(_KEY)
        tail = joined[-(len(_KEY) - 1):]
    seconds = time.perf_counter() - started
    conn.close()
    return {"status": resp.status, "bytes": size, "candidates": count,
            "sha256": digest.hexdigest(), "first_byte_s": round(first or seconds, 2),
            "seconds": round(seconds, 2),
            "transfer_encoding": resp.getheader("transfer-encoding"),
            "content_length": resp.getheader("content-length")}


def measure(db_url: str, port: int, groups: int, settle: float = 3.0,
            from_sql: bool = False) -> dict:
    env = tree_env(PLACEMENT_LITE_FACTS_IN_MEMORY="false") if from_sql else None
    server = ServerProcess(db_url, port, 1, ("--max-allocation-candidates", "-1"), env=env)
    try:
        pid = server.proc.pid
        warm = fetch(server.http, path(groups, limit=1))
        if warm["status"] != 200:
            raise RuntimeError(f"warm-up answered {warm['status']}")
        time.sleep(settle)
        idle = rss_kb(pid)
        sampler = Sampler(pid)
        sampler.start()
        try:
            got = fetch(server.http, path(groups))
        finally:
            sampler.stop()
        if got["status"] != 200:
            raise RuntimeError(f"the answer was {got['status']}")
        time.sleep(settle)
        after = rss_kb(pid)
    finally:
        server.stop()
    mb = lambda kb: round(kb / 1024, 1)  # noqa: E731
    return {"groups": groups, "idle_rss_mb": mb(idle), "peak_rss_mb": mb(sampler.peak),
            "after_rss_mb": mb(after), "growth_mb": mb(sampler.peak - idle),
            "rss_samples": sampler.samples, "answer_mb": round(got["bytes"] / 2**20, 1),
            **got}


def run(args) -> dict:
    workdir = tempfile.mkdtemp(prefix="pl-bench-mem-", dir=args.workdir)
    db_url = f"sqlite:///{os.path.join(workdir, 'answer_memory.sqlite')}"
    db = worlds.open_db(db_url)
    load(db, args.trees, args.children, args.units)
    db.dispose()
    out = {"world": {"trees": args.trees, "children": args.children, "units": args.units,
                     "providers": args.trees * (args.children + 1)},
           "facts": "from SQL" if args.from_sql else "the worker's copy",
           "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
           "answers": []}
    port = args.port
    for groups in args.groups:
        out["answers"].append(measure(db_url, port, groups, from_sql=args.from_sql))
        port += 1
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def add_parser(sub):
    p = sub.add_parser("answer-memory", help="a worker's RSS across one huge "
                       "candidates answer (max-allocation-candidates -1)")
    p.add_argument("--trees", type=int, default=2000)
    p.add_argument("--children", type=int, default=8)
    p.add_argument("--units", type=int, default=6)
    p.add_argument("--groups", type=lambda s: [int(g) for g in s.split(",")],
                   default=[3, 4, 5], help="granular groups per query, comma-separated")
    p.add_argument("--from-sql", action="store_true",
                   help="the worker reads every fact from SQL (facts_in_memory off)")
    p.add_argument("--port", type=int, default=18880)
    p.add_argument("--workdir", default=None)
    return p
