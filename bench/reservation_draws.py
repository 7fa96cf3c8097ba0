"""Drawing from a reservation, for `python -m bench reservations`
(docs/reservations.md, "Using a reservation"): inside a reservation R's
window, a claim that names R's marker class on one of R's providers
draws its other classes there from R, and GET /allocation_candidates
naming the marker offers R's providers alone, with what R has left.

Made through the API while the server runs (`setup`): reservations of a
project of their own, active from now for a day, each on a node where it
fits beside the allocations and the reservations there with the
loader's HEADROOM still free (so the other workloads visiting the node
still find theirs), each holding PER small claims; and one probe
reservation on three such nodes, drawn dry on the first and half on the
second before anything is timed. Then:

- a claim drawing from a reservation (`claims`): PUT /allocations of a
  new consumer of R's project, 1 VCPU and 256 MB with R's marker on R's
  node, PER consumers a reservation; every answer must be 204. Each
  round also times as many plain claims (bench/full.py's, on nodes of
  their own), the order alternating, so drawn / plain compares the two
  under the same load. Afterwards the rows must agree (`check`): each
  reservation gave out what its claims drew, the inventories' kept
  `used` and `drawn` are the sums of their rows, no reservation has
  given out more than it holds, and nothing on the nodes is over
  capacity (open allocations + the peak reserved);
- marker candidates (`candidates`): GET /allocation_candidates for
  `VCPU:1,MEMORY_MB:256` and the probe's marker. Every answer is checked
  against a brute force from the rows (`drawable`): exactly the probe's
  providers where what it has left, and the provider's own room, fit the
  request (the two it was not drawn dry on), each offered alone with the
  marker on it, and the summaries showing what it has left there and the
  marker units its consumers hold.
"""
from __future__ import annotations

import json
import statistics
import uuid as uuidlib
from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlencode

from sqlalchemy import func, select

from bench import complete, full, matrix
from bench import reservation_world as world
from bench.client import Client
from placement_lite.db import tables as t

MARKER = "CUSTOM_RESERVATION_"
SMALL = {"VCPU": 1, "MEMORY_MB": 256}
PER = 4  # claims drawing from each reservation
HOLD = {name: PER * n for name, n in SMALL.items()}
PROBE = {name: 2 * n for name, n in SMALL.items()}  # on each of PROBE_NODES
PROBE_NODES = 3
OWNER = {"project_id": world.uid("bench-draw-project"),
         "user_id": world.uid("bench-draw-user")}


def marker_name(reservation_uuid: str) -> str:
    """The class a claim names to draw from a reservation, spelled here
    from docs/reservations.md ("The marker class"), not by the ledger."""
    return MARKER + reservation_uuid.upper().replace("-", "_")


@dataclass
class Draws:
    """The reservations made to draw from, and what was drawn."""
    held: list = field(default_factory=list)  # (reservation uuid, node uuid)
    probe: str = ""
    probe_nodes: list = field(default_factory=list)
    made: int = 0  # claims drawn from `held`, PER to a reservation in turn
    drawn_ms: list = field(default_factory=list)
    plain_ms: list = field(default_factory=list)
    checked: int = 0
    offered: int = 0


# ------------------------------------------------------------- the rows
def _names(conn) -> dict[int, str]:
    rc = t.resource_classes
    return dict(conn.execute(select(rc.c.id, rc.c.name)).all())


def room(conn, uuids: list[str], start: int, end: int) -> dict[str, dict[str, float]]:
    """uuid -> class -> what the open allocations and the reservations
    leave free throughout [start, end) (reservation_world.free_over)."""
    rps = dict(conn.execute(select(t.resource_providers.c.id, t.resource_providers.c.uuid)
                            .where(t.resource_providers.c.uuid.in_(uuids))).all())
    names = _names(conn)
    out: dict = defaultdict(dict)
    for (rp, rc), free in world.free_over(conn, start, end, set(rps)).items():
        out[rps[rp]][names[rc]] = free
    return out


def given(conn, r_uuid: str) -> dict[tuple[str, str], int]:
    """(provider uuid, class) -> what the reservation's drawn rows hold,
    its marker's included."""
    a, r, rp = t.allocations, t.reservations, t.resource_providers
    return {(u, name): int(n) for u, name, n in conn.execute(
        select(rp.c.uuid, t.resource_classes.c.name, func.sum(a.c.used))
        .join(r, r.c.id == a.c.reservation_id)
        .join(rp, rp.c.id == a.c.resource_provider_id)
        .join(t.resource_classes, t.resource_classes.c.id == a.c.resource_class_id)
        .where(r.c.uuid == r_uuid).group_by(rp.c.uuid, t.resource_classes.c.name))}


