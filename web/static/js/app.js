/**
 * The shell: reads the registry (/api/runs, /api/views), builds the left panel, keeps the
 * selection in the URL and mounts the current view's module (`./<view>.js`).
 *
 * A view module exports one entry:
 *
 *     export async function mount(root, params, context)
 *
 * - `root`: the view's `<section data-view="...">`, holding the containers its template made;
 * - `params`: `{run, worker, span, ...the rest of the query string}`;
 * - `context.signal`: an AbortSignal that fires when the selection changes; pass it to `getJSON`.
 *
 * `mount` resolves once drawn and rejects with an Error (an `ApiError` for API failures); the
 * shell shows its message in the view area, so a view never leaves a blank page.
 * @module app
 */

import { ApiError, getJSON, isAbort } from "./lib/api.js";
import { clear, el, renderNote } from "./lib/dom.js";
import { formatRatio } from "./lib/format.js";
import { readQuery, viewHref, writeQuery } from "./lib/url.js";

/** Poll /api/runs this often while something loads, and otherwise (new runs appear without restart). */
const POLL_LOADING_MS = 1000;
const POLL_IDLE_MS = 5000;
/** Show the "Loading…" line only for slower answers, so quick switches don't flicker. */
const BUSY_DELAY_MS = 250;

/**
 * @typedef {{worker: string, span: string, status: "loading"|"ready"|"error", progress: number,
 *            error: string|null, warnings: string[]}} FileInfo
 * @typedef {{name: string, status: "loading"|"ready"|"error", progress: number, error: string|null,
 *            workers: string[], spans: Record<string, string[]>, views: string[], files: FileInfo[],
 *            snapshots?: string[]}} RunInfo
 * @typedef {{name: string, title: string, about: string, all_workers?: boolean}} ViewInfo
 */

const $ = (/** @type {string} */ selector) => /** @type {HTMLElement} */ (document.querySelector(selector));

const ui = {
  run: /** @type {HTMLSelectElement} */ ($('[data-testid="run-select"]')),
  view: /** @type {HTMLSelectElement} */ ($('[data-testid="view-select"]')),
  worker: /** @type {HTMLSelectElement} */ ($('[data-testid="worker-select"]')),
  span: /** @type {HTMLSelectElement} */ ($('[data-testid="span-select"]')),
  runStatus: $('[data-testid="run-status"]'),
  status: $('[data-testid="status"]'),
  error: $('[data-testid="error"]'),
  loadWarnings: $('[data-testid="load-warnings"]'),
  noWorkers: /** @type {HTMLElement|null} */ (document.querySelector('[data-testid="no-workers-note"]')),
  root: /** @type {HTMLElement|null} */ (document.querySelector("[data-view]")),
  about: /** @type {HTMLElement|null} */ (document.querySelector('[data-testid="about"]')),
};

const state = {
  /** the view this page shows */
  view: document.body.dataset.currentView || "overview",
  /** @type {RunInfo[]} */ runs: [],
  /** discovery error of the logdir as a whole */
  /** @type {string|null} */ logdirError: null,
  /** what discovery noticed: links followed out of the logdir or not followed, a scan cut short */
  /** @type {string[]} */ logdirNotes: [],
  /** whether /api/runs answered at least once */
  runsKnown: false,
  /** @type {string|null} the last failure to reach /api/runs */
  pollError: null,
  /** @type {ViewInfo[]} */ views: [],
  /** the query state: run, worker, span and view-specific parameters */
  /** @type {Record<string, string>} */ query: readQuery(),
  /** what is mounted (or shown instead), to remount only on change */
  /** @type {string|null} */ mountedKey: null,
  /** @type {AbortController|null} */ controller: null,
  /** @type {number|undefined} */ pollTimer: undefined,
};

// ---------------------------------------------------------------- selection

/** @param {string|undefined} name @returns {RunInfo|undefined} */
function findRun(name) {
  return state.runs.find((r) => r.name === name);
}

/**
 * Whether a run has no traces, only files that views of the run read (memory snapshots): worker
 * and span do not apply to it.
 * @param {RunInfo|undefined} run
 */
function withoutWorkers(run) {
  return Boolean(run) && run.status !== "loading" && run.workers.length === 0 && run.views.length > 0;
}

/**
 * Whether a view shows every worker of a span at once (/api/views' `all_workers`): it takes no worker.
 * @param {string} view
 */
