"""What keeps the service from starting, said in one line that names the
setting as the operator gave it and the fix: a database that cannot be
used, an address that cannot be listened on, noauth2 on an open address;
and the listening socket itself, bound once in the parent before any
worker is forked."""
from __future__ import annotations

import os
import socket
from typing import Optional

from placement_lite.config import Settings


class StartupError(Exception):
    """The service cannot start; the message names the setting and the fix.
    `status` is the exit status: 2 for a setting to correct, 1 when the
    machine or the database refuses (port taken, server down)."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def log_start_notes(settings: Settings, log) -> None:
    """The settings' deprecations, and what start-up has to say about
    Placement's configuration (each option accepted without effect, or
    not supported, in a line of its own), on the logger `log`."""
    for note in settings.deprecations():
        log.warning("%s", note)
    deployment = settings.deployment
    if deployment is None:
        return
    if deployment.files:
        log.info("read Placement's configuration from %s; `placement-lite config "
                 "show` says where each setting came from", ", ".join(deployment.files))
    for level, text in deployment.notes:
        log.log(level, "%s", text)


def first_line(exc: BaseException, limit: int = 200) -> str:
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


def database_error(settings: Settings, exc: BaseException) -> StartupError:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    from placement_lite.db.migrate import ForeignSchema

    given = settings.describe("db")
    url = make_url(settings.db)
    backend = url.get_backend_name()
    if isinstance(exc, ForeignSchema):
        return StartupError(
            f"{given}: this database holds another schema (alembic revision "
            f"{exc.revision}), most likely OpenStack Placement's own; placement-lite "
            "keeps its own schema: copy Placement's database into a new one with "
            "`placement-lite db import --from URL --db NEW_URL` and name the new "
            "one here", 2)
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
                            f"({first_line(exc)})", 2)
    if backend == "sqlite" and isinstance(exc, (OSError, DBAPIError)):
        path = url.database or ":memory:"
        return StartupError(
            f"{given}: cannot create or write the SQLite database {path} "
            f"({first_line(exc)}); choose a path in a directory this user "
            "can write, e.g. --db sqlite:////var/lib/placement-lite/placement.sqlite")
    if isinstance(exc, DBAPIError):
        return StartupError(
            f"{given}: cannot use the database ({first_line(exc)}); check "
            "that the server is running and reachable and that the URL's "
            "host, port, user, password and database name are right")
    return StartupError(f"{given}: the database failed at start-up "
                        f"({type(exc).__name__}: {first_line(exc)})")


def sqlite_file(url: str) -> Optional[str]:
    """The file an SQLite URL names; None for other databases, in-memory
    ones and SQLite's URI filenames (whose path we do not parse)."""
    from sqlalchemy.engine import make_url
    parsed = make_url(url)
    name = parsed.database
    if (parsed.get_backend_name() != "sqlite" or not name or name == ":memory:"
            or name.startswith("file:")):
        return None
    return os.path.abspath(name)


def check_database_directory(settings: Settings) -> None:
    """A command that creates its SQLite file refuses one named by the
    operator in a directory that does not exist: a typo in the path would
    otherwise become new directories and an empty database, served as if
    it were the real one. Only the default file's directory (under the
    user's data directory, which a fresh account does not have yet) is
    created, by db.engine when it opens it."""
    path = sqlite_file(settings.db)
    if path is None or not settings.explicit("db"):
        return
    directory = os.path.dirname(path)
    if os.path.isdir(directory):
        return
    given = settings.describe("db")
    if os.path.exists(directory):
        raise StartupError(f"{given}: {directory} is not a directory; choose a "
                           "path in a directory", 2)
    raise StartupError(f"{given}: the directory {directory} does not exist; "
                       "create it first, or correct the path", 2)


def require_database_file(settings: Settings) -> None:
    """The read-only commands never create a database: opening a missing
    SQLite file would, and then report on an empty one."""
    path = sqlite_file(settings.db)
    if path is not None and not os.path.exists(path):
        raise StartupError(
            f"{settings.describe('db')}: no database at {path}; create it with "
            "`placement-lite db upgrade`, or give the path of an existing one", 1)


def is_loopback(address: str) -> bool:
    import ipaddress
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def host_addresses(settings: Settings) -> list[str]:
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


def check_noauth2_address(settings: Settings, addresses: list[str]) -> None:
    if settings.auth != "noauth2" or settings.insecure_noauth2_on_open_address:
        return
    open_ = [a for a in addresses if not is_loopback(a)]
    if open_:
        raise StartupError(
            f"{settings.describe('host')} with {settings.describe('auth')}: "
            "noauth2 trusts any caller who sends a token (the token `admin` "
            f"makes an admin), and {open_[0]} is reachable from other machines; "
            "serve on 127.0.0.1 or ::1, use --auth keystone, or accept the "
            "risk with --insecure-noauth2-on-open-address", 2)


def _descriptors_beside_clients(settings: Settings) -> int:
    # The database pool and its overflow, log and SQLite files, waitress'
    # wake-up pipe, answers spilled to temporary files, the listener.
    return 2 * settings.db_pool_size + 64


def raise_file_limit(settings: Settings) -> Optional[str]:
    """Raise this process's soft limit on open files (which forked workers
    inherit) to its hard limit when connection_limit needs more than the
    soft one allows (1024 is a common soft limit). Returns a warning for
    the log when even the hard limit is too low."""
    try:
        import resource
    except ImportError:  # not a POSIX system: its limits are its own
        return None
    needed = settings.connection_limit + _descriptors_beside_clients(settings)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (needed if hard == resource.RLIM_INFINITY else hard, hard))
    except (ValueError, OSError):
        pass
    slots = connection_slots(settings)
    if slots >= settings.connection_limit:
        return None
    return (f"{settings.describe('connection_limit')} needs about {needed} open "
            f"files per worker and this process may open "
            f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]} (hard limit {hard}): "
            f"each worker holds at most {slots} connections; raise the limit "
            "(ulimit -n, systemd's LimitNOFILE=) or lower connection_limit")


def connection_slots(settings: Settings) -> int:
    """The client connections a worker may hold: connection_limit, or fewer
    when the open-files limit would be reached first (accept() would then
    fail on every turn of the loop instead of leaving clients queued)."""
    try:
        import resource
    except ImportError:
        return settings.connection_limit
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return settings.connection_limit
    spare = soft - _descriptors_beside_clients(settings)
    return max(1, min(settings.connection_limit, spare))


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


def listen(settings: Settings) -> socket.socket:
    import errno
    try:
        return open_socket(settings.host, settings.port, settings.backlog)
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
