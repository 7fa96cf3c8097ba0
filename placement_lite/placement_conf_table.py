"""What placement-lite makes of each option of OpenStack Placement's own
configuration (placement.conf), one entry per option, read as a table.

Each option Placement registers, with Placement's name, type, choices and
default, is one of:
- `Use`: read into one of our settings (placement_conf.py reads it);
- `Accept`: accepted, and changes nothing here; start-up logs one line
  saying why;
- `Ignore`: not supported here; start-up names it in one warning line.

The [keystone_authtoken] section is not in the table: keystonemiddleware
reads it whole, from the same files, as Placement hands it over.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from oslo_config import cfg

# Placement's answer to a write that names no consumer owner (before 1.8).
INCOMPLETE_CONSUMER_ID = "00000000-0000-0000-0000-000000000000"

# The CORS defaults Placement sets for oslo.middleware (placement/wsgi),
# which apply when a placement.conf is read and leaves them out.
PLACEMENT_CORS_ALLOW_HEADERS = (
    "X-Auth-Token", "X-Openstack-Request-Id", "X-Identity-Status", "X-Roles",
    "X-Service-Catalog", "X-User-Id", "X-Tenant-Id", "OpenStack-API-Version")
PLACEMENT_CORS_EXPOSE_HEADERS = (
    "X-Auth-Token", "X-Openstack-Request-Id", "X-Subject-Token",
    "X-Service-Token", "OpenStack-API-Version")
PLACEMENT_CORS_METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH")


@dataclass(frozen=True)
class Use:
    """Read into `setting`, through `convert` (the option's value -> the
    setting's). `placement_default`: when a placement.conf is read and
    does not set the option, Placement's default still applies, because
    it decides who may do what (auth, policy, CORS)."""
    setting: str
    convert: Callable[[Any], Any] = lambda value: value
    placement_default: bool = False


@dataclass(frozen=True)
class Accept:
    """Accepted, changing nothing here: `why(value)` says why, in the log;
    a warning when `unlike(value)`, a value asking for what we do not do."""
    why: Callable[[Any], str]
    unlike: Callable[[Any], bool] = lambda value: False


@dataclass(frozen=True)
class Ignore:
    why: str


@dataclass(frozen=True)
class Entry:
    opt: cfg.Opt
    handling: Any


def _tuple(value):
    return tuple(value or ())


def _debug(value):
    return "DEBUG" if value else "INFO"


def _profile(value):
    # oslo.policy's enforce_new_defaults: Placement's current rules alone
    # (secure-rbac), or each ORed with the deprecated rule it replaced.
    return "secure-rbac" if value else "legacy"


def _strategy(value):
    if value == "breadth-first":
        return ("breadth-first is not implemented here: candidates come tree "
                "by tree, as with depth-first; under max_allocation_candidates "
                "they may all come from the first trees")
    return "placement-lite's search visits trees one at a time, as depth-first does"


def _sync(value):
    if value:
        return "placement-lite brings its schema to head at every start, under a lock"
    return ("placement-lite always brings its own schema to head at start "
            "(under a lock); Placement's schema is never touched")


def _scope(value):
    return ("oslo.policy 6 (Placement 16's) always enforces scope types, and "
            "so does placement-lite" + ("" if value else "; false is not honoured"))


_WIDE = ("placement-lite combines candidates lazily and stops at the limit, "
         "so the slowness this works around does not arise; answers are "
         "those Placement gives without it")

_LOGS = ("placement-lite logs to stderr, one line per request (log_format and "
         "log_level choose the form)")


Str, Int, Bool, List = cfg.StrOpt, cfg.IntOpt, cfg.BoolOpt, cfg.ListOpt

# Group -> its options, with Placement's names, types and defaults.
ENTRIES: dict[str, list[Entry]] = {
    "DEFAULT": [
        Entry(Bool("debug", default=False), Use("log_level", _debug)),
        Entry(Bool("use_json", default=False),
              Use("log_format", lambda v: "json" if v else "text")),
    ],
    "api": [
        Entry(Str("auth_strategy", default="keystone",
                  choices=("keystone", "noauth2"), deprecated_group="DEFAULT"),
              Use("auth", placement_default=True)),
    ],
    "placement": [
        Entry(Bool("randomize_allocation_candidates", default=False),
              Use("randomize_allocation_candidates")),
        Entry(Str("incomplete_consumer_project_id", default=INCOMPLETE_CONSUMER_ID),
              Use("incomplete_consumer_project_id")),
        Entry(Str("incomplete_consumer_user_id", default=INCOMPLETE_CONSUMER_ID),
              Use("incomplete_consumer_user_id")),
        # Placement retries an allocation write that lost a race for a
        # provider's generation; ours retries any write that lost one.
        Entry(Int("allocation_conflict_retry_count", default=10), Use("db_retries")),
        Entry(Int("max_allocation_candidates", default=-1),
              Use("max_allocation_candidates")),
        Entry(Str("allocation_candidates_generation_strategy", default="depth-first",
                  choices=("depth-first", "breadth-first")),
              Accept(_strategy, unlike=lambda v: v == "breadth-first")),
    ],
    "placement_database": [
        Entry(Str("connection", secret=True), Use("db")),
        # Added to the connection URL's query, as oslo.db does.
        Entry(Str("connection_parameters", default=""), Use("db")),
        Entry(Int("max_pool_size"), Use("db_pool_size")),
        Entry(Int("max_overflow"), Use("db_max_overflow")),
        Entry(Int("pool_timeout"), Use("db_pool_timeout")),
        Entry(Int("connection_recycle_time", default=3600), Use("db_recycle_seconds")),
        Entry(Bool("sync_on_startup", default=False), Accept(_sync)),
        Entry(Int("max_retries", default=10), Ignore(
            "placement-lite tries the database once at start and exits 1 "
            "if it cannot reach it, for the service manager to restart it")),
        Entry(Int("retry_interval", default=10), Ignore(
            "placement-lite does not retry the first connection")),
        Entry(Str("slave_connection", secret=True), Ignore(
            "placement-lite reads and writes through one database URL")),
        Entry(Str("mysql_sql_mode", default="TRADITIONAL"), Ignore(
            "placement-lite keeps the server's SQL mode")),
        Entry(Bool("sqlite_synchronous", default=True), Ignore(
            "placement-lite runs SQLite in WAL mode with its own settings")),
        Entry(Int("connection_debug", default=0), Ignore(
            "log_level DEBUG logs placement-lite's own detail")),
        Entry(Bool("connection_trace", default=False), Ignore(
            "statements carry no Python tracebacks here")),
    ],
    "oslo_policy": [
        Entry(Str("policy_file", default="policy.yaml"), Use("policy_file")),
        Entry(Bool("enforce_new_defaults", default=True),
              Use("policy_profile", _profile, placement_default=True)),
        Entry(Bool("enforce_scope", default=True),
              Accept(_scope, unlike=lambda v: not v)),
        Entry(Str("policy_default_rule", default="default"), Ignore(
            "a rule name that does not exist never grants here")),
        Entry(cfg.MultiStrOpt("policy_dirs", default=["policy.d"]), Ignore(
            "policy directories are not read; put the rules in policy_file")),
        *[Entry(Str(name), Ignore("http: and https: checks are not supported"))
          for name in ("remote_content_type", "remote_ssl_verify_server_crt",
                       "remote_ssl_ca_crt_file", "remote_ssl_client_crt_file",
                       "remote_ssl_client_key_file", "remote_timeout")],
    ],
    "cors": [
        Entry(List("allowed_origin"), Use("cors_allowed_origin", _tuple)),
        Entry(Bool("allow_credentials", default=True), Use("cors_allow_credentials")),
        Entry(List("expose_headers", default=list(PLACEMENT_CORS_EXPOSE_HEADERS)),
              Use("cors_expose_headers", _tuple, placement_default=True)),
        Entry(Int("max_age", default=3600), Use("cors_max_age")),
        Entry(List("allow_methods", default=list(PLACEMENT_CORS_METHODS)),
              Use("cors_allow_methods", _tuple, placement_default=True)),
        Entry(List("allow_headers", default=list(PLACEMENT_CORS_ALLOW_HEADERS)),
              Use("cors_allow_headers", _tuple, placement_default=True)),
    ],
    "oslo_middleware": [
        Entry(Bool("enable_proxy_headers_parsing", default=False),
              Use("proxy_headers")),
    ],
    "workarounds": [
        Entry(Bool("optimize_for_wide_provider_trees", default=False),
              Accept(lambda value: _WIDE)),
    ],
}

# Whole sections placement-lite has no use for, and why (any option in
# them is named at start-up with this reason).
IGNORED_SECTIONS = {
    "DEFAULT": _LOGS + "; Placement's other [DEFAULT] options have no use here",
    "profiler": "placement-lite has no osprofiler tracing",
    "oslo_concurrency": "placement-lite takes no file locks",
    "oslo_messaging_notifications": "placement-lite sends no notifications",
    "oslo_upgradecheck": "use `placement-lite db version` to check the schema",
}


def known() -> dict:
    """(group, option name) -> (its group, Entry), under each name the
    option is read by (oslo.config's deprecated names included)."""
    table = {}
    for group, entries in ENTRIES.items():
        for entry in entries:
            table[(group, entry.opt.dest)] = (group, entry)
            for old in entry.opt.deprecated_opts:
                table[(old.group or group, old.name or entry.opt.dest)] = (group, entry)
    return table


def register(conf: cfg.ConfigOpts) -> None:
    for group, entries in ENTRIES.items():
        # What is not supported is only named, never read: its type is
        # not checked.
        opts = [entry.opt for entry in entries
                if not isinstance(entry.handling, Ignore)]
        if group == "DEFAULT":
            conf.register_opts(opts)
        else:
            conf.register_opts(opts, group=group)
