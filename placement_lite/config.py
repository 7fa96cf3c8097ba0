"""Settings: one dataclass, built once at start-up.

Precedence is CLI flags > environment (PLACEMENT_LITE_<FIELD>) > config file
(YAML, keys are field names) > defaults. No other module reads the
environment; everything that varies is a field here.

One naming rule: the field `max_body_bytes` is the flag `--max-body-bytes`,
the variable PLACEMENT_LITE_MAX_BODY_BYTES and the file key
`max_body_bytes` (env_name, flag_name). A name that is no setting is
refused, from the file or the environment, with the nearest setting's name;
RENAMED keeps old spellings working and NOT_SETTINGS_ENVIRONMENT lists the
PLACEMENT_LITE_* variables that belong to the tests and tools, not to the
service.

Every value is checked once, when Settings is constructed, whatever it came
from; a refusal names the setting as the operator wrote it (the flag, the
environment variable or the file) and says what would be accepted. The
rules themselves, one per setting, are config_rules.py's.
"""
from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from placement_lite.config_rules import (  # noqa: F401 - the choices, importable from here
    AUTH_MODES, CORS_ALLOW_METHODS, CORS_EXPOSE_HEADERS, LOG_FORMATS, LOG_LEVELS,
    POLICY_PROFILES, PROXY_HEADERS, QUOTA_MODELS, TYPE_WORDS, check_type, check_value,
    coerce, field_type)
from placement_lite.config_sources import (  # noqa: F401 - importable from here
    ENV_PREFIX, NOT_SETTINGS_ENVIRONMENT, env_name, is_ini, nearest, read_yaml,
    unknown_variables)

# A placement.conf's option left at Placement's default (placement_conf.py).
PLACEMENT_DEFAULT = "Placement's default"


def flag_name(name: str) -> str:
    """The command-line flag of the setting `name`."""
    return "--" + name.replace("_", "-")


# Old name -> the setting's name now. The old spelling is still read, from
# the environment and the file, and each use is reported at start-up
# (Settings.deprecations) so it can be changed before it is removed.
RENAMED = {
    # The flag was always --metrics; the variable and key were the odd ones
    # out, and PLACEMENT_LITE_METRICS=true was silently ignored.
    "metrics_enabled": "metrics",
}


class SettingsError(ValueError):
    """One or more settings are unusable; the message names each one."""


