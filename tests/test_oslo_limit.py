"""An unmodified oslo.limit Enforcer against a real placement-lite server.

oslo.limit is configured as a service would configure it for Keystone,
with auth_type = none, endpoint_override pointing at our /v3 and the
endpoint id registered here; it discovers its service and region from
the endpoint, reads the model, the registered limits and the project
limits, and enforces with a usage callback.
"""
from __future__ import annotations

import uuid

import pytest
import requests
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_limit import exception as limit_exc
from oslo_limit import limit as limit_mod
from oslo_limit import opts as limit_opts

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.live import served

ADMIN = {"x-auth-token": "admin", "content-type": "application/json"}


@pytest.fixture(params=[True], ids=["public-read"])
def public_read(request):
    return request.param


@pytest.fixture(params=["legacy"])
def policy_profile(request):
    return request.param


@pytest.fixture
def server(db, public_read, policy_profile):
    settings = Settings(db=db.url, quota_limits_public_read=public_read,
                        policy_profile=policy_profile)
    with served(create_app(settings, db)) as base:
        yield base


@pytest.fixture
def conf(monkeypatch):
    # A private ConfigOpts: oslo.limit reads its module-level CONF, and the
    # SDK connection it caches must not outlive the test's server.
    conf = cfg.ConfigOpts()
    conf([], project="placement-lite-test")
    monkeypatch.setattr(limit_opts, "CONF", conf)
    monkeypatch.setattr(limit_mod, "CONF", conf)
    limit_opts.register_opts(conf)
    monkeypatch.setattr(limit_mod, "_SDK_CONNECTION", None)
    yield conf


def post(base, path, body):
    resp = requests.post(base + path, json=body, headers=ADMIN, timeout=10)
    assert resp.status_code == 201, resp.text
    return resp.json()


def configure(conf, base, endpoint_id):
    conf.set_override("auth_type", "none", group="oslo_limit")
    conf.set_override("endpoint_override", base + "/v3", group="oslo_limit")
    conf.set_override("endpoint_id", endpoint_id, group="oslo_limit")


def test_oslo_limit_flat_enforcer(server, conf):
    service = post(server, "/v3/services",
                   {"service": {"type": "compute", "name": "nova"}})["service"]
    post(server, "/v3/regions", {"region": {"id": "RegionOne"}})
    endpoint = post(server, "/v3/endpoints", {"endpoint": {
        "service_id": service["id"], "region_id": "RegionOne",
        "interface": "public", "url": "http://nova.example.com/"}})["endpoint"]
    post(server, "/v3/registered_limits", {"registered_limits": [
        {"service_id": service["id"], "region_id": "RegionOne",
         "resource_name": "cores", "default_limit": 10},
        {"service_id": service["id"], "region_id": "RegionOne",
         "resource_name": "ram_mb", "default_limit": -1}]})
    project = uuid.uuid4().hex
    post(server, "/v3/projects", {"project": {"id": project, "name": "p"}})
    post(server, "/v3/limits", {"limits": [
        {"project_id": project, "service_id": service["id"],
         "region_id": "RegionOne", "resource_name": "cores",
         "resource_limit": 4}]})
    # Writes still need a token with the public-read setting on.
    assert requests.post(server + "/v3/limits", json={},
                         timeout=10).status_code == 401
    configure(conf, server, endpoint["id"])

    usage = {"cores": 3, "ram_mb": 10 ** 6}
    enforcer = limit_mod.Enforcer(
        lambda project_id, names: {n: usage.get(n, 0) for n in names},
        cache=False)
    enforcer.enforce(project, {"cores": 1, "ram_mb": 10 ** 6})
    with pytest.raises(limit_exc.ProjectOverLimit) as info:
        enforcer.enforce(project, {"cores": 2})
    over = info.value.over_limit_info_list[0]
    assert (over.resource_name, over.limit, over.current_usage,
            over.delta) == ("cores", 4, 3, 2)
    # Another project gets the registered default of 10.
    enforcer.enforce(uuid.uuid4().hex, {"cores": 7})
    # Unregistered resources are refused by oslo.limit (limit 0).
    with pytest.raises(limit_exc.ProjectOverLimit):
        enforcer.enforce(project, {"gpus": 1})
    limits = dict(enforcer.get_project_limits(project, ["cores", "ram_mb"]))
    assert limits == {"cores": 4, "ram_mb": -1}
    usage_report = enforcer.calculate_usage(project, ["cores"])
    assert usage_report["cores"].limit == 4


def test_model_document_matches_what_oslo_limit_reads(server, conf):
    # oslo.limit reads model.name from GET <endpoint>/limits/model.
    resp = requests.get(server + "/v3/limits/model", timeout=10)
    assert resp.status_code == 200
    assert resp.json()["model"]["name"] == "flat"
    # Writes stay closed even with the public-read setting.
    resp = requests.post(server + "/v3/registered_limits",
                         json={"registered_limits": []}, timeout=10)
    assert resp.status_code == 401


# Under secure-rbac the endpoint oslo.limit looks up is the admin's or a
# system reader's (Keystone's identity:get_endpoint), not a project's.
@pytest.mark.parametrize("policy_profile", ["legacy", "secure-rbac"])
@pytest.mark.parametrize("public_read", [False], ids=["token"])
def test_oslo_limit_with_a_token_needs_no_public_reads(server, conf):
    """auth_type = admin_token sends a static token (noauth2's admin here),
    so the limit reads can stay behind auth."""
    service = post(server, "/v3/services",
                   {"service": {"type": "compute"}})["service"]
    endpoint = post(server, "/v3/endpoints", {"endpoint": {
        "service_id": service["id"], "interface": "public",
        "url": "http://nova.example.com/"}})["endpoint"]
    post(server, "/v3/registered_limits", {"registered_limits": [
        {"service_id": service["id"], "resource_name": "cores",
         "default_limit": 2}]})
    assert requests.get(server + "/v3/limits/model",
                        timeout=10).status_code == 401
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"),
                       group="oslo_limit")
    conf.set_override("auth_type", "admin_token", group="oslo_limit")
    conf.set_override("endpoint", server + "/v3", group="oslo_limit")
    conf.set_override("token", "admin", group="oslo_limit")
    conf.set_override("endpoint_override", server + "/v3", group="oslo_limit")
    conf.set_override("endpoint_id", endpoint["id"], group="oslo_limit")
    enforcer = limit_mod.Enforcer(lambda project_id, names: {n: 1 for n in names},
                                  cache=False)
    enforcer.enforce("any-project", {"cores": 1})
    with pytest.raises(limit_exc.ProjectOverLimit):
        enforcer.enforce("any-project", {"cores": 2})
