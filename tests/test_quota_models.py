"""Enforcement models against real claims, on every backend.

Claims go through ledger.allocations.replace with the quota claim check,
exactly as the allocation handlers run it. The strict-two-level story is
Keystone's design walk-through: A (limit 20) with children B and C at the
registered default (10).
"""
from __future__ import annotations

import uuid

import pytest

from placement_lite import errors
from placement_lite.config import Settings
from placement_lite.ledger import allocations
from placement_lite.quota import catalog, enforce, limits, models, projects
from tests import factories

VCPU = "class:VCPU"


class World:
    def __init__(self, db, model="flat", **settings):
        self.db = db
        self.settings = Settings(db=db.url, quota_enforce=True,
                                 quota_model=model, **settings)
        self.enforcer = enforce.Enforcer(self.settings)
        self.model = self.enforcer.model
        with db.write() as conn:
            self.service = catalog.create_service(conn, type="placement")["id"]
            self.rp = factories.provider_with(
                conn, VCPU=10000, MEMORY_MB=100000, DISK_GB=100000)["uuid"]
        self.consumers: dict[str, list[str]] = {}

    def register(self, name, default):
        with self.db.write() as conn:
            return limits.create_registered(conn, [{
                "service_id": self.service, "resource_name": name,
                "default_limit": default}])[0]["id"]

    def project(self, ext, parent=None, domain=None, is_domain=False):
        with self.db.write() as conn:
            projects.create(conn, external_id=ext, name=ext, parent=parent,
                            domain=domain, is_domain=is_domain,
                            max_depth=self.model.max_depth)

    def limit(self, ext, name, value, domain=False):
        owner = {"domain_id" if domain else "project_id": ext}
        with self.db.write() as conn:
            return limits.create_limits(conn, [{
                **owner, "service_id": self.service, "resource_name": name,
                "resource_limit": value}], self.model)[0]["id"]

    def set_limit(self, limit_id, value):
        with self.db.write() as conn:
            limits.update_limit(conn, limit_id, {"resource_limit": value},
                                self.model)

    def set_default(self, reg_id, value):
        with self.db.write() as conn:
            limits.update_registered(conn, reg_id, {"default_limit": value})

    def claim(self, project, amount, rc="VCPU", consumer_type=None):
        consumer = str(uuid.uuid4())
        write = allocations.ConsumerWrite(
            consumer, project, "user", {self.rp: {rc: amount}},
            consumer_type=consumer_type)
        self.db.run_write(lambda conn: allocations.replace(
            conn, [write], [self.enforcer]))
        self.consumers.setdefault(project, []).append(consumer)
        return consumer

    def refused(self, project, amount, rc="VCPU") -> list[dict]:
        with pytest.raises(errors.OverLimit) as info:
            self.claim(project, amount, rc)
        assert info.value.code == "placement.quota.over_limit"
        return info.value.over

    def resize(self, consumer, project, amount):
        write = allocations.ConsumerWrite(consumer, project, "user",
                                          {self.rp: {"VCPU": amount}})
        self.db.run_write(lambda conn: allocations.replace(
            conn, [write], [self.enforcer]))

    def release(self, consumer, project):
        write = allocations.ConsumerWrite(consumer, project, "user", {})
        self.db.run_write(lambda conn: allocations.replace(
            conn, [write], [self.enforcer]))

    def usage(self, project, name=VCPU):
        with self.db.read() as conn:
            p = projects.get(conn, project)
            tree = projects.descendants(conn, p.id)
            from placement_lite.quota import usage
            used = usage.usage(conn, tree, [name], {})[name]
        return used.get(p.id, 0), sum(used.values())


def by_scope(over):
    return {(o["project_id"], o["scope"]): o for o in over}


# strict_two_level: Keystone's design diagrams --------------------------------

@pytest.fixture
def tree(db):
    w = World(db, "strict_two_level")
    w.reg = w.register(VCPU, 10)
    w.project("A")
    w.project("B", parent="A")
    w.project("C", parent="A")
    w.a_limit = w.limit("A", VCPU, 20)
    return w


def test_strict_children_fill_the_parent_then_everything_stops(tree):
    tree.claim("B", 8)
    tree.claim("C", 8)
    # A's own usage would be 6 <= 20, but the tree would hold 22.
    over = by_scope(tree.refused("A", 6))
    assert over[("A", "tree")]["limit"] == 20
    # Usage before the claim, and the claim itself.
    assert over[("A", "tree")]["current_usage"] == 16
    assert over[("A", "tree")]["delta"] == 6
    assert ("A", "project") not in over
    tree.claim("A", 4)
    assert tree.usage("A") == (4, 20)
    # D appears under A and may not claim anything: the tree is full.
    tree.project("D", parent="A")
    over = by_scope(tree.refused("D", 1))
    assert over[("A", "tree")]["current_usage"] == 20


