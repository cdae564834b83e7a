// The approvals inbox: every server-tool call waiting for a person, across the caller's agents and responses.

import { post } from "../api.js";
import { announce, enc, errorBox, fill, h, json, link, short, since, time, title } from "../dom.js";
import { byCursor, pagedList } from "../paging.js";

const PAGE = 50;

export async function approvalsView(view, { signal }) {
  const status = h("div", { role: "status", class: "live" });
  const list = await pagedList(byCursor("/v1/approvals", { limit: PAGE }, signal), (waiting) => (waiting.length
    ? h("ul", { class: "cards", "aria-label": "Waiting for approval" }, waiting.map(card))
    : h("p", { class: "empty" }, "Nothing is waiting for approval.")));
  fill(view, title("Approvals", h("button", { type: "button", class: "secondary", onclick: () => list.reload() }, "Refresh")),
    h("p", { class: "muted" }, "Server tool calls waiting for a decision. Approving runs the call and continues the same turn or response."),
    status, h("div", { class: "approvals" }, list.node));

  function card(item) {
    const buttons = h("div", { class: "actions" },
      h("button", { type: "button", onclick: () => decide(item, "approve", buttons), "aria-label": `Approve ${item.tool_name}` }, "Approve"),
      h("button", { type: "button", class: "danger", onclick: () => decide(item, "deny", buttons), "aria-label": `Deny ${item.tool_name}` }, "Deny"));
    return h("li", { class: "card approval", "data-approval-id": item.id },
      h("h2", {}, h("code", {}, item.tool_name), item.server_label ? h("span", { class: "muted" }, ` on ${item.server_label}`) : null),
      h("div", { class: "label" }, "Arguments"),
      json(item.arguments, `Arguments of ${item.tool_name}`),
      h("p", {}, origin(item), " · waiting since ", time(item.created_at), ` (${since(item.created_at)})`),
      buttons);
  }

  async function decide(item, decision, buttons) {
    for (const button of buttons.querySelectorAll("button")) button.disabled = true;
    let decided;
    try {
      decided = await post(`/v1/approvals/${enc(item.id)}/${decision}`, {}, { signal });
    } catch (error) {
      fill(status, errorBox(error));
      for (const button of buttons.querySelectorAll("button")) button.disabled = false;
      return;
    }
    const done = decision === "approve" ? "Approved" : "Denied";
    const target = destination(item, decided);
    fill(status, h("p", {}, `${done}: ${item.tool_name}. `, target ? link(target, "Follow it") : null));
    announce(`${done} ${item.tool_name}`);
    await list.reload();
  }
}

function origin(item) {
  if (item.agent_id && item.session_id && item.turn_id) {
    return ["Agent ", link(`#/agents/${enc(item.agent_id)}`, short(item.agent_id)), ", ",
      link(turnHref(item), `turn ${short(item.turn_id)}`)];
  }
  if (item.response_id) return ["Response ", link(`#/responses/${enc(item.response_id)}`, short(item.response_id))];
  return [];
}

function turnHref(item) {
  return `#/agents/${enc(item.agent_id)}/sessions/${enc(item.session_id)}/turns/${enc(item.turn_id)}`;
}

/** Where the decided call goes on: its turn (the same one), or the response that continues the held one. */
function destination(item, decided) {
  if (item.agent_id && item.session_id && item.turn_id) return `${turnHref(item)}?follow=1`;
  const next = decided && decided.next_response_id;
  if (next) return `#/responses/${enc(next)}?follow=1`;
  if (item.response_id) return `#/responses/${enc(item.response_id)}`;
  return null;
}
