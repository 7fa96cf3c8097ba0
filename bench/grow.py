"""Worlds grown through the API while their server runs.

The matrix's other worlds are bulk-loaded before their server starts, so
each worker reads them whole when it starts. A cloud grows under a
running server instead: providers arrive through the API, every write
is logged in the facts log, and each worker brings its copy of the facts
up to date at its next read, reading again every provider changed since
its last one. After a large batch of writes that is hundreds or
thousands of providers, read in chunks (candidates/snapshot.py).

A grown world is built in steps, each one batch of writes between two
reads, written from several client threads (`grow`). A plan is a
comma-separated list of steps (`parse_plan`):

- `N` (e.g. `600`): N flat providers of the matrix's flat shape (VCPU 32,
  MEMORY_MB 8192, DISK_GB 8192, HW_CPU_X86_AVX2, in the aggregate the
  flat query asks for): POST /resource_providers, then PUT its
  inventories, traits and aggregates;
- `RxC` (e.g. `10x120`): R trees, each a root (DISK_GB 2048,
  COMPUTE_VOLUME_MULTI_ATTACH, the same aggregate; POST, then PUT
  inventories, traits and aggregates) with C children (CUSTOM_PF 4,
  HW_NIC_SRIOV; POST with the root as parent, then PUT inventories and
  traits). The roots go first, then all the children, spread over the
  threads.

Every query's count follows exactly from the plan (`GrownWorld.queries`).

A server answering for a grown world runs with /metrics on, so the
benchmark can hold one connection to each worker (`pin_workers`: a
connection stays with the worker that accepted it) and check every
worker's answers, not only those of whichever worker a timed client
reaches.
"""
from __future__ import annotations

import random
import re
import threading
import time
from typing import NamedTuple
from urllib.parse import urlencode

from bench.client import Client
from bench.complete import DEFAULT_CAP, bounded
from bench.worlds import AGGREGATE, uid

STATEMENTS = "x-placement-lite-statements"
PF = "CUSTOM_PF"
AVX2 = "HW_CPU_X86_AVX2"
ROOT_TRAIT = "COMPUTE_VOLUME_MULTI_ATTACH"
CHILD_TRAIT = "HW_NIC_SRIOV"
DEFAULT_PLAN = "600,5x100,10x120"

FLAT_QUERY = {"resources": "VCPU:1,DISK_GB:10,MEMORY_MB:256",
              "member_of": AGGREGATE, "required": AVX2}
PF_QUERY = {"resources": f"{PF}:1"}
PF_GRANULAR_QUERY = {"resources": "DISK_GB:10", "member_of": AGGREGATE,
                     "required": ROOT_TRAIT, "resources_PF": f"{PF}:1",
                     "required_PF": CHILD_TRAIT, "group_policy": "none"}


class Step(NamedTuple):
    """`flat` providers, or `roots` trees of `children` children each."""
    flat: int = 0
    roots: int = 0
    children: int = 0

    @property
    def providers(self) -> int:
        return self.flat + self.roots * (1 + self.children)

    @property
    def label(self) -> str:
        if self.flat:
            return f"+{self.flat} flat"
        return f"+{self.roots}x{self.children} trees"


def parse_plan(text: str) -> list:
    """`600,5x100,10x120` -> [Step(flat=600), Step(roots=5, children=100),
    Step(roots=10, children=120)]."""
    steps = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:x(\d+))?", part)
        if not m or int(m.group(1)) == 0 or m.group(2) == "0":
            raise ValueError(f"--grow: {part!r} is neither N (flat providers) "
                             "nor RxC (R roots of C children each), N, R, C > 0")
        steps.append(Step(roots=int(m.group(1)), children=int(m.group(2)))
                     if m.group(2) else Step(flat=int(m.group(1))))
    if not steps:
        raise ValueError("--grow: no steps")
    return steps


def path(query: dict, limit=None) -> str:
    q = dict(query)
    if limit:
        q["limit"] = str(limit)
    return "/allocation_candidates?" + urlencode(q)


class GrownWorld:
    """What the steps grown so far hold, and what each query must answer."""

    def __init__(self):
        self.flat = self.roots = self.children = 0

    @property
    def providers(self) -> int:
        return self.flat + self.roots + self.children

    def add(self, step: Step) -> None:
        self.flat += step.flat
        self.roots += step.roots
        self.children += step.roots * step.children

    def queries(self, cap=DEFAULT_CAP, first=None) -> list:
        """(label, path, the count a complete answer holds) for each query
        that has candidates in this world: the flat query, one per flat
        provider; CUSTOM_PF:1, one per child; the granular query (the
        root's DISK_GB, a child's CUSTOM_PF), one per child. The queries
        of step `first`'s shape come first."""
        flat, trees = [], []
        if self.flat:
            flat.append(("flat, full", path(FLAT_QUERY), bounded(self.flat, None, cap)))
        if self.children:
            trees += [("CUSTOM_PF, full", path(PF_QUERY),
                       bounded(self.children, None, cap)),
                      ("root + CUSTOM_PF child, limit=10", path(PF_GRANULAR_QUERY, 10),
                       bounded(self.children, 10, cap))]
        return trees + flat if first is not None and first.roots else flat + trees