def draws_disagree(conn) -> list[str]:
    """Where the rows of draws disagree (empty when they agree): an
    inventory whose kept `used` or `drawn` is not the sum of its
    allocation rows (all of them, the drawn ones); a reservation that has
    given out more of a provider's class than it holds there, or what it
    holds none of there but its own marker; an allocation of a class the
    provider has no inventory of (but a marker)."""
    inv, a, r, ra = t.inventories, t.allocations, t.reservations, t.reservation_amounts
    names = _names(conn)
    every, open_ = world.allocated(conn, drawn=True), world.allocated(conn)
    kept = {(rp, rc): (int(used or 0), int(drawn or 0)) for rp, rc, used, drawn in
            conn.execute(select(inv.c.resource_provider_id, inv.c.resource_class_id,
                                inv.c.used, inv.c.drawn))}
    out = []
    for key in sorted(set(kept) | set(every)):
        rows = (every.get(key, 0), every.get(key, 0) - open_.get(key, 0))
        if key not in kept and not names[key[1]].startswith(MARKER):
            out.append(f"provider {key[0]}: {rows[0]} of {names[key[1]]} allocated, "
                       "no inventory")
        elif key in kept and kept[key] != rows:
            out.append(f"provider {key[0]}, {names[key[1]]}: (used, drawn) kept "
                       f"{kept[key]}, the rows hold {rows}")
    held = {(rid, rp, rc): int(n) for rid, rp, rc, n in conn.execute(
        select(ra.c.reservation_id, ra.c.resource_provider_id,
               ra.c.resource_class_id, ra.c.amount))}
    for rid, uuid, rp, rc, n in conn.execute(
            select(a.c.reservation_id, r.c.uuid, a.c.resource_provider_id,
                   a.c.resource_class_id, func.sum(a.c.used))
            .join(r, r.c.id == a.c.reservation_id)
            .group_by(a.c.reservation_id, r.c.uuid, a.c.resource_provider_id,
                      a.c.resource_class_id)):
        if names[rc] != marker_name(uuid) and n > held.get((rid, rp, rc), 0):
            out.append(f"reservation {uuid} gave out {n} of {names[rc]} on provider "
                       f"{rp}, holding {held.get((rid, rp, rc), 'none')}")
    return out


def drawable(conn, r_uuid: str, wanted: dict[str, int]) -> dict[str, dict]:
    """What a candidates answer for `wanted` and reservation `r_uuid`'s
    marker offers, by brute force from the rows: each of its providers
    where every class of `wanted` fits, within the unit limits, both what
    the reservation has left there (its amount less its drawn rows) and
    the provider's own free room (capacity less every row): uuid ->
    {"room": class -> the smaller of the two, "marker": the marker units
    its consumers hold there}. Empty when it is not active."""
    inv, r, ra = t.inventories, t.reservations, t.reservation_amounts
    row = conn.execute(select(r.c.id, r.c.start_at, r.c.end_at)
                       .where(r.c.uuid == r_uuid)).first()
    if row is None or not row.start_at <= world.db_now(conn) < row.end_at:
        return {}
    names = _names(conn)
    ids = {name: rc for rc, name in names.items()}
    held = {(rp, rc): int(n) for rp, rc, n in conn.execute(
        select(ra.c.resource_provider_id, ra.c.resource_class_id, ra.c.amount)
        .where(ra.c.reservation_id == row.id))}
    rps = {rp for rp, _rc in held}
    uuids = dict(conn.execute(select(t.resource_providers.c.id, t.resource_providers.c.uuid)
                              .where(t.resource_providers.c.id.in_(sorted(rps)))).all())
    by_uuid = {u: rp for rp, u in uuids.items()}
    out_of = {(by_uuid.get(u), ids[name]): n for (u, name), n in given(conn, r_uuid).items()}
    caps, used = world.capacities(conn, rps), world.allocated(conn, rps, drawn=True)
    units = {(rp, rc): (lo, hi, step) for rp, rc, lo, hi, step in conn.execute(
        select(inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.min_unit,
               inv.c.max_unit, inv.c.step_size)
        .where(inv.c.resource_provider_id.in_(sorted(rps))))}
    out = {}
    for rp in sorted(rps):
        left = {}
        for name, n in wanted.items():
            key = (rp, ids[name])
            if key not in held or key not in units:
                break
            left[name] = min(held[key] - out_of.get(key, 0),
                             int(caps[key]) - used.get(key, 0))
            lo, hi, step = units[key]
            if not (lo <= n <= hi and n % step == 0 and n <= left[name]):
                break
        else:
            out[uuids[rp]] = {"room": left, "marker": out_of.get(
                (rp, ids.get(marker_name(r_uuid))), 0)}
    return out


