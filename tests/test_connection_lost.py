"""A database connection lost BEFORE COMMIT changed nothing: the write is
run again in a new transaction on a fresh connection, a bounded number of
times, and when it still cannot get through the caller gets a 503
`placement.database_unavailable` with Retry-After, never a 500. (A
connection lost DURING COMMIT is tests/test_outcome_unknown.py: the
outcome is unknown and the write is never repeated.)

On MariaDB and PostgreSQL the connections are really killed by the
server (`KILL CONNECTION`, `pg_terminate_backend`) while the claim's
INSERT is in flight, or the server is made to vanish behind a TCP
forwarder, as a Galera node that dies does; those tests are skipped
unless PLACEMENT_LITE_TEST_DB_URLS names the backend. SQLite has no
connection to lose: there the driver's own "closed database" error is
raised, which exercises the same retry path.
"""
from __future__ import annotations

import math
import sqlite3
import threading
import time
import uuid

import falcon.testing
import pytest
from sqlalchemy import create_engine, event, func, select, text

from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import tables as t
from placement_lite.db.engine import LOST_CONNECTION_RETRIES, Database, connection_lost
from tests.backends import fresh_database, server_url
from tests.tcp_proxy import Proxy
from tests.test_outcome_unknown import LATEST, _claim, _kill, _provider

UNAVAILABLE = "placement.database_unavailable"


@pytest.fixture(params=["mysql", "postgresql"])
def server_db(request):
    """A fresh database on a server backend; skipped without one."""
    with fresh_database(server_url(request.param)) as database:
        yield database


def _client(db, **settings):
    return falcon.testing.TestClient(create_app(Settings(db=db.url, **settings), db))


def _connection_id(db, raw) -> int:
    if db.backend == "mysql":
        return int(raw.thread_id())
    return int(raw.info.backend_pid)


def _is_claim_insert(statement: str) -> bool:
    return statement.lstrip().upper().startswith("INSERT INTO ALLOCATIONS")


class InsertKiller:
    """Kills the connection of the next `times` INSERTs into allocations
    while each is in flight on the server.

    Another connection holds a row lock the INSERT needs (its foreign-key
    check of resource_classes), so the INSERT waits on the server; once
    the server shows it at work on the INSERT, a third connection kills it
    and the lock is let go. Records the connection id of every claim
    INSERT seen."""

    def __init__(self, db, times=1):
        self.db = db
        self.times = times
        self.seen: list[int] = []
        self.killed: list[int] = []
        self.failures: list[str] = []
        self._threads: list[threading.Thread] = []
        self._admin = create_engine(db.url, isolation_level="AUTOCOMMIT")
        self._holder = create_engine(db.url, isolation_level="READ COMMITTED")
        event.listen(db.engine, "before_cursor_execute", self._before)

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.stop()

    def _before(self, conn, cursor, statement, params, context, executemany):
        if not _is_claim_insert(statement):
            return
        target = _connection_id(self.db, cursor.connection)
        self.seen.append(target)
        if len(self.killed) >= self.times:
            return
        self.killed.append(target)
        holder = self._holder.connect()
        holder.begin()
        holder.execute(text("SELECT id FROM resource_classes FOR UPDATE"))
        thread = threading.Thread(target=self._kill_when_waiting, args=(target, holder))
        thread.start()
        self._threads.append(thread)

    def _waiting(self, conn, target) -> bool:
        if self.db.backend == "mysql":
            # (information_schema.innodb_trx does not always say LOCK WAIT
            # for it: the processlist says the server is running it.)
            query = ("SELECT 1 FROM information_schema.processlist WHERE id = :id "
                     "AND command = 'Query' AND info LIKE 'INSERT INTO allocations%'")
        else:
            query = ("SELECT 1 FROM pg_stat_activity "
                     "WHERE pid = :id AND wait_event_type = 'Lock'")
        return conn.execute(text(query), {"id": target}).first() is not None

    def _kill_when_waiting(self, target, holder):
        try:
            with self._admin.connect() as conn:
                deadline = time.monotonic() + 20
                while not self._waiting(conn, target):
                    if time.monotonic() > deadline:
                        self.failures.append(f"connection {target} never waited")
                        return
                    time.sleep(0.01)
                if self.db.backend == "mysql":
                    conn.execute(text(f"KILL CONNECTION {int(target)}"))
                else:
                    conn.execute(text("SELECT pg_terminate_backend(:id)"), {"id": target})
        finally:
            holder.rollback()
            holder.close()

    def stop(self):
        event.remove(self.db.engine, "before_cursor_execute", self._before)
        for thread in self._threads:
            thread.join(30)
        self._admin.dispose()
        self._holder.dispose()
        assert not self.failures, self.failures


