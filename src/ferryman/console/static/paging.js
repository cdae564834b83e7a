// Lists read a page at a time: the API's two shapes of paging, and a "Load more" button under what was read.

import { get } from "./api.js";
import { errorBox, fill, h } from "./dom.js";

/** Pages of a cursor-paged route (OpenAI's shape: data, last_id, has_more), read with ?after=. */
export function byCursor(path, query, signal) {
  return async (after) => {
    const page = await get(path, { query: { ...query, after }, signal });
    return { data: page.data, next: page.last_id || undefined, more: Boolean(page.has_more) };
  };
}

/** Pages of an index-paged route (the Agents API's shape: data, has_more), read with ?start_index=. */
export function byIndex(path, query, signal) {
  return async (start = 0) => {
    const page = await get(path, { query: { ...query, start_index: start }, signal });
    return { data: page.data, next: start + page.data.length, more: Boolean(page.has_more) && page.data.length > 0 };
  };
}

/** Every entry of a paged list (pages(cursor) as byCursor or byIndex make), up to `most`. */
export async function readAll(pages, most) {
  const all = [];
  let next;
  for (;;) {
    const page = await pages(next);
    all.push(...page.data);
    if (!page.more || all.length >= most) return all.slice(0, most);
    next = page.next;
  }
}

/**
 * A list shown by show(entries), with "Load more" while the route has more; a failed read shows its error
 * under the list. Resolves once the first page is shown (a failure of that one is thrown) with
 * {node, reload}: reload() reads the list again from its first page.
 */
export async function pagedList(pages, show) {
  const entries = [];
  let next;
  const holder = h("div");
  const status = h("div", { class: "list-status" }); // a failed read: its errorBox is an alert
  const more = h("button", { type: "button", class: "secondary", onclick: () => guarded(load) }, "Load more");
  async function load() {
    more.disabled = true;
    try {
      const page = await pages(next);
      entries.push(...page.data);
      next = page.next;
      fill(status);
      fill(holder, show(entries), page.more ? more : null);
    } finally {
      more.disabled = false;
    }
  }
  async function reload() {
    entries.length = 0;
    next = undefined;
    await load();
  }
  async function guarded(action) {
    try {
      await action();
    } catch (error) {
      fill(status, errorBox(error));
    }
  }
  await load();
  return { node: h("div", { class: "paged" }, holder, status), reload: () => guarded(reload) };
}
