// The playground: pick an agent, send a message, watch the steps and the answer arrive.

import { ApiError, follow, post, stream } from "../api.js";
import { announce, contentText, enc, errorBox, fill, h, json, link, short, title } from "../dom.js";
import { byIndex, readAll } from "../paging.js";
import { stepItem } from "./steps.js";

const AGENTS_SHOWN = 1000;
const sessions = new Map(); // agent id → the playground session of this tab, for the principal signed in

/** Forget the playground's sessions (another principal may sign in next). */
export function forgetSessions() {
  sessions.clear();
}

export async function playgroundView(view, { params, signal }) {
  const agents = await readAll(byIndex("/v1/agents", { limit: 100 }, signal), AGENTS_SHOWN);
  if (!agents.length) {
    fill(view, title("Playground"), h("p", { class: "empty" }, "No agent yet: create one with the API, the SDK or the CLI."));
    return;
  }
  const picked = params.get("agent");
  const select = h("select", { id: "pg-agent", name: "agent" }, agents.map((agent) =>
    h("option", { value: agent.agent_id, selected: agent.agent_id === picked },
      `${agent.agent_config.name || short(agent.agent_id)} · ${agent.agent_config.model}`)));
  const message = h("textarea", { id: "pg-message", name: "message", rows: "3", required: true });
  const send = h("button", { type: "submit" }, "Send");
  const transcript = h("div", { class: "transcript", "aria-live": "polite" });
  const form = h("form", { class: "card", onsubmit: (event) => { event.preventDefault(); run(); } },
    h("div", { class: "field" }, h("label", { for: "pg-agent" }, "Agent"), select),
    h("div", { class: "field" }, h("label", { for: "pg-message" }, "Message"), message),
    h("div", { class: "actions" }, send));
  message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); run(); }
  });
  fill(view, title("Playground"), form, transcript);

  async function run() {
    const text = message.value.trim();
    if (!text || send.disabled) return;
    send.disabled = true;
    const agentId = select.value;
    const exchange = h("section", { class: "exchange" }, h("h2", {}, "You"), h("p", { class: "message" }, text));
    transcript.prepend(exchange);
    try {
      const reused = sessions.has(agentId);
      let sessionId = await session(agentId, signal);
      message.value = "";
      const sent = newIdempotencyKey();
      try {
        await turn(exchange, agentId, sessionId, text, sent, signal);
      } catch (error) {
        // The session was deleted meanwhile: open another and send there (a failed POST ran nothing).
        if (!(reused && error instanceof ApiError && error.status === 404)) throw error;
        sessions.delete(agentId);
        exchange.querySelector(".reply").remove();
        sessionId = await session(agentId, signal);
        await turn(exchange, agentId, sessionId, text, newIdempotencyKey(), signal);
      }
    } catch (error) {
      if (!signal.aborted) exchange.append(errorBox(error));
    } finally {
      send.disabled = false;
    }
  }
}

function newIdempotencyKey() {
  // crypto.randomUUID needs a secure context; a console served over plain HTTP to another machine has none.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

async function session(agentId, signal) {
  if (!sessions.has(agentId)) {
    const created = await post(`/v1/agents/${enc(agentId)}/session`, { session_name: `playground ${new Date().toISOString()}` }, { signal });
    sessions.set(agentId, created.session_id);
  }
  return sessions.get(agentId);
}

/** Run a turn and show it as it streams. Until the stream names the turn, a dropped connection sends the same
 * POST again with the same Idempotency-Key: the server replays the first one's stream and runs nothing twice. */
async function turn(exchange, agentId, sessionId, text, idempotencyKey, signal) {
  const base = `/v1/agents/${enc(agentId)}/session/${enc(sessionId)}`;
  const steps = h("ol", { class: "timeline", "aria-label": "Steps" });
  const answer = h("p", { class: "message answer" });
  const status = h("p", { class: "live", role: "status" }, "Running…");
  exchange.append(h("div", { class: "reply" }, h("h2", {}, "Agent"), status, steps, answer));
  let turnId = null;
  let streamed = "";
  const open = (last) => (turnId === null
    ? stream("POST", `${base}/turn`, { json: { messages: [{ role: "user", content: text }], stream: true }, idempotencyKey, signal })
    : stream("GET", `${base}/turn/${enc(turnId)}/events`, { lastEventId: last, signal }));
  await follow(open, (event) => {
    if (event.data && event.data.error) {
      status.replaceChildren(errorBox(event.data.error.message));
      return true;
    }
    const payload = event.data && event.data.event && event.data.event.payload;
    if (!payload) return false;
    switch (payload.event_type) {
      case "turn_start":
        turnId = payload.turn_id;
        return false;
      case "step_progress":
        if (payload.delta.type === "text") {
          streamed += payload.delta.text;
          answer.textContent = streamed;
        }
        return false;
      case "step_complete":
        steps.append(stepItem(payload.step_details));
        if (payload.step_type === "inference") { streamed = ""; answer.textContent = ""; }
        return false;
      case "turn_complete":
        finish(status, answer, payload.turn, agentId, sessionId);
        return true;
      case "turn_awaiting_input":
        awaiting(status, answer, payload.turn, agentId, sessionId);
        return true;
      default:
        return false;
    }
  }, { signal, onReconnect: () => { status.textContent = "Connection dropped; reading on…"; } });
}

function turnLink(agentId, sessionId, turn) {
  return link(`#/agents/${enc(agentId)}/sessions/${enc(sessionId)}/turns/${enc(turn.turn_id)}`, "Open its timeline");
}

function finish(status, answer, turn, agentId, sessionId) {
  answer.textContent = contentText(turn.output_message && turn.output_message.content);
  const failed = turn.status === "failed";
  fill(status, failed ? `The turn failed${turn.error ? `: ${turn.error.message}` : ""}. ` : "Done. ", turnLink(agentId, sessionId, turn));
  announce(failed ? "The turn failed." : "The answer arrived.");
}

function awaiting(status, answer, turn, agentId, sessionId) {
  const calls = (turn.output_message && turn.output_message.tool_calls) || [];
  const approvals = turn.approval_requests || [];
  answer.replaceChildren();
  fill(status, h("span", { class: "badge warn" }, "awaiting input"), " ",
    approvals.length ? ["Waiting for approval: ", link("#/approvals", "open the approvals"), ". "]
      : "Waiting for a client tool's result (sent by the program that runs the tool). ",
    turnLink(agentId, sessionId, turn));
  const shown = approvals.length ? approvals : calls;
  answer.append(h("ul", { class: "plain awaiting" }, shown.map((call) => h("li", {},
    h("code", {}, call.tool_name), " awaiting input ", json(call.arguments, `Arguments of ${call.tool_name}`)))));
  announce("The turn awaits input.");
}
