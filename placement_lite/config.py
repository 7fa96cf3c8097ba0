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
import difflib
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from placement_lite.config_rules import (  # noqa: F401 - the choices, importable from here
    AUTH_MODES, LOG_FORMATS, LOG_LEVELS, POLICY_PROFILES, QUOTA_MODELS, TYPE_WORDS,
    check_type, check_value, field_type)

ENV_PREFIX = "PLACEMENT_LITE_"


def env_name(name: str) -> str:
    """The environment variable of the setting `name`."""
    return ENV_PREFIX + name.upper()


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

# PLACEMENT_LITE_* variables that are no setting: the test suite's, CI's
# and the benchmark's knobs, set in the very environments the service is
# started from. The service ignores these names; any other unknown
# PLACEMENT_LITE_* variable is refused, as an unknown key in the file is.
# (tests/test_config.py checks that every such name the repository uses is
# listed here.)
NOT_SETTINGS_ENVIRONMENT = frozenset({
    "PLACEMENT_LITE_TEST_DB_URLS",          # tests/backends.py: servers to test on
    "PLACEMENT_LITE_CONFORMANCE",           # tests/conformance: run the gabbits
    "PLACEMENT_LITE_CONFORMANCE_CACHE",
    "PLACEMENT_LITE_CONFORMANCE_REPORT",
    "PLACEMENT_LITE_CONFORMANCE_JOBS",
    "PLACEMENT_LITE_NOVA_FUNCTIONAL",       # tests/nova_functional: nova's tests
    "PLACEMENT_LITE_NOVA_CACHE", "PLACEMENT_LITE_NOVA_JOBS",
    "PLACEMENT_LITE_DIFF_SEED",             # tests/test_facts_differential.py
    "PLACEMENT_LITE_DIFF_ROUNDS",
    "PLACEMENT_LITE_DIFF_READS",
    "PLACEMENT_LITE_DIFF_ALL",
    "PLACEMENT_LITE_SAMENESS_SEED",         # tests/test_sameness.py
    "PLACEMENT_LITE_FUZZ_EXAMPLES",         # tests/test_fuzz.py
    "PLACEMENT_LITE_FUZZ_SECONDS",
    "PLACEMENT_LITE_UI_SCREENSHOTS",        # tests/test_ui_browser.py
    "PLACEMENT_LITE_UI_README_SHOT",
    # The benchmark's statement counter, read by db/engine.py itself.
    "PLACEMENT_LITE_COUNT_STATEMENTS",
})


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
    (variable `where`) or "file" (path `where`)."""
    kind: str
    where: str
    # The value as written there (before conversion), for messages.
    raw: Any = dataclasses.field(default=None, compare=False)
    # The old name it was given by (a key of RENAMED), if it was.
    alias: Optional[str] = None


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
    db_retries: int = 10
    # Seconds a stopping worker waits for requests in flight.
    shutdown_timeout: float = 30.0
    # keystonemiddleware auth_token options ([keystone_authtoken] names);
    # these win over the same names in keystone_config_file.
    keystone_authtoken: Mapping = field(default_factory=dict)
    # noauth2 only: the token assumed when a request sends none. Off unless
    # set; meant for clients that cannot send a token without keystone.
    noauth2_default_token: Optional[str] = None
    # Where each value given by the operator came from (field -> Source);
    # not a setting itself.
    sources: Mapping = field(default_factory=dict, compare=False, repr=False)

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
        return [f.name for f in dataclasses.fields(cls) if f.name != "sources"]

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
        if src.kind == "environment":
            return f"{src.where}={shown} (environment)"
        return f"{src.alias or name}: {shown} (in {src.where})"

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
    unset), for help texts; `config_file` is no field but has a variable."""
    value = None if name == "config_file" else _default(name)
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


def _coerce(name: str, raw: Any) -> Any:
    """Turn a string from the environment or a file into the field's type."""
    kind = field_type(_TYPES[name])
    if raw is None or not isinstance(raw, str):
        if kind is tuple and isinstance(raw, list):
            return tuple(raw)
        if kind is float and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        return raw
    if kind is bool:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"{name} must be true or false")
    if kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            raise ValueError(f"{name} must be {TYPE_WORDS[kind]}") from None
    if kind is tuple:
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if kind is Mapping:
        try:
            loaded = yaml.safe_load(raw)
        except yaml.YAMLError:
            loaded = None
        if not isinstance(loaded, Mapping) and loaded is not None:
            raise ValueError(f"{name} must be a mapping, e.g. {{key: value}}")
        if loaded is None and raw.strip():
            raise ValueError(f"{name} must be a mapping, e.g. {{key: value}}")
        return loaded or {}
    return raw


