// A turn's timeline; a running turn followed live over its event stream (resumed with Last-Event-ID).

import { follow, get, stream } from "../api.js";
import { announce, contentText, duration, enc, errorBox, facts, fill, h, json, link, short, time, title } from "../dom.js";
import { statusBadge } from "./agents.js";
import { approvalList, stepItem, timeline } from "./steps.js";

const LIVE = new Set(["queued", "in_progress"]);
const ROUNDS = 20; // streams read one after another while the turn still reads as running
const RESUME_WAITS = 5; // rounds a just-approved turn may still read as paused
const RESUME_WAIT_MS = 500;

export async function turnView(view, { args: [agentId, sessionId, turnId], params, signal }) {
  const path = `/v1/agents/${enc(agentId)}/session/${enc(sessionId)}/turn/${enc(turnId)}`;
  const turn = await get(path, { signal });
  const body = h("div");
  const live = h("p", { class: "live", role: "status" });
  const crumbs = h("nav", { "aria-label": "Breadcrumb", class: "crumbs" },
    link("#/agents", "Agents"), " / ", link(`#/agents/${enc(agentId)}`, short(agentId)), " / ",
    link(`#/agents/${enc(agentId)}/sessions/${enc(sessionId)}`, `session ${short(sessionId)}`), " / ", `turn ${short(turnId)}`);
  fill(view, crumbs, title(`Turn ${short(turnId)}`), live, body);
  render(body, turn);
  // A turn just approved may still read as paused for a moment: follow it anyway.
  const waitForResume = params.get("follow") === "1";
  if (!LIVE.has(turn.status) && !waitForResume) return;
  followTurn(path, body, live, signal, waitForResume).catch((error) => {
    if (!signal.aborted) live.replaceChildren(errorBox(error));
  });
}

/** Whether a turn's event ends one of its runs (it completed or paused): a stream the server ends there is whole. */
function endsRun(event) {
  const payload = event.data && event.data.event && event.data.event.payload;
  return Boolean(event.data && event.data.error)
    || Boolean(payload && (payload.event_type === "turn_complete" || payload.event_type === "turn_awaiting_input"));
}

/**
 * Follow a turn's events, showing its steps as they complete. The stream replays every run of the turn from
 * its start (a resumed turn's first run ended paused), so what the turn ended as is not taken from it: once
 * the server ends the stream, the turn is read again.
 */
async function followTurn(path, body, live, signal, waitForResume) {
  const list = () => body.querySelector("ol.timeline");
  const partial = h("p", { class: "message streaming" });
  let last = null;
  let turn = null;
  live.textContent = "Following this turn live…";
  for (let round = 0; round < ROUNDS && !signal.aborted; round++) {
    let failed = false;
    last = await follow((from) => stream("GET", `${path}/events`, { lastEventId: from, signal }), (event) => {
      if (event.data && event.data.error) {
        failed = true;
        return true;
      }
      const payload = event.data && event.data.event && event.data.event.payload;
      if (!payload) return false;
      switch (payload.event_type) {
        case "step_start":
          live.textContent = `Running: ${payload.step_type.replace("_", " ")} step…`;
          return false;
        case "step_progress":
          if (payload.delta.type === "text") {
            partial.textContent += payload.delta.text;
            if (!partial.isConnected && list()) list().after(partial);
          }
          return false;
        case "step_complete": {
          partial.textContent = "";
          partial.remove();
          const existing = body.querySelector(`[data-step-id="${CSS.escape(payload.step_details.step_id)}"]`);
          const item = stepItem(payload.step_details);
          if (existing) existing.replaceWith(item);
          else if (list()) list().append(item);
          return false;
        }
        default: // turn_start, and a run's end: read from the turn itself once the stream is over
          return false;
      }
    }, { signal, lastEventId: last, endsRun, onReconnect: () => { live.textContent = "Connection dropped; reading on…"; } });
    if (signal.aborted) return;
    turn = await get(path, { signal });
    render(body, turn);
    if (failed || !(LIVE.has(turn.status) || (waitForResume && turn.status === "awaiting_input" && round < RESUME_WAITS))) break;
    if (!LIVE.has(turn.status)) await new Promise((resolve) => setTimeout(resolve, RESUME_WAIT_MS));
  }
  if (signal.aborted || turn === null) return;
  live.textContent = `The turn is ${turn.status.replace("_", " ")}.`;
  announce(live.textContent);
}

/** The turn: its status, input, answer and steps. */
export function render(body, turn) {
  const input = turn.input_messages.map((message) => contentText(message.content)).join("\n");
  const answer = contentText(turn.output_message && turn.output_message.content);
  const totals = turn.steps.reduce((sum, step) => {
    if (step.usage) { sum.input += step.usage.input_tokens; sum.output += step.usage.output_tokens; }
    return sum;
  }, { input: 0, output: 0 });
  fill(body,
    facts([
      ["Status", h("span", { class: "turn-status", "data-status": turn.status }, statusBadge(turn.status))],
      ["Turn id", h("code", {}, turn.turn_id)],
      ["Started", time(turn.started_at)],
      ["Duration", duration(turn.started_at, turn.completed_at)],
      ["Tokens", `${totals.input} in → ${totals.output} out`],
    ]),
    turn.error ? errorBox(`${turn.error.code}: ${turn.error.message}`) : null,
    turn.approval_requests && turn.approval_requests.length
      ? h("section", { class: "card warn" }, h("h2", {}, "Waiting for approval"), approvalList(turn.approval_requests),
        h("p", {}, link("#/approvals", "Decide in the approvals inbox")))
      : null,
    h("h2", {}, "Input"), h("pre", { class: "code prose" }, input),
    h("h2", {}, "Steps"), timeline(turn.steps),
    h("h2", {}, "Answer"),
    answer ? h("p", { class: "message answer" }, answer) : h("p", { class: "muted" }, turn.status === "completed" ? "(empty)" : "Not yet."),
    h("details", {}, h("summary", {}, "The turn as JSON"), json(turn)));
}
