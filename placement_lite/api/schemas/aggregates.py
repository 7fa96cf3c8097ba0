"""Request schemas for /resource_providers/{uuid}/aggregates."""
from __future__ import annotations

from placement_lite.api.microversion import VersionedTable
from placement_lite.api.versions import AGGREGATE_GENERATIONS, AGGREGATES
from placement_lite.api.schemas.resource_providers import UUID

_UUIDS = {"type": "array", "items": UUID, "uniqueItems": True}

# Before 1.19 the body is the bare list; from 1.19 it carries the
# provider generation as well.
UPDATE = VersionedTable([
    (AGGREGATES, _UUIDS),
    (AGGREGATE_GENERATIONS, {
        "type": "object",
        "properties": {"aggregates": _UUIDS,
                       "resource_provider_generation": {"type": "integer"}},
        "required": ["aggregates", "resource_provider_generation"],
        "additionalProperties": False,
    }),
])
