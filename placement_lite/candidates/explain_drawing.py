"""Explain a request naming a reservation's marker class: the answer
drawing.py gives the route, and why.

The candidates are drawing.answer's own, heard by explain's Recorder. The
groups' funnels are the request's without the marker (what drawing.py
searches for), over the whole cloud, with the reservation's room as their
`reserved_ahead` step: on its providers, a class it holds has what it has
left there; elsewhere the room plain requests leave for reservations. The
search's steps start with the reservation (whether it is active, and the
trees of its providers, which alone are searched) and end with `draws`
(the candidates a claim drawing from it takes as asked) before the
limit. A named provider outside those trees, or whose tree's candidates a
claim would not take as asked, is told so.
"""
from __future__ import annotations

from typing import Optional, Sequence

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placement_lite.candidates import answer, drawing, engine
from placement_lite.candidates.explain import (
    Count, Explanation, Recorder, _counts, explained)
from placement_lite.candidates.explain_reserved import Reserved
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.plan import Plan
from placement_lite.candidates.query import CandidateRequest
from placement_lite.db import tables as t
from placement_lite.ledger import marker, reservation_reads
from placement_lite.ledger.timeline import iso

RP = t.resource_providers


def _state(conn: Connection, r_uuid: str, held: Optional[drawing.Held]) -> str:
    """The reservation's state, in words, at the database's now."""
    row = conn.execute(reservation_reads.row_statement(conn.dialect.name, False),
                       {"r_uuid": r_uuid}).first()
    mark = marker.class_name(r_uuid)
    if row is None:
        return f"no reservation {r_uuid} is on record: a request naming {mark} has " \
            "no candidates"
    now, start, end = int(row.db_now), int(row.start_at), int(row.end_at)
    status = reservation_reads.status_at(start, end, now)
    if status == "pending":
        return (f"reservation {r_uuid} is pending: it starts at {iso(start)} (now is "
                f"{iso(now)}); a request naming {mark} has no candidates before then")
    if status == "ended":
        return (f"reservation {r_uuid} has ended, at {iso(end)} (now is {iso(now)}): "
                f"a request naming {mark} has no candidates")
    if held is None:
        return (f"reservation {r_uuid} is active until {iso(end)} but holds "
                "nothing a claim can draw")
    trees = len(set(held.root.values()))
    return (f"reservation {r_uuid} is active until {iso(end)}: a claim draws from "
            f"what it has left on its providers ({_count(len(held.root), 'provider')}); "
            f"the search covers only the trees holding them ({_count(trees, 'tree')})")


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def explain(conn: Connection, req: CandidateRequest, max_candidates: int = 0,
            randomize: bool = False, providers: Sequence[str] = (),
            snapshot=None, overlay: Optional[Overlay] = None) -> Explanation:
    """explain.explain for a request naming a marker (drawing.named(req)
    is not None), which the route answers with drawing.answer. `overlay`:
    the plain route's (what reservations hold from now on)."""
    r_uuid, suffix = drawing.named(req)
    rec = Recorder()
    result = drawing.answer(conn, req, answer.Shown(), max_candidates, randomize,
                            snapshot, None, overlay, observer=rec)
    held = drawing.read(conn, r_uuid)
    state = _state(conn, r_uuid, held)
    roots = set(held.root.values()) if held is not None else set()
    first = Count("reservation", state, None, None, _counts(conn, [])[1], len(roots))
    sub = drawing.without_marker(req, r_uuid, suffix)
    lookups = engine.resolve(conn, sub, None)
    if lookups is None:
        # An in_tree naming no provider: nothing is searched.
        return Explanation({}, [first, Count("in_tree", "names no provider", None,
                                             None, None, 0)], result, {
            uuid: {"excluded": True, "reasons": [
                {"group": None, "step": "in_tree",
                 "reason": "in_tree names no provider"}]} for uuid in providers})
    if held is not None:
        reserved = Reserved(
            conn, drawing.overlay_of(held, overlay),
            f"what reservation {r_uuid} has left on its providers; elsewhere the "
            "most reserved at any instant from now on", drawing=(r_uuid, held))
    else:
        reserved = Reserved.ahead(conn, overlay)
    found = explained(conn, Plan(sub, lookups), rec, result, max_candidates,
                      randomize, providers, reserved, within=roots)
    drawn = rec.drawn or []
    *steps, limit = found.search
    walked = sum(f for f, _r in rec.combined.values())
    limit.providers_before = len(drawn)
    found.search = [first] + steps + [
        Count("draws", f"candidates a claim drawing from reservation {r_uuid} "
              "takes as asked: the classes it holds on one of its providers, and "
              "nothing there it does not hold", walked, len(drawn), None, None),
        limit]
    for report in found.providers.values():
        _retold(conn, report, r_uuid, held, state, drawn, rec)
    return found


def _reason(step: str, text: str) -> dict:
    return {"group": None, "step": step, "provider": None, "reason": text}


def _retold(conn, report: dict, r_uuid: str, held, state: str, drawn: list,
            rec: Recorder) -> None:
    """A named provider's reasons where the reservation, not a filter,
    keeps its tree out."""
    if not report.get("excluded") or report.get("tree") is None:
        return
    if held is None:
        report["reasons"] = [_reason("reservation", state)]
        return
    by_uuid = {u: rp for rp, u in held.uuid.items()}
    root = by_uuid.get(report["tree"])
    if root is None or root not in set(held.root.values()):
        report["reasons"] = [_reason("reservation", (
            f"not in the tree of any of reservation {r_uuid}'s providers: a "
            f"request naming {marker.class_name(r_uuid)} is searched there alone"))]
        return
    tree = set(conn.scalars(select(RP.c.id).where(RP.c.root_provider_id == root)))
    if any(tree & set(c.providers) for c in drawn):
        report["reasons"] = [_reason("limit", "its tree's candidates were left "
                                     "out by the limit")]
        return
    if rec.combined.get(root, (0, 0))[0]:
        # Its tree had candidates, all of which a claim would refuse or
        # draw otherwise than asked.
        report["reasons"] = [_reason("draws", (
            f"no candidate of its tree draws from reservation {r_uuid} as asked: "
            "the classes it holds must all come from one of its providers, with "
            "nothing else on that provider"))]
