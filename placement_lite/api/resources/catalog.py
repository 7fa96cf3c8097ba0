"""The catalog limits are scoped by: /v3/services, /v3/regions,
/v3/endpoints, in Keystone's shapes (enough for oslo.limit to find its
service and region from its endpoint id)."""
from __future__ import annotations

import falcon

from placement_lite.api import render, request
from placement_lite.api.resources.limits import Resource, base_url, collection_links
from placement_lite.api.schemas import limits as schema
from placement_lite.quota import catalog

READ = "placement:limits:catalog:read"
WRITE = "placement:limits:catalog:write"


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


class Services(Resource):
    oslo_limit_reads = True
    policies = {"GET": READ, "POST": WRITE}

    def on_get(self, req, resp):
        query = request.query(req, schema.SERVICES_QUERY)
        with self.db.read() as conn:
            rows = catalog.list_services(conn, **query)
        render.send(resp, {"services": [render_service(req, r) for r in rows],
                           "links": collection_links(req)})

    def on_post(self, req, resp):
        body = request.json_body(req, schema.SERVICE_CREATE)["service"]
        row = self.db.run_write(lambda conn: catalog.create_service(conn, **body))
        render.send(resp, {"service": render_service(req, row)}, falcon.HTTP_201)


class Service(Resource):
    oslo_limit_reads = True
    policies = {"GET": READ, "DELETE": WRITE}

    def on_get(self, req, resp, service_id):
        with self.db.read() as conn:
            row = catalog.get_service(conn, service_id)
        render.send(resp, {"service": render_service(req, row)})

    def on_delete(self, req, resp, service_id):
        self.db.run_write(lambda conn: catalog.delete_service(conn, service_id))
        render.no_content(resp)


class Regions(Resource):
    oslo_limit_reads = True
    policies = {"GET": READ, "POST": WRITE}

    def on_get(self, req, resp):
        with self.db.read() as conn:
            rows = catalog.list_regions(conn)
        render.send(resp, {"regions": [render_region(req, r) for r in rows],
                           "links": collection_links(req)})

    def on_post(self, req, resp):
        body = request.json_body(req, schema.REGION_CREATE)["region"]
        row = self.db.run_write(lambda conn: catalog.create_region(conn, **body))
        render.send(resp, {"region": render_region(req, row)}, falcon.HTTP_201)


class Region(Resource):
    oslo_limit_reads = True
    policies = {"GET": READ, "DELETE": WRITE}

    def on_get(self, req, resp, region_id):
        with self.db.read() as conn:
            row = catalog.get_region(conn, region_id)
        render.send(resp, {"region": render_region(req, row)})

    def on_delete(self, req, resp, region_id):
        self.db.run_write(lambda conn: catalog.delete_region(conn, region_id))
        render.no_content(resp)


def _endpoint_fields(body: dict) -> dict:
    fields = dict(body)
    legacy = fields.pop("region", None)
    if "region_id" not in fields and legacy is not None:
        fields["region_id"] = legacy
    return fields


class Endpoints(Resource):
    oslo_limit_reads = True
    policies = {"GET": READ, "POST": WRITE}

    def on_get(self, req, resp):
        query = request.query(req, schema.ENDPOINTS_QUERY)
        with self.db.read() as conn:
            rows = catalog.list_endpoints(conn, **query)
        render.send(resp, {"endpoints": [render_endpoint(req, r) for r in rows],
                           "links": collection_links(req)})

    def on_post(self, req, resp):
        body = _endpoint_fields(
            request.json_body(req, schema.ENDPOINT_CREATE)["endpoint"])
        row = self.db.run_write(lambda conn: catalog.create_endpoint(conn, **body))
        render.send(resp, {"endpoint": render_endpoint(req, row)}, falcon.HTTP_201)


class Endpoint(Resource):
    oslo_limit_reads = True
    policies = {"GET": READ, "PATCH": WRITE, "DELETE": WRITE}

    def on_get(self, req, resp, endpoint_id):
        with self.db.read() as conn:
            row = catalog.get_endpoint(conn, endpoint_id)
        render.send(resp, {"endpoint": render_endpoint(req, row)})

    def on_patch(self, req, resp, endpoint_id):
        body = _endpoint_fields(
            request.json_body(req, schema.ENDPOINT_UPDATE)["endpoint"])
        row = self.db.run_write(
            lambda conn: catalog.update_endpoint(conn, endpoint_id, body))
        render.send(resp, {"endpoint": render_endpoint(req, row)})

    def on_delete(self, req, resp, endpoint_id):
        self.db.run_write(lambda conn: catalog.delete_endpoint(conn, endpoint_id))
        render.no_content(resp)
