"""POST /reshaper (1.30): inventories and allocations of several providers.

The allocations part is POST /allocations' body at the same microversion
(mappings from 1.34, consumer_type from 1.38), except that it may be empty:
an empty dict leaves every allocation as it is.
"""
from __future__ import annotations

import copy

from placement_lite.api.microversion import VersionedTable
from placement_lite.api.versions import (
    CONSUMER_TYPES, MAPPINGS, RESHAPER, Feature)
from placement_lite.api.schemas import allocations, inventories


def _schema(feature: Feature) -> dict:
    allocs = copy.deepcopy(allocations.POST.at(feature.since))
    allocs["minProperties"] = 0
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {
                    allocations.UUID["pattern"]: inventories.REPLACE},
                "additionalProperties": False,
            },
            "allocations": allocs,
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


RESHAPE = VersionedTable([(start, _schema(start))
                          for start in (RESHAPER, MAPPINGS, CONSUMER_TYPES)])
