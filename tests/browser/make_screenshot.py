"""Write the README's picture of a turn's timeline: ``python tests/browser/make_screenshot.py [OUT.png]``.

A code-interpreter turn on the browser tests' server (scripted model, real sandbox), photographed in chromium.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from console_harness import CHROMIUM, agent, console_server, session, turn  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from ferryman.testing import ScriptedReply, ScriptedToolCall  # noqa: E402

CODE = "import statistics\ntemps = [21.5, 23.0, 19.8, 24.1]\nprint(f'mean {statistics.mean(temps):.1f} °C')\n"


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, console_server(Path(tmp)) as console:
        key = console.new_key("docs")
        with console.api(key) as http:
            agent_id = agent(http, "analyst", toolgroups=["builtin::code_interpreter"])
            session_id = session(http, agent_id)
            console.enqueue(
                ScriptedReply(tool_calls=[ScriptedToolCall(name="code_interpreter", arguments={"code": CODE})]),
                ScriptedReply(text="The mean temperature is 22.1 °C."),
            )
            done = turn(http, agent_id, session_id, "What is the mean of 21.5, 23.0, 19.8 and 24.1 °C?")
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{console.base_url}/console")
            page.get_by_label("API key").fill(key)
            page.get_by_role("button", name="Sign in").click()
            page.goto(f"{console.base_url}/console#/agents/{agent_id}/sessions/{session_id}/turns/{done['turn_id']}")
            expect(page.locator("pre.stdout")).to_be_visible()
            page.locator("#view-title").evaluate("(node) => node.blur()")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images/console-timeline.png"))
