"""placement_conf.py's reading, once oslo.config has parsed the files:
each option of the table (placement_conf_table.py) turned into a setting,
a log line or a refusal, and every option the files or the environment
hold that is not read named for the start-up log."""
from __future__ import annotations

import logging
from typing import Any, Mapping

from placement_lite import placement_conf_table as table
from placement_lite.config_sources import nearest
from placement_lite.placement_conf import KEYSTONE, PLACEMENT_DEFAULT, Given

INFO, WARNING = logging.INFO, logging.WARNING


def _group_of(section: str) -> str:
    # oslo.config reads group names case-insensitively, but for DEFAULT.
    return section if section == "DEFAULT" else section.lower()


def _expects(opt) -> str:
    """What an option accepts, in the words our own refusals use."""
    from oslo_config import types
    kind = opt.type
    if getattr(kind, "choices", None):
        return "must be one of " + ", ".join(str(c) for c in kind.choices)
    if isinstance(kind, types.Boolean):
        return "must be true or false"
    if isinstance(kind, types.Integer):
        return "must be a whole number"
    if isinstance(kind, types.Float):
        return "must be a number"
    return "is not a value this option takes"


class Reader:
    def __init__(self, conf, parsed: list, env: Mapping, environ: Mapping[str, str]):
        self.conf = conf
        self.parsed = parsed            # [(path, {section: {option: [values]}})]
        self.env = env                  # OS_* variable -> (group, option)
        self.environ = environ
        self.known = table.known()
        self.problems: list[str] = []
        self.notes: list[tuple[int, str]] = []
        self.keystone_environment: dict[str, str] = {}
        self.keystone_names: list[str] = []     # the section's options given
        # (group, option) -> the OS_* variable that set it
        self.from_env: dict[tuple[str, str], str] = {}

    # -- values -------------------------------------------------------------

    def _raw(self, group: str, entry) -> tuple[Any, str]:
        """(the value as written, where) of the last place that sets it."""
        var = self.from_env.get((group, entry.opt.dest))
        if var:
            return self.environ[var], var
        names = [(group, entry.opt.dest)] + [
            (old.group or group, old.name or entry.opt.dest)
            for old in entry.opt.deprecated_opts]
        for path, sections in reversed(self.parsed):
            for section, options in sections.items():
                for g, name in names:
                    if _group_of(section) == g and name in options:
                        return options[name][-1], path
        return None, ""

    def _value(self, group: str, entry) -> tuple[bool, Any]:
        """(whether the operator set it, its value); a refusal is recorded
        when the value is not of the option's kind."""
        from oslo_config import cfg
        oslo_group = None if group == "DEFAULT" else group
        try:
            value = self.conf[oslo_group][entry.opt.dest] if oslo_group \
                else self.conf[entry.opt.dest]
            location = self.conf.get_location(entry.opt.dest, oslo_group)
        except (ValueError, cfg.Error):
            raw, where = self._raw(group, entry)
            self.problems.append(f"[{group}] {entry.opt.dest} = {raw} (in {where}): "
                                 f"{_expects(entry.opt)}")
            return False, None
        set_here = ((group, entry.opt.dest) in self.from_env
                    or (location is not None
                        and location.location == cfg.Locations.user))
        return set_here, value

    def _environment(self) -> None:
        """The OS_<GROUP>__<OPTION> variables, over the files' values."""
        for var, (group, option) in sorted(self.env.items()):
            raw = self.environ[var]
            if group == KEYSTONE:
                self.keystone_environment[option] = raw
                continue
            found = self.known.get((group, option))
            if found is None or isinstance(found[1].handling, table.Ignore):
                continue  # named by unsupported()
            real, entry = found
            try:
                self.conf.set_override(entry.opt.dest, raw,
                                       None if real == "DEFAULT" else real)
            except ValueError:
                self.problems.append(f"{var}={raw} (environment): {_expects(entry.opt)}")
                continue
            self.from_env[(real, entry.opt.dest)] = var

    def settings(self) -> list[Given]:
        self._environment()
        given: list[Given] = []
        for group, entries in table.ENTRIES.items():
            for entry in entries:
                handling = entry.handling
                if isinstance(handling, table.Ignore) or entry.opt.dest in (
                        "connection_parameters", "policy_file"):
                    continue  # not read, or read with the option they belong to
                set_here, value = self._value(group, entry)
                label = f"[{group}] {entry.opt.dest}"
                raw, where = self._raw(group, entry)
                if isinstance(handling, table.Accept):
                    if set_here:
                        unlike = handling.unlike(value)
                        self.notes.append((WARNING if unlike else INFO,
                                           f"{label} = {raw} ({self._in(where)}): "
                                           f"{'not supported' if unlike else 'accepted'}"
                                           f"; {handling.why(value)}"))
                    continue
                if set_here:
                    given.append(Given(handling.setting, handling.convert(value),
                                       label, where, raw))
                elif handling.placement_default and self.parsed:
                    default = entry.opt.default
                    shown = ",".join(default) if isinstance(default, list) else default
                    given.append(Given(handling.setting, handling.convert(default),
                                       label, PLACEMENT_DEFAULT, shown))
        return self._database(given) + self._policy_file()

    @staticmethod
    def _in(where: str) -> str:
        return "environment" if where.startswith("OS_") else f"in {where}"

    def _database(self, given: list[Given]) -> list[Given]:
        """[placement_database] connection, with connection_parameters
        added to its query as oslo.db adds them."""
        db = next((g for g in given if g.setting == "db"), None)
        if db is None:
            return given
        _set, extra = self._value("placement_database", self._entry(
            "placement_database", "connection_parameters"))
        if not extra:
            return given
        url = db.value + ("&" if "?" in db.value else "?") + extra
        return [g if g is not db else Given("db", url, db.option, db.where, url)
                for g in given]

    def _entry(self, group: str, name: str):
        return self.known[(group, name)][1]

    def _policy_file(self) -> list[Given]:
        """[oslo_policy] policy_file, found as oslo.policy finds it: as
        given, or beside the configuration files, or in Placement's
        directories. Missing, Placement goes on with the defaults; so do we."""
        entry = self._entry("oslo_policy", "policy_file")
        set_here, value = self._value("oslo_policy", entry)
        if value is None or not (set_here or self.parsed):
            return []
        found = self.conf.find_file(value)
        raw, where = self._raw("oslo_policy", entry)
        label = "[oslo_policy] policy_file"
        if found:
            return [Given("policy_file", found, label,
                          where if set_here else PLACEMENT_DEFAULT, raw or value)]
        if set_here:
            self.notes.append((WARNING, f"{label} = {raw} ({self._in(where)}): no such "
                               "file beside the configuration files or in Placement's "
                               "directories; as Placement does, the default rules apply"))
        return []

    # -- what is not read ---------------------------------------------------

    def unsupported(self) -> list[tuple[int, str]]:
        """A line for each option given that nothing reads."""
        lines = []
        for path, sections in self.parsed:
            for section, options in sections.items():
                if options:
                    lines += self._section(_group_of(section), list(options), f"in {path}")
        for var, (group, option) in sorted(self.env.items()):
            if group != KEYSTONE:
                lines += self._section(group, [option], f"{var}, environment")
        return lines + self._keystone()

    def _section(self, group: str, options: list, where: str) -> list:
        if group == KEYSTONE:
            return []
        lines, rest = [], []
        for option in options:
            found = self.known.get((group, option))
            if found is None:
                rest.append(option)
            elif isinstance(found[1].handling, table.Ignore):
                lines.append((WARNING, f"[{group}] {option} ({where}): not supported "
                              f"here, ignored; {found[1].handling.why}"))
        if not rest:
            return lines
        names = ", ".join(rest)
        if group in table.IGNORED_SECTIONS:
            lines.append((WARNING, f"[{group}] {names} ({where}): not supported here, "
                          f"ignored; {table.IGNORED_SECTIONS[group]}"))
        elif group in table.ENTRIES:
            ours = [e.opt.dest for e in table.ENTRIES[group]]
            for option in rest:
                near = nearest(option, ours)
                hint = f" (did you mean {near}?)" if near else ""
                lines.append((WARNING, f"[{group}] {option} ({where}): Placement has "
                              f"no such option; ignored{hint}"))
        else:
            lines.append((WARNING, f"[{group}] {names} ({where}): neither Placement "
                          f"nor placement-lite reads a section [{group}]; ignored"))
        return lines

    def _keystone_options(self) -> list:
        """keystonemiddleware's [keystone_authtoken] options and the auth
        plugin's; None when keystonemiddleware is not installed (--auth
        keystone then refuses to start, saying so)."""
        try:
            from keystoneauth1 import loading
            from keystonemiddleware import opts as km_opts
        except ImportError:
            return None
        options = [o for _g, group in km_opts.list_auth_token_opts() for o in group]
        options += loading.get_auth_common_conf_options()
        auth_type = self._keystone_auth_type()
        if auth_type:
            try:
                options += loading.get_auth_plugin_conf_options(auth_type)
            except Exception:  # noqa: BLE001 - keystoneauth's NoMatchingPlugin
                self.problems.append(
                    f"[{KEYSTONE}] auth_type = {auth_type}: no keystoneauth plugin "
                    "of that name is installed (e.g. password, v3password, admin_token)")
        return options

    def _keystone(self) -> list:
        """The section as keystonemiddleware will read it, checked now: a
        line per place naming the options nothing reads, and a refusal for
        a value of the wrong kind (auth_token would fail on it later, some
        only at the first request)."""
        places = {}
        for path, sections in self.parsed:
            for section, options in sections.items():
                if _group_of(section) == KEYSTONE:
                    places.setdefault(f"in {path}", []).extend(options)
        if self.keystone_environment:
            places["environment"] = list(self.keystone_environment)
        self.keystone_names = sorted({n for names in places.values() for n in names})
        options = self._keystone_options() if places else None
        if not options:
            return []
        by_name = {}
        for opt in options:
            for name in (opt.dest, opt.name, *(d.name for d in opt.deprecated_opts)):
                if name:
                    by_name[name.replace("-", "_")] = opt
        self.conf.register_opts(list({id(o): o for o in options}.values()), group=KEYSTONE)
        lines = []
        for place, names in places.items():
            unknown = [n for n in dict.fromkeys(names) if n.replace("-", "_") not in by_name]
            if unknown:
                lines.append((WARNING, f"[{KEYSTONE}] {', '.join(unknown)} ({place}): "
                              "neither keystonemiddleware nor the auth plugin has "
                              "such an option; ignored"))
            for name in dict.fromkeys(names):
                opt = by_name.get(name.replace("-", "_"))
                if opt is not None:
                    self._keystone_value(opt, name, place)
        return lines

    def _keystone_value(self, opt, name: str, place: str) -> None:
        from oslo_config import cfg
        try:
            if place == "environment":
                opt.type(self.keystone_environment[name])
            else:
                self.conf[KEYSTONE][opt.dest]
        except (ValueError, cfg.Error):
            raw = self.keystone_environment.get(name) if place == "environment" else next(
                (options[name][-1] for _p, sections in reversed(self.parsed)
                 for section, options in sections.items()
                 if _group_of(section) == KEYSTONE and name in options), "")
            where = ("OS_KEYSTONE_AUTHTOKEN__" + name.upper() + ", environment"
                     if place == "environment" else place)
            self.problems.append(f"[{KEYSTONE}] {name} = {raw} ({where}): "
                                 f"{_expects(opt)}")

    def _keystone_auth_type(self):
        if "auth_type" in self.keystone_environment:
            return self.keystone_environment["auth_type"]
        for _path, sections in reversed(self.parsed):
            for section, options in sections.items():
                if _group_of(section) == KEYSTONE:
                    for name in ("auth_type", "auth_plugin"):
                        if name in options:
                            return options[name][-1]
        return None
