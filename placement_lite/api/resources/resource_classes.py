"""/resource_classes and /resource_classes/{name} (from 1.2)."""
from __future__ import annotations

import falcon

from placement_lite.api import render, request
from placement_lite.api.microversion import VersionedTable, versioned
from placement_lite.api.versions import IDEMPOTENT_CLASS_PUT, RESOURCE_CLASSES
from placement_lite.api.schemas import resource_classes as schema
from placement_lite.ledger import resource_classes


def class_url(name: str) -> str:
    return f"/resource_classes/{name}"


def class_body(req: falcon.Request, rc) -> dict:
    # Links start at the mount point (SCRIPT_NAME), as Placement's do.
    return {"name": rc.name,
            "links": [render.link("self", req.root_path + class_url(rc.name))]}


class ResourceClasses:
    policies = {"GET": "placement:resource_classes:list",
                "POST": "placement:resource_classes:create"}

    def __init__(self, services):
        self.services = services

    @versioned(RESOURCE_CLASSES)
    def on_get(self, req, resp):
        with self.services.db.read() as conn:
            found = resource_classes.list_classes(conn)
        render.send(resp, {"resource_classes": [class_body(req, rc) for rc in found]})
        render.cache_headers(req, resp, [rc.modified for rc in found])

    @versioned(RESOURCE_CLASSES)
    def on_post(self, req, resp):
        name = request.json_body(req, schema.NAMED)["name"]
        self.services.db.run_write(lambda conn: resource_classes.create(conn, name))
        resp.location = req.prefix + class_url(name)
        resp.status = falcon.HTTP_201
        resp.content_type = None


class ResourceClass:
    policies = {"GET": "placement:resource_classes:show",
                "PUT": "placement:resource_classes:update",
                "DELETE": "placement:resource_classes:delete"}

    def __init__(self, services):
        self.services = services
        # Before 1.7 PUT renames a custom class; from 1.7 it creates the
        # named class, or confirms it exists, idempotently.
        self.put_behaviour = VersionedTable([(RESOURCE_CLASSES, self._rename),
                                             (IDEMPOTENT_CLASS_PUT, self._ensure)])

    @versioned(RESOURCE_CLASSES)
    def on_get(self, req, resp, name):
        with self.services.db.read() as conn:
            rc = resource_classes.get(conn, name)
        render.send(resp, class_body(req, rc))
        render.cache_headers(req, resp, [rc.modified])

    @versioned(RESOURCE_CLASSES)
    def on_put(self, req, resp, name):
        self.put_behaviour.at(req.context.microversion)(req, resp, name)

    def _rename(self, req, resp, name):
        new_name = request.json_body(req, schema.NAMED)["name"]
        renamed = self.services.db.run_write(
            lambda conn: resource_classes.rename(conn, name, new_name))
        render.send(resp, class_body(req, renamed))
        render.cache_headers(req, resp, [renamed.modified])

    def _ensure(self, req, resp, name):
        # Placement validates the name as a JSON body {"name": ...}, and
        # says so ("JSON does not validate").
        request.validate({"name": name}, schema.PATH)
        created = self.services.db.run_write(
            lambda conn: resource_classes.ensure(conn, name))
        resp.location = req.prefix + class_url(name)
        if created:
            resp.status = falcon.HTTP_201
            resp.content_type = None
        else:
            render.no_content(resp)

    @versioned(RESOURCE_CLASSES)
    def on_delete(self, req, resp, name):
        self.services.db.run_write(
            lambda conn: resource_classes.delete_class(conn, name))
        render.no_content(resp)
