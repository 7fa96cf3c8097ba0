"""Run the WSGI app under waitress: one process, or N supervised workers.

The parent migrates the schema, binds the listening socket, then forks the
workers; every worker serves the same inherited socket (the kernel hands
each new connection to one of them) and builds its own app and database
pool after the fork, so no connection or lock crosses a process boundary
and any worker can answer any request. The parent only supervises: a
worker that dies is replaced; SIGTERM or SIGINT makes every worker stop
accepting, finish the requests in flight and exit.

The pieces live beside this module: startup.py (the checks that refuse a
start, and the listening socket), worker.py (one serving process) and
supervisor.py (the parent of several); this one puts them in order.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import sys
import tempfile

from placement_lite.app import build_wsgi
from placement_lite.config import Settings
from placement_lite.db import migrate
from placement_lite.db.engine import Database, from_settings
from placement_lite.ledger import standards
from placement_lite.startup import (
    StartupError, check_database_directory, check_noauth2_address, database_error,
    first_line, host_addresses, is_loopback, listen, open_socket, raise_file_limit)
from placement_lite.supervisor import Supervisor
from placement_lite.worker import run_worker

LOG = logging.getLogger(__name__)

# cli.py reports a database that fails its commands as serve does, by
# these names.
_database_error, _first_line = database_error, first_line

__all__ = ["StartupError", "Supervisor", "build_wsgi", "open_socket",
           "prepare_database", "run_worker", "serve", "start"]


def prepare_database(settings: Settings) -> Database:
    """Create or upgrade the schema and sync the standard names."""
    db = from_settings(settings)
    migrate.upgrade(db.engine)
    standards.sync(db)
    return db


def _where(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def _in_memory(url: str) -> bool:
    from sqlalchemy.engine import make_url
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def _open_database(settings: Settings) -> Database:
    from sqlalchemy.exc import SQLAlchemyError
    try:
        return prepare_database(settings)
    except (SQLAlchemyError, ImportError, OSError, migrate.ForeignSchema) as exc:
        LOG.debug("database start-up failed", exc_info=True)
        raise database_error(settings, exc) from None


def _keystone_missing(settings: Settings, exc: ImportError) -> StartupError:
    return StartupError(
        f"{settings.describe('auth')}: keystonemiddleware is not installed (no "
        f"module {exc.name!r}); install the keystone extra (pip install "
        "'placement-lite[keystone]') or use --auth noauth2", 2)


def check_keystone(settings: Settings) -> None:
    if settings.auth != "keystone":
        return
    from placement_lite.api import keystone
    try:
        keystone.require()
    except ImportError as exc:
        raise _keystone_missing(settings, exc) from None
    problem = keystone.memcache_problem(settings)
    if problem:
        raise StartupError(problem, 2)


def _build_app(settings: Settings, db: Database, warm: bool = False):
    from placement_lite.api.policy import PolicyError
    from placement_lite.quota.enforce import EnforcementMismatch

    try:
        return build_wsgi(settings, db, warm=warm)
    except EnforcementMismatch as exc:
        raise StartupError(str(exc), 2) from None
    except PolicyError as exc:
        # The app's one Enforcer refused the file (it is built once).
        raise StartupError(
            f"{settings.describe('policy_file')}: not a usable policy file "
            f"({first_line(exc)}); it must map rule names to check "
            "strings, in YAML or JSON", 2) from None
    except ImportError as exc:
        if settings.auth == "keystone":
            raise _keystone_missing(settings, exc) from None
        raise


def _auth_summary(settings: Settings, sock: socket.socket) -> str:
    if settings.auth == "keystone":
        return "keystone"
    if not is_loopback(sock.getsockname()[0]):
        return "noauth2 (INSECURE: any caller with a token is trusted, on an open address)"
    return "noauth2 (development: callers are trusted; loopback only)"


def start(settings: Settings):
    """Everything that can fail before serving: settings the process needs
    to check against the machine, the database, the socket, the app.
    Returns (db, app, sock, enforcement in force); raises StartupError."""
    from placement_lite.quota import enforce

    if settings.workers > 1 and _in_memory(settings.db):
        # Each worker would get a database of its own.
        raise StartupError(
            f"{settings.describe('db')}: an in-memory SQLite database cannot be "
            "shared by several workers; use a file (sqlite:////path) or "
            "--workers 1", 2)
    check_database_directory(settings)
    check_keystone(settings)
    few_files = raise_file_limit(settings)
    if few_files:
        LOG.warning("%s", few_files)
    check_noauth2_address(settings, host_addresses(settings))
    db = _open_database(settings)
    sock = None
    try:
        # Bound before the app is built, so a taken port is reported before
        # auth middleware has logged anything of its own.
        sock = listen(settings)
        # With workers, this app only proves the settings build one (each
        # worker builds its own after the fork); without, it serves. (A WSGI
        # server's app is built without: deploy.py, where it may be forked.)
        app = _build_app(settings, db, warm=settings.workers <= 1)
        with db.read() as conn:
            enforcement = enforce.current(conn, settings)
        return db, app, sock, enforcement
    except BaseException:
        if sock is not None:
            sock.close()
        db.dispose()
        raise


@contextlib.contextmanager
def _throwaway(settings: Settings):
    """`sqlite://` names SQLite's in-memory database, which lives in one
    connection: each of a worker's threads would open one of its own, with
    no tables. Serve a file in a temporary directory instead, which every
    thread opens alike, and remove it when the server stops."""
    if not _in_memory(settings.db) or settings.workers > 1:
        yield settings
        return
    with tempfile.TemporaryDirectory(prefix="placement-lite-") as where:
        path = os.path.join(where, "placement.sqlite")
        LOG.warning("in-memory database: served from the temporary file %s, "
                    "removed when the server stops", path)
        yield dataclasses.replace(settings, db=f"sqlite:///{path}")


def serve(settings: Settings) -> int:
    with _throwaway(settings) as settings:
        return _serve(settings)


def _serve(settings: Settings) -> int:
    try:
        db, app, sock, enforcement = start(settings)
    except StartupError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback
        LOG.debug("start-up failed", exc_info=True)
        raise StartupError(f"unexpected error: {type(exc).__name__}: "
                           f"{first_line(exc)}") from None
    where = db.engine.url.render_as_string(hide_password=True)
    workers = max(1, settings.workers)
    auth = _auth_summary(settings, sock)
    if "INSECURE" in auth:
        LOG.warning("noauth2 on an open address: anyone who can reach %s "
                    "can act as admin", _where(sock))
    print(f"placement-lite listening on {_where(sock)} "
          f"(database: {where}; {workers} worker{'s' if workers > 1 else ''}, "
          f"{settings.threads} threads each; auth: {auth}; "
          f"quota enforcement: {enforcement.summary()})",
          file=sys.stderr, flush=True)
    try:
        if workers == 1:
            run_worker(settings, sock, db, app=app)
            return 0
        # Pooled connections must not be shared with the forked workers;
        # each builds its own app (the one above only proved it builds).
        del app
        db.dispose()
        return Supervisor(settings, sock).run()
    finally:
        sock.close()
        db.dispose()
