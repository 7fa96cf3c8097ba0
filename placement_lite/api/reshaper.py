"""POST /reshaper (1.30)."""
from __future__ import annotations

from placement_lite.api import render, request
from placement_lite.api.allocations import consumer_write
from placement_lite.api.microversion import versioned
from placement_lite.api.schemas import reshaper as schema
from placement_lite.ledger import inventories, reshaper


class Reshaper:
    policies = {"POST": "placement:reshaper:reshape"}

    def __init__(self, services):
        self.services = services

    @versioned("1.30")
    def on_post(self, req, resp):
        data = request.json_body(req, schema.RESHAPE.at(req.context.microversion))
        wanted = {
            uuid: reshaper.ProviderInventories(
                entry["resource_provider_generation"],
                {name: inventories.make(name, record)
                 for name, record in entry["inventories"].items()})
            for uuid, entry in data["inventories"].items()}
        writes = [consumer_write(req, consumer_uuid, entry)
                  for consumer_uuid, entry in data["allocations"].items()]
        self.services.db.run_write(lambda conn: reshaper.reshape(
            conn, wanted, writes, self.services.claim_checks))
        render.no_content(resp)


ROUTES = [("/reshaper", Reshaper)]
