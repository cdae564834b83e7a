// Building the page: elements from data (text is always set as text, never parsed as HTML), and formatting.

/** An element: h("a", {href: "#/x"}, "text", child…). Attributes starting with "on" are listeners. */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

/** Replace what a node holds. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** Where the views draw. */
export function main() {
  return document.getElementById("main");
}

/** Say something to screen readers (a live region). */
export function announce(text) {
  const region = document.getElementById("announce");
  region.textContent = "";
  setTimeout(() => { region.textContent = text; }, 50);
}

/** A heading for the view, focused so that keyboard and screen reader users land on it. */
export function title(text, ...more) {
  document.title = `${text} · ferryman console`;
  return h("div", { class: "title" }, h("h1", { tabindex: "-1", id: "view-title" }, text), ...more);
}

export function focusTitle() {
  const heading = document.getElementById("view-title");
  if (heading) heading.focus({ preventScroll: false });
}

/** A table in a scrolling box (narrow screens scroll it rather than the page). */
export function table(caption, headers, rows) {
  return h("div", { class: "table-wrap", role: "region", "aria-label": caption, tabindex: "0" },
    h("table", {},
      h("caption", { class: "sr-only" }, caption),
      h("thead", {}, h("tr", {}, headers.map((name) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, rows.length ? rows.map((cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell))))
        : h("tr", {}, h("td", { colspan: String(headers.length), class: "muted" }, "Nothing here yet.")))));
}

/** A definition list of label → value pairs (values may be nodes). */
export function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.filter(([, value]) => value !== undefined && value !== null && value !== "")
      .map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)]));
}

/** JSON, pretty, in a preformatted block. */
export function json(value, label) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return h("pre", { class: "code", "aria-label": label || null }, text);
}

export function errorBox(error) {
  return h("p", { class: "error", role: "alert" }, error && error.message ? error.message : String(error));
}

export function badge(text, kind) {
  return h("span", { class: `badge ${kind || text}` }, text);
}

/** Seconds, Unix or ISO → a local date and time. */
export function when(value) {
  if (value === undefined || value === null) return "";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

export function time(value) {
  return h("time", { datetime: typeof value === "number" ? new Date(value * 1000).toISOString() : value }, when(value));
}

/** The time between two ISO instants, readable ("0.42 s", "1 min 3 s"). */
export function duration(start, end) {
  if (!start || !end) return "";
  const seconds = (new Date(end) - new Date(start)) / 1000;
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return `${seconds.toFixed(2)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

export function since(value) {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  const seconds = Math.max(0, (Date.now() - date.getTime()) / 1000);
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} d ago`;
}

/** The text of Llama Stack's interleaved content (a string, an item, or a list of them). */
export function contentText(content) {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map(contentText).join("");
  if (content.type === "text") return content.text;
  if (content.type === "image") return "[image]";
  return JSON.stringify(content);
}

export function short(id) {
  return id && id.length > 14 ? `${id.slice(0, 12)}…` : id;
}

/** A link to a view. */
export function link(href, text, attrs = {}) {
  return h("a", { href, ...attrs }, text);
}

export function enc(value) {
  return encodeURIComponent(value);
}
