"""The `placement-lite` command: serve, db, report, explain, quota, config."""
from __future__ import annotations

import logging
import os
import sys

from placement_lite import errors, logs
from placement_lite.cli_parser import NOT_SETTINGS, flag_spellings, parser as _parser
from placement_lite.config import load_settings
from placement_lite.startup import log_start_notes

# Named, not __name__: run as `python -m placement_lite.cli` that is "__main__".
LOG = logging.getLogger("placement_lite.cli")


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "explain":
        # An HTTP client of a running service: no settings, no database.
        from placement_lite import explain_text
        return explain_text.main(args)
    cli = {k: v for k, v in vars(args).items() if k not in NOT_SETTINGS}
    if cli.get("keystone_authtoken"):
        pairs = [item.partition("=") for item in cli["keystone_authtoken"]]
        bad = [key for key, sep, _ in pairs if not sep or not key]
        if bad:
            print(f"placement-lite: --keystone-authtoken wants KEY=VALUE, not {bad[0]!r}",
                  file=sys.stderr)
            return 2
        cli["keystone_authtoken"] = {key.strip(): value for key, _, value in pairs}
    try:
        placement = None
        if getattr(args, "wsgi", False):
            from placement_lite.placement_conf import wsgi_sources
            placement = wsgi_sources(os.environ)
        settings = load_settings(cli, flags=flag_spellings(parser, args),
                                 placement=placement)
    except (ValueError, OSError) as exc:
        print(f"placement-lite: cannot start: {exc}", file=sys.stderr)
        return 2
    if args.command == "config":
        from placement_lite import config_show
        sys.stdout.write(config_show.render(settings))
        return 0
    logs.configure(settings.log_format, settings.log_level)
    log_start_notes(settings, LOG)
    from placement_lite.server import StartupError
    try:
        if args.command == "serve":
            from placement_lite.server import serve
            return serve(settings)
        if args.command == "quota":
            return _quota_enforcement(settings, args)
        if args.command == "report":
            return _report(settings, args)
        if args.db_command == "import":
            return _db_import(settings, args)
        if args.db_command == "compare":
            return _db_compare(settings, args)
        if args.db_command == "check":
            return _db_check(settings)
        if args.db_command == "sweep-draws":
            return _db_sweep_draws(settings)
        return _db(settings, args)
    except StartupError as exc:
        print(f"placement-lite: cannot start: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        # Interrupted before the server was up (e.g. during migration).
        return 130


def _open(settings, create: bool = False):
    """The database for an admin command; StartupError if it is unusable.
    Only the commands that write (`create`) may create an SQLite file."""
    from placement_lite.db.engine import Database
    from placement_lite.server import _database_error
    from placement_lite.startup import check_database_directory, require_database_file
    from sqlalchemy.exc import SQLAlchemyError

    if create:
        check_database_directory(settings)
    else:
        require_database_file(settings)
    try:
        return Database(settings.db)
    except (SQLAlchemyError, ImportError, OSError) as exc:
        raise _database_error(settings, exc) from None


def _db(settings, args) -> int:
    from placement_lite.db import migrate
    from placement_lite.server import _database_error
    from sqlalchemy.exc import SQLAlchemyError

    database = _open(settings, create=args.db_command == "upgrade")
    try:
        if args.db_command == "upgrade":
            migrate.upgrade(database.engine)
            from placement_lite.ledger import standards
            standards.sync(database)
            print(f"schema at {migrate.current_version(database.engine)}")
        else:
            current = migrate.current_version(database.engine)
            print(f"{current or 'none'} (head {migrate.head_version()})")
    except (SQLAlchemyError, OSError, migrate.ForeignSchema) as exc:
        raise _database_error(settings, exc) from None
    finally:
        database.dispose()
    return 0


def _db_import(settings, args) -> int:
    """Import Placement's database: the schema here is created or upgraded
    first (not in a dry run), then the ledger is copied in one transaction."""
    from placement_lite.db import importer, migrate
    from placement_lite.ledger import standards
    from placement_lite.server import _database_error, _first_line
    from sqlalchemy.exc import SQLAlchemyError

    database = _open(settings, create=True)
    try:
        if not args.dry_run:
            try:
                migrate.upgrade(database.engine)
                standards.sync(database)
            except (SQLAlchemyError, OSError, migrate.ForeignSchema) as exc:
                raise _database_error(settings, exc) from None
        try:
            report = importer.run(args.from_url, database, dry_run=args.dry_run,
                                  force=args.force)
        except importer.ImportRefused as exc:
            print(f"placement-lite: import refused: {exc}", file=sys.stderr)
            return 1
        except (SQLAlchemyError, ImportError, OSError) as exc:
            print("placement-lite: import failed, nothing was written: "
                  f"{type(exc).__name__}: {_first_line(exc)}", file=sys.stderr)
            return 1
        print(report.render())
        return 0
    finally:
        database.dispose()


def _schema_current(database, fix: str) -> bool:
    """False, having said so on stderr, when the schema is not at head:
    the read-only commands never upgrade it themselves."""
    from placement_lite.db import migrate
    if migrate.current_version(database.engine) == migrate.head_version():
        return True
    print(f"placement-lite: the schema is not current; run {fix} first",
          file=sys.stderr)
    return False


def _db_compare(settings, args) -> int:
    """Exit 0 when the stored ledgers are the same, 1 when they differ."""
    from placement_lite.db import importer
    from placement_lite.server import _first_line
    from sqlalchemy.exc import SQLAlchemyError

    database = _open(settings)
    try:
        if not _schema_current(database, "`placement-lite db upgrade` (or the import)"):
            return 1
        counts, differences = importer.compare(args.from_url, database)
    except importer.ImportRefused as exc:
        print(f"placement-lite: cannot compare: {exc}", file=sys.stderr)
        return 1
    except (SQLAlchemyError, ImportError, OSError) as exc:
        print(f"placement-lite: cannot compare: {type(exc).__name__}: "
              f"{_first_line(exc)}", file=sys.stderr)
        return 1
    finally:
        database.dispose()
    print("compared: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    return _differences(differences)


def _differences(lines: list, shown: int = 200) -> int:
    """Print what differs (the first `shown` lines); the exit status."""
    if not lines:
        print("no differences")
        return 0
    print(f"{len(lines)} differences:")
    for line in lines[:shown]:
        print(f"  {line}")
    if len(lines) > shown:
        print(f"  ... and {len(lines) - shown} more")
    return 1


def _db_check(settings) -> int:
    """Exit 0 when every kept sum agrees with the allocation rows."""
    from placement_lite.db import usage_summary
    from placement_lite.server import _database_error
    from sqlalchemy.exc import SQLAlchemyError

    database = _open(settings)
    try:
        if not _schema_current(database, "`placement-lite db upgrade`"):
            return 1
        with database.read() as conn:
            lines = usage_summary.drift(conn)
    except (SQLAlchemyError, OSError) as exc:
        raise _database_error(settings, exc) from None
    finally:
        database.dispose()
    return _differences(lines)


def _db_sweep_draws(settings) -> int:
    """Remove what ended reservations gave out; print how much."""
    from placement_lite.ledger import draws
    from placement_lite.server import _database_error
    from sqlalchemy.exc import SQLAlchemyError

    database = _open(settings)
    try:
        if not _schema_current(database, "`placement-lite db upgrade`"):
            return 1
        swept = rows = 0
        while True:
            with database.read() as conn:
                todo = draws.ended_with_draws(conn)
            before = rows
            for r_uuid in todo:
                rows += database.run_write(lambda conn: draws.sweep(conn, r_uuid))
                swept += 1
            # A full page again only while it removes something: a page
            # left as it was would be read again and again.
            if len(todo) < 1000 or rows == before:
                break
    except (SQLAlchemyError, OSError) as exc:
        raise _database_error(settings, exc) from None
    finally:
        database.dispose()
    print(f"{rows} drawn allocation rows of {swept} ended reservations removed")
    return 0


def _report(settings, args) -> int:
    """The fleet and quota summaries, from the database directly."""
    from placement_lite import report
    from placement_lite.server import _database_error
    from sqlalchemy.exc import SQLAlchemyError

    database = _open(settings)
    try:
        if not _schema_current(database, "`placement-lite db upgrade`"):
            return 1
        with database.read() as conn:
            data = report.collect(conn, settings)
        sys.stdout.write(report.render(data, args.report_format))
        return 0
    except (SQLAlchemyError, OSError) as exc:
        raise _database_error(settings, exc) from None
    finally:
        database.dispose()


def _quota_enforcement(settings, args) -> int:
    """Show, or with --set/--model change, the deployment's enforcement.
    Running processes follow a change on their next check: they read it
    from the database every time."""
    from placement_lite.quota import enforce
    from placement_lite.server import _database_error
    from sqlalchemy.exc import SQLAlchemyError

    database = _open(settings)
    try:
        if not _schema_current(database, "`placement-lite db upgrade`"):
            return 1
        if args.set_enforce is None and args.set_model is None:
            with database.read() as conn:
                found = enforce.stored(conn)
            if found is None:
                print("quota enforcement: not set yet (the first `serve` "
                      "stores its settings)")
            else:
                print(f"quota enforcement: {found.summary()} (set by {found.set_by})")
            return 0
        try:
            before, after = enforce.change(
                database, None if args.set_enforce is None else args.set_enforce == "on",
                args.set_model)
        except errors.ModelDoesNotFit as exc:
            print(f"placement-lite: {exc}", file=sys.stderr)
            return 1
        print(f"quota enforcement: {before.summary()} -> {after.summary()}")
        return 0
    except (SQLAlchemyError, OSError) as exc:
        raise _database_error(settings, exc) from None
    finally:
        database.dispose()


if __name__ == "__main__":
    sys.exit(main())
