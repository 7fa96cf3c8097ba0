"""Policy: every route is covered by a rule under every profile, and each
role gets what Placement's published defaults give it.

Roles are the personas of Placement's policy reference: an admin, a
service user, a system-scoped reader, and admin/member/reader of a
project, plus a reader of some other project.
"""
from __future__ import annotations

import importlib
import inspect
import uuid

import falcon
import falcon.testing
import pytest

from placement_lite import app as app_module
from placement_lite.api import metrics as metrics_api
from placement_lite.api.auth import is_public
from placement_lite.api.policy import BASE, PROFILES, RULES, Policy, PolicyError
from placement_lite.app import create_app
from placement_lite.config import Settings

PROJECT = "proj-a"
ROLES = {
    "admin": {"X-Auth-Token": "admin"},
    "service": {"X-Auth-Token": "nova:service-project", "X-Roles": "service"},
    "system_reader": {"X-Auth-Token": "auditor", "X-Roles": "reader",
                      "OpenStack-System-Scope": "all"},
    "project_admin": {"X-Auth-Token": f"alice:{PROJECT}", "X-Roles": "admin,member,reader"},
    "project_member": {"X-Auth-Token": f"bob:{PROJECT}", "X-Roles": "member,reader"},
    "project_reader": {"X-Auth-Token": f"carol:{PROJECT}", "X-Roles": "reader"},
    "other_project": {"X-Auth-Token": "dave:proj-b", "X-Roles": "admin-of-nothing,reader"},
}
ALL = set(ROLES)
ADMINS = {"admin", "project_admin"}
ADMIN_OR_SERVICE = ADMINS | {"service"}


def _route_table():
    modules = list(app_module.API_MODULES) + [metrics_api.__name__]
    for name in modules:
        module = importlib.import_module(name)
        for template, resource in module.ROUTES:
            yield name, template, resource


def _responders(resource):
    for verb in falcon.constants.COMBINED_METHODS:
        if callable(getattr(resource, f"on_{verb.lower()}", None)):
            yield verb


def test_every_responder_of_every_route_has_a_rule_in_every_profile():
    policies = {p: Policy(p) for p in PROFILES}
    problems = []
    for module, template, resource in _route_table():
        rules = getattr(resource, "policies", None)
        if not isinstance(rules, dict):
            problems.append(f"{module}: {resource.__name__} has no policies table")
            continue
        for verb in _responders(resource):
            if verb == "OPTIONS":
                continue  # preflights are public by design (CORS)
            rule = rules.get(verb) or (rules.get("GET") if verb == "HEAD" else None)
            if rule is None:
                # Only a resource public by its class may go without a rule;
                # one public by a setting keeps its rule for when it is off.
                if not is_public(resource, verb):
                    problems.append(f"{verb} {template} ({resource.__name__}) has no rule")
                continue
            for profile, policy in policies.items():
                if rule not in policy.texts:
                    problems.append(f"{verb} {template}: rule {rule} unknown to {profile}")
        for verb in rules:
            if verb not in _responders(resource) and verb != "HEAD":
                problems.append(f"{template}: rule for {verb}, which it does not serve")
    assert not problems, "\n".join(problems)


def test_rules_reference_only_known_rules():
    for profile in PROFILES:
        policy = Policy(profile)
        for name, text in policy.texts.items():
            for word in text.replace("(", " ").replace(")", " ").split():
                if word.startswith("rule:"):
                    assert word[5:] in policy.texts, f"{profile}: {name} -> {word}"