function allWorkers(view) {
  const info = state.views.find((v) => v.name === view);
  return Boolean(info && info.all_workers);
}

/**
 * The query as the address bar shows it: a view of every worker keeps run and span but no worker
 * (the shell still keeps one in `state.query`, for the span list and the way back to other views).
 * @param {Record<string, string>} query
 */
function urlQuery(query) {
  if (!allWorkers(state.view)) return query;
  const { worker, ...rest } = query;
  return rest;
}

/**
 * The address of a view for a run, carrying the parameters that view reads beside the selection
 * (the Memory Snapshot view's `file`).
 * @param {string} view
 * @param {RunInfo|undefined} run
 * @param {Record<string, string>} query
 */
function hrefFor(view, run, query) {
  const { run: runName, span } = query;
  const worker = allWorkers(view) ? undefined : query.worker;
  if (view !== "snapshot") return viewHref(view, { run: runName, worker, span });
  const files = (run && run.snapshots) || [];
  const file = query.file && files.includes(query.file) ? query.file : files[0];
  return viewHref(view, { run: runName, worker, span, file });
}

/** @param {RunInfo|undefined} run @param {string|undefined} worker @param {string|undefined} span */
function findFile(run, worker, span) {
  return run ? run.files.find((f) => f.worker === worker && f.span === span) : undefined;
}

/**
 * Fills what the URL leaves out: the first ready run, its first worker and span. Names the URL
 * gives are kept even when unknown, so that the view shows the server's "not found" message.
 * @param {Record<string, string>} query
 * @returns {Record<string, string>}
 */
function withDefaults(query) {
  const out = { ...query };
  if (!out.run) {
    const run = state.runs.find((r) => r.status === "ready") || state.runs.find((r) => r.status === "loading") || state.runs[0];
    if (!run) return out;
    out.run = run.name;
  }
  const run = findRun(out.run);
  if (!run) return out;
  if (!out.worker && run.workers.length) out.worker = run.workers[0];
  const spans = run.spans[out.worker] || [];
  if (!out.span && spans.length) out.span = spans[0];
  return out;
}

/**
 * The selection after the user picks a run or worker: keep the worker and span where the new
 * run has them, else take its first ones.
 * @param {string} runName
 * @param {string|undefined} worker
 * @param {string|undefined} span
 */
function reselect(runName, worker, span) {
  const run = findRun(runName);
  if (!run) return { run: runName, worker, span };
  const w = worker && run.workers.includes(worker) ? worker : run.workers[0];
  const spans = run.spans[w] || [];
  const s = span && spans.includes(span) ? span : spans[0];
  return { run: runName, worker: w, span: s };
}

/** @param {{run?: string, worker?: string, span?: string}} selection */
function select(selection) {
  // Re-read the URL: the view may have kept its own parameters there (e.g. a table's sort).
  // The worker stays when the URL leaves it out (a view of every worker).
  state.query = { worker: state.query.worker, ...readQuery(), ...selection };
  const run = findRun(state.query.run);
  if (state.query.file && run && !(run.snapshots || []).includes(state.query.file)) {
    // A snapshot file (and the history point picked in it) belongs to the run it was picked in.
    delete state.query.file;
    delete state.query.at;
  }
  writeQuery(urlQuery(state.query), { push: true });
  renderPanel();
  syncView();
}

// ---------------------------------------------------------------- left panel

/**
 * Replaces a select's options only when they changed (rebuilding would close an open dropdown).
 * @param {HTMLSelectElement} select
 * @param {{value: string, label: string, disabled?: boolean}[]} options
 * @param {string|undefined} value
 */
function setOptions(select, options, value) {
  const signature = JSON.stringify(options);
  if (select.dataset.signature !== signature) {
    select.replaceChildren(...options.map((o) => {
      const option = el("option", { text: o.label, attrs: { value: o.value } });
      if (o.disabled) option.setAttribute("disabled", "");
      return option;
    }));
    select.dataset.signature = signature;
  }
  select.disabled = options.length === 0;
  if (value !== undefined && select.value !== value) select.value = value;
}

/** @param {"loading"|"ready"|"error"} status @param {boolean} [partial] */
function statusSuffix(status, partial = false) {
  if (status === "loading") return " (loading)";
  if (status === "error") return " (error)";
  return partial ? " (some files failed)" : "";
}

