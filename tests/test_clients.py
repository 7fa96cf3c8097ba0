"""Real clients against a served instance: the OpenStack CLI with
osc-placement at several microversions, and openstacksdk's placement proxy.

The CLI runs in process (`openstackclient.shell.main`, the function behind
the `openstack` command) to keep the suite fast; one test also runs the
`openstack` executable itself. Both authenticate the way a developer does
against noauth2: `--os-auth-type admin_token --os-token admin`.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

pytest.importorskip("osc_placement")
from openstackclient import shell  # noqa: E402
from osc_lib.clientmanager import ClientManager  # noqa: E402

from placement_lite.app import routes  # noqa: E402
from tests.servers import serve  # noqa: E402

SERVED = {template for template, _r in routes()}
# The clients' own deprecation chatter is not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::FutureWarning")


def needs(template):
    return pytest.mark.skipif(template not in SERVED,
                              reason=f"{template} is not served by this build")


def needs_provider_filter(name):
    from placement_lite.api.resources.resource_providers import PROVIDER_FILTERS
    return pytest.mark.skipif(name not in {f.name for f in PROVIDER_FILTERS},
                              reason=f"GET /resource_providers?{name} is not served yet")


class CLIError(Exception):
    pass


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    path = tmp_path_factory.mktemp("clients") / "clients.sqlite"
    with serve(f"sqlite:///{path}") as srv:
        yield srv


@pytest.fixture
def osc(service):
    def run(*args, version=None, json_out=True):
        argv = ["--os-auth-type", "admin_token", "--os-token", "admin",
                "--os-endpoint", service.base]
        if version:
            argv += ["--os-placement-api-version", version]
        argv += list(args)
        if json_out:
            argv += ["-f", "json"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = shell.main(argv)
        # osc caches each plugin's client on the ClientManager class, which
        # only a fresh process would clear; drop it so the next call builds
        # a client for its own --os-placement-api-version.
        cache = ClientManager.__dict__.get("placement")
        if cache is not None:
            cache._handle = None
        if code != 0:
            raise CLIError(f"openstack {' '.join(args)} -> {code}: {err.getvalue()}")
        text = out.getvalue()
        return json.loads(text) if json_out and text.strip() else text
    return run


def _name():
    return f"rp-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("version", ["1.0", "1.14", "1.20", "1.39"])
def test_resource_provider_lifecycle(osc, version):
    name = _name()
    created = osc("resource", "provider", "create", name, version=version)
    rp = created["uuid"]
    assert created["name"] == name
    listed = osc("resource", "provider", "list", "--name", name, version=version)
    assert [p["uuid"] for p in listed] == [rp]
    shown = osc("resource", "provider", "show", rp, version=version)
    assert shown["generation"] == 0
    if version >= "1.14":
        assert shown["root_provider_uuid"] == rp
    renamed = osc("resource", "provider", "set", rp, "--name", name + "-x", version=version)
    assert renamed["name"] == name + "-x"
    osc("resource", "provider", "delete", rp, version=version, json_out=False)
    with pytest.raises(CLIError, match="404|No resource provider"):
        osc("resource", "provider", "show", rp, version=version)


@needs_provider_filter("in_tree")
def test_provider_tree(osc):
    root = osc("resource", "provider", "create", _name(), version="1.14")["uuid"]
    child = osc("resource", "provider", "create", _name(), "--parent-provider", root,
                version="1.14")["uuid"]
    tree = osc("resource", "provider", "list", "--in-tree", child, version="1.14")
    assert {p["uuid"] for p in tree} == {root, child}
    assert {p["parent_provider_uuid"] for p in tree} == {None, root}


# `inventory show` also reads the provider's usages.
@needs("/resource_providers/{uuid}/usages")
@pytest.mark.parametrize("version", ["1.0", "1.39"])
def test_inventory(osc, version):
    rp = osc("resource", "provider", "create", _name(), version=version)["uuid"]
    inv = osc("resource", "provider", "inventory", "set", rp, "--resource", "VCPU=8",
              "--resource", "MEMORY_MB:total=4096", "--resource",
              "MEMORY_MB:allocation_ratio=1.5", version=version)
    by_class = {row["resource_class"]: row for row in inv}
    assert by_class["VCPU"]["total"] == 8 and by_class["MEMORY_MB"]["total"] == 4096
    assert by_class["MEMORY_MB"]["allocation_ratio"] == 1.5
    osc("resource", "provider", "inventory", "set", rp, "--amend",
        "--resource", "DISK_GB=100", version=version)
    osc("resource", "provider", "inventory", "class", "set", rp, "DISK_GB",
        "--total", "100", "--reserved", "10", version=version)
    shown = osc("resource", "provider", "inventory", "show", rp, "DISK_GB", version=version)
    assert (shown["total"], shown["reserved"]) == (100, 10)
    listed = osc("resource", "provider", "inventory", "list", rp, version=version)
    assert {r["resource_class"] for r in listed} == {"VCPU", "MEMORY_MB", "DISK_GB"}
    osc("resource", "provider", "inventory", "delete", rp, "--resource-class", "DISK_GB",
        version=version, json_out=False)
    listed = osc("resource", "provider", "inventory", "list", rp, version=version)
    assert {r["resource_class"] for r in listed} == {"VCPU", "MEMORY_MB"}


@pytest.mark.parametrize("version", ["1.6", "1.39"])
def test_traits(osc, version):
    trait = f"CUSTOM_T_{uuid.uuid4().hex[:8].upper()}"
    osc("trait", "create", trait, version=version, json_out=False)
    assert trait in {t["name"] for t in osc("trait", "list", version=version)}
    osc("trait", "show", trait, version=version)
    rp = osc("resource", "provider", "create", _name(), version=version)["uuid"]
    osc("resource", "provider", "trait", "set", rp, "--trait", trait,
        "--trait", "HW_CPU_X86_AVX2", version=version)
    names = {t["name"] for t in osc("resource", "provider", "trait", "list", rp,
                                    version=version)}
    assert names == {trait, "HW_CPU_X86_AVX2"}
    osc("resource", "provider", "trait", "delete", rp, version=version, json_out=False)
    assert osc("resource", "provider", "trait", "list", rp, version=version) == []
    osc("trait", "delete", trait, version=version, json_out=False)
    with pytest.raises(CLIError):
        osc("trait", "show", trait, version=version)


@pytest.mark.parametrize("version", ["1.1", "1.19", "1.39"])
def test_aggregates(osc, version):
    rp = osc("resource", "provider", "create", _name(), version=version)["uuid"]
    agg = str(uuid.uuid4())
    args = ["resource", "provider", "aggregate", "set", rp, "--aggregate", agg]
    if version >= "1.19":
        args += ["--generation", "0"]
    osc(*args, version=version)
    listed = osc("resource", "provider", "aggregate", "list", rp, version=version)
    assert [a["uuid"] for a in listed] == [agg]


@pytest.mark.parametrize("version", ["1.2", "1.7", "1.39"])
def test_resource_classes(osc, version):
    name = f"CUSTOM_RC_{uuid.uuid4().hex[:8].upper()}"
    if version >= "1.7":
        osc("resource", "class", "set", name, version=version, json_out=False)
    else:
        osc("resource", "class", "create", name, version=version, json_out=False)
    assert name in {c["name"] for c in osc("resource", "class", "list", version=version)}
    assert osc("resource", "class", "show", name, version=version)["name"] == name
    osc("resource", "class", "delete", name, version=version, json_out=False)
    with pytest.raises(CLIError):
        osc("resource", "class", "show", name, version=version)


@pytest.mark.parametrize("version", ["1.10", "1.21", "1.39"])
def test_allocation_candidates(osc, version):
    rp = osc("resource", "provider", "create", _name(), version=version)["uuid"]
    osc("resource", "provider", "inventory", "set", rp, "--resource", "VGPU=4",
        version=version)
    rows = osc("allocation", "candidate", "list", "--resource", "VGPU=3", version=version)
    assert rp in {row["resource provider"] for row in rows}
    rows = osc("allocation", "candidate", "list", "--resource", "VGPU=5", version=version)
    assert rp not in {row["resource provider"] for row in rows}


@needs("/allocations/{consumer_uuid}")
@pytest.mark.parametrize("version", ["1.12", "1.28", "1.38"])
def test_allocations_and_usages(osc, version):
    rp = osc("resource", "provider", "create", _name(), version=version)["uuid"]
    osc("resource", "provider", "inventory", "set", rp, "--resource", "VCPU=8",
        "--resource", "MEMORY_MB=2048", version=version)
    consumer, project, user = str(uuid.uuid4()), uuid.uuid4().hex, uuid.uuid4().hex
    args = ["resource", "provider", "allocation", "set", consumer,
            "--allocation", f"rp={rp},VCPU=2,MEMORY_MB=512",
            "--project-id", project, "--user-id", user]
    if version >= "1.38":
        args += ["--consumer-type", "INSTANCE"]
    osc(*args, version=version)
    shown = osc("resource", "provider", "allocation", "show", consumer, version=version)
    assert {(r["resource_provider"], json.dumps(r["resources"], sort_keys=True))
            for r in shown} == {(rp, json.dumps({"MEMORY_MB": 512, "VCPU": 2},
                                                sort_keys=True))}
    usage = {r["resource_class"]: r["usage"] for r in
             osc("resource", "provider", "usage", "show", rp, version=version)}
    assert usage == {"VCPU": 2, "MEMORY_MB": 512}
    if "/usages" in SERVED:
        totals = {r["resource_class"]: r["usage"] for r in
                  osc("resource", "usage", "show", project, version=version)}
        if version >= "1.38":
            # Grouped by consumer type, with a consumer count.
            assert totals == {"INSTANCE": {"VCPU": 2, "MEMORY_MB": 512,
                                           "consumer_count": 1}}
        else:
            assert totals == {"VCPU": 2, "MEMORY_MB": 512}
    osc("resource", "provider", "allocation", "unset", consumer, "--provider", rp,
        "--resource-class", "MEMORY_MB", version=version)
    shown = osc("resource", "provider", "allocation", "show", consumer, version=version)
    assert [r["resources"] for r in shown] == [{"VCPU": 2}]
    osc("resource", "provider", "allocation", "delete", consumer, version=version,
        json_out=False)
    assert osc("resource", "provider", "allocation", "show", consumer,
               version=version) == []


def test_the_openstack_executable(service):
    exe = shutil.which("openstack") or os.path.join(os.path.dirname(sys.executable),
                                                    "openstack")
    if not os.path.exists(exe):
        pytest.skip("the openstack command is not installed")
    out = subprocess.run([exe, "--os-auth-type", "admin_token", "--os-token", "admin",
                          "--os-endpoint", service.base, "--os-placement-api-version",
                          "1.6", "trait", "list", "-f", "value"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "HW_CPU_X86_AVX2" in out.stdout.split()


def test_openstacksdk_placement_proxy(service):
    openstack = pytest.importorskip("openstack")
    conn = openstack.connection.Connection(
        auth_type="admin_token", auth={"endpoint": service.base, "token": "admin"},
        placement_endpoint_override=service.base, placement_api_version="1.39")
    name = _name()
    rp = conn.placement.create_resource_provider(name=name)
    assert rp.id and rp.name == name
    assert name in {p.name for p in conn.placement.resource_providers()}
    fetched = conn.placement.get_resource_provider(rp.id)
    assert fetched.generation == 0
    conn.placement.update_resource_provider(rp, name=name + "-x")
    assert conn.placement.get_resource_provider(rp.id).name == name + "-x"

    conn.placement.create_resource_provider_inventory(
        rp, resource_class="VCPU", total=16, allocation_ratio=2.0)
    inventories = {i.resource_class: i for i in
                   conn.placement.resource_provider_inventories(rp)}
    assert inventories["VCPU"].total == 16

    rc = f"CUSTOM_SDK_{uuid.uuid4().hex[:8].upper()}"
    conn.placement.create_resource_class(name=rc)
    assert rc in {c.name for c in conn.placement.resource_classes()}
    conn.placement.delete_resource_class(rc)

    trait = f"CUSTOM_SDK_{uuid.uuid4().hex[:8].upper()}"
    conn.placement.create_trait(trait)
    assert trait in {t.name for t in conn.placement.traits()}
    conn.placement.delete_trait(trait)

    conn.placement.delete_resource_provider(rp)
    with pytest.raises(openstack.exceptions.NotFoundException):
        conn.placement.get_resource_provider(rp.id)


def test_auth_type_none_with_a_default_token(tmp_path):
    """`openstack --os-auth-type none` sends a placeholder token; a server
    started with --noauth2-default-token treats it as that token."""
    with serve(f"sqlite:///{tmp_path / 'none.sqlite'}",
               "--noauth2-default-token", "admin") as srv:
        argv = ["--os-auth-type", "none", "--os-endpoint", srv.base,
                "--os-placement-api-version", "1.6", "trait", "list", "-f", "json"]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = shell.main(argv)
        cache = ClientManager.__dict__.get("placement")
        if cache is not None:
            cache._handle = None
        assert code == 0
        assert "HW_CPU_X86_AVX2" in {t["name"] for t in json.loads(out.getvalue())}


@needs("/v3/registered_limits")
def test_osc_limit_commands_print_why_they_were_refused(service):
    """osc's `registered limit` and `limit` commands (through openstacksdk's
    identity proxy) show the reason from Keystone's error shape, not just
    "409: Client Error"."""
    name = f"svc-{uuid.uuid4().hex[:8]}"
    status, _h, body = service.request("POST", "/v3/services",
                                       {"service": {"type": name, "name": name}})
    assert status == 201, body

    def identity(*args):
        argv = ["--os-auth-type", "admin_token", "--os-token", "admin",
                "--os-endpoint", service.base + "/v3", "--os-identity-api-version", "3",
                *args]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = shell.main(argv)
        return code, out.getvalue(), err.getvalue()

    create = ("registered", "limit", "create", "--service", name,
              "--default-limit", "10", "cores", "-f", "json")
    code, out, err = identity(*create)
    assert code == 0, err
    assert json.loads(out)["default_limit"] == 10
    code, out, err = identity(*create)
    assert code != 0
    assert "409" in err and "already exists" in err, err

    missing = uuid.uuid4().hex
    code, out, err = identity("registered", "limit", "show", missing)
    assert code != 0
    assert "No registered limit" in err or missing in err, err
