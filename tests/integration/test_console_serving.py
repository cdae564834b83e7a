"""``/console``: served from the package without a key, under a strict CSP, while the API still asks for one."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import anyio
import pytest
from starlette.types import ASGIApp, Message

from ferryman.auth.api_keys import ApiKeyAuthenticator
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.console import STATIC
from ferryman.server.app import build_services, create_app
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from inprocess import migrated_sqlite, scripted_provider, serving

pytestmark = pytest.mark.anyio


async def test_the_page_and_its_files_are_open_with_a_strict_policy_and_nothing_else_is(tmp_path: Path) -> None:
    store = SqliteStore(migrated_sqlite(tmp_path / "console.db"))
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)), None)
    async with serving(build_services(store, [scripted_provider(Script())], authenticator=authenticator)) as http:
        for path in ("/console", "/console/"):
            page = await http.get(path)
            assert page.status_code == 200, path
            assert page.headers["content-type"].startswith("text/html")
            assert '<base href="/console/">' in page.text and "{{base}}" not in page.text
            policy = page.headers["content-security-policy"]
            assert "default-src 'self'" in policy and "script-src 'self'" in policy and "unsafe" not in policy
        script = await http.get("/console/app.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        assert script.headers["content-security-policy"] == page.headers["content-security-policy"]
        assert script.headers["x-content-type-options"] == "nosniff"
        assert (await http.get("/console/views/timeline.js")).status_code == 200
        assert (await http.get("/console/missing.js")).status_code == 404
        for outside in ("/consoles", "/console-x/app.js", "/v1/agents"):  # not the console's: a key is asked for
            assert (await http.get(outside)).status_code == 401, outside


async def test_a_path_that_climbs_out_of_the_console_is_not_found(tmp_path: Path) -> None:
    """Sent as raw paths (a client such as httpx would resolve the dots before sending): the console's files
    answer 404, where reaching the API would have asked for a key (401) and a file outside would be a 200."""
    store = SqliteStore(migrated_sqlite(tmp_path / "console.db"))
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)), None)
    app = create_app(build_services(store, [scripted_provider(Script())], authenticator=authenticator))
    async with app.router.lifespan_context(app):
        for raw in ("/console/../v1/agents", "/console/%2e%2e/v1/agents", "/console/../../pyproject.toml",
                    "/console/..%2f..%2fpyproject.toml", "/console/views/../../__init__.py"):  # fmt: skip
            assert await _status(app, raw) == 404, raw
        assert await _status(app, "/console/views/../app.js") == 200  # dots that stay inside are fine
        assert await _status(app, "/v1/agents") == 401


async def _status(app: ASGIApp, raw: str) -> int:
    """The status of a GET of ``raw``, exactly as written, straight to the app."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": unquote(raw), "raw_path": raw.encode(), "root_path": "", "query_string": b"",
        "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
    }  # fmt: skip
    sent: list[Message] = []
    requested, answered = False, anyio.Event()

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await answered.wait()  # the client goes once the answer is whole
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            answered.set()

    await app(scope, receive, send)
    [start] = [message for message in sent if message["type"] == "http.response.start"]
    return int(start["status"])


def test_every_file_the_page_loads_is_in_the_package_and_nothing_comes_from_elsewhere() -> None:
    files = {path.relative_to(STATIC).as_posix() for path in STATIC.rglob("*") if path.is_file()}
    assert {"index.html", "app.js", "api.js", "dom.js", "console.css", "favicon.svg"} <= files
    for name in files:
        text = (STATIC / name).read_text(encoding="utf-8").replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name
