// Knowledge: vector stores and their files (upload, ingestion status) and a search showing ranked chunks.

import { get, post, request } from "../api.js";
import { announce, enc, errorBox, facts, fill, h, link, short, table, time, title } from "../dom.js";
import { byCursor, pagedList } from "../paging.js";
import { statusBadge } from "./agents.js";
import { chunks, fileName } from "./steps.js";

const POLL_MS = 1000;
const POLLS = 120;
const PAGE = 50;

export async function knowledgeView(view, { signal }) {
  const stores = await pagedList(byCursor("/v1/vector_stores", { limit: PAGE }, signal), (listed) =>
    table("Vector stores", ["Vector store", "Files", "Status", "Created"], listed.map((store) => [
      link(`#/knowledge/${enc(store.id)}`, store.name || short(store.id), { "data-store-id": store.id }),
      `${store.file_counts.completed} of ${store.file_counts.total} ingested`,
      statusBadge(store.status),
      time(store.created_at),
    ])));
  const name = h("input", { id: "vs-name", name: "name", required: true, autocomplete: "off" });
  const status = h("div", { role: "status" });
  const form = h("form", { class: "card inline", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const created = await post("/v1/vector_stores", { name: name.value.trim() }, { signal });
      location.hash = `#/knowledge/${enc(created.id)}`;
    } catch (error) {
      fill(status, errorBox(error));
    }
  } }, h("label", { for: "vs-name" }, "New vector store name"), name, h("button", { type: "submit" }, "Create"), status);
  fill(view, title("Knowledge"),
    h("h2", {}, "Vector stores"),
    stores.node,
    form);
}

export async function storeView(view, { args: [storeId], signal }) {
  const base = `/v1/vector_stores/${enc(storeId)}`;
  const [store, files] = await Promise.all([
    get(base, { signal }),
    pagedList(byCursor(`${base}/files`, { limit: PAGE }, signal), (attached) =>
      table("Files", ["File", "Status", "Size", "Added"], attached.map((file) => [
        nameOf(file.id),
        h("span", {}, statusBadge(file.status), file.last_error ? ` ${file.last_error.message}` : ""),
        `${file.usage_bytes} bytes`,
        time(file.created_at),
      ]))),
  ]);
  const uploadStatus = h("div", { role: "status" });
  const picker = h("input", { id: "kn-file", name: "file", type: "file", required: true });
  const upload = h("form", { class: "card", onsubmit: async (event) => {
    event.preventDefault();
    const [file] = picker.files;
    if (!file) return;
    fill(uploadStatus, h("p", { class: "muted" }, `Uploading ${file.name}…`));
    try {
      const form = new FormData();
      form.append("purpose", "assistants");
      form.append("file", file, file.name);
      const uploaded = await request("POST", "/v1/files", { form, signal });
      await post(`${base}/files`, { file_id: uploaded.id }, { signal });
      picker.value = "";
      fill(uploadStatus, h("p", {}, `Uploaded ${file.name}; ingesting…`));
      await files.reload();
      await watch(uploaded.id, file.name);
    } catch (error) {
      if (!signal.aborted) fill(uploadStatus, errorBox(error));
    }
  } }, h("div", { class: "field" }, h("label", { for: "kn-file" }, "File"), picker),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Upload")), uploadStatus);

  const query = h("input", { id: "kn-query", name: "query", type: "search", required: true, autocomplete: "off" });
  const results = h("div", { "aria-live": "polite" });
  const search = h("form", { class: "card", role: "search", onsubmit: async (event) => {
    event.preventDefault();
    fill(results, h("p", { class: "muted" }, "Searching…"));
    try {
      const page = await post(`${base}/search`, { query: query.value.trim(), max_num_results: 10 }, { signal });
      fill(results, h("h3", {}, `${page.data.length} chunk(s) for “${query.value.trim()}”`),
        chunks(page.data.map((item) => ({ ...item, text: item.content.map((part) => part.text).join("") }))));
    } catch (error) {
      fill(results, errorBox(error));
    }
  } }, h("div", { class: "field" }, h("label", { for: "kn-query" }, "Search"), query),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Search")), results);

  fill(view, h("nav", { "aria-label": "Breadcrumb", class: "crumbs" }, link("#/knowledge", "Knowledge"), " / ", store.name || short(storeId)),
    title(store.name || `Vector store ${short(storeId)}`),
    facts([["Vector store id", h("code", {}, store.id)], ["Embedding model", store.embedding_model], ["Created", time(store.created_at)]]),
    h("h2", {}, "Files"), files.node, upload, h("h2", {}, "Search"), search);

  /** Polls the one file until its ingestion ends, then reads the list again. */
  async function watch(fileId, filename) {
    for (let poll = 0; poll < POLLS && !signal.aborted; poll++) {
      const file = await get(`${base}/files/${enc(fileId)}`, { signal });
      if (file.status !== "in_progress") {
        fill(uploadStatus, h("p", {}, `${filename}: ingestion ${file.status}.`));
        announce(`${filename}: ingestion ${file.status}`);
        await files.reload();
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }
}

/** A file's cell: its id until its name is read. */
function nameOf(fileId) {
  const cell = h("span", { "data-file-id": fileId }, fileId);
  fileName(fileId).then((name) => { if (name) cell.textContent = name; });
  return cell;
}
