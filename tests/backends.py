"""Fresh, migrated databases for tests, on every configured backend.

SQLite always; MariaDB/MySQL and PostgreSQL when PLACEMENT_LITE_TEST_DB_URLS
names server URLs (space or comma separated), e.g.
  PLACEMENT_LITE_TEST_DB_URLS="mysql+pymysql://root@127.0.0.1/ postgresql://root@127.0.0.1/postgres"
Each test database is created with a unique name and dropped afterwards,
so runs never see each other's rows.

On MariaDB/MySQL a migrated database is made once per test process by
the migrations themselves; every later one is a copy of it: its tables'
own `SHOW CREATE TABLE` text replayed, then its rows (alembic's version,
the standard classes and traits) copied. Replaying alembic's eight
revisions there (each ALTER rebuilds a table) cost several times as much
per test. PostgreSQL's migrations are as fast as a template copy, so
every PostgreSQL (and SQLite) test database is migrated afresh.
"""
from __future__ import annotations

import os
import re
import secrets
import tempfile
import threading
import uuid
from contextlib import contextmanager
from multiprocessing import util as mp_util

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
    name = _create_database(base)
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        _drop_database(base, name)


def _create_database(base: str) -> str:
    """A new empty database on `base`'s server; its name."""
    name = f"pl_test_{uuid.uuid4().hex[:16]}"
    with server_admin(base) as conn:
        if make_url(base).get_backend_name() == "mysql":
            conn.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 "
                              "COLLATE utf8mb4_bin"))
        else:
            conn.execute(text(f"CREATE DATABASE {name}"))
    return name


def _drop_database(base: str, name: str) -> None:
    with server_admin(base) as conn:
        if make_url(base).get_backend_name() == "postgresql":
            conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": name})
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))


def _migrated(url: str, **kwargs) -> Database:
    db = Database(url, **kwargs)
    try:
        migrate.upgrade(db.engine)
        standards.sync(db)
    except BaseException:
        db.dispose()
        raise
    return db


# base URL -> (template database name, its tables' CREATE TABLE texts in
# the order the server lists them, {table: its columns a row is given
# the time it is written in})
_MYSQL_TEMPLATES: dict[str, tuple[str, list[tuple[str, str]], dict[str, list[str]]]] = {}
_TEMPLATE_LOCK = threading.Lock()


def _mysql_template(base: str):
    """This process's migrated and synced MariaDB/MySQL database on
    `base`'s server (made on first use, dropped at exit) and its DDL."""
    with _TEMPLATE_LOCK:
        if base in _MYSQL_TEMPLATES:
            return _MYSQL_TEMPLATES[base]
        name = _create_database(base)
        # Dropped when this process exits, a multiprocessing worker too
        # (those leave without running atexit's handlers).
        mp_util.Finalize(None, _drop_database, args=(base, name), exitpriority=10)
        db = _migrated(make_url(base).set(database=name)
                       .render_as_string(hide_password=False))
        try:
            with db.engine.connect() as conn:
                tables = [row[0] for row in conn.execute(text(
                    "SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'"))]
                # Views, triggers or routines would not be copied below;
                # the schema has none, and this says so if that changes.
                assert not conn.execute(text(
                    "SHOW FULL TABLES WHERE Table_type <> 'BASE TABLE'")).first()
                assert not conn.execute(text("SHOW TRIGGERS")).first()
                ddl = [(table, conn.execute(text(f"SHOW CREATE TABLE `{table}`"))
                        .one()[1]) for table in tables]
                stamped: dict[str, list[str]] = {}
                for table, column in conn.execute(text(
                        "SELECT table_name, column_name FROM information_schema.columns "
                        "WHERE table_schema = :s AND column_default LIKE "
                        "'current_timestamp%%'"), {"s": name}):
                    stamped.setdefault(table, []).append(column)
        finally:
            db.dispose()
        _MYSQL_TEMPLATES[base] = (name, ddl, stamped)
        return _MYSQL_TEMPLATES[base]


def _copy_mysql_template(base: str, url: str) -> None:
    template, ddl, stamped = _mysql_template(base)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            # Tables are created in the server's (alphabetical) order, so
            # a foreign key may name a table made after it.
            conn.execute(text("SET SESSION foreign_key_checks = 0"))
            for _table, create in ddl:
                conn.execute(text(create))
            for table, _create in ddl:
                conn.execute(text(f"INSERT INTO `{table}` SELECT * FROM "
                                  f"`{template}`.`{table}`"))
            # As if written now, as the migrations and sync would have:
            # rows stamped by the server's clock get this moment, and the
            # facts log's shard -1, the random number naming a database
            # (migrations/versions/0007), one of this database's own.
            for table, columns in stamped.items():
                conn.execute(text(f"UPDATE `{table}` SET " + ", ".join(
                    f"`{column}` = CURRENT_TIMESTAMP" for column in columns)))
            conn.execute(text("UPDATE facts_heads SET serial = :n WHERE shard = -1"),
                         {"n": secrets.randbits(62)})
            conn.execute(text("SET SESSION foreign_key_checks = 1"))
    finally:
        engine.dispose()


@contextmanager
def fresh_database(base: str, **kwargs):
    """A migrated database with the standard classes and traits, on
    `base`'s server (or a new SQLite file); dropped after."""
    with fresh_url(base) as url:
        if base != "sqlite" and make_url(base).get_backend_name() == "mysql":
            _copy_mysql_template(base, url)
            db = Database(url, **kwargs)
        else:
            db = _migrated(url, **kwargs)
        try:
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

