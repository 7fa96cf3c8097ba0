"""Unified limits under /v3, in Keystone's identity v3 shapes.

GET /v3                                   version document (public)
GET, POST /v3/registered_limits           list / batch create (201)
GET, PATCH, DELETE /v3/registered_limits/{registered_limit_id}
GET, POST /v3/limits                      list / batch create (201)
GET, PATCH, DELETE /v3/limits/{limit_id}
GET, HEAD /v3/limits/model                the enforcement model
"""
from __future__ import annotations

from typing import Callable, Optional

import falcon

from placement_lite.api import render, request
from placement_lite.api.schemas import limits as schema
from placement_lite.quota import limits as lim
from placement_lite.quota import enforce, models
from placement_lite.api.auth import READS

RULES = {
    family: {action: f"placement:limits:{family}:{action}"
             for action in ("list", "show", "create", "update", "delete")}
    for family in ("registered_limits", "limits")
}
MODEL_RULE = "placement:limits:model:show"

IDENTITY_VERSION = "v3.14"


def base_url(req: falcon.Request) -> str:
    return req.prefix.rstrip("/") + "/v3"


def collection_links(req: falcon.Request) -> dict:
    return {"self": req.prefix.rstrip("/") + req.relative_uri,
            "previous": None, "next": None}


def render_registered(req, row: dict) -> dict:
    return {
        "id": row["id"],
        "service_id": row["service_id"],
        "region_id": row["region_id"],
        "resource_name": row["resource_name"],
        "default_limit": row["default_limit"],
        "description": row["description"],
        "links": {"self": f"{base_url(req)}/registered_limits/{row['id']}"},
    }


def render_limit(req, row: dict) -> dict:
    is_domain = bool(row["owner_is_domain"])
    return {
        "id": row["id"],
        "project_id": None if is_domain else row["owner_external_id"],
        "domain_id": row["owner_external_id"] if is_domain else None,
        "service_id": row["service_id"],
        "region_id": row["region_id"],
        "resource_name": row["resource_name"],
        "resource_limit": row["resource_limit"],
        "description": row["description"],
        "links": {"self": f"{base_url(req)}/limits/{row['id']}"},
    }


