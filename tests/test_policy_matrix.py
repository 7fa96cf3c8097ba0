"""Policy: every route is covered by a rule under every profile, and each
role gets what Placement 16's defaults give it under the matching test
configuration (secure-rbac: new defaults; legacy: new defaults ORed with
the deprecated `role:admin`; open: its open policy fixture), with scope
enforced in all three as oslo.policy 6 enforces it.

Roles are the personas of Placement's policy tests: an admin, a service
user, a system-scoped admin and reader, and admin/member/reader of a
project, plus a reader of some other project. The headers are the ones
Placement's gabbits send.
"""
from __future__ import annotations

import inspect
import uuid

import falcon
import falcon.testing
import pytest

from placement_lite import app as app_module
from placement_lite.api.auth import is_public
from placement_lite.api.policies import SPECS
from placement_lite.api.policy import BASE, PROFILES, Policy, PolicyError
from placement_lite.app import create_app
from placement_lite.config import Settings

PROJECT = "proj-a"
ROLES = {
    "admin": {"X-Auth-Token": "admin"},
    "service": {"X-Auth-Token": "user", "X-Roles": "service",
                "X-Project-Id": "service-project"},
    "system_admin": {"X-Auth-Token": "user", "X-Roles": "admin,member,reader",
                     "OpenStack-System-Scope": "all"},
    "system_reader": {"X-Auth-Token": "auditor", "X-Roles": "reader",
                      "OpenStack-System-Scope": "all"},
    "project_admin": {"X-Auth-Token": f"alice:{PROJECT}", "X-Roles": "admin,member,reader"},
    "project_member": {"X-Auth-Token": f"bob:{PROJECT}", "X-Roles": "member,reader"},
    "project_reader": {"X-Auth-Token": f"carol:{PROJECT}", "X-Roles": "reader"},
    "other_project": {"X-Auth-Token": "dave:proj-b", "X-Roles": "admin-of-nothing,reader"},
}
ALL = set(ROLES)
SYSTEM = {"system_admin", "system_reader"}
# Every Placement rule is project-scoped: a system-scoped token is refused
# whatever its roles, in every profile.
PROJECT_SCOPED = ALL - SYSTEM
ADMINS = {"admin", "project_admin"}
ADMIN_OR_SERVICE = ADMINS | {"service"}
# Our own rules accept any scope; `role:admin` is an admin in any scope.
ANY_SCOPE_ADMINS = ADMINS | {"system_admin"}


def _route_table():
    for route in app_module.ROUTES + app_module.METRICS_ROUTES:
        yield route.resource.__module__, route.template, route.resource


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
# Representative requests, each with the set of roles allowed per profile.
# `None` as a body means none is sent.
PLACEMENT_DEFAULT = {"legacy": ADMIN_OR_SERVICE, "secure-rbac": ADMIN_OR_SERVICE,
                     "open": PROJECT_SCOPED}
