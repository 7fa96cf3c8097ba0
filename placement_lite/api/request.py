"""Reading request bodies and query strings, validated by jsonschema.

What passes here is safe to hand to the domain and the database: JSON
with no NaN or infinities (which are not JSON, and which would make a
capacity comparison false), no lone surrogates or NUL characters (which
no database column can hold), no integer wider than 64 bits, and nothing
nested deeper than MAX_JSON_DEPTH. Errors start with Placement's own
phrase for the condition ("Malformed JSON", "JSON does not validate",
"Invalid query string parameters"), then name the field and say what
was wrong, quoting values bounded (api/echo.py).
"""
from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from typing import Any, Mapping

import falcon
import jsonschema
from jsonschema import Draft7Validator, FormatChecker

from placement_lite.api import errors
from placement_lite.api.echo import quote, quote_str
from placement_lite.errors import DuplicateQueryKey

MAX_JSON_DEPTH = 32
# Every integer column is at most 64 bits wide; a wider number reaching
# a query is an overflow in the driver, not an answer.
MAX_INT = 2**63 - 1

_FORMAT_CHECKER = FormatChecker()
# Keyed by the schema's canonical text: schemas built per request (the
# provider list's, which depends on the microversion) then share one
# validator per distinct document instead of adding one per request.
VALIDATOR_CACHE_SIZE = 256
_VALIDATORS: "OrderedDict[str, Draft7Validator]" = OrderedDict()

PHRASE_BODY = "JSON does not validate"
PHRASE_QUERY = "Invalid query string parameters"
PHRASE_MALFORMED = "Malformed JSON"


def _finite_number(checker, instance) -> bool:
    # jsonschema's "number" admits float('nan') and the infinities; a
    # capacity computed from one compares false (or true) whatever it is
    # compared with.
    return (Draft7Validator.TYPE_CHECKER.is_type(instance, "number")
            and not (isinstance(instance, float) and not math.isfinite(instance)))


def _identity(value):
    """A hashable stand-in equal exactly when jsonschema calls two JSON
    values equal: 1 == 1.0, but True is not 1 and "1" is not 1."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_identity(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _identity(v)) for k, v in value.items()))
    return ("null", None)


def _unique_items(validator, unique, instance, schema):
    # jsonschema's own check compares unhashable items pairwise: 10,000
    # distinct objects cost minutes of CPU. One pass over hashed items.
    if not unique or not validator.is_type(instance, "array"):
        return
    seen = set()
    for item in instance:
        key = _identity(item)
        if key in seen:
            yield jsonschema.ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


_Validator = jsonschema.validators.extend(
    Draft7Validator,
    validators={"uniqueItems": _unique_items},
    type_checker=Draft7Validator.TYPE_CHECKER.redefine("number", _finite_number))


# The same schema object asked for again (a module's constant, most
# requests) finds its validator without serialising the schema to find
# its key; each entry holds its schema, so an id here is never one a
# freed object left behind.
_BY_OBJECT: "OrderedDict[int, tuple[Mapping, Draft7Validator]]" = OrderedDict()


def _validator(schema: Mapping) -> Draft7Validator:
    known = _BY_OBJECT.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    key = json.dumps(schema, sort_keys=True, default=repr)
    validator = _VALIDATORS.get(key)
    if validator is None:
        validator = _Validator(schema, format_checker=_FORMAT_CHECKER)
        _VALIDATORS[key] = validator
        if len(_VALIDATORS) > VALIDATOR_CACHE_SIZE:
            _VALIDATORS.popitem(last=False)
    else:
        _VALIDATORS.move_to_end(key)
    _BY_OBJECT[id(schema)] = (schema, validator)
    if len(_BY_OBJECT) > VALIDATOR_CACHE_SIZE:
        _BY_OBJECT.popitem(last=False)
    return validator


def validator_cache_size() -> int:
    return len(_VALIDATORS)


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


def _printable(text: str) -> str:
    """Control characters and lone surrogates as escapes, the rest as is."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group(0))[1:-1], text)


