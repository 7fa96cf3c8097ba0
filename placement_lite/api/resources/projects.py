"""The project registry under /v3/projects, in Keystone's shapes.

A top-level project's parent_id is its domain's id, as in Keystone. Under
strict_two_level a project can only be created below a top-level project.
"""
from __future__ import annotations

import falcon

from placement_lite.api import render, request
from placement_lite.api.resources.limits import Resource, base_url, collection_links
from placement_lite.api.schemas import limits as schema
from placement_lite.quota import projects

RULES = {action: f"placement:limits:projects:{action}"
         for action in ("list", "show", "create", "update", "delete")}


def render_project(req, p: projects.Project) -> dict:
    return {
        "id": p.external_id,
        "name": p.name if p.name is not None else p.external_id,
        "description": p.description or "",
        "domain_id": p.domain_external_id,
        "parent_id": p.parent_external_id or p.domain_external_id,
        "is_domain": p.is_domain,
        "enabled": p.enabled,
        "tags": [],
        "links": {"self": f"{base_url(req)}/projects/{p.external_id}"},
    }


class Projects(Resource):
    policies = {"GET": RULES["list"], "POST": RULES["create"]}

    def on_get(self, req, resp):
        query = request.query(req, schema.PROJECTS_QUERY)
        with self.db.read() as conn:
            parent = (projects.get(conn, query["parent_id"], "parent project")
                      if "parent_id" in query else None)
            domain = (projects.get(conn, query["domain_id"], "domain")
                      if "domain_id" in query else None)
            flags = {k: query[k] == "true" for k in ("is_domain", "enabled")
                     if k in query}
            rows = projects.list_projects(conn, name=query.get("name"),
                                          parent=parent, domain=domain, **flags)
        render.send(resp, {"projects": [render_project(req, p) for p in rows],
                           "links": collection_links(req)})

    def on_post(self, req, resp):
        body = request.json_body(req, schema.PROJECT_CREATE)["project"]
        max_depth = self.model.max_depth
        row = self.db.run_write(lambda conn: projects.create(
            conn, external_id=body.get("id"), name=body["name"],
            description=body.get("description"), parent=body.get("parent_id"),
            domain=body.get("domain_id"), is_domain=body.get("is_domain", False),
            enabled=body.get("enabled", True), max_depth=max_depth))
        render.send(resp, {"project": render_project(req, row)}, falcon.HTTP_201)


class Project(Resource):
    policies = {"GET": RULES["show"], "PATCH": RULES["update"],
                "DELETE": RULES["delete"]}

    def on_get(self, req, resp, project_id):
        with self.db.read() as conn:
            row = projects.get(conn, project_id)
        render.send(resp, {"project": render_project(req, row)})

    def on_patch(self, req, resp, project_id):
        body = request.json_body(req, schema.PROJECT_UPDATE)["project"]

        def work(conn):
            return projects.update_project(conn, projects.get(conn, project_id),
                                           body)
        row = self.db.run_write(work)
        render.send(resp, {"project": render_project(req, row)})

    def on_delete(self, req, resp, project_id):
        self.db.run_write(lambda conn: projects.delete_project(
            conn, projects.get(conn, project_id)))
        render.no_content(resp)
