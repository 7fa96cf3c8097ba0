"""The migrations build exactly db/tables.py on every backend, and the
engine's connection discipline holds (charset, isolation, retries)."""
from __future__ import annotations

import datetime
import threading

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table, select, text, update
from sqlalchemy.exc import OperationalError

from placement_lite.db import migrate
from placement_lite.db.engine import Database, RetryableError, is_retryable_db_error
from placement_lite.db.tables import metadata
from placement_lite.ledger import standards
from tests.backends import (backend_id, backend_urls, fresh_database, fresh_url,
                            server_admin, server_url)


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_migrations_from_empty_match_the_table_metadata(backend):
    with fresh_url(backend) as url:
        db = Database(url)
        try:
            migrate.upgrade(db.engine)
            migrate.upgrade(db.engine)  # a second run is a no-op
            assert migrate.current_version(db.engine) == migrate.head_version()
            with db.engine.connect() as conn:
                ctx = MigrationContext.configure(conn, opts={"compare_type": True})
                diff = compare_metadata(ctx, metadata)
            assert diff == [], "migrations and db/tables.py differ:\n" + "\n".join(
                map(str, diff))
        finally:
            db.dispose()


def _mysql_contents(url: str, since) -> dict:
    """Every table's CREATE TABLE text and rows, and every foreign key,
    of the MariaDB/MySQL database at `url`; a time in a row is checked to
    be from `since` on, then shown as "written meanwhile"."""
    db = Database(url)

    def seen(value):
        if isinstance(value, datetime.datetime):
            assert since <= value <= since + datetime.timedelta(hours=1), (url, value)
            return "written meanwhile"
        return value
    try:
        with db.engine.connect() as conn:
            name = conn.execute(text("SELECT DATABASE()")).scalar()
            tables = [r[0] for r in conn.execute(text("SHOW TABLES"))]
            out = {table: (conn.execute(text(f"SHOW CREATE TABLE `{table}`")).one()[1],
                           sorted(tuple(map(seen, row)) for row in
                                  conn.execute(text(f"SELECT * FROM `{table}`"))))
                   for table in tables}
            out["foreign keys"] = sorted(map(tuple, conn.execute(text(
                "SELECT constraint_name, table_name, referenced_table_name, "
                "update_rule, delete_rule FROM information_schema.referential_constraints "
                "WHERE constraint_schema = :s"), {"s": name})))
            return out
    finally:
        db.dispose()


def test_a_mysql_test_database_is_what_the_migrations_and_sync_make():
    """tests/backends.py copies MariaDB/MySQL test databases from one
    migrated per process; a copy must equal a database migrated and
    synced from empty: tables, keys, indexes, auto-increment counters,
    alembic's version and the standard rows."""
    base = server_url("mysql")
    with fresh_database(base):
        pass  # the process's template exists before the clock starts
    with server_admin(base) as admin:
        # The server's clock, in its own time zone, to the second.
        since = admin.execute(text("SELECT CURRENT_TIMESTAMP")).scalar()
    with fresh_url(base) as url:
        db = Database(url)
        try:
            migrate.upgrade(db.engine)
            standards.sync(db)
        finally:
            db.dispose()
        migrated = _mysql_contents(url, since)
    with fresh_database(base) as copy:
        copied = _mysql_contents(copy.url, since)
    assert migrated["alembic_version"][1] == [(migrate.head_version(),)]
    assert migrated["foreign keys"] and migrated["traits"][1]
    assert any("written meanwhile" in row for row in migrated["traits"][1])
    # Each database is named by a random number of its own (migration 0007).
    names = [dict((row[0], row[1:]) for row in contents["facts_heads"][1]).pop(-1)
             for contents in (migrated, copied)]
    assert names[0] != names[1]
    for contents in (migrated, copied):
        contents["facts_heads"] = (contents["facts_heads"][0],
                                   [row for row in contents["facts_heads"][1] if row[0] != -1])
    assert copied == migrated


def test_connection_settings(db):
    with db.read() as conn:
        if db.backend == "mysql":
            # MariaDB before 11.1 names it tx_isolation.
            values = dict(conn.execute(text(
                "SHOW SESSION VARIABLES LIKE '%%isolation'")).all())
            assert {v for k, v in values.items() if k.endswith("_isolation")
                    and k != "innodb_snapshot_isolation"} == {"READ-COMMITTED"}, values
            charset = conn.execute(text("SELECT @@character_set_client")).scalar()
            assert charset == "utf8mb4"
        elif db.backend == "postgresql":
            isolation = conn.execute(text("SHOW transaction_isolation")).scalar()
            assert isolation == "read committed"
        else:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
    # Dead pooled connections: tests/test_engine_pool.py.


