"""Old names still lead somewhere: since each view has one name everywhere (issue 20), the pages
and API routes users could have bookmarked or scripted under an older name answer 307 with the
new address, query string kept (README, "HTTP API")."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from profboard.server.app import create_app
from profboard.server.settings import Settings


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    app = create_app(Settings(logdir=str(tmp_path_factory.mktemp("empty")), cache_dir=None, rescan_seconds=3600))
    with TestClient(app, base_url="http://localhost", follow_redirects=False) as c:
        yield c


@pytest.mark.parametrize(("old", "new"), [
    ("/operator", "/operators"),
    ("/operator?run=r&worker=w&span=1&q=aten%3A%3Amm&sort=calls:desc", "/operators?run=r&worker=w&span=1&q=aten%3A%3Amm&sort=calls:desc"),
    ("/kernel?run=r&group_by=name_op&op=aten%3A%3Aconv2d", "/kernels?run=r&group_by=name_op&op=aten%3A%3Aconv2d"),
    ("/?view=operator&run=r&span=2", "/operators?run=r&span=2"),
    ("/?view=kernel", "/kernels"),
    ("/module?run=r&worker=w&span=1&width=host", "/modules?run=r&worker=w&span=1&width=host"),
], ids=["operator", "operator-query", "kernel-query", "index-view-operator", "index-view-kernel", "module-query"])
def test_renamed_page_redirects_with_its_query(client, old, new):
    response = client.get(old)
    assert response.status_code == 307, response.text
    assert response.headers["location"] == new
    assert client.get(new).status_code == 200


@pytest.mark.parametrize("page", ["/operators", "/kernels", "/modules", "/?view=operators"])
def test_new_page_names_answer_directly(client, page):
    response = client.get(page)
    assert response.status_code == 200
    assert 'data-view="' + (page.rsplit("=", 1)[-1] if "=" in page else page[1:]) + '"' in response.text


@pytest.mark.parametrize(("old", "new"), [
    ("/api/optree?run=r&worker=w&span=1", "/api/modules/optree?run=r&worker=w&span=1"),
    ("/api/optree", "/api/modules/optree"),
    ("/api/memory/snapshot?run=r&file=a.pickle", "/api/snapshot?run=r&file=a.pickle"),
    ("/api/memory/snapshot/timeline?run=r&device=0", "/api/snapshot/timeline?run=r&device=0"),
    ("/api/memory/snapshot/state?run=r&at=-1", "/api/snapshot/state?run=r&at=-1"),
    ("/api/memory/snapshot/sites?run=r&by=calls&n=5", "/api/snapshot/sites?run=r&by=calls&n=5"),
], ids=["optree-query", "optree", "snapshot", "snapshot-timeline", "snapshot-state", "snapshot-sites"])
def test_moved_api_route_redirects_with_its_query(client, old, new):
    for method in (client.get, client.head):
        response = method(old)
        assert response.status_code == 307, response.text
        assert response.headers["location"] == new
    # Where it lands is the route itself: unknown run, the API's own 404.
    landed = client.get(old, follow_redirects=True)
    assert landed.url.path == new.split("?")[0]
    assert landed.status_code in (400, 404) and "error" in landed.json()


def test_moved_api_routes_are_not_in_the_schema(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert "/api/optree" not in paths and "/api/modules/optree" in paths
    assert not [p for p in paths if p.startswith("/api/memory/snapshot")]
    assert {"/api/snapshot", "/api/snapshot/timeline", "/api/snapshot/state", "/api/snapshot/sites"} <= set(paths)
