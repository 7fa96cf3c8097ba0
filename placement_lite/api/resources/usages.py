"""/resource_providers/{uuid}/usages and /usages (1.9)."""
from __future__ import annotations

from placement_lite.api import render, request
from placement_lite.api.microversion import VersionedTable, versioned
from placement_lite.api.versions import CONSUMER_TYPES, USAGES
from placement_lite.api.schemas import allocations as schema
from placement_lite.ledger import usages


def _flat(conn, params):
    return usages.for_project(conn, params["project_id"], params.get("user_id"))


def _by_type(conn, params):
    return usages.for_project_by_type(conn, params["project_id"],
                                      params.get("user_id"),
                                      params.get("consumer_type"))


# With consumer types, project usage is broken down by consumer type, with counts.
PROJECT_USAGES = VersionedTable([(USAGES, _flat), (CONSUMER_TYPES, _by_type)])


class ProviderUsages:
    policies = {"GET": "placement:resource_providers:usages"}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp, uuid):
        with self.services.db.read() as conn:
            generation, used, stamps = usages.for_provider(conn, uuid)
        render.send(resp, {"usages": used,
                           "resource_provider_generation": generation})
        render.cache_headers(req, resp, stamps)


class Usages:
    policies = {"GET": "placement:usages"}

    def __init__(self, services):
        self.services = services

    @versioned(USAGES)
    def on_get(self, req, resp):
        version = req.context.microversion
        params = request.query(req, schema.USAGES.at(version))
        with self.services.db.read() as conn:
            result = PROJECT_USAGES.at(version)(conn, params)
        render.send(resp, {"usages": result})
        # A computed view: no stored timestamp says when it last changed.
        render.cache_headers(req, resp)
