"""create_app(settings) -> falcon.App: the middleware and the one route table;
build_wsgi, the same app as it is served, behind the auth mode's middleware."""
from __future__ import annotations

import gc
import logging
import threading
from dataclasses import dataclass
from typing import Optional

import falcon

from placement_lite.api import cors, errors, openapi
from placement_lite.api import metrics as metrics_api
from placement_lite.api.auth import AuthMiddleware
from placement_lite.api.metrics import Metrics
from placement_lite.api.microversion import MicroversionMiddleware
from placement_lite.api.middleware import (
    AccessLogMiddleware, HttpRulesMiddleware, InputLimitsMiddleware,
    RequestIdMiddleware)
from placement_lite.api.paths import UrlMiddleware
from placement_lite.api.policy import Policy
from placement_lite.api.resources import (
    aggregates, allocation_candidates, allocations, calendars, catalog, explain,
    inventories, lease, limits, projects, quota, reservations, reshaper,
    resource_classes, resource_providers, root, traits, usages, window_candidates)
from placement_lite.api.services import Services
from placement_lite.candidates.ahead import AheadCache
from placement_lite.candidates.facts_cache import FactsCache
from placement_lite.config import Settings
from placement_lite.db.engine import Database, from_settings
from placement_lite.quota import enforce, reserved

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Route:
    template: str
    resource: type
    # Our own APIs beside Placement's (unified limits, projects, the
    # catalog, quota, leases): their errors carry `code` whatever
    # microversion the caller sent (Placement's 1.23 cut-off is not theirs).
    own: bool = False


# The route table: every URL the service answers, and the resource class
# that answers it. Each resource is built once with the Services.
ROUTES: tuple[Route, ...] = (
    Route("/", root.Root),
    Route("/healthcheck", root.Healthcheck),
    Route("/openapi.json", openapi.OpenAPIDocument),
    # Placement's API
    Route("/resource_providers", resource_providers.ResourceProviders),
    Route("/resource_providers/{uuid}", resource_providers.ResourceProvider),
    Route("/resource_providers/{uuid}/inventories", inventories.Inventories),
    Route("/resource_providers/{uuid}/inventories/{resource_class}",
          inventories.Inventory),
    Route("/resource_providers/{uuid}/aggregates", aggregates.ProviderAggregates),
    Route("/resource_providers/{uuid}/traits", traits.ProviderTraits),
    Route("/resource_providers/{uuid}/allocations", allocations.ProviderAllocations),
    Route("/resource_providers/{uuid}/usages", usages.ProviderUsages),
    Route("/resource_classes", resource_classes.ResourceClasses),
    Route("/resource_classes/{name}", resource_classes.ResourceClass),
    Route("/traits", traits.Traits),
    Route("/traits/{name}", traits.Trait),
    Route("/allocations", allocations.Allocations),
    Route("/allocations/{consumer_uuid}", allocations.ConsumerAllocations),
    Route("/allocation_candidates", allocation_candidates.AllocationCandidates),
    Route("/usages", usages.Usages),
    Route("/reshaper", reshaper.Reshaper),
    # Keystone's catalog, projects and unified limits (oslo.limit reads them)
    Route("/v3/services", catalog.Services, own=True),
    Route("/v3/services/{service_id}", catalog.Service, own=True),
    Route("/v3/regions", catalog.Regions, own=True),
    Route("/v3/regions/{region_id}", catalog.Region, own=True),
    Route("/v3/endpoints", catalog.Endpoints, own=True),
    Route("/v3/endpoints/{endpoint_id}", catalog.Endpoint, own=True),
    Route("/v3", limits.IdentityVersion, own=True),
    Route("/v3/", limits.IdentityVersion, own=True),
    Route("/v3/registered_limits", limits.RegisteredLimits, own=True),
    Route("/v3/registered_limits/{registered_limit_id}", limits.RegisteredLimit,
          own=True),
    Route("/v3/limits", limits.Limits, own=True),
    Route("/v3/limits/model", limits.LimitModel, own=True),
    Route("/v3/limits/{limit_id}", limits.Limit, own=True),
    Route("/v3/projects", projects.Projects, own=True),
    Route("/v3/projects/{project_id}", projects.Project, own=True),
    # Quota and Blazar's lease policy
    Route("/quota/check", quota.QuotaCheck, own=True),
    Route("/quota/lease-ledger", lease.LeaseLedger, own=True),
    Route("/v1/check-create", lease.CheckCreate, own=True),
    Route("/v1/check-update", lease.CheckUpdate, own=True),
    Route("/v1/on-end", lease.OnEnd, own=True),
    # Reservations: what is booked ahead, over a period
    Route("/reservations/calendar/resource_providers/{uuid}",
          calendars.ProviderCalendar, own=True),
    Route("/reservations/calendar/projects/{project_id}",
          calendars.ProjectCalendar, own=True),
    # Reservations: room on providers held for a window of time
    Route("/reservations", reservations.Reservations, own=True),
    Route("/reservations/{reservation_id}", reservations.OneReservation,
          own=True),
    Route("/reservations/{reservation_id}/end", reservations.ReservationEnd,
          own=True),
    # Why a candidates query answers what it does
    Route("/explain/allocation_candidates", explain.ExplainAllocationCandidates,
          own=True),
    # Where a candidates query fits throughout a window, beside reservations
    Route("/reservations/allocation_candidates", window_candidates.WindowCandidates,
          own=True),
)
# Served only when metrics are enabled.
METRICS_ROUTES: tuple[Route, ...] = (Route("/metrics", metrics_api.MetricsResource),)


