"""UUIDs in URL paths, in the form they are stored.

Placement accepts a uuid in a request body with or without dashes and in
either case (oslo's is_uuid_like), and stores it canonically: lower case,
dashed. In a path it only does so for PUT /allocations/{consumer_uuid};
elsewhere it looks the raw text up, so the same provider is found or not
depending on how the caller spelled its uuid and on the database's
collation. Here every uuid-like path segment is canonicalised before the
handler runs, so a provider or consumer that exists is found however its
uuid is spelled. Segments that are not uuid-like are left as they are
(a provider lookup answers 404, a consumer write 400, as in Placement).
"""
from __future__ import annotations

import uuid as uuidlib
from typing import Optional

# Route template fields that hold a provider's or a consumer's uuid.
UUID_FIELDS = ("uuid", "consumer_uuid")


def canonical_uuid(value: str) -> Optional[str]:
    """The dashed lower-case form of a uuid-like string, else None.

    uuid-like as oslo_utils.uuidutils.is_uuid_like has it: what
    uuid.UUID() parses (hex digits with or without dashes, any case,
    optionally in braces or with a urn:uuid: prefix) and nothing more."""
    if not isinstance(value, str) or len(value) > 45:
        return None
    try:
        parsed = uuidlib.UUID(value)
    except ValueError:
        return None
    bare = (value.replace("urn:", "").replace("uuid:", "").strip("{}")
            .replace("-", "").lower())
    return str(parsed) if parsed.hex == bare else None


class UuidPathMiddleware:
    """Canonicalise the uuid fields of the routed path (process_resource
    runs after routing, before the responder gets its parameters)."""

    def process_resource(self, req, resp, resource, params) -> None:
        for field in UUID_FIELDS:
            value = params.get(field)
            if value is None:
                continue
            canonical = canonical_uuid(value)
            if canonical is not None and canonical != value:
                params[field] = canonical
