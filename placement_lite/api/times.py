"""Instants as the reservation routes read and write them.

The ledger counts time in whole seconds since the epoch, UTC. A caller
writes an instant in ISO 8601, `YYYY-MM-DDTHH:MM[:SS]` (a space may stand
for the `T`), with an offset (`Z`, `+02:00`, `-0500`) or without one,
which means UTC. Fractional seconds are refused rather than rounded: a
window's bounds must be exactly what the caller meant. Answers always
read `YYYY-MM-DDTHH:MM:SSZ`. In a query string an offset's `+` must be
sent as `%2B` (a bare `+` means a space there).
"""
from __future__ import annotations

import calendar
import datetime as dt
import re

from placement_lite.api import errors
from placement_lite.api.echo import quote

_INSTANT = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?P<fraction>[.,]\d+)?)?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<oh>\d{2}):?(?P<om>\d{2}))?$")
EXAMPLE = "2030-01-01T09:00:00Z"
# The instants an answer can write: 0001-01-01T00:00:00Z to
# 9999-12-31T23:59:59Z.
FIRST = calendar.timegm((1, 1, 1, 0, 0, 0))
LAST = calendar.timegm((9999, 12, 31, 23, 59, 59))


def parse(value: str, name: str) -> int:
    """`value` as whole seconds since the epoch; a 400 naming the field
    `name` when it is not an instant this API takes."""
    found = _INSTANT.match(value.strip()) if isinstance(value, str) else None
    if found is None:
        raise errors.bad_request(
            f"'{name}' is not an ISO 8601 date and time: {quote(value)}. "
            f"Write it like {EXAMPLE} (UTC when no offset is given).")
    if found["fraction"]:
        raise errors.bad_request(
            f"'{name}' has fractional seconds: {quote(value)}. Reservations "
            "start and end on whole seconds.")
    try:
        day = dt.date.fromisoformat(found["date"])
        clock = dt.time(int(found["hour"]), int(found["minute"]),
                        int(found["second"] or 0))
        offset = 60 * (60 * int(found["oh"] or 0) + int(found["om"] or 0))
        if offset >= 86400:
            raise ValueError("an offset is less than a day")
    except ValueError:
        raise errors.bad_request(
            f"'{name}' is not a valid date and time: {quote(value)}. Write it "
            f"like {EXAMPLE}.") from None
    # The offset is taken off by hand: converting to UTC first would
    # overflow at the ends of the years datetime holds.
    seconds = calendar.timegm(dt.datetime.combine(day, clock).timetuple()) - (
        -offset if found["sign"] == "-" else offset)
    if not FIRST <= seconds <= LAST:
        raise errors.bad_request(
            f"'{name}' is not a valid date and time: {quote(value)}: it falls "
            "outside the years 1 to 9999 in UTC.")
    return seconds


def text(seconds: int) -> str:
    """Whole seconds since the epoch as every answer writes them:
    `YYYY-MM-DDTHH:MM:SSZ`."""
    when = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=int(seconds))
    return when.isoformat() + "Z"


__all__ = ["parse", "text"]