# ------------------------------------------------------------- loading
def _send(client, method, url_path, body, expect=(200, 201, 204)):
    status, raw, headers = client.exchange(method, url_path, body)
    if status not in expect:
        raise RuntimeError(f"{method} {url_path} answered {status}: {raw[:300]!r}")
    return int(headers.get(STATEMENTS) or 0)


def _provider(client, name, inventories, trait, parent=None, aggregate=True):
    """One provider through the API: created, its inventory, a trait and
    (unless told not) the world's aggregate, and in a full cloud (FULL)
    its usage; the statements it took."""
    rp = uid(name)
    body = {"name": name, "uuid": rp}
    if parent is not None:
        body["parent_provider_uuid"] = uid(parent)
    sent = (_send(client, "POST", "/resource_providers", body)
            + _send(client, "PUT", f"/resource_providers/{rp}/inventories", {
                "resource_provider_generation": 0, "inventories": inventories})
            + _send(client, "PUT", f"/resource_providers/{rp}/traits", {
                "resource_provider_generation": 1, "traits": [trait]}))
    if aggregate:
        sent += _send(client, "PUT", f"/resource_providers/{rp}/aggregates", {
            "resource_provider_generation": 2, "aggregates": [AGGREGATE]})
    if FULL:
        sent += _use(client, name, rp, inventories)
    return sent


# Grow full clouds: each provider 30-90% used as it is created (matrix
# --cloud full sets it).
FULL = False
_HOLDERS = 3


def _use(client, name, rp, inventories):
    """A share of 30-90% of each class of `rp` (drawn per provider, as
    whole units), claimed by _HOLDERS new instances of its own."""
    share = random.Random(name).uniform(0.3, 0.9)
    sent = 0
    for k in range(_HOLDERS):
        held = {}
        for rc, spec in inventories.items():
            want = int(spec["total"] * share)
            n = want // _HOLDERS + (1 if k < want % _HOLDERS else 0)
            if n:
                held[rc] = n
        if held:
            sent += _send(client, "PUT", f"/allocations/{uid(f'{name}-holder-{k}')}", {
                "allocations": {rp: {"resources": held}},
                "project_id": uid(f"grown-project-{k}"), "user_id": uid("grown-user"),
                "consumer_generation": None, "consumer_type": "INSTANCE"})
    return sent


def _flat(client, i):
    return _provider(client, f"grown-cn-{i}", {
        "VCPU": {"total": 32}, "MEMORY_MB": {"total": 8192},
        "DISK_GB": {"total": 8192}}, AVX2)


def _root(client, r):
    return _provider(client, f"grown-tree-{r}", {"DISK_GB": {"total": 2048}}, ROOT_TRAIT)


def _child(client, rc):
    r, c = rc
    return _provider(client, f"grown-tree-{r}-pf{c}", {PF: {"total": 4}}, CHILD_TRAIT,
                     parent=f"grown-tree-{r}", aggregate=False)


def _in_threads(url, write, items, threads):
    """write(client, item) for every item, `threads` clients at once;
    the statements each write reported. A failed write stops the run."""
    stmts, failed = [], []
    lock = threading.Lock()

    def work(i):
        client = Client(url)
        try:
            for item in items[i::threads]:
                n = write(client, item)
                with lock:
                    stmts.append(n)
        except Exception as exc:  # noqa: BLE001 - raised again below
            failed.append(exc)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    if failed:
        raise failed[0]
    return stmts


def grow(url: str, world: GrownWorld, step: Step, threads: int) -> dict:
    """Write `step` into the server at `url` through the API, from
    `threads` clients; `world` then holds it. Returns the wall seconds
    and the statements of each provider's writes."""
    began = time.monotonic()
    if step.flat:
        stmts = _in_threads(url, _flat, list(range(world.flat, world.flat + step.flat)),
                            threads)
    else:
        _send(Client(url), "PUT", f"/resource_classes/{PF}", None, (201, 204))
        roots = list(range(world.roots, world.roots + step.roots))
        stmts = _in_threads(url, _root, roots, threads)
        stmts += _in_threads(url, _child, [(r, c) for r in roots
                                           for c in range(step.children)], threads)
    world.add(step)
    return {"seconds": time.monotonic() - began, "stmts": stmts}


# ------------------------------------------------------------- workers
_WORKER = re.compile(rb'placement_lite_facts_copy_providers\{[^}]*worker="([^"]+)"')


def worker_of(client) -> str:
    """The worker behind this client's connection, from /metrics."""
    status, raw, _headers = client.exchange("GET", "/metrics")
    m = _WORKER.search(raw) if status == 200 else None
    if m is None:
        raise RuntimeError(
            "a grown world needs /metrics with each worker's facts copy "
            f"(PLACEMENT_LITE_METRICS=true): GET /metrics answered {status}")
    return m.group(1).decode()


def pin_workers(url: str, workers: int, tries: int = 400) -> dict:
    """worker -> a Client whose connection that worker accepted, one per
    worker. Connections are opened until every worker has one (which
    worker accepts a connection is the kernel's choice)."""
    pinned = {}
    for _ in range(tries):
        client = Client(url)
        w = worker_of(client)
        if w in pinned:
            client.conn.close()
        else:
            pinned[w] = client
        if len(pinned) >= workers:
            return pinned
    raise RuntimeError(f"{url}: found {len(pinned)} of {workers} workers "
                       f"in {tries} connections")