def test_utf8mb4_round_trip(db):
    scratch = MetaData()
    from sqlalchemy import String
    notes = Table("pl_test_notes", scratch, Column("id", Integer, primary_key=True),
                  Column("body", String(64)), mysql_charset="utf8mb4")
    scratch.create_all(db.engine)
    try:
        with db.write() as conn:
            conn.execute(notes.insert(), {"id": 1, "body": "rack \U0001F5A5 z\u00fcrich"})
        with db.read() as conn:
            assert conn.scalar(select(notes.c.body)) == "rack \U0001F5A5 z\u00fcrich"
    finally:
        scratch.drop_all(db.engine)


def test_run_write_retries_a_retryable_error_in_a_new_transaction(db):
    seen = []
    db.on_retry.append(seen.append)
    attempts = []

    def unit(conn):
        attempts.append(conn)
        if len(attempts) < 3:
            raise RetryableError("generation moved")
        return "done"
    assert db.run_write(unit) == "done"
    assert len(attempts) == 3 and len(seen) == 2
    with pytest.raises(RetryableError):
        db.run_write(lambda conn: (_ for _ in ()).throw(RetryableError("x")),
                     retries=1)


def test_run_write_does_not_retry_other_errors(db):
    calls = []

    def unit(conn):
        calls.append(1)
        conn.execute(text("SELECT * FROM no_such_table"))
    with pytest.raises(Exception):
        db.run_write(unit)
    assert calls == [1]


def test_driver_errors_classified():
    import pymysql
    from sqlalchemy.exc import DBAPIError

    import psycopg

    def wrap(orig):
        base = psycopg.Error if isinstance(orig, psycopg.Error) else pymysql.Error
        return DBAPIError.instance("UPDATE", {}, orig, base)
    assert is_retryable_db_error(wrap(pymysql.err.OperationalError(1213, "Deadlock")))
    assert is_retryable_db_error(wrap(pymysql.err.OperationalError(1205, "Lock wait")))
    # MariaDB reports an AUTO-INC lock wait given up among racing inserts
    # (seen in CI: the summary race) as 1467, not as a deadlock.
    assert is_retryable_db_error(wrap(pymysql.err.OperationalError(
        1467, "Failed to read auto-increment value from storage engine")))
    assert not is_retryable_db_error(wrap(pymysql.err.OperationalError(2013, "Lost")))
    assert not is_retryable_db_error(wrap(pymysql.err.IntegrityError(1062, "Dup")))
    import psycopg.errors as pge
    assert is_retryable_db_error(wrap(pge.DeadlockDetected("deadlock")))
    assert is_retryable_db_error(wrap(pge.SerializationFailure("serialize")))
    assert not is_retryable_db_error(wrap(pge.UniqueViolation("dup")))
    import sqlite3
    locked = OperationalError("BEGIN", {}, sqlite3.OperationalError("database is locked"))
    assert is_retryable_db_error(locked)


def test_a_real_deadlock_is_retried(db):
    """Two writers lock two rows in opposite orders; the server picks a
    victim, whose unit of work runs again in a new transaction."""
    if db.backend == "sqlite":
        pytest.skip("SQLite writers serialise at BEGIN IMMEDIATE; no deadlock")
    scratch = MetaData()
    rows = Table("pl_test_locks", scratch, Column("id", Integer, primary_key=True),
                 Column("n", Integer, nullable=False))
    scratch.create_all(db.engine)
    try:
        with db.write() as conn:
            conn.execute(rows.insert(), [{"id": 1, "n": 0}, {"id": 2, "n": 0}])
        retries = []
        db.on_retry.append(retries.append)
        both_hold_one = threading.Barrier(2, timeout=20)
        errors = []

        def writer(first, second):
            tries = []

            def unit(conn):
                tries.append(1)
                conn.execute(update(rows).where(rows.c.id == first)
                             .values(n=rows.c.n + 1))
                if len(tries) == 1:
                    both_hold_one.wait()
                conn.execute(update(rows).where(rows.c.id == second)
                             .values(n=rows.c.n + 1))
            try:
                db.run_write(unit)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
        threads = [threading.Thread(target=writer, args=(1, 2)),
                   threading.Thread(target=writer, args=(2, 1))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert retries, "the deadlock victim was not retried"
        with db.read() as conn:
            assert sorted(conn.execute(select(rows.c.n))) == [(2,), (2,)]
    finally:
        scratch.drop_all(db.engine)


def test_db_upgrade_and_version_commands(tmp_path, capsys):
    from placement_lite import cli

    import sqlite3
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    # A read-only command: it creates no database to say so.
    assert cli.main(["db", "version", "--db", url]) == 1
    assert "no database at" in capsys.readouterr().err
    assert not (tmp_path / "cli.sqlite").exists()
    sqlite3.connect(tmp_path / "cli.sqlite").close()
    assert cli.main(["db", "version", "--db", url]) == 0
    assert capsys.readouterr().out.startswith("none (head ")
    assert cli.main(["db", "upgrade", "--db", url]) == 0
    assert capsys.readouterr().out.strip() == f"schema at {migrate.head_version()}"
    assert cli.main(["db", "version", "--db", url]) == 0
    head = migrate.head_version()
    assert capsys.readouterr().out.strip() == f"{head} (head {head})"
