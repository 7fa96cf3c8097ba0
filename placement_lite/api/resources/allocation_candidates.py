"""GET /allocation_candidates: parse, search, render for the microversion."""
from __future__ import annotations

import time
from functools import lru_cache

import falcon

from placement_lite.api import render, request
from placement_lite.api.render import candidates as text
from placement_lite.api.microversion import versioned
from placement_lite.api.provider_filters import query_dialect
from placement_lite.api.schemas import allocation_candidates as schema
from placement_lite.api.versions import (
    ALL_RESOURCES_IN_SUMMARIES, ALLOCATION_CANDIDATES, CANDIDATE_REQUIRED,
    DICT_ALLOCATIONS, MAPPINGS, NESTED_CANDIDATES)
from placement_lite.candidates import engine, summaries
from placement_lite.candidates.query import parse_candidate_request


@lru_cache(maxsize=512)
def _wanted(query_string: str, version):
    """The query string validated and parsed at `version` (a pure function
    of the two, so remembered: schedulers ask the same few flavors over
    and over, and checking one costs about as much as answering it with a
    small `limit`). A refused query raises, and is not remembered."""
    params = {name: value if isinstance(value, list) else [value]
              for name, value in falcon.uri.parse_query_string(
                  query_string, keep_blank=True, csv=False).items()}
    request.validate(params, schema.QUERY.at(version), what="Query string")
    return parse_candidate_request(params, query_dialect(version))


class AllocationCandidates:
    policies = {"GET": "placement:allocation_candidates:list"}

    def __init__(self, services):
        self.services = services
        # Text made of one provider's facts, kept per copy of the facts.
        self.texts = text.ProviderTexts()

    @versioned(ALLOCATION_CANDIDATES)
    def on_get(self, req, resp):
        version = req.context.microversion
        wanted = _wanted(req.query_string, version)
        with_traits = version.has(CANDIDATE_REQUIRED)
        with_tree = version.has(NESTED_CANDIDATES)
        settings = self.services.settings
        started = time.perf_counter()
        classes = None if version.has(ALL_RESOURCES_IN_SUMMARIES) \
            else wanted.resource_class_names()
        with self.services.db.read() as conn:
            snapshot = self.services.facts_now(conn)
            parts = None
            randomize = settings.randomize_allocation_candidates
            kept = self.services.facts.kept if snapshot is not None else None
            if (snapshot is not None and version.has(DICT_ALLOCATIONS)
                    and not (randomize and wanted.limit)):
                with_mappings = version.has(MAPPINGS)
                parts = engine.tree_parts(
                    conn, wanted, snapshot, (req.query_string, version),
                    lambda result: text.tree_parts(
                        result, with_mappings, wanted.nested_aware, classes,
                        with_traits, with_tree, self.texts),
                    engine.bound_of(wanted, settings.max_allocation_candidates,
                                    randomize), kept)
            if parts is None:
                result = engine.find(conn, wanted, settings.max_allocation_candidates,
                                     randomize, snapshot=snapshot, kept=kept)
                if result.memory is not None:
                    sums = text.memory_summaries(result, wanted.nested_aware, classes,
                                                 with_traits, with_tree, self.texts)
                else:
                    sums = text.summaries_text(summaries.summarize(
                        conn, result, wanted.nested_aware, classes,
                        with_traits=with_traits, with_tree=with_tree),
                        with_traits, with_tree)
        metrics = self.services.metrics
        if metrics is not None:
            metrics.observe_candidate_search(time.perf_counter() - started)
        if parts is not None:
            reqs = "[%s]" % ",".join([text for p in parts for text in p[0]])
            sums = "{%s}" % ",".join([p[1] for p in parts])
        elif version.has(DICT_ALLOCATIONS):
            reqs = text.requests_dict(result, version.has(MAPPINGS), self.texts)
        else:
            reqs = text.requests_list(result)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = ('{"allocation_requests":%s,"provider_summaries":%s}' % (
            reqs, sums)).encode()
        render.cache_headers(req, resp)
