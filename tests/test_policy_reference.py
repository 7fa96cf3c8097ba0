"""Policy, judged against OpenStack Placement 16 itself.

Placement 16 (its own WSGI app, in a process of its own:
tests/placement_reference.py) and placement-lite run from the same
placement.conf and the same non-trivial policy.yaml, and every Placement
route is asked the same requests by the same callers: project admins,
members, readers and holders of a custom role, a service, system- and
domain-scoped tokens, an admin of a project that is not the admin project.
Each answer's status must be the same on both.

Nothing in Placement is replaced. With `auth_strategy = keystone` both
run keystonemiddleware's auth_token against one fake Keystone (the one
tests/test_keystone.py uses), which validates real tokens; the headers
auth_token sets become each service's credentials. With `noauth2` both
read the headers Placement's own tests send (X-Roles, X-Project-Id,
OpenStack-System-Scope, X-Domain-Id, X-Is-Admin-Project).

The configurations: with the policy file, enforce_new_defaults true and
false, and enforce_scope false (oslo.policy 6, which Placement 16
requires, always enforces scope and has no such option: the comparison
shows it changes nothing in either); without a policy file, both
defaults; the file overriding the deprecated rule by its name, both
defaults; and noauth2 with the file, both defaults.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

pytest.importorskip("placement.policies")
pytest.importorskip("keystonemiddleware")
requests = pytest.importorskip("requests")
webob = pytest.importorskip("webob")

from placement_lite.config import Settings  # noqa: E402
from placement_lite.server import build_wsgi  # noqa: E402
from tests.backends import fresh_database  # noqa: E402
from tests.test_keystone import SERVICE_TOKEN, FakeKeystone  # noqa: E402

# webob (under keystonemiddleware) still imports the deprecated cgi module.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.usefixtures("oslo_checks_only")]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Widens one rule to a project member, narrows another to a custom role,
# checks the target's project (placement:usages: the project asked about;
# every other Placement rule: the caller's own), the user, `is_admin`
# (which no Placement credential carries), `is_admin_project`, a system
# scope inside a project-scoped rule, `not`, a file-only rule, an
# undefined reference (which falls to `default`) and a changed base rule.
POLICY = """\
"placement:resource_providers:list": "rule:admin_or_service_api or role:member"
"placement:traits:delete": "role:placement-auditor"
"placement:usages": "project_id:%(project_id)s or role:service"
"placement:resource_providers:show": "project_id:%(project_id)s"
"placement:traits:list": "user_id:%(user_id)s and role:reader"
"placement:resource_classes:list": "is_admin:True or role:service"
"placement:resource_classes:show": "system_scope:all or role:admin"
"placement:allocation_candidates:list": "role:admin and is_admin_project:True"
"placement:resource_providers:traits:list": "not role:reader and rule:admin_or_service_api"
"auditor": "role:placement-auditor"
"placement:resource_providers:usages": "rule:auditor or rule:admin_or_service_api"
"placement:resource_providers:aggregates:list": "rule:no_such_rule"
"default": "role:member"
"service_api": "role:service or role:placement-auditor"
"""
# The same, overriding the deprecated rule by its own name
# ("rule:admin_api"): oslo.policy then judges every base rule that
# replaced it by this check instead, whatever enforce_new_defaults says.
OLD_NAME_POLICY = POLICY + '"rule:admin_api": "role:admin and role:placement-auditor"\n'
POLICIES = {"file": POLICY, "old-name": OLD_NAME_POLICY, "none": None}

A, B = "proj-a", "proj-b"
# name -> (project, roles, scope, extra token fields); scope: None
# (project), "system" or "domain".
PERSONAS = {
    "admin": ("p-admin", ["admin", "member", "reader"], None, {}),
    "service": ("p-service", ["service"], None, {}),
    "member-a": (A, ["member", "reader"], None, {}),
    "reader-a": (A, ["reader"], None, {}),
    "reader-b": (B, ["reader"], None, {}),
    "auditor-a": (A, ["placement-auditor"], None, {}),
    "no-roles-a": (A, [], None, {}),
    "admin-elsewhere": ("p-c", ["admin", "member", "reader"], None,
                        {"is_admin_project": False}),
    "system-admin": (None, ["admin", "member", "reader"], "system", {}),
    "system-reader": (None, ["reader"], "system", {}),
    "domain-admin": (None, ["admin"], "domain", {}),
}
# Sets up the same world on both; passes every rule in every configuration.
SETUP = ("p-setup", ["admin", "service", "placement-auditor", "member", "reader"],
         None, {})

RP = "9f0c3a6e-1b1a-4c5e-9d7e-0a1b2c3d4e5f"
CONSUMER = "5a1d4f2e-7c3b-4e8a-9b6d-1f2e3d4c5b6a"
AGG = "0b6e0d42-3f4c-4c1e-8d0f-6a7b8c9d0e1f"
MISSING = "00000000-0000-4000-8000-000000000000"

WORLD = [
    ("POST", "/resource_providers", "1.20", {"name": "rp-1", "uuid": RP}),
    ("PUT", f"/resource_providers/{RP}/inventories", "1.20",
     {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}),
    ("PUT", "/traits/CUSTOM_T1", "1.6", None),
    ("PUT", f"/resource_providers/{RP}/traits", "1.6",
     {"resource_provider_generation": 1, "traits": ["CUSTOM_T1"]}),
    ("PUT", "/resource_classes/CUSTOM_RC1", "1.7", None),
    ("PUT", f"/resource_providers/{RP}/aggregates", "1.19",
     {"resource_provider_generation": 2, "aggregates": [AGG]}),
    ("PUT", f"/allocations/{CONSUMER}", "1.28",
     {"allocations": {RP: {"resources": {"VCPU": 1}}}, "project_id": A,
      "user_id": "u-a", "consumer_generation": None}),
]

# Every Placement route and method. Writes are idempotent, aimed at what
# does not exist, or carry a body the schema refuses (a 400 once the
# policy allows, as in Placement, which judges the policy first), so the
# world is the same whoever asked before.
ROUTES = [
    ("GET", "/resource_providers", None, None),
    ("POST", "/resource_providers", "1.20", {}),
    ("GET", f"/resource_providers/{RP}", None, None),
    ("PUT", f"/resource_providers/{RP}", "1.20", {}),
    ("DELETE", f"/resource_providers/{MISSING}", None, None),
    ("GET", f"/resource_providers/{RP}/inventories", None, None),
    ("POST", f"/resource_providers/{RP}/inventories", None, {}),
    ("PUT", f"/resource_providers/{RP}/inventories", None, {}),
    ("DELETE", f"/resource_providers/{MISSING}/inventories", "1.5", None),
    ("GET", f"/resource_providers/{RP}/inventories/VCPU", None, None),
    ("PUT", f"/resource_providers/{RP}/inventories/VCPU", None, {}),
    ("DELETE", f"/resource_providers/{MISSING}/inventories/VCPU", None, None),
    ("GET", f"/resource_providers/{RP}/aggregates", "1.19", None),
    ("PUT", f"/resource_providers/{RP}/aggregates", "1.19", {}),
    ("GET", f"/resource_providers/{RP}/traits", "1.6", None),
    ("PUT", f"/resource_providers/{RP}/traits", "1.6", {}),
    ("DELETE", f"/resource_providers/{MISSING}/traits", "1.6", None),
    ("GET", f"/resource_providers/{RP}/allocations", None, None),
    ("GET", f"/resource_providers/{RP}/usages", None, None),
    ("GET", "/resource_classes", "1.2", None),
    ("POST", "/resource_classes", "1.2", {}),
    ("GET", "/resource_classes/CUSTOM_RC1", "1.2", None),
    ("PUT", "/resource_classes/CUSTOM_RC1", "1.7", None),
    ("DELETE", "/resource_classes/CUSTOM_NOPE", "1.2", None),
    ("GET", "/traits", "1.6", None),
    ("GET", "/traits/CUSTOM_T1", "1.6", None),
    ("PUT", "/traits/CUSTOM_T1", "1.6", None),
    ("DELETE", "/traits/CUSTOM_NOPE", "1.6", None),
    ("POST", "/allocations", "1.13", {"not-a-uuid": {}}),
    ("GET", f"/allocations/{CONSUMER}", None, None),
    ("PUT", f"/allocations/{CONSUMER}", "1.28", {}),
    ("DELETE", f"/allocations/{MISSING}", None, None),
    ("GET", "/allocation_candidates?resources=VCPU:1", "1.10", None),
    ("GET", f"/usages?project_id={A}", "1.9", None),
    ("GET", f"/usages?project_id={B}", "1.9", None),
    ("GET", "/usages", "1.9", None),
    ("POST", "/reshaper", "1.30", {}),
]


def _conf(tmp_path, ks, auth, policy_file, new_defaults, scope) -> str:
    lines = ["[api]", f"auth_strategy = {auth}", "", "[oslo_policy]",
             f"enforce_new_defaults = {new_defaults}", f"enforce_scope = {scope}"]
    if policy_file:
        lines.append(f"policy_file = {policy_file}")
    lines += ["", "[keystone_authtoken]", "auth_type = admin_token",
              f"endpoint = {ks.url}/v3", f"token = {SERVICE_TOKEN}",
              f"www_authenticate_uri = {ks.url}/v3"]
    path = tmp_path / f"placement-{uuid.uuid4().hex[:6]}.conf"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


class Placement:
    """Placement 16 serving from `conf`, asked over HTTP."""

    def __init__(self, tmp_path, conf: str):
        self.log = open(tmp_path / f"placement-{uuid.uuid4().hex[:6]}.log", "w+")
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        db = tmp_path / f"placement-{uuid.uuid4().hex[:6]}.sqlite"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.placement_reference", str(db), conf],
            stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT, env=env)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.close()
            self.log.seek(0)
            raise AssertionError("Placement did not start:\n" + self.log.read()[-3000:])
        self.base = f"http://127.0.0.1:{int(line.split()[-1])}"
        self.session = requests.Session()

    def status(self, method, path, headers, body) -> int:
        return self.session.request(method, self.base + path, headers=headers,
                                    json=body, timeout=60).status_code

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        self.log.close()


class Lite:
    """placement-lite built from the same options, asked in-process."""

    def __init__(self, db, conf: str, auth: str, policy_file, new_defaults: bool):
        settings = Settings(
            db=db.url, auth=auth, keystone_config_file=conf if auth == "keystone" else None,
            policy_file=policy_file,
            policy_profile="secure-rbac" if new_defaults else "legacy")
        self.app = build_wsgi(settings, db)

    def status(self, method, path, headers, body) -> int:
        req = webob.Request.blank(path, method=method, headers=headers)
        if body is not None:
            req.content_type = "application/json"
            req.json_body = body
        return req.get_response(self.app).status_int


def _noauth_headers(name, persona) -> dict:
    project, roles, scope, extra = persona
    headers = {"X-Auth-Token": f"user-{name}:{project or 'none'}",
               "X-Roles": ",".join(roles)}
    if scope == "system":
        headers["OpenStack-System-Scope"] = "all"
    elif scope == "domain":
        headers["X-Domain-Id"] = "default"
    if extra.get("is_admin_project") is False:
        headers["X-Is-Admin-Project"] = "False"
    return headers


def _identities(ks, auth) -> dict:
    """name -> the headers that identify the persona in this auth mode."""
    out = {}
    for name, persona in {**PERSONAS, "setup": SETUP}.items():
        if auth == "noauth2":
            out[name] = _noauth_headers(name, persona)
            continue
        project, roles, scope, extra = persona
        token = ks.issue(project, roles, user_id=f"user-{name}",
                         system=scope == "system",
                         domain_scope="default" if scope == "domain" else None, **extra)
        out[name] = {"X-Auth-Token": token}
    if auth == "noauth2":
        # noauth2's own forms: the token `admin` alone is an admin, and
        # X-Project-Id wins over the token's project.
        out["bare-admin-token"] = {"X-Auth-Token": "admin"}
        out["project-header"] = {"X-Auth-Token": f"eve:{B}", "X-Project-Id": A,
                                 "X-Roles": "reader"}
    return out


def _ask(server, identity, route):
    method, path, version, body = route
    headers = dict(identity)
    if version:
        headers["OpenStack-API-Version"] = f"placement {version}"
    return server.status(method, path, headers, body)


CONFIGURATIONS = [
    # (auth, policy file, enforce_new_defaults, enforce_scope)
    ("keystone", "file", True, True),
    ("keystone", "file", False, True),
    ("keystone", "file", True, False),
    ("keystone", "none", True, True),
    ("keystone", "none", False, True),
    ("keystone", "old-name", True, True),
    ("keystone", "old-name", False, True),
    ("noauth2", "file", True, True),
    ("noauth2", "file", False, True),
]


@pytest.fixture(scope="module")
def keystone():
    with FakeKeystone() as ks:
        yield ks


@pytest.mark.parametrize("auth, policy, new_defaults, scope", CONFIGURATIONS,
                         ids=["-".join(map(str, c)) for c in CONFIGURATIONS])
def test_same_status_as_placement_for_every_caller_on_every_route(
        tmp_path, keystone, auth, policy, new_defaults, scope):
    policy_file = None
    if POLICIES[policy] is not None:
        policy_file = str(tmp_path / "policy.yaml")
        (tmp_path / "policy.yaml").write_text(POLICIES[policy])
    conf = _conf(tmp_path, keystone, auth, policy_file, new_defaults, scope)
    identities = _identities(keystone, auth)
    reference = Placement(tmp_path, conf)
    try:
        with fresh_database("sqlite") as db:
            lite = Lite(db, conf, auth, policy_file, new_defaults)
            for step in WORLD:
                theirs = _ask(reference, identities["setup"], step)
                ours = _ask(lite, identities["setup"], step)
                assert theirs == ours and theirs < 300, (step, theirs, ours)
            table, differences = {}, []
            for name, identity in identities.items():
                for route in ROUTES:
                    theirs = _ask(reference, identity, route)
                    ours = _ask(lite, identity, route)
                    table[name, route[0], route[1]] = theirs
                    if theirs != ours:
                        differences.append(f"{name:18} {route[0]:6} {route[1]}: "
                                           f"Placement {theirs}, placement-lite {ours}")
    finally:
        reference.close()
    assert not differences, "\n".join(differences)
    statuses = set(table.values())
    # Not a comparison of two refusals: both grant and refuse.
    assert 403 in statuses and 200 in statuses, statuses
    if policy == "file" and auth == "keystone":
        # The file is in force: the widened rule admits a member, the
        # generic check on the target's project admits a reader of the
        # project asked about only, and `is_admin:True` admits no one.
        assert table["member-a", "GET", "/resource_providers"] == 200
        assert table["reader-a", "GET", f"/usages?project_id={A}"] == 200
        assert table["reader-a", "GET", f"/usages?project_id={B}"] == 403
        assert table["admin", "GET", "/resource_classes"] == 403
