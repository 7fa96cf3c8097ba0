"""Settings: one dataclass, built once at start-up.

Precedence is CLI flags > environment (PLACEMENT_LITE_<FIELD>) > config file
(YAML, keys are field names) > defaults. No other module reads the
environment; everything that varies is a field here.
"""
from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

ENV_PREFIX = "PLACEMENT_LITE_"


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
class Settings:
    host: str = "127.0.0.1"
    port: int = 8778
    db: str = field(default_factory=default_db_url)
    auth: str = "noauth2"  # noauth2 | keystone
    workers: int = 1
    threads: int = 8
    policy_profile: str = "legacy"  # legacy | secure-rbac | open
    policy_file: Optional[str] = None
    cors_allowed_origin: tuple = ()
    cors_allow_headers: tuple = ()
    log_format: str = "text"  # text | json
    log_level: str = "INFO"
    metrics_enabled: bool = False
    max_body_bytes: int = 1024 * 1024
    max_query_params: int = 1000
    # Bounds the combinations the candidate engine will build per request.
    max_allocation_candidates: int = 1000
    randomize_allocation_candidates: bool = False
    # Quota (unified limits).
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

    @classmethod
    def field_names(cls):
        return [f.name for f in dataclasses.fields(cls)]


# Field name -> declared type, resolved once (annotations are strings here).
_TYPES = typing.get_type_hints(Settings)


def _field_type(name: str) -> Any:
    """The field's declared type, Optional[X] read as X."""
    hint = _TYPES[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint


def _coerce(name: str, raw: Any) -> Any:
    """Turn a string from the environment or a file into the field's type."""
    kind = _field_type(name)
    if raw is None or not isinstance(raw, str):
        if kind is tuple and isinstance(raw, list):
            return tuple(raw)
        return raw
    if kind is bool:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"{name} must be true or false, not {raw!r}")
    if kind in (int, float):
        return kind(raw)
    if kind is tuple:
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if kind is Mapping:
        return yaml.safe_load(raw) or {}
    return raw


def load_settings(cli: Optional[Mapping[str, Any]] = None,
                  environ: Optional[Mapping[str, str]] = None,
                  config_file: Optional[str] = None) -> Settings:
    environ = os.environ if environ is None else environ
    cli = {k: v for k, v in (cli or {}).items() if v is not None}
    names = Settings.field_names()
    values: dict = {}
    config_file = (config_file or cli.pop("config_file", None)
                   or environ.get(ENV_PREFIX + "CONFIG_FILE"))
    if config_file:
        with open(config_file, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
        unknown = set(data) - set(names)
        if unknown:
            raise ValueError(
                f"unknown settings in {config_file}: {', '.join(sorted(unknown))}")
        values.update({k: _coerce(k, v) for k, v in data.items()})
    for name in names:
        key = ENV_PREFIX + name.upper()
        if key in environ:
            values[name] = _coerce(name, environ[key])
    for name, value in cli.items():
        if name in names:
            values[name] = _coerce(name, value)
    return Settings(**values)
