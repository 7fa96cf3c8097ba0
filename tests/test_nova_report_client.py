"""nova's own SchedulerReportClient (nova 34) against a live server, on
the ironic driver's path.

nova's ironic driver reports a bare-metal node as one unit of its custom
class and, once an instance is on the node, reserves it: `reserved =
total = 1` while the instance's allocation of 1 is still there. Placement
accepts that update (capacity below usage); every periodic update of a
node in use depends on it. The client is nova's, unmodified, talking HTTP
through keystoneauth as nova-compute does; the provider tree edits are
the ones the ironic driver's update_provider_tree makes.
"""
from __future__ import annotations

import uuid

import pytest
import requests

nova_report = pytest.importorskip(
    "nova.scheduler.client.report",
    reason="nova is not installed (pip install 'nova>=34'); the report "
           "client test needs nova's own SchedulerReportClient")
ks_session = pytest.importorskip("keystoneauth1.session")
from keystoneauth1 import adapter as ks_adapter  # noqa: E402
from keystoneauth1 import token_endpoint  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import exception as nova_exc  # noqa: E402

from placement_lite.app import create_app  # noqa: E402
from placement_lite.config import Settings  # noqa: E402
from tests.live import served  # noqa: E402

RC = "CUSTOM_BAREMETAL_GOLD"
ADMIN = {"x-auth-token": "admin", "accept": "application/json",
         "openstack-api-version": "placement latest"}


@pytest.fixture
def server(db):
    with served(create_app(Settings(db=db.url), db)) as base:
        yield base


def _report_client(server):
    session = ks_session.Session(auth=token_endpoint.Token(server, "admin"))
    # As nova builds its placement adapter: errors come back as responses.
    adapter = ks_adapter.Adapter(session, service_type="placement",
                                 endpoint_override=server, raise_exc=False)
    return nova_report.SchedulerReportClient(adapter=adapter)


@pytest.fixture
def client(server):
    """nova-compute's report client (the resource tracker's)."""
    return _report_client(server)


@pytest.fixture
def scheduler(server):
    """nova-scheduler's report client: a separate process, a separate
    cache, so the compute side learns of its claims only from placement."""
    return _report_client(server)


def _node_inventory(reserved: bool) -> dict:
    # What nova.virt.ironic.driver.IronicDriver.update_provider_tree sets.
    return {RC: {"total": 1, "reserved": int(reserved), "min_unit": 1,
                 "max_unit": 1, "step_size": 1, "allocation_ratio": 1.0}}


def _periodic(client, ctx, node, reserved: bool) -> None:
    """One resource-tracker pass for the node, as nova-compute runs it:
    the tracker retries a generation conflict (its cache is stale after
    the scheduler's claim moved the generation) up to four times, the
    report client having dropped the tree from its cache; any other
    error, InventoryInUse among them, fails the pass."""
    for attempt in range(4):
        tree = client.get_provider_tree_and_ensure_root(ctx, node, name=node)
        tree.update_inventory(node, _node_inventory(reserved))
        tree.update_traits(node, [])
        try:
            client.update_from_provider_tree(ctx, tree)
            return
        except nova_exc.ResourceProviderUpdateConflict:
            if attempt == 3:
                raise


def _placement(server, path):
    resp = requests.get(server + path, headers=ADMIN, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_ironic_node_in_use_is_reserved_without_inventory_in_use(
        server, client, scheduler):
    ctx = nova_context.get_admin_context()
    node, instance = str(uuid.uuid4()), str(uuid.uuid4())
    project, user = str(uuid.uuid4()), str(uuid.uuid4())

    _periodic(client, ctx, node, reserved=False)
    claim = {"allocations": {node: {"resources": {RC: 1}}}}
    assert scheduler.claim_resources(ctx, instance, claim, project, user,
                                     allocation_request_version="1.36")

    # The instance is on the node: the driver reserves it. Placement (and
    # we) accept capacity 0 under a usage of 1; a 409 inventory-in-use
    # here is what nova would raise as InventoryInUse on every period.
    _periodic(client, ctx, node, reserved=True)
    inv = _placement(server, f"/resource_providers/{node}/inventories")
    assert inv["inventories"][RC]["reserved"] == 1
    # The next period, from a fresh cache, changes nothing and fails nothing.
    client.clear_provider_cache()
    _periodic(client, ctx, node, reserved=True)
    assert _placement(server, f"/resource_providers/{node}/inventories") == inv

    # While reserved the node takes no second instance...
    other = {"allocations": {node: {"resources": {RC: 1}}}}
    assert not scheduler.claim_resources(
        ctx, str(uuid.uuid4()), other, project, user,
        allocation_request_version="1.36")
    # ...but the instance's own allocation can still be removed, and the
    # node is offered again once the driver unreserves it.
    assert scheduler.delete_allocation_for_instance(ctx, instance, force=True)
    _periodic(client, ctx, node, reserved=False)
    usages = _placement(server, f"/resource_providers/{node}/usages")
    assert usages["usages"] == {RC: 0}
    assert scheduler.claim_resources(ctx, str(uuid.uuid4()), other, project,
                                     user, allocation_request_version="1.36")


def test_removing_the_class_of_a_node_in_use_is_still_refused(
        server, client, scheduler):
    ctx = nova_context.get_admin_context()
    node, instance = str(uuid.uuid4()), str(uuid.uuid4())
    _periodic(client, ctx, node, reserved=False)
    claim = {"allocations": {node: {"resources": {RC: 1}}}}
    assert scheduler.claim_resources(ctx, instance, claim, str(uuid.uuid4()),
                                  str(uuid.uuid4()),
                                  allocation_request_version="1.36")
    client.clear_provider_cache()
    tree = client.get_provider_tree_and_ensure_root(ctx, node, name=node)
    tree.update_inventory(node, {})
    with pytest.raises(nova_exc.InventoryInUse,
                       match=f"Inventory for '{RC}' on resource provider"):
        client.update_from_provider_tree(ctx, tree)