class Resource:
    # The reads oslo.limit makes; with quota_limits_public_read they need
    # no token (oslo.limit configured with auth_type = none sends none).
    oslo_limit_reads = False
    # What a routed subclass must give (a base for others says base=True):
    # checked when the class is made, so a route missing a piece fails at
    # import, not on its first request.
    required: tuple = ()

    def __init_subclass__(cls, base: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        missing = [n for n in cls.required if not hasattr(cls, n)]
        if missing and not base:
            raise TypeError(f"{cls.__name__} does not give {', '.join(missing)}")

    def __init__(self, services):
        self.services = services
        self.db = services.db
        self.settings = services.settings
        if self.oslo_limit_reads and self.settings.quota_limits_public_read:
            self.public_methods = READS

    @property
    def model(self) -> models.Model:
        """The deployment's model, as stored (not this process's flag)."""
        with self.db.read() as conn:
            return self.services.enforcer.model_for(conn)

    def enforcement(self) -> enforce.Enforcement:
        with self.db.read() as conn:
            return self.services.enforcer.in_force(conn)


class Collection(Resource, base=True):
    """GET of a Keystone collection: the rows `list_rows` finds for the
    query string (validated by `query_schema`, if the route takes one),
    each shaped by `shape`, under `key`, with the collection's links."""
    oslo_limit_reads = True
    required = ("key", "list_rows", "shape")
    key: str
    query_schema: Optional[dict] = None
    list_rows: Callable[..., list]  # (conn, **query) -> rows
    shape: Callable[[falcon.Request, dict], dict]

    def on_get(self, req, resp):
        query = request.query(req, self.query_schema) if self.query_schema else {}
        with self.db.read() as conn:
            rows = self.list_rows(conn, **query)
        render.send(resp, {self.key: [self.shape(req, r) for r in rows],
                           "links": collection_links(req)})


class Member(Resource, base=True):
    """GET and DELETE of one row of a Keystone collection, by the id in
    the path: `get_row` reads it (shaped by `shape`, under `key`),
    `delete_row` deletes it."""
    oslo_limit_reads = True
    required = ("key", "get_row", "delete_row", "shape")
    key: str
    get_row: Callable[..., dict]  # (conn, row_id) -> row
    delete_row: Callable[..., None]  # (conn, row_id)
    shape: Callable[[falcon.Request, dict], dict]

    def on_get(self, req, resp, **path):
        (row_id,) = path.values()
        with self.db.read() as conn:
            row = self.get_row(conn, row_id)
        render.send(resp, {self.key: self.shape(req, row)})

    def on_delete(self, req, resp, **path):
        (row_id,) = path.values()
        self.db.run_write(lambda conn: self.delete_row(conn, row_id))
        render.no_content(resp)


class IdentityVersion(Resource):
    """Enough of Keystone's version document for clients to discover v3."""
    policies: dict = {}
    public_methods = READS

    def on_get(self, req, resp):
        render.send(resp, {"version": {
            "id": IDENTITY_VERSION,
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": base_url(req) + "/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.identity-v3+json"}],
        }})

    on_head = on_get


class RegisteredLimits(Collection):
    policies = {"GET": RULES["registered_limits"]["list"],
                "POST": RULES["registered_limits"]["create"]}
    key = "registered_limits"
    query_schema = schema.REGISTERED_LIMITS_QUERY
    list_rows = staticmethod(lim.list_registered)
    shape = staticmethod(render_registered)

    def on_post(self, req, resp):
        body = request.json_body(req, schema.REGISTERED_LIMITS_CREATE)
        rows = self.db.run_write(
            lambda conn: lim.create_registered(conn, body["registered_limits"]))
        render.send(resp, {"registered_limits": [render_registered(req, r)
                                                 for r in rows]},
                    falcon.HTTP_201)


class RegisteredLimit(Member):
    policies = {"GET": RULES["registered_limits"]["show"],
                "PATCH": RULES["registered_limits"]["update"],
                "DELETE": RULES["registered_limits"]["delete"]}
    key = "registered_limit"
    get_row = staticmethod(lim.get_registered)
    delete_row = staticmethod(lim.delete_registered)
    shape = staticmethod(render_registered)

    def on_patch(self, req, resp, registered_limit_id):
        body = request.json_body(req, schema.REGISTERED_LIMIT_UPDATE)
        row = self.db.run_write(lambda conn: lim.update_registered(
            conn, registered_limit_id, body["registered_limit"]))
        render.send(resp, {"registered_limit": render_registered(req, row)})


class Limits(Collection):
    policies = {"GET": RULES["limits"]["list"],
                "POST": RULES["limits"]["create"]}
    key = "limits"
    query_schema = schema.LIMITS_QUERY
    list_rows = staticmethod(lim.list_limits)
    shape = staticmethod(render_limit)

    def on_post(self, req, resp):
        body = request.json_body(req, schema.LIMITS_CREATE)
        model = self.model
        rows = self.db.run_write(
            lambda conn: lim.create_limits(conn, body["limits"], model))
        render.send(resp, {"limits": [render_limit(req, r) for r in rows]},
                    falcon.HTTP_201)


class Limit(Member):
    policies = {"GET": RULES["limits"]["show"],
                "PATCH": RULES["limits"]["update"],
                "DELETE": RULES["limits"]["delete"]}
    key = "limit"
    get_row = staticmethod(lim.get_limit)
    delete_row = staticmethod(lim.delete_limit)
    shape = staticmethod(render_limit)

    def on_patch(self, req, resp, limit_id):
        body = request.json_body(req, schema.LIMIT_UPDATE)
        model = self.model
        row = self.db.run_write(
            lambda conn: lim.update_limit(conn, limit_id, body["limit"], model))
        render.send(resp, {"limit": render_limit(req, row)})


class LimitModel(Resource):
    oslo_limit_reads = True
    policies = {"GET": MODEL_RULE}

    def on_get(self, req, resp):
        enforcement = self.enforcement()
        model = models.get_model(enforcement.model)
        # `enforced` is ours (Keystone has no such switch): whether claims
        # are checked against these limits at all.
        render.send(resp, {"model": {"name": model.name,
                                     "description": model.description,
                                     "enforced": enforcement.enforce}})

    on_head = on_get
