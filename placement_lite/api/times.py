"""Instants as the reservation routes read and write them.

Read: ISO 8601 with an offset (`Z`, `+02:00`, `-0500`) or naive, which
means UTC; seconds may be left out; fractional seconds are refused, since
the ledger keeps whole seconds and silently dropping a fraction would
move an instant the caller chose. Written: `YYYY-MM-DDTHH:MM:SSZ`.
The ledger works in whole seconds since the epoch.
"""
from __future__ import annotations

import datetime as dt
import re

from placement_lite.api import errors
from placement_lite.api.echo import quote
from placement_lite.ledger.timeline import iso

_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?"
    r"(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$",
    # ASCII digits only: \d and int() would read other scripts' digits.
    re.ASCII)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
EXAMPLE = "2030-01-01T09:00:00Z"
# What an answer can write back (years 1 to 9999, in UTC).
_FIRST = int((dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc) - _EPOCH).total_seconds())
_LAST = int((dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)
             - _EPOCH).total_seconds())


def parse(value: str, name: str) -> int:
    """Whole seconds since the epoch; 400 naming the field otherwise."""
    found = _ISO.match(value.strip()) if isinstance(value, str) else None
    if found is None:
        raise errors.bad_request(
            f"'{name}' is not an ISO 8601 date and time: {quote(value)}. "
            f"Write it like {EXAMPLE} (UTC when no offset is given).")
    (year, month, day, hour, minute, second, fraction, _z, sign, off_h,
     off_m) = found.groups()
    if fraction:
        raise errors.bad_request(
            f"'{name}' has fractional seconds: {quote(value)}. Reservations "
            "start and end on whole seconds.")
    try:
        offset = dt.timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
        if offset >= dt.timedelta(days=1):
            raise ValueError("offset")
        zone = dt.timezone(-offset if sign == "-" else offset)
        when = dt.datetime(int(year), int(month), int(day), int(hour),
                           int(minute), int(second or 0), tzinfo=zone)
        seconds = int((when - _EPOCH).total_seconds())
        if not _FIRST <= seconds <= _LAST:
            raise ValueError("out of range")
        return seconds
    except (ValueError, OverflowError):
        raise errors.bad_request(
            f"'{name}' is not a valid date and time: {quote(value)}. Write it "
            f"like {EXAMPLE}.")


def text(seconds: int) -> str:
    """An instant as every answer writes it."""
    return iso(seconds)
