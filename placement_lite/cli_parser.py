"""The `placement-lite` command line: its parser, one subcommand family at
a time, with every serve option's default and environment name taken
from the settings themselves (so its help cannot drift from them)."""
from __future__ import annotations

import argparse

from placement_lite.config import Settings, default_text, env_name


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


def parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="placement-lite")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_db(sub)
    _add_report(sub)
    _add_explain(sub)
    _add_quota(sub)
    _add_config(sub)
    _document_settings(parser)
    return parser


# serve --help and config show --help say it; README.md and
# docs/operations.md say it at length.
PRECEDENCE = (
    "Each setting is taken from the first of: its flag; its PLACEMENT_LITE_* "
    "variable; our YAML settings file; Placement's own configuration (the "
    "placement.conf files --config-file and --config-dir name, with its "
    "OS_<GROUP>__<OPTION> variables over them); its default. `placement-lite "
    "config show`, given the same options, prints each value and where it came from.")


def _database_options(p: argparse.ArgumentParser) -> None:
    """Options of every command that opens the database; `explain` is
    only an HTTP client and has none."""
    p.add_argument("--config-file", action="append", metavar="FILE",
                   help="our YAML settings file (keys are setting names, e.g. "
                   "`port: 8778`), or OpenStack Placement's placement.conf, read "
                   "with oslo.config (a file whose first line is a [section]); "
                   "repeatable, later placement.conf files win")
    p.add_argument("--config-dir", action="append", metavar="DIR",
                   help="read every *.conf in DIR, in name order, as Placement's "
                   "configuration, after the --config-file ones (repeatable)")
    p.add_argument("--db", help="SQLAlchemy database URL: sqlite:////PATH, "
                   "mysql+pymysql://USER:PASSWORD@HOST/DB, postgresql://...")


def _document_settings(p: argparse.ArgumentParser) -> None:
    """Appends each setting's default and environment variable to its help,
    in this parser and those of its subcommands, taken from the Settings
    dataclass and the config module's naming rule, so that --help cannot
    drift from what is read."""
    settings = {*Settings.field_names(), "config_file", "config_dir"}
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
    _serve_options(sub.add_parser("serve", help="run the API service",
                                  description=PRECEDENCE))


def _add_config(sub: argparse._SubParsersAction) -> None:
    config = sub.add_parser("config", help="the settings as serve would read them")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser(
        "show", description=PRECEDENCE,
        help="print every setting's value and where it came from (given "
        "serve's options), and what was read of Placement's configuration")
    show.add_argument("--wsgi", action="store_true",
                      help="also find Placement's placement.conf as the WSGI "
                      "entry point does ($OS_PLACEMENT_CONFIG_DIR, else "
                      "/etc/placement/ and oslo.config's other default places)")
    _serve_options(show)


def _serve_options(serve: argparse.ArgumentParser) -> None:
    # No type= on these: values stay strings for the settings' own rules to
    # convert and check, so a flag is refused in the words the environment
    # and the file are ("--port abc: port must be a whole number").
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
    serve.add_argument("--proxy-headers", action=argparse.BooleanOptionalAction,
                       default=None,
                       help="behind a proxy: take the scheme, host and path prefix "
                       "callers used from Forwarded / X-Forwarded-* headers (only "
                       "behind a proxy that sets them)")
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
    _serve_tuning_options(serve)


def _serve_tuning_options(serve: argparse.ArgumentParser) -> None:
    """serve's options of what is served, its bounds, the database pool
    and quota."""
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
    serve.add_argument("--db-max-overflow", help="connections each worker may "
                       "open past its pool when it is busy (-1: no bound; default: "
                       "as many as the pool)")
    serve.add_argument("--db-pool-timeout", help="seconds a request waits for a "
                       "database connection when the pool is exhausted")
    serve.add_argument("--db-recycle-seconds", help="a pooled connection older "
                       "than this is replaced (-1: never)")
    serve.add_argument("--db-retries", help="times a write that lost a race in "
                       "the database (deadlock, lock timeout, busy) is run again")
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
    _add_connection_options(serve)


def _add_connection_options(serve: argparse.ArgumentParser) -> None:
    """waitress' connection handling and the proxies it believes (serve
    only: under another WSGI server these are that server's business)."""
    serve.add_argument("--shutdown-timeout",
                       help="seconds a stopping worker waits for requests in flight")
    serve.add_argument("--connection-limit", metavar="N",
                       help="client connections each worker holds open at once, "
                       "idle keep-alives and half-sent requests included; beyond "
                       "it new ones wait in the kernel's queue (--backlog)")
    serve.add_argument("--channel-timeout", metavar="SECONDS",
                       help="a connection with no request in progress is closed "
                       "after this long without a byte from its client")
    serve.add_argument("--backlog", metavar="N",
                       help="connections the kernel queues while no worker can "
                       "accept them (capped by net.core.somaxconn)")
    serve.add_argument("--trusted-proxy", metavar="ADDRESS[,ADDRESS...]",
                       help="reverse proxies (IP addresses or networks, as this "
                       "service sees them) whose forwarding headers are believed")
    serve.add_argument("--trusted-proxy-headers", metavar="HEADER[,HEADER...]",
                       help="the headers a trusted proxy is believed on: "
                       "forwarded, or any of x-forwarded-proto, x-forwarded-for, "
                       "x-forwarded-host, x-forwarded-port, x-forwarded-by")
    serve.add_argument("--trusted-proxy-count", metavar="N",
                       help="trusted proxies in a chain: the last N hops of "
                       "X-Forwarded-For or Forwarded are believed")
    serve.add_argument("--clear-untrusted-proxy-headers",
                       action=argparse.BooleanOptionalAction, default=None,
                       help="remove forwarding headers that are not believed "
                       "before the application sees them")


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
    _database_options(db_sub.add_parser(
        "sweep-draws", help="remove the allocations drawn from reservations "
        "that have ended (they count nowhere in time already); each "
        "reservation in its own transaction, as an early end removes them"))
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
NOT_SETTINGS = ("command", "db_command", "quota_command", "config_command",
                "set_enforce", "set_model", "from_url", "dry_run", "force",
                "report_format", "wsgi")


def flag_spellings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """Setting name -> the option that sets it, for messages (in the
    parser of the subcommand `args` chose)."""
    chosen = parser
    while True:
        sub = next((a for a in chosen._actions
                    if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None:
            break
        chosen = sub.choices[getattr(args, sub.dest)]
    found = {}
    for action in chosen._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if longs:
            found[action.dest] = longs[0]
    return found
