"""Placement 16.0.0's own gabbi files against a live placement_lite.

The full run needs the network (the release is downloaded at test time)
and about a minute, so it is off unless PLACEMENT_LITE_CONFORMANCE=1
(.ci/run sets it), and skipped when the release cannot be fetched. The
ratchet's rules are tested offline below on made-up results.
"""
from __future__ import annotations

import io
import os
import zipfile

import pytest

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import backend_id, backend_urls, fresh_database
from tests.conformance import runner, worlds
from tests.conformance.runner import FileResult, Outcome


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_placement_16_gabbits(backend, capsys):
    if os.environ.get(runner.ENABLE_ENV) != "1":
        pytest.skip(f"conformance run is off: set {runner.ENABLE_ENV}=1 to download "
                    f"{runner.RELEASE} and run its gabbi files over HTTP")
    try:
        directory = runner.gabbits_dir()
    except runner.DownloadError as exc:
        pytest.skip(f"cannot download {runner.RELEASE}: {exc}")
    files = runner.select_files(directory)
    results = runner.run_files(files, backend)
    verdict = runner.judge(results, runner.pending_for(runner.read_pending(), backend))
    report = runner.default_report_path(backend)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(runner.full_report(results, backend, verdict), encoding="utf-8")
    # The table is the suite's result, shown whether it passes or not.
    with capsys.disabled():
        print("\n" + runner.table(results, backend))
        print(f"full report: {report}")
    assert len(files) > 0 and all(r.outcomes or r.fixture_error for r in results), \
        "the release's gabbi files ran no tests"
    assert verdict.ok, "\n\n".join(verdict.problems())


# --- the ratchet's rules, offline -----------------------------------------

def _results(**statuses):
    """One file, a.yaml, with tests named by keyword: status."""
    return [FileResult("a.yaml", [Outcome(f"a.yaml::{name}", status, f"msg {name}")
                                  for name, status in statuses.items()])]


def test_ratchet_accepts_exactly_the_pending_failures():
    verdict = runner.judge(_results(one="pass", two="fail", three="error"),
                           {"a.yaml::two", "a.yaml::three"}, exclusions={})
    assert verdict.ok, verdict.problems()


def test_ratchet_fails_on_a_failure_not_listed():
    verdict = runner.judge(_results(one="fail", two="fail"), {"a.yaml::two"},
                           exclusions={})
    assert [o.test_id for o in verdict.new_failures] == ["a.yaml::one"]
    assert not verdict.ok
    assert "new failure: a.yaml::one" in verdict.problems()[0]


def test_ratchet_fails_when_a_pending_test_passes_and_names_it():
    verdict = runner.judge(_results(one="pass", two="skip"),
                           {"a.yaml::one", "a.yaml::two"}, exclusions={})
    assert verdict.fixed_pending == ["a.yaml::one", "a.yaml::two"]
    assert "now passes, remove from pending.txt: a.yaml::one" in verdict.problems()


def test_ratchet_fails_on_pending_entries_that_name_no_test():
    verdict = runner.judge(_results(one="pass"), {"a.yaml::gone", "b.yaml::other"},
                           exclusions={})
    # b.yaml did not run, so only a.yaml's entry can be judged stale.
    assert verdict.stale_pending == ["a.yaml::gone"]
    assert not verdict.ok
    renamed = runner.judge(_results(one="pass"), set(),
                           exclusions={"a.yaml::renamed": "reason"})
    assert renamed.stale_pending == ["a.yaml::renamed"]


def test_exclusions_are_not_counted_and_must_keep_failing():
    exclusions = {"a.yaml::wsgi": "in-process only"}
    failing = runner.judge(_results(one="pass", wsgi="error"), set(), exclusions)
    assert failing.ok
    assert runner.counts(_results(one="pass", wsgi="error")[0], exclusions) == (1, 1)
    passing = runner.judge(_results(one="pass", wsgi="pass"), set(), exclusions)
    assert passing.passing_exclusions == ["a.yaml::wsgi"]


