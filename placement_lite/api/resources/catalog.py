"""The catalog limits are scoped by: /v3/services, /v3/regions,
/v3/endpoints, in Keystone's shapes (enough for oslo.limit to find its
service and region from its endpoint id)."""
from __future__ import annotations

from typing import Callable

import falcon

from placement_lite.api import render, request
from placement_lite.api.resources.limits import Collection, Member, base_url
from placement_lite.api.schemas import limits as schema
from placement_lite.quota import catalog

READ = "placement:limits:catalog:read"
WRITE = "placement:limits:catalog:write"
SERVICES = {"list": "placement:limits:services:list",
            "show": "placement:limits:services:show"}
ENDPOINTS = {"list": "placement:limits:endpoints:list",
             "show": "placement:limits:endpoints:show"}


def render_service(req, row):
    return {"id": row["id"], "type": row["type"], "name": row["name"],
            "description": row["description"], "enabled": bool(row["enabled"]),
            "links": {"self": f"{base_url(req)}/services/{row['id']}"}}


def render_region(req, row):
    return {"id": row["id"], "description": row["description"] or "",
            "parent_region_id": row["parent_region_id"],
            "links": {"self": f"{base_url(req)}/regions/{row['id']}"}}


def render_endpoint(req, row):
    return {"id": row["id"], "service_id": row["service_id"],
            "region_id": row["region_id"], "region": row["region_id"],
            "interface": row["interface"], "url": row["url"],
            "enabled": bool(row["enabled"]),
            "links": {"self": f"{base_url(req)}/endpoints/{row['id']}"}}


class _Catalog(Collection, base=True):
    """A catalog collection: POST creates one row from the body's `member`."""
    policies = {"GET": READ, "POST": WRITE}
    required = Collection.required + ("member", "create_schema", "create_row")
    member: str
    create_schema: dict
    create_row: Callable[..., dict]  # (conn, **fields) -> row

    def fields(self, body: dict) -> dict:
        return body

    def on_post(self, req, resp):
        body = self.fields(request.json_body(req, self.create_schema)[self.member])
        row = self.db.run_write(lambda conn: self.create_row(conn, **body))
        render.send(resp, {self.member: self.shape(req, row)}, falcon.HTTP_201)


class Services(_Catalog):
    policies = {"GET": SERVICES["list"], "POST": WRITE}
    key, member = "services", "service"
    query_schema = schema.SERVICES_QUERY
    create_schema = schema.SERVICE_CREATE
    list_rows = staticmethod(catalog.list_services)
    create_row = staticmethod(catalog.create_service)
    shape = staticmethod(render_service)


class Service(Member):
    policies = {"GET": SERVICES["show"], "DELETE": WRITE}
    key = "service"
    get_row = staticmethod(catalog.get_service)
    delete_row = staticmethod(catalog.delete_service)
    shape = staticmethod(render_service)


class Regions(_Catalog):
    key, member = "regions", "region"
    create_schema = schema.REGION_CREATE
    list_rows = staticmethod(catalog.list_regions)
    create_row = staticmethod(catalog.create_region)
    shape = staticmethod(render_region)


class Region(Member):
    policies = {"GET": READ, "DELETE": WRITE}
    key = "region"
    get_row = staticmethod(catalog.get_region)
    delete_row = staticmethod(catalog.delete_region)
    shape = staticmethod(render_region)


def _endpoint_fields(body: dict) -> dict:
    fields = dict(body)
    legacy = fields.pop("region", None)
    if "region_id" not in fields and legacy is not None:
        fields["region_id"] = legacy
    return fields


class Endpoints(_Catalog):
    policies = {"GET": ENDPOINTS["list"], "POST": WRITE}
    key, member = "endpoints", "endpoint"
    query_schema = schema.ENDPOINTS_QUERY
    create_schema = schema.ENDPOINT_CREATE
    list_rows = staticmethod(catalog.list_endpoints)
    create_row = staticmethod(catalog.create_endpoint)
    shape = staticmethod(render_endpoint)
    fields = staticmethod(_endpoint_fields)


class Endpoint(Member):
    policies = {"GET": ENDPOINTS["show"], "PATCH": WRITE, "DELETE": WRITE}
    key = "endpoint"
    get_row = staticmethod(catalog.get_endpoint)
    delete_row = staticmethod(catalog.delete_endpoint)
    shape = staticmethod(render_endpoint)

    def on_patch(self, req, resp, endpoint_id):
        body = _endpoint_fields(
            request.json_body(req, schema.ENDPOINT_UPDATE)["endpoint"])
        row = self.db.run_write(
            lambda conn: catalog.update_endpoint(conn, endpoint_id, body))
        render.send(resp, {"endpoint": render_endpoint(req, row)})
