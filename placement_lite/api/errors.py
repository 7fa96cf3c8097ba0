"""Error bodies, and the one map from domain errors to HTTP statuses.

On Placement's routes and our /quota and /v1 routes an error body is
API-WG JSON (but for the /v1 lease refusal, Blazar's `{"message": ...}`,
which api/resources/lease.py answers itself):
  {"errors": [{"status": 409, "title": "Conflict", "detail": "...",
               "code": "placement.concurrent_update", "request_id": "req-..."}]}
with `code` present from microversion 1.23, as in Placement; on the routes
of our own APIs beside Placement's (unified limits, quota, leases), which
that cut-off never applied to, always. As in Placement, a caller whose
Accept header prefers HTML gets the error as an HTML page, and one that
accepts neither HTML nor JSON gets plain text (no Accept, or */*, is JSON).

Under /v3 (the Keystone-compatible limits, projects and catalog) errors
are always Keystone's JSON, which keystoneauth, openstacksdk, osc and
oslo.limit read the reason from:
  {"error": {"code": 409, "title": "Conflict", "message": "..."}}
"""
from __future__ import annotations

import functools
import html
import json
import logging

import falcon
from falcon.util import mediatypes
from sqlalchemy.exc import DBAPIError

from placement_lite import errors as lerr
from placement_lite.api import echo
from placement_lite.api.versions import ERROR_CODES
from placement_lite.db.engine import connection_lost, is_retryable_db_error
from placement_lite.logs import printable

LOG = logging.getLogger(__name__)
DEFAULT_CODE = lerr.DEFAULT_CODE
CODE_MICROVERSION = ERROR_CODES.since


class ApiError(falcon.HTTPError):
    def __init__(self, status, detail: str, code: str = DEFAULT_CODE,
                 headers=None, extra: dict | None = None):
        # Whoever built the detail, an echoed value in it stays short.
        super().__init__(status, description=echo.bound(detail), headers=headers)
        self.code = code
        self.extra = extra or {}


def bad_request(detail: str, code: str = DEFAULT_CODE) -> ApiError:
    return ApiError(falcon.HTTP_400, detail, code)


def not_found(detail: str, code: str = DEFAULT_CODE) -> ApiError:
    return ApiError(falcon.HTTP_404, detail, code)


def conflict(detail: str, code: str = DEFAULT_CODE) -> ApiError:
    return ApiError(falcon.HTTP_409, detail, code)


def forbidden(detail: str, code: str = DEFAULT_CODE) -> ApiError:
    return ApiError(falcon.HTTP_403, detail, code)


_DOMAIN_STATUS = [
    (lerr.NotFound, falcon.HTTP_404),
    (lerr.Invalid, falcon.HTTP_400),
    (lerr.Conflict, falcon.HTTP_409),
    (lerr.Forbidden, falcon.HTTP_403),
]


def from_domain(exc: lerr.DomainError) -> ApiError:
    for cls, status in _DOMAIN_STATUS:
        if isinstance(exc, cls):
            extra = {}
            if isinstance(exc, lerr.OverLimit) and exc.over:
                extra["over_limit"] = exc.over
            return ApiError(status, exc.detail, exc.code, extra=extra)
    return ApiError(falcon.HTTP_500, exc.detail, exc.code)


def is_keystone_path(path: str) -> bool:
    """Whether `path` (below the app's root) answers errors in Keystone's
    shape."""
    return path == "/v3" or path.startswith("/v3/")


JSON, HTML, TEXT = "application/json", "text/html", "text/plain"


def error_media_type(req: falcon.Request) -> str:
    """The form of an error body the caller asked for: JSON unless the
    Accept header prefers HTML to it, or accepts neither (plain text).
    Ties go to JSON; a header we cannot parse gets JSON."""
    accept = (req.get_header("Accept") or "").strip()
    if not accept or accept == "*/*":
        return JSON
    try:
        json_q = mediatypes.quality(JSON, accept)
        html_q = mediatypes.quality(HTML, accept)
    except ValueError:
        return JSON
    if json_q == 0 and html_q == 0:
        return TEXT
    return HTML if html_q > json_q else JSON


def _html_page(status_line: str, detail: str, request_id) -> str:
    lines = ["<html>", " <head>", f"  <title>{html.escape(status_line)}</title>",
             " </head>", " <body>", f"  <h1>{html.escape(status_line)}</h1>",
             f"  <p>{html.escape(detail)}</p>"]
    if request_id:
        lines.append(f"  <p>Request id: {html.escape(request_id)}</p>")
    lines += [" </body>", "</html>", ""]
    return "\n".join(lines)


def _code_allowed(req, always: frozenset) -> bool:
    # uri_template is set once routing found the route; errors raised
    # before that (413, 406...) follow the microversion alone.
    if getattr(req, "uri_template", None) in always:
        return True
    version = getattr(req.context, "microversion", None)
    return version is None or tuple(version) >= CODE_MICROVERSION


