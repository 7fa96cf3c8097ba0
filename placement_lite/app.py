"""create_app(settings) -> falcon.App: the middleware and the one route table."""
from __future__ import annotations

import importlib
from typing import Optional

import falcon

from placement_lite.api import cors, errors
from placement_lite.api.auth import AuthMiddleware
from placement_lite.api.metrics import Metrics
from placement_lite.api.microversion import MicroversionMiddleware
from placement_lite.api.middleware import (
    AccessLogMiddleware, HttpRulesMiddleware, InputLimitsMiddleware,
    RequestIdMiddleware)
from placement_lite.api.paths import UrlMiddleware
from placement_lite.api.policy import Policy
from placement_lite.api.services import Services
from placement_lite.config import Settings
from placement_lite.db.engine import Database
from placement_lite.quota import enforce

# Each module exports ROUTES = [(uri_template, ResourceClass), ...].
API_MODULES = [
    "placement_lite.api.root",
    "placement_lite.api.openapi",
    "placement_lite.api.allocation_candidates",
    "placement_lite.api.aggregates",
    "placement_lite.api.allocations",
    "placement_lite.api.inventories",
    "placement_lite.api.resource_classes",
    "placement_lite.api.reshaper",
    "placement_lite.api.resource_providers",
    "placement_lite.api.traits",
    "placement_lite.api.usages",
    "placement_lite.api.catalog",
    "placement_lite.api.lease",
    "placement_lite.api.limits",
    "placement_lite.api.projects",
    "placement_lite.api.quota",
]
# Our own APIs beside Placement's: their errors carry `code` whatever
# microversion the caller sent (Placement's 1.23 cut-off is not theirs).
OWN_API_MODULES = frozenset({
    "placement_lite.api.catalog",
    "placement_lite.api.lease",
    "placement_lite.api.limits",
    "placement_lite.api.projects",
    "placement_lite.api.quota",
})


# The order methods are listed in an Allow header.
_METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class Router(falcon.routing.CompiledRouter):
    """Falcon's router with Placement's answers for methods a route does
    not serve: 405 whose Allow lists the route's own methods, and OPTIONS
    is one of them only when CORS is on (without CORS, Placement answers
    OPTIONS with 405 like any other unserved method)."""

    def __init__(self, options_allowed: bool = False):
        super().__init__()
        self.options_allowed = options_allowed

    def map_http_methods(self, resource, **kwargs):
        method_map = super().map_http_methods(resource, **kwargs)
        allowed = [m for m in _METHOD_ORDER if m in method_map
                   or (m == "OPTIONS" and self.options_allowed)]
        if self.options_allowed and "OPTIONS" not in method_map:
            method_map["OPTIONS"] = _options_responder(allowed)

        def method_not_allowed(req, resp, **_params):
            raise errors.not_allowed(req.method, allowed)

        for method in falcon.constants.COMBINED_METHODS:
            method_map.setdefault(method, method_not_allowed)
        return method_map


def _options_responder(allowed):
    allow = ", ".join(allowed)

    def on_options(req, resp, **_params):
        resp.status = falcon.HTTP_200
        resp.set_header("Allow", allow)
    return on_options


def routes():
    for name in API_MODULES:
        module = importlib.import_module(name)
        yield from module.ROUTES


def create_app(settings: Settings, db: Optional[Database] = None,
               worker: Optional[int] = None) -> falcon.App:
    db = db or Database(settings.db, pool_size=settings.db_pool_size,
                        retries=settings.db_retries)
    policy = Policy.from_settings(settings.policy_profile, settings.policy_file)
    # One quota enforcer for the process: every claim check, quota check
    # and lease budget decides through it.
    services = Services(settings=settings, db=db, policy=policy,
                        enforcer=enforce.Enforcer(settings))
    # A process start (not a supervisor's worker, whose parent checked)
    # refuses settings that contradict the deployment's enforcement.
    enforce.reconcile(db, settings, strict=worker is None)
    services.claim_checks.append(services.enforcer)
    metrics = Metrics(worker)
    metrics.attach(db)
    services.extras["metrics"] = metrics
    observers = [metrics.observe_request] if settings.metrics_enabled else []
    cors_mw = cors.from_settings(settings)
    # Held so the access log can name the route of a request refused
    # before routing (401, 413...), not just "unmatched".
    router = Router(options_allowed=cors_mw is not None)
    middleware = [
        RequestIdMiddleware(),
        AccessLogMiddleware(settings.log_format, observers, router=router),
        *([cors_mw] if cors_mw else []),
        InputLimitsMiddleware(settings.max_body_bytes, settings.max_query_params),
        MicroversionMiddleware(),
        HttpRulesMiddleware(),
        UrlMiddleware(),
        AuthMiddleware(settings.auth, policy,
                       default_token=settings.noauth2_default_token),
    ]
    if db.statements is not None:
        middleware.insert(0, _StatementsHeader(db.statements))
    app = falcon.App(middleware=middleware, router=router)
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_qs_csv = False
    app.resp_options.secure_cookies_by_default = False
    # A response without a body carries no Content-Type (HttpRulesMiddleware
    # names JSON for bodies that do not name a type).
    app.resp_options.default_media_type = None
    table = list(routes())
    own = {template for name in OWN_API_MODULES
           for template, _r in importlib.import_module(name).ROUTES}
    if settings.metrics_enabled:
        from placement_lite.api import metrics as metrics_api
        table += metrics_api.ROUTES
    errors.install(app, code_always=frozenset(own))
    routed = []
    for template, resource_class in table:
        resource = resource_class(services)
        app.add_route(template, resource)
        routed.append((template, resource))
    # The OpenAPI document is built from exactly what is routed here.
    services.extras["route_table"] = routed
    if settings.ui:
        # Imported only when on: without --ui the console adds no route,
        # no template loading and no work to any request. Its HTML pages
        # are not API operations, so they stay out of the OpenAPI document.
        from placement_lite import ui
        for template, resource_class in ui.ROUTES:
            app.add_route(template, resource_class(services))
    return app


class _StatementsHeader:
    """With statement counting on (the benchmark's setting), each response
    says how many SQL statements its request sent."""

    HEADER = "x-placement-lite-statements"

    def __init__(self, counter):
        self.counter = counter

    def process_request(self, req, resp):
        self.counter.reset()

    def process_response(self, req, resp, resource, req_succeeded):
        resp.set_header(self.HEADER, str(self.counter.count()))
