"""/resource_providers and /resource_providers/{uuid}."""
from __future__ import annotations

import functools
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any, Callable

import falcon

from placement_lite import errors as lerrors
from placement_lite.api import provider_filters, render, request
from placement_lite.api.microversion import VersionedTable
from placement_lite.api.versions import (
    AGGREGATES, ALLOCATIONS_LINK, BASE, CREATE_RETURNS_PROVIDER,
    NESTED_PROVIDERS, REPARENTING, TRAITS, Feature)
from placement_lite.api.schemas import resource_providers as schema
from placement_lite.ledger import providers

LINKS = [("self", "", BASE), ("inventories", "/inventories", BASE),
         ("usages", "/usages", BASE), ("aggregates", "/aggregates", AGGREGATES),
         ("traits", "/traits", TRAITS),
         ("allocations", "/allocations", ALLOCATIONS_LINK)]
TREE_FIELDS = ("parent_provider_uuid", "root_provider_uuid")

# POST answers 201 with only a Location header, and from
# CREATE_RETURNS_PROVIDER 200 with the provider in the body.
CREATE_REPLY = VersionedTable([(BASE, (falcon.HTTP_201, False)),
                               (CREATE_RETURNS_PROVIDER, (falcon.HTTP_200, True))])


def body_after_provider(req: falcon.Request, schema, media_type_first: bool = True):
    """(body, None), or (None, the error refusing the body), for a write
    that answers 404 for an unknown provider before it says what is wrong
    with the body (Placement's order). The caller raises the error once
    its write transaction has read the provider, which it reads anyway,
    so the order costs no transaction of its own. With `media_type_first`
    a body of the wrong media type is refused at once (415 before 404, as
    on the inventory routes); without it, it waits too (the aggregates
    route: 404 whatever the body)."""
    try:
        return request.json_body(req, schema), None
    except falcon.HTTPError as exc:
        if media_type_first and exc.status_code == 415:
            raise
        return None, exc


