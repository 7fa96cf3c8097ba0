"""The domain error table: one class per coded condition, each area apart,
and every one answered with a deliberate status (never a 500)."""
from __future__ import annotations

import inspect

import falcon

from placement_lite import errors
from placement_lite.api import errors as api_errors


def _error_classes():
    return [c for _n, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, errors.DomainError) and c.__module__ == errors.__name__]


def test_each_code_is_defined_by_one_class():
    owners: dict[str, list[str]] = {}
    for cls in _error_classes():
        if "code" in vars(cls) and cls.code != errors.DEFAULT_CODE:
            owners.setdefault(cls.code, []).append(cls.__name__)
    shared = {code: names for code, names in owners.items() if len(names) > 1}
    assert not shared, shared
    assert "placement.query.duplicate_key" in owners


def test_areas_stay_apart():
    quota = [c for c in _error_classes() if issubclass(c, errors.QuotaError)]
    assert errors.OverLimit in quota and errors.LeaseDenied in quota
    assert not [c for c in quota if issubclass(c, (errors.LedgerError, errors.QueryError))]
    query = [c for c in _error_classes() if issubclass(c, errors.QueryError)]
    assert not [c for c in query if issubclass(c, errors.LedgerError)]


def _status(exc) -> int:
    return int(api_errors.from_domain(exc).status_code)


def test_every_condition_has_a_deliberate_status():
    for cls in _error_classes():
        if cls in (errors.DomainError, errors.LedgerError, errors.QueryError,
                   errors.QuotaError, errors.OutcomeUnknown):
            continue
        exc = cls("k") if cls is errors.DuplicateQueryKey else cls("detail")
        assert _status(exc) in (400, 403, 404, 409), cls.__name__


def test_duplicate_key_reads_alike_on_every_route():
    exc = errors.DuplicateQueryKey("root_required")
    assert exc.detail == "Query parameter 'root_required' may be specified only once."
    mapped = api_errors.from_domain(exc)
    assert mapped.status == falcon.HTTP_400
    assert mapped.code == "placement.query.duplicate_key"
