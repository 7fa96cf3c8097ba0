"""Run the WSGI app under waitress: one process, or N supervised workers.

The parent migrates the schema, binds the listening socket, then forks the
workers; every worker serves the same inherited socket (the kernel hands
each new connection to one of them) and builds its own app and database
pool after the fork, so no connection or lock crosses a process boundary
and any worker can answer any request. The parent only supervises: a
worker that dies is replaced; SIGTERM or SIGINT makes every worker stop
accepting, finish the requests in flight and exit.
"""
from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import sys
import time
from typing import Callable, Optional

from placement_lite.app import build_wsgi
from placement_lite.config import Settings
from placement_lite.db import migrate
from placement_lite.db.engine import Database
from placement_lite.ledger import standards

LOG = logging.getLogger(__name__)

# A worker that dies sooner than this after it started counts as a crash
# loop: the parent backs off before the next start instead of spinning.
_QUICK_DEATH_SECONDS = 2.0
_MAX_BACKOFF_SECONDS = 30.0


def prepare_database(settings: Settings) -> Database:
    """Create or upgrade the schema and sync the standard names."""
    db = Database(settings.db, pool_size=settings.db_pool_size,
                  retries=settings.db_retries)
    migrate.upgrade(db.engine)
    standards.sync(db)
    return db