def exists_before_body(services, req: falcon.Request, uuid: str) -> None:
    """404 for an unknown provider before its body is read, in Placement's
    order: a body of the wrong media type is refused first (415), then an
    unknown provider (404), then a malformed or invalid body (400)."""
    ctype = (req.content_type or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return
    with services.db.read() as conn:
        providers.get_by_uuid(conn, uuid)


def provider_url(uuid: str) -> str:
    return f"/resource_providers/{uuid}"


def provider_body(req: falcon.Request, provider: providers.Provider) -> dict:
    """A provider as the requested microversion shows it."""
    version = req.context.microversion
    body: dict[str, Any] = {"uuid": provider.uuid, "name": provider.name,
                            "generation": provider.generation}
    tree = {"parent_provider_uuid": provider.parent_uuid,
            "root_provider_uuid": provider.root_uuid}
    if version.has(NESTED_PROVIDERS):
        for name in TREE_FIELDS:
            body[name] = tree[name]
    # Links start at the mount point (SCRIPT_NAME), as Placement's do.
    base = req.root_path + provider_url(provider.uuid)
    body["links"] = [render.link(rel, base + suffix)
                     for rel, suffix, since in LINKS if version.has(since)]
    return body


@dataclass(frozen=True)
class ProviderFilter:
    """A GET /resource_providers query parameter beyond name and uuid.

    `ids(conn, value, req)` returns the ids (a collection of ints, or a
    SQLAlchemy select of one id column, built in the domain layer) of the
    providers the parameter admits; the list shows the providers every
    given filter admits. Filters are registered in PROVIDER_FILTERS and are
    accepted from the microversion that added the feature `since`, with the
    jsonschema `schema` (or a VersionedTable of schemas when the accepted
    syntax grows later).
    """
    name: str
    since: Feature
    schema: Any
    ids: Callable[[Any, Any, falcon.Request], Any]
    # True for a parameter that may repeat (its value is then a list).
    repeats: bool = False


# A repeated name or uuid: Placement reads the last value (every one is
# still validated here).
LAST_OF_REPEATED = ("name", "uuid")

PROVIDER_FILTERS: list[ProviderFilter] = [
    ProviderFilter(**spec) for spec in provider_filters.FILTERS]


def list_query_schema(req: falcon.Request) -> dict:
    return query_schema_at(req.context.microversion)


@functools.lru_cache(maxsize=64)
def query_schema_at(version) -> dict:
    """GET /resource_providers' query schema: the filters `version` has
    (built once per version, so its validator is found by identity; not
    to be changed by callers)."""
    extra = {f.name: f.schema.at(version) if isinstance(f.schema, VersionedTable)
             else f.schema
             for f in PROVIDER_FILTERS if version.has(f.since)}
    return schema.list_query(extra)


class ResourceProviders:
    policies = {"GET": "placement:resource_providers:list",
                "POST": "placement:resource_providers:create"}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp):
        params = request.query(req, multi=tuple(
            f.name for f in PROVIDER_FILTERS if f.repeats) + LAST_OF_REPEATED)
        query_schema = list_query_schema(req)
        for key in LAST_OF_REPEATED:
            if key in params:
                for value in params[key][:-1]:
                    request.validate({key: value}, query_schema, what="Query string")
                params[key] = params[key][-1]
        request.validate(params, query_schema, what="Query string")
        with self.services.db.read() as conn:
            id_filters = [flt.ids(conn, params[flt.name], req)
                          for flt in PROVIDER_FILTERS if flt.name in params]
            found = providers.list_providers(
                conn, id_filters=id_filters, name=params.get("name"),
                uuid=params.get("uuid"))
        render.send(resp, {"resource_providers": [
            provider_body(req, p) for p in found]})
        render.cache_headers(req, resp, [p.modified for p in found])

    def on_post(self, req, resp):
        data = request.json_body(req, schema.CREATE.at(req.context.microversion))
        new_uuid = str(uuidlib.UUID(data["uuid"])) if data.get("uuid") else None

        def create(conn):
            return providers.create_provider(
                conn, data["name"], new_uuid, data.get("parent_provider_uuid"))

        created = self.services.db.run_write(create)
        resp.location = req.prefix + provider_url(created.uuid)
        status, with_body = CREATE_REPLY.at(req.context.microversion)
        if with_body:
            render.send(resp, provider_body(req, created), status)
            render.cache_headers(req, resp, [created.modified])
        else:
            resp.status = status
            resp.content_type = None


class ResourceProvider:
    policies = {"GET": "placement:resource_providers:show",
                "PUT": "placement:resource_providers:update",
                "DELETE": "placement:resource_providers:delete"}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp, uuid):
        with self.services.db.read() as conn:
            provider = providers.get_by_uuid(conn, uuid)
        render.send(resp, provider_body(req, provider))
        render.cache_headers(req, resp, [provider.modified])

    def on_put(self, req, resp, uuid):
        exists_before_body(self.services, req, uuid)
        data = request.json_body(req, schema.UPDATE.at(req.context.microversion))
        reparent = req.context.microversion.has(REPARENTING)

        def update(conn):
            provider = providers.get_by_uuid(conn, uuid)
            return providers.update_provider(
                conn, provider, data["name"],
                data.get("parent_provider_uuid", providers.UNSET),
                allow_reparenting=reparent,
                reparenting_at=str(REPARENTING.since))

        updated = self.services.db.run_write(update)
        render.send(resp, provider_body(req, updated))
        render.cache_headers(req, resp, [updated.modified])

    def on_delete(self, req, resp, uuid):
        def remove(conn):
            provider = providers.find_by_uuid(conn, uuid)
            if provider is None:
                raise lerrors.ResourceProviderNotFound(
                    f"No resource provider with uuid {uuid} found for delete.")
            providers.delete_provider(conn, provider)

        self.services.db.run_write(remove)
        render.no_content(resp)
