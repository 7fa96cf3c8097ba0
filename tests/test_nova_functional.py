"""nova's own functional tests that exercise Placement, run against
placement_lite with Placement itself as the control (tests/nova_functional).

The full run downloads nova's source release and takes minutes, so it is
off unless PLACEMENT_LITE_NOVA_FUNCTIONAL=1 (.ci/run sets it, after
installing tests/nova_functional/requirements.txt). Below it, offline: the
hook that points Placement's fixture at placement_lite, the parsing of
stestr's results and the rules the run is judged by.
"""
from __future__ import annotations

import io
import os
import uuid

import pytest

from tests.nova_functional import runner


def test_nova_functional_tests_pass_against_placement_lite(capsys):
    if os.environ.get(runner.ENABLE_ENV) != "1":
        pytest.skip(f"nova's functional tests are off: set {runner.ENABLE_ENV}=1 to download "
                    f"nova's source release and run {len(runner.MODULES)} of its functional "
                    "test modules against Placement and placement_lite")
    problems = runner.environment_problems()
    assert not problems, "; ".join(problems)
    try:
        tree = runner.source_tree()
    except runner.DownloadError as exc:
        pytest.skip(f"cannot fetch nova's source release: {exc}")
    runs = [runner.run_stestr(tree, against) for against in ("placement", "lite")]
    with capsys.disabled():
        print("\n" + runner.table(runs))
        print("logs: " + ", ".join(str(r.log) for r in runs))
    control, lite = (r.statuses for r in runs)
    verdict = runner.judge(lite, control)
    assert verdict.ok, "\n".join(verdict.problems)


# --- the hook: Placement's own fixture, serving placement_lite -------------

def _provider_count(db) -> int:
    from sqlalchemy import func, select

    from placement_lite.db import tables
    with db.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(tables.resource_providers)).scalar()


def _use_fixture(fixture, body):
    """Set up Placement's fixture in a testtools test, as nova's tests
    do, run `body(fixture)` inside it and return what it returned."""
    testtools = pytest.importorskip("testtools")
    out = {}

    class Case(testtools.TestCase):
        def test(self):
            out["value"] = body(self.useFixture(fixture))

    result = testtools.TestResult()
    Case("test").run(result)
    assert not result.errors and not result.failures, result.errors + result.failures
    return out["value"]


ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement 1.20"}


def test_placements_fixture_serves_placement_lite_with_a_fresh_database_each_time():
    upstream = pytest.importorskip(
        "placement.tests.functional.fixtures.placement",
        reason="needs openstack-placement and oslotest (test extras)")
    requests = pytest.importorskip("requests")
    from tests.nova_functional import hook

    def create_one(fixture):
        rp = str(uuid.uuid4())
        resp = requests.post(f"{fixture.endpoint}/resource_providers", headers=ADMIN,
                             json={"name": "cn1", "uuid": rp})
        assert resp.status_code == 200, resp.text
        db = hook._CURRENT["db"]
        # The request reached placement_lite's database, through the
        # fixture's own intercept, at its own endpoint.
        assert _provider_count(db) == 1
        assert fixture.conf_fixture.conf.placement_database.connection == db.url
        listed = requests.get(f"{fixture.endpoint}/resource_providers", headers=ADMIN).json()
        return db.url, [p["uuid"] for p in listed["resource_providers"]], rp

    with hook.installed():
        first = _use_fixture(upstream.PlacementFixture(), create_one)
        second = _use_fixture(upstream.PlacementFixture(), create_one)
    # Each use saw only its own provider, in a database of its own.
    assert first[1] == [first[2]] and second[1] == [second[2]]
    assert first[0] != second[0]
    assert hook._CURRENT["db"] is None
    # Undone: Placement's own Database and app are back.
    assert upstream.deploy.__name__ == "placement.deploy"
    assert upstream.db_fixture.Database.__module__ == "placement.tests.fixtures"


def test_a_database_the_test_manages_itself_outlives_the_fixture():
    """As nova's test_bug_1679750 does: Placement's Database fixture set
    up by the test, and PlacementFixture(db=False) used twice on it; what
    the first use wrote, the second reads, from placement_lite."""
    upstream = pytest.importorskip(
        "placement.tests.functional.fixtures.placement",
        reason="needs openstack-placement and oslotest (test extras)")
    requests = pytest.importorskip("requests")
    testtools = pytest.importorskip("testtools")
    from oslo_config import cfg
    from oslo_config import fixture as config_fixture
    from placement import conf as placement_conf
    from placement.tests import fixtures as placement_db

    from tests.nova_functional import hook

    rp = str(uuid.uuid4())
    out = {}

    def use(config, send):
        with upstream.PlacementFixture(conf_fixture=config, db=False,
                                       register_opts=False) as fixture:
            return send(fixture.endpoint).status_code

    class Case(testtools.TestCase):
        def test(self):
            config = self.useFixture(config_fixture.Config(cfg.ConfigOpts()))
            placement_conf.register_opts(config.conf)
            self.useFixture(placement_db.Database(config, set_config=True))
            out["created"] = use(config, lambda url: requests.post(
                f"{url}/resource_providers", headers=ADMIN, json={"name": "cn1", "uuid": rp}))
            out["found"] = use(config, lambda url: requests.get(
                f"{url}/resource_providers/{rp}", headers=ADMIN))
            out["rows"] = _provider_count(hook._CURRENT["db"])

    with hook.installed():
        result = testtools.TestResult()
        Case("test").run(result)
    assert not result.errors and not result.failures, result.errors + result.failures
    assert out == {"created": 200, "found": 200, "rows": 1}