# Representative requests, each with the set of roles allowed per profile.
# `None` as a body means none is sent.
CASES = [
    ("list providers", "GET", "/resource_providers", None, None,
     {"legacy": ADMINS, "secure-rbac": ADMIN_OR_SERVICE, "open": ALL}),
    ("create provider", "POST", "/resource_providers", "1.20",
     lambda: {"name": f"rp-{uuid.uuid4().hex[:8]}"},
     {"legacy": ADMINS, "secure-rbac": ADMIN_OR_SERVICE, "open": ALL}),
    ("list traits", "GET", "/traits", "1.6", None,
     {"legacy": ADMINS, "secure-rbac": ADMIN_OR_SERVICE, "open": ALL}),
    ("list resource classes", "GET", "/resource_classes", "1.2", None,
     {"legacy": ADMINS, "secure-rbac": ADMIN_OR_SERVICE, "open": ALL}),
    ("allocation candidates", "GET", "/allocation_candidates?resources=VCPU:1", "1.10",
     None, {"legacy": ADMINS, "secure-rbac": ADMIN_OR_SERVICE, "open": ALL}),
    ("usages of own project", "GET", f"/usages?project_id={PROJECT}", "1.9", None,
     {"legacy": ADMINS,
      "secure-rbac": ADMIN_OR_SERVICE | {"project_member", "project_reader"},
      "open": ALL}),
    ("usages of another project", "GET", "/usages?project_id=proj-z", "1.9", None,
     {"legacy": ADMINS, "secure-rbac": ADMIN_OR_SERVICE, "open": ALL}),
    ("reshape", "POST", "/reshaper", "1.30", lambda: {"inventories": {}, "allocations": {}},
     # admin-only: `open` keeps the service-only default.
     {"legacy": ADMINS, "secure-rbac": {"service"}, "open": {"service"}}),
]


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('policy') / 'p.sqlite'}"
    from placement_lite.server import prepare_database
    db = prepare_database(Settings(db=url))
    out = {p: falcon.testing.TestClient(create_app(Settings(db=url, policy_profile=p), db))
           for p in PROFILES}
    yield out
    db.dispose()


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_role_matrix(clients, profile, case):
    name, method, path, version, body, allowed = case
    client = clients[profile]
    bare, _, query = path.partition("?")
    routed = [t for _m, t, _r in _route_table() if t == bare]
    if not routed:
        pytest.skip(f"{bare} is not in the route table of this build")
    outcome = {}
    for role, headers in ROLES.items():
        hdrs = dict(headers)
        if version:
            hdrs["OpenStack-API-Version"] = f"placement {version}"
        kwargs = {"headers": hdrs, "query_string": query or None}
        if body is not None:
            kwargs["json"] = body()
        result = client.simulate_request(method, bare, **kwargs)
        assert result.status_code not in (401, 500), (role, result.text)
        outcome[role] = result.status_code != 403
        if result.status_code == 403:
            err = result.json["errors"][0]
            assert err["status"] == 403 and "olicy" in err["detail"]
    expected = {role: role in allowed[profile] for role in ROLES}
    assert outcome == expected


def test_policy_file_overrides_a_profile(tmp_path, clients):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:resource_providers:list": "role:reader"\n'
                    '"placement:traits:list": "!"\n')
    policy = Policy.from_settings("secure-rbac", str(path))
    reader = {"roles": ["reader"], "project_id": PROJECT}
    service = {"roles": ["service"], "project_id": "s"}
    assert policy.check("placement:resource_providers:list", reader, {})
    assert not policy.check("placement:resource_providers:list", service, {})
    assert not policy.check("placement:traits:list", {"roles": ["admin"]}, {})
    # Rules not named keep the profile's default.
    assert policy.check("placement:resource_classes:list", service, {})


def test_policy_file_through_the_app(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:resource_providers:list": "role:reader"\n')
    url = f"sqlite:///{tmp_path / 'p.sqlite'}"
    from placement_lite.server import prepare_database
    db = prepare_database(Settings(db=url))
    try:
        client = falcon.testing.TestClient(create_app(
            Settings(db=url, policy_file=str(path)), db))
        assert client.simulate_get("/resource_providers",
                                   headers=ROLES["project_reader"]).status_code == 200
        assert client.simulate_get("/resource_providers",
                                   headers=ROLES["service"]).status_code == 403
    finally:
        db.dispose()


@pytest.mark.parametrize("text", ["role:", "role:a and", "(role:a", "role:a or or role:b",
                                  "role:a )", "nonsense"])
def test_bad_rules_are_refused_at_start_up(text):
    with pytest.raises(PolicyError):
        Policy("legacy", {"placement:traits:list": text})


def test_unknown_rule_and_unknown_profile_fail_closed():
    assert not Policy("open").check("placement:no:such:rule", {"roles": ["admin"]}, {})
    with pytest.raises(PolicyError):
        Policy("permissive")


def test_grammar():
    policy = Policy("legacy", {
        "t:and": "role:a and not role:b",
        "t:paren": "(role:a or role:b) and project_id:%(project_id)s",
        "t:system": "role:reader and system_scope:all",
    })
    assert policy.check("t:and", {"roles": ["a"]}, {})
    assert not policy.check("t:and", {"roles": ["a", "b"]}, {})
    assert policy.check("t:paren", {"roles": ["b"], "project_id": "p"}, {"project_id": "p"})
    assert not policy.check("t:paren", {"roles": ["b"], "project_id": "p"}, {"project_id": "q"})
    assert not policy.check("t:paren", {"roles": ["b"], "project_id": "p"}, {})
    assert policy.check("t:system", {"roles": ["reader"], "system_scope": "all"}, {})
    assert not policy.check("t:system", {"roles": ["reader"]}, {})


def test_every_registered_rule_has_secure_rbac_text_that_compiles():
    for name, rule in RULES.items():
        assert name.startswith("placement:")
        Policy("secure-rbac", {name: rule.secure_rbac})
    assert set(BASE) <= set(Policy("open").texts)


def test_resources_declare_rules_as_class_data():
    """The middleware reads `policies` from the resource object; a rule set
    only inside a responder would never be enforced."""
    for _m, template, resource in _route_table():
        assert inspect.isclass(resource) and "policies" in dir(resource), template
