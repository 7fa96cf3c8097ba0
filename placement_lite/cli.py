"""The `placement-lite` command: serve, db upgrade, db version."""
from __future__ import annotations

import argparse
import logging
import sys

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
    serve.add_argument("--cors-allowed-origin", action="append")
    serve.add_argument("--cors-allow-headers")
    serve.add_argument("--log-format", choices=["text", "json"])
    serve.add_argument("--log-level")
    serve.add_argument("--keystone-config-file")

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
    if isinstance(cli.get("cors_allow_headers"), str):
        cli["cors_allow_headers"] = cli["cors_allow_headers"]
    try:
        settings = load_settings(cli)
    except (ValueError, OSError) as exc:
        print(f"placement-lite: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=getattr(logging, settings.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if args.command == "serve":
        from placement_lite.server import serve
        return serve(settings)
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