def default_db_url() -> str:
    """A file under the user's data directory (created on first use), or
    the working directory when there is no writable home."""
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    if os.access(home, os.W_OK) or os.path.isdir(base):
        path = Path(base) / "placement-lite" / "placement-lite.sqlite"
    else:
        path = Path.cwd() / "placement-lite.sqlite"
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class Source:
    """Where a value came from: "flag" (spelled `where`), "environment"
    (variable `where`), "file" (our YAML at path `where`) or "deployment"
    (Placement's `option`, "[group] name", in the placement.conf or the
    OS_* variable `where`, or PLACEMENT_DEFAULT)."""
    kind: str
    where: str
    # The value as written there (before conversion), for messages.
    raw: Any = dataclasses.field(default=None, compare=False)
    # The old name it was given by (a key of RENAMED), if it was.
    alias: Optional[str] = None
    option: Optional[str] = None


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8778
    db: str = field(default_factory=default_db_url)
    auth: str = "noauth2"  # noauth2 | keystone
    # noauth2 trusts whatever token a caller sends; serving it on an address
    # other than loopback needs this to be said out loud.
    insecure_noauth2_on_open_address: bool = False
    workers: int = 1
    threads: int = 8
    policy_profile: str = "legacy"  # legacy | secure-rbac | open
    policy_file: Optional[str] = None
    cors_allowed_origin: tuple = ()
    cors_allow_headers: tuple = ()
    cors_expose_headers: tuple = CORS_EXPOSE_HEADERS
    cors_allow_methods: tuple = CORS_ALLOW_METHODS
    cors_allow_credentials: bool = True
    cors_max_age: int = 3600
    # Behind a proxy: the scheme, host and path prefix the caller used, from
    # Forwarded / X-Forwarded-* headers (Location headers are built on them).
    proxy_headers: bool = False
    log_format: str = "text"  # text | json
    log_level: str = "INFO"
    # Prometheus text at /metrics (named metrics_enabled before: RENAMED).
    metrics: bool = False
    # /metrics: how many (project, resource) pairs closest to their limit
    # are exported as gauges (0: none), bounding the series a scrape adds.
    metrics_quota_top_n: int = 10
    # The read-only web console at /ui/ (its routes exist only when on).
    ui: bool = False
    max_body_bytes: int = 1024 * 1024
    max_query_params: int = 1000
    # Bounds the combinations the candidate engine will build per request.
    max_allocation_candidates: int = 1000
    randomize_allocation_candidates: bool = False
    # The owner of a consumer created by a write that names none (< 1.8).
    incomplete_consumer_project_id: str = "00000000-0000-0000-0000-000000000000"
    incomplete_consumer_user_id: str = "00000000-0000-0000-0000-000000000000"
    # Candidates read providers' trees, inventories, traits and
    # aggregates from each process's copy (kept fresh through the facts
    # log: candidates/snapshot.py) and only `used` from the database.
    # Off: every request asks the database for everything.
    facts_in_memory: bool = True
    # Seconds between a process's checks of its copy against the
    # database (candidates/selfcheck.py); 0 turns them off.
    facts_check_seconds: float = 60.0
    # Quota (unified limits). Enforcement and the model are the
    # deployment's, stored in the database: these two only seed it on the
    # first start, and a process given other values refuses to start.
    quota_enforce: bool = False
    quota_model: str = "flat"  # flat | strict_two_level
    quota_unregistered_is_zero: bool = False
    # Enforcement reads the limits of the first service of this type, in
    # this region (None: limits registered without a region).
    quota_service_type: str = "placement"
    quota_region_id: Optional[str] = None
    # Extra resource names -> usage source, e.g. {"cores": "class:VCPU"}.
    quota_resource_usage: Mapping = field(default_factory=dict)
    # Lets GET/HEAD of the /v3 limits, model and catalog reads through
    # without a token, for oslo.limit configured with auth_type = none.
    quota_limits_public_read: bool = False
    keystone_config_file: Optional[str] = None
    lease_policy_filters: tuple = ()
    lease_max_duration_hours: Optional[float] = None
    lease_exempt_projects: tuple = ()
    lease_max_amount: Mapping = field(default_factory=dict)
    lease_token: Optional[str] = None
    db_pool_size: int = 10
    # Connections opened past the pool when it is busy (None: as many as
    # db_pool_size; -1: no bound), seconds to wait for one, and the age
    # in seconds at which one is replaced (-1: never).
    db_max_overflow: Optional[int] = None
    db_pool_timeout: float = 30.0
    db_recycle_seconds: int = 3600
    db_retries: int = 10
    # Seconds a stopping worker waits for requests in flight.
    shutdown_timeout: float = 30.0
    # serve (waitress), per worker: open client connections (idle and
    # half-sent ones hold theirs), seconds before an idle one is closed,
    # and connections the kernel queues while every slot is taken.
    connection_limit: int = 2000
    channel_timeout: int = 60
    backlog: int = 2048
    # serve: peers (addresses, networks) whose proxy headers are believed.
    trusted_proxy: tuple = ()
    trusted_proxy_headers: tuple = ("x-forwarded-proto",)
    trusted_proxy_count: int = 1
    clear_untrusted_proxy_headers: bool = True
    # keystonemiddleware auth_token options ([keystone_authtoken] names);
    # these win over the same names in keystone_config_file.
    keystone_authtoken: Mapping = field(default_factory=dict)
    # noauth2 only: the token assumed when a request sends none. Off unless
    # set; meant for clients that cannot send a token without keystone.
    noauth2_default_token: Optional[str] = None
    # Where each value given by the operator came from (field -> Source),
    # and what was read of Placement's configuration
    # (placement_conf.Deployment); neither is a setting itself.
    sources: Mapping = field(default_factory=dict, compare=False, repr=False)
    deployment: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        problems = []
        for name in self.field_names():
            value = getattr(self, name)
            message = (check_type(name, value, _TYPES[name])
                       or check_value(self, name, value))
            if message:
                problems.append(f"{self.describe(name)}: {message}")
        if problems:
            raise SettingsError("; ".join(problems))
        if self.log_level != self.log_level.upper():
            object.__setattr__(self, "log_level", self.log_level.upper())

    @classmethod
    def field_names(cls):
        return [f.name for f in dataclasses.fields(cls)
                if f.name not in ("sources", "deployment")]

    def source(self, name: str) -> Optional[Source]:
        return self.sources.get(name)

    def describe(self, name: str) -> str:
        """The setting as the operator gave it: `--port 99999`,
        `PLACEMENT_LITE_PORT=99999 (environment)`, `port: 99999 (in
        /etc/x.yaml)`, or `port=99999` when set by code or by default."""
        value = getattr(self, name)
        src = self.source(name)
        if src is not None and src.raw is not None:
            value = src.raw
        shown = _hide_password(value) if name == "db" else _show(value)
        if src is None:
            return f"{name}={shown}"
        if src.kind == "flag":
            if not isinstance(value, bool):
                return f"{src.where} {shown}"
            # --no-x for a false value of a --x/--no-x pair.
            return src.where if getattr(self, name) else "--no-" + src.where[2:]
        if src.kind == "environment" or (src.kind == "deployment"
                                          and src.where.startswith("OS_")):
            return f"{src.where}={shown} (environment)"
        if src.where == PLACEMENT_DEFAULT:
            return f"{src.option} = {shown} (Placement's default, a placement.conf being read)"
        if src.kind == "deployment":
            return f"{src.option} = {shown} (in {src.where})"
        return f"{src.alias or name}: {shown} (in {src.where})"

    def shown(self, name: str) -> str:
        """The value as a person reads it (a database password hidden)."""
        value = getattr(self, name)
        return _hide_password(value) if name == "db" else _show(value)

    def deprecations(self) -> list[str]:
        """A line for each setting given by an old name, for the log."""
        notes = []
        for name, src in self.sources.items():
            if src.alias is None:
                continue
            if src.kind == "environment":
                notes.append(f"{src.where} is deprecated; use {env_name(name)}")
            else:
                notes.append(f"{src.alias} (in {src.where}) is deprecated; use {name}")
        return notes

    def explicit(self, name: str) -> bool:
        """Did the operator (or the code that built this) choose the value,
        rather than leave it at its default?"""
        return name in self.sources or getattr(self, name) != _default(name)


