"""Placement's per-route wording around a domain error.

Placement words one condition differently on different routes (an
inventory in use is "update conflict: ..." on PUT, "Unable to delete
inventory of class X: ..." on DELETE), and its callers grep for those
phrases. The domain raises the condition once; the route that called it
puts its own phrase in front here.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from placement_lite import errors


@contextmanager
def prefixed(*rules: tuple[type, str]) -> Iterator[None]:
    """For a domain error raised inside the block, put the prefix of the
    first (kind, prefix) rule it is an instance of in front of its
    detail."""
    try:
        yield
    except errors.DomainError as exc:
        for kind, prefix in rules:
            if isinstance(exc, kind):
                exc.detail = prefix + exc.detail
                exc.args = (exc.detail,)
                break
        raise
