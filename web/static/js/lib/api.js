/**
 * Fetching JSON from the profboard API.
 *
 * Every non-2xx answer carries `{"error": {"code", "message"}}`; it becomes an {@link ApiError}
 * so that views and the shell can show the server's own message.
 *
 * `<html data-pending>` counts the API requests in flight and those put off until input pauses
 * ({@link deferred}): at "0" no answer is awaited and none is about to be asked for, so tests and
 * tools wait for it instead of guessing a delay.
 * @module lib/api
 */

let pending = 0;

/** @param {number} delta */
function countPending(delta) {
  pending += delta;
  document.documentElement.dataset.pending = String(pending);
}

countPending(0); // "0" from the start, before the first request

/** An API failure with the server's error code and message. */
export class ApiError extends Error {
  /**
   * @param {number} status HTTP status (0 when the server could not be reached)
   * @param {string} code machine-readable code, e.g. "not_found", "loading"
   * @param {string} message human-readable message, shown as is
   */
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

/**
 * Builds `path?query`, leaving out null, undefined and empty values.
 * @param {string} path e.g. "/api/overview"
 * @param {Record<string, string|number|null|undefined>} [params]
 * @returns {string}
 */
export function apiUrl(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, String(value));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * GETs JSON. Rejects with an {@link ApiError}, or with the fetch's AbortError when `signal` fires.
 * @param {string} path
 * @param {Record<string, string|number|null|undefined>} [params]
 * @param {AbortSignal} [signal]
 * @returns {Promise<any>}
 */
export async function getJSON(path, params = {}, signal = undefined) {
  countPending(1);
  try {
    return await fetchJSON(path, params, signal);
  } finally {
    countPending(-1);
  }
}

/**
 * @param {string} path
 * @param {Record<string, string|number|null|undefined>} params
 * @param {AbortSignal|undefined} signal
 * @returns {Promise<any>}
 */
async function fetchJSON(path, params, signal) {
  let response;
  try {
    response = await fetch(apiUrl(path, params), { signal, headers: { Accept: "application/json" } });
  } catch (err) {
    if (isAbort(err)) throw err;
    throw new ApiError(0, "network", "Cannot reach the profboard server. Is it still running?");
  }
  let body = null;
  try {
    body = await response.json();
  } catch (err) {
    if (isAbort(err)) throw err;
    body = null;
  }
  if (!response.ok) {
    const error = body && typeof body === "object" && body.error ? body.error : {};
    throw new ApiError(
      response.status,
      error.code || `http_${response.status}`,
      error.message || `The server answered ${response.status} ${response.statusText}`.trim(),
    );
  }
  if (body === null) throw new ApiError(response.status, "bad_response", "The server sent a response that is not JSON.");
  return body;
}

/**
 * A request put off until input pauses (zooming, typing): `set(send, ms)` replaces the one
 * waiting, `cancel()` drops it. While it waits it counts as pending.
 * @returns {{set: (send: () => void, ms: number) => void, cancel: () => void}}
 */
export function deferred() {
  /** @type {number|undefined} */ let timer;
  const cancel = () => {
    if (timer === undefined) return;
    window.clearTimeout(timer);
    timer = undefined;
    countPending(-1);
  };
  const set = (/** @type {() => void} */ send, /** @type {number} */ ms) => {
    cancel();
    countPending(1);
    timer = window.setTimeout(() => {
      timer = undefined;
      try {
        send();
      } finally {
        countPending(-1);
      }
    }, ms);
  };
  return { set, cancel };
}

/**
 * True for the rejection of an aborted fetch (a stale request, dropped on purpose).
 * @param {unknown} err
 * @returns {boolean}
 */
export function isAbort(err) {
  return err instanceof DOMException && err.name === "AbortError";
}
