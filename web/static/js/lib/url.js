/**
 * The URL is the state: run, worker, span and view-specific parameters live in the query string,
 * so reloads and pasted links restore what was on screen.
 * @module lib/url
 */

/** The selection parameters the shell owns, in the order they appear in URLs. */
export const SELECTION_KEYS = ["run", "worker", "span"];

/**
 * The current query string as a plain object (first value of each key).
 * @param {string} [search] defaults to `location.search`
 * @returns {Record<string, string>}
 */
export function readQuery(search = window.location.search) {
  /** @type {Record<string, string>} */
  const out = {};
  for (const [key, value] of new URLSearchParams(search)) {
    if (!(key in out)) out[key] = value;
  }
  return out;
}

/**
 * A query string (with its "?") from an object; run, worker, span first, empty values left out.
 * @param {Record<string, string|null|undefined>} state
 * @returns {string}
 */
export function toQuery(state) {
  const query = new URLSearchParams();
  const keys = [...SELECTION_KEYS, ...Object.keys(state).filter((k) => !SELECTION_KEYS.includes(k)).sort()];
  for (const key of keys) {
    const value = state[key];
    if (value !== null && value !== undefined && value !== "") query.set(key, String(value));
  }
  const text = query.toString();
  return text ? `?${text}` : "";
}

/**
 * Writes `state` into the address bar without reloading.
 * @param {Record<string, string|null|undefined>} state the complete query state
 * @param {{push?: boolean}} [options] push a history entry (a user's new selection) or replace the current one
 */
export function writeQuery(state, { push = false } = {}) {
  const url = `${window.location.pathname}${toQuery(state)}${window.location.hash}`;
  if (url === `${window.location.pathname}${window.location.search}${window.location.hash}`) return;
  if (push) window.history.pushState(null, "", url);
  else window.history.replaceState(null, "", url);
}

/**
 * Sets (or, with null, removes) some parameters of the current URL, replacing the history entry.
 * For view-specific state such as a table's sort order.
 * @param {Record<string, string|null|undefined>} changes
 */
export function updateQuery(changes) {
  writeQuery({ ...readQuery(), ...changes });
}

/**
 * Sets (or, with null, removes) some parameters with a new history entry, then lets the shell show
 * that state as it does for Back and Forward: it remounts the view when the query changed. For view
 * state that needs new data, such as a different grouping.
 * @param {Record<string, string|null|undefined>} changes
 */
export function navigate(changes) {
  writeQuery({ ...readQuery(), ...changes }, { push: true });
  window.dispatchEvent(new PopStateEvent("popstate"));
}

/**
 * The page address of a view for a given query state.
 * @param {string} view view name, e.g. "overview"
 * @param {Record<string, string|null|undefined>} state
 * @returns {string}
 */
export function viewHref(view, state) {
  return `/${encodeURIComponent(view)}${toQuery(state)}`;
}

/**
 * The trace view of a selection, zoomed to a time range and/or searching for a name.
 * @param {{run?: string, worker?: string, span?: string}} selection
 * @param {{start_us?: number, end_us?: number, q?: string, select?: number}} target
 * @returns {string}
 */
export function traceHref({ run, worker, span }, { start_us, end_us, q, select } = {}) {
  const text = (/** @type {number|undefined} */ v) => (v === undefined || v === null ? null : String(v));
  return viewHref("trace", { run, worker, span, start_us: text(start_us), end_us: text(end_us), q, select: text(select) });
}
