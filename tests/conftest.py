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