def _describe_raw(name: str, raw: Any, src: Source) -> str:
    if src.kind == "flag":
        return f"{src.where} {raw}"
    if src.kind == "environment":
        return f"{src.where}={raw} (environment)"
    return f"{src.alias or name}: {raw} (in {src.where})"


def _nearest(name: str, candidates) -> Optional[str]:
    found = difflib.get_close_matches(name, sorted(candidates), n=1)
    return found[0] if found else None


def _unknown_variables(environ: Mapping[str, str], names) -> list[str]:
    """A refusal for each PLACEMENT_LITE_* variable that is no setting."""
    known = ({env_name(n) for n in [*names, "config_file", *RENAMED]}
             | NOT_SETTINGS_ENVIRONMENT)
    # Matched without the prefix every name shares, which would make any
    # two names look alike: the settings first, then the tools' variables
    # (a misspelt test variable was meant for the tests).
    tiers = [{n.upper(): env_name(n) for n in [*names, "config_file"]},
             {v[len(ENV_PREFIX):]: v for v in NOT_SETTINGS_ENVIRONMENT}]
    problems = []
    for key in sorted(k for k in environ if k.startswith(ENV_PREFIX)):
        if key in known:
            continue
        hint = "`placement-lite serve --help` lists each setting's variable"
        for tier in tiers:
            nearest = _nearest(key[len(ENV_PREFIX):], tier)
            if nearest:
                hint = f"did you mean {tier[nearest]}?"
                break
        problems.append(f"{key} (environment): no such setting; {hint}")
    return problems


def _read_file(path: str, src: Source) -> dict:
    given = (f"{src.where} {path}" if src.kind == "flag"
             else f"{src.where}={path} (environment)")
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise SettingsError(f"{given}: no such file; give the path of a YAML "
                            "settings file") from None
    except OSError as exc:
        raise SettingsError(f"{given}: cannot read it ({exc.strerror}); "
                            "fix its permissions") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{given}: not UTF-8 text; save the file as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise SettingsError(f"{given}: not valid YAML{where} ({problem}); "
                            "fix the file (keys are setting names, "
                            "e.g. `port: 8778`)") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"{given}: the file must hold a mapping of setting "
                            "names to values (e.g. `port: 8778`)")
    return data


def load_settings(cli: Optional[Mapping[str, Any]] = None,
                  environ: Optional[Mapping[str, str]] = None,
                  config_file: Optional[str] = None,
                  flags: Optional[Mapping[str, str]] = None) -> Settings:
    """Settings from flags (`cli`, by field name; `flags` maps a field to
    the option that set it, for messages), the environment and the file."""
    environ = os.environ if environ is None else environ
    flags = dict(flags or {})
    cli = {k: v for k, v in (cli or {}).items() if v is not None}
    names = Settings.field_names()
    values: dict = {}
    sources: dict = {}
    problems: list[str] = []

    def take(name, raw, src):
        try:
            values[name] = _coerce(name, raw)
            sources[name] = dataclasses.replace(src, raw=raw)
        except ValueError as exc:
            problems.append(f"{_describe_raw(name, raw, src)}: {exc}")

    file_src = None
    if config_file:
        file_src = Source("flag", "--config-file")
    elif cli.get("config_file"):
        config_file = cli["config_file"]
        file_src = Source("flag", flags.get("config_file", "--config-file"))
    elif environ.get(env_name("config_file")):
        config_file = environ[env_name("config_file")]
        file_src = Source("environment", env_name("config_file"))
    cli.pop("config_file", None)
    if config_file:
        data = _read_file(config_file, file_src)
        unknown = sorted(set(map(str, data)) - set(names) - set(RENAMED))
        if unknown:
            described = []
            for key in unknown:
                nearest = _nearest(key, names)
                described.append(f"{key} (did you mean {nearest}?)" if nearest else key)
            raise SettingsError(
                f"unknown settings in {config_file}: {', '.join(described)}; "
                "keys are setting names such as port, db, threads")
        for key, raw in data.items():
            name = RENAMED.get(key, key)
            if key != name and name in data:
                continue  # the new name wins
            take(name, raw, Source("file", config_file,
                                   alias=key if key != name else None))
    problems += _unknown_variables(environ, names)
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
    return Settings(**values, sources=sources)
