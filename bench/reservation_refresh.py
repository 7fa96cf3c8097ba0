"""Plain candidates right after a reservation write, for `python -m bench
reservations` (docs/reservations.md, "Plain candidates";
placement_lite/candidates/ahead.py).

Each server process keeps the windows not ended in its copy of the
facts. A reservation write logs the providers it reserves on in the facts
log, so every process reads their windows again on its next plain
request: what that request costs is timed here, beside the same request
with no write before it.

Timed, in `rounds` rounds of `runs` pairs: `GET PATH` (VCPU:1,
MEMORY_MB:256, limit=1000, at the microversion every bench client asks
for), once right after an untimed POST /reservations by the same client
(SMALL on the next node of a stride of its own, a window starting within
three weeks and up to a week long: the loader's headroom takes it), once
with no write before it, the order alternating. With several worker
processes there is one client per process (`clients`: which process
holds the other end of a connection, read from /proc), taking the pairs
in turn; before each pair an untimed GET brings that process up to date
with the other clients' writes, so a request after a write catches up
that write alone, and one without catches up nothing. Only the GETs are
timed (wall ms; the server's CPU and statements per request).

Every timed answer is checked from the rows (`judge`), by brute force
(bench/reservation_world.py's `fitting`; the plain overlay is a window
from now to the end of time): each allocation request holds exactly the
request on one provider, no provider twice, no more than the limit; each
provider has room for it beside the open allocations (used - drawn) and
the most reserved at any instant from the database's now on; and where
fewer than the limit are named, every provider with room is among them.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import time
from urllib.parse import urlencode

from bench import complete, matrix
from bench import reservation_world as world
from bench.client import Client
from bench.full import Failed, _detail

WANTED = {"VCPU": 1, "MEMORY_MB": 256}  # what the timed request asks
SMALL = {"VCPU": 1, "MEMORY_MB": 256}  # what each write reserves
LIMIT = 1000
PATH = "/allocation_candidates?" + urlencode({
    "resources": ",".join(f"{k}:{v}" for k, v in WANTED.items()), "limit": LIMIT})
FOREVER = 2 ** 62  # the plain overlay's window ends with time itself
OWNER = {"project_id": world.uid("bench-refresh-project"),
         "user_id": world.uid("bench-refresh-user")}
SOURCE = "a brute force from the rows, from the database's now on"
WRONG, INCOMPLETE = "WRONG ANSWER", "INCOMPLETE ANSWER"


# ----------------------------------------------------------------- checking
def judge(conn, raw: bytes, before: int, limit: int = LIMIT) -> list[tuple[str, str]]:
    """What is wrong with a plain candidates answer for WANTED, as (kind,
    detail) (empty when nothing is), judged from the rows. `before`: the
    database's now read just before the request, so the server's now is
    between it and the now read here; the peak from an instant on only
    drops as it passes, so a provider lacking room now lacked it at the
    server's instant, and one with room at `before` still had it there."""
    body = json.loads(raw)
    wrong, named = [], []
    for req in body["allocation_requests"]:
        allocs = req["allocations"]
        named += list(allocs)
        if [a["resources"] for a in allocs.values()] != [WANTED]:
            wrong.append((WRONG, f"a candidate allocates {allocs}, "
                                 f"not {WANTED} on one provider"))
    if len(set(named)) != len(named):
        twice = sorted({rp for rp in named if named.count(rp) > 1})
        wrong.append((WRONG, f"{len(twice)} providers named twice, e.g. {twice[:3]}"))
    if len(body["allocation_requests"]) > limit:
        wrong.append((WRONG, f"{len(body['allocation_requests'])} candidates, "
                             f"more than the limit {limit}"))
    now = world.db_now(conn)
    lacking = set(named) - world.fitting(conn, now, FOREVER, WANTED, among=named)
    if lacking:
        wrong.append((WRONG, f"{len(lacking)} candidates have no room for {WANTED} "
                             "beside the open allocations and the peak reserved from "
                             f"now on ({SOURCE}), e.g. {sorted(lacking)[:3]}"))
    if len(set(named)) < limit:
        every = world.fitting(conn, before, FOREVER, WANTED)
        missing = every - set(named)
        if missing:
            wrong.append((INCOMPLETE, f"expected {complete.bounded(len(every), limit)} "
                                      f"candidates ({SOURCE}), got {len(set(named))}: "
                                      f"{len(missing)} with room left out, e.g. "
                                      f"{sorted(missing)[:3]}"))
    return wrong


def check(side, raw: bytes, before: int, workload: str) -> None:
    """judge, raising complete.Incomplete at the first thing wrong."""
    with side.rows.engine.connect() as conn:
        wrong = judge(conn, raw, before)
    if wrong:
        kind, detail = wrong[0]
        raise complete.Incomplete(f"{kind}: {workload}: {detail}; GET {PATH}")


# ------------------------------------------------------------- processes
def serving_pid(side, client: Client):
    """The server process holding the other end of `client`'s connection
    (Linux: /proc/net/tcp names the socket by its ports, /proc/PID/fd the
    process holding it), or None."""
    port = client.conn.sock.getsockname()[1]
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        # The server's end: its remote address is the client's port.
        inodes |= {f[9] for f in map(str.split, rows)
                   if int(f[2].rsplit(":", 1)[1], 16) == port}
    for pid in side.pids():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return pid
    return None


