"""The `placement-lite` command: serve, db upgrade, db version, report."""
from __future__ import annotations

import argparse
import logging
import sys

from placement_lite import errors, logs
from placement_lite.config import Settings, default_text, env_name, load_settings

# Named, not __name__: run as `python -m placement_lite.cli` that is "__main__".
LOG = logging.getLogger("placement_lite.cli")


class _Version(argparse.Action):
    """--version: the package metadata is read only when it is asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from placement_lite.version import version
        print(f"{parser.prog} {version()}")
        parser.exit(0)


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps help only at spaces: a default path or URL broken at a hyphen
    could not be copied as it is."""

    def _split_lines(self, text, width):
        import textwrap
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False,
                             break_long_words=False)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line, as every refusal at start-up is: the
    whole usage above it buried the line that said what was wrong."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}; see `{self.prog} --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="placement-lite")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_db(sub)
    _add_report(sub)
    _add_explain(sub)
    _add_quota(sub)
    _document_settings(parser)
    return parser


def _database_options(p: argparse.ArgumentParser) -> None:
    """Options of every command that opens the database; `explain` is
    only an HTTP client and has none."""
    p.add_argument("--config-file", help="YAML settings file (keys are setting "
                   "names, e.g. `port: 8778`)")
    p.add_argument("--db", help="SQLAlchemy database URL: sqlite:////PATH, "
                   "mysql+pymysql://USER:PASSWORD@HOST/DB, postgresql://...")


def _document_settings(p: argparse.ArgumentParser) -> None:
    """Appends each setting's default and environment variable to its help,
    in this parser and those of its subcommands, taken from the Settings
    dataclass and the config module's naming rule, so that --help cannot
    drift from what is read."""
    settings = {*Settings.field_names(), "config_file"}
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                _document_settings(subparser)
        if action.dest not in settings or not action.option_strings:
            continue
        # argparse formats help with %; a default (a path) could hold one.
        default = default_text(action.dest).replace("%", "%%")
        action.help = (f"{action.help} (default: {default}; "
                       f"env {env_name(action.dest)})")


def _add_serve(sub: argparse._SubParsersAction) -> None:
    # No type= on these: values stay strings for the settings' own rules to
    # convert and check, so a flag is refused in the words the environment
    # and the file are ("--port abc: port must be a whole number").
    serve = sub.add_parser("serve", help="run the API service")
    _database_options(serve)
    serve.add_argument("--host", help="the address to listen on: an IP "
                       "address of this machine or a name that resolves to one")
    serve.add_argument("--port", help="the port to listen on (0: any free "
                       "port; the start-up line says which)")
    serve.add_argument("--auth", choices=["noauth2", "keystone"],
                       help="noauth2 (development: the token is user[:project], "
                       "`admin` is an admin) or keystone (keystonemiddleware's "
                       "auth_token in front)")
    serve.add_argument("--insecure-noauth2-on-open-address", action="store_true",
                       default=None,
                       help="allow --auth noauth2 (which trusts any token) on an "
                       "address other than loopback; anyone who can reach it "
                       "can act as admin")
    serve.add_argument("--workers", help="API processes sharing the "
                       "listening socket")
    serve.add_argument("--threads", help="request threads in each worker")
    serve.add_argument("--policy-profile", choices=["legacy", "secure-rbac", "open"],
                       help="the rules' defaults: legacy (Placement's, with the "
                       "deprecated admin-or-service rule), secure-rbac "
                       "(Placement's current ones) or open (any caller, but for "
                       "admin-only rules)")
    serve.add_argument("--policy-file", help="YAML or JSON policy rules that "
                       "override the profile's, by rule name")
    serve.add_argument("--cors-allowed-origin", action="append", metavar="ORIGIN",
                       help="allow cross-origin requests from ORIGIN (repeatable)")
    serve.add_argument("--cors-allow-headers", metavar="H,...",
                       help="request headers a cross-origin caller may send")
    serve.add_argument("--log-format", choices=["text", "json"],
                       help="one line per request, as text or as JSON")
    serve.add_argument("--log-level", help="CRITICAL, ERROR, WARNING, INFO or "
                       "DEBUG (any case)")
    serve.add_argument("--keystone-config-file",
                       help="ini file with a [keystone_authtoken] section")
    serve.add_argument("--keystone-authtoken", action="append", metavar="KEY=VALUE",
                       help="one keystonemiddleware auth_token option (repeatable)")
    serve.add_argument("--noauth2-default-token", metavar="USER[:PROJECT]",
                       help="noauth2: the token assumed when a request has none "
                       "(local testing only)")
    serve.add_argument("--metrics", action=argparse.BooleanOptionalAction,
                       default=None,
                       help="serve Prometheus metrics at /metrics (unauthenticated)")
    serve.add_argument("--metrics-quota-top-n", metavar="N",
                       help="/metrics: export the N (project, resource) pairs "
                       "closest to their limit (0: none)")
    serve.add_argument("--ui", action=argparse.BooleanOptionalAction, default=None,
                       help="serve the read-only web console at /ui/ (same "
                       "auth and policy as the API)")
    serve.add_argument("--max-body-bytes", help="a bigger request body is "
                       "refused with 413")
    serve.add_argument("--max-query-params", help="a request with more query "
                       "parameters is refused with 400")
    serve.add_argument("--db-pool-size", help="database connections each worker "
                       "keeps (and as many again in overflow)")
    serve.add_argument("--db-retries", help="times a write that lost a race in "
                       "the database (deadlock, lock timeout, busy) is run again")
    serve.add_argument("--shutdown-timeout",
                       help="seconds a stopping worker waits for requests in flight")
    serve.add_argument("--max-allocation-candidates", help="the most candidates "
                       "one request builds (-1: no bound, as in Placement)")
    serve.add_argument("--randomize-allocation-candidates",
                       action=argparse.BooleanOptionalAction, default=None,
                       help="a bounded answer is a random sample of the "
                       "candidates, not the first ones")
    serve.add_argument("--quota-enforce", action=argparse.BooleanOptionalAction,
                       default=None,
                       help="on the first start: store whether quota is "
                       "enforced; later: must agree with what is stored")
    serve.add_argument("--quota-model", choices=["flat", "strict_two_level"],
                       help="on the first start: store the enforcement model; "
                       "later: must agree with what is stored")
    serve.add_argument("--quota-unregistered-is-zero",
                       action=argparse.BooleanOptionalAction, default=None,
                       help="a resource with no registered limit may not be "
                       "used at all (otherwise it is unlimited)")