def routes():
    """(template, resource class) for every route served whatever the
    settings."""
    return [(r.template, r.resource) for r in ROUTES]


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


def create_app(settings: Settings, db: Optional[Database] = None,
               worker: Optional[int] = None, warm: bool = False) -> falcon.App:
    """The API. With `warm` (a serving process), the copy of the providers'
    facts is read at once in the background, not by the first candidates
    request (a whole read takes seconds at 100,000 providers)."""
    db = db or from_settings(settings)
    policy = Policy.from_settings(settings.policy_profile, settings.policy_file)
    # One quota enforcer for the process: every claim check, quota check
    # and lease budget decides through it.
    services = Services(settings=settings, db=db, policy=policy,
                        enforcer=enforce.Enforcer(settings),
                        facts=FactsCache(settings.facts_check_seconds)
                        if settings.facts_in_memory else None,
                        ahead=None if settings.facts_in_memory else AheadCache())
    # A process start (not a supervisor's worker, whose parent checked)
    # refuses settings that contradict the deployment's enforcement.
    enforce.reconcile(db, settings, strict=worker is None)
    services.claim_checks.append(services.enforcer)
    # Reservation writes: quota at every instant, and lease hours.
    services.reservation_checks.append(reserved.check_for(services.enforcer))
    metrics = Metrics(worker)
    metrics.attach(db)
    metrics.facts = services.facts
    services.metrics = metrics
    if warm and services.facts is not None:
        threading.Thread(target=_read_facts, args=(services,),
                         name="facts-copy", daemon=True).start()
    observers = [metrics.observe_request] if settings.metrics else []
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
    table = ROUTES + (METRICS_ROUTES if settings.metrics else ())
    errors.install(app, code_always=frozenset(r.template for r in table if r.own))
    for route in table:
        resource = route.resource(services)
        app.add_route(route.template, resource)
        # The OpenAPI document is built from exactly what is routed here.
        services.routed.append((route.template, resource))
    if settings.ui:
        # Imported only when on: without --ui the console adds no route,
        # no template loading and no work to any request. Its HTML pages
        # are not API operations, so they stay out of the OpenAPI document.
        from placement_lite import ui
        for template, resource_class in ui.ROUTES:
            app.add_route(template, resource_class(services))
    return app


def build_wsgi(settings: Settings, db: Optional[Database] = None,
               worker: Optional[int] = None, warm: bool = False):
    """The app, wrapped for the configured auth mode (keystone's auth_token)
    and, outermost, for proxy headers when they are on;
    `warm`: it serves in this process (see create_app)."""
    app = create_app(settings, db, worker=worker, warm=warm)
    if settings.auth == "keystone":
        from placement_lite.api import keystone
        before_auth = None
        if settings.ui:
            # The console's cookie reaches auth_token as a token (/ui only).
            # Wired here, where api/ and ui/ meet: api/ never imports ui/.
            from placement_lite.ui.session import CookieToken
            before_auth = CookieToken
        app = keystone.wrap(app, settings, before_auth=before_auth)
    if settings.proxy_headers:
        from placement_lite.api.proxy_headers import ProxyHeaders
        app = ProxyHeaders(app)
    return app


def _read_facts(services: Services) -> None:
    """A serving process's facts thread: the copy read at start, then
    checked against the database now and then."""
    try:
        with services.db.read() as conn:
            services.facts.current(conn)
    except Exception:  # noqa: BLE001 - the first request that needs it reads it
        LOG.warning("could not read the providers' facts at start; the first "
                    "candidates request will", exc_info=True)
    else:
        _freeze()
    services.facts.keep_checking(services.db)


def _freeze() -> None:
    # The copy is most of what the process holds (millions of objects at
    # 100,000 providers) and lives as long as it, like what start-up built
    # (worker.run_worker freezes that before this thread reads): out of the
    # collector's full passes too, which otherwise walk it every few
    # candidates requests (25-30 ms each at 100,000 providers) and free
    # nothing. Refreshes replace parts of it by reference counting, which
    # freezing leaves alone. Objects of requests already in flight are
    # frozen with it; whatever cyclic garbage they leave is bounded by
    # what a few requests allocate, once.
    gc.freeze()


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
