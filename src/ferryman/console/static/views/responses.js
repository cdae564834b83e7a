// Responses and conversations: listed with ferryman's own listing routes, each opened with its items.

import { follow, get, stream } from "../api.js";
import { badge, enc, facts, fill, h, json, link, short, table, time, title } from "../dom.js";
import { byCursor, pagedList } from "../paging.js";
import { excerpt, statusBadge } from "./agents.js";
import { chunks } from "./steps.js";

const PAGE = 20;
const ENDS = new Set(["response.completed", "response.failed", "response.incomplete", "response.cancelled"]);

/** A table of a cursor-paged route, under its title, with "Load more". */
async function tableView(view, heading, path, signal, columns, row) {
  fill(view, title(heading), h("p", { class: "muted" }, "Loading…"));
  const list = await pagedList(byCursor(path, { limit: PAGE }, signal), (entries) => table(heading, columns, entries.map(row)));
  fill(view, title(heading), list.node);
}

export function responsesView(view, { signal }) {
  return tableView(view, "Responses", "/v1/responses", signal, ["Response", "Model", "Status", "Output", "Created"],
    (response) => [
      link(`#/responses/${enc(response.id)}`, short(response.id), { "data-response-id": response.id }),
      response.model, statusBadge(response.status || "completed"), excerpt(outputText(response)), time(response.created_at),
    ]);
}

export function conversationsView(view, { signal }) {
  return tableView(view, "Conversations", "/v1/conversations", signal, ["Conversation", "Metadata", "Created"],
    (conversation) => [
      link(`#/conversations/${enc(conversation.id)}`, short(conversation.id)),
      Object.entries(conversation.metadata || {}).map(([name, value]) => `${name}: ${value}`).join(", "),
      time(conversation.created_at),
    ]);
}

function outputText(response) {
  if (typeof response.output_text === "string" && response.output_text) return response.output_text;
  return (response.output || []).filter((item) => item.type === "message")
    .flatMap((item) => item.content || []).map((part) => part.text || "").join("");
}

export async function responseView(view, { args: [responseId], params, signal }) {
  const path = `/v1/responses/${enc(responseId)}`;
  const body = h("div");
  const live = h("p", { class: "live", role: "status" });
  fill(view, h("nav", { "aria-label": "Breadcrumb", class: "crumbs" }, link("#/responses", "Responses"), " / ", short(responseId)),
    title(`Response ${short(responseId)}`), live, body);
  let response = await get(path, { signal });
  await renderResponse(body, response, signal);
  const running = (status) => status === "in_progress" || status === "queued";
  if (!running(response.status) && params.get("follow") !== "1") return;
  live.textContent = "Following this response live…";
  await follow((last) => stream("GET", `${path}?stream=true`, { lastEventId: last, signal }),
    (event) => ENDS.has(event.data && event.data.type), { signal });
  response = await get(path, { signal });
  await renderResponse(body, response, signal);
  live.textContent = `The response is ${response.status}.`;
}

async function renderResponse(body, response, signal) {
  const inputs = await get(`/v1/responses/${enc(response.id)}/input_items`, { query: { order: "asc", limit: 100 }, signal });
  const usage = response.usage;
  fill(body,
    facts([
      ["Status", statusBadge(response.status || "completed")],
      ["Model", response.model],
      ["Created", time(response.created_at)],
      ["Previous response", response.previous_response_id ? link(`#/responses/${enc(response.previous_response_id)}`, short(response.previous_response_id)) : null],
      ["Conversation", response.conversation ? link(`#/conversations/${enc(response.conversation.id)}`, short(response.conversation.id)) : null],
      ["Tokens", usage ? `${usage.input_tokens} in → ${usage.output_tokens} out` : null],
    ]),
    response.error ? h("p", { class: "error" }, `${response.error.code}: ${response.error.message}`) : null,
    h("h2", {}, "Input"), items(inputs.data),
    h("h2", {}, "Output"), items(response.output || []),
    h("details", {}, h("summary", {}, "The response as JSON"), json(response)));
}

export async function conversationView(view, { args: [conversationId], signal }) {
  const [conversation, page] = await Promise.all([
    get(`/v1/conversations/${enc(conversationId)}`, { signal }),
    get(`/v1/conversations/${enc(conversationId)}/items`, { query: { order: "asc", limit: 100 }, signal }),
  ]);
  fill(view, h("nav", { "aria-label": "Breadcrumb", class: "crumbs" }, link("#/conversations", "Conversations"), " / ", short(conversationId)),
    title(`Conversation ${short(conversationId)}`),
    facts([["Conversation id", h("code", {}, conversation.id)], ["Created", time(conversation.created_at)],
      ["Metadata", Object.keys(conversation.metadata || {}).length ? json(conversation.metadata) : null]]),
    h("h2", {}, "Items"), items(page.data),
    page.has_more ? h("p", { class: "muted" }, "Showing the first 100 items.") : null);
}

/** Items of the Responses API, each as what it is. */
export function items(list) {
  if (!list.length) return h("p", { class: "muted" }, "None.");
  return h("ol", { class: "timeline items" }, list.map((item) => h("li", { class: `step ${item.type}` },
    h("div", { class: "step-head" }, h("h3", {}, label(item)), item.status ? statusBadge(item.status) : null),
    itemBody(item))));
}

function label(item) {
  if (item.type === "message") return `Message (${item.role})`;
  return item.type.replaceAll("_", " ");
}

function itemBody(item) {
  switch (item.type) {
    case "message":
      return h("div", {}, (item.content || []).map((part) => (part.text !== undefined
        ? h("p", { class: "message" }, part.text) : json(part))));
    case "function_call":
    case "custom_tool_call":
      return h("div", {}, h("p", {}, h("code", {}, item.name)), json(item.arguments ?? item.input, "Arguments"));
    case "function_call_output":
    case "custom_tool_call_output":
      return h("pre", { class: "code result" }, typeof item.output === "string" ? item.output : JSON.stringify(item.output, null, 2));
    case "mcp_call":
      return h("div", {}, h("p", {}, h("code", {}, item.name), ` on ${item.server_label}`), json(item.arguments, "Arguments"),
        item.error ? h("p", { class: "error" }, String(item.error)) : h("pre", { class: "code result" }, item.output ?? ""));
    case "mcp_approval_request":
      return h("div", {}, h("p", {}, badge("awaiting approval", "warn"), " ", h("code", {}, item.name), ` on ${item.server_label}`),
        json(item.arguments, "Arguments"));
    case "mcp_list_tools":
      return h("p", {}, `${(item.tools || []).length} tools of ${item.server_label}: `, (item.tools || []).map((tool) => tool.name).join(", "));
    case "code_interpreter_call":
      return h("div", {}, h("div", { class: "label" }, "Code"), h("pre", { class: "code" }, item.code || ""),
        (item.outputs || []).map((output) => (output.type === "logs"
          ? [h("div", { class: "label" }, "Output"), h("pre", { class: "code stdout" }, output.logs)] : json(output))));
    case "file_search_call":
      return h("div", {}, h("p", {}, "Queries: ", (item.queries || []).join("; ")), chunks(item.results || []));
    default:
      return json(item);
  }
}
