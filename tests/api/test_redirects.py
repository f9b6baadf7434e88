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
], ids=["operator", "operator-query", "kernel-query", "index-view-operator", "index-view-kernel"])
def test_renamed_page_redirects_with_its_query(client, old, new):
    response = client.get(old)
    assert response.status_code == 307, response.text
    assert response.headers["location"] == new
    assert client.get(new).status_code == 200


@pytest.mark.parametrize("page", ["/operators", "/kernels", "/?view=operators"])
def test_new_page_names_answer_directly(client, page):
    response = client.get(page)
    assert response.status_code == 200
    assert 'data-view="' + (page.rsplit("=", 1)[-1] if "=" in page else page[1:]) + '"' in response.text