def test_a_fixture_configured_otherwise_is_refused():
    pytest.importorskip("placement.conf", reason="needs openstack-placement (test extra)")
    from oslo_config import cfg
    from oslo_policy import opts as policy_opts
    from placement import conf as placement_conf

    from tests.nova_functional import hook

    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    policy_opts.set_defaults(conf, enforce_new_defaults=False)
    conf.set_override("connection", "sqlite://", group="placement_database")
    conf([], default_config_files=[])
    conf.set_override("auth_strategy", "keystone", group="api")
    with pytest.raises(RuntimeError, match="auth_strategy='keystone'"):
        hook.settings_for(conf)
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("enforce_new_defaults", True, group="oslo_policy")
    with pytest.raises(RuntimeError, match="enforce_new_defaults"):
        hook.settings_for(conf)


# --- stestr's results, and the rules ---------------------------------------

def test_subunit_results_are_read_with_status_and_duration():
    subunit = pytest.importorskip("subunit", reason="python-subunit comes with stestr")
    import datetime

    buf = io.BytesIO()
    out = subunit.StreamResultToBytes(buf)
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    for test_id, status, secs in (("nova.tests.functional.test_a.C.test_1", "success", 2),
                                  ("nova.tests.functional.test_a.C.test_2", "fail", 1)):
        out.status(test_id=test_id, test_status="inprogress", timestamp=t0)
        out.status(test_id=test_id, test_status=status,
                   timestamp=t0 + datetime.timedelta(seconds=secs))
    statuses, durations = runner.parse_subunit(buf.getvalue())
    assert statuses == {"nova.tests.functional.test_a.C.test_1": "success",
                        "nova.tests.functional.test_a.C.test_2": "fail"}
    assert durations["nova.tests.functional.test_a.C.test_1"] == 2.0


A, B, C = (f"nova.tests.functional.test_x.Case.test_{n}" for n in "abc")


def test_the_same_passes_on_both_is_ok():
    both = {A: "success", B: "skip"}
    assert runner.judge(both, dict(both), exclusions={}, pending={}).ok


def test_a_test_failing_only_against_placement_lite_fails_the_run():
    verdict = runner.judge({A: "success", B: "fail"}, {A: "success", B: "success"},
                           exclusions={}, pending={})
    assert verdict.problems == [f"success against Placement, fail against placement_lite: {B}"]


def test_a_test_failing_against_placement_must_be_excluded_with_a_reason():
    lite, control = {A: "fail", B: "success"}, {A: "fail", B: "success"}
    verdict = runner.judge(lite, control, exclusions={}, pending={})
    assert len(verdict.problems) == 1 and "fails against Placement too" in verdict.problems[0]
    assert runner.judge(lite, control, exclusions={A: "why"}, pending={}).ok
    # An exclusion that Placement now passes is stale.
    stale = runner.judge({A: "success"}, {A: "success"}, exclusions={A: "why"}, pending={})
    assert stale.problems == [f"excluded but passes against Placement, "
                              f"remove from EXCLUSIONS: {A}"]


def test_pending_is_a_ratchet():
    control = {A: "success", B: "success"}
    assert runner.judge({A: "success", B: "fail"}, control, exclusions={},
                        pending={B: "why"}).ok
    fixed = runner.judge(dict(control), control, exclusions={}, pending={B: "why"})
    assert fixed.problems == [f"now passes, remove from PENDING: {B}"]
    gone = runner.judge(dict(control), control, exclusions={}, pending={C: "why"})
    assert gone.problems == [f"listed but did not run: {C}"]


def test_runs_of_different_tests_or_of_none_are_refused():
    assert not runner.judge({}, {}, exclusions={}, pending={}).ok
    verdict = runner.judge({A: "success"}, {A: "success", B: "success"},
                           exclusions={}, pending={})
    assert "the two runs ran different tests" in verdict.problems[0]


def test_the_lite_run_boots_its_workers_through_the_hook():
    env = runner.environment("lite", base={"PYTHONPATH": "/elsewhere", "PYTHON": "x"})
    assert env["PYTHON"].endswith("-m tests.nova_functional.boot")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(runner.REPO_ROOT), "/elsewhere"]
    assert env["OS_NOVA_DISABLE_EVENTLET_PATCHING"] == "False"
    control = runner.environment("placement", base={"PYTHON": "x"})
    assert "PYTHON" not in control
    assert runner.selection_regex(["test_b", "test_a", "regressions.test_bug_1"]) == \
        r"^nova\.tests\.functional\.(regressions\.test_bug_1|test_a|test_b)\."
