// An agent's memory: its labelled blocks, each edited in place, and blocks created and deleted. A save names the
// version the block was read at, so a block changed meanwhile (by the agent's memory tool, say) is refused with
// the API's 409, never overwritten unseen.

import { ApiError, get, request } from "../api.js";
import { enc, errorBox, facts, fill, focusTitle, h, link, short, time, title } from "../dom.js";

let fields = 0; // numbers the fields' ids: a label may hold dots, which an id selector would misread

export async function memoryView(view, { args: [agentId], signal }) {
  const base = `/v1/agents/${enc(agentId)}/memory`;
  const [agent, listed] = await Promise.all([get(`/v1/agents/${enc(agentId)}`, { signal }), get(base, { signal })]);
  const name = agent.agent_config.name || short(agentId);
  const status = h("div", { role: "status", class: "live" });
  const list = h("div", { class: "memory" });
  let labels = [];

  function show(blocks) {
    labels = blocks.map((block) => block.label);
    fill(list, blocks.length
      ? h("ul", { class: "cards", "aria-label": "Memory blocks" }, blocks.map((block) => blockCard(block)))
      : h("p", { class: "empty" }, "This agent has no memory blocks yet."));
  }

  /** Read the blocks again (after a create or a delete); a failed read says so above the list. */
  async function reload() {
    try {
      show((await get(base, { signal })).data);
    } catch (error) {
      if (!signal.aborted) fill(status, errorBox(error));
    }
  }

  function blockCard(read) {
    let block = read;
    const at = `${base}/${enc(block.label)}`;
    const n = ++fields;
    const about = h("div");
    const value = h("textarea", { id: `mb-${n}-value`, name: "value", rows: "6", "aria-describedby": `mb-${n}-count` });
    const count = h("p", { class: "hint", id: `mb-${n}-count` });
    const description = h("input", { id: `mb-${n}-description`, name: "description", autocomplete: "off" });
    const save = h("button", { type: "submit", "aria-label": `Save ${block.label}` }, "Save");
    const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${block.label}`, onclick: askDelete }, "Delete");
    const actions = h("div", { class: "actions" }, save, remove);
    const outcome = h("div", { role: "status", class: "live" });
    const versions = h("div");
    value.addEventListener("input", counted);
    showBlock();

    function showBlock() {
      value.value = block.value;
      description.value = block.description || "";
      counted();
      fill(about, facts([["Version", String(block.version)], ["Updated", time(block.updated_at)], ["Created", time(block.created_at)]]));
    }

    function counted() {
      count.textContent = `${value.value.length} characters`;
    }

    async function submit(event) {
      event.preventDefault();
      save.disabled = true;
      fill(outcome, h("p", { class: "muted" }, "Saving…"));
      const body = { value: value.value, version: block.version };
      if (description.value !== (block.description || "")) body.description = description.value;
      try {
        block = await request("PUT", at, { json: body, signal });
        showBlock();
        fill(outcome, h("p", {}, `Saved: version ${block.version}.`));
      } catch (error) {
        if (signal.aborted) return;
        const moved = error instanceof ApiError && error.status === 409;
        fill(outcome, errorBox(error), moved
          ? h("button", { type: "button", class: "secondary", onclick: reread }, "Load the current version (drops this edit)")
          : null);
      } finally {
        save.disabled = false;
      }
    }

    async function reread() {
      try {
        block = await get(at, { signal });
        showBlock();
        fill(outcome, h("p", {}, `Loaded version ${block.version}.`));
        value.focus();
      } catch (error) {
        if (!signal.aborted) fill(outcome, errorBox(error));
      }
    }

    function askDelete() {
      const sure = h("button", { type: "button", class: "danger", onclick: destroy }, `Delete ${block.label} for good`);
      const keep = h("button", { type: "button", class: "secondary", onclick: () => {
        fill(actions, save, remove);
        remove.focus();
      } }, "Keep it");
      fill(actions, h("span", {}, "Delete this block and its earlier versions?"), sure, keep);
      sure.focus();
    }

    async function destroy() {
      try {
        await request("DELETE", at, { signal });
      } catch (error) {
        if (!signal.aborted) fill(outcome, errorBox(error));
        return;
      }
      fill(status, h("p", {}, `Deleted ${block.label}.`));
      await reload();
      focusTitle();
    }

    async function history(event) {
      if (!event.target.open) return;
      fill(versions, h("p", { class: "muted" }, "Loading…"));
      try {
        const found = await get(`${at}/versions`, { signal });
        fill(versions, h("ol", { class: "plain versions", "aria-label": `Versions of ${block.label}` }, found.data.map((kept) =>
          h("li", {}, h("p", { class: "muted" }, `Version ${kept.version}, `, time(kept.updated_at)),
            h("pre", { class: "code prose" }, kept.value)))));
      } catch (error) {
        if (!signal.aborted) fill(versions, errorBox(error));
      }
    }

    return h("li", { class: "card memory-block", "data-label": block.label },
      h("h2", {}, h("code", {}, block.label)),
      about,
      h("form", { onsubmit: submit },
        h("div", { class: "field" }, labelFor(value, "Value", block.label), value, count),
        h("div", { class: "field" }, labelFor(description, "Description", block.label), description),
        actions),
      outcome,
      h("details", { ontoggle: history }, h("summary", {}, "Versions"), versions));
  }

  const label = h("input", { id: "mb-new-label", name: "label", required: true, autocomplete: "off", spellcheck: "false", "aria-describedby": "mb-new-label-hint" });
  const description = h("input", { id: "mb-new-description", name: "description", autocomplete: "off" });
  const value = h("textarea", { id: "mb-new-value", name: "value", rows: "4" });
  const created = h("div", { role: "status", class: "live" });
  const create = h("form", { class: "card", "aria-labelledby": "mb-new-heading", onsubmit: async (event) => {
    event.preventDefault();
    const wanted = label.value.trim();
    if (labels.includes(wanted)) {
      // The API's PUT would write a new version over it: a new block is never a silent overwrite.
      fill(created, errorBox(`A block labelled ${wanted} exists: edit it above.`));
      return;
    }
    const body = { value: value.value };
    if (description.value.trim()) body.description = description.value.trim();
    try {
      await request("PUT", `${base}/${enc(wanted)}`, { json: body, signal });
    } catch (error) {
      if (!signal.aborted) fill(created, errorBox(error));
      return;
    }
    create.reset();
    fill(created, h("p", {}, `Created ${wanted}.`));
    await reload();
  } },
  h("h2", { id: "mb-new-heading" }, "New block"),
  h("div", { class: "field" }, h("label", { for: "mb-new-label" }, "Label"),
    h("p", { class: "hint", id: "mb-new-label-hint" }, "Letters, digits, “_”, “.” or “-”, starting with a letter or digit."), label),
  h("div", { class: "field" }, h("label", { for: "mb-new-description" }, "Description (optional)"), description),
  h("div", { class: "field" }, h("label", { for: "mb-new-value" }, "Value"), value),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Create")),
  created);

  show(listed.data);
  fill(view,
    h("nav", { "aria-label": "Breadcrumb", class: "crumbs" },
      link("#/agents", "Agents"), " / ", link(`#/agents/${enc(agentId)}`, name), " / Memory"),
    title(`Memory of ${name}`),
    h("p", { class: "muted" }, "Blocks of text the agent reads in its system message on every turn, and edits itself when given the ",
      h("code", {}, "builtin::memory"), " toolgroup. A save is refused when the block changed after this page read it."),
    status, list, create);
}

/** A field's label, naming its block to screen readers ("Value of persona"), since every card has one. */
function labelFor(field, text, blockLabel) {
  return h("label", { for: field.id }, text, h("span", { class: "sr-only" }, ` of ${blockLabel}`));
}

/** The agent page's summary of its memory: the blocks' labels and a link to this view. */
export function memorySummary(agentId, blocks) {
  const labels = blocks.map((block) => block.label).join(", ");
  return h("p", {}, blocks.length ? `${blocks.length} block(s): ${labels}. ` : "No memory blocks yet. ",
    link(`#/agents/${enc(agentId)}/memory`, "View and edit the memory"));
}