def _path_text(path) -> str:
    parts = []
    for part in path:
        if isinstance(part, str):
            cut = f"{part[:40]}…" if len(part) > 40 else part
            parts.append(_printable(cut))
        else:
            parts.append(str(part))
    return "/".join(parts)


def _where(path) -> str:
    text = _path_text(path)
    return f" at '{text}'" if text else ""


# -- what a schema failure says ---------------------------------------------

def _is_uuid_pattern(pattern) -> bool:
    # Our uuid patterns (schemas/*.UUID) are the only ones spelling out
    # eight hex digits; recognising them keeps a regex out of the message.
    return isinstance(pattern, str) and "[0-9a-fA-F]{8}" in pattern


UUID_HINT = " A UUID is 32 hex digits, with or without dashes, in either case."


def _uuid_words(value) -> str:
    return f"{quote(value)} is not a valid UUID (is not a 'uuid')"


def _extra_keys(err: jsonschema.ValidationError) -> list:
    schema, instance = err.schema, err.instance
    if not isinstance(instance, dict):
        return []
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [key for key in instance if key not in known
            and not any(re.search(p, key) for p in patterns)]


def _describe(err: jsonschema.ValidationError) -> tuple[str, str]:
    """(what was wrong, the validator to name), quoting values bounded."""
    validator = err.validator
    if validator == "format" and err.validator_value == "uuid":
        return _uuid_words(err.instance), "format"
    if validator == "pattern" and _is_uuid_pattern(err.validator_value):
        # A uuid pattern stands in for the 'uuid' format Placement uses.
        return _uuid_words(err.instance), "format"
    if validator == "additionalProperties":
        extras = _extra_keys(err)
        patterns = list(err.schema.get("patternProperties", {}))
        shown = ", ".join(quote_str(k) for k in extras[:3])
        more = f" and {len(extras) - 3} more" if len(extras) > 3 else ""
        if patterns and all(_is_uuid_pattern(p) for p in patterns):
            return (f"{shown}{more} does not match any of the regexes: "
                    "not a valid UUID", validator)
        if patterns:
            return (f"{shown}{more} does not match any of the regexes: "
                    + ", ".join(repr(p) for p in sorted(patterns)), validator)
        verb = "was" if len(extras) == 1 else "were"
        return (f"Additional properties are not allowed ({shown}{more} {verb} "
                "unexpected)", validator)
    message = err.message
    if isinstance(err.instance, (str, list, dict, int, float)) and not isinstance(
            err.instance, bool):
        full = repr(err.instance)
        if len(full) > 80 or "\\" in full:
            message = message.replace(full, quote(err.instance))
    return message, validator


def _schema_path(err: jsonschema.ValidationError) -> str:
    inner = "".join(f"[{p!r}]" for p in list(err.relative_schema_path)[:-1])
    return f"schema{inner}"


def _phrase(what: str) -> str:
    return {"JSON body": PHRASE_BODY, "Query string": PHRASE_QUERY}.get(
        what, f"{what} is invalid")


def validate(data: Any, schema: Mapping, what: str = "JSON body") -> None:
    """400 naming the offending field; the first error by schema path.

    The detail reads like Placement's ("JSON does not validate: ...
    Failed validating 'maxLength' in schema[...]"), without its dump of
    the schema and the instance.
    """
    validator = _validator(schema)
    errs = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errs:
        best = jsonschema.exceptions.best_match(errs) or errs[0]
        words, failed = _describe(best)
        hint = UUID_HINT if "not a valid UUID" in words else ""
        raise errors.bad_request(
            f"{_phrase(what)}: {words}{_where(best.absolute_path)}.{hint} "
            f"Failed validating {failed!r} in {_schema_path(best)}.")
    _check_ints(data, what)