CASES = [
    # Legacy ORs the deprecated `role:admin` into admin_or_service_api, so
    # a service may do under legacy what it may under secure-rbac.
    ("list providers", "GET", "/resource_providers", None, None, PLACEMENT_DEFAULT),
    ("create provider", "POST", "/resource_providers", "1.20",
     lambda: {"name": f"rp-{uuid.uuid4().hex[:8]}"}, PLACEMENT_DEFAULT),
    ("list traits", "GET", "/traits", "1.6", None, PLACEMENT_DEFAULT),
    ("list resource classes", "GET", "/resource_classes", "1.2", None,
     PLACEMENT_DEFAULT),
    ("allocation candidates", "GET", "/allocation_candidates?resources=VCPU:1", "1.10",
     None, PLACEMENT_DEFAULT),
    # A reader (member implies reader) of the project asked about; the
    # legacy OR adds nothing the admin did not already have.
    ("usages of own project", "GET", f"/usages?project_id={PROJECT}", "1.9", None,
     {"legacy": ADMIN_OR_SERVICE | {"project_member", "project_reader"},
      "secure-rbac": ADMIN_OR_SERVICE | {"project_member", "project_reader"},
      "open": PROJECT_SCOPED}),
    ("usages of another project", "GET", "/usages?project_id=proj-z", "1.9", None,
     PLACEMENT_DEFAULT),
    # service_api is `role:service`; legacy ORs `role:admin` back in; the
    # open fixture opens it to anyone (only admin_api stays admin-only).
    ("reshape", "POST", "/reshaper", "1.30", lambda: {"inventories": {}, "allocations": {}},
     {"legacy": ADMIN_OR_SERVICE, "secure-rbac": {"service"}, "open": PROJECT_SCOPED}),
    # Our own routes accept any token scope, as Keystone's limit rules
    # accept system-scoped tokens; legacy keeps them admin-only.
    ("list every limit", "GET", "/v3/limits", None, None,
     {"legacy": ANY_SCOPE_ADMINS,
      "secure-rbac": ADMIN_OR_SERVICE | SYSTEM,
      "open": ALL}),
    ("list a project's limits", "GET", f"/v3/limits?project_id={PROJECT}", None, None,
     {"legacy": ANY_SCOPE_ADMINS,
      "secure-rbac": ADMIN_OR_SERVICE | SYSTEM | {"project_member", "project_reader"},
      "open": ALL}),
    ("list registered limits", "GET", "/v3/registered_limits", None, None,
     {"legacy": ANY_SCOPE_ADMINS, "secure-rbac": ALL, "open": ALL}),
    ("create limits", "POST", "/v3/limits", None, lambda: {"limits": []},
     {"legacy": ANY_SCOPE_ADMINS, "secure-rbac": ANY_SCOPE_ADMINS,
      "open": ANY_SCOPE_ADMINS}),
    ("list projects", "GET", "/v3/projects", None, None,
     {"legacy": ANY_SCOPE_ADMINS, "secure-rbac": ADMIN_OR_SERVICE | SYSTEM,
      "open": ALL}),
    # Explain shows every provider's capacity, usage, traits and
    # aggregates: whoever may list candidates, and no one else.
    ("explain candidates", "GET", "/explain/allocation_candidates?resources=VCPU:1",
     "1.10", None, PLACEMENT_DEFAULT),
    # Keystone's identity:list_services and identity:list_endpoints:
    # "role:admin or (role:reader and system_scope:all)"; not a project's
    # reader, and not the service role.
    ("list catalog services", "GET", "/v3/services", None, None,
     {"legacy": ANY_SCOPE_ADMINS, "secure-rbac": ANY_SCOPE_ADMINS | SYSTEM,
      "open": ALL}),
    ("list catalog endpoints", "GET", "/v3/endpoints", None, None,
     {"legacy": ANY_SCOPE_ADMINS, "secure-rbac": ANY_SCOPE_ADMINS | SYSTEM,
      "open": ALL}),
]


def _detail(result) -> str:
    body = result.json
    if "error" in body:  # Keystone's shape, on /v3
        return body["error"]["message"]
    return body["errors"][0]["detail"]


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
            assert _detail(result).startswith("Policy does not allow "), result.text
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


@pytest.mark.parametrize("text", ["role:a and", "(role:a", "role:a or or role:b",
                                  "role:a )", "nonsense"])
def test_bad_rules_are_refused_at_start_up(text):
    # oslo.policy would log these and deny; we refuse to start, naming them.
    with pytest.raises(PolicyError, match="placement:traits:list"):
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


def test_every_registered_rule_is_in_force_in_every_profile():
    for profile in PROFILES:
        policy = Policy(profile)
        registered = policy.enforcer.registered_rules
        assert set(registered) == set(SPECS), profile
        for name in SPECS:
            assert name.startswith("placement:") or name in BASE, name
            # `!` would mean the default did not parse.
            assert policy.texts[name] != "!", (profile, name)


def test_placement_rules_are_project_scoped_and_ours_accept_any_scope():
    registered = Policy("secure-rbac").enforcer.registered_rules
    for name, spec in SPECS.items():
        scope = registered[name].scope_types
        if name.startswith(("placement:limits:", "placement:quota:", "placement:lease:",
                            "placement:reservations:")):
            assert scope is None, name
        elif name.startswith("placement:"):
            assert scope == ["project"], name


def test_profiles_follow_placement_rule_by_rule():
    """The check strings Placement 16 registers, and what each profile
    makes of them."""
    secure, legacy, opened = (Policy(p) for p in ("secure-rbac", "legacy", "open"))
    assert secure.texts["admin_or_service_api"] == "(role:admin or role:service)"
    assert secure.texts["placement:reshaper:reshape"] == "rule:service_api"
    assert secure.texts["placement:usages"] == \
        "rule:admin_or_project_reader_or_service_api"
    # Legacy: oslo.policy ORs the deprecated `role:admin` into each base
    # rule that replaced it; admin_api itself had no older default.
    assert legacy.texts["service_api"] == "(role:service or role:admin)"
    assert legacy.texts["admin_api"] == "role:admin"
    # Open: everything but admin_api (and our admin-only writes) is `@`.
    assert opened.texts["placement:reshaper:reshape"] == "@"
    assert opened.texts["service_api"] == "@"
    assert opened.texts["admin_api"] == "role:admin"
    assert opened.texts["placement:limits:limits:create"] == "rule:admin_api"


