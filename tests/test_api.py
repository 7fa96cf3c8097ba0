"""Run every gabbits/*.yaml file, on every configured backend.

One pytest test per (backend, file). A file is an ordered story (later
requests depend on earlier ones), so it runs as one unittest suite and
the test fails with every failing request's message.
"""
from __future__ import annotations

import pathlib
import unittest

import pytest
import yaml
from gabbi import handlers, suitemaker

from tests import gabbi_fixtures
from tests.backends import backend_id, backend_urls

GABBITS = pathlib.Path(__file__).resolve().parent.parent / "gabbits"
FILES = sorted(GABBITS.glob("*.yaml"))


def _suite(path: pathlib.Path):
    with open(path, encoding="utf-8") as fh:
        suite_dict = yaml.safe_load(fh)
    handler_objects = [h() for h in handlers.RESPONSE_HANDLERS]
    return suitemaker.test_suite_from_dict(
        unittest.TestLoader(), path.stem.replace("-", "_"), suite_dict,
        str(GABBITS), "placement-lite.test", None, gabbi_fixtures,
        gabbi_fixtures.intercept, handlers=handler_objects,
        test_loader_name="gabbits")


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_gabbit(path, backend):
    gabbi_fixtures.CURRENT["backend"] = backend
    result = unittest.TestResult()
    _suite(path).run(result)
    problems = [f"{test.id()}\n{trace}"
                for test, trace in result.failures + result.errors]
    problems += [f"{test.id()} unexpectedly passed"
                 for test in result.unexpectedSuccesses]
    assert not problems, "\n\n".join(problems)
    assert result.testsRun > 0, f"{path.name} ran no requests"