function renderPanel() {
  const { run: runName, worker, span } = state.query;
  const run = findRun(runName);

  const runOptions = state.runs.map((r) => ({ value: r.name, label: r.name + statusSuffix(r.status, Boolean(r.error)) }));
  if (runName && !run) runOptions.unshift({ value: runName, label: `${runName} (not found)`, disabled: true });
  if (!runOptions.length && state.runsKnown) runOptions.push({ value: "", label: "No runs yet" });
  setOptions(ui.run, runOptions, runName);
  if (!state.runs.length) ui.run.disabled = true;

  const workerOptions = run ? run.workers.map((w) => {
    const files = run.files.filter((f) => f.worker === w);
    const status = files.some((f) => f.status === "loading") ? "loading"
      : files.length && files.every((f) => f.status === "error") ? "error" : "ready";
    return { value: w, label: w + statusSuffix(status) };
  }) : [];
  if (worker && run && !run.workers.includes(worker)) workerOptions.unshift({ value: worker, label: `${worker} (not found)`, disabled: true });
  const everyWorker = allWorkers(state.view);
  setOptions(ui.worker, everyWorker && run ? [{ value: "", label: "All workers" }] : workerOptions, everyWorker && run ? "" : worker);
  if (everyWorker) ui.worker.disabled = true;
  if (everyWorker) ui.worker.title = "This view shows every worker";
  else ui.worker.removeAttribute("title");

  const spans = run ? run.spans[worker] || [] : [];
  const spanOptions = spans.map((s) => {
    const file = findFile(run, worker, s);
    return { value: s, label: s + (file ? statusSuffix(file.status) : "") };
  });
  if (span && run && run.workers.includes(worker) && !spans.includes(span)) spanOptions.unshift({ value: span, label: `${span} (not found)`, disabled: true });
  setOptions(ui.span, spanOptions, span);
  // A run without traces: no worker or span to pick; say why instead of two empty selects.
  const noWorkers = withoutWorkers(run);
  for (const select of [ui.worker, ui.span]) {
    const field = select.closest(".field");
    if (field instanceof HTMLElement) field.hidden = noWorkers;
  }
  if (ui.noWorkers) ui.noWorkers.hidden = !noWorkers;

  // While a run loads, only views of its other files (snapshots) are known: offer them all.
  const active = run && run.status !== "loading" && run.views.length ? run.views : state.views.map((v) => v.name);
  const viewOptions = state.views.length
    ? state.views.filter((v) => active.includes(v.name) || v.name === state.view).map((v) => ({
      value: v.name, label: v.title + (active.includes(v.name) ? "" : " (not for this run)"),
    }))
    : [...ui.view.options].map((o) => ({ value: o.value, label: o.text }));
  setOptions(ui.view, viewOptions, state.view);

  renderRunStatus();
}

