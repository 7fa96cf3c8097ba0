"""GET /allocation_candidates: parse, search, render for the microversion."""
from __future__ import annotations

import json
import time

import falcon

from placement_lite.api import render, request
from placement_lite.api.microversion import versioned
from placement_lite.api.schemas import allocation_candidates as schema
from placement_lite.candidates import engine, summaries
from placement_lite.candidates.request import Features, parse_candidate_request


def _requests_list(result, uuid):
    """Before 1.12: a list of {resource_provider: {uuid}, resources}."""
    names = result.class_names
    return [{"allocations": [
        {"resource_provider": {"uuid": uuid(rp)},
         "resources": {names[rc]: n for rc, n in res.items()}}
        for rp, res in cand.allocations.items()]}
        for cand in result.candidates]


def _requests_dict(result, uuid, with_mappings):
    names = result.class_names
    uuids = result.uuids
    out = []
    for cand in result.candidates:
        item = {"allocations": {
            uuids[rp]: {"resources": {names[rc]: n for rc, n in res.items()}}
            for rp, res in cand.allocations.items()}}
        if with_mappings:
            item["mappings"] = {suffix: [uuids[rp] for rp in rps]
                                for suffix, rps in cand.mappings.items()}
        out.append(item)
    return out


class AllocationCandidates:
    policies = {"GET": "placement:allocation_candidates:list"}

    def __init__(self, services):
        self.services = services

    @versioned("1.10")
    def on_get(self, req, resp):
        version = req.context.microversion
        params = {name: value if isinstance(value, list) else [value]
                  for name, value in req.params.items()}
        request.validate(params, schema.QUERY.at(version), what="Query string")
        wanted = parse_candidate_request(params, tuple(version))
        feats = Features(version)
        settings = self.services.settings
        started = time.perf_counter()
        with self.services.db.read() as conn:
            result = engine.find(conn, wanted, settings.max_allocation_candidates,
                                 settings.randomize_allocation_candidates)
            classes = None if feats.all_resources_in_summaries \
                else wanted.resource_class_names()
            sums = summaries.summarize(conn, result, wanted.nested_aware,
                                       classes, with_traits=feats.required,
                                       with_tree=feats.nested)
        metrics = self.services.extras.get("metrics")
        if metrics is not None:
            metrics.observe_candidate_search(time.perf_counter() - started)
        uuid = result.uuids.__getitem__
        if feats.dict_requests:
            reqs = _requests_dict(result, uuid, feats.mappings)
        else:
            reqs = _requests_list(result, uuid)
        # Serialised here, compactly: on large answers the encoder is a
        # visible share of the response time.
        resp.content_type = falcon.MEDIA_JSON
        resp.data = json.dumps(
            {"allocation_requests": reqs,
             "provider_summaries": sums},
            separators=(",", ":"), check_circular=False).encode()
        render.cache_headers(req, resp)


ROUTES = [("/allocation_candidates", AllocationCandidates)]
