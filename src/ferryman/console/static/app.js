// The console's shell: sign-in, navigation, and the router that draws one view per address (#/…).

import { ApiError, apiKey, get, setApiKey } from "./api.js";
import { errorBox, fill, focusTitle, h, main, title } from "./dom.js";
import { agentView, agentsView, sessionView } from "./views/agents.js";
import { approvalsView } from "./views/approvals.js";
import { knowledgeView, storeView } from "./views/knowledge.js";
import { memoryView } from "./views/memory.js";
import { forgetSessions, playgroundView } from "./views/playground.js";
import { conversationView, conversationsView, responseView, responsesView } from "./views/responses.js";
import { forgetFileNames } from "./views/steps.js";
import { turnView } from "./views/timeline.js";

const ROUTES = [
  [/^agents$/, agentsView, "agents"],
  [/^agents\/([^/]+)$/, agentView, "agents"],
  [/^agents\/([^/]+)\/memory$/, memoryView, "agents"],
  [/^agents\/([^/]+)\/sessions\/([^/]+)$/, sessionView, "agents"],
  [/^agents\/([^/]+)\/sessions\/([^/]+)\/turns\/([^/]+)$/, turnView, "agents"],
  [/^responses$/, responsesView, "responses"],
  [/^responses\/([^/]+)$/, responseView, "responses"],
  [/^conversations$/, conversationsView, "conversations"],
  [/^conversations\/([^/]+)$/, conversationView, "conversations"],
  [/^approvals$/, approvalsView, "approvals"],
  [/^playground$/, playgroundView, "playground"],
  [/^knowledge$/, knowledgeView, "knowledge"],
  [/^knowledge\/([^/]+)$/, storeView, "knowledge"],
];

let current = null; // the drawn view's AbortController: streams and timers stop when the view goes
let signedIn = false;
let authOn = false;

/** The view the address names: "#/path?query"; any other address (none, "#main") is the agents. */
function route() {
  const hash = location.hash;
  if (!hash.startsWith("#/")) return { path: "agents", params: new URLSearchParams() };
  const [path, search] = hash.slice(2).split("?");
  return { path: path || "agents", params: new URLSearchParams(search || "") };
}

async function draw() {
  const { path, params } = route();
  if (current) current.abort();
  const controller = current = new AbortController();
  const view = main();
  delete view.dataset.view; // set again once this view is drawn (the tests wait on it)
  if (!signedIn) {
    signInView();
    return;
  }
  for (const [pattern, render, section] of ROUTES) {
    const match = path.match(pattern);
    if (!match) continue;
    markSection(section);
    const args = match.slice(1).map(decodeURIComponent);
    try {
      await render(view, { args, params, signal: controller.signal });
    } catch (error) {
      if (controller.signal.aborted) return;
      if (error instanceof ApiError && error.status === 401) return; // the sign-in is shown
      view.append(errorBox(error));
    }
    if (controller.signal.aborted) return;
    drawn(view, path);
    return;
  }
  markSection(null);
  fill(view, title("Not found"), h("p", {}, "No view here. ", h("a", { href: "#/agents" }, "Go to the agents.")));
  drawn(view, path);
}

function drawn(view, path) {
  view.dataset.view = path;
  focusTitle();
}

/** The skip link moves the focus to the view without changing the address (which names the view). */
function skipToContent(event) {
  event.preventDefault();
  main().focus();
}

function markSection(section) {
  for (const anchor of document.querySelectorAll("#nav a")) {
    if (anchor.dataset.section === section) anchor.setAttribute("aria-current", "page");
    else anchor.removeAttribute("aria-current");
  }
}

function showChrome() {
  document.getElementById("nav").hidden = !signedIn;
  const who = document.getElementById("who");
  if (!signedIn) fill(who);
  else if (!authOn) fill(who, h("span", { class: "muted" }, "Authentication off"));
  else fill(who, h("button", { type: "button", class: "secondary", onclick: signOut }, "Sign out"));
}

/** Drop what the views keep for the principal signed in. */
function forgetPrincipal() {
  forgetSessions();
  forgetFileNames();
}

function signOut() {
  setApiKey(null);
  forgetPrincipal();
  signedIn = false;
  showChrome();
  draw();
}

function signInView(message) {
  if (current) current.abort();
  const field = h("input", {
    id: "api-key", name: "api-key", type: "password", autocomplete: "off", required: true, spellcheck: "false",
  });
  const status = h("div", { id: "sign-in-status" }, message ? errorBox(message) : null);
  const form = h("form", { class: "card narrow", onsubmit: async (event) => {
    event.preventDefault();
    const key = field.value.trim().replace(/^Bearer\s+/i, "");
    if (!key) return;
    setApiKey(key);
    forgetPrincipal();
    fill(status, h("p", { class: "muted" }, "Signing in…"));
    const outcome = await probe();
    if (outcome === "ok") {
      signedIn = true;
      authOn = true;
      showChrome();
      await draw();
    } else {
      setApiKey(null);
      fill(status, errorBox(outcome === "refused" ? "That key was not accepted." : outcome));
      field.focus();
    }
  } },
  h("label", { for: "api-key" }, "API key"),
  h("p", { class: "hint", id: "api-key-hint" }, "An API key or a bearer token. It is kept for this tab only."),
  field,
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
  status);
  field.setAttribute("aria-describedby", "api-key-hint");
  fill(main(), title("Sign in"), form);
  document.title = "Sign in · ferryman console";
  markSection(null);
  field.focus();
}

/** "ok", "refused" (401), or what went wrong; anonymous: without the key. */
async function probe(anonymous = false) {
  try {
    await get("/v1/agents", { query: { limit: 1 }, anonymous });
    return "ok";
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return "refused";
    return error.message || String(error);
  }
}

window.addEventListener("console:unauthorized", () => {
  if (!signedIn) return;
  setApiKey(null);
  forgetPrincipal();
  signedIn = false;
  showChrome();
  signInView("Your key was refused; sign in again.");
});

async function start() {
  document.getElementById("skip").addEventListener("click", skipToContent);
  // Without a key first: a server that answers is one without authentication (a key kept from an earlier
  // visit is then dropped, and no "Sign out" is offered).
  let outcome = await probe(true);
  if (outcome === "ok") {
    setApiKey(null);
    authOn = false;
  } else if (outcome === "refused") {
    authOn = true;
    outcome = apiKey() === null ? "refused" : await probe();
  }
  if (outcome === "ok") {
    signedIn = true;
  } else if (outcome === "refused") {
    setApiKey(null);
    signedIn = false;
  } else {
    fill(main(), title("The server cannot be reached"), errorBox(outcome));
    return;
  }
  showChrome();
  window.addEventListener("hashchange", draw);
  await draw();
}

start();
