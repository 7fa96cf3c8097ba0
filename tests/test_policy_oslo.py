"""oslo.policy as the judge: the credentials it is given are the ones
Placement gives it, the Enforcer is built once per process and follows its
policy file as oslo.policy does, and oslo.policy's own tools list our rules.
(tests/test_policy_reference.py compares whole answers with Placement 16.)"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import falcon.testing
import pytest
import yaml

from placement_lite.api import auth
from placement_lite.api.policies import SPECS, list_rules
from placement_lite.api.policy import Policy, PolicyError
from placement_lite.app import create_app
from placement_lite.config import Settings

oslo_context = pytest.importorskip("oslo_context.context")

# Header sets a caller or keystonemiddleware may send: every identity
# header oslo.context reads, empty values, odd spacing and case.
HEADER_SETS = [
    {},
    {"X-Roles": "admin,member,reader", "X-Project-Id": "p1"},
    {"X-Roles": " Admin , reader ", "X-Tenant-Id": "t1"},
    {"X-Roles": "", "X-Tenant": "t2", "X-User": "legacy-user"},
    {"X-Role": "member", "X-Project-Id": "p1", "X-Tenant-Id": "t1"},
    {"X-Roles": "reader", "OpenStack-System-Scope": "all"},
    {"X-Roles": "reader", "OpenStack-System-Scope": "all", "X-Project-Id": "p9"},
    {"X-Roles": "reader", "OpenStack-System-Scope": "all", "X-Tenant-Id": "t9"},
    {"OpenStack-System-Scope": "", "X-Roles": "admin,,reader"},
    {"X-Roles": "admin", "X-Domain-Id": "default", "X-User-Domain-Id": "ud",
     "X-Project-Domain-Id": "pd"},
    {"X-Roles": "admin", "X-Is-Admin-Project": "False"},
    {"X-Roles": "admin", "X-Is-Admin-Project": "TRUE"},
    {"X-Service-Roles": "service, admin", "X-Service-User-Id": "su",
     "X-Service-User-Domain-Id": "sud", "X-Service-Project-Id": "sp",
     "X-Service-Project-Domain-Id": "spd"},
    {"X-User-Id": "mallory", "X-Roles": "member"},
    {"X-Roles": "", "X-Role": "member", "X-Is-Admin-Project": ""},
    {"X-Project-Id": "", "X-Tenant-Id": "t3", "X-Roles": "reader"},
]
TOKENS = ["alice", "alice:p7", "admin", "admin:p8"]


def _request(headers):
    return falcon.testing.create_req(headers=headers)


def _oslo_values(environ) -> dict:
    return dict(oslo_context.RequestContext.from_environ(environ).to_policy_values())


@pytest.mark.parametrize("headers", HEADER_SETS)
def test_keystone_credentials_are_oslo_contexts(headers):
    """After auth_token, Placement's context is oslo.context's
    RequestContext.from_environ; to_policy_values() is what it judges."""
    req = _request({**headers, "X-Identity-Status": "Confirmed"})
    assert auth.keystone_identity(req).creds() == _oslo_values(req.env)


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("headers", HEADER_SETS)
def test_noauth2_credentials_are_placements(headers, token):
    """Placement's own NoAuthMiddleware, then oslo.context, on the same
    request: the same credentials as ours."""
    placement_auth = pytest.importorskip("placement.auth")
    webob = pytest.importorskip("webob")
    seen = {}

    def inner(environ, start_response):
        seen.update(environ)
        start_response("200 OK", [])
        return [b""]

    wreq = webob.Request.blank("/resource_providers", headers={**headers, "X-Auth-Token": token})
    wreq.get_response(placement_auth.NoAuthMiddleware(inner))
    req = _request({**headers, "X-Auth-Token": token})
    assert auth.noauth2_identity(req).creds() == _oslo_values(seen)


def test_is_admin_is_no_credential_so_is_admin_true_never_matches(
        tmp_path, oslo_checks_only):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:traits:list": "is_admin:True"\n')
    policy = Policy("secure-rbac", policy_file=str(path))
    admin = auth.noauth2_identity(_request({"X-Auth-Token": "admin"})).creds()
    assert "is_admin" not in admin
    assert not policy.authorize("placement:traits:list", admin, {}).allowed


def test_the_app_builds_one_enforcer_for_all_its_requests(tmp_path, monkeypatch):
    from oslo_policy import policy as oslo

    built = []
    original = oslo.Enforcer.__init__

    def counting(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(oslo.Enforcer, "__init__", counting)
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:traits:list": "role:reader"\n')
    from placement_lite.server import prepare_database
    url = f"sqlite:///{tmp_path / 'p.sqlite'}"
    db = prepare_database(Settings(db=url))
    try:
        client = falcon.testing.TestClient(create_app(
            Settings(db=url, policy_file=str(path)), db))
        for _ in range(20):
            assert client.simulate_get("/resource_providers", headers={
                "X-Auth-Token": "admin"}).status_code == 200
    finally:
        db.dispose()
    assert len(built) == 1


def _rewrite(path, text):
    """Write and move the modification time on, as an edit seconds later
    would (some filesystems keep whole seconds)."""
    before = os.stat(path).st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


def test_a_changed_policy_file_is_followed_and_a_broken_one_is_not(tmp_path, caplog):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:traits:list": "role:reader"\n')
    policy = Policy("secure-rbac", policy_file=str(path))
    reader = {"roles": ["reader"], "project_id": "p", "user_id": "u"}
    member = {"roles": ["member"], "project_id": "p", "user_id": "u"}
    first = policy.enforcer
    assert policy.authorize("placement:traits:list", reader, {}).allowed
    assert policy.enforcer is first  # nothing changed: nothing rebuilt
    _rewrite(path, '"placement:traits:list": "role:member"\n')
    assert not policy.authorize("placement:traits:list", reader, {}).allowed
    assert policy.authorize("placement:traits:list", member, {}).allowed
    for broken in ("rule: [\n", '"placement:traits:list": "role:a or or role:b"\n',
                   '"a": "rule:b"\n"b": "rule:a"\n'):
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="placement_lite.api.policy"):
            _rewrite(path, broken)
            # The rules before stay in force, and the log says why.
            assert policy.authorize("placement:traits:list", member, {}).allowed
        assert "cannot be used" in caplog.text, broken
    _rewrite(path, '"placement:traits:list": "role:reader"\n')
    assert policy.authorize("placement:traits:list", reader, {}).allowed


def test_a_policy_file_that_is_no_mapping_is_refused(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("- a list\n")
    with pytest.raises(PolicyError, match="must map rule names"):
        Policy("legacy", policy_file=str(path))
    path.write_text('"placement:traits:list": 7\n')
    with pytest.raises(PolicyError, match="not check strings"):
        Policy("legacy", policy_file=str(path))


# oslo.policy's own tools ---------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _entry_points_env(tmp_path) -> dict:
    """PYTHONPATH with this checkout first, and, unless an installed
    placement-lite already declares them, a distribution of our own that
    declares setup.py's two oslo.policy entry points."""
    import importlib.metadata as md

    paths = [ROOT]
    if not [ep for ep in md.entry_points(group="oslo.policy.policies")
            if ep.name == "placement_lite"]:
        dist = tmp_path / "eps" / "placement_lite_policy-0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: placement-lite-policy\nVersion: 0\n")
        (dist / "entry_points.txt").write_text(textwrap.dedent("""\
            [oslo.policy.policies]
            placement_lite = placement_lite.api.policies:list_rules

            [oslo.policy.enforcer]
            placement_lite = placement_lite.api.policy:get_enforcer
            """))
        paths.append(str(dist.parent))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLACEMENT_LITE_")}
    env["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])
    # stevedore keeps its scan of entry points under the cache directory.
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def _tool(name: str, *args: str, env: dict) -> str:
    exe = os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(exe):
        pytest.skip(f"{name} is not installed")
    out = subprocess.run([exe, "--namespace", "placement_lite", *args], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_sample_generator_lists_every_rule_with_its_default(tmp_path):
    sample = _tool("oslopolicy-sample-generator", env=_entry_points_env(tmp_path))
    # Each rule's line is commented out: `#"name": "default"`.
    listed = yaml.safe_load("\n".join(line[1:] for line in sample.splitlines()
                                      if line.startswith('#"')))
    assert listed == {rule.name: rule.check_str for rule in list_rules()}
    assert set(listed) == set(SPECS)
    assert listed["placement:reshaper:reshape"] == "rule:service_api"
    assert listed["placement:limits:limits:create"] == "rule:admin_api"
    # Placement's deprecated rule, and the routes each rule judges.
    assert '"rule:admin_api":"role:admin" has been deprecated' in sample
    assert "# GET  /usages" in sample and "# POST  /v3/limits" in sample
    assert "Intended scope(s): project" in sample


def test_policy_generator_and_validator_read_a_placement_conf_policy(tmp_path):
    (tmp_path / "policy.yaml").write_text(
        '"placement:resource_providers:list": "role:member"\n')
    conf = tmp_path / "placement.conf"
    conf.write_text("[oslo_policy]\npolicy_file = policy.yaml\n"
                    "enforce_new_defaults = False\n")
    env = _entry_points_env(tmp_path)
    effective = yaml.safe_load(_tool("oslopolicy-policy-generator",
                                     "--config-file", str(conf), env=env))
    # The file's rule (found beside placement.conf, as oslo.config finds
    # it), and legacy defaults (enforce_new_defaults = False) for the rest.
    assert effective["placement:resource_providers:list"] == "role:member"
    assert effective["placement:limits:limits:list"] == "rule:admin_api"
    assert set(effective) == set(SPECS)
    conf.write_text("[oslo_policy]\nenforce_new_defaults = True\n")
    effective = yaml.safe_load(_tool("oslopolicy-policy-generator",
                                     "--config-file", str(conf), env=env))
    assert effective["placement:resource_providers:list"] == "rule:admin_or_service_api"
    assert effective["placement:limits:limits:list"].startswith(
        "rule:admin_or_project_reader_or_service_api")
    # The validator finds the file beside placement.conf too, and names a
    # rule no route knows.
    (tmp_path / "policy.yaml").write_text('"placement:no_such_route": "@"\n')
    conf.write_text("[oslo_policy]\npolicy_file = policy.yaml\n")
    exe = os.path.join(os.path.dirname(sys.executable), "oslopolicy-validator")
    out = subprocess.run([exe, "--namespace", "placement_lite", "--config-file",
                          str(conf)], env=env, capture_output=True, text=True,
                         timeout=120, cwd=str(ROOT))
    assert out.returncode == 1, out.stderr
    assert "Unknown rule found in policy file: placement:no_such_route" in out.stdout


# The decisions a generation keeps --------------------------------------------

ATOMS = ["role:admin", "role:reader", "role:member", "role:service", "roles:admin",
         "project_id:%(project_id)s", "user_id:%(user_id)s", "system_scope:all",
         "is_admin_project:True", "domain_id:d1", "service_roles:service",
         "project_id:p1", "@", "!"]
FILE_ONLY = ["x1", "x2", "x3"]


def _random_check(rng, names, depth=0) -> str:
    roll = rng.random()
    if depth > 2 or roll < 0.4:
        return rng.choice(ATOMS + [f"rule:{n}" for n in names])
    if roll < 0.55:
        return f"not {_random_check(rng, names, depth + 1)}"
    glue = rng.choice([" and ", " or "])
    return "(" + glue.join(_random_check(rng, names, depth + 1)
                           for _ in range(rng.randint(2, 3))) + ")"


def _random_creds(rng) -> dict:
    creds = auth.Identity(
        user_id=rng.choice(["u1", "u2", None]), project_id=rng.choice(["p1", "p2", None]),
        roles=rng.sample(["admin", "reader", "member", "service", "Admin"], rng.randint(0, 3)),
        system_scope=rng.choice([None, None, "all"]),
        domain_id=rng.choice([None, None, None, "d1"])).creds()
    creds["is_admin_project"] = rng.random() < 0.7
    creds["service_roles"] = rng.choice([[], ["service"]])
    return creds


def test_kept_decisions_equal_oslos_own_after_random_rewrites(tmp_path):
    """Cached against uncached: every decision the Policy gives (kept or
    not) equals the one oslo.policy makes afresh with the same rules,
    after rewrites of the file of every size, loops and bad rules among
    them (which leave the rules before in force)."""
    import random

    rng = random.Random(2716)
    names = sorted(SPECS)
    path = tmp_path / "policy.yaml"
    path.write_text("{}\n")
    policy = Policy("secure-rbac", policy_file=str(path))
    hits = 0
    for batch in range(25):
        size = rng.choice([0, 1, 3, 10, len(names)])
        rules = {name: _random_check(rng, names + FILE_ONLY)
                 for name in rng.sample(names, size) + FILE_ONLY}
        _rewrite(path, yaml.safe_dump(rules))
        generation = policy.current()
        # Some callers and targets over and over: kept decisions are used.
        callers = [_random_creds(rng) for _ in range(6)]
        targets = [{"project_id": rng.choice(["p1", "p2"])}, {}, {"project_id": None}]
        for _ in range(300):
            name = rng.choice(names + FILE_ONLY)
            creds, fields = rng.choice(callers), rng.choice(targets)
            got = policy.authorize(name, creds, fields)
            if name in SPECS:
                from placement_lite.api.policy import _target
                fields = _target(SPECS[name].target, creds, fields)
            want = generation.judge(True, name, creds, fields)
            assert got == want, (batch, name, creds, fields, policy.texts.get(name))
            assert policy.check(name, creds, fields) == \
                generation.judge(False, name, creds, fields).allowed
        if generation.cached is not None:
            hits += generation.cached.cache_info().hits
    assert hits > 1000


def test_no_decision_is_kept_when_a_check_asks_a_server(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:traits:list": "http://127.0.0.1:9/check"\n')
    assert Policy("secure-rbac", policy_file=str(path)).current().cached is None
    assert Policy("secure-rbac").current().cached is not None


def test_every_worker_follows_a_changed_policy_file(tmp_path):
    """Two worker processes, each with its rules and kept decisions: once
    the file changes, no request is judged by the rules before."""
    from tests.servers import serve

    path = tmp_path / "policy.yaml"
    path.write_text('"placement:resource_providers:list": "role:admin"\n')
    reader = {"X-Roles": "reader"}
    with serve(f"sqlite:///{tmp_path / 'p.sqlite'}", "--workers", "2",
               "--policy-file", str(path)) as srv:
        for _ in range(20):
            assert srv.request("GET", "/resource_providers", headers=reader,
                               token="carol:p1")[0] == 403
        _rewrite(path, '"placement:resource_providers:list": "role:reader"\n')
        for _ in range(20):
            assert srv.request("GET", "/resource_providers", headers=reader,
                               token="carol:p1")[0] == 200
