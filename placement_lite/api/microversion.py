"""OpenStack-API-Version negotiation, and variants chosen by feature.

The versions themselves and the feature each adds live in api/versions.py.
Handlers declare the feature a responder needs with @versioned; schemas
and renderers that change shape look their variant up in a VersionedTable
keyed by feature; everything else asks `req.context.microversion.has(F)`.
"""
from __future__ import annotations

import functools
from typing import Any, Generic, Iterable, Sequence, TypeVar

import falcon
import microversion_parse

from placement_lite.api import errors
from placement_lite.api.versions import MAX_VERSION, MIN_VERSION, Feature, Version

__all__ = ["MAX_VERSION", "MIN_VERSION", "Version", "MicroversionMiddleware",
           "versioned", "VersionedTable"]

SERVICE_TYPE = "placement"
HEADER = "OpenStack-API-Version"


class MicroversionMiddleware:
    """Reads `OpenStack-API-Version: placement X.Y` (or `latest`); no
    header means the minimum. A value that is no version is a 400, a
    version outside the range served a 406 (saying the range, as
    Placement's error does in `min_version`/`max_version`)."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.microversion = MIN_VERSION
        # Only the standard header counts (no legacy ones), so it is read
        # alone: folding every header of the request into a dict, as
        # microversion_parse.get_version does, cost more than the rest.
        header = req.get_header(HEADER)
        if header is None:
            return
        raw = microversion_parse.check_standard_header(
            {microversion_parse.STANDARD_HEADER: header}, SERVICE_TYPE)
        if raw is None:
            return
        if raw == "latest":
            req.context.microversion = MAX_VERSION
            return
        try:
            wanted = Version.parse(raw)
        except ValueError as exc:
            raise errors.bad_request(
                f"Invalid microversion: {exc}. Send 'placement X.Y' with X and "
                f"Y whole numbers (this service supports {MIN_VERSION} to "
                f"{MAX_VERSION}) or 'placement latest'.")
        if not MIN_VERSION <= wanted <= MAX_VERSION:
            shown = raw if len(raw) <= 40 else raw[:40] + "…"
            raise errors.ApiError(
                falcon.HTTP_406,
                f"Invalid microversion: Unacceptable version header: {shown}. "
                f"This service supports placement {MIN_VERSION} to {MAX_VERSION}.",
                extra={"min_version": str(MIN_VERSION),
                       "max_version": str(MAX_VERSION)})
        req.context.microversion = wanted

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        version = getattr(req.context, "microversion", None) or MIN_VERSION
        resp.set_header(HEADER, f"{SERVICE_TYPE} {version}")
        resp.append_header("Vary", HEADER.lower())


def versioned(feature: Feature):
    """Serve a responder only from the microversion that added `feature`.

    Below it Placement answers 404, as if the route were absent.
    """
    lo = feature.since
    hi = MAX_VERSION

    def wrap(responder):
        @functools.wraps(responder)
        def inner(self, req, resp, *args, **kwargs):
            if not lo <= req.context.microversion <= hi:
                raise errors.not_found(
                    f"{errors.NOT_FOUND_PHRASE} "
                    f"{req.method} {req.path} is not available at microversion "
                    f"{req.context.microversion} (needs {lo} or later).")
            return responder(self, req, resp, *args, **kwargs)
        # Read by the auth middleware: outside this range the route is
        # absent, which Placement says before it checks the policy.
        inner.version_range = (lo, hi)
        return inner
    return wrap


T = TypeVar("T")


class VersionedTable(Generic[T]):
    """Values that change at microversion boundaries, keyed by the feature
    that changed them.

    VersionedTable([(BASE, a), (NESTED_PROVIDERS, b)]).at(Version(1, 20))
    is b: the entry whose feature is the latest one the version has.
    """

    def __init__(self, entries: Iterable[tuple[Feature, T]]):
        self.entries: Sequence[tuple[Version, T]] = sorted(
            ((feature.since, val) for feature, val in entries),
            key=lambda e: e[0])

    def at(self, version: Version) -> T:
        chosen: Any = None
        for start, value in self.entries:
            if start <= version:
                chosen = value
        if chosen is None:
            raise LookupError(f"nothing defined at {version}")
        return chosen
