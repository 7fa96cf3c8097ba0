"""create_app(settings) -> falcon.App: the middleware and the one route table."""
from __future__ import annotations

import importlib
from typing import Optional

import falcon

from placement_lite.api import errors
from placement_lite.api.auth import AuthMiddleware
from placement_lite.api.microversion import MicroversionMiddleware
from placement_lite.api.middleware import (
    AccessLogMiddleware, InputLimitsMiddleware, RequestIdMiddleware)
from placement_lite.api.policy import Policy
from placement_lite.api.services import Services
from placement_lite.config import Settings
from placement_lite.db.engine import Database

# Each module exports ROUTES = [(uri_template, ResourceClass), ...].
API_MODULES = [
    "placement_lite.api.root",
    "placement_lite.api.inventories",
    "placement_lite.api.resource_providers",
]


def routes():
    for name in API_MODULES:
        module = importlib.import_module(name)
        yield from module.ROUTES


def create_app(settings: Settings, db: Optional[Database] = None) -> falcon.App:
    db = db or Database(settings.db, pool_size=settings.db_pool_size,
                        retries=settings.db_retries)
    policy = Policy.from_settings(settings.policy_profile, settings.policy_file)
    services = Services(settings=settings, db=db, policy=policy)
    middleware = [
        RequestIdMiddleware(),
        AccessLogMiddleware(settings.log_format),
        InputLimitsMiddleware(settings.max_body_bytes, settings.max_query_params),
        MicroversionMiddleware(),
        AuthMiddleware(settings.auth, policy),
    ]
    app = falcon.App(middleware=middleware)
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_qs_csv = False
    app.resp_options.secure_cookies_by_default = False
    errors.install(app)
    for template, resource in routes():
        app.add_route(template, resource(services))
    return app