def test_a_fixture_failure_is_never_tolerated():
    res = FileResult("a.yaml", fixture_error="fixture request POST ... answered 400")
    verdict = runner.judge([res], {"a.yaml::one"}, exclusions={})
    assert verdict.fixture_errors and not verdict.ok
    # Its tests did not run, so its pending entries are not called stale.
    assert not verdict.stale_pending


def test_pending_file_backend_tags(tmp_path):
    path = tmp_path / "pending.txt"
    path.write_text("# comment\n\n# a.yaml\na.yaml::both\n"
                    "[mysql] a.yaml::only mysql\n[postgresql] a.yaml::only mysql\n")
    pending = runner.read_pending(path)
    assert runner.pending_for(pending, "sqlite") == {"a.yaml::both"}
    assert runner.pending_for(pending, "mysql+pymysql://root@127.0.0.1/") == {
        "a.yaml::both", "a.yaml::only mysql"}


def test_write_pending_round_trips_per_backend(tmp_path):
    path = tmp_path / "pending.txt"
    per_backend = {
        "sqlite": _results(one="fail", two="pass", three="error"),
        "mysql+pymysql://root@127.0.0.1/": _results(one="fail", two="fail", three="pass"),
    }
    assert runner.write_pending(per_backend, path) == 3
    pending = runner.read_pending(path)
    assert runner.pending_for(pending, "sqlite") == {"a.yaml::one", "a.yaml::three"}
    assert runner.pending_for(pending, "mysql+pymysql://x@h/") == {
        "a.yaml::one", "a.yaml::two"}
    for backend, results in per_backend.items():
        assert runner.judge(results, runner.pending_for(pending, backend), {}).ok


def test_case_ids_number_repeated_names():
    suite = {"tests": [{"name": "x"}, {"name": "y"}, {"name": "x"}]}
    assert runner.case_ids("f.yaml", suite) == ["f.yaml::x", "f.yaml::y", "f.yaml::x [2]"]


def test_unpacks_only_the_top_level_gabbits_of_a_wheel(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("placement/tests/functional/gabbits/a.yaml", "tests: []\n")
        zf.writestr("placement/tests/functional/gabbits/sub/b.yaml", "x")
        zf.writestr("placement/tests/functional/gabbits/README", "x")
        zf.writestr("placement/handlers/util.py", "x")
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / f"{runner.DIST_PREFIX}-py3-none-any.whl").write_bytes(buf.getvalue())
    target = runner.gabbits_dir(tmp_path)
    assert sorted(p.name for p in target.iterdir()) == [".complete", "a.yaml"]
    # Cached: a second call reads nothing and downloads nothing.
    (dist / f"{runner.DIST_PREFIX}-py3-none-any.whl").unlink()
    assert runner.gabbits_dir(tmp_path) == target


# --- the runner itself, over HTTP, on made-up files (offline) --------------

RUNNER_FILE = """
fixtures:
  - AllocationFixture
defaults:
  request_headers:
    x-auth-token: admin
    openstack-api-version: placement 1.12
tests:
- name: the fixture's provider is there
  GET: /resource_providers/$ENVIRON['RP_UUID']/usages
  response_json_paths:
    $.usages.VCPU: 7
    $.usages.DISK_GB: 1020
- name: a wrong expectation is a failure
  GET: /resource_providers/$ENVIRON['RP_UUID']
  status: 404
"""


def test_run_file_builds_the_fixture_world_and_reports_each_test(tmp_path):
    path = tmp_path / "made-up.yaml"
    path.write_text(RUNNER_FILE)
    env_before = dict(os.environ)
    res = runner.run_file(path)
    assert not res.fixture_error
    assert [(o.test_id, o.status) for o in res.outcomes] == [
        ("made-up.yaml::the fixture's provider is there", "pass"),
        ("made-up.yaml::a wrong expectation is a failure", "fail")]
    message = res.outcomes[1].message
    assert "Expect status 404" in message or "404" in message
    assert "response status: 200" in message
    # The file's $ENVIRON values do not outlive it.
    assert dict(os.environ) == env_before


