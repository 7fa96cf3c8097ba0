"""/resource_providers/{uuid}/inventories[/{resource_class}]."""
from __future__ import annotations

import falcon

from placement_lite import errors
from placement_lite.api import render, request
from placement_lite.api.phrases import prefixed
from placement_lite.api.resources.resource_providers import (
    body_after_provider, exists_before_body)
from placement_lite.api.versions import DELETE_ALL_INVENTORIES, RESERVED_EQUALS_TOTAL
from placement_lite.api.schemas import inventories as schema
from placement_lite.ledger import inventories, providers

# Before DELETE_ALL_INVENTORIES the DELETE of the whole collection is
# simply not there (405, as Placement answers).
# Where an inventory's reserved may equal its total, for refusals before it.
RELAXED_AT = str(RESERVED_EQUALS_TOTAL.since)


def record(inv: inventories.Inventory) -> dict:
    return inv.values()


def one_body(inv: inventories.Inventory, generation: int) -> dict:
    body = record(inv)
    body["resource_provider_generation"] = generation
    return body


def collection_body(invs: dict, generation: int) -> dict:
    return {"inventories": {name: record(inv) for name, inv in invs.items()},
            "resource_provider_generation": generation}


def _reserved_may_equal_total(req) -> bool:
    return req.context.microversion.has(RESERVED_EQUALS_TOTAL)


def _method_not_allowed(req, allowed):
    raise falcon.HTTPMethodNotAllowed(
        allowed, description=f"The method {req.method} is not allowed for this "
        f"resource. {req.method} {req.path} needs microversion "
        f"{DELETE_ALL_INVENTORIES.since} or later.")


# run_write retries lost races (deadlocks, RaceLost) in a new transaction;
# a stale client generation is a ConcurrentUpdate, never retried, since it
# would stay stale.
class Inventories:
    policies = {"GET": "placement:resource_providers:inventories:list",
                "POST": "placement:resource_providers:inventories:create",
                "PUT": "placement:resource_providers:inventories:update",
                "DELETE": "placement:resource_providers:inventories:delete"}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp, uuid):
        with self.services.db.read() as conn:
            provider = providers.get_by_uuid(conn, uuid)
            invs = inventories.get_inventories(conn, provider)
        self._send(req, resp, invs, provider.generation, provider)

    def _send(self, req, resp, invs, generation, provider):
        render.send(resp, collection_body(invs, generation))
        render.cache_headers(req, resp, [i.modified for i in invs.values()]
                             or [provider.modified])

    def on_put(self, req, resp, uuid):
        data, refused = body_after_provider(req, schema.REPLACE)
        relaxed = _reserved_may_equal_total(req)

        def replace(conn):
            provider, held = inventories.provider_for_write(conn, uuid)
            if refused:
                raise refused
            providers.check_generation(provider, data["resource_provider_generation"])
            wanted = {name: inventories.make(name, rec)
                      for name, rec in data["inventories"].items()}
            for inv in wanted.values():
                inventories.validate(provider, inv, relaxed, relaxed_at=RELAXED_AT)
            generation, stored = inventories.replace_and_read(
                conn, provider, wanted, data["resource_provider_generation"],
                held=held)
            return provider, stored, generation

        with prefixed(
                (errors.UnknownResourceClass, "Unknown resource class in "
                 f"inventory for resource provider {uuid}: "),
                (errors.Invalid,
                 f"Unable to update inventory for resource provider {uuid}: "),
                (errors.InventoryInUse, "update conflict: ")):
            provider, invs, generation = self.services.db.run_write(replace)
        self._send(req, resp, invs, generation, provider)

    def on_post(self, req, resp, uuid):
        exists_before_body(self.services, req, uuid)
        data = request.json_body(req, schema.CREATE_ONE)
        relaxed = _reserved_may_equal_total(req)
        name = data["resource_class"]

        def create(conn):
            provider = providers.get_by_uuid(conn, uuid)
            inv = inventories.make(name, data)
            inventories.validate(provider, inv, relaxed, relaxed_at=RELAXED_AT)
            generation = inventories.add_inventory(conn, provider, inv)
            return inventories.get_inventory(conn, provider, name), generation

        with prefixed((errors.Invalid, "Unable to create inventory for "
                       f"resource provider {uuid}: ")):
            inv, generation = self.services.db.run_write(create)
        resp.location = f"{req.prefix}/resource_providers/{uuid}/inventories/{name}"
        render.send(resp, one_body(inv, generation), falcon.HTTP_201)
        render.cache_headers(req, resp, [inv.modified])

    def on_delete(self, req, resp, uuid):
        if not req.context.microversion.has(DELETE_ALL_INVENTORIES):
            _method_not_allowed(req, ["GET", "POST", "PUT"])

        def remove(conn):
            provider = providers.get_by_uuid(conn, uuid)
            inventories.delete_all_inventories(conn, provider)

        self.services.db.run_write(remove)
        render.no_content(resp)


class Inventory:
    policies = {"GET": "placement:resource_providers:inventories:show",
                "PUT": "placement:resource_providers:inventories:update",
                "DELETE": "placement:resource_providers:inventories:delete"}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp, uuid, resource_class):
        with self.services.db.read() as conn:
            provider = providers.get_by_uuid(conn, uuid)
            inv = inventories.get_inventory(conn, provider, resource_class)
        render.send(resp, one_body(inv, provider.generation))
        render.cache_headers(req, resp, [inv.modified])

    def on_put(self, req, resp, uuid, resource_class):
        exists_before_body(self.services, req, uuid)
        data = request.json_body(req, schema.UPDATE_ONE)
        relaxed = _reserved_may_equal_total(req)

        def change(conn):
            provider = providers.get_by_uuid(conn, uuid)
            providers.check_generation(provider, data["resource_provider_generation"])
            inv = inventories.make(resource_class, data)
            inventories.validate(provider, inv, relaxed, relaxed_at=RELAXED_AT)
            generation = inventories.update_inventory(
                conn, provider, inv, data["resource_provider_generation"])
            return inventories.get_inventory(conn, provider, resource_class), generation

        with prefixed((errors.NoInventoryRecord, ""),
                      (errors.Invalid, "Unable to update inventory for "
                       f"resource provider {uuid}: ")):
            inv, generation = self.services.db.run_write(change)
        render.send(resp, one_body(inv, generation))
        render.cache_headers(req, resp, [inv.modified])

    def on_delete(self, req, resp, uuid, resource_class):
        def remove(conn):
            provider = providers.get_by_uuid(conn, uuid)
            inventories.delete_inventory(conn, provider, resource_class)

        with prefixed((errors.InventoryInUse, "Unable to delete inventory of "
                       f"class {resource_class}: ")):
            self.services.db.run_write(remove)
        render.no_content(resp)
