"""`placement-lite config show`: every setting's value and the source it
came from, read exactly as `serve` with the same options would read them,
then what was read of Placement's configuration and the lines start-up
logs about it. Nothing is opened but the files."""
from __future__ import annotations

import logging

from placement_lite.config import PLACEMENT_DEFAULT, Settings


def origin(settings: Settings, name: str) -> str:
    """Where the setting's value came from, without the value."""
    src = settings.source(name)
    if src is None:
        return "default"
    if src.kind == "flag":
        return src.where
    if src.kind == "environment":
        return f"{src.where} (environment)"
    if src.kind == "file":
        return f"{src.alias or name} in {src.where}"
    if src.where == PLACEMENT_DEFAULT:
        return f"Placement's default for {src.option} (a placement.conf is read)"
    if src.where.startswith("OS_"):
        return f"{src.where} (environment: Placement's {src.option})"
    return f"{src.option} in {src.where}"


def render(settings: Settings) -> str:
    names = settings.field_names()
    width = max(map(len, names))
    lines = [f"{'setting':<{width}}  value  <- source"]
    for name in names:
        value = getattr(settings, name)
        shown = "none" if value is None or value in ((), {}) else settings.shown(name)
        lines.append(f"{name:<{width}}  {shown}  <- {origin(settings, name)}")
    deployment = settings.deployment
    if deployment is None or not (deployment.files or deployment.notes
                                  or deployment.keystone_options):
        lines.append("\nPlacement's configuration: none read")
        return "\n".join(lines) + "\n"
    lines.append("\nPlacement's configuration, lowest first (later files win):")
    lines += [f"  {path}" for path in deployment.files] or ["  (no file)"]
    if deployment.keystone_options:
        lines.append("[keystone_authtoken], handed to keystonemiddleware as it is: "
                     + ", ".join(deployment.keystone_options))
    for level, text in deployment.notes:
        lines.append(f"{logging.getLevelName(level).lower()}: {text}")
    return "\n".join(lines) + "\n"
