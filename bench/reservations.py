"""`python -m bench reservations`: what reservations in time cost
(issue 28's "How fast"), on one backend, 2 workers x 4 threads.

A full cloud (bench/worlds.py's `cloud-full`: NODES compute nodes 30-90%
used, and idle pools) with COUNT reservations bulk-loaded over the year
from now (bench/reservation_world.py; the loader checks the invariant
from the rows before the server starts), then a share reserved through
the API while the server runs. Timed, each in --rounds rounds:

- admitting a reservation (POST /reservations of 1 VCPU and 256 MB,
  which always fit: the loader left that headroom on every node), and
  one refused for want of room in a window the reservations fill;
- candidates for a one-week window, `limit=1000`, every answer checked
  against a brute-force count from the rows (as many as fit, up to the
  limit; each one fits); skipped, with a note, where the tree does not
  serve the route;
- a plain claim (PUT /allocations), alternately against the same claim
  on the code before reservations (--compare, in a cloud of its own
  without reservations);
- a provider's calendar over the next 30 days;
- a claim drawing from a reservation (its marker class named), timed in
  turn with plain claims, and candidates naming a reservation's marker
  (bench/reservation_draws.py), each checked from the rows;
- plain candidates right after a reservation write, and without one, in
  turn (bench/reservation_refresh.py), each answer checked from the rows;
- a race: 20 clients reserving the last room of one window on one new
  provider and 20 claiming it, until refused: exactly its capacity is
  granted, and the rows agree (allocated + the peak reserved).

With several --counts each gets a fresh world, so the rows show how the
cost grows with the reservations held. After the runs, the invariant is
checked from the rows again (the API's reservations and claims included,
a drawn allocation counted once, inside its reservation's amount).
"""
from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from urllib.parse import urlencode

from bench import complete, full, matrix, runner, serving
from bench import reservation_draws as draws
from bench import reservation_refresh as refresh
from bench import reservation_world as world
from bench.client import Client
from bench.full import timed
from bench.reservation_world import iso
from bench.worlds import cloud_shape

HERE = os.path.dirname(os.path.abspath(__file__))
# The first commit of reservations on main (their tables, migration
# 0008): its parent is the code a claim is compared with.
BEFORE_RESERVATIONS = "cc94b17~1"
CANDIDATES = "/reservations/allocation_candidates"
# A large instance: where reservations fill a node in the window, it
# does not fit there though it would fit beside the allocations alone.
WANTED = {"VCPU": 12, "MEMORY_MB": 1024}
SMALL = {"VCPU": 1, "MEMORY_MB": 256}
OWNER = {"project_id": world.uid("bench-admit-project"),
         "user_id": world.uid("bench-admit-user")}
# Strides through the cloud's nodes, one offset per workload, so no node
# is asked for more than the loader's headroom.
STRIDE, OFFSETS = 7919, {"admit": 1, "api": 2, "warm": 3, "calendar": 4, "draw": 5,
                       "refresh": 6}
TARGETS = {"admit": 10.0, "candidates": 50.0, "calendar": 10.0, "claim": 1.2}


def size(count: int) -> str:
    return (f"{count // 1_000_000}M" if count >= 1_000_000 and not count % 1_000_000
            else f"{count // 1000}k" if count >= 1000 else str(count))


class Rows:
    """The side's database, read directly (bench/reservation_world.py)."""

    def __init__(self, url: str):
        from sqlalchemy import create_engine
        self.engine = create_engine(url)

    def __getattr__(self, name):
        def call(*args):
            with self.engine.connect() as conn:
                return getattr(world, name)(conn, *args)
        return call

    def dispose(self):
        self.engine.dispose()


def _node(side, kind: str) -> str:
    """The next node of `kind`'s walk through the cloud, on this side."""
    i = side.walks.get(kind, 0)
    side.walks[kind] = i + 1
    return world.uid(f"node-{(i * STRIDE + OFFSETS[kind]) % side.nodes}")


