"""GET /allocation_candidates: parse, search, render for the microversion.

An answer too big to hold (candidates/flow.py) is written as it is found,
in pieces, while its read transaction lasts (_Stream)."""
from __future__ import annotations

import logging
import sys
import time
from contextlib import ExitStack
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
from placement_lite.candidates import answer, drawing
from placement_lite.candidates.flow import Flow
from placement_lite.candidates.query import parse_candidate_request

LOG = logging.getLogger(__name__)


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
        # A request naming a reservation's marker class is answered as a
        # claim drawing from it is judged (candidates/drawing.py).
        find = drawing.answer if drawing.named(wanted) is not None else answer.answer
        self.respond(req, resp, wanted, version, find=find)

    def respond(self, req, resp, wanted, version, overlay_of=None,
                find=answer.answer) -> None:
        """Answer the parsed request `wanted` in the shape of `version`.
        `overlay_of(conn)`: the extra `used` for this request
        (candidates/overlay.py), read in the answer's transaction (None:
        a plain request's, the most reserved at any instant from now on,
        as a claim leaves room for: candidates/ahead.py). `find`:
        answer.answer, or a function of its arguments answering a kind of
        request its own way."""
        fmt = text.Format(
            dict_allocations=version.has(DICT_ALLOCATIONS), mappings=version.has(MAPPINGS),
            classes=None if version.has(ALL_RESOURCES_IN_SUMMARIES)
            else frozenset(wanted.resource_class_names()),
            traits=version.has(CANDIDATE_REQUIRED), tree=version.has(NESTED_CANDIDATES))
        settings = self.services.settings
        started = time.perf_counter()
        with ExitStack() as reading:
            conn = reading.enter_context(self.services.db.read())
            snapshot = self.services.facts_now(conn)
            found = find(
                conn, wanted,
                answer.Shown(fmt.classes, fmt.traits, fmt.tree, by_tree=fmt.dict_allocations),
                settings.max_allocation_candidates, settings.randomize_allocation_candidates,
                snapshot, self.services.facts.kept if snapshot is not None else None,
                overlay_of(conn) if overlay_of is not None
                else self.services.reserved_ahead(conn, snapshot))
            if isinstance(found, Flow):
                # Read on as the answer is written: the transaction ends
                # with the stream.
                reading = reading.pop_all()
        resp.content_type = falcon.MEDIA_JSON
        render.cache_headers(req, resp)
        if isinstance(found, Flow):
            resp.stream = _Stream(text.pieces(found, fmt, self.texts), reading,
                                  self._searched, started, req.context.request_id)
            return
        self._searched(started)
        resp.data = text.body(found, fmt, self.texts, self.parts)

    def _searched(self, started: float) -> None:
        metrics = self.services.metrics
        if metrics is not None:
            metrics.observe_candidate_search(time.perf_counter() - started)


class _Stream:
    """The WSGI body of an answer written as it is found (flow.Flow).

    The status and headers are sent before the first piece, so nothing
    found later can change them: every refusal was decided before the
    Flow existed. A failure after that (the database gone mid-answer)
    is logged and raised to the server, which closes the connection
    without ending the chunked body: the client sees an answer cut
    short, never a complete-looking one. The read transaction ends when
    the body does, or when the server closes it (a client gone away)."""

    def __init__(self, pieces, reading: ExitStack, searched, started: float,
                 request_id: str):
        self._pieces, self._reading = pieces, reading
        self._searched, self._started, self._rid = searched, started, request_id
        self._sent = 0

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        try:
            piece = next(self._pieces)
        except StopIteration:
            self.close()
            self._searched(self._started)
            raise
        except Exception:
            LOG.exception("%s: the candidates answer failed after %d bytes were "
                          "sent; the response is cut short", self._rid, self._sent)
            self._end(*sys.exc_info())
            raise
        self._sent += len(piece)
        return piece

    def _end(self, *exc_info) -> None:
        reading, self._reading = self._reading, None
        if reading is not None:
            self._pieces.close()
            reading.__exit__(*exc_info)

    def close(self) -> None:
        """WSGI's close: the answer done, or abandoned."""
        self._end(None, None, None)
