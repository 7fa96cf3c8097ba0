"""Quoting what a caller sent back to them, bounded.

An error that echoes a value must stay readable (and small) however long
the value was: a 100 kB name or a 10,000-item list is quoted as a short
prefix saying how long the whole was. Quoting also escapes what cannot be
printed (NUL, lone surrogates), so a message can always be encoded.
"""
from __future__ import annotations

import re
import reprlib

# Long enough for any value a message legitimately quotes whole: names
# (at most 200 characters), trait and class names (255), uuids (36), and
# query keys such as `resources_<64-character suffix>`, which Placement's
# own tests expect to see quoted in full.
MAX_QUOTED = 256
# A run of non-space characters longer than this in an error detail can
# only be an echoed value; it is cut to a prefix.
MAX_RUN = 320
RUN_PREFIX = 256
MAX_DETAIL = 2000
_LONG_RUN = re.compile(r"\S{%d,}" % (MAX_RUN + 1))


class _Bounded(reprlib.Repr):
    def __init__(self):
        super().__init__()
        self.maxlevel = 2
        self.maxlist = self.maxtuple = self.maxset = 5
        self.maxdict = 4
        self.maxother = MAX_QUOTED

    def repr_str(self, value, level):
        return quote_str(value)

    def repr_int(self, value, level):
        # str() of a huge int is slow and refused past 4300 digits.
        if value.bit_length() > 256:
            digits = int(value.bit_length() * 0.30103) + 1
            return f"<an integer of about {digits} digits>"
        return str(value)


def quote_str(value: str, limit: int = MAX_QUOTED) -> str:
    """repr() of a string (escaping NUL and lone surrogates), or of its
    first `limit` characters followed by how long the whole is."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


_REPR = _Bounded()


def quote(value) -> str:
    """A bounded, printable repr() of any JSON value."""
    if isinstance(value, str):
        return quote_str(value)
    return _REPR.repr(value)


def _cut_run(match: re.Match) -> str:
    run = match.group(0)
    return f"{run[:RUN_PREFIX]}… ({len(run)} characters)"


def bound(detail: str) -> str:
    """An error detail with any echoed value that is too long cut short,
    and the whole bounded, whoever built the message."""
    if not detail or len(detail) <= MAX_RUN:
        return detail
    detail = _LONG_RUN.sub(_cut_run, detail)
    if len(detail) > MAX_DETAIL:
        detail = detail[:MAX_DETAIL] + "… (cut short)"
    return detail
