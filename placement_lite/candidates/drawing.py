"""Candidates that draw from a reservation: a request naming its marker.

A reservation R is used through its marker class (ledger/marker.py): a
claim's allocation on provider P that names the marker draws the
consumer's other classes on P from R (ledger/draws.py). A flavor made
for R asks GET /allocation_candidates for, say,
`resources=VCPU:2,MEMORY_MB:2048,CUSTOM_RESERVATION_<ID>:1`. No provider
has inventory of the marker, so the plain search would find nothing;
here the request is answered as the claim will judge it
(docs/reservations.md, "Using a reservation"):

- R not on record, or not active at the database's now: no candidates.
- Otherwise, one search of the request without the marker, over the
  trees holding R's providers alone (the sharing providers reaching them
  serve as usual; an in_tree would refuse them), with an Overlay
  (overlay.py) making each class R holds on each of its providers show
  as free exactly what R has left of it (R.amount - what R's drawn
  allocations hold there, never more than the provider's own free room).
- Of its candidates, those kept put the classes R holds on exactly one
  of R's providers P (where the marker goes, with the amount asked), all
  the marker group's classes R holds on P on P, and nothing on P that R
  does not hold there (the claim would refuse it). Other groups are
  answered as usual.
- `limit` (and max_allocation_candidates) cut what is kept, in the
  search's order (shuffled first when candidates are randomized).

The summaries are those of the answer, with the same Overlay: a
class R holds on P shows `capacity - used` = what R has left there. The
marker shows on R's providers among them, `used` = the marker units R's
consumers hold there, `capacity` = that plus the amount asked where a
candidate puts the marker (else `used`): capacity - used is what this
request may take there.

Requests naming no marker never come here: their path is untouched.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Optional

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from placement_lite import errors
from placement_lite.candidates import engine, filters, summaries
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.plan import Candidate
from placement_lite.candidates.query import CandidateRequest
from placement_lite.db import clock
from placement_lite.db import tables as t
from placement_lite.ledger import capacity, draws, marker

_PHRASE = "Invalid query string parameters"


def named(req: CandidateRequest) -> Optional[tuple[str, str]]:
    """(reservation uuid, suffix of the group naming its marker) when the
    request names a reservation's marker class, else None. 400
    placement.query.bad_value when it names more than one reservation, or
    one in more than one group, or the marker alone in its group."""
    found: dict = {}
    for suffix, group in req.groups.items():
        for name in group.resources:
            if name.startswith(marker.PREFIX):
                uuid = marker.reservation_uuid(name)
                if uuid is not None:
                    found.setdefault(uuid, []).append(suffix)
    if not found:
        return None
    if len(found) > 1:
        raise errors.QueryBadValue(
            f"{_PHRASE}: the request names {len(found)} reservations' marker "
            "classes; a request draws from one reservation at most.")
    (uuid, suffixes), = found.items()
    mark = marker.class_name(uuid)
    if len(suffixes) > 1:
        raise errors.QueryBadValue(
            f"{_PHRASE}: {mark} is named in {len(suffixes)} request groups; "
            "name it in the one group whose resources draw from the reservation.")
    if len(req.groups[suffixes[0]].resources) == 1:
        raise errors.QueryBadValue(
            f"{_PHRASE}: the group naming {mark} names no other class; name "
            "the classes to draw from the reservation beside it.")
    return uuid, suffixes[0]


@dataclass
class Held:
    """What an active reservation holds and has left, read once."""
    marker_id: int
    left: dict  # (provider id, class id) -> amount - drawn
    free: dict  # (provider id, class id) -> the provider's capacity - used
    root: dict  # provider id -> root id, for R's providers
    uuid: dict  # provider id -> uuid, R's providers and their roots
    marker_used: dict  # provider id -> marker units allocated there


_R = t.reservations
_RA = t.reservation_amounts
_A = t.allocations
_INV = t.inventories
_RP = t.resource_providers


def read(conn: Connection, r_uuid: str) -> Optional[Held]:
    """R's holdings in the answer's transaction, or None when it is not on
    record or not active at the database's now (draws.plan's rule)."""
    row = conn.execute(select(_R.c.id, _R.c.start_at, _R.c.end_at,
                              clock.now_expr(conn.dialect.name))
                       .where(_R.c.uuid == bindparam("u")), {"u": r_uuid}).first()
    if row is None or not row[1] <= int(row[3]) < row[2]:
        return None
    rid = row[0]
    marker_id = conn.execute(select(t.resource_classes.c.id).where(
        t.resource_classes.c.name == bindparam("n")),
        {"n": marker.class_name(r_uuid)}).scalar()
    if marker_id is None:  # made with the reservation; gone only with it
        return None
    amounts = {(rp, rc): int(n) for rp, rc, n in conn.execute(
        select(_RA.c.resource_provider_id, _RA.c.resource_class_id, _RA.c.amount)
        .where(_RA.c.reservation_id == bindparam("r")), {"r": rid})}
    if not amounts:
        return None
    drawn = draws.drawn_by_key(conn, rid)
    rps = sorted({rp for rp, _rc in amounts})
    free = {}
    for rp, rc, total, reserved, ratio, used in conn.execute(
            select(_INV.c.resource_provider_id, _INV.c.resource_class_id,
                   _INV.c.total, _INV.c.reserved, _INV.c.allocation_ratio, _INV.c.used)
            .where(_INV.c.resource_provider_id.in_(bindparam("ids", expanding=True))),
            {"ids": rps}):
        if (rp, rc) in amounts:
            free[(rp, rc)] = int(capacity.capacity_from(total, reserved, ratio)) - int(used or 0)
    root, uuid = {}, {}
    for rp, u, root_id in conn.execute(
            select(_RP.c.id, _RP.c.uuid, _RP.c.root_provider_id)
            .where(_RP.c.id.in_(bindparam("ids", expanding=True))), {"ids": rps}):
        root[rp], uuid[rp] = root_id, u
    missing = sorted(set(root.values()) - set(uuid))
    if missing:
        uuid.update(conn.execute(select(_RP.c.id, _RP.c.uuid).where(
            _RP.c.id.in_(bindparam("ids", expanding=True))), {"ids": missing}).all())
    marker_used = {rp: int(n) for rp, n in conn.execute(
        select(_A.c.resource_provider_id, func.sum(_A.c.used))
        .where(_A.c.reservation_id == bindparam("r"),
               _A.c.resource_class_id == bindparam("m"))
        .group_by(_A.c.resource_provider_id), {"r": rid, "m": marker_id})}
    # A class R holds where the provider has no inventory of it (gone
    # since) offers nothing.
    left = {key: max(0, n - drawn.get(key, 0)) for key, n in amounts.items()
            if key in free}
    return Held(marker_id, left, free, root, uuid, marker_used)


def overlay_of(held: Held, base: Optional[Overlay]) -> Overlay:
    """Extra `used` per (provider, class): on R's providers, a class R
    holds shows free what R has left (an extra only takes room away:
    never more than the provider's own free room); elsewhere `base`'s
    (what plain requests would see)."""
    extra = dict(base.extra) if base is not None else {}
    for key, left in held.left.items():
        extra[key] = max(0, held.free[key] - left)
    return Overlay(extra)


class _Within(engine.Search):
    """A search over the trees rooted at `roots` alone (ids, ascending):
    the sharing providers reaching them serve them as usual, which an
    in_tree would not allow."""

    def __init__(self, *args, roots: list, **kwargs):
        super().__init__(*args, **kwargs)
        self._within = roots

    def _spans(self):
        for root in self._within:
            yield root, root


class _Marking:
    """A Layout with the marker added on one provider, made once per
    (layout, position) so the renderer's templates are reused."""

    def __init__(self, marker_id: int, amount: int):
        self.rc, self.amount = marker_id, amount
        self._made: dict = {}

    def __call__(self, cand: Candidate, pos: int) -> Candidate:
        key = (cand.layout, pos)
        layout = self._made.get(key)
        if layout is None:
            layout = self._made[key] = cand.layout.adding(pos, self.rc, self.amount)
        return Candidate(cand.providers, layout)


def answer(conn: Connection, req: CandidateRequest, shown, max_candidates: int = 0,
           randomize: bool = False, snapshot=None, kept=None,
           overlay: Optional[Overlay] = None, *,
           observer: engine.Observer = engine.QUIET) -> engine.Result:
    """answer.answer's answer for a request naming a reservation's marker
    (named() is not None), from SQL (`snapshot` and `kept` are not read):
    an engine.Result with its summaries. `overlay`: what plain requests
    would see as extra `used`, kept where R's own does not apply.
    `observer` hears the search, and the candidates the claim would take
    (Observer.drew; explain listens)."""
    r_uuid, suffix = named(req)
    mark = marker.class_name(r_uuid)
    amount = req.groups[suffix].resources[mark]
    sub = without_marker(req, r_uuid, suffix)
    rest = sub.groups[suffix].resources
    empty = engine.Result([], {}, {})
    empty.summaries = []
    held = read(conn, r_uuid)
    if held is None:
        # As for a class nobody can provide; the other names still checked.
        filters.resource_class_ids(conn, req.resource_class_names() - {mark})
        return empty
    lookups = engine.resolve(conn, sub, None)
    if lookups is None:
        return empty
    ov = overlay_of(held, overlay)
    walk = _Within(conn, sub, lookups, None, observer, overlay=ov,
                   roots=sorted(set(held.root.values())))
    want = {lookups.rc_ids[name]: n for name, n in rest.items()}
    marking = _Marking(held.marker_id, amount)
    found = []
    for cand in walk.candidates():
        at = _drawing_provider(cand, held, want, suffix)
        if at is not None:
            found.append(marking(cand, cand.providers.index(at)))
    observer.drew(found)
    if randomize:
        random.shuffle(found)
    bound = engine.bound_of(req, max_candidates, False)
    if bound:
        found = found[:bound]
    carrying = {rp for cand in found for rp, res in cand.allocations.items()
                if held.marker_id in res}
    names = {rc: name for name, rc in lookups.rc_ids.items()}
    names[held.marker_id] = mark
    out = engine.Result(found, walk.uuids, walk.roots, names, walk.alone)
    sums = summaries.summarize(
        conn, out, req.nested_aware, shown.classes, with_traits=shown.traits,
        with_tree=shown.tree, overlay=ov)
    out.summaries = _with_marker(sums, held, mark, amount, carrying)
    return out


def without_marker(req: CandidateRequest, r_uuid: str, suffix: str) -> CandidateRequest:
    """The request without R's marker (named in group `suffix`), whole:
    `limit` applies after the candidates the claim would refuse are left
    out."""
    mark = marker.class_name(r_uuid)
    group = req.groups[suffix]
    rest = {name: n for name, n in group.resources.items() if name != mark}
    return replace(req, limit=None, groups={
        s: replace(g, resources=rest) if s == suffix else g
        for s, g in req.groups.items()})


def _drawing_provider(cand: Candidate, held: Held, want: dict,
                      suffix: str) -> Optional[int]:
    """The one provider of R's a candidate draws on,
    or None when the claim would refuse it or draw otherwise than asked:
    R's classes allocated on more than one of R's providers (the marker
    names one), a class R does not hold there, or the marker group's
    classes R holds there (`want`: class id -> amount) not all there (a
    numbered group: the group not on it)."""
    allocs = cand.allocations
    left = held.left
    on = [rp for rp in allocs if any((rp, rc) in left for rc in allocs[rp])]
    if len(on) != 1:
        return None
    at = on[0]
    there = allocs[at]
    if any((at, rc) not in left for rc in there):
        return None
    need = {rc: n for rc, n in want.items() if (at, rc) in left}
    if not need:
        return None
    if suffix:
        return at if cand.mappings.get(suffix) == [at] else None
    return at if all(there.get(rc, 0) >= n for rc, n in need.items()) else None


def _with_marker(sums: list, held: Held, mark: str, amount: int,
                 carrying: set) -> list:
    """The summaries with the marker on R's providers among them."""
    by_uuid = {held.uuid[rp]: rp for rp in held.root}
    out = []
    for s in sums:
        rp = by_uuid.get(s.uuid)
        if rp is None:
            out.append(s)
            continue
        used = held.marker_used.get(rp, 0)
        cap = used + (amount if rp in carrying else 0)
        out.append(s._replace(resources=list(s.resources) + [(mark, cap, used)]))
    return out
