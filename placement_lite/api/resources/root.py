"""GET / (the version document) and GET /healthcheck."""
from __future__ import annotations

import logging

import falcon
from placement_lite.api import render
from placement_lite.api.auth import READS
from placement_lite.api.microversion import MAX_VERSION, MIN_VERSION
from placement_lite.quota import enforce

LOG = logging.getLogger(__name__)


class Root:
    policies: dict = {}
    public_methods = READS
    # Version discovery answers whatever the caller accepts, as Placement's.
    produces = None

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp):
        render.send(resp, {"versions": [{
            "id": f"v{MIN_VERSION.major}.0",
            "min_version": str(MIN_VERSION),
            "max_version": str(MAX_VERSION),
            "status": "CURRENT",
            "links": [render.link("self", "")],
        }]})
        render.cache_headers(req, resp)


class Healthcheck:
    policies: dict = {}
    public_methods = READS
    # Probes send whatever Accept their tool sends; they read the status.
    produces = None

    def __init__(self, services):
        self.db = services.db
        self.settings = services.settings

    def on_get(self, req, resp):
        try:
            # Reading the deployment's quota enforcement is the ping.
            with self.db.read() as conn:
                enforcement = enforce.current(conn, self.settings)
        except Exception:  # noqa: BLE001 - any failure means "not healthy"
            LOG.exception("healthcheck: database unreachable")
            render.send(resp, {"status": "error", "database": "unreachable"},
                        falcon.HTTP_503)
            return
        render.send(resp, {"status": "ok", "database": "ok",
                           "quota": enforcement.as_dict()})

    # Load balancers often probe with HEAD: same check, status only.
    on_head = on_get