def test_placements_rules_are_registered_as_placement_registers_them():
    """Name, default, scope types and deprecated rule of every rule
    OpenStack Placement 16 registers, read from its own package."""
    placement_policies = pytest.importorskip("placement.policies")
    ours = Policy("secure-rbac").enforcer.registered_rules
    theirs = placement_policies.list_rules()
    assert len(theirs) > 30
    for rule in theirs:
        mine = ours[rule.name]
        assert (mine.check_str, mine.scope_types) == \
            (rule.check_str, rule.scope_types), rule.name
        old, new = rule.deprecated_rule, mine.deprecated_rule
        assert (old is None) == (new is None), rule.name
        if old is not None:
            assert (new.name, new.check_str) == (old.name, old.check_str), rule.name


def test_an_overridden_rule_gets_no_legacy_or():
    policy = Policy("legacy", {"service_api": "role:service"})
    assert not policy.check("service_api", {"roles": ["admin"]}, {})


def test_rules_that_loop_are_refused_at_start_up():
    with pytest.raises(PolicyError, match="loop"):
        Policy("secure-rbac", {"placement:traits:list": "rule:x", "x": "rule:placement:traits:list"})


def test_resources_declare_rules_as_class_data():
    """The middleware reads `policies` from the resource object; a rule set
    only inside a responder would never be enforced."""
    for _m, template, resource in _route_table():
        assert inspect.isclass(resource) and "policies" in dir(resource), template


def _identity(headers):
    from placement_lite.api.auth import noauth2_identity
    return noauth2_identity(falcon.testing.create_req(headers=headers))


def test_noauth2_reads_the_headers_placements_tests_send():
    # Placement's gabbits: a fixed token, the project and roles in headers.
    ident = _identity({"X-Auth-Token": "user", "X-Roles": "admin,member,reader",
                       "X-Project-Id": "p1"})
    assert (ident.user_id, ident.project_id, ident.roles, ident.system_scope) == \
        ("user", "p1", ["admin", "member", "reader"], None)
    # Our documented forms stay: user[:project], and `admin` is an admin.
    assert _identity({"X-Auth-Token": "bob:p2"}).project_id == "p2"
    assert _identity({"X-Auth-Token": "bob"}).project_id == "bob"
    admin = _identity({"X-Auth-Token": "admin:admin"})
    assert (admin.user_id, admin.project_id, admin.roles) == ("admin", "admin", ["admin"])
    assert _identity({"X-Auth-Token": "admin", "X-Roles": "reader"}).roles == ["reader"]


def test_noauth2_system_scope_carries_no_project():
    ident = _identity({"X-Auth-Token": "user:p1", "X-Roles": "admin",
                       "OpenStack-System-Scope": "all"})
    assert (ident.system_scope, ident.project_id) == ("all", None)
    # An empty header is no scope at all, as in Placement's noauth.
    assert _identity({"X-Auth-Token": "user:p1",
                      "OpenStack-System-Scope": ""}).project_id == "p1"
    assert _identity({"X-Auth-Token": "u", "X-Domain-Id": "d1"}).domain_id == "d1"


@pytest.mark.parametrize("profile", PROFILES)
def test_a_system_scoped_admin_is_told_the_rule_wants_a_project_token(clients, profile):
    result = clients[profile].simulate_get("/resource_providers",
                                           headers=ROLES["system_admin"])
    assert result.status_code == 403
    detail = _detail(result)
    assert detail.startswith("Policy does not allow placement:resource_providers:list"
                             " to be performed.")
    assert "project-scoped tokens only; this token is system-scoped" in detail


def test_a_domain_scoped_token_is_refused_on_placement_routes(clients):
    result = clients["secure-rbac"].simulate_get(
        "/resource_providers", headers={"X-Auth-Token": "user", "X-Roles": "admin",
                                        "X-Domain-Id": "default"})
    assert result.status_code == 403
    assert "this token is domain-scoped" in _detail(result)


def test_a_refusal_by_role_names_the_callers_roles(clients):
    result = clients["secure-rbac"].simulate_get("/resource_providers",
                                                 headers=ROLES["project_reader"])
    assert result.status_code == 403
    assert _detail(result) == (
        "Policy does not allow placement:resource_providers:list to be performed. "
        f"The caller's roles (reader) in project {PROJECT} do not satisfy it.")



@pytest.mark.parametrize("profile", ["secure-rbac", "legacy"])
def test_refused_reshape_with_a_bad_body_is_403(clients, profile):
    result = clients[profile].simulate_post(
        "/reshaper", json={"inventories": [], "allocations": {}},
        headers={**ROLES["project_reader"], "OpenStack-API-Version": "placement 1.30"})
    assert result.status_code == 403


