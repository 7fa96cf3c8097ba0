import pytest

from placement_lite.config import Settings
from tests.backends import backend_id, backend_urls, fresh_database


@pytest.fixture(params=backend_urls(), ids=backend_id)
def backend(request):
    return request.param


@pytest.fixture
def db(backend):
    with fresh_database(backend) as database:
        yield database


@pytest.fixture
def settings(db):
    return Settings(db=db.url)


@pytest.fixture
def oslo_checks_only(monkeypatch):
    """oslo.policy's own check kinds only. Importing nova (as the nova
    report-client tests do) registers its `is_admin` check in oslo.policy
    for the whole process, which the service never imports; policy tests
    that spell `is_admin:` must judge it as Placement's process would."""
    from oslo_policy import _checks

    monkeypatch.setattr(_checks, "registered_checks", {
        kind: check for kind, check in _checks.registered_checks.items()
        if check.__module__.startswith("oslo_policy.")})
