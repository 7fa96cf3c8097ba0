"""Request bodies and query strings for allocations and usages, by
microversion.

1.0   PUT body is a list of {resource_provider: {uuid}, resources}
1.8   project_id and user_id are required
1.12  PUT body is a dict keyed by provider uuid
1.13  POST /allocations: several consumers at once
1.28  consumer_generation required; an empty dict removes the allocations
1.34  mappings (request group suffix -> provider uuids) are accepted
1.38  consumer_type required; GET /usages takes consumer_type
"""
from __future__ import annotations

import copy

from placement_lite.api import versions as v
from placement_lite.api.microversion import VersionedTable
from placement_lite.ledger.capacity import MAX_AMOUNT

UUID = {"type": "string", "format": "uuid",
        "pattern": "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   "[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"}
RC_NAME = "^[A-Z0-9_]+$"

RESOURCES = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        RC_NAME: {"type": "integer", "minimum": 1, "maximum": MAX_AMOUNT}},
    "additionalProperties": False,
}
EXTERNAL_ID = {"type": "string", "minLength": 1, "maxLength": 255}
CONSUMER_GENERATION = {"type": ["integer", "null"], "minimum": 0}
CONSUMER_TYPE = {"type": "string", "pattern": RC_NAME, "minLength": 1,
                 "maxLength": 255}
MAPPINGS = {
    "type": "object",
    # An empty mappings object is refused, as Placement refuses it.
    "minProperties": 1,
    "patternProperties": {
        "^[a-zA-Z0-9_-]{0,64}$": {"type": "array", "minItems": 1,
                                  "items": UUID}},
    "additionalProperties": False,
}

_LIST_ITEM = {
    "type": "object",
    "properties": {
        "resource_provider": {
            "type": "object",
            "properties": {"uuid": UUID},
            "required": ["uuid"],
            "additionalProperties": False,
        },
        "resources": RESOURCES,
    },
    "required": ["resource_provider", "resources"],
    "additionalProperties": False,
}

PUT_1_0 = {
    "type": "object",
    "properties": {
        "allocations": {"type": "array", "minItems": 1, "items": _LIST_ITEM},
    },
    "required": ["allocations"],
    "additionalProperties": False,
}

PUT_1_8 = copy.deepcopy(PUT_1_0)
PUT_1_8["properties"].update(project_id=EXTERNAL_ID, user_id=EXTERNAL_ID)
PUT_1_8["required"] += ["project_id", "user_id"]

_DICT_ALLOCATIONS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        UUID["pattern"]: {
            "type": "object",
            "properties": {
                "resources": RESOURCES,
                # What GET returns may be sent back; the value is ignored.
                "generation": {"type": ["integer", "null"]},
            },
            "required": ["resources"],
            "additionalProperties": False,
        }},
    "additionalProperties": False,
}

PUT_1_12 = {
    "type": "object",
    "properties": {
        "allocations": _DICT_ALLOCATIONS,
        "project_id": EXTERNAL_ID,
        "user_id": EXTERNAL_ID,
    },
    "required": ["allocations", "project_id", "user_id"],
    "additionalProperties": False,
}

PUT_1_28 = copy.deepcopy(PUT_1_12)
PUT_1_28["properties"]["allocations"]["minProperties"] = 0
PUT_1_28["properties"]["consumer_generation"] = CONSUMER_GENERATION
PUT_1_28["required"].append("consumer_generation")

PUT_1_34 = copy.deepcopy(PUT_1_28)
PUT_1_34["properties"]["mappings"] = MAPPINGS

PUT_1_38 = copy.deepcopy(PUT_1_34)
PUT_1_38["properties"]["consumer_type"] = CONSUMER_TYPE
PUT_1_38["required"].append("consumer_type")

PUT = VersionedTable([(v.BASE, PUT_1_0), (v.ALLOCATION_OWNER, PUT_1_8),
                      (v.DICT_ALLOCATIONS, PUT_1_12),
                      (v.CONSUMER_GENERATIONS, PUT_1_28),
                      (v.MAPPINGS, PUT_1_34), (v.CONSUMER_TYPES, PUT_1_38)])


def _post(consumer: dict) -> dict:
    # One consumer's entry: like PUT, but an empty dict removes its
    # allocations from 1.13 on (that is how a move frees the source).
    entry = copy.deepcopy(consumer)
    entry["properties"]["allocations"]["minProperties"] = 0
    return {
        "type": "object",
        "minProperties": 1,
        "patternProperties": {UUID["pattern"]: entry},
        "additionalProperties": False,
    }


POST = VersionedTable([
    (v.BULK_ALLOCATIONS, _post(PUT_1_12)),
    (v.CONSUMER_GENERATIONS, _post(PUT_1_28)),
    (v.MAPPINGS, _post(PUT_1_34)),
    (v.CONSUMER_TYPES, _post(PUT_1_38)),
])

USAGES_1_9 = {
    "type": "object",
    "properties": {"project_id": EXTERNAL_ID, "user_id": EXTERNAL_ID},
    "required": ["project_id"],
    "additionalProperties": False,
}
USAGES_1_38 = copy.deepcopy(USAGES_1_9)
# Any string filters: a type nobody has simply matches nothing. `all` and
# `unknown` (exactly so spelled) have meanings of their own.
USAGES_1_38["properties"]["consumer_type"] = {"type": "string"}
USAGES = VersionedTable([(v.USAGES, USAGES_1_9), (v.CONSUMER_TYPES, USAGES_1_38)])
