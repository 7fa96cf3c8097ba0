"""OpenStack Placement 16.0's own WSGI app on a SQLite file, served on a
free loopback port, in a process of its own.

    python -m tests.placement_reference /path/to/placement.sqlite [placement.conf]

prints `listening on PORT` once it answers. Without a placement.conf it
runs with noauth2; with one, the file's options apply as Placement reads
them in production (`[api] auth_strategy`, `[keystone_authtoken]`,
`[oslo_policy]`...), the database URL aside. A process of its own because
Placement keeps its database engine, configuration and policy in
process-wide state that other tests (its own gabbi fixtures) use too.
"""
from __future__ import annotations

import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _Quiet(WSGIRequestHandler):
    def log_message(self, *_args):  # one line per request is noise here
        pass


class _Threaded(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def build(url: str, config_file: str | None = None):
    from oslo_config import cfg
    from placement import conf as placement_conf
    from placement import db_api, deploy

    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.set_default("connection", url, group="placement_database")
    conf(["--config-file", config_file] if config_file else [],
         default_config_files=[])
    conf.set_override("sync_on_startup", True, group="placement_database")
    if not config_file:
        conf.set_override("auth_strategy", "noauth2", group="api")
    db_api.configure(conf)
    return deploy.loadapp(conf)


def main(path: str, config_file: str | None = None) -> None:
    app = build(f"sqlite:///{path}", config_file)
    server = make_server("127.0.0.1", 0, app, server_class=_Threaded,
                         handler_class=_Quiet)
    print(f"listening on {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:3])
