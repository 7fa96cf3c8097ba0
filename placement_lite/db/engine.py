"""URL -> Engine, and the transaction discipline every writer follows.

Writers go through `Database.write()` (or `run_write()` for retries):
- SQLite: `BEGIN IMMEDIATE`, so two writers serialise on the file lock at
  the start of the transaction instead of failing mid-way with "database is
  locked"; WAL keeps readers unblocked. Writers through this module wait
  their turn in a queue (`WriterQueue`) rather than in SQLite's busy
  handler; a generous busy timeout waits out any other writer.
- MariaDB/MySQL and PostgreSQL: READ COMMITTED, so a read after taking a
  row lock (the generation bump) sees every transaction that committed
  before the lock was granted. Under MySQL's default REPEATABLE READ the
  read would come from an older snapshot and capacity could be oversold.

A pooled connection costs no round trip of its own on the way in or out
when it is busy: it is pinged at checkout only after sitting idle (see
`watch_connections`), and a transaction the helpers below committed is
not rolled back a second time when its connection goes back to the pool.
"""
from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Callable, Iterator, Optional, Sequence, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError

from placement_lite.db import facts_log
from placement_lite.db.writer_queue import WriterQueue
from placement_lite.errors import OutcomeUnknown, RetryableError

LOG = logging.getLogger(__name__)
T = TypeVar("T")

# MySQL: deadlock, lock wait timeout, Galera certification failure (1213 too),
# and MariaDB's 1467, which racing INSERTs can get instead of a deadlock
# when the table's AUTO-INC lock is given up (the statement changed nothing).
# A connection lost during COMMIT is never retried: the first attempt may
# have been stored (see Database.write).
_MYSQL_RETRY_CODES = {1205, 1213, 1467}
# PostgreSQL SQLSTATEs: serialization_failure, deadlock_detected.
_PG_RETRY_STATES = {"40001", "40P01"}


def is_retryable_db_error(exc: BaseException) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "args", [None])[0] if orig is not None else None
    if isinstance(code, int) and code in _MYSQL_RETRY_CODES:
        return True
    pgcode = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if pgcode in _PG_RETRY_STATES:
        return True
    msg = str(orig).lower() if orig is not None else ""
    return isinstance(exc, OperationalError) and (
        "database is locked" in msg or "database is busy" in msg)


