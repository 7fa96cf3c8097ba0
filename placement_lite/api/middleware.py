"""Cross-cutting request work: request ids and the one log line."""
from __future__ import annotations

import json
import logging
import time
import uuid

import falcon

from placement_lite.api import errors

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
        version = str(getattr(req.context, "microversion", "") or "")
        route = self._route(req) if self.observers else ""
        for observer in self.observers:
            observer(req.method, route, status, ms / 1000.0)
        fields = {
            "request_id": getattr(req.context, "request_id", None),
            "method": req.method, "path": req.path, "status": status,
            "ms": round(ms, 2), "microversion": version}
        if self.json:
            LOG.info(json.dumps(fields), extra={"access": fields})
        else:
            LOG.info("%s %s %s %d %.1fms %s", fields["request_id"] or "-",
                     req.method, req.relative_uri, status, ms, version,
                     extra={"access": fields})


class InputLimitsMiddleware:
    """Refuse oversized bodies (413) and floods of query parameters (400)
    before any parsing work is spent on them."""

    def __init__(self, max_body_bytes: int, max_query_params: int):
        self.max_body_bytes = max_body_bytes
        self.max_query_params = max_query_params

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        length = req.content_length
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