# -------------------------------------------------------------- setting up
def _nodes(side, count: int, start: int, end: int, next_node) -> list[str]:
    """`count` distinct nodes from the walk `next_node` where HOLD fits
    throughout [start, end) with the loader's HEADROOM still free."""
    found: list = []
    for _batch in range(side.nodes // (4 * count) + 1):
        walked = list(dict.fromkeys(next_node() for _ in range(4 * count)))
        with side.rows.engine.connect() as conn:
            free = room(conn, walked, start, end)
        found += [node for node in walked if node not in found and all(
            free.get(node, {}).get(name, 0) >= n + world.HEADROOM[name] for name, n in HOLD.items())]
        if len(found) >= count:
            return found[:count]
    raise RuntimeError(f"only {len(found)} nodes have room for {HOLD} and the "
                       f"headroom from now for a day; {count} wanted")


def _reserve(client, start: int, end: int, amounts: dict) -> str:
    """A reservation of OWNER's over [start, end), which must be active."""
    status, raw, _h = client.exchange("POST", "/reservations", {
        **OWNER, "start": world.iso(start), "end": world.iso(end),
        "allocations": {rp: {"resources": dict(held)} for rp, held in amounts.items()}})
    body = json.loads(raw) if status == 201 else {}
    if body.get("status") != "active":
        raise RuntimeError(f"POST /reservations answered {status}, "
                           f"{body.get('status')}: {full._detail(raw)}")
    return body["id"]


def _claim(node: str, r_uuid: str, resources: dict) -> tuple[str, str, dict]:
    return ("PUT", f"/allocations/{uuidlib.uuid4()}", {
        "allocations": {node: {"resources": {**resources, marker_name(r_uuid): 1}}},
        **OWNER, "consumer_generation": None, "consumer_type": "INSTANCE"})


def setup(side, claims: int, next_node) -> Draws:
    """Reservations for `claims` drawing claims, PER a reservation, and
    the probe (the module's docstring), from the database's now (a start
    in the past is stored as now) for a day."""
    out, client = Draws(), Client(side.http)
    start = side.rows.db_now()
    end = start + world.DAY
    count = -(-claims // PER)
    nodes = _nodes(side, count + PROBE_NODES, start, end, next_node)
    out.held = [(_reserve(client, start, end, {node: HOLD}), node)
                for node in nodes[:count]]
    out.probe_nodes = nodes[count:]
    out.probe = _reserve(client, start, end, {node: PROBE for node in out.probe_nodes})
    full.timed(side, [_claim(out.probe_nodes[0], out.probe, PROBE),
                      _claim(out.probe_nodes[1], out.probe, SMALL)], 204)
    return out


# ------------------------------------------------------------------ timed
def claims(side, draws: Draws, runs: int, rnd: int, count: int, plain_round: int) -> dict:
    """`runs` claims drawing from the reservations in turn, and `runs`
    plain claims (bench/full.py's on a cloud of `count` nodes, round
    `plain_round` of its walk), the order alternating by round; the
    drawn claims' figures."""
    if draws.made + runs > PER * len(draws.held):
        raise RuntimeError(f"{PER * len(draws.held)} claims can draw; "
                           f"{draws.made + runs} wanted")
    requests = []
    for k in range(draws.made, draws.made + runs):
        r_uuid, node = draws.held[k // PER]
        requests.append(_claim(node, r_uuid, SMALL))
    steps = [lambda: full.claim(side, runs, plain_round, count),
             lambda: full.timed(side, requests, 204)]
    got = [step() for step in (steps if rnd % 2 == 0 else steps[::-1])]
    plain, drawn = got if rnd % 2 == 0 else got[::-1]
    draws.made += runs
    draws.drawn_ms += drawn["ms"]
    draws.plain_ms += plain["ms"]
    return drawn


def ratio(draws: Draws) -> str:
    drawn, plain = (statistics.median(ms) for ms in (draws.drawn_ms, draws.plain_ms))
    return (f"{drawn / plain:.2f}x a plain claim timed in turn with it "
            f"({1000 * plain:.2f} ms)")


def check(side, draws: Draws) -> None:
    """After the drawing claims, the rows (the module's docstring)."""
    per: dict = defaultdict(int)
    for k in range(draws.made):
        per[draws.held[k // PER]] += 1
    with side.rows.engine.connect() as conn:
        wrong = draws_disagree(conn)
        for (r_uuid, node), n in sorted(per.items()):
            want = {(node, name): n * amount for name, amount in SMALL.items()}
            want[(node, marker_name(r_uuid))] = n
            got = given(conn, r_uuid)
            if got != want:
                wrong.append(f"reservation {r_uuid} gave out {got}, its claims drew {want}")
        ids = set(conn.scalars(select(t.resource_providers.c.id).where(
            t.resource_providers.c.uuid.in_([node for _r, node in draws.held]))))
        wrong += [f"over capacity: {bad}" for bad in world.violations(conn, ids)]
    if wrong:
        raise RuntimeError(f"after {draws.made} drawing claims the rows disagree at "
                           f"{len(wrong)} places, first: {wrong[:3]}")


class Drawable:
    """What a marker candidates answer must hold, from the rows: a
    reference for complete.Expected (drawable)."""

    source = "a brute-force count of the reservation's providers with room, from the rows"

    def __init__(self, rows, r_uuid: str):
        self.rows, self.r_uuid, self.mark = rows, r_uuid, marker_name(r_uuid)
        self.room: dict = {}

    def count(self, path: str) -> int:
        with self.rows.engine.connect() as conn:
            self.room = drawable(conn, self.r_uuid, SMALL)
        return complete.bounded(len(self.room))


class Offered(complete.Expected):
    """As many candidates as the brute force finds, exactly its providers,
    each alone with the marker, and the summaries showing the
    reservation's room."""

    def check(self, raw: bytes, where: str = "") -> None:
        super().check(raw, where)
        body, ref = json.loads(raw), self.reference
        want = {**SMALL, ref.mark: 1}
        named, wrong = set(), []
        for req in body["allocation_requests"]:
            allocs = req["allocations"]
            named |= set(allocs)
            if [a["resources"] for a in allocs.values()] != [want]:
                wrong.append(f"a candidate allocates {allocs}, not {want} on one provider")
        if named != set(ref.room):
            wrong.append(f"the candidates name {sorted(named)}, not {sorted(ref.room)}")
        for rp, found in ref.room.items():
            shown = body["provider_summaries"].get(rp, {}).get("resources", {})
            room = {name: shown.get(name, {}).get("capacity", 0)
                    - shown.get(name, {}).get("used", 0) for name in SMALL}
            mark = {"capacity": found["marker"] + 1, "used": found["marker"]}
            if room != found["room"] or shown.get(ref.mark) != mark:
                wrong.append(f"{rp} shows {room} and the marker {shown.get(ref.mark)}, "
                             f"not {found['room']} and {mark}")
        if wrong:
            raise complete.Incomplete(f"WRONG ANSWER: {self.workload}{where}: "
                                      f"{wrong[0]} ({self.source}); GET {self.path}")


def candidates(side, draws: Draws, runs: int, rnd: int) -> dict:
    path = "/allocation_candidates?" + urlencode({"resources": ",".join(
        f"{k}:{v}" for k, v in {**SMALL, marker_name(draws.probe): 1}.items())})
    expect = Offered(f"marker candidates [{side.label}]", Drawable(side.rows, draws.probe),
                     path)
    out = matrix.latency(side, path, runs, expect)
    expect.settle()
    draws.checked += expect.checked
    draws.offered = len(expect.reference.room)
    return out


def note(draws: Draws, label: str) -> str:
    return (f"{label}: drawing: {draws.made} claims of {SMALL} drew from "
            f"{len(draws.held)} reservations ({PER} each, active from now for a "
            "day), each 204; afterwards each reservation had given out what its "
            "claims drew, the inventories' used and drawn were the sums of their "
            "rows, and nothing was over capacity; marker candidates: "
            f"{draws.checked} answers checked, each exactly the {draws.offered} of "
            f"the probe's {PROBE_NODES} providers with room left in it (one drawn "
            "dry before), with its room and marker in the summaries, by brute "
            "force from the rows")