def test_a_fixture_that_cannot_build_its_world_is_a_file_error(tmp_path, monkeypatch):
    class BrokenFixture(runner.fixtures.APIFixture):
        def build(self, tb):
            tb.add_inventory(runner.fixtures.Provider(tb.api, "x", "not-a-uuid"),
                             "VCPU", 1)

    monkeypatch.setattr(runner.fixtures, "BrokenFixture", BrokenFixture, raising=False)
    path = tmp_path / "broken.yaml"
    path.write_text("fixtures: [BrokenFixture]\ntests:\n- name: t\n  GET: /\n")
    res = runner.run_file(path)
    assert res.outcomes == []
    assert "fixture request POST /resource_providers/not-a-uuid/inventories" in res.fixture_error
    verdict = runner.judge([res], set(), exclusions={})
    assert not verdict.ok and verdict.fixture_errors[0][0] == "broken.yaml"


def test_settings_follow_the_files_fixture():
    assert runner.file_settings({"fixtures": ["SecureRBACPolicyFixture"]}) == {
        "policy_profile": "secure-rbac"}
    assert runner.file_settings({"fixtures": ["OpenPolicyFixture"]}) == {
        "policy_profile": "open"}
    cors = runner.file_settings({"fixtures": ["CORSFixture"]})
    assert cors["cors_allowed_origin"] == ("http://valid.example.com",)
    assert runner.file_settings({})["policy_profile"] == "legacy"
    with pytest.raises(LookupError):
        runner.file_settings({"fixtures": ["NoSuchFixture"]})


# --- our fixtures build upstream's worlds ----------------------------------

WORLD_FIXTURES = ["APIFixture", "AllocationFixture", "SharedStorageFixture",
                  "NUMAAggregateFixture", "NUMANetworkFixture", "DeepNUMANetworkFixture",
                  "NonSharedStorageFixture", "GranularFixture",
                  "NeutronQoSMultiSegmentFixture"]


def _restoring_env(fn):
    before = dict(os.environ)
    try:
        return fn(before)
    finally:
        os.environ.clear()
        os.environ.update(before)


def _upstream_world(upstream, name):
    def build(before):
        fixture = getattr(upstream, name)()
        fixture.start_fixture()
        try:
            return worlds.read_world(worlds.wsgi_reader(upstream.setup_app()),
                                     worlds.exported_since(before))
        finally:
            fixture.stop_fixture()
    return _restoring_env(build)


def _our_world(name):
    def build(before):
        settings = runner.file_settings({"fixtures": [name]})
        with fresh_database("sqlite") as db, \
                runner.serving(create_app(Settings(db=db.url, **settings), db)) as port:
            runner.fixtures.CURRENT["url"] = f"http://127.0.0.1:{port}"
            try:
                getattr(runner.fixtures, name)().start_fixture()
                return worlds.read_world(worlds.http_reader(f"http://127.0.0.1:{port}"),
                                         worlds.exported_since(before))
            finally:
                runner.fixtures.CURRENT["url"] = None
    return _restoring_env(build)


@pytest.mark.parametrize("name", WORLD_FIXTURES)
def test_our_fixture_builds_the_world_placements_own_fixture_builds(name):
    """Each world is built twice: by Placement 16's own gabbi fixture on
    Placement (in-process, its own database) and by ours through
    placement_lite's HTTP API; read back through each API, they match."""
    upstream = pytest.importorskip(
        "placement.tests.functional.fixtures.gabbits",
        reason="needs openstack-placement==16.0.0 and oslotest (test extras)")
    theirs = _upstream_world(upstream, name)
    ours = _our_world(name)
    differences = []
    for key in theirs:
        if theirs[key] == ours.get(key):
            continue
        if key == "providers":
            for rp in sorted(set(theirs[key]) | set(ours[key])):
                a, b = theirs[key].get(rp) or {}, ours[key].get(rp) or {}
                differences += [f"provider {rp}, {field}: Placement's fixture {a.get(field)!r}"
                                f", ours {b.get(field)!r}"
                                for field in sorted(set(a) | set(b)) if a.get(field) != b.get(field)]
        else:
            differences.append(f"{key}: Placement's fixture {theirs[key]!r}, ours {ours.get(key)!r}")
    assert not differences, "\n".join(differences)
    assert theirs["exported"], "the fixture exported nothing"