def _add_db(sub: argparse._SubParsersAction) -> None:
    db = sub.add_parser("db", help="schema management")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    for name, text in (("upgrade", "create or upgrade the schema"),
                       ("version", "print the schema revision")):
        _database_options(db_sub.add_parser(name, help=text))
    imp = db_sub.add_parser(
        "import", help="copy an OpenStack Placement database (2023.1 .. 16.0) "
        "into this one, in one transaction; the source is only read")
    _database_options(imp)
    imp.add_argument("--from", dest="from_url", required=True, metavar="URL",
                     help="Placement's database URL, e.g. "
                     "mysql+pymysql://placement:PASSWORD@db/placement")
    imp.add_argument("--dry-run", action="store_true",
                     help="read and check everything, write nothing")
    imp.add_argument("--force", action="store_true",
                     help="if the target already holds providers, aggregates, "
                     "consumers, allocations, custom classes or custom traits, "
                     "delete them first (same transaction); projects, users, "
                     "consumer types and quota data are kept")
    _database_options(db_sub.add_parser(
        "check", help="check that the sums kept beside the allocations (each "
        "inventory's used, the project usage summary) agree with them; "
        "read-only"))
    cmp_ = db_sub.add_parser(
        "compare", help="compare an OpenStack Placement database with this "
        "one, row by row (after an import; stop Placement's writers first)")
    _database_options(cmp_)
    cmp_.add_argument("--from", dest="from_url", required=True, metavar="URL",
                      help="Placement's database URL")


def _add_report(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser(
        "report", help="print the fleet's capacity per resource class and "
        "each project tree's limits, usage and headroom (read-only)")
    _database_options(report)
    report.add_argument("--format", choices=["text", "json"], default="text",
                        dest="report_format",
                        help="text for a terminal, json for a program")


def _add_explain(sub: argparse._SubParsersAction) -> None:
    explain = sub.add_parser(
        "explain", help="ask a running service why a candidates query answers "
        "what it does (GET /explain/allocation_candidates), readably")
    explain.add_argument("--url", required=True, help="the service's endpoint")
    explain.add_argument("--token", help="sent as X-Auth-Token")
    explain.add_argument("--microversion", default="latest")
    explain.add_argument("query", help="the allocation-candidates query string "
                         "(or its path or URL), explain_provider=<uuid> included")


def _add_quota(sub: argparse._SubParsersAction) -> None:
    quota = sub.add_parser("quota", help="the deployment's quota enforcement")
    quota_sub = quota.add_subparsers(dest="quota_command", required=True)
    enforcement = quota_sub.add_parser(
        "enforcement", help="show or change whether quota is enforced, and "
        "under which model, for every process of this deployment")
    _database_options(enforcement)
    enforcement.add_argument("--set", choices=["on", "off"], dest="set_enforce",
                             help="turn enforcement on or off")
    enforcement.add_argument("--model", choices=["flat", "strict_two_level"],
                             dest="set_model", help="change the model")


# Parser destinations that are not settings.
_NOT_SETTINGS = ("command", "db_command", "quota_command", "set_enforce", "set_model",
                 "from_url", "dry_run", "force", "report_format")


def _flag_spellings(parser: argparse.ArgumentParser, command: str) -> dict:
    """Setting name -> the option that sets it, for messages."""
    sub = next(a for a in parser._actions
               if isinstance(a, argparse._SubParsersAction))
    found = {}
    for action in sub.choices[command]._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if longs:
            found[action.dest] = longs[0]
    return found


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "explain":
        # An HTTP client of a running service: no settings, no database.
        from placement_lite import explain_text
        return explain_text.main(args)
    cli = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
    if cli.get("keystone_authtoken"):
        pairs = [item.partition("=") for item in cli["keystone_authtoken"]]
        bad = [key for key, sep, _ in pairs if not sep or not key]
        if bad:
            print(f"placement-lite: --keystone-authtoken wants KEY=VALUE, not {bad[0]!r}",
                  file=sys.stderr)
            return 2
        cli["keystone_authtoken"] = {key.strip(): value for key, _, value in pairs}
    try:
        settings = load_settings(cli, flags=_flag_spellings(parser, args.command))
    except (ValueError, OSError) as exc:
        print(f"placement-lite: cannot start: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_format, settings.log_level)
    for note in settings.deprecations():
        LOG.warning("%s", note)
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
    except (SQLAlchemyError, OSError) as exc:
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
            except (SQLAlchemyError, OSError) as exc:
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
