"""The pool's round trips on MariaDB and PostgreSQL: a busy connection is
not pinged and a committed one is not rolled back again, yet a connection
that died while idle is replaced before use, and one given back
mid-transaction is still rolled back."""
from __future__ import annotations

import pytest
from sqlalchemy import text

from placement_lite.db.engine import Database
from tests.backends import backend_id, backend_urls, fresh_url

SERVERS = [u for u in backend_urls() if u != "sqlite"]
if not SERVERS:
    pytestmark = pytest.mark.skip(reason="needs MariaDB or PostgreSQL "
                                  "(PLACEMENT_LITE_TEST_DB_URLS)")


@pytest.fixture(params=SERVERS or [None],
                ids=lambda base: backend_id(base) if base else "no-server")
def url(request):
    with fresh_url(request.param) as found:
        yield found


class Calls:
    """Counts the dialect's pings and rollbacks on one engine (after its
    first connection, whose set-up rolls back once)."""

    def __init__(self, db):
        with db.read() as conn:
            conn.execute(text("SELECT 1"))
        self.dialect = db.engine.dialect
        self.pings = self.rollbacks = 0
        self._ping, self._rollback = self.dialect.do_ping, self.dialect.do_rollback

        def ping(dbapi_conn):
            self.pings += 1
            return self._ping(dbapi_conn)

        def rollback(dbapi_conn):
            self.rollbacks += 1
            return self._rollback(dbapi_conn)
        self.dialect.do_ping, self.dialect.do_rollback = ping, rollback

    def restore(self):
        self.dialect.do_ping, self.dialect.do_rollback = self._ping, self._rollback


def _session_id(conn, db):
    query = "SELECT CONNECTION_ID()" if db.backend == "mysql" else "SELECT pg_backend_pid()"
    return conn.execute(text(query)).scalar()


def _kill(db, session_id):
    with Database(db.url).engine.connect() as admin:
        if db.backend == "mysql":
            admin.execute(text(f"KILL {int(session_id)}"))
        else:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": session_id})
        admin.commit()


def test_busy_connections_cost_no_ping_and_no_second_rollback(url):
    db = Database(url, pool_size=1)
    calls = Calls(db)
    try:
        for _ in range(3):
            with db.read() as conn:
                conn.execute(text("SELECT 1"))
            with db.write() as conn:
                conn.execute(text("SELECT 1"))
        assert (calls.pings, calls.rollbacks) == (0, 0)
    finally:
        calls.restore()
        db.dispose()


def test_a_connection_given_back_mid_transaction_is_rolled_back(url):
    db = Database(url, pool_size=1)
    calls = Calls(db)
    try:
        raw = db.engine.raw_connection()
        cursor = raw.cursor()
        cursor.execute("SELECT 1")
        cursor.close()
        raw.close()  # back to the pool without COMMIT or ROLLBACK
        assert calls.rollbacks == 1
        # A write that fails is rolled back once, by the write itself.
        with pytest.raises(RuntimeError):
            with db.write() as conn:
                conn.execute(text("SELECT 1"))
                raise RuntimeError("refused")
        assert calls.rollbacks == 2
    finally:
        calls.restore()
        db.dispose()


def test_a_connection_that_died_while_idle_is_replaced_before_use(url):
    db = Database(url, pool_size=1, idle_ping_seconds=0.0)
    calls = Calls(db)
    try:
        with db.read() as conn:
            first = _session_id(conn, db)
        _kill(db, first)
        # The pooled connection is dead; the checkout ping finds out and
        # the pool connects anew instead of failing the request.
        with db.read() as conn:
            second = _session_id(conn, db)
        assert second != first
        assert calls.pings >= 1
    finally:
        calls.restore()
        db.dispose()


def test_postgresql_reads_send_no_begin_or_commit(url):
    db = Database(url, pool_size=1)
    try:
        if db.backend != "postgresql":
            pytest.skip("MariaDB reads keep their transaction (switching costs "
                        "a round trip each way)")
        for _ in range(2):
            # One pooled connection, switched to autocommit for the read
            # and back for the write that follows it.
            with db.read() as conn:
                assert conn.connection.dbapi_connection.autocommit
                assert conn.execute(text("SELECT 1")).scalar() == 1
            with db.write() as conn:
                assert not conn.connection.dbapi_connection.autocommit
                assert conn.execute(text("SHOW transaction_isolation")).scalar() == \
                    "read committed"
    finally:
        db.dispose()