def test_placement_rules_see_the_callers_own_project_as_target(tmp_path):
    """Placement checks every rule but placement:usages against the
    caller's own project and user, so a policy file written for it as
    `project_id:%(project_id)s` admits any project-scoped caller; usages
    compare against the project asked about, our own routes against the
    request's fields."""
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:resource_providers:list": "project_id:%(project_id)s"\n'
                    '"placement:traits:list": "user_id:%(user_id)s"\n'
                    '"placement:usages": "project_id:%(project_id)s"\n'
                    '"placement:limits:limits:list": "project_id:%(project_id)s"\n')
    url = f"sqlite:///{tmp_path / 'p.sqlite'}"
    from placement_lite.server import prepare_database
    db = prepare_database(Settings(db=url))
    try:
        client = falcon.testing.TestClient(create_app(
            Settings(db=url, policy_file=str(path)), db))
        reader = ROLES["project_reader"]
        assert client.simulate_get("/resource_providers", headers=reader).status_code == 200
        assert client.simulate_get("/traits", headers={
            **reader, "OpenStack-API-Version": "placement 1.6"}).status_code == 200
        usages = {**reader, "OpenStack-API-Version": "placement 1.9"}
        assert client.simulate_get("/usages", query_string=f"project_id={PROJECT}",
                                   headers=usages).status_code == 200
        assert client.simulate_get("/usages", query_string="project_id=proj-z",
                                   headers=usages).status_code == 403
        # /v3/limits without ?project_id= names no project: refused.
        assert client.simulate_get("/v3/limits", headers=reader).status_code == 403
        assert client.simulate_get("/v3/limits", query_string=f"project_id={PROJECT}",
                                   headers=reader).status_code == 200
    finally:
        db.dispose()


def test_a_route_absent_at_the_microversion_is_404_before_policy(clients):
    """Placement's handlers check the microversion before the policy: a
    caller the rule would refuse still learns the route is absent at
    that version (as anyone does), but needs a token first."""
    reader = {**ROLES["project_reader"], "OpenStack-API-Version": "placement 1.29"}
    client = clients["secure-rbac"]
    result = client.simulate_post("/reshaper", json={"inventories": {},
                                                     "allocations": {}}, headers=reader)
    assert result.status_code == 404, result.text
    traits = client.simulate_get("/traits", headers={
        **ROLES["project_reader"], "OpenStack-API-Version": "placement 1.5"})
    assert traits.status_code == 404
    tokenless = client.simulate_get("/traits", headers={
        "OpenStack-API-Version": "placement 1.5"})
    assert tokenless.status_code == 401
    # Inside the range the rule decides.
    assert client.simulate_get("/traits", headers={
        **ROLES["project_reader"], "OpenStack-API-Version": "placement 1.6"}
    ).status_code == 403


def _explain_client(tmp_path, **kw):
    url = f"sqlite:///{tmp_path / 'p.sqlite'}"
    from placement_lite.server import prepare_database
    db = prepare_database(Settings(db=url))
    return db, falcon.testing.TestClient(create_app(Settings(db=url, **kw), db))


@pytest.mark.parametrize("profile", PROFILES)
def test_the_consoles_explain_page_admits_whom_the_candidates_rule_admits(
        tmp_path, profile):
    """The page runs the explain route's search under its rule: a reader
    the candidates query refuses sees no provider through the console."""
    from placement_lite.ui.session import COOKIE
    db, client = _explain_client(tmp_path, ui=True, policy_profile=profile)
    try:
        outcome = {}
        for role in ("project_reader", "project_admin", "service"):
            headers = dict(ROLES[role])
            token = headers.pop("X-Auth-Token")
            result = client.simulate_get("/ui/explain", cookies={COOKIE: token},
                                         headers=headers)
            assert result.status_code in (200, 403), (role, result.status_code)
            outcome[role] = result.status_code == 200
        assert outcome == {role: role in PLACEMENT_DEFAULT[profile]
                           for role in outcome}
    finally:
        db.dispose()


def test_explain_follows_a_policy_file_that_opens_the_candidates_query(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:allocation_candidates:list": "role:reader"\n')
    db, client = _explain_client(tmp_path, policy_profile="secure-rbac",
                                 policy_file=str(path))
    try:
        headers = {**ROLES["project_reader"], "OpenStack-API-Version": "placement 1.10"}
        for route in ("/allocation_candidates", "/explain/allocation_candidates"):
            assert client.simulate_get(route, query_string="resources=VCPU:1",
                                       headers=headers).status_code == 200, route
        # The service the file no longer names is refused by both alike.
        headers = {**ROLES["service"], "OpenStack-API-Version": "placement 1.10"}
        for route in ("/allocation_candidates", "/explain/allocation_candidates"):
            assert client.simulate_get(route, query_string="resources=VCPU:1",
                                       headers=headers).status_code == 403, route
    finally:
        db.dispose()
