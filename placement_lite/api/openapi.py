"""GET /openapi.json: an OpenAPI 3.1 document of the API as served.

The document is built from the route table itself, so every route and
method the service answers is in it and nothing else is: path parameters
come from the URI templates, summaries from openapi.yaml (shipped beside
this module) or the resource's docstring. Request bodies and query strings
are the very jsonschema documents the resources validate with (BODIES and
QUERIES below), taken at the latest microversion, which is the one the
document describes.
"""
from __future__ import annotations

import copy
import json
import re
import threading
from pathlib import Path
from typing import Any, Iterable

import falcon
import yaml

from placement_lite.api.auth import READS, is_public
from placement_lite.api.microversion import MAX_VERSION, VersionedTable
from placement_lite.api.resources import explain, resource_providers
from placement_lite.api.schemas import (
    aggregates, allocation_candidates, allocations, calendars, inventories, lease,
    limits, reservations, reshaper, resource_classes, traits)
from placement_lite.api.schemas import resource_providers as providers

OVERLAY = Path(__file__).with_name("openapi.yaml")
_PARAM_RE = re.compile(r"{([^}:]+)(?::[^}]*)?}")
# Methods a document describes; HEAD mirrors GET and OPTIONS is CORS.
_METHODS = ("GET", "PUT", "POST", "PATCH", "DELETE")