def _reservation(side, rng: random.Random, kind: str) -> dict:
    """A small reservation on the next node of `kind`'s walk, in a random
    window of an hour to three weeks within the year ahead."""
    start = side.now + rng.randrange(world.HOUR, 330 * world.DAY)
    length = rng.randrange(world.HOUR, world.LONGEST)
    return {**OWNER, "start": iso(start), "end": iso(start + length),
            "allocations": {_node(side, kind): {"resources": dict(SMALL)}}}


def admit(side, runs: int, rnd: int) -> dict:
    rng = random.Random(f"admit-{rnd}")
    return timed(side, [("POST", "/reservations", _reservation(side, rng, "admit"))
                        for _ in range(runs)], 201)


def refuse(side, runs: int, rnd: int) -> dict:
    """Reservations asking one VCPU more than a window leaves on a node."""
    if len(side.refusals) < (rnd + 1) * runs:
        raise RuntimeError(f"only {len(side.refusals)} windows to refuse found; "
                           f"{(rnd + 1) * runs} wanted")
    out = []
    for node, start, end, vcpu in side.refusals[rnd * runs:(rnd + 1) * runs]:
        out.append(("POST", "/reservations", {
            **OWNER, "start": iso(start), "end": iso(end),
            "allocations": {node: {"resources": {"VCPU": vcpu}}}}))
    return timed(side, out, 409)


def calendar(side, runs: int, rnd: int) -> dict:
    return timed(side, [("GET", "/reservations/calendar/resource_providers/"
                         + _node(side, "calendar"), None) for _ in range(runs)], 200)


class BruteForce:
    """What a window candidates answer must hold, counted from the rows:
    the providers where WANTED fits throughout the window (a reference
    for complete.Expected)."""

    source = "a brute-force count of the providers with room, from the rows"

    def __init__(self, rows: Rows, start: int, end: int, limit: int):
        self.rows, self.start, self.end, self.limit = rows, start, end, limit
        self.fits: set = set()

    def count(self, path: str) -> int:
        self.fits = self.rows.fitting(self.start, self.end, WANTED)
        return complete.bounded(len(self.fits), self.limit)


class Fits(complete.Expected):
    """As many candidates as the brute force finds (up to the limit), and
    each of them one it found."""

    def check(self, raw: bytes, where: str = "") -> None:
        super().check(raw, where)
        named = {rp for req in json.loads(raw)["allocation_requests"]
                 for rp in req["allocations"]}
        wrong = named - self.reference.fits
        if wrong:
            raise complete.Incomplete(
                f"WRONG ANSWER: {self.workload}{where}: {len(wrong)} candidates "
                f"have no room in the window ({self.source}), e.g. "
                f"{sorted(wrong)[:3]}; GET {self.path}")


def candidates_path(side, limit: int = 1000) -> tuple[str, int, int]:
    """The one-week window a month ahead, and its query."""
    start = side.now + 30 * world.DAY
    return (CANDIDATES + "?" + urlencode({
        "resources": ",".join(f"{k}:{v}" for k, v in WANTED.items()),
        "start": iso(start), "end": iso(start + world.WEEK), "limit": limit}),
        start, start + world.WEEK)


def candidates(side, runs: int, rnd: int) -> dict:
    path, start, end = candidates_path(side)
    expect = Fits(f"{size(side.count)} reservations: window candidates [{side.label}]",
                  BruteForce(side.rows, start, end, 1000), path)
    out = matrix.latency(side, path, runs, expect)
    expect.settle()
    side.checked += expect.checked
    side.fitting = (len(expect.reference.fits),
                    len(side.rows.fitting(start, end, WANTED, False)))
    return out


