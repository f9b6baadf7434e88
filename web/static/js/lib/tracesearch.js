/**
 * The Trace view's search box: names that contain the text (or match a regular expression) through
 * `/api/trace/search`, a "3 of 12" counter, Enter / Shift+Enter and the arrow buttons step through
 * the matches (each selected and zoomed to by the view). The query lives in the URL (`q`, `regex`).
 * @module lib/tracesearch
 */

import { deferred, isAbort } from "./api.js";
import { formatCount } from "./format.js";
import { updateQuery } from "./url.js";

/**
 * @typedef {{id: number, name: string, lane: number, start_us: number, dur_us: number}} Match
 * @typedef {{q: string, total: number, matches: Match[], warnings: string[]}} SearchResult
 */

/** Search this long after the last key stroke. */
const SEARCH_DELAY_MS = 250;

/**
 * The search counter: "3 of 12", "– of 12" before the first step, "No matches"; its tooltip says
 * when stepping covers only the matches listed (the server lists the first 1000 by start time).
 * @param {number} index -1 before the first step
 * @param {number} total every match
 * @param {number} listed the matches the server listed
 * @returns {{text: string, title: string}}
 */
export function searchCountText(index, total, listed) {
  if (!total) return { text: "No matches", title: "" };
  const k = index >= 0 ? formatCount(index + 1) : "–";
  return {
    text: `${k} of ${formatCount(total)}`,
    title: listed < total ? `Next and previous step through the first ${formatCount(listed)} matches, by start time` : "",
  };
}

/**
 * Wires the search controls.
 * @param {{input: HTMLInputElement, regex: HTMLInputElement, prev: HTMLElement, next: HTMLElement, count: HTMLElement}} ui
 * @param {object} hooks
 * @param {(q: string, regex: boolean, signal: AbortSignal) => Promise<SearchResult>} hooks.search asks the server
 * @param {(match: Match) => void} hooks.go selects and shows a match
 * @param {() => number|null} hooks.selected the selected event's id
 * @param {() => void} hooks.changed the matches changed (their outlines need drawing)
 * @param {AbortSignal} [hooks.signal] fires when the view is remounted
 */
export function searchBox(ui, { search, go, selected, changed, signal }) {
  let state = { q: "", regex: false, /** @type {Match[]} */ matches: [], total: 0, index: -1, ids: new Set() };
  /** @type {AbortController|null} */ let inflight = null;
  const later = deferred();
  const listen = { signal };

  /** @param {string|{text: string, title: string}} [what] @param {string} [tone] */
  function showCount(what = "", tone = "") {
    const { text, title } = typeof what === "string" ? { text: what, title: "" } : what;
    ui.count.textContent = text;
    ui.count.title = title;
    ui.count.dataset.tone = tone;
  }

  /** Keeps the counter on the selected event when it is a match. @param {number} id */
  function sync(id) {
    const index = state.matches.findIndex((m) => m.id === id);
    if (index >= 0 && index !== state.index) {
      state.index = index;
      showCount(searchCountText(index, state.total, state.matches.length));
    }
  }

  /** @param {{step?: number}} [options] step to a match once the answer is in (1: next, -1: previous) */
  async function run({ step = 0 } = {}) {
    later.cancel();
    const q = ui.input.value.trim();
    const regex = ui.regex.checked;
    updateQuery({ q: q || null, regex: regex ? "1" : null });
    if (inflight) inflight.abort();
    inflight = null;
    if (!q) {
      state = { q: "", regex, matches: [], total: 0, index: -1, ids: new Set() };
      showCount();
      changed();
      return;
    }
    const ctl = new AbortController();
    inflight = ctl;
    showCount("Searching…");
    try {
      const result = await search(q, regex, ctl.signal);
      if (ctl.signal.aborted) return;
      inflight = null; // answered: stepping must not search again
      const matches = result.matches || [];
      const current = matches.findIndex((m) => m.id === selected());
      state = { q, regex, matches, total: result.total ?? matches.length, index: current, ids: new Set(matches.map((m) => m.id)) };
      showCount(searchCountText(current, state.total, matches.length));
      changed();
      if (step) stepBy(step);
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      state = { q, regex, matches: [], total: 0, index: -1, ids: new Set() };
      showCount(err instanceof Error ? err.message : String(err), "error");
      changed();
    } finally {
      if (inflight === ctl) inflight = null;
    }
  }

  /** @param {number} dir 1: next, -1: previous */
  function stepBy(dir) {
    if (ui.input.value.trim() !== state.q || ui.regex.checked !== state.regex || inflight) {
      run({ step: dir });
      return;
    }
    const n = state.matches.length;
    if (!n) return;
    state.index = state.index < 0 ? (dir > 0 ? 0 : n - 1) : (state.index + dir + n) % n;
    showCount(searchCountText(state.index, state.total, n));
    go(state.matches[state.index]);
  }

  ui.input.addEventListener("input", () => {
    later.set(() => run(), SEARCH_DELAY_MS);
  }, listen);
  ui.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      stepBy(event.shiftKey ? -1 : 1);
    }
  }, listen);
  ui.regex.addEventListener("change", () => run(), listen);
  ui.next.addEventListener("click", () => stepBy(1), listen);
  ui.prev.addEventListener("click", () => stepBy(-1), listen);
  if (signal) {
    signal.addEventListener("abort", () => {
      later.cancel();
      if (inflight) inflight.abort();
    });
  }
  showCount();
  return { run, sync, ids: () => state.ids };
}
