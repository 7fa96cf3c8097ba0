"""/traits, /traits/{name} and /resource_providers/{uuid}/traits (1.6)."""
from __future__ import annotations

import falcon

from placement_lite.api import errors, render, request
from placement_lite.api.microversion import versioned
from placement_lite.api.versions import TRAITS
from placement_lite.api.schemas import traits as schema
from placement_lite.ledger import providers, traits


INVALID_TRAIT = (
    'The trait is invalid. A valid trait must be no longer than 255 '
    'characters, start with the prefix "CUSTOM_" and use following '
    'characters: "A"-"Z", "0"-"9" and "_"')


def _name_filter(value: str) -> dict:
    """?name=startswith:PREFIX or ?name=in:A,B as list_traits arguments.

    As in Placement, a value without a colon is a 400, and an operator
    other than the two filters nothing."""
    kind, sep, rest = value.partition(":")
    if not sep:
        raise errors.bad_request(
            "Badly formatted name parameter. Expected name query string "
            "parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. "
            f'Got: "{value}"')
    if kind == "startswith":
        return {"prefix": rest}
    if kind == "in":
        return {"names": rest.split(",")}
    return {}


class Traits:
    policies = {"GET": "placement:traits:list"}

    def __init__(self, services):
        self.services = services

    @versioned(TRAITS)
    def on_get(self, req, resp):
        params = request.query(req, schema.LIST_QUERY)
        kwargs = _name_filter(params["name"]) if "name" in params else {}
        if "associated" in params:
            if params["associated"].lower() not in ("true", "false"):
                raise errors.bad_request(
                    'The query parameter "associated" only accepts "true" or '
                    f'"false"; got "{params["associated"]}".')
            kwargs["associated"] = params["associated"].lower() == "true"
        with self.services.db.read() as conn:
            found = traits.list_traits(conn, **kwargs)
        render.send(resp, {"traits": [tr.name for tr in found]})
        render.cache_headers(req, resp, [tr.modified for tr in found])


class Trait:
    policies = {"GET": "placement:traits:show",
                "PUT": "placement:traits:update",
                "DELETE": "placement:traits:delete"}
    # GET answers 204 without a body, so any Accept will do (as in Placement).
    produces = None

    def __init__(self, services):
        self.services = services

    @versioned(TRAITS)
    def on_get(self, req, resp, name):
        with self.services.db.read() as conn:
            trait = traits.get(conn, name)
        render.no_content(resp)
        render.cache_headers(req, resp, [trait.modified])

    @versioned(TRAITS)
    def on_put(self, req, resp, name):
        if not schema.valid_custom_trait(name):
            shown = name if len(name) <= 64 else name[:64] + "..."
            raise errors.bad_request(f"{INVALID_TRAIT}. Got: '{shown}'.")
        trait, created = self.services.db.run_write(
            lambda conn: traits.ensure(conn, name))
        resp.location = f"{req.prefix}/traits/{name}"
        if created:
            resp.status = falcon.HTTP_201
            resp.content_type = None
        else:
            render.no_content(resp)
        render.cache_headers(req, resp, [trait.modified])

    @versioned(TRAITS)
    def on_delete(self, req, resp, name):
        self.services.db.run_write(lambda conn: traits.delete_trait(conn, name))
        render.no_content(resp)


class ProviderTraits:
    policies = {"GET": "placement:resource_providers:traits:list",
                "PUT": "placement:resource_providers:traits:update",
                "DELETE": "placement:resource_providers:traits:delete"}

    def __init__(self, services):
        self.services = services

    def _send(self, req, resp, found, generation):
        render.send(resp, {"traits": [tr.name for tr in found],
                           "resource_provider_generation": generation})
        render.cache_headers(req, resp, [tr.modified for tr in found])

    @versioned(TRAITS)
    def on_get(self, req, resp, uuid):
        with self.services.db.read() as conn:
            provider = providers.get_by_uuid(conn, uuid)
            found = traits.provider_traits(conn, provider)
        self._send(req, resp, found, provider.generation)

    @versioned(TRAITS)
    def on_put(self, req, resp, uuid):
        data = request.json_body(req, schema.SET_FOR_PROVIDER)

        def replace(conn):
            provider, held = traits.provider_for_write(conn, uuid)
            providers.check_generation_unchanged(
                provider, data["resource_provider_generation"])
            return traits.replace_provider_traits(
                conn, provider, data["traits"],
                data["resource_provider_generation"], held=held)

        # The client's generation is checked: a retry could not help.
        generation, found = self.services.db.run_write(replace)
        self._send(req, resp, found, generation)

    @versioned(TRAITS)
    def on_delete(self, req, resp, uuid):
        def remove(conn):
            traits.delete_provider_traits(conn, providers.get_by_uuid(conn, uuid))

        self.services.db.run_write(remove)
        render.no_content(resp)
