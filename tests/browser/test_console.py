"""The web console in Debian's chromium: sign-in, timelines, approvals, the playground, knowledge, accessibility.

Every test also checks, through the ``page`` fixture, that no request left the
server's origin and that no script raised or logged an error.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_harness import ConsoleServer, agent, console_server, session, turn
from playwright.sync_api import Browser, Page, Route, expect
from watched import PHONE, Watched, checked, watch

from ferryman.testing import ScriptedReply, ScriptedToolCall
from mcp_servers import RunningServer

WAIT_MS = 20_000


def open_console(page: Page, console: ConsoleServer) -> None:
    page.goto(f"{console.base_url}/console")


def sign_in(page: Page, console: ConsoleServer, key: str) -> None:
    open_console(page, console)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def test_signing_in_shows_only_the_principals_agents_and_a_reload_stays_signed_in(
    page: Watched, console: ConsoleServer
) -> None:
    alice, bob = console.new_key("alice"), console.new_key("bob")
    with console.api(alice) as http:
        agent(http, "alice-helper")
    with console.api(bob) as http:
        agent(http, "bob-helper")
    tab = page.page

    open_console(tab, console)
    expect(tab.get_by_role("heading", name="Sign in")).to_be_visible()
    tab.get_by_label("API key").fill("fm_not-a-key")
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.get_by_role("alert")).to_contain_text("not accepted")

    tab.get_by_label("API key").fill(alice)
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.get_by_role("link", name="alice-helper")).to_be_visible()
    expect(tab.get_by_text("bob-helper")).to_have_count(0)
    tab.get_by_role("link", name="Skip to content").focus()
    tab.keyboard.press("Enter")
    expect(tab.locator("#main")).to_be_focused()
    tab.goto(f"{console.base_url}/console#main")  # an address that names no view, reloaded: the agents
    tab.reload()
    expect(tab.get_by_role("link", name="alice-helper")).to_be_visible()
    assert tab.evaluate("() => Object.values(sessionStorage)") == [alice]
    assert not [url for url in page.requests if alice in url], "the key appeared in a URL"

    tab.get_by_role("button", name="Sign out").click()
    expect(tab.get_by_label("API key")).to_be_visible()
    assert tab.evaluate("() => sessionStorage.length") == 0


def test_a_code_interpreter_turns_timeline_shows_its_steps_and_output(page: Watched, console: ConsoleServer) -> None:
    key = console.new_key("carol")
    with console.api(key) as http:
        agent_id = agent(http, "coder", toolgroups=["builtin::code_interpreter"])
        session_id = session(http, agent_id)
        code = "open('answer.txt', 'w').write('42')\nprint(6 * 7)"
        console.enqueue(
            ScriptedReply(tool_calls=[ScriptedToolCall(name="code_interpreter", arguments={"code": code})]),
            ScriptedReply(text="It is 42."),
        )
        done = turn(http, agent_id, session_id, "What is 6 times 7?")
        assert done["status"] == "completed", done
    tab = page.page

    sign_in(tab, console, key)
    tab.get_by_role("link", name="coder").click()
    tab.get_by_role("link", name="browser").click()
    tab.get_by_role("link", name=re.compile("^Turn ")).click()

    expect(tab.get_by_role("heading", name=re.compile("^Turn "))).to_be_visible()
    steps = tab.get_by_role("list", name="Steps").locator(":scope > li")
    expect(steps).to_have_count(3)
    tool = tab.locator("[data-step-type=tool_execution]")
    expect(tool.get_by_role("heading", name="Tool execution")).to_be_visible()
    expect(tool.locator("pre.stdout")).to_have_text("42\n")
    expect(tool.get_by_role("button", name=re.compile("Download answer.txt"))).to_be_visible()
    expect(tool.locator(".took")).to_have_text(re.compile(r"^\d+\.\d\d s$"))
    expect(tab.locator("[data-step-type=inference] .tokens").first).to_contain_text("tokens")
    expect(tab.locator(".answer")).to_have_text("It is 42.")


def test_approving_a_pending_call_follows_its_turn_as_it_runs_on_to_its_end(
    page: Watched, console: ConsoleServer
) -> None:
    key = console.new_key("dave")
    with console.api(key) as http:
        agent_id = agent(http, "careful", toolgroups=["builtin::math"], require_approval="always")
        session_id = session(http, agent_id)
        call = ScriptedToolCall(name="calculator", arguments={"expression": "6 * 7"})
        console.enqueue(ScriptedReply(tool_calls=[call]))
        paused = turn(http, agent_id, session_id, "6 times 7?")
        assert paused["status"] == "awaiting_input", paused
    # The answer after the approval is held until the test lets it go on: the turn runs meanwhile.
    console.enqueue(ScriptedReply(text="The calculator says 42.", gate="go"))
    tab = page.page

    sign_in(tab, console, key)
    tab.get_by_role("link", name="Approvals").click()
    card = tab.locator(".approval").filter(has_text="calculator")
    expect(card).to_contain_text("6 * 7")
    card.get_by_role("button", name="Approve calculator").click()
    expect(tab.get_by_role("status").filter(has_text="Approved")).to_contain_text("Approved: calculator")
    expect(tab.get_by_text("Nothing is waiting for approval.")).to_be_visible()
    try:
        tab.get_by_role("link", name="Follow it").click()
        _shows_running(tab)
        # Opened afresh (not from the inbox), the turn's stream is read from its start, the first run's pause
        # included: the page still shows the turn as it is.
        tab.goto(f"{console.base_url}/console#/agents/{agent_id}/sessions/{session_id}/turns/{paused['turn_id']}")
        _shows_running(tab)
        console.call(lambda: _opened(console, "go"))
        expect(tab.locator(".turn-status")).to_have_attribute("data-status", "completed", timeout=WAIT_MS)
    finally:
        console.call(lambda: _opened(console, "go"))
    expect(tab.locator(".answer")).to_have_text("The calculator says 42.")
    expect(tab.locator("[data-step-type=tool_execution] pre.result")).to_contain_text("42")
    expect(tab.locator(".live")).to_have_text("The turn is completed.")


def _shows_running(tab: Page) -> None:
    """The turn's page follows the held inference step, and shows the turn running (not its first run's pause)."""
    expect(tab.locator(".live")).to_have_text("Running: inference step…", timeout=WAIT_MS)
    expect(tab.locator(".turn-status")).to_have_attribute("data-status", re.compile("^(queued|in_progress)$"))
    expect(tab.get_by_role("heading", name="Waiting for approval")).to_have_count(0)
    expect(tab.get_by_text("awaiting input")).to_have_count(0)


def test_approving_a_responses_call_follows_the_response_that_continues_it(
    page: Watched, console: ConsoleServer, mcp_http_server: RunningServer
) -> None:
    key = console.new_key("delia")
    tool = {"type": "mcp", "server_label": "adder", "server_url": mcp_http_server.url, "require_approval": "always"}
    with console.api(key) as http:
        console.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]))
        held = http.post("/v1/responses", json={"model": "scripted-model", "input": "2+3?", "tools": [tool]})
        assert held.status_code == 200, held.text
        assert held.json()["output"][-1]["type"] == "mcp_approval_request"
    held_id = held.json()["id"]
    console.enqueue(ScriptedReply(text="It is 5."))
    tab = page.page

    sign_in(tab, console, key)
    tab.get_by_role("link", name="Approvals").click()
    tab.locator(".approval").filter(has_text="add").get_by_role("button", name="Approve add").click()
    tab.get_by_role("link", name="Follow it").click()

    expect(tab).to_have_url(re.compile(r"#/responses/resp_"))
    assert held_id not in tab.url, "Follow it opened the response that was held, not the one that goes on"
    expect(tab.locator(".live")).to_have_text("The response is completed.", timeout=WAIT_MS)
    expect(tab.locator(".items").last).to_contain_text("It is 5.")


def test_the_playground_streams_an_answer_and_shows_a_client_tool_awaiting_input(
    page: Watched, console: ConsoleServer
) -> None:
    key = console.new_key("erin")
    weather = {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": [{"name": "city", "parameter_type": "string", "description": "City", "required": True}],
    }
    with console.api(key) as http:
        agent(http, "chatty")
        agent(http, "forecaster", client_tools=[weather])
    tab = page.page
    sign_in(tab, console, key)
    tab.get_by_role("link", name="Playground", exact=True).click()

    console.enqueue(ScriptedReply(text="Paris is the capital of France.", chunks=4))
    tab.get_by_label("Agent").select_option(label="chatty · scripted-model")
    tab.get_by_label("Message").fill("What is the capital of France?")
    tab.get_by_role("button", name="Send").click()
    expect(tab.locator(".exchange .answer").first).to_have_text("Paris is the capital of France.", timeout=WAIT_MS)
    expect(tab.locator(".exchange").first.get_by_role("heading", name="Inference")).to_be_visible()

    console.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Paris"})]))
    tab.get_by_label("Agent").select_option(label="forecaster · scripted-model")
    tab.get_by_label("Message").fill("Weather in Paris?")
    tab.get_by_role("button", name="Send").click()
    latest = tab.locator(".exchange").first
    expect(latest.locator(".awaiting")).to_contain_text("get_weather awaiting input", timeout=WAIT_MS)
    expect(latest.locator(".awaiting")).to_contain_text("Paris")


def test_the_playground_runs_a_turn_once_when_its_stream_is_lost_before_the_turn_started(
    page: Watched, console: ConsoleServer
) -> None:
    key = console.new_key("erik")
    with console.api(key) as http:
        agent_id = agent(http, "steady")
    tab = page.page
    sign_in(tab, console, key)
    tab.get_by_role("link", name="Playground", exact=True).click()
    keys: list[str | None] = []

    def lose_the_first(route: Route) -> None:
        keys.append(route.request.headers.get("idempotency-key"))
        if len(keys) > 1:
            route.continue_()
            return
        ran = route.fetch()  # the server runs the turn to its end...
        assert ran.status == 200, ran.text()
        route.fulfill(status=200, content_type="text/event-stream", body="")  # ...but the page gets no event of it

    tab.route("**/turn", lose_the_first)
    console.enqueue(ScriptedReply(text="Said once."))
    tab.get_by_label("Message").fill("Say it once.")
    tab.get_by_role("button", name="Send").click()

    expect(tab.locator(".exchange .answer").first).to_have_text("Said once.", timeout=WAIT_MS)
    assert len(keys) == 2 and keys[0] is not None and keys[0] == keys[1], keys
    with console.api(key) as http:
        [played] = http.get(f"/v1/agents/{agent_id}/sessions").json()["data"]
        assert len(played["turns"]) == 1, played


def test_an_uploaded_file_is_ingested_and_found_by_search(page: Watched, console: ConsoleServer) -> None:
    key = console.new_key("frank")
    tab = page.page
    sign_in(tab, console, key)
    tab.get_by_role("link", name="Knowledge").click()
    tab.get_by_label("New vector store name").fill("pets")
    tab.get_by_role("button", name="Create").click()
    expect(tab.get_by_role("heading", name="pets")).to_be_visible()

    text = b"Cats are small carnivorous mammals that purr and chase mice.\n"
    tab.get_by_label("File", exact=True).set_input_files(
        files=[{"name": "cats.txt", "mimeType": "text/plain", "buffer": text}]
    )
    tab.get_by_role("button", name="Upload").click()
    expect(tab.get_by_text("cats.txt: ingestion completed.")).to_be_visible(timeout=WAIT_MS)
    expect(tab.get_by_role("region", name="Files")).to_contain_text("completed")

    tab.get_by_label("Search", exact=True).fill("purring mice")
    tab.get_by_role("button", name="Search", exact=True).click()
    first = tab.get_by_role("list", name="Retrieved chunks").locator("li").first
    expect(first.locator(".file")).to_have_text("cats.txt")
    expect(first.locator(".score")).to_have_text(re.compile(r"^score [01]\.\d{3}$"))
    expect(first).to_contain_text("purr and chase mice")


def test_responses_and_conversations_are_browsable(page: Watched, console: ConsoleServer) -> None:
    key = console.new_key("grace")
    with console.api(key) as http:
        conversation = http.post("/v1/conversations", json={"metadata": {"topic": "greetings"}}).json()
        console.enqueue(ScriptedReply(text="Hello from the responses API."))
        created = http.post(
            "/v1/responses", json={"model": "scripted-model", "input": "Say hello", "conversation": conversation["id"]}
        )
        assert created.status_code == 200, created.text
    tab = page.page
    sign_in(tab, console, key)

    tab.get_by_role("link", name="Responses").click()
    tab.locator(f"[data-response-id='{created.json()['id']}']").click()
    expect(tab.locator(".items").last).to_contain_text("Hello from the responses API.")
    expect(tab.locator(".items").first).to_contain_text("Say hello")

    tab.get_by_role("link", name="Conversations").click()
    expect(tab.get_by_role("region", name="Conversations")).to_contain_text("topic: greetings")
    tab.get_by_role("link", name=re.compile("^conv_")).first.click()
    expect(tab.locator(".items")).to_contain_text("Hello from the responses API.")


def test_a_memory_block_is_edited_and_a_save_over_a_newer_version_or_its_limit_shows_the_apis_error(
    page: Watched, console: ConsoleServer
) -> None:
    key = console.new_key("judy")
    with console.api(key) as http:
        agent_id = agent(http, "remembering")
        _put_block(http, agent_id, "human", value="The user is Ada.", description="What I know about the user")
    tab = page.page
    sign_in(tab, console, key)
    tab.get_by_role("link", name="remembering").click()
    expect(tab.get_by_role("region", name="Memory")).to_contain_text("1 block(s): human.")
    tab.get_by_role("link", name="View and edit the memory").click()

    block = tab.locator(".memory-block[data-label=human]")
    value = block.get_by_label("Value of human")
    expect(value).to_have_value("The user is Ada.")
    value.fill("The user is Ada Lovelace.")
    block.get_by_role("button", name="Save human").click()
    expect(block.get_by_role("status")).to_have_text("Saved: version 2.")
    with console.api(key) as http:
        saved = http.get(f"/v1/agents/{agent_id}/memory/human").json()
        assert (saved["value"], saved["version"]) == ("The user is Ada Lovelace.", 2), saved
        assert saved["description"] == "What I know about the user", "a save left alone changed the description"
        _put_block(http, agent_id, "human", value="Ada writes programs.")  # version 3, behind the page's back

    value.fill("Ada counts.")
    block.get_by_role("button", name="Save human").click()
    expect(block.get_by_role("alert")).to_have_text("memory block 'human' is at version 3, not 2")
    block.get_by_role("button", name=re.compile("^Load the current version")).click()
    expect(value).to_have_value("Ada writes programs.")
    value.fill("x" * 5_001)
    block.get_by_role("button", name="Save human").click()
    expect(block.get_by_role("alert")).to_contain_text("memory.max_block_chars is 5000")
    with console.api(key) as http:
        kept = http.get(f"/v1/agents/{agent_id}/memory/human").json()
    assert (kept["value"], kept["version"]) == ("Ada writes programs.", 3), kept
    _refused_as_expected(page, 409, 400)


def test_a_memory_block_is_created_and_deleted_in_the_console(page: Watched, console: ConsoleServer) -> None:
    key = console.new_key("kim")
    with console.api(key) as http:
        agent_id = agent(http, "forgetful")
    tab = page.page
    sign_in(tab, console, key)
    tab.goto(f"{console.base_url}/console#/agents/{agent_id}/memory")
    expect(tab.get_by_text("This agent has no memory blocks yet.")).to_be_visible()

    tab.get_by_label("Label").fill("notes")
    tab.get_by_label("Description (optional)").fill("Things to remember")
    tab.get_by_label("Value", exact=True).fill("Water the plants.")
    tab.get_by_role("button", name="Create").click()
    expect(tab.get_by_label("Value of notes")).to_have_value("Water the plants.")
    tab.get_by_label("Label").fill("notes")
    tab.get_by_role("button", name="Create").click()
    expect(tab.get_by_role("alert")).to_have_text("A block labelled notes exists: edit it above.")
    with console.api(key) as http:
        [created] = http.get(f"/v1/agents/{agent_id}/memory").json()["data"]
    wanted = {"label": "notes", "value": "Water the plants.", "description": "Things to remember", "version": 1}
    assert {name: created[name] for name in wanted} == wanted, created

    tab.get_by_role("button", name="Delete notes").click()
    expect(tab.get_by_role("button", name="Delete notes for good")).to_be_focused()
    tab.keyboard.press("Enter")
    expect(tab.get_by_text("This agent has no memory blocks yet.")).to_be_visible()
    with console.api(key) as http:
        assert http.get(f"/v1/agents/{agent_id}/memory/notes").status_code == 404


def _refused_as_expected(page: Watched, *statuses: int) -> None:
    """Drop chromium's log of the refusals the test asked for (it logs every 4xx answer as an error; no script's)."""
    for status in statuses:
        logged = f"console: Failed to load resource: the server responded with a status of {status} "
        found = [error for error in page.errors if error.startswith(logged)]
        assert found, f"no {status} was answered: {page.errors}"
        page.errors.remove(found[0])


def _put_block(http: httpx.Client, agent_id: str, label: str, **body: str) -> None:
    written = http.put(f"/v1/agents/{agent_id}/memory/{label}", json=body)
    assert written.status_code == 200, written.text


def test_every_view_passes_axe_at_desktop_and_phone_width_in_light_and_dark(
    page: Watched, console: ConsoleServer
) -> None:
    key = console.new_key("heidi")
    with console.api(key) as http:
        agent_id = agent(http, "checked")
        _put_block(http, agent_id, "persona", value="Calm and brief.", description="How I answer")
        session_id = session(http, agent_id)
        console.enqueue(ScriptedReply(text="Fine."))
        done = turn(http, agent_id, session_id, "How are you?")
    tab = page.page
    views = [
        "#/agents", f"#/agents/{agent_id}", f"#/agents/{agent_id}/memory", f"#/agents/{agent_id}/sessions/{session_id}",
        f"#/agents/{agent_id}/sessions/{session_id}/turns/{done['turn_id']}",
        "#/responses", "#/conversations", "#/approvals", "#/playground", "#/knowledge",
    ]  # fmt: skip
    open_console(tab, console)
    expect(tab.get_by_label("API key")).to_be_visible()
    assert page.axe() == [], "the sign-in"
    sign_in(tab, console, key)
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        for size in (None, PHONE):
            if size is not None:
                tab.set_viewport_size(size)
            for view in views:
                tab.goto(f"{console.base_url}/console{view}")
                # Only the hash changed: goto returns at once, so wait for this view to be drawn.
                expect(tab.locator("main")).to_have_attribute("data-view", view.removeprefix("#/"))
                expect(tab.get_by_text("Loading…")).to_have_count(0)
                assert page.axe() == [], f"{view} ({scheme}, {size or 'desktop'})"
                if size is not None:
                    wide = tab.evaluate("() => document.documentElement.scrollWidth")
                    assert wide <= PHONE["width"], f"{view} scrolls sideways at {PHONE['width']} px: {wide} px"
            if size is not None:
                tab.set_viewport_size({"width": 1280, "height": 900})
    tab.goto(f"{console.base_url}/console#/agents")
    expect(tab.locator("#view-title")).to_be_focused()
    for _ in range(10):  # from the view's heading, the keyboard reaches the agent's link
        tab.keyboard.press("Tab")
        if tab.evaluate("() => document.activeElement.textContent") == "checked":
            break
    outline = tab.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", "the focused link shows no focus ring"
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("heading", name="checked", exact=True)).to_be_focused()


def test_a_running_turn_is_followed_live_and_read_on_after_a_dropped_connection(
    page: Watched, console: ConsoleServer
) -> None:
    key = console.new_key("ivan")
    with console.api(key) as http:
        agent_id = agent(http, "slow")
        session_id = session(http, agent_id)
    console.enqueue(ScriptedReply(text="Slow and steady wins.", gate="go"))
    finished: list[dict[str, Any]] = []

    def run() -> None:
        with console.api(key) as http:
            finished.append(turn(http, agent_id, session_id, "Take your time."))

    runner = threading.Thread(target=run)
    runner.start()
    try:
        console.call(lambda: console.script.wait_for_requests(1))
        with console.api(key) as http:
            [running] = http.get(f"/v1/agents/{agent_id}/session/{session_id}").json()["turns"]
        assert running["status"] == "in_progress", running
        opened: list[str | None] = []

        def drop_the_first(route: Route) -> None:
            opened.append(route.request.headers.get("last-event-id"))
            if len(opened) > 1:
                route.continue_()
                return
            start = {"event": {"payload": {"event_type": "turn_start", "turn_id": running["turn_id"]}}}
            route.fulfill(status=200, content_type="text/event-stream", body=f"id: 0\ndata: {json.dumps(start)}\n\n")

        tab = page.page
        tab.route("**/events", drop_the_first)
        sign_in(tab, console, key)
        tab.goto(f"{console.base_url}/console#/agents/{agent_id}/sessions/{session_id}/turns/{running['turn_id']}")
        # Event 1 (the inference step's start) came on the second connection, which asked for what followed 0.
        expect(tab.get_by_role("status")).to_have_text("Running: inference step…", timeout=WAIT_MS)
        assert opened == [None, "0"]
        console.call(lambda: _opened(console, "go"))
        expect(tab.locator(".turn-status")).to_have_attribute("data-status", "completed", timeout=WAIT_MS)
        expect(tab.locator(".answer")).to_have_text("Slow and steady wins.")
        expect(tab.get_by_role("status")).to_have_text("The turn is completed.")
    finally:
        console.call(lambda: _opened(console, "go"))
        runner.join(timeout=30)
    assert finished and finished[0]["status"] == "completed"


def test_a_page_that_requested_elsewhere_or_raised_is_reported_and_photographed(
    browser: Browser, tmp_path: Path
) -> None:
    context = browser.new_context()
    watched = watch(context.new_page(), "http://127.0.0.1:9")
    try:
        watched.page.route("http://elsewhere.invalid/**", lambda route: route.abort())
        with watched.page.expect_event("pageerror"), watched.page.expect_event("requestfailed"):
            watched.page.evaluate("""() => {
                fetch("http://elsewhere.invalid/x").catch(() => {});
                setTimeout(() => { throw new Error("boom"); });
            }""")
        shot = tmp_path / "shot.png"
        problems = checked(watched, failed=False, shot=shot)
        assert len(problems) == 2 and "elsewhere.invalid" in problems[0] and "boom" in problems[1], problems
        assert shot.stat().st_size > 0, "no screenshot of a page that failed its checks"
        assert checked(Watched(watched.page, "http://127.0.0.1:9"), failed=False, shot=tmp_path / "no.png") == []
        assert not (tmp_path / "no.png").exists()
    finally:
        context.close()


async def _opened(console: ConsoleServer, gate: str) -> None:
    console.script.open_gate(gate)


def test_with_authentication_off_there_is_no_sign_in(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with console_server(tmp_path_factory.mktemp("open"), auth=False) as console:
        with console.api(None) as http:
            agent(http, "anyone")
        context = browser.new_context(viewport=PHONE)
        watched = watch(context.new_page(), console.base_url)
        try:
            watched.page.goto(f"{console.base_url}/console")
            expect(watched.page.get_by_role("link", name="anyone")).to_be_visible()
            expect(watched.page.get_by_text("Authentication off")).to_be_visible()
            expect(watched.page.get_by_label("API key")).to_have_count(0)
        finally:
            context.close()
        assert not watched.foreign() and not watched.errors
