"""Cross-origin resource sharing, off unless origins are configured.

Follows the semantics OpenStack services share (oslo.middleware's cors):
- a preflight (OPTIONS with Origin and Access-Control-Request-Method) is
  answered here, before authentication and routing, with 200; the CORS
  headers are added only when the origin, the method and every requested
  header are allowed, so a refused preflight is a 200 without them;
- any other request with an allowed Origin gets the origin echoed,
  Access-Control-Allow-Credentials and Access-Control-Expose-Headers;
- every response to a request with an Origin varies on Origin.
"""
from __future__ import annotations

from typing import Iterable

import falcon

from placement_lite.config_rules import (
    CORS_ALLOW_METHODS as ALLOW_METHODS, CORS_EXPOSE_HEADERS as EXPOSE_HEADERS)

# Headers any cross-origin request may send without being listed.
SIMPLE_HEADERS = ("accept", "accept-language", "content-type", "cache-control",
                  "content-language", "expires", "last-modified", "pragma")
MAX_AGE = 3600


class CORSMiddleware:
    def __init__(self, allowed_origins: Iterable[str], allow_headers: Iterable[str],
                 allow_credentials: bool = True, max_age: int = MAX_AGE,
                 expose_headers: Iterable[str] = EXPOSE_HEADERS,
                 allow_methods: Iterable[str] = ALLOW_METHODS):
        self.origins = {o.strip().rstrip("/") for o in allowed_origins if o.strip()}
        self.allow_headers = {h.strip().lower() for h in allow_headers if h.strip()}
        self.allow_credentials = allow_credentials
        self.max_age = max_age
        self.expose_headers = ",".join(expose_headers)
        self.allow_methods = {m.upper() for m in allow_methods}

    def _origin_allowed(self, origin: str) -> bool:
        return "*" in self.origins or origin.rstrip("/") in self.origins

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        origin = req.get_header("Origin")
        method = req.get_header("Access-Control-Request-Method")
        if req.method != "OPTIONS" or not origin or not method:
            return
        # A preflight never reaches authentication or a responder.
        req.context.cors_preflight = True
        resp.status = falcon.HTTP_200
        resp.complete = True
        self._vary(resp)
        if not self._origin_allowed(origin) or method.upper() not in self.allow_methods:
            return
        requested = [h.strip().lower() for h in
                     (req.get_header("Access-Control-Request-Headers") or "").split(",")
                     if h.strip()]
        permitted = self.allow_headers | set(SIMPLE_HEADERS)
        if any(h not in permitted for h in requested):
            return
        resp.set_header("Access-Control-Allow-Origin", origin)
        if self.allow_credentials:
            resp.set_header("Access-Control-Allow-Credentials", "true")
        if self.max_age:
            resp.set_header("Access-Control-Max-Age", str(self.max_age))
        resp.set_header("Access-Control-Allow-Methods", method.upper())
        if requested:
            resp.set_header("Access-Control-Allow-Headers", ",".join(requested))

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        origin = req.get_header("Origin")
        if not origin or getattr(req.context, "cors_preflight", False):
            return
        self._vary(resp)
        if not self._origin_allowed(origin):
            return
        resp.set_header("Access-Control-Allow-Origin", origin)
        if self.allow_credentials:
            resp.set_header("Access-Control-Allow-Credentials", "true")
        if self.expose_headers:
            resp.set_header("Access-Control-Expose-Headers", self.expose_headers)

    @staticmethod
    def _vary(resp: falcon.Response) -> None:
        current = resp.get_header("Vary") or ""
        if "origin" not in [v.strip().lower() for v in current.split(",")]:
            resp.append_header("Vary", "Origin")


def from_settings(settings) -> CORSMiddleware | None:
    if not settings.cors_allowed_origin:
        return None
    return CORSMiddleware(settings.cors_allowed_origin, settings.cors_allow_headers,
                          allow_credentials=settings.cors_allow_credentials,
                          max_age=settings.cors_max_age,
                          expose_headers=settings.cors_expose_headers,
                          allow_methods=settings.cors_allow_methods)
