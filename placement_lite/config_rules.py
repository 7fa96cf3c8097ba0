"""What each setting accepts: its type, the values allowed, and the words
a refusal uses. Settings (config.py) checks every value with these once,
whatever the value came from; this module holds only the rules, so the
list of them reads as one table."""
from __future__ import annotations

import ipaddress
import math
import os
import typing
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import yaml

if TYPE_CHECKING:
    from placement_lite.config import Settings

AUTH_MODES = ("noauth2", "keystone")
POLICY_PROFILES = ("legacy", "secure-rbac", "open")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
# The names quota.models.MODELS registers (a test keeps the two equal; this
# module stays below the quota package).
QUOTA_MODELS = ("flat", "strict_two_level")
# The CORS defaults of our own flags: what a browser client of this API
# needs (placement_conf_table.py has Placement's, for a placement.conf).
CORS_EXPOSE_HEADERS = ("openstack-api-version", "x-openstack-request-id",
                       "openstack-request-id", "location", "vary")
CORS_ALLOW_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_HTTP_METHODS = CORS_ALLOW_METHODS + ("TRACE", "CONNECT")
# Placement keeps a consumer's project and user external ids in 255 characters.
_EXTERNAL_ID_LENGTH = 255
# The forms quota.usage counts a resource by.
_USAGE_FORMS = ("class:", "consumers:", "lease:")
# The proxy headers waitress can read (proxy_headers.py), by the names its
# trusted_proxy_headers takes.
PROXY_HEADERS = ("x-forwarded-proto", "x-forwarded-for", "x-forwarded-host",
                 "x-forwarded-port", "x-forwarded-by", "forwarded")


