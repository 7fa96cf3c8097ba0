"""/resource_providers/{uuid}/aggregates (from 1.1)."""
from __future__ import annotations

from placement_lite.api import render
from placement_lite.api.resources.resource_providers import body_after_provider
from placement_lite.api.microversion import versioned
from placement_lite.api.versions import AGGREGATE_GENERATIONS, AGGREGATES
from placement_lite.api.schemas import aggregates as schema
from placement_lite.ledger import aggregates, providers

# With AGGREGATE_GENERATIONS the body carries the provider generation,
# which PUT checks and bumps; before it PUT leaves the generation alone.


class ProviderAggregates:
    policies = {"GET": "placement:resource_providers:aggregates:list",
                "PUT": "placement:resource_providers:aggregates:update"}

    def __init__(self, services):
        self.services = services

    def _send(self, req, resp, uuids, generation):
        body = {"aggregates": uuids}
        if req.context.microversion.has(AGGREGATE_GENERATIONS):
            body["resource_provider_generation"] = generation
        render.send(resp, body)
        # Associations carry no timestamps of their own.
        render.cache_headers(req, resp)

    @versioned(AGGREGATES)
    def on_get(self, req, resp, uuid):
        with self.services.db.read() as conn:
            provider = providers.get_by_uuid(conn, uuid)
            found = aggregates.provider_aggregates(conn, provider)
        self._send(req, resp, found, provider.generation)

    @versioned(AGGREGATES)
    def on_put(self, req, resp, uuid):
        version = req.context.microversion
        # An unknown provider is a 404 whatever the body, as in Placement.
        data, refused = body_after_provider(req, schema.UPDATE.at(version),
                                            media_type_first=False)
        checked = version.has(AGGREGATE_GENERATIONS)

        def replace(conn):
            provider = providers.get_ref(conn, uuid)
            if refused:
                raise refused
            seen = data["resource_provider_generation"] if checked else None
            providers.check_generation_unchanged(provider, seen)
            generation = aggregates.set_provider_aggregates(
                conn, provider, data["aggregates"] if checked else data, seen,
                bump=checked)
            return generation

        # The answer lists the aggregates in the order they were sent, as
        # Placement's does (the set stored is exactly that list's).
        generation = self.services.db.run_write(replace)
        self._send(req, resp, list(data["aggregates"] if checked else data),
                   generation)
