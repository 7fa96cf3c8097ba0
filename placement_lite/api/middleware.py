"""Cross-cutting request work: request ids, the one log line, input
limits and the HTTP rules every route shares."""
from __future__ import annotations

import json
import logging
import time
import uuid

import falcon
from falcon.util import mediatypes

from placement_lite.api import errors
from placement_lite.logs import printable

LOG = logging.getLogger("placement_lite.request")


class RequestIdMiddleware:
    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = f"req-{uuid.uuid4()}"
        req.context.started = time.perf_counter()

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        rid = req.context.request_id
        resp.set_header("x-openstack-request-id", rid)
        resp.set_header("openstack-request-id", rid)


class AccessLogMiddleware:
    """One line per request: method, path, status, ms, request id, version.

    The fields also travel on the record (`record.access`), so a JSON log
    formatter (placement_lite.logs) writes them as keys; `fmt="json"` makes
    the message itself a JSON object for handlers without that formatter.
    What the caller sent (method, path, query) is escaped here, not only by
    our formatters, so a host's own log handlers get safe values too.
    """

    def __init__(self, fmt: str = "text", observers=(), router=None):
        self.json = fmt == "json"
        self.observers = list(observers)
        self.router = router

    def _route(self, req) -> str:
        template = getattr(req, "uri_template", None)
        if template is None and self.router is not None:
            found = self.router.find(req.path)
            template = found[3] if found else None
        # Unmatched paths are not labelled by path: that would let any
        # caller create new metric series.
        return template or "unmatched"

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        started = getattr(req.context, "started", None)
        ms = (time.perf_counter() - started) * 1000 if started else 0.0
        status = resp.status_code
        route = self._route(req) if self.observers else ""
        for observer in self.observers:
            observer(req.method, route, status, ms / 1000.0)
        if not LOG.isEnabledFor(logging.INFO):
            return
        version = str(getattr(req.context, "microversion", "") or "")
        fields = {
            "request_id": getattr(req.context, "request_id", None),
            "method": printable(req.method), "path": printable(req.path),
            "status": status, "ms": round(ms, 2), "microversion": version}
        if self.json:
            LOG.info(json.dumps(fields), extra={"access": fields})
        else:
            LOG.info("%s %s %s %d %.1fms %s", fields["request_id"] or "-",
                     fields["method"], printable(req.relative_uri), status, ms,
                     version, extra={"access": fields})


class InputLimitsMiddleware:
    """Refuse oversized bodies (413) and floods of query parameters (400)
    before any parsing work is spent on them."""

    def __init__(self, max_body_bytes: int, max_query_params: int):
        self.max_body_bytes = max_body_bytes
        self.max_query_params = max_query_params

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            length = req.content_length
        except falcon.HTTPInvalidHeader:
            length = None  # HttpRulesMiddleware says what is wrong with it
        if length is not None and length > self.max_body_bytes:
            raise errors.ApiError(
                falcon.HTTP_413,
                f"The request body is {length} bytes; the limit is "
                f"{self.max_body_bytes}.")
        query = req.query_string or ""
        if query.count("&") + 1 > self.max_query_params:
            raise errors.bad_request(
                f"The query string has more than {self.max_query_params} "
                "parameters.")
        # NUL is never part of a name, uuid or id, and PostgreSQL cannot
        # even compare against it: refuse it before any query sees it.
        if "\x00" in req.path or "\x00" in query or "%00" in query:
            raise errors.bad_request("The URL contains a NUL (%00) character.")


def _shown(value: str, limit: int = 100) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


class HttpRulesMiddleware:
    """The HTTP rules Placement applies to every route:

    - Content-Length must be an integer, and a request with a body must
      say what its Content-Type is (400, before routing);
    - a GET or HEAD whose resource answers in JSON needs an Accept header
      that admits JSON (406); no Accept, or one we cannot parse, admits
      anything. A resource that answers in another form, or in any form
      the caller wants (the version document, health and metrics probes),
      says so with `produces` (None: no check);
    - a 201 or 204 without a body carries no Content-Type, as in
      Placement (other bodiless answers, such as a CORS preflight's 200,
      keep one: WSGI's validator wants it on every status but 204/304).
    """

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = req.get_header("Content-Length")
        if raw is None:
            return
        try:
            length = int(raw.strip())
        except ValueError:
            length = -1
        if length < 0:
            raise errors.bad_request(
                "content-length header must be an integer: got "
                f"{_shown(raw)!r}.")
        if length > 0 and not req.content_type:
            raise errors.bad_request(
                "content-type header required when content-length > 0: this "
                f"request has a {length}-byte body; send it as JSON with "
                "Content-Type: application/json.")

    def process_resource(self, req, resp, resource, params) -> None:
        if req.method not in ("GET", "HEAD") or resource is None:
            return
        if not hasattr(resource, "on_" + req.method.lower()):
            return  # the 405 says more than a 406 would
        produces = getattr(resource, "produces", falcon.MEDIA_JSON)
        accept = req.get_header("Accept")
        if produces is None or not accept:
            return
        try:
            acceptable = mediatypes.quality(produces, accept) > 0
        except ValueError:
            return
        if not acceptable:
            raise errors.ApiError(
                falcon.HTTP_406,
                f"Only {produces} is provided: the Accept header "
                f"({_shown(accept)}) does not admit it.")

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        # The app has no default media type (create_app), so a type is set
        # here for bodies whose responder did not name one.
        bodiless = (resp.text is None and resp.data is None
                    and resp.media is None and resp.stream is None)
        if bodiless and resp.status_code in (201, 204):
            resp.content_type = None
        elif resp.content_type is None:
            resp.content_type = falcon.MEDIA_JSON
