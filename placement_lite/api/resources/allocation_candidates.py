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
from placement_lite.candidates import answer
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
        # Text made of one provider's facts, kept per copy of the facts,
        # and of each tree's part of an answer, kept while the part is.
        self.texts = text.ProviderTexts()
        self.parts = text.PartTexts()

    @versioned(ALLOCATION_CANDIDATES)
    def on_get(self, req, resp):
        version = req.context.microversion
        wanted = _wanted(req.query_string, version)
        fmt = text.Format(
            dict_allocations=version.has(DICT_ALLOCATIONS), mappings=version.has(MAPPINGS),
            classes=None if version.has(ALL_RESOURCES_IN_SUMMARIES)
            else frozenset(wanted.resource_class_names()),
            traits=version.has(CANDIDATE_REQUIRED), tree=version.has(NESTED_CANDIDATES))
        settings = self.services.settings
        started = time.perf_counter()
        with self.services.db.read() as conn:
            snapshot = self.services.facts_now(conn)
            found = answer.answer(
                conn, wanted,
                answer.Shown(fmt.classes, fmt.traits, fmt.tree, by_tree=fmt.dict_allocations),
                settings.max_allocation_candidates, settings.randomize_allocation_candidates,
                snapshot, self.services.facts.kept if snapshot is not None else None)
        metrics = self.services.metrics
        if metrics is not None:
            metrics.observe_candidate_search(time.perf_counter() - started)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = text.body(found, fmt, self.texts, self.parts)
        render.cache_headers(req, resp)