def _default(name: str) -> Any:
    f = Settings.__dataclass_fields__[name]
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()


def default_text(name: str) -> str:
    """The setting's default as an operator would write it (`none` when
    unset), for help texts; `config_file` and `config_dir` are no fields
    but have variables."""
    value = None if name in ("config_file", "config_dir") else _default(name)
    if value is None or (isinstance(value, (tuple, Mapping)) and not value):
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


def _hide_password(url: Any) -> str:
    from sqlalchemy.engine import make_url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparsable: show no part of it
        return _show(url) if "@" not in str(url) else "<a URL that does not parse>"


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


# Field name -> declared type, resolved once (annotations are strings here).
_TYPES = typing.get_type_hints(Settings)


def _describe_raw(name: str, raw: Any, src: Source) -> str:
    if src.kind == "flag":
        return f"{src.where} {raw}"
    if src.kind == "environment" or (src.kind == "deployment"
                                      and src.where.startswith("OS_")):
        return f"{src.where}={raw} (environment)"
    if src.kind == "deployment":
        return f"{src.option} = {raw} ({src.where})"
    return f"{src.alias or name}: {raw} (in {src.where})"


def _config_sources(cli: dict, environ: Mapping[str, str], flags: Mapping[str, str],
                    config_file: Optional[str]) -> tuple:
    """(our YAML file and how it was given, or None; Placement's files;
    Placement's directories), from --config-file (each file either our YAML
    or a placement.conf, told apart by its first line), --config-dir and
    their variables; both are taken out of `cli`."""
    given = cli.pop("config_file", None)
    dirs = cli.pop("config_dir", None)
    named = []
    if config_file:
        named = [(config_file, "--config-file")]
    elif given:
        flag = flags.get("config_file", "--config-file")
        named = [(path, flag) for path in ([given] if isinstance(given, str) else given)]
    elif environ.get(env_name("config_file")):
        named = [(environ[env_name("config_file")], None)]
    yaml_files, ini_files = [], []
    for path, flag in named:
        how = (f"{flag} {path}" if flag
               else f"{env_name('config_file')}={path} (environment)")
        (ini_files if is_ini(path) else yaml_files).append((path, how))
    if len(yaml_files) > 1:
        raise SettingsError(
            f"{yaml_files[0][1]} and {yaml_files[1][1]}: one YAML settings file "
            "at most (each --config-file is either that or a placement.conf)")
    if dirs:
        flag = flags.get("config_dir", "--config-dir")
        ini_dirs = [(d, f"{flag} {d}") for d in ([dirs] if isinstance(dirs, str) else dirs)]
    elif environ.get(env_name("config_dir")):
        d = environ[env_name("config_dir")]
        ini_dirs = [(d, f"{env_name('config_dir')}={d} (environment)")]
    else:
        ini_dirs = []
    return (yaml_files[0] if yaml_files else None), ini_files, ini_dirs


