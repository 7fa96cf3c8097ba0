"""/allocations/{consumer_uuid}, /allocations (1.13) and
/resource_providers/{uuid}/allocations."""
from __future__ import annotations

import re
import uuid as uuidlib
from typing import Any, Mapping

from placement_lite import errors as lerrors
from placement_lite.api import errors, render, request
from placement_lite.api.microversion import versioned
from placement_lite.api.versions import (
    BULK_ALLOCATIONS, CONSUMER_GENERATIONS, CONSUMER_TYPES, DICT_ALLOCATIONS)
from placement_lite.api.phrases import prefixed
from placement_lite.api.schemas import allocations as schema
from placement_lite.ledger import allocations
from placement_lite.ledger.allocations import UNCHECKED, ConsumerWrite
from placement_lite.ledger.consumers import UNKNOWN_TYPE

_UUID_RE = re.compile(schema.UUID["pattern"])

# Keys GET /allocations/{consumer_uuid} adds about an existing consumer.
CONSUMER_FIELDS = [("project_id", DICT_ALLOCATIONS), ("user_id", DICT_ALLOCATIONS),
                   ("consumer_generation", CONSUMER_GENERATIONS),
                   ("consumer_type", CONSUMER_TYPES)]


def check_uuid(value: str, what: str = "consumer") -> None:
    if not _UUID_RE.match(value):
        shown = value if len(value) <= 64 else value[:64] + "..."
        raise errors.bad_request(
            f"Malformed {what}_uuid: {shown}. Expected a UUID such as "
            "'a1b2c3d4-0000-4000-8000-000000000000'.")


def _from_list(items: list) -> dict[str, dict[str, int]]:
    merged: dict[str, dict[str, int]] = {}
    for item in items:
        resources = merged.setdefault(item["resource_provider"]["uuid"], {})
        for name, used in item["resources"].items():
            resources[name] = resources.get(name, 0) + used
    return merged


def consumer_write(req, consumer_uuid: str, data: Mapping[str, Any],
                   incomplete_owner: tuple[str, str]) -> ConsumerWrite:
    """One consumer's write from a PUT body or one entry of a POST body;
    `incomplete_owner` owns a new consumer the body gives no owner."""
    raw = data["allocations"]
    if isinstance(raw, list):
        wanted = _from_list(raw)
    else:
        wanted = {rp: entry["resources"] for rp, entry in raw.items()}
    return ConsumerWrite(
        consumer_uuid=consumer_uuid,
        project_id=data.get("project_id"),
        user_id=data.get("user_id"),
        allocations=wanted,
        consumer_type=data.get("consumer_type"),
        expected_generation=(data["consumer_generation"]
                             if req.context.microversion.has(CONSUMER_GENERATIONS)
                             else UNCHECKED),
        incomplete_owner=incomplete_owner)


def incomplete_owner(services) -> tuple[str, str]:
    settings = services.settings
    return (settings.incomplete_consumer_project_id,
            settings.incomplete_consumer_user_id)


def write(services, writes: list[ConsumerWrite]) -> None:
    # The first attempt takes provider ids from the process's copy of the
    # facts, as last read (no query: a stale id fails its lock and loses
    # the race); a retry reads them from the database.
    hint = [services.provider_hint()]

    def replace(conn):
        known, hint[0] = hint[0], None
        allocations.replace(conn, writes, services.claim_checks, known)
    services.db.run_write(replace)


def consumer_body(req, consumer, allocs: dict) -> dict:
    body: dict[str, Any] = {"allocations": allocs}
    if consumer is None:
        return body
    values = {"project_id": consumer.project_id, "user_id": consumer.user_id,
              "consumer_generation": consumer.generation,
              "consumer_type": consumer.consumer_type or UNKNOWN_TYPE}
    for name, feature in CONSUMER_FIELDS:
        if req.context.microversion.has(feature):
            body[name] = values[name]
    return body


class ConsumerAllocations:
    policies = {"GET": "placement:allocations:list",
                "PUT": "placement:allocations:update",
                "DELETE": "placement:allocations:delete"}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp, consumer_uuid):
        # Any string may be asked about; what is not a stored consumer
        # simply has no allocations.
        with self.services.db.read() as conn:
            consumer, allocs, stamps = allocations.for_consumer(conn, consumer_uuid)
        render.send(resp, consumer_body(req, consumer, allocs))
        render.cache_headers(req, resp, stamps)

    def on_put(self, req, resp, consumer_uuid):
        check_uuid(consumer_uuid)
        consumer_uuid = str(uuidlib.UUID(consumer_uuid))
        data = request.json_body(req, schema.PUT.at(req.context.microversion))
        write(self.services, [consumer_write(req, consumer_uuid, data,
                                             incomplete_owner(self.services))])
        render.no_content(resp)

    def on_delete(self, req, resp, consumer_uuid):
        self.services.db.run_write(
            lambda conn: allocations.delete_for_consumer(conn, consumer_uuid))
        render.no_content(resp)


class Allocations:
    policies = {"POST": "placement:allocations:manage"}

    def __init__(self, services):
        self.services = services

    @versioned(BULK_ALLOCATIONS)
    def on_post(self, req, resp):
        data = request.json_body(req, schema.POST.at(req.context.microversion))
        owner = incomplete_owner(self.services)
        write(self.services, [consumer_write(req, consumer_uuid, entry, owner)
                              for consumer_uuid, entry in data.items()])
        render.no_content(resp)


class ProviderAllocations:
    policies = {"GET": "placement:resource_providers:allocations:list"}

    def __init__(self, services):
        self.services = services

    def on_get(self, req, resp, uuid):
        with prefixed((lerrors.NotFound,
                       f"Resource provider '{uuid}' not found: ")), \
                self.services.db.read() as conn:
            generation, by_consumer, stamps = allocations.for_provider(conn, uuid)
        with_generation = req.context.microversion.has(CONSUMER_GENERATIONS)
        allocs = {}
        for consumer, (resources, consumer_generation) in by_consumer.items():
            allocs[consumer] = {"resources": resources}
            if with_generation:
                allocs[consumer]["consumer_generation"] = consumer_generation
        render.send(resp, {"allocations": allocs,
                           "resource_provider_generation": generation})
        render.cache_headers(req, resp, stamps)
