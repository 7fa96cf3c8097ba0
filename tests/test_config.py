"""Settings: every `serve` flag is also PLACEMENT_LITE_<NAME>; precedence."""
from __future__ import annotations

import argparse

import pytest

from placement_lite import cli
from placement_lite.config import ENV_PREFIX, Settings, load_settings

# A value per type of setting, written as an operator would in the environment.
_SAMPLES = {bool: ("true", True), int: ("7", 7), float: ("2.5", 2.5),
            tuple: ("a, b", ("a", "b")), str: ("x", "x")}
_CHOICES = {"auth": ("keystone", "keystone"), "policy_profile": ("open", "open"),
            "log_format": ("json", "json"), "quota_model": ("strict_two_level",
                                                            "strict_two_level"),
            "log_level": ("debug", "DEBUG"), "db": ("sqlite:///x.db", "sqlite:///x.db"),
            # Files must exist: this one does.
            "policy_file": (__file__, __file__),
            "keystone_config_file": (__file__, __file__),
            "trusted_proxy": ("10.0.0.5, 10.1.0.0/16", ("10.0.0.5", "10.1.0.0/16")),
            "trusted_proxy_headers": ("x-forwarded-proto,X-Forwarded-For",
                                      ("x-forwarded-proto", "X-Forwarded-For"))}
# Settings that mean something only beside another: that one's variable.
_COMPANIONS = {"trusted_proxy_headers": {ENV_PREFIX + "TRUSTED_PROXY": "10.0.0.5"},
               "trusted_proxy_count": {ENV_PREFIX + "TRUSTED_PROXY": "10.0.0.5"}}


def _serve_actions():
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = sub.choices["serve"]
    return [a for a in serve._actions
            if a.dest not in ("help", "config_file", "config_dir") and a.option_strings]


def _sample(name):
    if name in _CHOICES:
        return _CHOICES[name]
    if name == "keystone_authtoken":
        return "{auth_url: 'http://k'}", {"auth_url": "http://k"}
    import typing

    from placement_lite.config_rules import field_type
    kind = field_type(typing.get_type_hints(Settings)[name])
    return _SAMPLES[kind]


def test_every_serve_flag_is_a_setting():
    names = set(Settings.field_names())
    missing = [a.dest for a in _serve_actions() if a.dest not in names]
    assert not missing, f"flags without a setting: {missing}"


@pytest.mark.parametrize("name", sorted({a.dest for a in _serve_actions()}))
def test_every_serve_flag_reads_its_environment_variable(name):
    raw, expected = _sample(name)
    settings = load_settings({}, environ={ENV_PREFIX + name.upper(): raw,
                                          **_COMPANIONS.get(name, {})})
    assert getattr(settings, name) == expected


