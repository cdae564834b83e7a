"""A file's content is a download: an uploaded HTML page is never rendered by a browser on the server's origin."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_serving import knowledge_app

pytestmark = pytest.mark.anyio


async def test_content_is_served_as_an_attachment_the_browser_does_not_sniff(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, _):
        page = b"<html><script>alert(document.domain)</script></html>"
        form = {"file": ("page.html", page, "text/html")}
        uploaded = (await http.post("/v1/files", files=form, data={"purpose": "assistants"})).json()
        content = await http.get(f"/v1/files/{uploaded['id']}/content")
    assert content.status_code == 200 and content.content == page
    assert content.headers["content-disposition"].startswith("attachment")
    assert content.headers["x-content-type-options"] == "nosniff"
