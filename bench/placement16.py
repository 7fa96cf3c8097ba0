"""OpenStack Placement 16 as a side of `python -m bench full --placement`.

Placement's own WSGI app (noauth2, built with oslo.config as
tests/placement_reference.py does) served by waitress: `--workers`
processes of `--threads` threads each, all accepting on one listening
socket bound before they are forked, as placement-lite serve's workers
do (so 2 x 4 against 2 x 4). Each process builds its app, engine and
pool after the fork.

Its database is a fresh one on the same backend. Placement creates its
own schema (sync_on_startup) and syncs the standard traits and resource
classes itself, then this module bulk-inserts the cloud of
bench/worlds.py's Cloud, the same definition placement-lite's loader
reads: the same providers (uuid5 names), inventories, traits,
aggregates, projects, users, consumers and amounts, written in
Placement's schema with the ids Placement gave its traits and resource
classes (a standard class's id is its index in os_resource_classes).
Allocations are keyed by consumer uuid there, as Placement keys them.
Statistics are refreshed afterwards as for placement-lite's side
(`ANALYZE TABLE` / `VACUUM ANALYZE`).

    python -m bench.placement16 load URL COUNT idle|full [sharing]
    python -m bench.placement16 serve URL PORT WORKERS THREADS

Run in processes of their own: Placement keeps its configuration, engine
and caches in process-wide state.
"""
from __future__ import annotations

import itertools
import os
import signal
import socket
import sys
import time

from bench.serving import ServerProcess

BATCH = 2000


def build(url: str, sync: bool):
    """Placement's WSGI app over `url`. Building it syncs the standard
    traits and resource classes into the database (and, with `sync`,
    first creates or upgrades the schema)."""
    from oslo_config import cfg
    from placement import conf as placement_conf
    from placement import db_api, deploy

    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.set_default("connection", url, group="placement_database")
    conf([], default_config_files=[])
    conf.set_override("sync_on_startup", sync, group="placement_database")
    conf.set_override("auth_strategy", "noauth2", group="api")
    db_api.configure(conf)
    return deploy.loadapp(conf)


# ----------------------------------------------------------------- load
def load(url: str, count: int, in_use: bool, sharing: bool = False) -> None:
    """The Cloud (bench/worlds.py) in Placement's schema at `url`."""
    from placement.db.sqlalchemy import models as m
    from sqlalchemy import create_engine, func, insert, select

    from bench.worlds import Cloud, uid

    build(url, sync=True)
    cloud = Cloud(count, in_use, sharing)
    engine = create_engine(url)
    with engine.begin() as conn:
        rc = dict(conn.execute(select(m.ResourceClass.name, m.ResourceClass.id)).all())
        traits = dict(conn.execute(select(m.Trait.name, m.Trait.id)).all())
        aggs = {a: conn.execute(insert(m.PlacementAggregate.__table__).values(
            uuid=a)).inserted_primary_key[0] for a in cloud.aggregates}
        first = (conn.execute(select(func.max(m.ResourceProvider.id))).scalar() or 0) + 1
        providers = enumerate(cloud.providers(), first)
        while part := list(itertools.islice(providers, BATCH)):
            conn.execute(insert(m.ResourceProvider.__table__), [
                dict(id=rp, uuid=uid(name), name=name, generation=1,
                     root_provider_id=rp, parent_provider_id=None)
                for rp, (name, _i, _t, _a) in part])
            conn.execute(insert(m.Inventory.__table__), [
                dict(resource_provider_id=rp, resource_class_id=rc[name], total=total,
                     reserved=0, min_unit=1, max_unit=total, step_size=1,
                     allocation_ratio=1.0)
                for rp, (_n, inventory, _t, _a) in part
                for name, total in inventory.items()])
            conn.execute(insert(m.ResourceProviderTrait.__table__), [
                dict(resource_provider_id=rp, trait_id=traits[name])
                for rp, (_n, _i, names, _a) in part for name in names])
            conn.execute(insert(m.ResourceProviderAggregate.__table__), [
                dict(resource_provider_id=rp, aggregate_id=aggs[a])
                for rp, (_n, _i, _t, member_of) in part for a in member_of])
        if in_use:
            _hold(conn, m, cloud, first, rc)
    _after_load(engine)
    engine.dispose()


def _hold(conn, m, cloud, first: int, rc: dict) -> None:
    """The Cloud's consumers and their allocations; provider index i is
    the provider with id first + i."""
    from sqlalchemy import insert

    def external(table, names):
        return {name: conn.execute(insert(table).values(
            external_id=name)).inserted_primary_key[0] for name in names}
    projects = external(m.Project.__table__, cloud.projects)
    users = external(m.User.__table__, cloud.users)
    consumers = cloud.consumers()
    while part := list(itertools.islice(consumers, BATCH)):
        conn.execute(insert(m.Consumer.__table__), [
            dict(uuid=uuid, project_id=projects[project], user_id=users[user],
                 generation=1) for uuid, project, user, _a in part])
        conn.execute(insert(m.Allocation.__table__), [
            dict(resource_provider_id=first + i, consumer_id=uuid,
                 resource_class_id=rc[name], used=used)
            for uuid, _p, _u, allocations in part for i, name, used in allocations])