def race(side, rnd: int, clients: int = 20, attempts: int = 3,
         amount: int = 5, capacity: int = 50) -> dict:
    """`clients` reserving `amount` VCPU over one window of a new provider
    of `capacity` VCPU, and as many claiming `amount` now, each until
    refused: exact when the grants add up to the capacity and the rows
    say the same (allocated + the peak reserved, from now on)."""
    client, rp = Client(side.http), str(uuidlib.uuid4())
    for method, path, body in (
            ("POST", "/resource_providers", {"name": f"bench-race-{rp}", "uuid": rp}),
            ("PUT", f"/resource_providers/{rp}/inventories", {
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": capacity}}})):
        status, raw, _h = client.exchange(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path} answered {status}: {full._detail(raw)}")
    start = side.rows.db_now() + world.DAY
    bodies = {"reserve": ("POST", "/reservations", {
        **OWNER, "start": iso(start), "end": iso(start + world.DAY),
        "allocations": {rp: {"resources": {"VCPU": amount}}}}, 201)}
    lock, tally = threading.Lock(), {"reserve": 0, "claim": 0, "refused": 0,
                                     "errors": 0, "stmts": []}

    def work(i):
        # Reservers and claimers start in turn, so neither kind has a head start.
        kind, mine = ("reserve" if i % 2 == 0 else "claim"), Client(side.http)
        for _ in range(attempts):
            method, path, body, ok = bodies.get(kind) or (
                "PUT", f"/allocations/{uuidlib.uuid4()}",
                matrix._claim_body(rp, OWNER["project_id"], OWNER["user_id"], amount), 204)
            status, raw, headers = mine.exchange(method, path, body)
            with lock:
                key = kind if status == ok else "refused" if status == 409 else "errors"
                tally[key] += 1
                if headers.get(matrix.STATEMENTS):
                    tally["stmts"].append(int(headers[matrix.STATEMENTS]))
            if status != ok:
                return

    wall, cpu = matrix._in_threads(side, work, 2 * clients)
    allocated, reserved, cap = side.rows.held_on(rp)
    granted = amount * (tally["reserve"] + tally["claim"])
    decided = tally["reserve"] + tally["claim"] + tally["refused"]
    return {"per_s": decided / wall, "cpu_ms": 1000 * cpu / max(decided, 1),
            "stmts": statistics.median(tally["stmts"]) if tally["stmts"] else None,
            "exact": (granted == cap == allocated + reserved and not tally["errors"]
                      and allocated == amount * tally["claim"]
                      and reserved == amount * tally["reserve"]),
            "granted": f"{tally['reserve']} reserved + {tally['claim']} claimed",
            "errors": tally["errors"]}


def through_api(side, count: int, threads: int) -> dict:
    """`count` reservations (1 VCPU, 256 MB, random windows) made through
    POST /reservations from `threads` clients while the server runs."""
    rng = random.Random("through the API")
    bodies = [_reservation(side, rng, "api") for _ in range(count)]
    stmts, failed = [], []

    def work(i):
        client = Client(side.http)
        for body in bodies[i::threads]:
            status, raw, headers = client.exchange("POST", "/reservations", body)
            if status != 201:
                failed.append(f"{status}: {full._detail(raw)}")
            elif headers.get(matrix.STATEMENTS):
                stmts.append(int(headers[matrix.STATEMENTS]))

    wall, cpu = matrix._in_threads(side, work, threads)
    if failed:
        raise RuntimeError(f"{len(failed)} reservations through the API failed, "
                           f"first: {failed[0]}")
    return {"per_s": count / wall, "cpu_ms": 1000 * cpu / count,
            "stmts": statistics.median(stmts) if stmts else None}


# --------------------------------------------------------------- driver
def _side(label, tree, args, workdir, port, count=None):
    scripts = [(os.path.join(HERE, "reservation_world.py"), count, args.seed)] if count else []
    side = matrix.Side(label, tree, args.db, workdir, port, args.workers, args.threads,
                       [(cloud_shape("full"), args.nodes)], scripts=scripts)
    side.nodes, side.count, side.walks, side.checked = args.nodes, count, {}, 0
    side.rows = Rows(side.url)
    side.now = side.rows.db_now()
    if count:
        side.loaded = json.loads(side.printed["reservation_world.py"])
    print(f"# {label}: loaded {side.load_seconds}", file=sys.stderr)
    return side


def _rounds(rows, name, sides, work, n_rounds):
    """`work(side, round)` for each side, alternating which goes first."""
    per = {s.label: [] for s in sides}
    for rnd in range(n_rounds):
        for side in (sides if rnd % 2 == 0 else sides[::-1]):
            per[side.label].append(work(side, rnd))
    rows[name] = {label: matrix._merge(res) for label, res in per.items()}
    for label, res in per.items():
        if "errors" in res[0]:
            rows[name][label]["errors"] = [r["errors"] for r in res]
            rows[name][label]["granted"] = [r["granted"] for r in res]
    print(f"# {name}: " + json.dumps(rows[name]), file=sys.stderr)


def _verdict(per: dict, target: float, ratio: bool = False) -> str:
    new = per.get("new", {}).get("median")
    if ratio:
        base = per.get("base", {}).get("median")
        if not (new and base):
            return f"target <= {target}x the code before"
        return (f"target <= {target}x the code before: {new / base:.2f}x, "
                + ("met" if new / base <= target else "not met"))
    return f"target <= {target:g} ms: " + ("met" if new and new <= target else "not met")


def _drawing(args, side, rows, notes, label, runs) -> None:
    """Claims drawing from a reservation, timed in turn with plain ones,
    in --claim-rounds rounds, then candidates naming one's marker
    (bench/reservation_draws.py)."""
    found = draws.setup(side, runs * args.claim_rounds, lambda: _node(side, "draw"))
    name = f"{label}: a claim drawing from a reservation (PUT /allocations, its marker)"
    _rounds(rows, name, [side], lambda s, r: draws.claims(
        s, found, runs, r, args.nodes, args.claim_rounds + r), args.claim_rounds)
    draws.check(side, found)
    rows[f"{name}, {draws.ratio(found)}"] = rows.pop(name)
    _rounds(rows, f"{label}: marker candidates (GET /allocation_candidates naming it)",
            [side], lambda s, r: draws.candidates(s, found, runs, r), args.rounds)
    notes.append(draws.note(found, label))
    side.checked += found.checked


def _measure(args, base, side, rows, notes) -> None:
    """Every workload on `side` (and the claim on `base` too)."""
    label, runs = f"{size(side.count)} reservations", max(2, args.runs // args.rounds)
    rnds = args.rounds
    api = through_api(side, args.through_api, args.threads)
    rows[f"{label}: reserving through the API, {args.threads} clients"] = {
        "new": {**api, "median": api["per_s"], "unit": "/s"}}
    side.refusals = side.rows.refusals(runs * rnds, side.nodes)
    timed(side, [("POST", "/reservations", _reservation(side, random.Random(0), "warm"))],
          201)
    def claim(s, n, r):
        return full.claim(s, n, r, args.nodes)

    steps = [("admitting a reservation (POST /reservations)", admit, [side], "admit"),
             ("a refused reservation (409, no room in the window)", refuse, [side], None),
             ("a plain claim (PUT /allocations)", claim, [s for s in (base, side) if s],
              "claim"),
             ("a provider's calendar, 30 days", calendar, [side], "calendar")]
    status, raw, _h = Client(side.http).exchange("GET", candidates_path(side)[0])
    if status == 200:
        steps.insert(2, ("window candidates, one week, limit=1000", candidates,
                         [side], "candidates"))
    else:
        notes.append(f"{label}: window candidates skipped: GET {CANDIDATES} answered "
                     f"{status} ({full._detail(raw)}): this tree does not serve it yet.")
    for title, work, sides, target in steps:
        name = f"{label}: {title}"
        # The claim's ratio is a target, and claims are cheap: more rounds.
        _rounds(rows, name, sides, lambda s, r, work=work: work(s, runs, r),
                args.claim_rounds if target == "claim" else rnds)
        if target:
            verdict = _verdict(rows[name], TARGETS[target], target == "claim")
            rows[f"{name}, {verdict}"] = rows.pop(name)
    if hasattr(side, "fitting"):
        fit, alone = side.fitting
        notes.append(f"{label}: window candidates: {side.checked} answers checked, "
                     f"each {min(1000, fit)} of the {fit} providers with room for "
                     f"{WANTED} throughout the window ({alone} beside the allocations "
                     "alone), by brute force from the rows; each one of them")
    _drawing(args, side, rows, notes, label, runs)
    got, note = refresh.measure(side, runs, rnds, lambda: _node(side, "refresh"), label)
    rows.update(got)
    notes.append(note)
    name = f"{label}: race, 20 reserving + 20 claiming one window's last room"
    _rounds(rows, name, [side], lambda s, r: race(s, r), args.rounds)
    notes.append(f"{label}: race: granted per round {rows[name]['new']['granted']} "
                 "(5 VCPU each, 50 on the provider), errors "
                 f"{rows[name]['new']['errors']}")
    bad = side.rows.violations()
    if bad:
        raise RuntimeError(f"{label}: after the runs the invariant breaks at "
                           f"{len(bad)} keys, first: {bad[:3]}")
    notes.append(f"{label}: {side.loaded['reservations']} bulk-loaded in "
                 f"{side.loaded['load_seconds']} s (invariant checked in "
                 f"{side.loaded['checked_seconds']} s), {args.through_api} through "
                 "the API; after the runs open allocations + reserved <= capacity "
                 "(a drawn allocation counted inside its reservation) at every "
                 "key and instant, from the rows")


def run(args) -> dict:
    workdir = tempfile.mkdtemp(prefix="pl-reservations-", dir=args.workdir)
    worktrees: list = []
    rows: dict = {}
    notes: list = []
    checked = 0
    started, machine, port = time.time(), [runner.machine_ms()], args.port
    base = None
    try:
        if args.compare:
            tree = matrix.checkout(workdir, "base", args.compare, worktrees)
            base = _side("base", tree, args, workdir, port or serving.free_port())
        for count in [int(x) for x in args.counts.split(",")]:
            port += 1 if port else 0
            side = _side("new", matrix.REPO, args, workdir, port or serving.free_port(),
                         count)
            try:
                _measure(args, base, side, rows, notes)
                checked += side.checked
            finally:
                side.rows.dispose()
                side.stop()
    finally:
        if base is not None:
            base.rows.dispose()
            base.stop()
        matrix.remove_worktrees(worktrees)
    machine.append(runner.machine_ms())
    return {"db": args.db, "workers": args.workers, "threads": args.threads,
            "nodes": args.nodes, "compare": args.compare, "machine_ms": machine,
            "minutes": round((time.time() - started) / 60, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "rows": rows, "notes": notes,
            "answers_checked": checked}


def table(result) -> str:
    """matrix's table (base: the code before reservations, claims only),
    then the notes."""
    head = (f"{result['nodes']} nodes (cloud-full), --compare "
            f"{result['compare'] or '-'}, {result['minutes']} min")
    return "\n".join([head, matrix.table(result), ""]
                     + [f"- {note}" for note in result["notes"]])


def add_parser(sub):
    p = sub.add_parser("reservations", help="issue 28: reservations in time, "
                       "admitted, refused, found, claimed beside, drawn from, raced")
    p.add_argument("--db", choices=matrix.BACKENDS, default="sqlite")
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--counts", default="100000",
                   help="reservations bulk-loaded, one fresh world each "
                   "(e.g. 10000,100000,1000000)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--compare", default=BEFORE_RESERVATIONS,
                   help="the code a claim is compared with ('' for none; "
                   "default: the parent of the first reservations commit)")
    p.add_argument("--runs", type=int, default=40, help="requests per latency figure")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--claim-rounds", type=int, default=6,
                   help="alternating rounds of the claim against --compare")
    p.add_argument("--through-api", type=int, default=500,
                   help="reservations made through the API before the timed runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--port", type=int, default=0,
                   help="the first server's port, the next one's +1 (0: free ports)")
    p.add_argument("--workdir", default=None)
    p.add_argument("--json", action="store_true")
    return p
