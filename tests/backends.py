"""Fresh, migrated databases for tests, on every configured backend.

SQLite always; MariaDB/MySQL and PostgreSQL when PLACEMENT_LITE_TEST_DB_URLS
names server URLs (space or comma separated), e.g.
  PLACEMENT_LITE_TEST_DB_URLS="mysql+pymysql://root@127.0.0.1/ postgresql://root@127.0.0.1/postgres"
Each test database is created with a unique name and dropped afterwards,
so runs never see each other's rows.
"""
from __future__ import annotations

import os
import re
import tempfile
import uuid
from contextlib import contextmanager

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from placement_lite.db import migrate
from placement_lite.db.engine import Database
from placement_lite.ledger import standards

ENV = "PLACEMENT_LITE_TEST_DB_URLS"


def backend_urls() -> list[str]:
    extra = [u for u in re.split(r"[\s,]+", os.environ.get(ENV, "")) if u]
    return ["sqlite"] + extra


def backend_id(url: str) -> str:
    return "sqlite" if url == "sqlite" else make_url(url).get_backend_name()


def server_url(name: str) -> str:
    """The configured URL of server backend `name` ("mysql", "postgresql"),
    or skip the test that asks: SQLite has no server to lose."""
    import pytest
    for url in backend_urls():
        if backend_id(url) == name:
            return url
    pytest.skip(f"needs a {name} server: name it in {ENV} (see tests/backends.py)")


@contextmanager
def server_admin(url: str):
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


@contextmanager
def fresh_url(base: str):
    """Yield a URL of an empty database on `base`'s server; drop it after."""
    if base == "sqlite":
        with tempfile.TemporaryDirectory(prefix="pl-test-") as tmp:
            yield f"sqlite:///{os.path.join(tmp, 'test.sqlite')}"
        return
    name = f"pl_test_{uuid.uuid4().hex[:16]}"
    parsed = make_url(base)
    with server_admin(base) as conn:
        if parsed.get_backend_name() == "mysql":
            conn.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 "
                              "COLLATE utf8mb4_bin"))
        else:
            conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield parsed.set(database=name).render_as_string(hide_password=False)
    finally:
        with server_admin(base) as conn:
            if parsed.get_backend_name() == "postgresql":
                conn.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": name})
            conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))


@contextmanager
def fresh_database(base: str, **kwargs):
    with fresh_url(base) as url:
        db = Database(url, **kwargs)
        try:
            migrate.upgrade(db.engine)
            standards.sync(db)
            yield db
        finally:
            db.dispose()


@contextmanager
def statements_run(db, parameters: bool = False):
    """The SQL statements run on `db` meanwhile, in order, from any
    thread; with `parameters`, each as (statement, the parameters it was
    sent with: the first row's of an executemany)."""
    statements: list = []

    def listen(_conn, _cursor, statement, params, _context, executemany):
        statements.append((statement, params[0] if executemany else params)
                          if parameters else statement)
    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        yield statements
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)

