"""The URL as the handlers get it: UTF-8 text, and uuids in the form
they are stored.

Text: a percent-encoded byte sequence that is not UTF-8 (a lone
surrogate's CESU-8 bytes, a stray %FF) would reach the handlers as
U+FFFD replacement characters and be looked up as such; like Placement,
whose request library refuses to decode such a query string, it is a 400
here, naming the parameter.

UUIDs in URL paths:

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

import urllib.parse
import uuid as uuidlib
from typing import Optional

from placement_lite.api import errors
from placement_lite.api.echo import quote_str

# Route template fields that hold a provider's, a consumer's or a
# reservation's uuid.
UUID_FIELDS = ("uuid", "consumer_uuid", "reservation_id")


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


def _not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def check_utf8(path_info: str, query_string: str) -> None:
    """400 unless the path and every query parameter name and value are
    UTF-8 once percent-decoded. `path_info` is WSGI's: bytes as latin-1."""
    try:
        raw_path = path_info.encode("latin-1")
    except UnicodeEncodeError:
        raw_path = b""
    if _not_utf8(raw_path):
        bad = next(seg for seg in raw_path.split(b"/") if _not_utf8(seg))
        shown = quote_str(urllib.parse.quote(bad, safe=""))
        raise errors.bad_request(
            f"The URL path is not UTF-8 text: the segment {shown} holds bytes "
            "that are no character, such as a lone surrogate.")
    for pair in query_string.split("&") if query_string else ():
        name, _, value = pair.partition("=")
        raw_name = urllib.parse.unquote_to_bytes(name.replace("+", " "))
        raw_value = urllib.parse.unquote_to_bytes(value.replace("+", " "))
        if _not_utf8(raw_name) or _not_utf8(raw_value):
            shown = quote_str(raw_name.decode("utf-8", "replace"), 60)
            what = "name" if _not_utf8(raw_name) else "value"
            raise errors.bad_request(
                f"Invalid query string parameters: the {what} of parameter "
                f"{shown} is not UTF-8 text once percent-decoded (bytes that "
                "are no character, such as a lone surrogate).")


class UrlMiddleware:
    """Refuse a URL that is not UTF-8 text (process_request, before
    routing), and canonicalise the uuid fields of the routed path
    (process_resource, after routing, before the responder gets its
    parameters)."""

    def process_request(self, req, resp) -> None:
        check_utf8(req.env.get("PATH_INFO", ""), req.query_string or "")

    def process_resource(self, req, resp, resource, params) -> None:
        for field in UUID_FIELDS:
            value = params.get(field)
            if value is None:
                continue
            canonical = canonical_uuid(value)
            if canonical is not None and canonical != value:
                params[field] = canonical