def _yaml_values(path: str, how: str, names: list, take) -> None:
    data = read_yaml(path, how)
    unknown = sorted(set(map(str, data)) - set(names) - set(RENAMED))
    if unknown:
        described = []
        for key in unknown:
            near = nearest(key, names)
            described.append(f"{key} (did you mean {near}?)" if near else key)
        raise SettingsError(
            f"unknown settings in {path}: {', '.join(described)}; "
            "keys are setting names such as port, db, threads")
    for key, raw in data.items():
        name = RENAMED.get(key, key)
        if key != name and name in data:
            continue  # the new name wins
        take(name, raw, Source("file", path, alias=key if key != name else None))


def load_settings(cli: Optional[Mapping[str, Any]] = None,
                  environ: Optional[Mapping[str, str]] = None,
                  config_file: Optional[str] = None,
                  flags: Optional[Mapping[str, str]] = None,
                  placement: Optional[tuple] = None) -> Settings:
    """Settings from flags (`cli`, by field name; `flags` maps a field to
    the option that set it, for messages), the environment, our YAML file
    and Placement's configuration: the placement.conf files --config-file
    and --config-dir name, with `placement` ([(file, how)], [(dir, how)])
    found by the caller before them (the WSGI entry point's search)."""
    from placement_lite import placement_conf

    environ = os.environ if environ is None else environ
    flags = dict(flags or {})
    cli = {k: v for k, v in (cli or {}).items() if v is not None}
    names = Settings.field_names()
    values: dict = {}
    sources: dict = {}
    problems: list[str] = []

    def take(name, raw, src):
        try:
            values[name] = coerce(name, raw, _TYPES[name])
            sources[name] = src if src.raw is not None else dataclasses.replace(src, raw=raw)
        except ValueError as exc:
            problems.append(f"{_describe_raw(name, raw, src)}: {exc}")

    yaml_file, ini_files, ini_dirs = _config_sources(cli, environ, flags, config_file)
    found_files, found_dirs = placement or ([], [])
    given, deployment = placement_conf.read(
        [*found_files, *ini_files], [*found_dirs, *ini_dirs], environ)
    for item in given:
        take(item.setting, item.value, Source("deployment", item.where, raw=item.raw,
                                              option=item.option))
    if yaml_file:
        _yaml_values(*yaml_file, names, take)
    problems += unknown_variables(environ, names, ["config_file", "config_dir", *RENAMED])
    for old, name in RENAMED.items():
        if env_name(old) in environ and env_name(name) not in environ:
            take(name, environ[env_name(old)],
                 Source("environment", env_name(old), alias=old))
    for name in names:
        key = env_name(name)
        if key in environ:
            take(name, environ[key], Source("environment", key))
    for name, value in cli.items():
        if name in names:
            flag = flags.get(name, flag_name(name))
            take(name, value, Source("flag", flag))
    if problems:
        raise SettingsError("; ".join(problems))
    if deployment.files and "db" not in sources:
        raise SettingsError(
            f"[placement_database] connection is not set in {', '.join(deployment.files)}; "
            "Placement needs it and so does placement-lite: set it there, as "
            "OS_PLACEMENT_DATABASE__CONNECTION, or give --db")
    return Settings(**values, sources=sources, deployment=deployment)
