"""GET /explain/allocation_candidates: what the candidates search did for
one query, step by step, and why named providers are not in its answer.

The query string is GET /allocation_candidates' own (validated by the
same schema at the request's microversion) plus `explain_provider`
(repeatable). The candidates reported come from the real search, run
with the settings and the overlay of what reservations hold that the
real route uses (the plain route's, or with `start` and `end` GET
/reservations/allocation_candidates', read as that route reads them); a
request naming a reservation's marker class is answered as the plain
route answers it (candidates/drawing.py).
"""
from __future__ import annotations

import copy
from functools import lru_cache

import falcon

from placement_lite.api import render, request
from placement_lite.api.microversion import versioned
from placement_lite.api.provider_filters import query_dialect
from placement_lite.api.schemas import allocation_candidates as schema
from placement_lite.api.resources.window_candidates import WINDOW_PARAMS, instant, window
from placement_lite.api.versions import ALLOCATION_CANDIDATES, WINDOW_CANDIDATES
from placement_lite.candidates import drawing, explain, explain_drawing, overlay
from placement_lite.candidates.explain_reserved import Reserved
from placement_lite.candidates.query import parse_candidate_request
from placement_lite.db import clock

PROVIDER_PARAM = "explain_provider"
MAX_EXPLAINED = 20


@lru_cache(maxsize=64)
def _query_schema(version) -> dict:
    doc = copy.deepcopy(schema.QUERY.at(version))
    doc.setdefault("properties", {})[PROVIDER_PARAM] = {
        "type": "array", "maxItems": MAX_EXPLAINED,
        "items": {"type": "string", "maxLength": 64}}
    # Read before the schema is (window_candidates.instant), as the window
    # route reads them; here for the document of the route.
    for name in WINDOW_PARAMS:
        doc["properties"][name] = dict(
            copy.deepcopy(schema.WINDOW_QUERY["properties"][name]),
            description="With the other of start and end: explain GET "
            "/reservations/allocation_candidates' answer for [start, end).")
    return doc


def query_schema_at(version) -> dict:
    """The candidates query's schema at `version`, with explain_provider."""
    return _query_schema(version)


def _count(c: explain.Count) -> dict:
    return {"step": c.step, "detail": c.detail,
            "providers_before": c.providers_before,
            "providers_after": c.providers_after,
            "trees_before": c.trees_before, "trees_after": c.trees_after}


def _candidate(cand, result) -> dict:
    names = result.class_names
    uuids = result.uuids
    return {"allocations": {uuids[rp]: {"resources": {names[rc]: n for rc, n in res.items()}}
                            for rp, res in cand.allocations.items()},
            "mappings": {k: [uuids[rp] for rp in v] for k, v in cand.mappings.items()}}


def body(found: explain.Explanation) -> dict:
    result = found.result
    return {
        "groups": [{"group": suffix, "steps": [_count(c) for c in counts]}
                   for suffix, counts in found.groups.items()],
        "search": [_count(c) for c in found.search],
        "candidates": {"count": len(result.candidates),
                       "randomized": found.randomized,
                       "first": [_candidate(c, result)
                                 for c in result.candidates[:explain.FIRST_FEW]]},
        "providers": found.providers,
    }


class ExplainAllocationCandidates:
    policies = {"GET": "placement:explain:allocation_candidates"}

    def __init__(self, services):
        self.services = services

    @versioned(ALLOCATION_CANDIDATES)
    def on_get(self, req, resp):
        params = {name: value if isinstance(value, list) else [value]
                  for name, value in req.params.items()}
        found = run(self.services, params, req.context.microversion)
        resp.content_type = falcon.MEDIA_JSON
        render.send(resp, body(found))


def run(services, params: dict, version) -> explain.Explanation:
    """Explain the candidates query `params` (name -> [values], with any
    explain_provider values) at `version`, as the route and the console
    do: validated and parsed as GET /allocation_candidates is, or, with
    `start` and `end` (both or neither), as GET
    /reservations/allocation_candidates is, at that route's version."""
    params = dict(params)
    asked = {name: params.pop(name) for name in WINDOW_PARAMS if name in params}
    span = None
    if asked:
        span = instant(asked, "start"), instant(asked, "end")
        version = WINDOW_CANDIDATES
    request.validate(params, query_schema_at(version), what="Query string")
    named = list(dict.fromkeys(params.pop(PROVIDER_PARAM, [])))
    wanted = parse_candidate_request(params, query_dialect(version))
    settings = services.settings
    with services.db.read() as conn:
        snapshot = services.facts_now(conn)
        args = (conn, wanted, settings.max_allocation_candidates,
                settings.randomize_allocation_candidates, named)
        if span is not None:
            # The window route's: the database's now decides, and a
            # marker there is a class nobody provides.
            lo, hi = window(*span, clock.now(conn))
            return explain.explain(*args, snapshot=snapshot, reserved=Reserved.window(
                conn, overlay.window(conn, lo, hi), lo, hi))
        ahead = services.reserved_ahead(conn, snapshot)
        if drawing.named(wanted) is not None:
            return explain_drawing.explain(*args, snapshot=snapshot, overlay=ahead)
        return explain.explain(*args, snapshot=snapshot,
                               reserved=Reserved.ahead(conn, ahead))