def test_precedence_cli_over_environment_over_file(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("port: 1111\nthreads: 3\nworkers: 5\n")
    settings = load_settings({"port": 3333, "config_file": str(path)},
                             environ={ENV_PREFIX + "PORT": "2222",
                                      ENV_PREFIX + "THREADS": "4"})
    assert (settings.port, settings.threads, settings.workers) == (3333, 4, 5)


def test_config_file_from_environment_and_unknown_keys(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("metrics: true\n")
    assert load_settings({}, environ={ENV_PREFIX + "CONFIG_FILE": str(path)}).metrics
    path.write_text("no_such_setting: 1\n")
    with pytest.raises(ValueError, match="no_such_setting"):
        load_settings({"config_file": str(path)}, environ={})


def test_bad_values_are_refused():
    with pytest.raises(ValueError):
        load_settings({}, environ={ENV_PREFIX + "METRICS": "perhaps"})
    with pytest.raises(ValueError):
        load_settings({}, environ={ENV_PREFIX + "WORKERS": "many"})


def test_optional_settings_take_their_declared_type():
    settings = load_settings({}, environ={
        ENV_PREFIX + "LEASE_MAX_DURATION_HOURS": "1.5",
        ENV_PREFIX + "QUOTA_REGION_ID": "r1"})
    assert settings.lease_max_duration_hours == 1.5
    assert settings.quota_region_id == "r1"
    with pytest.raises(ValueError):
        load_settings({}, environ={ENV_PREFIX + "LEASE_MAX_DURATION_HOURS": "long"})


def test_cli_flags_parse_into_settings(monkeypatch):
    seen = {}
    monkeypatch.setattr("placement_lite.server.serve",
                        lambda settings: seen.setdefault("s", settings) and 0)
    monkeypatch.setattr("placement_lite.logs.configure", lambda *a, **k: None)
    code = cli.main(["serve", "--db", "sqlite://", "--workers", "3", "--metrics",
                     "--cors-allowed-origin", "https://a.example",
                     "--cors-allowed-origin", "https://b.example",
                     "--cors-allow-headers", "X-Auth-Token,Content-Type",
                     "--keystone-authtoken", "auth_url=http://k:5000/v3",
                     "--keystone-authtoken", "www_authenticate_uri=http://k/"])
    assert code == 0
    s = seen["s"]
    assert s.workers == 3 and s.metrics is True
    assert s.cors_allowed_origin == ("https://a.example", "https://b.example")
    assert s.cors_allow_headers == ("X-Auth-Token", "Content-Type")
    assert s.keystone_authtoken == {"auth_url": "http://k:5000/v3",
                                    "www_authenticate_uri": "http://k/"}


def test_an_unset_boolean_flag_leaves_the_environment_in_charge(monkeypatch):
    seen = []
    monkeypatch.setenv(ENV_PREFIX + "METRICS", "true")
    monkeypatch.setattr("placement_lite.server.serve",
                        lambda settings: seen.append(settings) or 0)
    monkeypatch.setattr("placement_lite.logs.configure", lambda *a, **k: None)
    assert cli.main(["serve", "--db", "sqlite://"]) == 0
    assert cli.main(["serve", "--db", "sqlite://", "--no-metrics"]) == 0
    assert [s.metrics for s in seen] == [True, False]


def test_malformed_keystone_option_is_a_usage_error(capsys):
    assert cli.main(["serve", "--keystone-authtoken", "novalue"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_default_database_lives_in_the_users_data_directory(tmp_path, monkeypatch):
    """A fresh home has no ~/.local yet; the default still goes there (the
    engine creates the directories), not into whatever directory serve
    happened to be started from."""
    from placement_lite.config import default_db_url

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert default_db_url() == (
        f"sqlite:///{tmp_path}/.local/share/placement-lite/placement-lite.sqlite")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_db_url() == (
        f"sqlite:///{tmp_path}/data/placement-lite/placement-lite.sqlite")


# -- validation: every setting, from every source --------------------------

@pytest.mark.parametrize("name, raw, fragment", [
    ("port", "99999", "port must be between 1 and 65535"),
    ("port", "-1", "port must be between 1 and 65535"),
    ("threads", "0", "threads must be at least 1"),
    ("workers", "0", "workers must be at least 1"),
    ("workers", "-3", "workers must be at least 1"),
    ("max_body_bytes", "-1", "max_body_bytes must be greater than 0"),
    ("max_body_bytes", "0", "max_body_bytes must be greater than 0"),
    ("max_query_params", "0", "max_query_params must be at least 1"),
    ("max_allocation_candidates", "0", "max_allocation_candidates must be at least 1, or -1"),
    ("max_allocation_candidates", "-2", "max_allocation_candidates must be at least 1, or -1"),
    ("db_pool_size", "0", "db_pool_size must be at least 1"),
    ("db_retries", "-1", "db_retries must be at least 0"),
    ("shutdown_timeout", "-5", "shutdown_timeout must be at least 0"),
    ("shutdown_timeout", "nan", "must be a finite number"),
    ("facts_check_seconds", "-1", "facts_check_seconds must be at least 0"),
    ("lease_max_duration_hours", "0", "lease_max_duration_hours must be greater than 0"),
    ("log_level", "LOUD", "log_level must be one of CRITICAL, ERROR, WARNING, INFO, DEBUG"),
    ("log_format", "xml", "log_format must be one of text, json"),
    ("auth", "none", "auth must be one of noauth2, keystone"),
    ("policy_profile", "lax", "policy_profile must be one of legacy, secure-rbac, open"),
    ("quota_model", "three_level", "quota_model must be one of flat, strict_two_level"),
    ("quota_resource_usage", "{cores: VCPU}", "quota_resource_usage[cores] must be"),
    ("lease_max_amount", "{host: -1}", "lease_max_amount[host] must be a number"),
    ("db", "not a url", "db must be a database URL"),
    ("host", "http://0.0.0.0", "host must be an IP address or a host name"),
    ("policy_file", "/no/such/policy.yaml", "no such file: /no/such/policy.yaml"),
    ("keystone_config_file", "/no/such.ini", "no such file"),
    ("noauth2_default_token", " ", "noauth2_default_token must not be empty"),
    ("threads", "eight", "threads must be a whole number"),
    ("metrics", "perhaps", "metrics must be true or false"),
    ("connection_limit", "0", "connection_limit must be at least 1"),
    ("channel_timeout", "0", "channel_timeout must be at least 1"),
    ("channel_timeout", "2.5", "channel_timeout must be a whole number"),
    ("backlog", "0", "backlog must be at least 1"),
    ("trusted_proxy", "proxy.example.com",
     "trusted_proxy must list IP addresses or networks, as the service sees its "
     "proxies (e.g. 10.0.0.5, 10.0.0.0/24, ::1); 'proxy.example.com' is neither"),
    ("trusted_proxy", "10.0.0.0/33", "'10.0.0.0/33' is neither"),
    # Alone, these would look like they do something and do nothing.
    ("trusted_proxy_headers", "forwarded",
     "trusted_proxy_headers has no effect without trusted_proxy; give the "
     "proxies' addresses in trusted_proxy"),
    ("trusted_proxy_count", "2", "trusted_proxy_count has no effect without trusted_proxy"),
    ("trusted_proxy_headers", "x-real-ip",
     "trusted_proxy_headers must name one or more of x-forwarded-proto, "
     "x-forwarded-for, x-forwarded-host, x-forwarded-port, x-forwarded-by, "
     "forwarded, not 'x-real-ip'"),
])
def test_every_bound_is_checked_and_names_its_source(tmp_path, name, raw, fragment):
    env_key = ENV_PREFIX + name.upper()
    with pytest.raises(ValueError) as env_err:
        load_settings({}, environ={env_key: raw})
    assert str(env_err.value).startswith(f"{env_key}={raw} (environment): "), env_err.value
    assert fragment in str(env_err.value)

    if not raw.strip():
        return  # YAML reads a blank value as "not set"
    path = tmp_path / "settings.yaml"
    path.write_text(f"{name}: {raw}\n")
    with pytest.raises(ValueError) as file_err:
        load_settings({"config_file": str(path)}, environ={})
    prefix = f"{name}: {raw} (in {path}): "
    assert str(file_err.value).startswith(prefix), file_err.value
    # The same rule, whatever the source.
    assert (str(file_err.value)[len(prefix):]
            == str(env_err.value)[len(f"{env_key}={raw} (environment): "):])


@pytest.mark.parametrize("argv, message", [
    (["--port", "99999"], "--port 99999: port must be between 1 and 65535"),
    (["--threads", "0"], "--threads 0: threads must be at least 1"),
    (["--max-body-bytes", "-1"], "--max-body-bytes -1: max_body_bytes must be greater than 0"),
    (["--workers", "0"], "--workers 0: workers must be at least 1"),
    (["--workers", "-3"], "--workers -3: workers must be at least 1"),
    (["--log-level", "LOUD"], "--log-level LOUD: log_level must be one of"),
    (["--db-pool-size", "0"], "--db-pool-size 0: db_pool_size must be at least 1"),
    # Flags are read by the settings' own rules, as the environment is.
    (["--port", "abc"], "--port abc: port must be a whole number"),
    (["--shutdown-timeout", "soon"], "--shutdown-timeout soon: shutdown_timeout must be a number"),
])
def test_bad_flags_are_one_line_naming_the_flag(capsys, argv, message):
    assert cli.main(["serve", "--db", "sqlite://", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert err.startswith("placement-lite: cannot start: ")


@pytest.mark.parametrize("argv, fragments", [
    (["serve", "--auth", "nope"], ["--auth", "invalid choice: 'nope'"]),
    (["serve", "--no-such-flag"], ["unrecognized arguments: --no-such-flag"]),
    (["serve", "--port"], ["--port", "expected one argument"]),
    (["nosuchcommand"], ["invalid choice: 'nosuchcommand'"]),
])
def test_usage_errors_are_one_line_not_the_whole_usage(capsys, argv, fragments):
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith("placement-lite"), err
    for fragment in fragments:
        assert fragment in err, err


def test_proxy_headers_are_one_kind_and_mean_something_only_with_a_proxy():
    with pytest.raises(ValueError, match=r"^trusted_proxy_headers=forwarded,"
                       r"x-forwarded-for: trusted_proxy_headers must name either "
                       r"forwarded \(RFC 7239\) or x-forwarded-\* headers, not both"):
        Settings(trusted_proxy=("10.0.0.5",),
                 trusted_proxy_headers=("forwarded", "x-forwarded-for"))
    with pytest.raises(ValueError, match="trusted_proxy_count must be at least 1"):
        Settings(trusted_proxy=("10.0.0.5",), trusted_proxy_count=0)
    with pytest.raises(ValueError, match="must name one or more of"):
        Settings(trusted_proxy=("10.0.0.5",), trusted_proxy_headers=())
    # The defaults, and a header named in any case, are fine.
    assert Settings().trusted_proxy_headers == ("x-forwarded-proto",)
    assert Settings(trusted_proxy=("::1", "10.0.0.0/8"),
                    trusted_proxy_headers=("Forwarded",)).trusted_proxy == ("::1", "10.0.0.0/8")


def test_settings_built_in_code_are_checked_too():
    with pytest.raises(ValueError, match=r"^threads=0: threads must be at least 1$"):
        Settings(threads=0)
    with pytest.raises(ValueError, match="port must be"):
        Settings(port=70000)
    with pytest.raises(ValueError, match="threads must be a whole number"):
        Settings(threads="8")
    with pytest.raises(ValueError, match="metrics must be true or false"):
        Settings(metrics="yes")


def test_several_problems_are_reported_together():
    with pytest.raises(ValueError) as err:
        load_settings({"threads": 0}, environ={ENV_PREFIX + "WORKERS": "0"},
                      flags={"threads": "--threads"})
    assert str(err.value) == ("PLACEMENT_LITE_WORKERS=0 (environment): workers must "
                              "be at least 1; --threads 0: threads must be at least 1")


def test_good_values_pass_and_log_level_is_normalised():
    s = load_settings({}, environ={ENV_PREFIX + "LOG_LEVEL": "debug",
                                   ENV_PREFIX + "PORT": "0"})
    assert s.log_level == "DEBUG" and s.port == 0
    assert Settings(port=65535, threads=1, workers=1, max_body_bytes=1).port == 65535
    # Placement's "no bound".
    assert Settings(max_allocation_candidates=-1).max_allocation_candidates == -1


def test_bad_yaml_and_non_mapping_files_are_refused(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("port: [1\n")
    with pytest.raises(ValueError, match=r"--config-file .*: not valid YAML at line 2"):
        load_settings({"config_file": str(path)}, environ={})
    path.write_text("- port\n")
    with pytest.raises(ValueError, match="must hold a mapping of setting names"):
        load_settings({"config_file": str(path)}, environ={})
    with pytest.raises(ValueError, match=r"PLACEMENT_LITE_CONFIG_FILE=.*: no such file"):
        load_settings({}, environ={ENV_PREFIX + "CONFIG_FILE": str(tmp_path / "nope")})


def test_a_database_password_is_never_echoed():
    with pytest.raises(ValueError) as err:
        load_settings({"db": "mysql+pymysql://u:s3cret@h/db", "threads": 0},
                      environ={})
    assert "s3cret" not in str(err.value)
    settings = load_settings({"db": "mysql+pymysql://u:s3cret@h/db"}, environ={})
    assert "s3cret" not in settings.describe("db")


def test_sources_say_what_the_operator_chose(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("threads: 3\n")
    s = load_settings({"workers": 2, "config_file": str(path)},
                      environ={ENV_PREFIX + "PORT": "9000"},
                      flags={"workers": "--workers"})
    assert s.describe("workers") == "--workers 2"
    assert s.describe("port") == "PLACEMENT_LITE_PORT=9000 (environment)"
    assert s.describe("threads") == f"threads: 3 (in {path})"
    assert s.explicit("workers") and s.explicit("threads")
    assert not s.explicit("quota_enforce")
    # A flag that repeats the default is still the operator's choice.
    s = load_settings({"quota_enforce": False}, environ={},
                      flags={"quota_enforce": "--quota-enforce"})
    assert s.explicit("quota_enforce")
    assert s.describe("quota_enforce") == "--no-quota-enforce"


def test_the_quota_model_choices_are_the_models():
    from placement_lite.config import QUOTA_MODELS
    from placement_lite.quota import models

    assert set(QUOTA_MODELS) == set(models.MODELS)


# -- the command line itself -------------------------------------------------

def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"placement-lite {version('placement-lite')}\n"


def test_version_falls_back_to_setup_py(monkeypatch):
    """Run from a source tree that was never installed."""
    import importlib.metadata
    import pathlib
    import re

    from placement_lite import version

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    setup_py = pathlib.Path(__file__).resolve().parent.parent / "setup.py"
    declared = re.search(r'version="([^"]+)"', setup_py.read_text()).group(1)
    assert version.version() == declared


def _help_entries(text: str) -> dict:
    """Option -> its help text, from argparse's listing (an entry's help
    is on the invocation's line or indented on the lines below it)."""
    entries, current = {}, None
    for line in text.splitlines():
        if line.startswith("  -"):
            invocation, _, rest = line.strip().partition("  ")
            current = entries.setdefault(invocation.split(",")[0].split()[0], [])
            current.append(rest.strip())
        elif current is not None and line.startswith("    ") and line.strip():
            current.append(line.strip())
        else:
            current = None
    return {option: " ".join(p for p in parts if p) for option, parts in entries.items()}


def _expected_default(name: str) -> str:
    value = None if name in ("config_file", "config_dir") else getattr(Settings(), name)
    if value is None or value in ((), {}):
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def test_serve_help_gives_every_option_help_default_and_environment_variable(
        capsys, monkeypatch):
    import re
    # Wide enough that no help line wraps.
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as done:
        cli.main(["serve", "--help"])
    assert done.value.code == 0
    entries = _help_entries(capsys.readouterr().out)
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    options = [a for a in sub.choices["serve"]._actions
               if a.option_strings and a.dest != "help"]
    assert len(options) > 20
    for action in options:
        flag = action.option_strings[0]
        assert flag in entries, f"{flag} is not in serve --help"
        found = re.fullmatch(r"(?P<help>.*\S)\s+\(default: (?P<default>[^;]*); "
                             r"env (?P<env>PLACEMENT_LITE_[A-Z0-9_]+)\)", entries[flag])
        assert found, f"{flag}: {entries[flag]!r}"
        assert len(found["help"]) > 10, f"{flag} has no help of its own"
        assert found["env"] == ENV_PREFIX + action.dest.upper(), flag
        assert found["default"] == _expected_default(action.dest), flag


def test_every_serve_flag_is_spelled_by_its_setting_name():
    """One rule: setting `a_b` is --a-b, PLACEMENT_LITE_<A_B> and `a_b:`."""
    for action in _serve_actions():
        assert action.option_strings[0] == "--" + action.dest.replace("_", "-")


def test_metrics_is_named_like_every_other_setting(tmp_path):
    assert load_settings({}, environ={ENV_PREFIX + "METRICS": "true"}).metrics is True
    path = tmp_path / "settings.yaml"
    path.write_text("metrics: true\n")
    assert load_settings({"config_file": str(path)}, environ={}).metrics is True


def test_the_old_metrics_enabled_spelling_still_works_and_says_so(tmp_path):
    s = load_settings({}, environ={ENV_PREFIX + "METRICS_ENABLED": "true"})
    assert s.metrics is True
    assert s.describe("metrics") == "PLACEMENT_LITE_METRICS_ENABLED=true (environment)"
    assert s.deprecations() == [
        "PLACEMENT_LITE_METRICS_ENABLED is deprecated; use PLACEMENT_LITE_METRICS"]
    path = tmp_path / "settings.yaml"
    path.write_text("metrics_enabled: perhaps\n")
    with pytest.raises(ValueError) as err:
        load_settings({"config_file": str(path)}, environ={})
    assert str(err.value).startswith(f"metrics_enabled: perhaps (in {path}): ")
    path.write_text("metrics_enabled: true\n")
    s = load_settings({"config_file": str(path)}, environ={})
    assert s.metrics is True
    assert s.deprecations() == [f"metrics_enabled (in {path}) is deprecated; use metrics"]
    # The new name wins over the old.
    s = load_settings({}, environ={ENV_PREFIX + "METRICS_ENABLED": "true",
                                   ENV_PREFIX + "METRICS": "false"})
    assert s.metrics is False


def test_the_deprecation_is_logged_when_the_cli_starts(monkeypatch, caplog):
    monkeypatch.setenv(ENV_PREFIX + "METRICS_ENABLED", "true")
    monkeypatch.setattr("placement_lite.server.serve", lambda settings: 0)
    monkeypatch.setattr("placement_lite.logs.configure", lambda *a, **k: None)
    assert cli.main(["serve", "--db", "sqlite://"]) == 0
    assert ("PLACEMENT_LITE_METRICS_ENABLED is deprecated; use PLACEMENT_LITE_METRICS"
            in caplog.text)


def test_an_unknown_environment_variable_is_refused_with_the_nearest_name():
    with pytest.raises(ValueError) as err:
        load_settings({}, environ={ENV_PREFIX + "THRAEDS": "4"})
    # (Spelled in two parts so the repository's scan below does not read
    # the typo as a variable something uses.)
    assert str(err.value) == (
        f"{ENV_PREFIX}THRAEDS (environment): no such setting; did you mean "
        "PLACEMENT_LITE_THREADS?")
    with pytest.raises(ValueError, match="no such setting"):
        load_settings({}, environ={ENV_PREFIX + "QQQ": "1"})


def test_an_unknown_file_key_names_the_nearest_setting(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("thraeds: 4\n")
    with pytest.raises(ValueError, match="thraeds .*did you mean threads"):
        load_settings({"config_file": str(path)}, environ={})


def _variables_named_in_the_repository() -> set:
    import pathlib
    import re
    # Code and scripts: where variables are set and read (the documents
    # also spell typos, to show what is refused).
    root = pathlib.Path(__file__).resolve().parent.parent
    files = []
    for folder in ("placement_lite", "tests", "bench", ".ci"):
        files += [p for p in (root / folder).rglob("*")
                  if p.is_file() and p.suffix in (".py", ".sh", "")]
    names = set()
    for path in files:
        names |= set(re.findall(r"\bPLACEMENT_LITE_[A-Z0-9_]*[A-Z0-9]",
                                path.read_text(errors="replace")))
    return names


def test_every_variable_the_repository_uses_is_a_setting_or_ignored_by_name():
    """The test suite's, CI's and the benchmark's variables are set in the
    environments the service starts in: none may make it refuse."""
    from placement_lite.config import NOT_SETTINGS_ENVIRONMENT
    names = _variables_named_in_the_repository()
    for known in ("PLACEMENT_LITE_TEST_DB_URLS", "PLACEMENT_LITE_COUNT_STATEMENTS",
                  "PLACEMENT_LITE_SAMENESS_SEED", "PLACEMENT_LITE_DIFF_SEED",
                  "PLACEMENT_LITE_CONFORMANCE"):
        assert known in names
    load_settings({}, environ={name: "1" for name in names
                               if name in NOT_SETTINGS_ENVIRONMENT})
    settings = {ENV_PREFIX + n.upper() for n in Settings.field_names()}
    for name in names - settings - {ENV_PREFIX + "CONFIG_FILE",
                                    ENV_PREFIX + "METRICS_ENABLED"}:
        assert name in NOT_SETTINGS_ENVIRONMENT, name
    assert not NOT_SETTINGS_ENVIRONMENT & settings