def test_strict_raising_a_child_and_releases_between_siblings(tree):
    b1 = tree.claim("B", 8)
    tree.claim("C", 8)
    # B at its default may not go past 10 even with room in the tree.
    over = by_scope(tree.refused("B", 3))
    assert over[("B", "project")]["limit"] == 10
    # Raised to 12 (below A's 20): B may use 12, and the tree then holds 20.
    tree.limit("B", VCPU, 12)
    tree.claim("B", 4)
    assert tree.usage("A") == (0, 20)
    over = by_scope(tree.refused("B", 1))
    assert over[("B", "project")]["limit"] == 12
    assert over[("A", "tree")]["current_usage"] == 20
    over = by_scope(tree.refused("C", 1))
    assert set(over) == {("A", "tree")}
    # B gives 8 back: the room flows to its sibling, up to C's own limit.
    tree.release(b1, "B")
    tree.claim("C", 2)
    over = by_scope(tree.refused("C", 1))
    assert set(over) == {("C", "project")}
    tree.claim("A", 6)
    assert tree.usage("A") == (6, 20)


def test_strict_child_default_is_capped_by_a_lower_parent(db):
    w = World(db, "strict_two_level")
    w.register(VCPU, 10)
    w.project("E")
    w.project("F", parent="E")
    w.limit("E", VCPU, 5)
    over = by_scope(w.refused("F", 6))
    assert over[("F", "project")]["limit"] == 5
    w.claim("F", 5)
    assert set(by_scope(w.refused("E", 1))) == {("E", "tree")}


def test_strict_children_may_overcommit_the_parent(tree):
    # 15 + 15 > 20 is allowed as limits; usage is what the tree enforces.
    tree.limit("B", VCPU, 15)
    tree.limit("C", VCPU, 15)
    tree.claim("B", 15)
    over = by_scope(tree.refused("C", 6))
    assert set(over) == {("A", "tree")}
    tree.claim("C", 5)


def test_strict_limit_validation(tree):
    with pytest.raises(errors.InvalidLimit, match="above its parent"):
        tree.limit("B", VCPU, 21)
    # -1 is unlimited, so it is above any finite parent limit.
    with pytest.raises(errors.InvalidLimit, match="above its parent"):
        tree.limit("B", VCPU, -1)
    b = tree.limit("B", VCPU, 15)
    # A cannot drop below an explicit child limit...
    with pytest.raises(errors.InvalidLimit, match="below the limit of 15"):
        tree.set_limit(tree.a_limit, 14)
    # ...but may become unlimited, and then the child may too.
    tree.set_limit(tree.a_limit, -1)
    tree.set_limit(b, -1)
    tree.claim("B", 100)


def test_strict_trees_are_two_levels_deep(tree):
    with pytest.raises(errors.TreeTooDeep):
        tree.project("B1", parent="B")
    # A domain is not a level: domain -> project -> child is fine.
    tree.project("dom", is_domain=True)
    tree.project("top", domain="dom")
    tree.project("kid", parent="top")
    with pytest.raises(errors.TreeTooDeep):
        tree.project("grandkid", parent="kid")


def test_strict_domain_limit_caps_its_top_level_projects(db):
    w = World(db, "strict_two_level")
    w.register(VCPU, 10)
    w.project("dom", is_domain=True)
    w.project("top", domain="dom")
    w.limit("dom", VCPU, 30, domain=True)
    w.limit("top", VCPU, 30)
    w.project("top2", domain="dom")
    with pytest.raises(errors.InvalidLimit,
                       match="above its parent domain dom's limit of 30"):
        w.limit("top2", VCPU, 31)


def test_strict_lowering_the_default_still_caps_children(tree):
    tree.limit("B", VCPU, 8)
    tree.set_default(tree.reg, 3)
    # C is now at 3; B keeps its 8, and A its 20.
    tree.claim("B", 8)
    assert set(by_scope(tree.refused("C", 4))) == {("C", "project")}
    tree.claim("C", 3)


# flat ----------------------------------------------------------------------

def test_flat_project_limit_then_default(db):
    w = World(db, "flat")
    w.register(VCPU, 4)
    w.project("P")
    w.claim("P", 4)
    over = w.refused("P", 1)
    assert over == [{"resource_name": VCPU, "limit": 4, "current_usage": 4,
                     "delta": 1, "project_id": "P", "scope": "project"}]
    lim_id = w.limit("P", VCPU, 6)
    w.claim("P", 2)
    w.refused("P", 1)
    # PATCH to 0 takes effect at once.
    w.set_limit(lim_id, 0)
    w.refused("P", 1, rc="VCPU")
    # P is now over (6 of 0): writes that shrink or keep its usage pass,
    # one that grows it does not.
    first = w.consumers["P"][0]
    w.resize(first, "P", 3)
    w.resize(first, "P", 3)
    with pytest.raises(errors.OverLimit) as info:
        w.resize(first, "P", 4)
    # Only the growth is the claim's: 5 in use before it, 1 more asked.
    assert [(o["limit"], o["current_usage"], o["delta"])
            for o in info.value.over] == [(0, 5, 1)]
    # A project nobody registered gets the default.
    w.claim("stranger", 4)
    w.refused("stranger", 1)


def test_flat_ignores_the_tree(db):
    w = World(db, "flat")
    w.register(VCPU, 5)
    w.project("A")
    w.project("B", parent="A")
    w.project("C", parent="B")  # deeper trees are fine under flat
    w.claim("B", 5)
    w.claim("C", 5)
    w.claim("A", 5)