/** Progress bars for loading runs, messages for failed ones: the left panel's status list. */
function renderRunStatus() {
  const items = [];
  if (state.pollError) items.push(el("div", { class: "status-item status-error", testid: "poll-error" }, [state.pollError]));
  if (state.logdirError) items.push(el("div", { class: "status-item status-error" }, [`Logdir: ${state.logdirError}`]));
  for (const note of state.logdirNotes) {
    items.push(el("div", { class: "status-item status-partial", testid: "logdir-note" }, [`Logdir: ${note}`]));
  }
  for (const run of state.runs) {
    if (run.status === "loading") {
      const bar = el("div", { class: "progress-bar" });
      bar.style.width = `${Math.round(Math.max(0, Math.min(1, run.progress)) * 100)}%`;
      items.push(el("div", { class: "status-item", testid: "run-progress", attrs: { "data-run": run.name } }, [
        el("div", { class: "status-line" }, [
          el("span", { class: "status-name", text: run.name, title: run.name }),
          el("span", { class: "status-value", text: formatRatio(run.progress, 0) }),
        ]),
        el("div", { class: "progress", attrs: { role: "progressbar", "aria-label": `Loading ${run.name}`,
          "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(Math.round(run.progress * 100)) } }, [bar]),
      ]));
    }
    if (run.error) {
      items.push(el("div", { class: `status-item ${run.status === "error" ? "status-error" : "status-partial"}`,
        testid: "run-error", attrs: { "data-run": run.name } }, [
        el("div", { class: "status-name", text: run.name, title: run.name }),
        el("div", { class: "status-message", text: run.error }),
      ]));
    }
  }
  if (!items.length && state.runsKnown) {
    const n = state.runs.length;
    items.push(el("div", { class: "status-item status-quiet", text: n ? `${n} run${n === 1 ? "" : "s"}, all loaded` : "" }));
  }
  ui.runStatus.replaceChildren(...items);
}

// ---------------------------------------------------------------- main area

/** @param {string} text @param {number|null} [progress] 0..1, a bar when given */
function showStatus(text, progress = null) {
  const children = [el("span", { class: "status-text", text })];
  if (progress !== null) {
    const bar = el("div", { class: "progress-bar" });
    bar.style.width = `${Math.round(progress * 100)}%`;
    children.push(el("div", { class: "progress progress-wide" }, [bar]));
  }
  ui.status.replaceChildren(...children);
  ui.status.hidden = false;
}

function hideStatus() {
  ui.status.hidden = true;
  clear(ui.status);
}

const ERROR_TITLES = {
  not_found: "Not found",
  bad_parameter: "Bad parameter",
  loading: "Still loading",
  trace_error: "This trace could not be read",
  network: "The server cannot be reached",
  internal: "Server error",
};

/** @param {unknown} err */
function showError(err) {
  const code = err instanceof ApiError ? err.code : "client";
  const title = ERROR_TITLES[code] || (err instanceof ApiError ? "Request failed" : "This view failed to draw");
  const message = err instanceof Error ? err.message : String(err);
  ui.error.replaceChildren(
    el("div", { class: "error-title", text: title }),
    el("div", { class: "error-message", testid: "error-message", text: message }),
  );
  ui.error.dataset.code = code;
  ui.error.hidden = false;
}

function hideError() {
  ui.error.hidden = true;
  clear(ui.error);
}

/** Parsing warnings of the selected trace file (recovered data, skipped events). */
function renderLoadWarnings() {
  const { run: runName, worker, span } = state.query;
  const file = findFile(findRun(runName), worker, span);
  const warnings = file ? file.warnings : [];
  if (!warnings.length) {
    ui.loadWarnings.hidden = true;
    clear(ui.loadWarnings);
    return;
  }
  ui.loadWarnings.replaceChildren(
    el("div", { class: "note-title", text: "While reading this trace" }),
    el("ul", {}, warnings.map((w) => el("li", { text: w }))),
  );
  ui.loadWarnings.hidden = false;
}

function renderAbout() {
  if (!ui.about) return;
  const view = state.views.find((v) => v.name === state.view);
  const body = ui.about.querySelector(".about-body");
  if (!view || !view.about || !body) {
    ui.about.hidden = true;
    return;
  }
  body.replaceChildren(renderNote(view.about));
  ui.about.hidden = false;
}

function setTitle() {
  const view = state.views.find((v) => v.name === state.view);
  const parts = [view ? view.title : state.view, state.query.run, "profboard"].filter(Boolean);
  document.title = parts.join(" · ");
}

/**
 * Mounts the view for the current selection, or shows why it cannot yet (loading, no runs).
 * Does nothing when neither the query nor the selected file's status changed.
 * @param {{force?: boolean}} [options]
 */
function syncView({ force = false } = {}) {
  if (!state.runsKnown) return;
  const params = withDefaults(state.query);
  const run = findRun(params.run);
  if (withoutWorkers(run) && !run.views.includes(state.view)) {
    // A run of snapshots only has none of the trace views: open the first view it has.
    window.location.replace(hrefFor(run.views[0], run, { run: run.name, file: params.file }));
    return;
  }
  const file = findFile(run, params.worker, params.span);
  const fileStatus = !params.run ? "none" : !run ? "missing" : file ? file.status : "missing";
  const key = JSON.stringify([state.view, params, fileStatus]);
  renderLoadWarnings();
  setTitle();
  if (key === state.mountedKey && !force) {
    if (fileStatus === "loading") showLoading(params, file);
    return;
  }
  state.mountedKey = key;
  if (state.controller) state.controller.abort();
  state.controller = null;

  if (fileStatus === "none") {
    hideError();
    if (ui.root) ui.root.hidden = true;
    showStatus(state.logdirError
      ? "The logdir cannot be read (see the left panel)."
      : "No runs found yet. profboard looks for folders holding *.pt.trace.json or *.pt.trace.json.gz files; new runs appear here by themselves.");
    return;
  }
  if (fileStatus === "loading") {
    hideError();
    if (ui.root) ui.root.hidden = true;
    showLoading(params, file);
    return;
  }
  mountView(params);
}

/** @param {Record<string, string>} params @param {FileInfo|undefined} file */
function showLoading(params, file) {
  const progress = file ? Math.max(0, Math.min(1, file.progress)) : 0;
  showStatus(`Loading ${params.run} (${params.worker}, span ${params.span})… ${formatRatio(progress, 0)}`, progress);
}

/** @param {Record<string, string>} params */
async function mountView(params) {
  const controller = new AbortController();
  state.controller = controller;
  const root = ui.root;
  if (!root) {
    // The not-found page explains itself; anywhere else a missing container is a bug.
    if (!document.querySelector('[data-testid="page-not-found"]')) {
      showError(new Error(`The page has no container for the ${state.view} view.`));
    }
    return;
  }
  hideError();
  root.hidden = false;
  root.setAttribute("aria-busy", "true");
  const busyTimer = window.setTimeout(() => {
    if (state.controller === controller) showStatus(`Loading ${state.view}…`);
  }, BUSY_DELAY_MS);
  try {
    const module = await import(`./${state.view}.js`);
    if (controller.signal.aborted) return;
    await module.mount(root, params, { signal: controller.signal });
    if (controller.signal.aborted) return;
    hideStatus();
  } catch (err) {
    if (controller.signal.aborted || isAbort(err)) return;
    hideStatus();
    if (err instanceof ApiError && err.code === "loading") {
      // Raced with the loader: the next poll of /api/runs mounts again.
      state.mountedKey = null;
    } else if (!(err instanceof ApiError)) {
      console.error(err); // a bug in the view, not an API answer
    }
    root.hidden = true;
    showError(err);
  } finally {
    window.clearTimeout(busyTimer);
    if (state.controller === controller) root.removeAttribute("aria-busy");
  }
}

// ---------------------------------------------------------------- polling

async function refreshRuns() {
  window.clearTimeout(state.pollTimer);
  let loading = false;
  try {
    const body = await getJSON("/api/runs", {}, AbortSignal.timeout(15000));
    state.runs = Array.isArray(body.runs) ? body.runs : [];
    state.logdirError = body.error || null;
    state.logdirNotes = Array.isArray(body.notes) ? body.notes : [];
    // Back in contact after an outage: a view that failed for it is mounted again.
    const recovered = state.pollError !== null && ui.error.dataset.code === "network";
    state.pollError = null;
    const first = !state.runsKnown;
    state.runsKnown = true;
    loading = state.runs.some((r) => r.status === "loading");
    if (first) {
      const filled = withDefaults(state.query);
      if (JSON.stringify(filled) !== JSON.stringify(state.query) || allWorkers(state.view)) {
        state.query = filled;
        writeQuery(urlQuery(state.query));
      }
    } else if (!state.query.run && state.runs.length) {
      // The logdir was empty at first: select the first run that appeared.
      state.query = withDefaults(state.query);
      writeQuery(urlQuery(state.query));
    }
    renderPanel();
    syncView({ force: recovered });
  } catch (err) {
    state.pollError = err instanceof ApiError ? err.message : "Lost contact with the profboard server; retrying…";
    renderRunStatus();
    if (!state.runsKnown) showError(err instanceof ApiError ? err : new ApiError(0, "network", state.pollError));
  }
  state.pollTimer = window.setTimeout(refreshRuns, loading ? POLL_LOADING_MS : POLL_IDLE_MS);
}

async function loadViews() {
  try {
    const body = await getJSON("/api/views");
    state.views = Array.isArray(body.views) ? body.views : [];
  } catch {
    state.views = []; // the template's own options stay; the note stays hidden
  }
  renderAbout();
  if (state.runsKnown && allWorkers(state.view)) writeQuery(urlQuery(state.query));
  if (state.runsKnown) renderPanel();
  setTitle();
}

// ---------------------------------------------------------------- events

ui.run.addEventListener("change", () => {
  select(reselect(ui.run.value, state.query.worker, state.query.span));
});

ui.worker.addEventListener("change", () => {
  select(reselect(state.query.run, ui.worker.value, state.query.span));
});

ui.span.addEventListener("change", () => {
  select({ span: ui.span.value });
});

ui.view.addEventListener("change", () => {
  window.location.assign(hrefFor(ui.view.value, findRun(state.query.run), state.query));
});

window.addEventListener("popstate", () => {
  state.query = withDefaults(readQuery());
  renderPanel();
  syncView();
});

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") refreshRuns();
});

if (ui.about) ui.about.hidden = true;
loadViews();
refreshRuns();
