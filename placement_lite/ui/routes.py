"""The console's route table: every page, the Explain and reservation
pages included.

Kept apart from pages.py so that explain_page.py, which builds on
pages.Page, is imported by the table rather than by the module it extends
(no import cycle)."""
from __future__ import annotations

from placement_lite.ui.explain_page import ExplainPage
from placement_lite.ui.pages import (
    ConsumerList, ConsumerPage, Fleet, Login, Logout, ProjectList, ProjectPage, ProviderList,
    ProviderPage, Static)
from placement_lite.ui.reservation_pages import (
    ProjectTimeline, ProviderTimeline, ReservationList)

ROUTES = [
    ("/ui", Fleet),
    ("/ui/", Fleet),
    ("/ui/fleet", Fleet),
    ("/ui/providers", ProviderList),
    ("/ui/providers/{uuid}", ProviderPage),
    ("/ui/projects", ProjectList),
    ("/ui/projects/{project_id}", ProjectPage),
    ("/ui/consumers", ConsumerList),
    ("/ui/consumers/{consumer_uuid}", ConsumerPage),
    ("/ui/login", Login),
    ("/ui/logout", Logout),
    ("/ui/static/{name}", Static),
    ("/ui/explain", ExplainPage),
    ("/ui/reservations", ReservationList),
    ("/ui/reservations/providers/{uuid}", ProviderTimeline),
    ("/ui/reservations/projects/{project_id}", ProjectTimeline),
]
