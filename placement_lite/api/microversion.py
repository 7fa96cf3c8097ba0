"""OpenStack-API-Version negotiation, and version ranges as data.

Handlers declare the range they serve with @versioned; schemas and
renderers look their variant up in a VersionedTable. Nothing else in the
API compares version numbers by hand.
"""
from __future__ import annotations

import functools
from typing import Any, Generic, Iterable, NamedTuple, Optional, Sequence, TypeVar

import falcon
import microversion_parse

from placement_lite.api import errors

SERVICE_TYPE = "placement"
HEADER = "OpenStack-API-Version"


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> "Version":
        """'X.Y' with whole numbers, read as Placement reads it: each part
        as an integer, so '1.05' is 1.5 and '1.2.3' is no version."""
        major, dot, minor = text.partition(".")
        try:
            if not dot:
                raise ValueError
            return cls(int(major), int(minor))
        except ValueError:
            shown = text if len(text) <= 40 else text[:40] + "…"
            raise ValueError(f"invalid version string: {shown}") from None


def v(text: str) -> Version:
    return Version.parse(text)


MIN_VERSION = v("1.0")
MAX_VERSION = v("1.39")


class MicroversionMiddleware:
    """Reads `OpenStack-API-Version: placement X.Y` (or `latest`); no
    header means the minimum. A value that is no version is a 400, a
    version outside the range served a 406 (saying the range, as
    Placement's error does in `min_version`/`max_version`)."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.microversion = MIN_VERSION
        headers = {k.lower(): val for k, val in req.headers.items()}
        raw = microversion_parse.get_version(headers, service_type=SERVICE_TYPE)
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


def at_least(req: falcon.Request, version: str) -> bool:
    return req.context.microversion >= v(version)


def versioned(min_version: str, max_version: Optional[str] = None):
    """Serve a responder only within [min_version, max_version].

    Outside the range Placement answers 404, as if the route were absent.
    """
    lo = v(min_version)
    hi = v(max_version) if max_version else MAX_VERSION

    def wrap(responder):
        @functools.wraps(responder)
        def inner(self, req, resp, *args, **kwargs):
            if not lo <= req.context.microversion <= hi:
                raise errors.not_found(
                    f"{errors.NOT_FOUND_PHRASE} "
                    f"{req.method} {req.path} is not available at microversion "
                    f"{req.context.microversion} (needs {lo} or later"
                    + (f", up to {hi})." if max_version else ")."))
            return responder(self, req, resp, *args, **kwargs)
        # Read by the auth middleware: outside this range the route is
        # absent, which Placement says before it checks the policy.
        inner.version_range = (lo, hi)
        return inner
    return wrap


T = TypeVar("T")


class VersionedTable(Generic[T]):
    """Values that change at microversion boundaries.

    VersionedTable([("1.0", a), ("1.14", b)]).at(v("1.20")) is b: the entry
    with the highest start version not above the requested one.
    """

    def __init__(self, entries: Iterable[tuple[str, T]]):
        self.entries: Sequence[tuple[Version, T]] = sorted(
            ((v(k), val) for k, val in entries), key=lambda e: e[0])

    def at(self, version: Version) -> T:
        chosen: Any = None
        for start, value in self.entries:
            if start <= version:
                chosen = value
        if chosen is None:
            raise LookupError(f"nothing defined at {version}")
        return chosen


def fields_at(version: Version, fields: Iterable[tuple[str, str]]) -> list[str]:
    """Names from a (name, since-version) table that exist at `version`."""
    return [name for name, since in fields if version >= v(since)]
