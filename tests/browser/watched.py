"""A page under watch: the URLs it requests, the errors its scripts raise or log, and axe-core's verdict."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from console_harness import AXE
from playwright.sync_api import ConsoleMessage, Page

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# A refused request (the sign-in's probe answered 401) is logged by chromium as an error: it is no script's.
_REFUSED = re.compile(r"^Failed to load resource: the server responded with a status of 401")


@dataclass
class Watched:
    """A page, the URLs it requested and the errors its scripts raised or logged."""

    page: Page
    origin: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def foreign(self) -> list[str]:
        """The requests that left the server's origin."""
        return [url for url in self.requests if _origin(url) != self.origin and not url.startswith(("data:", "blob:"))]

    def axe(self) -> list[dict[str, object]]:
        """axe-core's serious and critical violations on the page as it is now."""
        if not self.page.evaluate("() => typeof window.axe === 'object'"):
            # Evaluated by the driver, not loaded by the page: the console's CSP stays as strict as served.
            self.page.evaluate(AXE.read_text(encoding="utf-8") + "\n;void 0")
        violations: list[dict[str, object]] = self.page.evaluate(
            """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
                 .filter((v) => v.impact === "serious" || v.impact === "critical")
                 .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                               targets: v.nodes.map((n) => n.target.join(" "))}))"""
        )
        return violations


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def watch(page: Page, origin: str) -> Watched:
    watched = Watched(page, origin)
    page.on("request", lambda request: watched.requests.append(request.url))
    page.on("pageerror", lambda error: watched.errors.append(f"uncaught: {error}"))

    def logged(message: ConsoleMessage) -> None:
        if message.type == "error" and not _REFUSED.match(message.text):
            watched.errors.append(f"console: {message.text}")

    page.on("console", logged)
    return watched


def checked(watched: Watched, failed: bool, shot: Path) -> list[str]:
    """What went wrong on the page (requests elsewhere, script errors); a screenshot when anything did, or the
    test itself ``failed``, taken while the page is still open."""
    problems = []
    if watched.foreign():
        problems.append(f"requests left the server's origin: {watched.foreign()}")
    if watched.errors:
        problems.append(f"JavaScript errors: {watched.errors}")
    if failed or problems:
        watched.page.screenshot(path=str(shot), full_page=True)
        sys.stderr.write(f"screenshot of the failed test: {shot}\n")
    return problems
