// The API, from the browser: the key lives in this tab's session storage and travels only as an
// Authorization header; streams are read with fetch (EventSource cannot send headers).

const KEY = "ferryman.console.key";
const API_ROOT = new URL("../", document.baseURI);

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** The URL of an API path ("/v1/agents"), on this server (under its prefix, if it has one). */
export function apiUrl(path) {
  return new URL(path.replace(/^\//, ""), API_ROOT).toString();
}

function headers(extra = {}, anonymous = false) {
  const all = { ...extra };
  const key = anonymous ? null : apiKey();
  if (key) all.Authorization = `Bearer ${key}`;
  return all;
}

async function failure(response, signalsRefusal = true) {
  let body = null;
  let message = `${response.status} ${response.statusText}`;
  try {
    body = await response.json();
    const error = body && (body.error || body.detail);
    if (error) message = typeof error === "string" ? error : error.message || JSON.stringify(error);
  } catch {
    // not JSON: the status line says enough
  }
  if (response.status === 401 && signalsRefusal) window.dispatchEvent(new CustomEvent("console:unauthorized"));
  return new ApiError(response.status, message, body);
}

/**
 * Send a request; the parsed JSON answer (null when empty). Throws ApiError for any status >= 400.
 * anonymous: without the key (to learn whether the server asks for one).
 */
export async function request(method, path, { json, form, query, signal, anonymous = false } = {}) {
  let url = apiUrl(path);
  if (query) {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null) params.set(name, value);
    const text = params.toString();
    if (text) url += `?${text}`;
  }
  const init = { method, headers: headers({}, anonymous), signal, credentials: "omit", cache: "no-store" };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (form) {
    init.body = form;
  }
  const response = await fetch(url, init);
  if (!response.ok) throw await failure(response, !anonymous);
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, options) => request("GET", path, options);
export const post = (path, json, options = {}) => request("POST", path, { ...options, json });

/**
 * Read a server-sent event stream from a fetch response; call onEvent({id, event, data}) for each.
 * When onEvent returns true the stream is closed then and there; resolves with true in that case, with
 * false when the server ended the stream.
 */
export async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += value;
    let newline;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
      if (line === "") {
        if (event.data.length) {
          const data = event.data.join("\n");
          let parsed = data;
          try { parsed = JSON.parse(data); } catch { /* kept as text */ }
          if (await onEvent({ id: event.id, event: event.event, data: parsed })) {
            await reader.cancel().catch(() => {});
            return true;
          }
        }
        event = { data: [], id: undefined, event: undefined };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") event.data.push(text);
      else if (field === "id") event.id = text;
      else if (field === "event") event.event = text;
    }
  }
}

const RETRIES = 8;

/**
 * Follow a stream to its end, reading on after a dropped connection with Last-Event-ID.
 *
 * open(lastEventId) starts (or restarts) the request; onEvent gets each event and returns true when the
 * stream is over for the caller (it is closed at once). A stream the server ends is over when its last event
 * satisfies endsRun (the run ended or paused); otherwise the connection was cut, and it is opened again.
 * A 409 (an Idempotency-Key whose first call has not named its run yet) is tried again too.
 * Resolves with the last event id seen.
 */
export async function follow(open, onEvent, { signal, lastEventId = null, onReconnect, endsRun = () => false } = {}) {
  let last = lastEventId;
  for (let attempt = 0; attempt <= RETRIES; attempt++) {
    if (signal && signal.aborted) return last;
    try {
      const response = await open(last);
      if (!response.ok) throw await failure(response);
      let ended = false;
      const stopped = await readEvents(response, async (event) => {
        if (event.id !== undefined) last = event.id;
        attempt = 0;
        ended = endsRun(event);
        return onEvent(event);
      });
      if (stopped || ended) return last;
    } catch (error) {
      if ((signal && signal.aborted) || (error instanceof ApiError && error.status !== 409)) throw error;
    }
    if (onReconnect) onReconnect(last);
    await new Promise((resolve) => setTimeout(resolve, Math.min(4000, 250 * 2 ** attempt)));
  }
  return last;
}

/**
 * Start a streamed request (POST with a JSON body, or GET), with the key and Last-Event-ID when resuming;
 * idempotencyKey makes a repeated POST replay the first one's stream instead of running again.
 */
export function stream(method, path, { json, lastEventId, signal, idempotencyKey } = {}) {
  const extra = { Accept: "text/event-stream" };
  if (idempotencyKey) extra["Idempotency-Key"] = idempotencyKey;
  if (lastEventId !== null && lastEventId !== undefined) extra["Last-Event-ID"] = String(lastEventId);
  const init = { method, headers: headers(extra), signal, credentials: "omit", cache: "no-store" };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  }
  return fetch(apiUrl(path), init);
}

/** Fetch a file's bytes with the key and hand them to the browser as a download. */
export async function download(path, filename) {
  const response = await fetch(apiUrl(path), { headers: headers(), credentials: "omit" });
  if (!response.ok) throw await failure(response);
  const url = URL.createObjectURL(await response.blob());
  const anchor = document.createElement("a");
  anchor.href = url;
  anchor.download = filename || "download";
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
