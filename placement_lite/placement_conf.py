"""OpenStack Placement's own configuration, read with oslo.config as
Placement reads it, into our settings: placement.conf files (later files
win, as in oslo.config, and a --config-dir's *.conf after them, in name
order) and Placement's environment form, OS_<GROUP>__<OPTION> (as kolla and
Helm charts set it), which wins over the files.

placement_conf_table.py says what each option becomes. What this module
returns ranks below our own sources (config.py: flags > PLACEMENT_LITE_*
> our YAML > this > defaults). An option set to a value of the wrong kind
is refused in one line naming it; one we accept but that changes nothing,
or one we do not support, or one Placement does not have, becomes a line
for the start-up log (Deployment.notes), never a silent drop.

[keystone_authtoken] is left whole to keystonemiddleware: api/keystone.py
hands it an oslo.config object over the same files (Deployment.files),
with the section's OS_KEYSTONE_AUTHTOKEN__* variables on top.
"""
from __future__ import annotations

import glob
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Mapping

PLACEMENT_DEFAULT = "Placement's default"
KEYSTONE = "keystone_authtoken"


@dataclass(frozen=True)
class Given:
    """One setting's value from Placement's configuration: `option` is
    "[group] name"; `where` a file, an OS_* variable or PLACEMENT_DEFAULT;
    `raw` the value as written there."""
    setting: str
    value: Any
    option: str
    where: str
    raw: Any


@dataclass(frozen=True)
class Deployment:
    """What was read: every file in the order read, the directories given,
    the OS_KEYSTONE_AUTHTOKEN__* options (name -> value) and the lines for
    the start-up log ((logging level, text), in order); `keystone_options`
    names the [keystone_authtoken] options given, for `config show`."""
    files: tuple = ()
    dirs: tuple = ()
    keystone_environment: Mapping = field(default_factory=dict)
    notes: tuple = ()
    keystone_options: tuple = ()


def environment_form(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Each OS_<GROUP>__<OPTION> variable -> (group, option), spelled as in
    a file ([DEFAULT] keeps its capitals, other groups are lower case)."""
    found = {}
    for key in environ:
        if not key.startswith("OS_") or "__" not in key:
            continue
        group, _, option = key[3:].partition("__")
        if group and option:
            found[key] = (group if group == "DEFAULT" else group.lower(), option.lower())
    return found


def wsgi_sources(environ: Mapping[str, str]) -> tuple[list, list]:
    """Where Placement's WSGI application finds its configuration:
    $OS_PLACEMENT_CONFIG_DIR/placement.conf, or else oslo.config's default
    places for the project `placement` (~/.placement/, ~/, /etc/placement/,
    /etc/), and the placement.conf.d directories beside them. Returns
    ([(file, how it was found)], [(directory, how)])."""
    from oslo_config import cfg

    directory = environ.get("OS_PLACEMENT_CONFIG_DIR", "").strip()
    dirs = [(d, "a placement.conf.d directory") for d in
            cfg.find_config_dirs(project="placement", prog="placement")]
    if directory:
        given = f"OS_PLACEMENT_CONFIG_DIR={directory} (environment)"
        return [(os.path.join(directory, "placement.conf"), given)], dirs
    found = dict.fromkeys(cfg.find_config_files(project="placement", prog="placement"))
    return [(path, "found in Placement's default places") for path in found], dirs


def _expand(files, dirs) -> list[tuple[str, str]]:
    """(path, how given) for every file, as oslo.config reads them: the
    files, then each directory's *.conf in name order."""
    from placement_lite.config import SettingsError
    ordered = []
    for path, given in files:
        if not os.path.isfile(path):
            what = "no such file" if not os.path.exists(path) else "not a file"
            raise SettingsError(f"{given}: {what}: {path}; give the path of "
                                "Placement's placement.conf (or of a YAML settings file)")
        ordered.append((os.path.abspath(path), given))
    for directory, given in dirs:
        if not os.path.isdir(directory):
            raise SettingsError(f"{given}: no such directory: {directory}")
        for path in sorted(glob.glob(os.path.join(directory, "*.conf"))):
            ordered.append((os.path.abspath(path), given))
    return ordered


def _parse(path: str, given: str) -> dict:
    """The file's sections as written: {section: {option: [values]}}."""
    from oslo_config import cfg

    from placement_lite.config import SettingsError
    sections: dict = {}
    try:
        cfg.ConfigParser(path, sections).parse()
    except cfg.ParseError as exc:
        raise SettingsError(f"{given}: {path} is not an ini file Placement could "
                            f"read ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{given}: {path} is not UTF-8 text") from None
    except OSError as exc:
        raise SettingsError(f"{given}: cannot read {path} ({exc.strerror}); "
                            "fix its permissions") from None
    return sections


@contextmanager
def _oslo_warnings():
    """oslo.config's own warnings (an option under a deprecated name, say),
    kept for the start-up log instead of printed before logging is set up."""
    logger = logging.getLogger("oslo_config.cfg")
    kept: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            kept.append(record.getMessage())

    handler, propagate = Keep(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield kept
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def read(files: list, dirs: list, environ: Mapping[str, str]
         ) -> tuple[list[Given], Deployment]:
    """Placement's configuration from `files` and `dirs` ([(path, how the
    operator gave it)], for messages) and the OS_<GROUP>__<OPTION>
    variables of `environ`. SettingsError (config.py) names every value
    that is not of its option's kind."""
    from placement_lite.config import SettingsError

    ordered = _expand(files, dirs)
    env = environment_form(environ)
    if not ordered and not env:
        return [], Deployment()
    # oslo.config only when there is something of Placement's to read.
    from oslo_config import cfg

    from placement_lite import placement_conf_read as reader
    from placement_lite import placement_conf_table as table
    parsed = [(path, _parse(path, given)) for path, given in ordered]
    conf = cfg.ConfigOpts()
    table.register(conf)
    with _oslo_warnings() as warned:
        try:
            conf([], project="placement", prog="placement",
                 default_config_files=[path for path, _ in ordered],
                 default_config_dirs=[], use_env=False)
        except cfg.Error as exc:
            raise SettingsError(f"Placement's configuration: {exc}") from None
        state = reader.Reader(conf, parsed, env, environ)
        given = state.settings()
        unread = state.unsupported()
    if state.problems:
        raise SettingsError("; ".join(state.problems))
    notes = state.notes + [(logging.WARNING, f"Placement's configuration: {text}")
                           for text in warned] + unread
    deployment = Deployment(files=tuple(path for path, _ in ordered),
                            dirs=tuple(d for d, _ in dirs),
                            keystone_environment=state.keystone_environment,
                            notes=tuple(notes),
                            keystone_options=tuple(state.keystone_names))
    return given, deployment