def _load_overlay() -> dict:
    with open(OVERLAY, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


# (route template, method) -> the schema its request body is validated with.
BODIES: dict[tuple[str, str], Any] = {
    ("/resource_providers", "post"): providers.CREATE,
    ("/resource_providers/{uuid}", "put"): providers.UPDATE,
    ("/resource_providers/{uuid}/inventories", "put"): inventories.REPLACE,
    ("/resource_providers/{uuid}/inventories", "post"): inventories.CREATE_ONE,
    ("/resource_providers/{uuid}/inventories/{resource_class}", "put"):
        inventories.UPDATE_ONE,
    ("/resource_providers/{uuid}/aggregates", "put"): aggregates.UPDATE,
    ("/resource_providers/{uuid}/traits", "put"): traits.SET_FOR_PROVIDER,
    ("/resource_classes", "post"): resource_classes.NAMED,
    ("/allocations/{consumer_uuid}", "put"): allocations.PUT,
    ("/allocations", "post"): allocations.POST,
    ("/reshaper", "post"): reshaper.RESHAPE,
    ("/v3/registered_limits", "post"): limits.REGISTERED_LIMITS_CREATE,
    ("/v3/registered_limits/{registered_limit_id}", "patch"):
        limits.REGISTERED_LIMIT_UPDATE,
    ("/v3/limits", "post"): limits.LIMITS_CREATE,
    ("/v3/limits/{limit_id}", "patch"): limits.LIMIT_UPDATE,
    ("/v3/projects", "post"): limits.PROJECT_CREATE,
    ("/v3/projects/{project_id}", "patch"): limits.PROJECT_UPDATE,
    ("/v3/services", "post"): limits.SERVICE_CREATE,
    ("/v3/regions", "post"): limits.REGION_CREATE,
    ("/v3/endpoints", "post"): limits.ENDPOINT_CREATE,
    ("/v3/endpoints/{endpoint_id}", "patch"): limits.ENDPOINT_UPDATE,
    ("/quota/check", "post"): limits.QUOTA_CHECK,
    # As Blazar may send them (counts as digit strings too), which the
    # service reads before validating with lease.CHECK_CREATE and the rest.
    ("/v1/check-create", "post"): lease.SENT_CHECK_CREATE,
    ("/v1/check-update", "post"): lease.SENT_CHECK_UPDATE,
    ("/v1/on-end", "post"): lease.SENT_ON_END,
    ("/reservations", "post"): reservations.CREATE,
    ("/reservations/{reservation_id}", "put"): reservations.UPDATE,
}
# (route template, method) -> the schema its query string is validated with.
QUERIES: dict[tuple[str, str], Any] = {
    # Built from the filters registered for the version asked for.
    ("/resource_providers", "get"): resource_providers.query_schema_at,
    ("/traits", "get"): traits.LIST_QUERY,
    ("/allocation_candidates", "get"): allocation_candidates.QUERY,
    ("/explain/allocation_candidates", "get"): explain.query_schema_at,
    ("/reservations/allocation_candidates", "get"): allocation_candidates.WINDOW_QUERY,
    ("/usages", "get"): allocations.USAGES,
    ("/v3/registered_limits", "get"): limits.REGISTERED_LIMITS_QUERY,
    ("/v3/limits", "get"): limits.LIMITS_QUERY,
    ("/v3/projects", "get"): limits.PROJECTS_QUERY,
    ("/v3/services", "get"): limits.SERVICES_QUERY,
    ("/v3/endpoints", "get"): limits.ENDPOINTS_QUERY,
    ("/quota/lease-ledger", "get"): lease.LEDGER_QUERY,
    ("/reservations", "get"): reservations.LIST_QUERY,
    ("/reservations/calendar/resource_providers/{uuid}", "get"): calendars.QUERY,
    ("/reservations/calendar/projects/{project_id}", "get"): calendars.QUERY,
}


def latest(schema) -> dict:
    """The document a BODIES or QUERIES entry means at the latest
    microversion: a VersionedTable at that version, a function of the
    version called with it, a plain document as it is."""
    if isinstance(schema, VersionedTable):
        schema = schema.at(MAX_VERSION)
    elif callable(schema):
        schema = schema(MAX_VERSION)
    return copy.deepcopy(schema)


def _query_parameters(schema: dict) -> list[dict]:
    required = set(schema.get("required", ()))
    params = []
    for name, prop in schema.get("properties", {}).items():
        param = {"name": name, "in": "query", "required": name in required,
                 "schema": prop}
        if prop.get("type") == "array":
            # Repeated parameters (?required=A&required=B) arrive as lists.
            param.update(style="form", explode=True)
        params.append(param)
    return params


def _responders(resource) -> Iterable[str]:
    for verb in _METHODS:
        if callable(getattr(resource, f"on_{verb.lower()}", None)):
            yield verb


def _summary(resource) -> str:
    doc = (resource.__doc__ or "").strip().splitlines()
    return doc[0].rstrip(".") if doc else type(resource).__name__


def build(route_table) -> dict:
    """The document for (template, resource instance) pairs, as routed:
    an operation its resource serves without a token has no security."""
    overlay = _load_overlay()
    doc = {
        "openapi": "3.1.0",
        "info": overlay["info"],
        "components": overlay["components"],
        "security": [{"token": []}],
        "paths": {},
    }
    described = overlay.get("paths", {})
    seen_ids: set[str] = set()
    for template, resource in route_table:
        path_item = doc["paths"].setdefault(template, {})
        names = _PARAM_RE.findall(template)
        for verb in _responders(resource):
            op = copy.deepcopy(described.get(template, {}).get(verb.lower(), {}))
            op.setdefault("summary", _summary(resource))
            op_id = op.get("operationId") or re.sub(
                r"[^a-zA-Z0-9]+", "_", f"{verb.lower()} {template}").strip("_")
            while op_id in seen_ids:
                op_id += "_"
            seen_ids.add(op_id)
            op["operationId"] = op_id
            params = [p for p in op.get("parameters", [])]
            documented = {(p["name"], p["in"]) for p in params}
            for name in names:
                if (name, "path") not in documented:
                    params.append({"name": name, "in": "path", "required": True,
                                   "schema": {"type": "string"}})
            query = QUERIES.get((template, verb.lower()))
            if query is not None:
                params += [p for p in _query_parameters(latest(query))
                           if (p["name"], "query") not in documented]
            params.append({"$ref": "#/components/parameters/Microversion"})
            op["parameters"] = params
            body = BODIES.get((template, verb.lower()))
            if body is not None:
                op["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": latest(body)}}}
            responses = op.setdefault("responses", {})
            if not any(str(code).startswith("2") for code in responses):
                responses["2XX"] = {"description": "Success."}
            # /v3 answers errors in Keystone's shape (api/errors.py).
            error = "KeystoneError" if template.startswith("/v3") else "Error"
            responses.setdefault("default", {"$ref": f"#/components/responses/{error}"})
            if is_public(resource, verb):
                op["security"] = []
            path_item[verb.lower()] = op
    return doc


class OpenAPIDocument:
    """GET /openapi.json: no token needed."""

    policies: dict = {}
    public_methods = READS

    def __init__(self, services):
        # Read when first served: create_app fills services.routed in once
        # every resource exists.
        self.services = services
        self._lock = threading.Lock()
        self._text = None

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._lock:
            if self._text is None:
                self._text = json.dumps(build(self.services.routed))
        resp.content_type = falcon.MEDIA_JSON
        resp.text = self._text
