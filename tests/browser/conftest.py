"""Fixtures of the console's browser tests: one server per test worker, a chromium and a page per test.

Each page records every request it makes (the test fails if one leaves the server's
origin) and every JavaScript error (the test fails on any); a failed test leaves a
screenshot of its page (``FERRYMAN_TEST_SCREENSHOTS``, else ``screenshots`` under pytest's temporary folder).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_harness import CHROMIUM, SCREENSHOTS_ENV, ConsoleServer, console_server, require_browser
from playwright.sync_api import Browser, Playwright, sync_playwright
from watched import DESKTOP, Watched, checked, watch


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test, for the page fixture to see whether it failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    """Ferryman with API keys on, on a real socket, for this worker."""
    require_browser()
    with console_server(tmp_path_factory.mktemp("console")) as server:
        yield server


@pytest.fixture()
def playwright() -> Iterator[Playwright]:
    """Playwright's driver, for one test: while it runs, its event loop is this thread's, and the async tests
    that a worker runs after this one need the thread free of it (a browser starts in well under a second)."""
    require_browser()
    with sync_playwright() as driver:
        yield driver


@pytest.fixture()
def browser(playwright: Playwright) -> Iterator[Browser]:
    """Debian's chromium, headless."""
    launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
    yield launched
    launched.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path_factory.getbasetemp() / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture()
def page(
    browser: Browser, console: ConsoleServer, screenshots: Path, request: pytest.FixtureRequest
) -> Iterator[Watched]:
    """A fresh tab (its own session storage) at 1280 px, watched; checked and, on failure, photographed after."""
    console.call(_reset(console))
    context = browser.new_context(viewport=DESKTOP)
    watched = watch(context.new_page(), console.base_url)
    try:
        yield watched
    finally:
        report = getattr(request.node, "report_call", None)
        shot = screenshots / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', request.node.nodeid)}.png"
        problems = checked(watched, failed=report is None or report.failed, shot=shot)
        context.close()
    assert not problems, "; ".join(problems)
    console.check_script()


def _reset(console: ConsoleServer):  # type: ignore[no-untyped-def]
    async def reset() -> None:
        console.script.reset()

    return reset