def _check_ints(data: Any, what: str) -> None:
    """No integer wider than a database column, wherever the schema let
    one through (a generation, an id, a limit without a maximum)."""
    stack = [(data, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, path + (k,)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, path + (i,)) for i, v in enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool) and not (
                -MAX_INT - 1 <= node <= MAX_INT):
            raise errors.bad_request(
                f"{_phrase(what)}: {quote(node)}{_where(path)} is out of range: "
                f"integers must lie between {-MAX_INT - 1} and {MAX_INT}.")


# -- parsing -----------------------------------------------------------------

class _NotJson:
    """Where the parser met NaN, Infinity or a number too large for a
    float: kept as a marker so the error can name its field."""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _parse_float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NotJson(text)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _string_problem(text: str, is_key: bool, path) -> str | None:
    if "\x00" in text:
        # No name or id here may hold one, and PostgreSQL cannot store it.
        return f"{_what(text, is_key, path)} contains a NUL (\\u0000) character"
    if _has_surrogate(text):
        # Not a character: no database can store it, no response encode it.
        return (f"{_what(text, is_key, path)} contains a lone surrogate "
                "(\\ud800-\\udfff), which is not a Unicode character")
    return None


def _what(text: str, is_key: bool, path) -> str:
    return f"the {'key' if is_key else 'string'}{_where(path)}, {quote(text)},"


def _inspect(value: Any, limit: int) -> str | None:
    """The first reason `value` cannot be accepted, naming where it is:
    nesting deeper than `limit`, NaN or an infinity, NUL, or a lone
    surrogate in a string or key. Iterative so a hostile body cannot
    exhaust the Python stack."""
    stack = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if depth > limit:
            return f"JSON body is nested deeper than {limit} levels"
        if isinstance(node, dict):
            for key, child in node.items():
                problem = _string_problem(key, True, path + (key,))
                if problem:
                    return problem
                stack.append((child, depth + 1, path + (key,)))
        elif isinstance(node, list):
            stack.extend((child, depth + 1, path + (i,))
                         for i, child in enumerate(node))
        elif isinstance(node, str):
            problem = _string_problem(node, False, path)
            if problem:
                return problem
        elif isinstance(node, _NotJson):
            return (f"{quote_str(node.text, 40)[1:-1]}{_where(path)} is not a JSON "
                    "number: JSON has no NaN or infinities, and numbers must "
                    "fit a double")
    return None


def json_body(req: falcon.Request, schema: Mapping | None = None) -> Any:
    """The request's JSON body: 415 if not JSON, 400 if malformed/invalid."""
    ctype = (req.content_type or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        # Placement's phrase, which names a missing type "None".
        given = req.content_type or "None"
        raise errors.ApiError(
            falcon.HTTP_415,
            f"The media type {given} is not supported, use application/json"
            + (" (the request has no Content-Type header)." if not req.content_type
               else "."))
    # The size was checked by InputLimitsMiddleware: waitress de-chunks a
    # chunked body and sets its Content-Length before the app sees it.
    raw = req.bounded_stream.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise errors.bad_request(f"{PHRASE_MALFORMED}: the body is not UTF-8.")
    try:
        data = json.loads(text, parse_constant=_NotJson, parse_float=_parse_float)
    except RecursionError:
        raise errors.bad_request(
            f"{PHRASE_MALFORMED}: JSON body is nested deeper than "
            f"{MAX_JSON_DEPTH} levels.")
    except ValueError as exc:
        raise errors.bad_request(f"{PHRASE_MALFORMED}: {exc}")
    problem = _inspect(data, MAX_JSON_DEPTH)
    if problem:
        raise errors.bad_request(f"{PHRASE_MALFORMED}: {problem}.")
    if schema is not None:
        validate(data, schema)
    else:
        _check_ints(data, "JSON body")
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
            raise errors.from_domain(DuplicateQueryKey(name))
        else:
            params[name] = value
    if schema is not None:
        validate(params, schema, what="Query string")
    return params