def clients(side, tries: int = 40) -> list[tuple[Client, object]]:
    """(client, the process serving it): one per worker process where
    `tries` connections find them all (the kernel hands each new one to
    whichever worker accepts first), else those found."""
    workers = side.pids()[1:] or side.pids()
    found: dict = {}
    for _ in range(tries):
        client = Client(side.http)
        client.exchange("GET", "/")
        pid = serving_pid(side, client)
        if pid is None:  # the processes cannot be told apart here: one client
            for other in found.values():
                other.conn.close()
            return [(client, None)]
        if pid in found:
            client.conn.close()
            continue
        found[pid] = client
        if len(found) == len(workers):
            break
    return [(client, pid) for pid, client in found.items()]


# ------------------------------------------------------------------ timed
def _send(client, method: str, path: str, body, status: int) -> bytes:
    got, raw, _h = client.exchange(method, path, body)
    if got != status:
        raise Failed(f"{method} {path} answered {got}, not {status}: {_detail(raw)}")
    return raw


def _timed_get(side, client, workload: str, into: dict) -> None:
    """One timed GET PATH, its figures added to `into`, then checked."""
    before = side.rows.db_now()
    cpu0 = side.cpu()
    began = time.perf_counter()
    status, raw, headers = client.exchange("GET", PATH)
    elapsed = time.perf_counter() - began
    into["cpu"] += side.cpu() - cpu0
    if status != 200:
        raise Failed(f"GET {PATH} answered {status}: {_detail(raw)}")
    into["ms"].append(elapsed)
    if headers.get(matrix.STATEMENTS):
        into["stmts"].append(int(headers[matrix.STATEMENTS]))
    check(side, raw, before, workload)


def _write(rng: random.Random, next_node, now: int) -> dict:
    """A reservation of SMALL on the next node, in a window starting
    within three weeks of `now`, up to a week long."""
    start = now + rng.randrange(world.HOUR, 3 * world.WEEK)
    return {**OWNER, "start": world.iso(start),
            "end": world.iso(start + rng.randrange(world.HOUR, world.WEEK)),
            "allocations": {next_node(): {"resources": dict(SMALL)}}}


def pairs(side, served: list, runs: int, rnd: int, next_node, label: str) -> dict:
    """`runs` pairs (the module's docstring): {"after": figures, "without":
    figures}, as bench/full.py's timed gives them."""
    rng = random.Random(f"refresh-{rnd}")
    now = side.rows.db_now()
    got = {kind: {"ms": [], "cpu": 0.0, "stmts": []} for kind in ("after", "without")}
    for i in range(runs):
        client = served[i % len(served)][0]
        if len(served) > 1:
            _send(client, "GET", PATH, None, 200)

        def after():
            _send(client, "POST", "/reservations", _write(rng, next_node, now), 201)
            _timed_get(side, client, f"{label}, after a write", got["after"])

        def without():
            _timed_get(side, client, f"{label}, without a write", got["without"])

        for step in ((after, without) if (rnd + i) % 2 == 0 else (without, after)):
            step()
    return {kind: {"ms": f["ms"], "cpu_ms": 1000 * f["cpu"] / runs,
                   "stmts": statistics.median(f["stmts"]) if f["stmts"] else None}
            for kind, f in got.items()}


def measure(side, runs: int, rounds: int, next_node, label: str) -> tuple[dict, str]:
    """The figure's two rows (after a write, with after / without in its
    name; without) and a note; side.checked counts the answers."""
    served = clients(side)
    per = [pairs(side, served, runs, rnd, next_node, label) for rnd in range(rounds)]
    after = matrix._merge([p["after"] for p in per])
    without = matrix._merge([p["without"] for p in per])
    name = (f"{label}: plain candidates right after a reservation write "
            f"(limit={LIMIT}), after a write / without: "
            f"{after['median'] / without['median']:.2f}x")
    rows = {name: {"new": after},
            f"{label}: the same plain candidates, no write before them": {"new": without}}
    side.checked += 2 * runs * rounds
    with side.rows.engine.connect() as conn:
        fit = len(world.fitting(conn, world.db_now(conn), FOREVER, WANTED))
    pids = [pid for _c, pid in served if pid is not None]
    # A connection closed and opened again may land on another process.
    held = all(serving_pid(side, client) == pid for client, pid in served if pid)
    note = (f"{label}: plain candidates after a write: {2 * runs * rounds} answers "
            f"checked ({runs * rounds} after a write, as many without), each "
            f"{min(LIMIT, fit)} of the {fit} providers with room for {WANTED} "
            "beside the open allocations and the peak reserved from now on, by "
            "brute force from the rows; served by "
            + ("processes not told apart (one client)" if not pids
               else "one process" if len(pids) == 1
               else f"{len(pids)} processes in turn, one client each")
            + ("" if held else " (a connection moved to another process meanwhile)"))
    return rows, note