# How many times a write whose connection was lost before COMMIT is run
# again, each time on a new connection. Enough to ride out a database
# node that dies under a load balancer (the next connection lands on a
# live node); bounded so a database that is gone gets a prompt 503.
LOST_CONNECTION_RETRIES = 2
# Set on a DBAPIError raised while a connection was being opened.
_NO_CONNECTION = "placement_lite_no_connection"


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` means the database could not be reached, or the
    connection went away before the transaction in progress reached
    COMMIT: either way the server stored nothing of it. (A connection lost
    during COMMIT is OutcomeUnknown, raised by Database.write instead.)

    Which driver errors are a lost connection is the SQLAlchemy dialect's
    call, whatever the backend: MySQL's client errors 2006, 2013, 2055 and
    MariaDB's 1927 from PyMySQL or mysqlclient (and 1047 and 1053, which
    _mark_node_gone adds), psycopg's closed or broken
    connection ("terminating connection due to administrator command",
    "server closed the connection unexpectedly"), pysqlite's closed
    database. SQLAlchemy marks such an error `connection_invalidated` and
    drops the pool's connections, so the next checkout is a new one."""
    return isinstance(exc, DBAPIError) and bool(
        exc.connection_invalidated or getattr(exc, _NO_CONNECTION, False))


def _connect(engine: Engine) -> Connection:
    try:
        return engine.connect()
    except DBAPIError as exc:
        # Nothing was sent: the server cannot be reached (down, refusing,
        # out of connections). Told apart from an error a statement got.
        setattr(exc, _NO_CONNECTION, True)
        raise


# The benchmark's and the debugger's setting: count the statements each
# thread sends, so a request can report how many it cost. Off by default
# (the event hook costs a little on every statement).
COUNT_STATEMENTS_ENV = "PLACEMENT_LITE_COUNT_STATEMENTS"


class StatementCounter:
    """Statements sent per thread (a request runs on one thread)."""

    def __init__(self):
        self._local = threading.local()

    def install(self, engine: Engine) -> None:
        @event.listens_for(engine, "before_cursor_execute")
        def _count(conn, cursor, statement, parameters, context, executemany):
            local = self._local
            local.count = getattr(local, "count", 0) + 1

    def reset(self) -> None:
        self._local.count = 0

    def count(self) -> int:
        return getattr(self._local, "count", 0)


def driver_rows(conn: Connection, stmt, params=None) -> Sequence[tuple]:
    """Every row of `stmt` as the driver's own tuples (a list, or with
    mysqlclient a tuple, of them).

    For reads of thousands of small rows on a hot path (the `used` of
    every inventory row a candidates answer considers). The statement
    still runs through SQLAlchemy, so it is compiled once and cached,
    counted, and its errors translated; only the Row objects are skipped.
    With mysqlclient, building them cost as much as the driver's own
    fetch (1.5 ms per 3,000 rows). Only for columns SQLAlchemy does not
    convert (integers, strings): no type processing is applied.
    """
    result = conn.execute(stmt, params or {})
    try:
        return result.cursor.fetchall()
    finally:
        result.close()


def counting_enabled() -> bool:
    return os.environ.get(COUNT_STATEMENTS_ENV, "").lower() in ("1", "true", "yes")


# A pooled connection given back less than this many seconds ago is taken
# to be alive; one idle for longer is pinged before use (a restarted
# server or a proxy's idle timeout leaves dead connections in the pool).
# Under load connections come back within milliseconds, so a busy server
# pings almost never, where a ping per checkout cost a round trip per
# transaction.
IDLE_PING_SECONDS = 1.0
# Keys in a pooled connection's info dict.
_RETURNED_AT = "placement_lite.returned_at"
_ENDED_CLEANLY = "placement_lite.ended_cleanly"


# MySQL server errors after which the node cannot serve this connection,
# though the socket is still open: Galera's 1047 (the node left the
# cluster's primary component) and 1053 (the server is shutting down).
# The transaction stored nothing, like one whose connection dropped, and
# the connection must not go back to the pool: the next one may reach a
# live node through a load balancer.
_MYSQL_NODE_GONE_CODES = {1047, 1053}


def _mark_node_gone(engine: Engine) -> None:
    @event.listens_for(engine, "handle_error")
    def _node_gone(ctx):
        orig = ctx.original_exception
        code = getattr(orig, "args", [None])[0] if orig is not None else None
        if isinstance(code, int) and code in _MYSQL_NODE_GONE_CODES:
            ctx.is_disconnect = True


def watch_connections(engine: Engine, idle_ping_seconds: float) -> None:
    """Ping-if-idle at checkout, and skip the pool's rollback on return
    when the transaction was committed or rolled back by Database.

    The pool's own reset (a ROLLBACK on every return, even right after a
    COMMIT) is turned off for these engines (make_engine); this reset
    handler rolls back every connection that is not known to be clean:
    one given back mid-transaction, a failed commit, a raw connection.
    """
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _returned(dbapi_conn, record):
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _check_alive(dbapi_conn, record, proxy):
        returned = record.info.get(_RETURNED_AT)
        if returned is None or time.monotonic() - returned <= idle_ping_seconds:
            return  # new, or busy a moment ago
        try:
            dialect.do_ping(dbapi_conn)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi_conn, None):
                # The pool drops this connection and checks out another.
                raise DisconnectionError(f"pooled connection is gone: {exc}") from exc
            raise

    @event.listens_for(engine, "reset")
    def _reset(dbapi_conn, record, state):
        clean = record.info.pop(_ENDED_CLEANLY, False)
        if clean or state.transaction_was_reset or not state.asyncio_safe:
            return
        dialect.do_rollback(dbapi_conn)


def make_engine(url: str, pool_size: int = 10,
                idle_ping_seconds: float = IDLE_PING_SECONDS,
                pool: Optional[dict] = None) -> Engine:
    """`pool`: SQLAlchemy's max_overflow, pool_timeout and pool_recycle
    for a database server (SQLite keeps its own pool)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    kwargs: dict = {"future": True}
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            import os
            directory = os.path.dirname(os.path.abspath(parsed.database))
            os.makedirs(directory, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 60}
    else:
        # No pool_pre_ping and no reset on return: watch_connections
        # does both only when they are needed.
        kwargs.update(pool_size=pool_size, max_overflow=pool_size,
                      pool_recycle=3600, pool_reset_on_return=None,
                      isolation_level="READ COMMITTED")
        kwargs.update(pool or {})
        if backend == "mysql":
            query = dict(parsed.query)
            query.setdefault("charset", "utf8mb4")
            parsed = parsed.set(query=query)
    engine = create_engine(parsed, **kwargs)
    if backend == "sqlite":
        _sqlite_setup(engine)
    else:
        watch_connections(engine, idle_ping_seconds)
        if backend == "mysql":
            _mark_node_gone(engine)
    return engine


def _use_wal(cur, attempts: int = 100) -> None:
    """Put the database file in WAL mode (it stays so: the mode is stored
    in the file). Switching needs an exclusive lock, and SQLite may refuse
    it at once rather than wait out the busy timeout, as when two servers
    open a new file together; so wait for the other process here."""
    for attempt in range(attempts):
        try:
            mode = cur.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05 + random.uniform(0, 0.05))


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        # Let SQLAlchemy's begin event, not the driver, start transactions.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=60000")
        _use_wal(cur)
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        if conn.get_execution_options().get("placement_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


class Database:
    """The engine plus the read/write transaction helpers."""

    def __init__(self, url: str, pool_size: int = 10, retries: int = 10,
                 idle_ping_seconds: float = IDLE_PING_SECONDS,
                 pool: Optional[dict] = None):
        self.url = url
        self.engine = make_engine(url, pool_size=pool_size,
                                  idle_ping_seconds=idle_ping_seconds, pool=pool)
        self.backend = self.engine.dialect.name
        self.retries = retries
        self.statements: StatementCounter | None = None
        if counting_enabled():
            self.statements = StatementCounter()
            self.statements.install(self.engine)
        self._writer = self._writer_of = None
        path = make_url(url).database if self.backend == "sqlite" else None
        self._queue = (WriterQueue.of(path)
                       if path and path != ":memory:" else None)
        # PostgreSQL reads run in autocommit: under READ COMMITTED every
        # statement of a transaction takes a snapshot of its own anyway,
        # so a read transaction adds nothing but the BEGIN and COMMIT
        # round trips psycopg sends for it (switching autocommit on and
        # back off is local to psycopg). MariaDB/MySQL keep a transaction:
        # switching there costs a round trip each way.
        self._reader = self._reader_of = None
        # Observers (metrics) count retries without this module knowing them.
        self.on_retry: list[Callable[[BaseException], None]] = []

    def _reading_engine(self) -> Engine:
        # Derived from whatever `engine` is now (a test swaps it for one
        # whose server is down).
        engine = self.engine
        if self._reader_of is not engine:
            self._reader = (engine.execution_options(isolation_level="AUTOCOMMIT")
                            if self.backend == "postgresql" else engine)
            self._reader_of = engine
        return self._reader

    def _writing_engine(self) -> Engine:
        engine = self.engine
        if self._writer_of is not engine:
            self._writer = engine.execution_options(placement_write=True)
            self._writer_of = engine
        return self._writer

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with _connect(self._reading_engine()) as conn:
            with conn.begin():
                yield conn
            # Committed: nothing for the pool to roll back.
            conn.info[_ENDED_CLEANLY] = True

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction. A connection lost while COMMIT was on its
        way leaves the outcome unknown (the server may have committed
        before the connection dropped): that raises OutcomeUnknown, never
        an error a caller or `run_write` would take for a clean failure."""
        with self._queue.turn() if self._queue else nullcontext(), \
                _connect(self._writing_engine()) as conn:
            trans = conn.begin()
            # What the facts log keeps lives on the pooled DBAPI connection:
            # a touch made outside a write (a bare transaction) must not be
            # logged as this one's.
            facts_log.discard(conn)
            try:
                yield conn
                # The facts log's heads are the last locks a write takes.
                facts_log.flush(conn)
            except BaseException:
                trans.rollback()  # a no-op once the connection is lost
                # A lost connection took its transaction and what it kept
                # with it, and touching `conn.info` or the facts log would
                # connect again at once (to a server that may be gone,
                # turning the loss into an error about connecting).
                if not conn.invalidated:
                    facts_log.discard(conn)
                    conn.info[_ENDED_CLEANLY] = True
                raise
            try:
                trans.commit()
                conn.info[_ENDED_CLEANLY] = True
            except DBAPIError as exc:
                if not exc.connection_invalidated:
                    raise
                LOG.error("connection lost during COMMIT: the outcome of this "
                          "write is unknown (%s)", exc.orig)
                raise OutcomeUnknown(
                    "The database connection was lost while the write was "
                    "being committed, so whether it was stored is unknown.") from exc

    def run_write(self, fn: Callable[[Connection], T], retries: int | None = None) -> T:
        """Run fn(conn) in a write transaction, retrying in a NEW transaction.

        Never retries inside the transaction that lost: the failed one is
        rolled back and fn re-reads everything it depends on. Lost races
        (deadlocks, RetryableError) are retried up to `retries` times; a
        connection lost before COMMIT (nothing was stored) up to
        LOST_CONNECTION_RETRIES times, on a new connection. Never retries
        a write whose COMMIT lost its connection (OutcomeUnknown): running
        it again could apply it twice; nor one that could not connect.
        """
        attempts = (self.retries if retries is None else retries) + 1
        raced = lost = 0
        while True:
            try:
                with self.write() as conn:
                    return fn(conn)
            except (RetryableError, DBAPIError) as exc:
                if isinstance(exc, DBAPIError) and exc.connection_invalidated:
                    lost += 1
                    if lost > LOST_CONNECTION_RETRIES:
                        raise
                    LOG.warning("database connection lost before COMMIT, nothing "
                                "was stored; running the write again on a new "
                                "connection (%s)", exc.orig)
                    # Long enough for a proxy or load balancer in front of the
                    # database to notice a dead node, short against a request.
                    delay = random.uniform(0.05, 0.1) * lost
                elif isinstance(exc, DBAPIError) and not is_retryable_db_error(exc):
                    raise
                else:
                    raced += 1
                    if raced >= attempts:
                        raise
                    LOG.debug("retrying write after %s (attempt %d)", exc, raced)
                    # Jittered back-off so racing writers do not collide again.
                    delay = random.uniform(0, 0.002 * (2 ** min(raced - 1, 6)))
                for hook in self.on_retry:
                    hook(exc)
                time.sleep(delay)

    def ping(self) -> None:
        """Raise if the database does not answer a trivial query."""
        with self.read() as conn:
            conn.exec_driver_sql("SELECT 1")

    def dispose(self) -> None:
        self.engine.dispose()
        if self._queue is not None:
            self._queue.close()


def from_settings(settings) -> Database:
    """The database the settings name, with their pool and retries."""
    overflow = settings.db_max_overflow
    return Database(settings.db, pool_size=settings.db_pool_size,
                    retries=settings.db_retries,
                    pool={"max_overflow": settings.db_pool_size if overflow is None
                          else overflow,
                          "pool_timeout": settings.db_pool_timeout,
                          "pool_recycle": settings.db_recycle_seconds})
