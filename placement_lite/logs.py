"""Log set-up for the command line: text lines or one JSON object a line.

A log line is the operator's record of what happened, so a caller must
not be able to write one: a path, query or header value can hold a line
break that starts a line of the caller's choosing, or a terminal escape
that recolours, hides or rewrites what the operator's terminal shows.
`printable` writes such characters as visible escapes; the access log and
the error logs apply it to what they take from a request, and both
formatters apply it to every message (a record from a library, or an
exception's message with request data in it), so a host that logs through
its own handlers still gets safe values. A traceback stays several lines.
"""
from __future__ import annotations

import json
import logging
import re
import sys
import time

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"

# C0 (line breaks, NUL, ESC...), DEL, C1 (NEL, the 8-bit CSI) and the
# Unicode line and paragraph separators, which some log viewers break on.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    return _SHORT.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100
                              else f"\\u{ord(ch):04x}")


def printable(text: str) -> str:
    """`text` with every control character written as an escape (\\n,
    \\x1b, \\u2028). A backslash is left as it is, so escaping twice
    changes nothing: a value escaped where it is logged passes the
    formatters unchanged."""
    return _UNPRINTABLE.sub(_escape, text)


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT lines, the message escaped (the traceback, if any, is
    added after it as it is)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record; a request's access fields become keys."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            # JSON escapes a line break itself, but a reader that prints
            # the decoded value (jq -r) would print the escape code too.
            out.update({k: printable(v) if isinstance(v, str) else v
                        for k, v in access.items()})
        else:
            out["message"] = printable(record.getMessage())
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(fmt: str = "text", level: str = "INFO", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json"
                         else TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, str(level).upper(), logging.INFO))
    # Per-migration chatter is noise in a service log.
    logging.getLogger("alembic").setLevel(logging.WARNING)
