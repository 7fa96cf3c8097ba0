"""POST /reshaper (1.30)."""
from __future__ import annotations

from placement_lite import errors
from placement_lite.api import render, request
from placement_lite.api.resources.allocations import consumer_write, incomplete_owner
from placement_lite.api.microversion import versioned
from placement_lite.api.versions import RESHAPER
from placement_lite.api.phrases import prefixed
from placement_lite.api.schemas import reshaper as schema
from placement_lite.ledger import inventories, reshaper


class Reshaper:
    policies = {"POST": "placement:reshaper:reshape"}

    def __init__(self, services):
        self.services = services

    @versioned(RESHAPER)
    def on_post(self, req, resp):
        data = request.json_body(req, schema.RESHAPE.at(req.context.microversion))
        wanted = {
            uuid: reshaper.ProviderInventories(
                entry["resource_provider_generation"],
                {name: inventories.make(name, record)
                 for name, record in entry["inventories"].items()})
            for uuid, entry in data["inventories"].items()}
        writes = [consumer_write(req, consumer_uuid, entry,
                                 incomplete_owner(self.services))
                  for consumer_uuid, entry in data["allocations"].items()]
        # Placement's wording: a generation moved after its early check, or
        # an inventory in use, is an "update conflict"; an unknown class is
        # "malformed reshaper data"; allocations that do not fit keep the
        # allocation writer's "Unable to allocate inventory".
        with prefixed((errors.UnknownResourceClass, "malformed reshaper data: "),
                      (errors.InventoryInUse, "update conflict: ")):
            self.services.db.run_write(lambda conn: reshaper.reshape(
                conn, wanted, writes, self.services.claim_checks))
        render.no_content(resp)