def _stored(db, consumer):
    """(allocation rows, consumer rows) of `consumer` in the database."""
    with db.read() as conn:
        allocs = conn.scalar(
            select(func.count()).select_from(t.allocations.join(
                t.consumers, t.allocations.c.consumer_id == t.consumers.c.id))
            .where(t.consumers.c.uuid == consumer))
        consumers = conn.scalar(select(func.count()).select_from(t.consumers)
                                .where(t.consumers.c.uuid == consumer))
    return allocs, consumers


def _usage(client, rp):
    shown = client.simulate_get(f"/resource_providers/{rp}/usages", headers=LATEST)
    assert shown.status_code == 200, shown.text
    return shown.json["usages"]


def _assert_unavailable(result):
    assert result.status_code == 503, result.text
    (err,) = result.json["errors"]
    assert err["code"] == UNAVAILABLE
    assert err["title"] == "Service Unavailable"
    assert "nothing was changed" in err["detail"]
    assert "try again" in err["detail"].lower()
    assert int(result.headers["Retry-After"]) > 0


def test_a_claim_killed_during_its_insert_is_retried_on_a_fresh_connection(server_db):
    client = _client(server_db)
    rp = _provider(client)
    consumer = str(uuid.uuid4())
    retried = []
    server_db.on_retry.append(retried.append)
    with InsertKiller(server_db, times=1) as killer:
        result = _claim(client, rp, consumer)
    assert result.status_code == 204, result.text
    # Killed once, then done again on another connection.
    assert len(killer.killed) == 1
    assert len(killer.seen) == 2 and len(set(killer.seen)) == 2, killer.seen
    assert len(retried) == 1 and connection_lost(retried[0])
    # Stored exactly once.
    assert _stored(server_db, consumer) == (1, 1)
    shown = client.simulate_get(f"/allocations/{consumer}", headers=LATEST)
    assert shown.json["allocations"][rp]["resources"] == {"VCPU": 2}
    assert shown.json["consumer_generation"] == 1
    assert _usage(client, rp) == {"VCPU": 2}
    usages = client.simulate_get("/usages?project_id=p", headers={
        **LATEST, "OpenStack-API-Version": "placement 1.9"})
    assert usages.json["usages"] == {"VCPU": 2}


def test_a_claim_killed_on_every_attempt_is_a_503_that_changed_nothing(server_db):
    client = _client(server_db)
    rp = _provider(client)
    consumer = str(uuid.uuid4())
    with InsertKiller(server_db, times=math.inf) as killer:
        result = _claim(client, rp, consumer)
    _assert_unavailable(result)
    # Bounded: the first attempt and LOST_CONNECTION_RETRIES more, each on
    # a connection of its own.
    assert len(killer.killed) == 1 + LOST_CONNECTION_RETRIES
    assert len(set(killer.seen)) == len(killer.seen) == len(killer.killed)
    assert _stored(server_db, consumer) == (0, 0)
    assert _usage(client, rp) == {"VCPU": 0}
    # As the answer says: the same request again, once the database
    # answers, succeeds.
    again = _claim(client, rp, consumer)
    assert again.status_code == 204, again.text
    assert _stored(server_db, consumer) == (1, 1)


def test_a_database_that_vanishes_mid_claim_is_a_503_not_a_500(server_db):
    """The node the server talks to dies during the INSERT: the connection
    is reset and the retry cannot connect at all (Galera, issue 26: this
    was a 500 on MariaDB)."""
    proxy = Proxy(server_db.url)
    db = Database(proxy.url)
    client = _client(db)
    try:
        rp = _provider(client)
        consumer = str(uuid.uuid4())

        def vanish(conn, cursor, statement, *_args):
            if _is_claim_insert(statement):
                proxy.cut()
        event.listen(db.engine, "before_cursor_execute", vanish)
        result = _claim(client, rp, consumer)
        event.remove(db.engine, "before_cursor_execute", vanish)
        _assert_unavailable(result)
        # Reads are refused alike while it is gone.
        listed = client.simulate_get("/resource_providers", headers=LATEST)
        _assert_unavailable(listed)
        assert _stored(server_db, consumer) == (0, 0)

        proxy.restore()
        again = _claim(client, rp, consumer)
        assert again.status_code == 204, again.text
        assert _stored(server_db, consumer) == (1, 1)
    finally:
        db.dispose()
        proxy.close()


