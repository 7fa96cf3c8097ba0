"""Response helpers shared by every resource."""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Optional

import falcon

from placement_lite.api.versions import CACHE_HEADERS


try:
    # Optional (the `fast` extra): encodes large answers (a list of 10,000
    # providers) about 7x faster than the standard library.
    import orjson
except ImportError:  # pragma: no cover - depends on the installation
    orjson = None


def send(resp: falcon.Response, body: Any, status=falcon.HTTP_200) -> None:
    resp.status = status
    if orjson is not None:
        try:
            resp.data = orjson.dumps(body)
            return
        except TypeError:
            # What orjson refuses (integer keys, integers beyond 64 bits)
            # goes through the standard encoder, which decides as before.
            pass
    resp.media = body


def no_content(resp: falcon.Response) -> None:
    resp.status = falcon.HTTP_204
    resp.content_type = None


def cache_headers(req: falcon.Request, resp: falcon.Response,
                  modified: Iterable[Optional[dt.datetime]] = ()) -> None:
    """From CACHE_HEADERS on, GET responses say when their data last changed.

    With no timestamps to go on (an empty list, a computed view) the
    answer is 'now', as in Placement.
    """
    if not req.context.microversion.has(CACHE_HEADERS):
        return
    stamps = [m for m in modified if m is not None]
    when = max(stamps) if stamps else dt.datetime.now(dt.timezone.utc)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    resp.set_header("Last-Modified", falcon.dt_to_http(when))
    resp.set_header("Cache-Control", "no-cache")


def link(rel: str, href: str) -> dict:
    return {"rel": rel, "href": href}
