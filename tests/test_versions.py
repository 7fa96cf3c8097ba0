"""The microversion history in api/versions.py is the one place versions
are spelled: complete, in order, documented, and not repeated elsewhere."""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

from placement_lite.api import versions
from placement_lite.api.provider_filters import query_dialect
from placement_lite.api.versions import (
    ANY_TRAITS, BASE, GRANULAR, MAX_VERSION, MIN_VERSION, VERSIONS, Version)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "placement_lite"
VERSION_TEXT = re.compile(r"^\d+\.\d+$")


def test_history_covers_every_microversion_once_in_order():
    assert [str(f.since) for f in VERSIONS] == [f"1.{i}" for i in range(40)]
    assert (MIN_VERSION, MAX_VERSION) == (Version(1, 0), Version(1, 39))
    assert len({f.name for f in VERSIONS}) == len(VERSIONS)
    for feature in VERSIONS:
        # Each feature is importable under the name it carries.
        assert getattr(versions, feature.name) is feature
        assert feature.note.strip()


def test_a_version_has_the_features_up_to_it():
    assert Version(1, 25).has(GRANULAR)
    assert not Version(1, 24).has(GRANULAR)
    assert Version(1, 0).has(BASE) and not Version(1, 38).has(ANY_TRAITS)


def test_the_docs_page_is_the_history():
    page = (ROOT / "docs" / "microversions.md").read_text(encoding="utf-8")
    assert page == versions.markdown(), (
        "docs/microversions.md differs from api/versions.py; regenerate it "
        "with: python -m placement_lite.api.versions > docs/microversions.md")


def test_the_query_dialect_follows_the_features():
    old, new = query_dialect((1, 24)), query_dialect((1, 39))
    assert (old.granular, old.multi_member_of, old.forbidden_aggregates,
            old.any_traits) == (False, True, False, False)
    assert new.granular and new.forbidden_aggregates and new.any_traits
    # A refusal names where the form becomes available.
    assert old.refusal_hint("any_traits") == "1.39"
    assert old.refusal_hint("forbidden_aggregates") == "1.32"


def _version_strings(path: pathlib.Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and VERSION_TEXT.match(node.value):
            yield node.lineno, node.value


def test_no_module_but_versions_spells_a_version():
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if path != PACKAGE / "api" / "versions.py"
             for line, text in _version_strings(path)]
    assert found == []


@pytest.mark.parametrize("layer", ["candidates", "ledger", "quota"])
def test_the_domain_never_sees_versions(layer):
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "api.versions" not in text and "microversion import" not in text, path


@pytest.fixture(scope="module")
def client():
    import falcon.testing

    from placement_lite.app import create_app
    from placement_lite.config import Settings
    from tests.backends import fresh_database
    with fresh_database("sqlite") as db:
        yield falcon.testing.TestClient(create_app(Settings(db=db.url), db))


def _at(version: str) -> dict:
    return {"X-Auth-Token": "admin",
            "OpenStack-API-Version": f"placement {version}"}


def _refusal(result, status: int) -> str:
    assert result.status_code == status, result.text
    return result.json["errors"][0]["detail"]


def test_refusals_name_the_microversion_that_allows_the_request(client):
    """The domain is told no version, yet every refusal still names where
    the refused form becomes available."""
    root = client.simulate_post("/resource_providers", headers=_at("1.20"),
                                json={"name": "root"}).json["uuid"]
    child = client.simulate_post(
        "/resource_providers", headers=_at("1.20"),
        json={"name": "child", "parent_provider_uuid": root}).json["uuid"]
    detail = _refusal(client.simulate_put(
        f"/resource_providers/{child}", headers=_at("1.36"),
        json={"name": "child", "parent_provider_uuid": None}), 400)
    assert detail.endswith("(Moving a provider that has a parent needs "
                           "microversion 1.37.)")
    detail = _refusal(client.simulate_post(
        f"/resource_providers/{root}/inventories", headers=_at("1.25"),
        json={"resource_class": "VCPU", "total": 4, "reserved": 4}), 400)
    assert detail.endswith("(from microversion 1.26 it may be zero).")
    detail = _refusal(client.simulate_delete(
        f"/resource_providers/{root}/inventories", headers=_at("1.4")), 405)
    assert detail.endswith("needs microversion 1.5 or later.")
    detail = _refusal(client.simulate_get("/traits", headers=_at("1.5")), 404)
    assert detail.endswith("(needs 1.6 or later).")
    agg = "11111111-1111-1111-1111-111111111111"
    detail = _refusal(client.simulate_get(
        "/allocation_candidates", headers=_at("1.31"),
        params={"resources": "VCPU:1", "member_of": f"!{agg}"}), 400)
    assert detail.endswith("needs microversion 1.32 or later.")
    detail = _refusal(client.simulate_get(
        "/resource_providers", headers=_at("1.38"),
        params={"required": "in:A,B"}), 400)
    assert "only supported since microversion 1.39. Got: in:A,B" in detail
