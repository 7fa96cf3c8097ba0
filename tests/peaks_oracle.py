"""The oracle of the tests of candidates that leave room for reservations
(test_plain_candidates_ahead, test_window_candidates): with each
(provider, class)'s peak of what is reserved allocated for a moment
(`used` raised in its inventory row), the plain route's answer, from
allocations alone, is the answer expected. Answers are compared byte for
byte, as GETs straight through the WSGI apps."""
from __future__ import annotations

import io
from contextlib import contextmanager
from wsgiref.util import setup_testing_defaults

from sqlalchemy import select, update

from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import tables as t


def raw(app, path: str, version: str = "1.39") -> tuple:
    """(status, body bytes) of one GET straight through the WSGI app."""
    path, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_X_AUTH_TOKEN": "admin",
               "HTTP_OPENSTACK_API_VERSION": f"placement {version}",
               "HTTP_ACCEPT": "application/json", "wsgi.input": io.BytesIO(b"")}
    setup_testing_defaults(environ)
    seen = []
    body = b"".join(app(environ, lambda status, headers, exc=None: seen.append(status)))
    return int(seen[0].split()[0]), body


def both_apps(db) -> tuple:
    """(db, an app over the process's copy of the facts, an app asking SQL
    for everything), over one database."""
    memory = create_app(Settings(db=db.url), db)
    sql = create_app(Settings(db=db.url, facts_in_memory=False), db)
    return db, memory, sql


def inventory_rows(db) -> list:
    """(provider id, class id, total, reserved, allocation ratio) of every
    inventory."""
    inv = t.inventories
    with db.read() as conn:
        return conn.execute(select(
            inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total,
            inv.c.reserved, inv.c.allocation_ratio)).all()


@contextmanager
def peaks_allocated(db, peaks: dict):
    """Within the block, each inventory's `used` raised by its peak
    ({(provider id, class id): amount}); lowered again after it."""
    _raise_used(db, peaks, 1)
    try:
        yield
    finally:
        _raise_used(db, peaks, -1)


def _raise_used(db, peaks: dict, sign: int) -> None:
    inv = t.inventories
    with db.write() as conn:
        for (rp, rc), amount in peaks.items():
            conn.execute(update(inv).where(
                inv.c.resource_provider_id == rp, inv.c.resource_class_id == rc)
                .values(used=inv.c.used + sign * amount))
