"""The lease-policy service Blazar's ExternalServiceFilter calls.

POST /v1/check-create  {"context": {...}, "lease": {...}}
POST /v1/check-update  {"context": {...}, "current_lease": {...}, "lease": {...}}
POST /v1/on-end        {"context": {...}, "lease": {...}}
204 allows; 403 {"message": "..."} refuses with words Blazar shows the
user; a malformed body is a 400.

Auth: with settings.lease_token set, these paths take exactly that static
token in X-Auth-Token (what Blazar's external_service_token sends) and no
identity; without it they need a normal identity allowed by the
placement:lease:check rule.

GET /quota/lease-ledger?project_id=P lists P's charges and refunds and
its balance per resource, for audit.
"""
from __future__ import annotations

import hmac
import json

import falcon

from placement_lite.api import errors, render, request
from placement_lite.quota import lease

CHECK = "placement:lease:check"
LEDGER = "placement:lease:ledger"


class LeaseEndpoint:
    event = ""
    policies = {"POST": CHECK}

    def __init__(self, services):
        self.db = services.db
        self.token = services.settings.lease_token
        if self.token:
            # The static token replaces an identity: checked in on_post.
            self.public_methods = frozenset({"POST"})
        self.policy = lease.LeasePolicy(services.settings)

    def _authenticate(self, req):
        if not self.token:
            return  # the auth middleware and policy already ran
        sent = req.get_header("X-Auth-Token") or ""
        if not hmac.compare_digest(sent.encode(), self.token.encode()):
            raise errors.ApiError(
                falcon.HTTP_401, "This endpoint needs the lease-policy token "
                "(Blazar's [enforcement] external_service_token) in "
                "X-Auth-Token.")

    def on_post(self, req, resp):
        self._authenticate(req)
        body = request.json_body(req)
        try:
            parsed = lease.parse_request(self.event, body)
            self.db.run_write(lambda conn: self.policy.run(conn, parsed))
        except lease.LeaseDenied as denied:
            resp.status = falcon.HTTP_403
            resp.content_type = falcon.MEDIA_JSON
            resp.text = json.dumps({"message": denied.detail})
            return
        render.no_content(resp)


class CheckCreate(LeaseEndpoint):
    event = "create"


class CheckUpdate(LeaseEndpoint):
    event = "update"


class OnEnd(LeaseEndpoint):
    event = "end"


LEDGER_QUERY = {
    "type": "object",
    "properties": {"project_id": {"type": "string", "minLength": 1}},
    "required": ["project_id"],
    "additionalProperties": False,
}


class LeaseLedger:
    policies = {"GET": LEDGER}

    def __init__(self, services):
        self.db = services.db

    def on_get(self, req, resp):
        query = request.query(req, LEDGER_QUERY)
        with self.db.read() as conn:
            render.send(resp, lease.ledger(conn, query["project_id"]))


ROUTES = [
    ("/v1/check-create", CheckCreate),
    ("/v1/check-update", CheckUpdate),
    ("/v1/on-end", OnEnd),
    ("/quota/lease-ledger", LeaseLedger),
]
