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
                                                            "strict_two_level")}


def _serve_actions():
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = sub.choices["serve"]
    return [a for a in serve._actions
            if a.dest not in ("help", "config_file") and a.option_strings]


def _sample(name):
    if name in _CHOICES:
        return _CHOICES[name]
    if name == "keystone_authtoken":
        return "{auth_url: 'http://k'}", {"auth_url": "http://k"}
    default = Settings()
    value = getattr(default, name)
    kind = type(value) if value is not None else str
    return _SAMPLES[bool if kind is bool else kind]


def test_every_serve_flag_is_a_setting():
    names = set(Settings.field_names())
    missing = [a.dest for a in _serve_actions() if a.dest not in names]
    assert not missing, f"flags without a setting: {missing}"


@pytest.mark.parametrize("name", sorted({a.dest for a in _serve_actions()}))
def test_every_serve_flag_reads_its_environment_variable(name):
    raw, expected = _sample(name)
    settings = load_settings({}, environ={ENV_PREFIX + name.upper(): raw})
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
    path.write_text("metrics_enabled: true\n")
    assert load_settings({}, environ={ENV_PREFIX + "CONFIG_FILE": str(path)}).metrics_enabled
    path.write_text("no_such_setting: 1\n")
    with pytest.raises(ValueError, match="no_such_setting"):
        load_settings({"config_file": str(path)}, environ={})


def test_bad_values_are_refused():
    with pytest.raises(ValueError):
        load_settings({}, environ={ENV_PREFIX + "METRICS_ENABLED": "perhaps"})
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
    assert s.workers == 3 and s.metrics_enabled is True
    assert s.cors_allowed_origin == ("https://a.example", "https://b.example")
    assert s.cors_allow_headers == ("X-Auth-Token", "Content-Type")
    assert s.keystone_authtoken == {"auth_url": "http://k:5000/v3",
                                    "www_authenticate_uri": "http://k/"}


def test_an_unset_boolean_flag_leaves_the_environment_in_charge(monkeypatch):
    seen = []
    monkeypatch.setenv(ENV_PREFIX + "METRICS_ENABLED", "true")
    monkeypatch.setattr("placement_lite.server.serve",
                        lambda settings: seen.append(settings) or 0)
    monkeypatch.setattr("placement_lite.logs.configure", lambda *a, **k: None)
    assert cli.main(["serve", "--db", "sqlite://"]) == 0
    assert cli.main(["serve", "--db", "sqlite://", "--no-metrics"]) == 0
    assert [s.metrics_enabled for s in seen] == [True, False]


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