def test_flat_unregistered_resources(db):
    w = World(db, "flat")
    w.register(VCPU, 5)
    w.claim("P", 1000, rc="MEMORY_MB")
    z = World.__new__(World)
    z.__dict__.update(w.__dict__)
    z.settings = Settings(db=db.url, quota_enforce=True,
                          quota_unregistered_is_zero=True)
    z.enforcer = enforce.Enforcer(z.settings)
    over = z.refused("Q", 1, rc="DISK_GB")
    assert over[0]["resource_name"] == "class:DISK_GB"
    assert over[0]["limit"] == 0


def test_flat_counts_consumers_by_type(db):
    w = World(db, "flat")
    w.register("consumers:INSTANCE", 2)
    w.claim("P", 1, consumer_type="INSTANCE")
    w.claim("P", 1, consumer_type="INSTANCE")
    with pytest.raises(errors.OverLimit) as info:
        w.claim("P", 1, consumer_type="INSTANCE")
    assert [(o["resource_name"], o["limit"], o["current_usage"], o["delta"])
            for o in info.value.over] == [("consumers:INSTANCE", 2, 2, 1)]
    # Other types are not counted.
    w.claim("P", 1, consumer_type="MIGRATION")


def test_configured_names_map_to_usage(db):
    w = World(db, "flat", quota_resource_usage={"cores": "class:VCPU"})
    w.register("cores", 3)
    w.claim("P", 3)
    assert w.refused("P", 1)[0]["resource_name"] == "cores"


def test_quota_check_with_deltas(db):
    w = World(db, "strict_two_level")
    w.register(VCPU, 10)
    w.project("A")
    w.project("B", parent="A")
    w.limit("A", VCPU, 12)
    w.claim("B", 6)
    with db.read() as conn:
        w.enforcer.check_deltas(conn, "B", {VCPU: 4})
        with pytest.raises(errors.OverLimit) as info:
            w.enforcer.check_deltas(conn, "B", {VCPU: 5, "class:MEMORY_MB": 1})
        over = info.value.over
        assert [o["scope"] for o in over] == ["project"]
        assert over[0]["current_usage"] == 6 and over[0]["delta"] == 5
        with pytest.raises(errors.Invalid):
            w.enforcer.check_deltas(conn, "B", {"widgets": 1})
        # A project never seen has no usage and the default limit.
        w.enforcer.check_deltas(conn, "nobody", {VCPU: 10})


def test_models_are_named_as_keystone_names_them():
    assert models.get_model("flat").name == "flat"
    assert models.get_model("strict_two_level").max_depth == 2
    with pytest.raises(ValueError):
        models.get_model("three_level")


def test_reshaper_runs_the_claim_check(db):
    from placement_lite.ledger import inventories, providers, reshaper

    w = World(db, "flat")
    w.register(VCPU, 4)
    consumer = w.claim("P", 4)

    def reshape(amount):
        with db.read() as conn:
            generation = providers.find_by_uuid(conn, w.rp).generation
        wanted = {w.rp: reshaper.ProviderInventories(generation, {
            "VCPU": inventories.make("VCPU", {"total": 10000})})}
        write = allocations.ConsumerWrite(consumer, "P", "user",
                                          {w.rp: {"VCPU": amount}})
        db.run_write(lambda conn: reshaper.reshape(
            conn, wanted, [write], [w.enforcer]))

    # Moving the same usage is fine at the limit; growing it is not.
    reshape(4)
    with pytest.raises(errors.OverLimit):
        reshape(5)
    assert w.usage("P") == (4, 4)


def test_strict_moving_usage_inside_an_over_tree(tree):
    b = tree.claim("B", 8)
    tree.claim("C", 8)
    tree.claim("A", 4)
    tree.set_limit(tree.a_limit, 15)  # the tree (20) is now over
    # One write shrinks B by 2 and grows C by 2: the tree does not grow.
    move = [allocations.ConsumerWrite(b, "B", "user", {tree.rp: {"VCPU": 6}}),
            allocations.ConsumerWrite(str(uuid.uuid4()), "C", "user",
                                      {tree.rp: {"VCPU": 2}})]
    tree.db.run_write(lambda conn: allocations.replace(
        conn, move, [tree.enforcer]))
    # Growing it is refused, and reported once for the tree.
    grow = [allocations.ConsumerWrite(str(uuid.uuid4()), "B", "user",
                                      {tree.rp: {"VCPU": 1}}),
            allocations.ConsumerWrite(str(uuid.uuid4()), "C", "user",
                                      {tree.rp: {"VCPU": 1}})]
    with pytest.raises(errors.OverLimit) as info:
        tree.db.run_write(lambda conn: allocations.replace(
            conn, grow, [tree.enforcer]))
    over = info.value.over
    assert [(o["project_id"], o["scope"]) for o in over].count(("A", "tree")) == 1
    tree_entry = by_scope(over)[("A", "tree")]
    assert (tree_entry["current_usage"], tree_entry["delta"]) == (20, 2)
