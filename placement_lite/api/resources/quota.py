"""POST /quota/check.

POST /quota/check {"project_id": P, "deltas": {name: n}} asks whether P
could add the deltas under the configured model: 204 if so, else 403
`placement.quota.over_limit` with every resource over its limit in
`over_limit` (resource_name, limit, current_usage, delta, project_id,
scope: "project" or "tree").
"""
from __future__ import annotations

from placement_lite.api import render, request
from placement_lite.api.schemas import limits as schema

CHECK = "placement:quota:check"


class QuotaCheck:
    policies = {"POST": CHECK}

    def __init__(self, services):
        self.db = services.db
        self.enforcer = services.enforcer

    def on_post(self, req, resp):
        body = request.json_body(req, schema.QUOTA_CHECK)
        with self.db.read() as conn:
            self.enforcer.check_deltas(conn, body["project_id"], body["deltas"])
        render.no_content(resp)