@pytest.mark.parametrize("url", [
    "mysql+pymysql://placement:s3cret@127.0.0.1:1/placement",
    "postgresql://placement:s3cret@127.0.0.1:1/placement"],
    ids=["mysql", "postgresql"])
def test_a_database_that_cannot_be_reached_is_a_503_not_a_500(url, monkeypatch):
    """No server needed: the driver's refusal to connect is the point."""
    with fresh_database("sqlite") as db:
        client = _client(db)
        rp = _provider(client)
        # The database goes away after start: nothing listens on port 1.
        down = Database(url)
        monkeypatch.setattr(db, "engine", down.engine)
        try:
            for result in (_claim(client, rp, str(uuid.uuid4())),
                           client.simulate_get("/resource_providers", headers=LATEST)):
                _assert_unavailable(result)
                for secret in ("s3cret", "127.0.0.1", "Errno"):
                    assert secret not in result.text
        finally:
            down.dispose()


class ClosedOnInsert:
    """The next `times` claim INSERTs find their connection gone: on a
    server backend it is killed just before the statement is sent; on
    SQLite the driver's error for a closed connection is raised."""

    def __init__(self, db, times=1):
        self.db = db
        self.times = times
        self.attempts = 0
        self.dialect = db.engine.dialect
        self.original = self.dialect.do_execute
        self.dialect.do_execute = self._do_execute

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.restore()

    def restore(self):
        self.dialect.do_execute = self.original

    def _do_execute(self, cursor, statement, parameters, context=None):
        if _is_claim_insert(statement) and self.attempts < self.times:
            self.attempts += 1
            if self.db.backend == "sqlite":
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            _kill(self.db, cursor.connection)
        return self.original(cursor, statement, parameters, context)


def test_a_connection_lost_before_commit_is_retried_on_every_backend(db):
    client = _client(db, metrics=True)
    rp = _provider(client)
    consumer = str(uuid.uuid4())
    with ClosedOnInsert(db, times=1) as fault:
        result = _claim(client, rp, consumer)
    assert result.status_code == 204, result.text
    assert fault.attempts == 1
    assert _stored(db, consumer) == (1, 1)
    assert _usage(client, rp) == {"VCPU": 2}
    # The operator sees it counted under its own reason.
    metrics = client.simulate_get("/metrics").text
    assert ('placement_lite_db_write_retries_total{worker="0",'
            'reason="connection_lost"} 1') in metrics.splitlines()


def test_a_connection_lost_on_every_attempt_is_a_503_on_every_backend(db):
    client = _client(db)
    rp = _provider(client)
    consumer = str(uuid.uuid4())
    with ClosedOnInsert(db, times=math.inf) as fault:
        result = _claim(client, rp, consumer)
    _assert_unavailable(result)
    assert fault.attempts == 1 + LOST_CONNECTION_RETRIES
    assert _stored(db, consumer) == (0, 0)
    again = _claim(client, rp, consumer)
    assert again.status_code == 204, again.text


class NodeLeavesOnInsert(ClosedOnInsert):
    """The next `times` claim INSERTs meet a MariaDB node that cannot serve:
    the server answers `errno` (Galera's 1047 from a node that left the
    cluster's primary component, or 1053 from a server shutting down)
    though the connection itself is still open."""

    def __init__(self, db, errno, times=1):
        super().__init__(db, times)
        self.errno = errno

    def _do_execute(self, cursor, statement, parameters, context=None):
        if _is_claim_insert(statement) and self.attempts < self.times:
            self.attempts += 1
            cursor.execute(
                "SIGNAL SQLSTATE '08S01' SET MYSQL_ERRNO = %s, "
                "MESSAGE_TEXT = 'node cannot serve'" % int(self.errno))
        return self.original(cursor, statement, parameters, context)


@pytest.mark.parametrize("errno", [1047, 1053])
def test_a_node_that_cannot_serve_is_a_lost_connection(errno):
    """A Galera node outside the primary component (1047), or a server
    shutting down (1053), stored nothing of the transaction: the write
    runs again on a new connection, which a load balancer sends to a live
    node, and the connection to the dead node is not pooled again."""
    with fresh_database(server_url("mysql")) as db:
        client = _client(db, metrics=True)
        rp = _provider(client)
        consumer = str(uuid.uuid4())
        with NodeLeavesOnInsert(db, errno) as fault:
            result = _claim(client, rp, consumer)
        assert result.status_code == 204, result.text
        assert fault.attempts == 1
        assert _stored(db, consumer) == (1, 1)
        metrics = client.simulate_get("/metrics").text
        assert ('placement_lite_db_write_retries_total{worker="0",'
                'reason="connection_lost"} 1') in metrics.splitlines()