def _after_load(engine) -> None:
    """Explicit provider ids do not move PostgreSQL's sequence (Placement
    creates no provider here, but keep it right); then fresh statistics,
    as placement-lite's side gets them (bench/worlds.py)."""
    backend = engine.dialect.name
    if backend == "postgresql":
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('resource_providers', 'id'), "
                "(SELECT coalesce(max(id), 0) + 1 FROM resource_providers), false)")
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    elif backend == "mysql":
        with engine.connect() as conn:
            for table in ("resource_providers", "inventories", "consumers", "allocations",
                          "resource_provider_traits", "resource_provider_aggregates",
                          "projects", "users"):
                conn.exec_driver_sql(f"ANALYZE TABLE {table}").all()


# ---------------------------------------------------------------- serve
def serve(url: str, port: int, workers: int, threads: int) -> None:
    """Placement on 127.0.0.1:`port` until SIGTERM: `workers` forked
    processes (or this one, for 1) on one shared listening socket."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    # Imported before the fork so the workers share the modules' pages;
    # configured after it, each worker with its own engine.
    import placement.deploy  # noqa: F401
    import waitress  # noqa: F401
    if workers == 1:
        _worker(url, sock, threads)
        return
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _die_with_parent()
                _worker(url, sock, threads)
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop and all(_alive(pid) for pid in children):
        time.sleep(0.2)
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _alive(pid: int) -> bool:
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


def _die_with_parent() -> None:
    """Linux: SIGTERM to this worker if the parent dies, so no orphan
    keeps the port."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker(url: str, sock, threads: int) -> None:
    import waitress
    app = build(url, sync=False)
    server = waitress.create_server(app, sockets=[sock], threads=threads,
                                    ident="placement")
    server.run()


# ----------------------------------------------------------------- side
class SameWorld:
    """What a Placement side's candidates answers are checked against
    (bench/complete.py's Expected): Placement cannot be its own
    reference, so the count is placement-lite's reference server's (every
    fact read from its database) over placement-lite's database of the
    same world (the same Cloud, loaded by its own loader), which must
    also be the world's definition. Only for queries of what no workload
    writes to (pool 0): the two databases see different writes."""

    source = ("placement-lite's reference server over the same world in "
              "placement-lite's database")

    def __init__(self, reference):
        self.reference = reference

    def count(self, path: str) -> int:
        return self.reference.count(path)


class PlacementSide(ServerProcess):
    """A bench/full.py side: Placement over a fresh database (`db`: a
    backend as matrix.Side takes) holding the cloud of `count` nodes.
    `reference` is what its candidates answers are checked against; the
    caller gives it (bench/full.py: placement-lite's reference server over
    the same world)."""

    code = "placement"

    def __init__(self, variant, db, workdir, port, workers, threads, count,
                 sharing=False):
        from bench import matrix
        self.label, self.variant = f"placement-{variant}", variant
        self.reference = None
        self.url = matrix._fresh_db(db, workdir, self.label)
        # Placement's PostgreSQL driver is psycopg2 (with psycopg 3 its
        # claims fail: "'Cursor' object has no attribute 'lastrowid'").
        url = self.url.replace("postgresql://", "postgresql+psycopg2://", 1)
        self.load_seconds = {}
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        log = os.path.join(workdir, f"{self.label}-{count}.log")
        try:
            began = time.monotonic()
            with open(log, "ab") as out:
                import subprocess
                subprocess.run([sys.executable, "-m", "bench.placement16", "load", url,
                                str(count), variant] + (["sharing"] if sharing else []),
                               check=True, cwd=here,
                               stdout=out, stderr=subprocess.STDOUT)
            self.load_seconds[f"cloud-{variant}_{count}"] = round(
                time.monotonic() - began, 1)
            super().__init__(
                self.url, port, workers, cwd=here, health="/", log=log,
                name=f"{self.label}: Placement", command=[
                    sys.executable, "-m", "bench.placement16", "serve", url,
                    str(port), str(workers), str(threads)])
        except BaseException:
            matrix._drop_db(self.url)
            raise
        time.sleep(1.0)  # let every worker come up

    def stop(self):
        from bench import matrix
        super().stop()
        matrix._drop_db(self.url)


def main(argv) -> None:
    if argv[0] == "load":
        load(argv[1], int(argv[2]), {"full": True, "idle": False}[argv[3]],
             argv[4:] == ["sharing"])
    elif argv[0] == "serve":
        serve(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