def serialize(req: falcon.Request, resp: falcon.Response,
              exc: falcon.HTTPError, code_always: frozenset = frozenset()) -> None:
    status_code = int(exc.status_code)
    title = falcon.code_to_http_status(status_code)[4:]
    detail = exc.description or exc.title or ""
    request_id = getattr(req.context, "request_id", None)
    if is_keystone_path(req.path):
        resp.content_type = falcon.MEDIA_JSON
        resp.text = json.dumps({"error": {
            "code": status_code, "title": title, "message": detail}})
        return
    kind = error_media_type(req)
    if kind == HTML:
        resp.content_type = "text/html; charset=UTF-8"
        resp.text = _html_page(f"{status_code} {title}", detail, request_id)
        return
    if kind == TEXT:
        resp.content_type = "text/plain; charset=UTF-8"
        resp.text = f"{status_code} {title}\n\n{detail}\n"
        return
    err = {
        "status": status_code,
        "title": title,
        "detail": detail,
        "request_id": request_id,
    }
    if _code_allowed(req, code_always):
        err["code"] = getattr(exc, "code", None) or DEFAULT_CODE
    err.update(getattr(exc, "extra", {}) or {})
    resp.content_type = falcon.MEDIA_JSON
    resp.text = json.dumps({"errors": [err]})


def _how_to_find_out(req) -> str:
    path = req.path
    if path.startswith("/allocations/"):
        return f"GET {path} shows whether the allocations were written."
    if path == "/allocations":
        return ("GET /allocations/{consumer_uuid} for each consumer in the "
                "request shows whether the allocations were written.")
    if path == "/reshaper":
        return ("GET the inventories and allocations of the providers and "
                "consumers in the request to see whether the reshape was applied.")
    return f"Read the resource back (GET {path}) before deciding whether to retry."


def outcome_unknown(req, exc: lerr.OutcomeUnknown) -> ApiError:
    LOG.error("outcome unknown for %s %s (request %s): %s", printable(req.method),
              printable(req.path), getattr(req.context, "request_id", "-"),
              printable(exc.detail))
    return ApiError(
        falcon.HTTP_503,
        f"The outcome of this request is unknown: {exc.detail} "
        f"Do not repeat it blindly. {_how_to_find_out(req)}",
        exc.code)


def handle_domain_error(req, resp, exc, params):
    if isinstance(exc, lerr.OutcomeUnknown):
        raise outcome_unknown(req, exc)
    raise from_domain(exc)


def handle_unexpected(req, resp, exc, params):
    if isinstance(exc, falcon.HTTPError):
        raise exc
    LOG.exception("unexpected error on %s %s (request %s)", printable(req.method),
                  printable(req.path), getattr(req.context, "request_id", "-"))
    raise ApiError(falcon.HTTP_500,
                   "The server could not complete the request; the error was "
                   "logged with this request id.")


# Seconds a caller is told to wait before repeating a request the
# database could not take: time for a failed-over node or a restarted
# server to answer, short enough that a one-off loss costs little.
RETRY_AFTER_SECONDS = 2


def database_unavailable(req, exc) -> ApiError:
    """503 for a request that stored nothing because the database could
    not be reached or its connection was lost before COMMIT (the server
    has already run a write again on a new connection, a bounded number
    of times). The caller may repeat the request as it is."""
    LOG.error("database unavailable during %s %s (request %s), nothing was "
              "changed: %s", printable(req.method), printable(req.path),
              getattr(req.context, "request_id", "-"),
              printable(str(getattr(exc, "orig", exc))))
    return ApiError(
        falcon.HTTP_503,
        "The database could not be reached or its connection was lost before "
        "the request completed; nothing was changed. Try again in "
        f"{RETRY_AFTER_SECONDS} seconds.",
        code="placement.database_unavailable",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def handle_db_error(req, resp, exc, params):
    """A write that lost to other writers through every retry (deadlock,
    lock wait, busy database) is a 409 the client may retry, whichever
    route it came through. A database that cannot be reached, or a
    connection lost before COMMIT (one lost during COMMIT is
    OutcomeUnknown), is a 503 with Retry-After: nothing was changed, so the
    request may simply be repeated. Any other database error is
    unexpected."""
    if connection_lost(exc):
        raise database_unavailable(req, exc)
    if is_retryable_db_error(exc):
        raise conflict("Other requests kept the same rows busy through every "
                       "retry; try again.", code="placement.concurrent_update")
    handle_unexpected(req, resp, exc, params)


NOT_FOUND_PHRASE = "The resource could not be found."


def not_allowed(method: str, allowed) -> ApiError:
    """405 with the Allow header listing what the route does serve."""
    allow = ", ".join(allowed)
    return ApiError(
        falcon.HTTP_405,
        f"The method {method} is not allowed for this resource. "
        f"It serves {allow}." if allow else
        f"The method {method} is not allowed for this resource.",
        headers={"Allow": allow} if allow else None)


def handle_route_not_found(req, resp, exc, params):
    path = req.path if len(req.path) <= 120 else req.path[:120] + "…"
    raise not_found(f"{NOT_FOUND_PHRASE} No API route matches {path}; "
                    "GET / lists the API versions.")


def install(app: falcon.App, code_always: frozenset = frozenset()) -> None:
    """`code_always`: route templates whose errors carry `code` at any
    microversion."""
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(lerr.DomainError, handle_domain_error)
    app.add_error_handler(DBAPIError, handle_db_error)
    app.add_error_handler(falcon.HTTPRouteNotFound, handle_route_not_found)
    app.set_error_serializer(functools.partial(serialize, code_always=code_always))
