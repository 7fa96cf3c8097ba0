"""Reading request bodies and query strings, validated by jsonschema."""
from __future__ import annotations

import json
from typing import Any, Mapping

import falcon
import jsonschema
from jsonschema import Draft7Validator, FormatChecker

from placement_lite.api import errors

_FORMAT_CHECKER = FormatChecker()
_VALIDATORS: dict[int, Draft7Validator] = {}
MAX_JSON_DEPTH = 32


def _validator(schema: Mapping) -> Draft7Validator:
    key = id(schema)
    validator = _VALIDATORS.get(key)
    if validator is None:
        validator = Draft7Validator(schema, format_checker=_FORMAT_CHECKER)
        _VALIDATORS[key] = validator
    return validator


def _where(error: jsonschema.ValidationError) -> str:
    path = "/".join(str(p) for p in error.absolute_path)
    return f" at '{path}'" if path else ""


def validate(data: Any, schema: Mapping, what: str = "JSON body") -> None:
    """400 naming the offending field; the first error by schema path."""
    validator = _validator(schema)
    errs = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errs:
        best = jsonschema.exceptions.best_match(errs) or errs[0]
        raise errors.bad_request(
            f"{what} does not match the schema{_where(best)}: {best.message}")


def _inspect(value: Any, limit: int) -> tuple[int, bool]:
    """(nesting depth, whether any string or key holds a NUL character).

    Iterative so a hostile body cannot exhaust the Python stack; stops
    early once the depth is over `limit`.
    """
    stack = [(value, 1)]
    deepest = 0
    nul = False
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest, nul
        if isinstance(node, dict):
            nul = nul or any("\x00" in key for key in node)
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
        elif isinstance(node, str) and "\x00" in node:
            nul = True
    return deepest, nul


def json_body(req: falcon.Request, schema: Mapping | None = None) -> Any:
    """The request's JSON body: 415 if not JSON, 400 if malformed/invalid."""
    ctype = (req.content_type or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise errors.ApiError(
            falcon.HTTP_415,
            f"The media type {req.content_type or '(none)'} is not supported, "
            "use application/json.")
    # The size was checked by InputLimitsMiddleware: waitress de-chunks a
    # chunked body and sets its Content-Length before the app sees it.
    raw = req.bounded_stream.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise errors.bad_request("Malformed JSON: the body is not UTF-8.")
    try:
        data = json.loads(text)
    except RecursionError:
        raise errors.bad_request(
            f"JSON body is nested deeper than {MAX_JSON_DEPTH} levels.")
    except ValueError as exc:
        raise errors.bad_request(f"Malformed JSON: {exc}")
    depth, nul = _inspect(data, MAX_JSON_DEPTH)
    if depth > MAX_JSON_DEPTH:
        raise errors.bad_request(
            f"JSON body is nested deeper than {MAX_JSON_DEPTH} levels.")
    if nul:
        # No name or id here may hold one, and PostgreSQL cannot store it.
        raise errors.bad_request("JSON body contains a NUL (\\u0000) character.")
    if schema is not None:
        validate(data, schema)
    return data


def query(req: falcon.Request, schema: Mapping | None = None,
          multi: tuple[str, ...] = ()) -> dict[str, Any]:
    """Query parameters as a dict; names in `multi` always come as lists.

    Other names given twice are a 400, as in Placement.
    """
    params: dict[str, Any] = {}
    for name, value in req.params.items():
        if name in multi:
            params[name] = value if isinstance(value, list) else [value]
        elif isinstance(value, list):
            raise errors.bad_request(
                f"Query parameter {name!r} may appear only once.",
                code="placement.query.duplicate_key")
        else:
            params[name] = value
    if schema is not None:
        validate(params, schema, what="Query string")
    return params
