"""POST /quota/check, and who may reach the quota endpoints without a token.

POST /quota/check {"project_id": P, "deltas": {name: n}} asks whether P
could add the deltas under the configured model: 204 if so, else 403
`placement.quota.over_limit` with every resource over its limit in
`over_limit` (resource_name, limit, current_usage, delta, project_id,
scope: "project" or "tree").
"""
from __future__ import annotations

import re

import falcon

from placement_lite.api import render, request
from placement_lite.api.auth import AuthMiddleware
from placement_lite.api.schemas import limits as schema
from placement_lite.quota.enforce import Enforcer

CHECK = "placement:quota:check"

# The reads oslo.limit makes (model, limits, registered limits, endpoint,
# service, region), and the version document it discovers v3 with.
_LIMIT_READS = re.compile(
    r"^/v3(/|/limits(/model|/[^/]+)?|/registered_limits(/[^/]+)?"
    r"|/endpoints(/[^/]+)?|/services(/[^/]+)?|/regions(/[^/]+)?)?/?$")
LEASE_PATHS = frozenset({"/v1/check-create", "/v1/check-update", "/v1/on-end"})


def auth_class(settings):
    """AuthMiddleware, widened where the quota settings open a door.

    - quota_limits_public_read: GET/HEAD of the limit reads need no token
      (oslo.limit with auth_type = none sends none); writes still do.
    - lease_token: the /v1 lease-policy endpoints check that static token
      themselves (Blazar sends it as X-Auth-Token) instead of an identity.
    """
    public_reads = settings.quota_limits_public_read
    lease_token = settings.lease_token

    class QuotaAuthMiddleware(AuthMiddleware):
        def _public(self, req: falcon.Request) -> bool:
            if public_reads and req.method in ("GET", "HEAD") and \
                    _LIMIT_READS.match(req.path):
                return True
            if lease_token and req.path in LEASE_PATHS:
                return True
            return super()._public(req)

    return QuotaAuthMiddleware


class QuotaCheck:
    policies = {"POST": CHECK}

    def __init__(self, services):
        self.db = services.db
        self.enforcer = Enforcer(services.settings)

    def on_post(self, req, resp):
        body = request.json_body(req, schema.QUOTA_CHECK)
        with self.db.read() as conn:
            self.enforcer.check_deltas(conn, body["project_id"], body["deltas"])
        render.no_content(resp)


ROUTES = [("/quota/check", QuotaCheck)]