def open_socket(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """Bind and listen once, in the parent, so every worker shares it."""
    family, kind, proto, _name, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(addr)
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def _where(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def _drain(server, timeout: float) -> None:
    """Stop accepting, let requests in flight finish, close idle keep-alives."""
    from waitress import wasyncore

    server.accepting = False
    server.del_channel()
    # Close this process's handle on the listening socket now, not at exit:
    # once no process holds it (the supervisor shuts it down for all of
    # them), a new connection is refused at once instead of waiting in the
    # kernel's queue for a process that will never accept it.
    try:
        server.socket.close()
    except OSError:
        pass
    deadline = time.monotonic() + timeout
    while server.active_channels and time.monotonic() < deadline:
        for channel in list(server.active_channels.values()):
            if (not channel.requests and channel.request is None
                    and not channel.total_outbufs_len):
                channel.will_close = True
        wasyncore.loop(timeout=0.05, map=server._map, count=1)
    if server.active_channels:
        LOG.warning("%d connection(s) still open after %.0fs; closing them",
                    len(server.active_channels), timeout)
    server.task_dispatcher.shutdown(cancel_pending=True,
                                    timeout=max(0.0, deadline - time.monotonic()))


def run_worker(settings: Settings, sock: socket.socket, db: Optional[Database] = None,
               worker: Optional[int] = None, app=None) -> None:
    """Serve on `sock` until SIGTERM/SIGINT, then drain."""
    import waitress
    from waitress import wasyncore

    app = app or build_wsgi(settings, db, worker=worker, warm=True)
    # What start-up built lives as long as the process: keep it out of the
    # collector's full scans, which large answers (thousands of candidates)
    # would otherwise trigger over and over (~25% of their CPU).
    gc.freeze()
    server = waitress.create_server(
        app, sockets=[sock], threads=settings.threads, ident="placement-lite",
        # Bodies a little over the API's limit still get the API's own 413
        # (InputLimitsMiddleware); far larger ones are refused by waitress
        # before they are buffered.
        max_request_body_size=max(4 * settings.max_body_bytes, 8 * 1024 * 1024))
    stop: list[int] = []

    def on_signal(signum, _frame):
        # Only note it and wake the loop: raising here could surface inside
        # a channel's handler, which would swallow it and drop that client.
        stop.append(signum)
        server.pull_trigger()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    accept = server.handle_accept

    def handle_accept():
        # Stopping: the supervisor may have shut the shared listener down
        # (accept() would fail); what is queued there is refused anyway.
        if not stop:
            accept()
    server.handle_accept = handle_accept
    while not stop:
        wasyncore.loop(timeout=server.adj.asyncore_loop_timeout,
                       map=server._map, count=1)
    LOG.info("stopping: finishing requests in flight")
    _drain(server, settings.shutdown_timeout)


class Supervisor:
    """Forks the workers, replaces the ones that die, stops them all."""

    def __init__(self, settings: Settings, sock: socket.socket,
                 target: Callable[[Settings, socket.socket, int], None] = None):
        self.settings = settings
        self.sock = sock
        self.target = target or (lambda s, k, i: run_worker(s, k, worker=i))
        self.children: dict[int, tuple[int, float]] = {}  # pid -> (index, started)
        self.crashes = [0] * settings.workers
        self.stopping = False

    def _spawn(self, index: int) -> int:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _stop_with_parent(parent)
                self.target(self.settings, self.sock, index)
            except BaseException:  # noqa: BLE001 - report, then exit non-zero
                LOG.exception("worker %d failed", index)
                code = 1
            finally:
                logging.shutdown()
                # Never return into the parent's code (or its atexit hooks).
                os._exit(code)
        self.children[pid] = (index, time.monotonic())
        LOG.info("worker %d started (pid %d)", index, pid)
        return pid

    def _on_signal(self, signum, _frame):
        self.stopping = True

    def _reap(self) -> list[tuple[int, int, float]]:
        dead = []
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            index, started = self.children.pop(pid, (None, 0.0))
            if index is None:
                continue
            (LOG.info if self.stopping else LOG.warning)(
                "worker %d (pid %d) exited with %s", index, pid, _describe(status))
            dead.append((index, status, time.monotonic() - started))
        return dead

    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal)
                    for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for index in range(self.settings.workers):
                self._spawn(index)
            restart_at: dict[int, float] = {}
            while not self.stopping:
                for index, _status, lived in self._reap():
                    if lived < _QUICK_DEATH_SECONDS:
                        self.crashes[index] += 1
                    else:
                        self.crashes[index] = 0
                    delay = min(_MAX_BACKOFF_SECONDS,
                                0.1 * (2 ** self.crashes[index]) - 0.1)
                    restart_at[index] = time.monotonic() + delay
                now = time.monotonic()
                for index, when in list(restart_at.items()):
                    if when <= now and not self.stopping:
                        del restart_at[index]
                        self._spawn(index)
                time.sleep(0.1)
            self._stop_all()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 0

    def _refuse_new_connections(self) -> None:
        """Stop the shared listening socket for every process at once:
        shutdown() acts on the socket, not on this process's handle, so new
        connections are refused while the workers finish what they hold."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stop_all(self) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        # After the signals: a worker handles its SIGTERM before its next
        # look at the socket, so none tries to accept on a dead listener.
        self._refuse_new_connections()
        deadline = time.monotonic() + self.settings.shutdown_timeout + 5
        while self.children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for pid in list(self.children):
            LOG.warning("worker pid %d did not stop in time; killing it", pid)
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.children.pop(pid, None)


def _stop_with_parent(parent: int) -> None:
    """Linux: have the kernel send SIGTERM if the supervisor dies, so a
    killed parent does not leave workers serving on unsupervised."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _in_memory(url: str) -> bool:
    from sqlalchemy.engine import make_url
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"status {os.WEXITSTATUS(status)}"


class StartupError(Exception):
    """The service cannot start; the message names the setting and the fix.
    `status` is the exit status: 2 for a setting to correct, 1 when the
    machine or the database refuses (port taken, server down)."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def _first_line(exc: BaseException, limit: int = 200) -> str:
    orig = getattr(exc, "orig", None) or exc
    args = getattr(orig, "args", ())
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
        # MySQL drivers: (code, message).
        orig = f"{args[1]} (error {args[0]})"
    text = str(orig).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[:limit - 3] + "..."


# Importable module -> what to install for it.
_DRIVERS = {"MySQLdb": "mysqlclient", "pymysql": "PyMySQL",
            "psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]",
            "asyncpg": "asyncpg", "mysql": "mysql-connector-python"}


def _database_error(settings: Settings, exc: BaseException) -> StartupError:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    given = settings.describe("db")
    url = make_url(settings.db)
    backend = url.get_backend_name()
    if isinstance(exc, NoSuchModuleError):
        return StartupError(
            f"{given}: no database backend named {url.drivername!r}; use "
            "sqlite:///PATH, mysql+pymysql://USER:PASSWORD@HOST/DB or "
            "postgresql://USER:PASSWORD@HOST/DB", 2)
    if isinstance(exc, ImportError):
        module = exc.name or "the driver"
        package = _DRIVERS.get((exc.name or "").split(".")[0], exc.name)
        hint = (" or name an installed driver, e.g. mysql+pymysql://..."
                if backend == "mysql" else "")
        return StartupError(
            f"{given}: its database driver is not installed (no module "
            f"{module!r}); install it (pip install {package}){hint}", 2)
    if isinstance(exc, ArgumentError):
        return StartupError(f"{given}: not a usable database URL "
                            f"({_first_line(exc)})", 2)
    if backend == "sqlite" and isinstance(exc, (OSError, DBAPIError)):
        path = url.database or ":memory:"
        return StartupError(
            f"{given}: cannot create or write the SQLite database {path} "
            f"({_first_line(exc)}); choose a path in a directory this user "
            "can write, e.g. --db sqlite:////var/lib/placement-lite/placement.sqlite")
    if isinstance(exc, DBAPIError):
        return StartupError(
            f"{given}: cannot use the database ({_first_line(exc)}); check "
            "that the server is running and reachable and that the URL's "
            "host, port, user, password and database name are right")
    return StartupError(f"{given}: the database failed at start-up "
                        f"({type(exc).__name__}: {_first_line(exc)})")


def _open_database(settings: Settings) -> Database:
    from sqlalchemy.exc import SQLAlchemyError
    try:
        return prepare_database(settings)
    except (SQLAlchemyError, ImportError, OSError) as exc:
        LOG.debug("database start-up failed", exc_info=True)
        raise _database_error(settings, exc) from None


def _loopback(address: str) -> bool:
    import ipaddress
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def _host_addresses(settings: Settings) -> list[str]:
    """The addresses --host resolves to, or a StartupError saying why not."""
    try:
        infos = socket.getaddrinfo(settings.host, settings.port,
                                   type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(
            f"{settings.describe('host')}: cannot listen there ({exc.strerror}); "
            "give an IP address of this machine (127.0.0.1, ::1, 0.0.0.0) "
            "or a name that resolves to one", 2) from None
    return [info[4][0] for info in infos]


def _check_auth(settings: Settings, addresses: list[str]) -> None:
    if settings.auth != "noauth2" or settings.insecure_noauth2_on_open_address:
        return
    open_ = [a for a in addresses if not _loopback(a)]
    if open_:
        raise StartupError(
            f"{settings.describe('host')} with {settings.describe('auth')}: "
            "noauth2 trusts any caller who sends a token (the token `admin` "
            f"makes an admin), and {open_[0]} is reachable from other machines; "
            "serve on 127.0.0.1 or ::1, use --auth keystone, or accept the "
            "risk with --insecure-noauth2-on-open-address", 2)


def _listen(settings: Settings) -> socket.socket:
    import errno
    try:
        return open_socket(settings.host, settings.port)
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(
                f"{settings.describe('port')}: {where} is already in use by "
                "another process; stop it or choose another port", 1) from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise StartupError(
                f"{settings.describe('port')}: not allowed to listen on {where} "
                "(ports below 1024 need privileges); choose a port above 1023",
                1) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise StartupError(
                f"{settings.describe('host')}: {settings.host} is not an "
                "address of this machine; give one of its addresses, or "
                "0.0.0.0 for all of them", 2) from None
        raise StartupError(f"{settings.describe('host')}: cannot listen on "
                           f"{where} ({exc.strerror or exc})", 1) from None


def _build_app(settings: Settings, db: Database, warm: bool = False):
    from placement_lite.api.policy import Policy
    from placement_lite.quota.enforce import EnforcementMismatch

    if settings.policy_file:
        try:
            Policy.from_settings(settings.policy_profile, settings.policy_file)
        except Exception as exc:  # noqa: BLE001 - any fault in the file
            raise StartupError(
                f"{settings.describe('policy_file')}: not a usable policy file "
                f"({_first_line(exc)}); it must map rule names to check "
                "strings, in YAML or JSON", 2) from None
    try:
        return build_wsgi(settings, db, warm=warm)
    except EnforcementMismatch as exc:
        raise StartupError(str(exc), 2) from None
    except ImportError as exc:
        if settings.auth == "keystone":
            raise StartupError(
                f"{settings.describe('auth')}: keystone auth needs "
                f"keystonemiddleware (no module {exc.name!r}); install it "
                "(pip install keystonemiddleware) or use --auth noauth2",
                2) from None
        raise


def _auth_summary(settings: Settings, sock: socket.socket) -> str:
    if settings.auth == "keystone":
        return "keystone"
    if not _loopback(sock.getsockname()[0]):
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
    _check_auth(settings, _host_addresses(settings))
    db = _open_database(settings)
    sock = None
    try:
        # Bound before the app is built, so a taken port is reported before
        # auth middleware has logged anything of its own.
        sock = _listen(settings)
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


def serve(settings: Settings) -> int:
    try:
        db, app, sock, enforcement = start(settings)
    except StartupError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback
        LOG.debug("start-up failed", exc_info=True)
        raise StartupError(f"unexpected error: {type(exc).__name__}: "
                           f"{_first_line(exc)}") from None
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