def field_type(hint: Any) -> Any:
    """A field's declared type, Optional[X] read as X."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint


TYPE_WORDS = {bool: "true or false", int: "a whole number", float: "a number",
              str: "a string", tuple: "a list of strings",
              Mapping: "a mapping of names to values"}


def check_type(name: str, value: Any, hint: Any) -> Optional[str]:
    """Why `value` is not of the type `hint` the field `name` declares, or
    None when it is."""
    if value is None and type(None) in typing.get_args(hint):
        return None
    kind = field_type(hint)
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and not math.isfinite(value):
            return "must be a finite number"
    elif kind is tuple:
        ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    elif kind is Mapping:
        ok = isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
    else:
        ok = isinstance(value, kind)
    return None if ok else f"{name} must be {TYPE_WORDS.get(kind, kind.__name__)}"


def coerce(name: str, raw: Any, hint: Any) -> Any:
    """Turn a string from the environment or a file into the type `hint`
    the field `name` declares; ValueError says what it must be."""
    kind = field_type(hint)
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


def _at_least(low: float) -> Callable[[Settings, str, Any], Optional[str]]:
    def check(_s, name, value):
        return None if value >= low else f"{name} must be at least {low}"
    return check


def _positive(_s, name, value):
    return None if value > 0 else f"{name} must be greater than 0"


def _candidates_bound(_s, name, value):
    # -1 is Placement's spelling of "no bound".
    if value >= 1 or value == -1:
        return None
    return f"{name} must be at least 1, or -1 for no bound"


def _one_of(choices) -> Callable[[Settings, str, Any], Optional[str]]:
    def check(_s, name, value):
        if value in choices:
            return None
        return f"{name} must be one of {', '.join(choices)}"
    return check


def _port(_s, name, value):
    if 0 <= value <= 65535:
        return None
    return "port must be between 1 and 65535 (0 picks any free port)"


def _host(_s, name, value):
    if not value.strip() or value != value.strip() or "/" in value or " " in value:
        return ("host must be an IP address or a host name (e.g. 127.0.0.1, "
                "::1, 0.0.0.0), not a URL")
    return None


def _db(_s, name, value):
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(value)
    except (ArgumentError, ValueError):
        return ("db must be a database URL such as sqlite:////var/lib/placement.sqlite, "
                "mysql+pymysql://user:password@host/placement or "
                "postgresql://user:password@host/placement")
    return None


def _log_level(_s, name, value):
    if value.upper() in LOG_LEVELS:
        return None
    return f"log_level must be one of {', '.join(LOG_LEVELS)}"


def _readable_file(_s, name, value):
    if value is None:
        return None
    if not os.path.isfile(value):
        return f"no such file: {value}; give the path of an existing file"
    if not os.access(value, os.R_OK):
        return f"{value} is not readable by this user; fix its permissions"
    return None


def _non_empty(_s, name, value):
    if value is None:
        return None
    return None if value.strip() else f"{name} must not be empty"


def _non_empty_items(_s, name, value):
    return None if all(v.strip() for v in value) else f"{name} has an empty item"


def _usage_map(_s, name, value):
    for key, target in value.items():
        if not isinstance(target, str) or not target.startswith(_USAGE_FORMS) \
                or target.endswith(":"):
            return (f"{name}[{key}] must be class:<RESOURCE_CLASS>, "
                    "consumers:<CONSUMER_TYPE> or lease:<resource_type>:hours")
    return None


def _amounts(_s, name, value):
    for key, amount in value.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) \
                or not math.isfinite(amount) or amount < 0:
            return f"{name}[{key}] must be a number of at least 0"
    return None


def _or_minus_one(low: int, meaning: str):
    def check(_s, name, value):
        if value is None or value >= low or value == -1:
            return None
        return f"{name} must be at least {low}, or -1 for {meaning}"
    return check


def _methods(_s, name, value):
    unknown = [m for m in value if m.upper() not in _HTTP_METHODS]
    if unknown:
        return f"{name}: {unknown[0]} is no HTTP method"
    return None


def _external_id(_s, name, value):
    if not value.strip():
        return f"{name} must not be empty"
    if len(value) > _EXTERNAL_ID_LENGTH:
        return f"{name} must be at most {_EXTERNAL_ID_LENGTH} characters"
    return None


def _hours(_s, name, value):
    return None if value is None or value > 0 else f"{name} must be greater than 0"


def _proxy_addresses(_s, name, value):
    for item in value:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            return (f"{name} must list IP addresses or networks, as the service "
                    f"sees its proxies (e.g. 10.0.0.5, 10.0.0.0/24, ::1); "
                    f"{item[:60]!r} is neither")
    return None


def _needs_proxy(s, name) -> Optional[str]:
    # waitress refuses these without a trusted proxy too: alone they would
    # look like they do something and do nothing.
    if s.explicit(name) and not s.trusted_proxy:
        return (f"{name} has no effect without trusted_proxy; give the "
                "proxies' addresses in trusted_proxy")
    return None


def _proxy_headers(s, name, value):
    unknown = [h for h in value if h.lower() not in PROXY_HEADERS]
    if unknown or not value:
        return (f"{name} must name one or more of {', '.join(PROXY_HEADERS)}"
                + (f", not {unknown[0][:40]!r}" if unknown else ""))
    lowered = {h.lower() for h in value}
    if "forwarded" in lowered and len(lowered) > 1:
        return (f"{name} must name either forwarded (RFC 7239) or "
                "x-forwarded-* headers, not both (a proxy sends one kind)")
    return _needs_proxy(s, name)


def _proxy_count(s, name, value):
    return _at_least(1)(s, name, value) or _needs_proxy(s, name)


RULES: dict[str, Callable[[Settings, str, Any], Optional[str]]] = {
    "host": _host,
    "port": _port,
    "db": _db,
    "auth": _one_of(AUTH_MODES),
    "workers": _at_least(1),
    "threads": _at_least(1),
    "policy_profile": _one_of(POLICY_PROFILES),
    "policy_file": _readable_file,
    "cors_allowed_origin": _non_empty_items,
    "cors_allow_headers": _non_empty_items,
    "cors_expose_headers": _non_empty_items,
    "cors_allow_methods": _methods,
    "cors_max_age": _at_least(0),
    "incomplete_consumer_project_id": _external_id,
    "incomplete_consumer_user_id": _external_id,
    "log_format": _one_of(LOG_FORMATS),
    "log_level": _log_level,
    "max_body_bytes": _positive,
    "max_query_params": _at_least(1),
    "metrics_quota_top_n": _at_least(0),
    "max_allocation_candidates": _candidates_bound,
    "quota_model": _one_of(QUOTA_MODELS),
    "quota_service_type": _non_empty,
    "quota_region_id": _non_empty,
    "quota_resource_usage": _usage_map,
    "keystone_config_file": _readable_file,
    "lease_policy_filters": _non_empty_items,
    "lease_max_duration_hours": _hours,
    "lease_max_amount": _amounts,
    "lease_token": _non_empty,
    "db_pool_size": _at_least(1),
    "db_max_overflow": _or_minus_one(0, "no bound"),
    "db_pool_timeout": _positive,
    "db_recycle_seconds": _or_minus_one(1, "never"),
    "db_retries": _at_least(0),
    "shutdown_timeout": _at_least(0),
    "connection_limit": _at_least(1),
    "channel_timeout": _at_least(1),
    "backlog": _at_least(1),
    "trusted_proxy": _proxy_addresses,
    "trusted_proxy_headers": _proxy_headers,
    "trusted_proxy_count": _proxy_count,
    "facts_check_seconds": _at_least(0),
    "noauth2_default_token": _non_empty,
}


def check_value(settings: Settings, name: str, value: Any) -> Optional[str]:
    """Why `value` is not allowed for the setting `name`, or None."""
    rule = RULES.get(name)
    return rule(settings, name, value) if rule else None
