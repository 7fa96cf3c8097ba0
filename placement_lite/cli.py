"""The `placement-lite` command: serve, db upgrade, db version."""
from __future__ import annotations

import argparse
import sys

from placement_lite import logs
from placement_lite.config import load_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="placement-lite")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--config-file", help="YAML settings file")
        p.add_argument("--db", help="SQLAlchemy database URL "
                       "(default: SQLite under the user's data directory)")

    serve = sub.add_parser("serve", help="run the API service")
    common(serve)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--auth", choices=["noauth2", "keystone"])
    serve.add_argument("--workers", type=int)
    serve.add_argument("--threads", type=int)
    serve.add_argument("--policy-profile", choices=["legacy", "secure-rbac", "open"])
    serve.add_argument("--policy-file")
    serve.add_argument("--cors-allowed-origin", action="append", metavar="ORIGIN",
                       help="allow cross-origin requests from ORIGIN (repeatable)")
    serve.add_argument("--cors-allow-headers", metavar="H,...",
                       help="request headers a cross-origin caller may send")
    serve.add_argument("--log-format", choices=["text", "json"])
    serve.add_argument("--log-level")
    serve.add_argument("--keystone-config-file",
                       help="ini file with a [keystone_authtoken] section")
    serve.add_argument("--keystone-authtoken", action="append", metavar="KEY=VALUE",
                       help="one keystonemiddleware auth_token option (repeatable)")
    serve.add_argument("--noauth2-default-token", metavar="USER[:PROJECT]",
                       help="noauth2: the token assumed when a request has none "
                       "(local testing only)")
    serve.add_argument("--metrics", action=argparse.BooleanOptionalAction,
                       default=None, dest="metrics_enabled",
                       help="serve Prometheus metrics at /metrics (unauthenticated)")
    serve.add_argument("--max-body-bytes", type=int)
    serve.add_argument("--max-query-params", type=int)
    serve.add_argument("--db-pool-size", type=int)
    serve.add_argument("--db-retries", type=int)
    serve.add_argument("--shutdown-timeout", type=float,
                       help="seconds a stopping worker waits for requests in flight")
    serve.add_argument("--max-allocation-candidates", type=int)
    serve.add_argument("--randomize-allocation-candidates",
                       action=argparse.BooleanOptionalAction, default=None)
    serve.add_argument("--quota-enforce", action=argparse.BooleanOptionalAction,
                       default=None)
    serve.add_argument("--quota-model", choices=["flat", "strict_two_level"])
    serve.add_argument("--quota-unregistered-is-zero",
                       action=argparse.BooleanOptionalAction, default=None)

    db = sub.add_parser("db", help="schema management")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    for name, text in (("upgrade", "create or upgrade the schema"),
                       ("version", "print the schema revision")):
        common(db_sub.add_parser(name, help=text))
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    cli = {k: v for k, v in vars(args).items()
           if k not in ("command", "db_command")}
    if cli.get("keystone_authtoken"):
        pairs = [item.partition("=") for item in cli["keystone_authtoken"]]
        bad = [key for key, sep, _ in pairs if not sep or not key]
        if bad:
            print(f"placement-lite: --keystone-authtoken wants KEY=VALUE, not {bad[0]!r}",
                  file=sys.stderr)
            return 2
        cli["keystone_authtoken"] = {key.strip(): value for key, _, value in pairs}
    try:
        settings = load_settings(cli)
    except (ValueError, OSError) as exc:
        print(f"placement-lite: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_format, settings.log_level)
    if args.command == "serve":
        from placement_lite.server import serve
        try:
            return serve(settings)
        except KeyboardInterrupt:
            # Interrupted before the server was up (e.g. during migration).
            return 130
    from placement_lite.db import migrate
    from placement_lite.db.engine import Database
    database = Database(settings.db)
    try:
        if args.db_command == "upgrade":
            migrate.upgrade(database.engine)
            from placement_lite.ledger import standards
            standards.sync(database)
            print(f"schema at {migrate.current_version(database.engine)}")
        else:
            current = migrate.current_version(database.engine)
            print(f"{current or 'none'} (head {migrate.head_version()})")
    finally:
        database.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
