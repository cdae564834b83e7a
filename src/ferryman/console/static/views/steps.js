// A turn's steps as a timeline: type, duration and tokens of each; tool calls with their arguments and
// results (code-interpreter output and files, MCP results, retrieved chunks with files and scores);
// shield verdicts; approvals.

import { download, get } from "../api.js";
import { badge, contentText, duration, errorBox, facts, h, json } from "../dom.js";

const STEP_NAMES = {
  inference: "Inference",
  tool_execution: "Tool execution",
  shield_call: "Shield",
  memory_retrieval: "Memory retrieval",
};

/** The ordered list of steps. */
export function timeline(steps) {
  return h("ol", { class: "timeline", "aria-label": "Steps" }, steps.map(stepItem));
}

export function stepItem(step) {
  const tokens = step.usage ? `${step.usage.input_tokens} in → ${step.usage.output_tokens} out tokens` : null;
  const took = duration(step.started_at, step.completed_at);
  return h("li", { class: `step ${step.step_type}`, "data-step-id": step.step_id, "data-step-type": step.step_type },
    h("div", { class: "step-head" },
      h("h3", {}, STEP_NAMES[step.step_type] || step.step_type),
      h("span", { class: "muted" }, [took && h("span", { class: "took" }, took), tokens && h("span", { class: "tokens" }, tokens)]
        .filter(Boolean).flatMap((part, index) => (index ? [" · ", part] : [part])))),
    stepBody(step));
}

function stepBody(step) {
  switch (step.step_type) {
    case "inference": return inference(step);
    case "tool_execution": return toolExecution(step);
    case "shield_call": return shield(step.violation);
    case "memory_retrieval": return h("div", {},
      facts([["Memory banks", step.vector_db_ids]]),
      h("details", {}, h("summary", {}, "Inserted context"), h("pre", { class: "code" }, contentText(step.inserted_context))));
    default: return json(step);
  }
}

function inference(step) {
  const message = step.model_response || {};
  const text = contentText(message.content);
  const calls = message.tool_calls || [];
  return h("div", {},
    text ? h("p", { class: "message" }, text) : null,
    calls.length ? h("ul", { class: "plain" }, calls.map((call) => h("li", {},
      "Calls ", h("code", {}, call.tool_name), " ", json(call.arguments, `Arguments of ${call.tool_name}`)))) : null,
    message.stop_reason && message.stop_reason !== "end_of_turn" ? h("p", { class: "muted" }, `Stopped: ${message.stop_reason}`) : null);
}

export function shield(violation) {
  if (!violation) return h("p", {}, badge("passed", "ok"), " No violation.");
  return h("div", {},
    h("p", {}, badge(`violation: ${violation.violation_level}`, violation.violation_level === "info" ? "warn" : "bad"),
      " ", violation.user_message || ""),
    violation.metadata && Object.keys(violation.metadata).length ? json(violation.metadata, "Violation details") : null);
}

function toolExecution(step) {
  const responses = new Map((step.tool_responses || []).map((response) => [response.call_id, response]));
  const approvals = new Map((step.approval_requests || []).map((request) => [request.call_id, request]));
  return h("div", { class: "calls" }, (step.tool_calls || []).map((call) =>
    toolCall(call, responses.get(call.call_id), approvals.get(call.call_id))));
}

/** One tool call: its name, arguments and result (or the approval it waits for). */
export function toolCall(call, response, approval) {
  return h("section", { class: "call", "aria-label": `Tool call ${call.tool_name}` },
    h("h4", {}, h("code", {}, call.tool_name), approval ? [" ", badge("awaiting approval", "warn")] : null),
    h("div", { class: "label" }, "Arguments"),
    json(call.arguments, `Arguments of ${call.tool_name}`),
    response ? toolResult(response) : approval ? null : h("p", { class: "muted" }, "No result yet."));
}

