// Agents (their configuration), an agent's sessions, and a session's turns.

import { get } from "../api.js";
import { badge, contentText, enc, facts, fill, h, json, link, short, table, time, title } from "../dom.js";
import { byIndex, pagedList } from "../paging.js";
import { memorySummary } from "./memory.js";

const PAGE = 50;

export async function agentsView(view, { signal }) {
  fill(view, title("Agents"), h("p", { class: "muted" }, "Loading…"));
  const list = await pagedList(byIndex("/v1/agents", { limit: PAGE }, signal), (agents) =>
    table("Agents", ["Agent", "Model", "Tools", "Created"], agents.map((agent) => [
      link(`#/agents/${enc(agent.agent_id)}`, agent.agent_config.name || short(agent.agent_id), { "data-agent-id": agent.agent_id }),
      agent.agent_config.model,
      toolNames(agent.agent_config).join(", ") || "none",
      time(agent.created_at),
    ])));
  fill(view, title("Agents", h("a", { href: "#/playground", class: "button secondary" }, "Open the playground")), list.node);
}

function toolNames(config) {
  const groups = (config.toolgroups || []).map((group) => (typeof group === "string" ? group : group.name));
  return [...groups, ...(config.client_tools || []).map((tool) => `${tool.name} (client)`)];
}

export async function agentView(view, { args: [agentId], signal }) {
  const [agent, memory, sessions] = await Promise.all([
    get(`/v1/agents/${enc(agentId)}`, { signal }),
    get(`/v1/agents/${enc(agentId)}/memory`, { signal }),
    pagedList(byIndex(`/v1/agents/${enc(agentId)}/sessions`, { limit: PAGE }, signal), (listed) =>
      table("Sessions", ["Session", "Turns", "Started"], listed.map((session) => [
        link(`#/agents/${enc(agentId)}/sessions/${enc(session.session_id)}`, session.session_name || short(session.session_id)),
        String((session.turns || []).length),
        time(session.started_at),
      ]))),
  ]);
  const config = agent.agent_config;
  fill(view,
    h("nav", { "aria-label": "Breadcrumb", class: "crumbs" }, link("#/agents", "Agents"), " / ", config.name || short(agentId)),
    title(config.name || `Agent ${short(agentId)}`),
    h("section", { "aria-labelledby": "config-heading" },
      h("h2", { id: "config-heading" }, "Configuration"),
      facts([
        ["Agent id", h("code", {}, agentId)],
        ["Model", config.model],
        ["Created", time(agent.created_at)],
        ["Tools", toolNames(config).join(", ") || "none"],
        ["Input shields", (config.input_shields || []).join(", ")],
        ["Output shields", (config.output_shields || []).join(", ")],
        ["Approval", typeof config.require_approval === "string" ? config.require_approval : config.require_approval ? "by tool" : ""],
        ["Max inference steps", config.max_infer_iters],
      ]),
      h("div", { class: "label" }, "Instructions"),
      h("pre", { class: "code prose" }, config.instructions),
      h("details", {}, h("summary", {}, "Full configuration (JSON)"), json(config))),
    h("section", { "aria-labelledby": "memory-heading" },
      h("h2", { id: "memory-heading" }, "Memory"),
      memorySummary(agentId, memory.data)),
    h("section", { "aria-labelledby": "sessions-heading" },
      h("h2", { id: "sessions-heading" }, "Sessions"),
      sessions.node));
}

export function statusBadge(status) {
  const kinds = { completed: "ok", failed: "bad", awaiting_input: "warn", in_progress: "info", incomplete: "warn", cancelled: "bad", queued: "info" };
  return badge(status.replace("_", " "), kinds[status] || "info");
}

export async function sessionView(view, { args: [agentId, sessionId], signal }) {
  const session = await get(`/v1/agents/${enc(agentId)}/session/${enc(sessionId)}`, { signal });
  const base = `#/agents/${enc(agentId)}/sessions/${enc(sessionId)}`;
  fill(view,
    h("nav", { "aria-label": "Breadcrumb", class: "crumbs" },
      link("#/agents", "Agents"), " / ", link(`#/agents/${enc(agentId)}`, short(agentId)), " / ", session.session_name),
    title(`Session ${session.session_name}`),
    facts([["Session id", h("code", {}, sessionId)], ["Started", time(session.started_at)]]),
    h("h2", {}, "Turns"),
    table("Turns", ["Turn", "Status", "Input", "Answer", "Steps"], session.turns.map((turn) => [
      link(`${base}/turns/${enc(turn.turn_id)}`, `Turn ${short(turn.turn_id)}`, { "data-turn-id": turn.turn_id }),
      statusBadge(turn.status),
      excerpt(turn.input_messages.map((message) => contentText(message.content)).join(" ")),
      excerpt(contentText(turn.output_message && turn.output_message.content)),
      String(turn.steps.length),
    ])));
}

export function excerpt(text, length = 80) {
  return text && text.length > length ? `${text.slice(0, length)}…` : text || "";
}
