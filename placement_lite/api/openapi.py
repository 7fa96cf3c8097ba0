"""GET /openapi.json: an OpenAPI 3.1 document of the API as served.

The document is built from the route table itself, so every route and
method the service answers is in it and nothing else is: path parameters
come from the URI templates, summaries from openapi.yaml (shipped beside
this module) or the resource's docstring. Request bodies and query strings
are the very jsonschema documents the resources validate with, named in
openapi.yaml as `x-body-schema` / `x-query-schema: module:NAME` and taken
at the latest microversion, which is the one the document describes.
"""
from __future__ import annotations

import copy
import importlib
import json
import re
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Iterable

import falcon
import yaml

from placement_lite.api.microversion import MAX_VERSION, VersionedTable
from placement_lite.api.auth import READS, is_public

OVERLAY = Path(__file__).with_name("openapi.yaml")
_PARAM_RE = re.compile(r"{([^}:]+)(?::[^}]*)?}")
# Methods a document describes; HEAD mirrors GET and OPTIONS is CORS.
_METHODS = ("GET", "PUT", "POST", "PATCH", "DELETE")


def _load_overlay() -> dict:
    with open(OVERLAY, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def resolve_schema(ref: str) -> dict:
    """`module:NAME` -> the jsonschema document (at the latest version)."""
    module_name, _, attr = ref.partition(":")
    if "." not in module_name:
        module_name = f"placement_lite.api.schemas.{module_name}"
    value = getattr(importlib.import_module(module_name), attr)
    if callable(value) and not isinstance(value, VersionedTable):
        # A schema built per request (from filters registered at import):
        # ask for the latest microversion's.
        value = value(SimpleNamespace(context=SimpleNamespace(microversion=MAX_VERSION)))
    if isinstance(value, VersionedTable):
        value = value.at(MAX_VERSION)
    return copy.deepcopy(value)


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
            query_ref = op.pop("x-query-schema", None)
            if query_ref:
                params += [p for p in _query_parameters(resolve_schema(query_ref))
                           if (p["name"], "query") not in documented]
            params.append({"$ref": "#/components/parameters/Microversion"})
            op["parameters"] = params
            body_ref = op.pop("x-body-schema", None)
            if body_ref:
                op["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": resolve_schema(body_ref)}}}
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
        # Read when first served: app.py fills these in once every
        # resource exists.
        self.extras = services.extras
        self._lock = threading.Lock()
        self._text = None

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._lock:
            if self._text is None:
                self._text = json.dumps(build(self.extras["route_table"]))
        resp.content_type = falcon.MEDIA_JSON
        resp.text = self._text


ROUTES = [("/openapi.json", OpenAPIDocument)]