export function toolResult(response) {
  const meta = response.metadata || {};
  const parts = [h("div", { class: "label" }, "Result")];
  const code = "stdout" in meta || "stderr" in meta;
  if (code) parts.push(codeOutput(meta));
  else parts.push(h("pre", { class: "code result" }, contentText(response.content)));
  if (meta.file_search) parts.push(chunks(meta.file_search.results || []));
  if (Array.isArray(meta.chunks) && Array.isArray(meta.scores)) {
    parts.push(chunks(meta.chunks.map((chunk, index) => ({
      text: typeof chunk === "string" ? chunk : contentText(chunk.content ?? chunk),
      score: meta.scores[index],
      file_id: (meta.document_ids || [])[index],
    }))));
  }
  // A flag ({"error": true}) says nothing to show; the code interpreter's message is in its output already.
  const message = [meta.error_message, code ? null : meta.error].find((value) => typeof value === "string" && value);
  if (message) parts.push(errorBox(message));
  const known = new Set(["stdout", "stderr", "result", "error", "restarted", "files", "file_search", "chunks", "scores", "document_ids"]);
  const rest = Object.fromEntries(Object.entries(meta).filter(([name]) => !known.has(name)));
  if (Object.keys(rest).length) parts.push(h("details", {}, h("summary", {}, "Metadata"), json(rest)));
  return h("div", { class: "result" }, parts);
}

/** The code interpreter's output: stdout, stderr, the last expression's value, the files it wrote. */
export function codeOutput(meta) {
  const files = meta.files || [];
  return h("div", { class: "code-output" },
    meta.restarted ? h("p", { class: "muted" }, "The kernel was restarted first.") : null,
    meta.stdout ? [h("div", { class: "label" }, "Output"), h("pre", { class: "code stdout" }, meta.stdout)] : null,
    meta.stderr ? [h("div", { class: "label" }, "Errors"), h("pre", { class: "code stderr" }, meta.stderr)] : null,
    meta.result ? [h("div", { class: "label" }, "Value"), h("pre", { class: "code" }, meta.result)] : null,
    typeof meta.error === "string" && meta.error ? errorBox(meta.error) : null,
    files.length ? [h("div", { class: "label" }, "Files"), h("ul", { class: "plain" }, files.map(fileItem))] : null);
}

function fileItem(file) {
  const label = `${file.filename || file.path} (${file.bytes} bytes)`;
  if (!file.file_id) return h("li", {}, label);
  return h("li", {}, h("button", {
    type: "button", class: "link",
    onclick: () => download(`/v1/files/${encodeURIComponent(file.file_id)}/content`, file.filename),
  }, `Download ${label}`));
}

const fileNames = new Map(); // file id → the promise of its name, for the principal signed in

/** Forget the file names read (another principal may sign in next). */
export function forgetFileNames() {
  fileNames.clear();
}

/** A file's name, read once; null when it cannot be read (then its id is shown). */
export function fileName(fileId) {
  if (!fileNames.has(fileId)) {
    fileNames.set(fileId, get(`/v1/files/${encodeURIComponent(fileId)}`).then((file) => file.filename || null, () => null));
  }
  return fileNames.get(fileId);
}

/** A chunk's file: its name, or its id until (unless) the name is read. */
function fileLabel(result) {
  const label = h("span", { class: "file" }, result.filename || result.file_id || "chunk");
  // A chunk's document id is its file's id unless the document was inserted under a name of its own.
  if (!result.filename && /^file-[0-9a-f]+$/.test(result.file_id || "")) {
    fileName(result.file_id).then((name) => { if (name) label.textContent = name; });
  }
  return label;
}

/** Retrieved chunks, best first: rank, file, score and text. */
export function chunks(results) {
  if (!results.length) return h("p", { class: "muted" }, "No chunk retrieved.");
  return h("ol", { class: "chunks", "aria-label": "Retrieved chunks" }, results.map((result) => h("li", { class: "chunk" },
    h("div", { class: "chunk-head" },
      fileLabel(result),
      typeof result.score === "number" ? h("span", { class: "score" }, `score ${result.score.toFixed(3)}`) : null),
    h("p", {}, result.text ?? contentText(result.content)))));
}

/** The approvals a paused turn waits for. */
export function approvalList(requests) {
  return h("ul", { class: "plain" }, requests.map((request) => h("li", {},
    badge("awaiting approval", "warn"), " ", h("code", {}, request.tool_name), " ", json(request.arguments))));
}
