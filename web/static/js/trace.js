/**
 * The Trace view: every event of one worker's span on a canvas timeline, lanes per thread and
 * CUDA stream, with zoom and pan, search, event details and their links, flow arrows and counter
 * tracks. The server does the level of detail: the view asks `/api/trace/window` for what is on
 * screen at its pixel width (debounced, the previous request aborted) and draws the older data
 * scaled meanwhile.
 *
 * Layers: fetch (`fetch*`, here), shape (pure functions, tested on their own: lib/viewport.js for
 * the window maths, lib/lanes.js for layout, colours and hit testing, lib/gestures.js for what
 * keys and the wheel do, lib/counters.js, lib/eventpanel.js, lib/tracesearch.js) and draw (`mount`
 * and the timeline controller here; the canvas in lib/timeline.js). View state lives in the URL: `start_us`, `end_us` (absolute trace microseconds),
 * `select` (event id), `q` and `regex`, `flows` (the flow types drawn: absent for all, "0" for
 * none), `counters=1`, `stacks=all` (every Python frame row), `collapse` (folded lane ids, "none"),
 * `critical` (the step whose critical path is drawn, lib/critpath.js; empty for the first).
 *
 * The first screen shows the GPU streams and the main thread's operators: a lane's Python frames
 * are folded to lib/lanes.js's STACK_ROWS rows until `stacks=all`, and without `collapse` in the
 * URL the host lanes with fewest events are folded until the GPU streams fit (never the busiest).
 *
 * A run of several workers can show several ranks' lanes on one clock (`ranks`: "1,0", or "auto"
 * for the straggler and the fastest of /api/distributed's `clock`): the timeline then asks each
 * rank's worker for its part and lib/rankview.js puts the parts together (times on the reference
 * rank's clock, ids kept apart per rank); picking a collective marks it on every shown rank
 * (/api/trace/collective). Counters are one worker's, so they are off there.
 * @module trace
 */

import { ApiError, apiUrl, deferred, getJSON, isAbort } from "./lib/api.js";
import { byTestId, clear, el, showWarnings } from "./lib/dom.js";
import { formatOffset, formatUs } from "./lib/format.js";
import { TRACKS_SHOWN, TRACK_PX, counterTracks } from "./lib/counters.js";
import { drawDetails } from "./lib/eventpanel.js";
import { drawBreakdown, drawCriticalPath, pathMarks } from "./lib/critpath.js";
import {
  STACK_ROWS, firstScreenFolds, flowTypesParam, hitTest, laneLayout, linkDrawn, parseCollapsed, parseFlowTypes,
  placeLink, placeOf, prepareWindow, rowTop, tooltipText,
} from "./lib/lanes.js";
import {
  drawFlowToggles, drawLaneLabels, drawLanes, drawLegend, drawOverlay, drawRuler, fitCanvas,
} from "./lib/timeline.js";
import {
  clampWindow, covers, parseWindow, requestWindow, sameWindow, timeParam, windowAround,
} from "./lib/viewport.js";
import { navigate, updateQuery } from "./lib/url.js";
import { wireGestures } from "./lib/gestures.js";
import { searchBox } from "./lib/tracesearch.js";
import {
  collectiveIds, hostLanes, isCollectiveEvent, localId, mergeLanes, mergeSearches, mergeWindows, ownWindow,
  parseRanks, pickRanks, placeEvent, rankNote, shownRanks,
} from "./lib/rankview.js";

/**
 * @typedef {import("./lib/viewport.js").TimeWindow} TimeWindow
 * @typedef {import("./lib/lanes.js").Lane} Lane
 * @typedef {import("./lib/lanes.js").Step} Step
 * @typedef {import("./lib/lanes.js").Placed} Placed
 * @typedef {import("./lib/lanes.js").Hit} Hit
 * @typedef {import("./lib/counters.js").Series} Series
 * @typedef {{start_us: number, end_us: number, lanes: Lane[], steps: Step[], kinds: string[], flow_types?: string[],
 *            warnings: string[]}} Lanes
 * @typedef {import("./lib/eventpanel.js").Link} Link
 * @typedef {import("./lib/eventpanel.js").EventDetail} EventDetail
 * @typedef {{id: number, name: string, lane: number, start_us: number, dur_us: number}} Match
 * @typedef {{q: string, total: number, matches: Match[], warnings: string[]}} SearchResult
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

/** Wait this long after the last viewport change before asking for its data. */
const FETCH_DELAY_MS = 80;
/** Show "Loading…" in the corner only for slower answers. */
const BUSY_DELAY_MS = 300;

// ---------------------------------------------------------------- fetch

/** @param {Selection} sel @param {AbortSignal} [signal] @returns {Promise<Lanes>} */
export function fetchLanes({ run, worker, span }, signal) {
  return getJSON("/api/trace/lanes", { run, worker, span }, signal);
}

/**
 * @param {Selection} sel @param {TimeWindow & {width_px: number, flows?: string}} req `flows`: the
 * flow types to list, comma-separated or "none" (absent: all) @param {AbortSignal} [signal]
 */
export function fetchWindow({ run, worker, span }, req, signal) {
  return getJSON("/api/trace/window", {
    run, worker, span, start_us: timeParam(req.start_us), end_us: timeParam(req.end_us), width_px: req.width_px,
    flows: req.flows,
  }, signal);
}

/** @param {Selection} sel @param {TimeWindow & {width_px: number}} req @param {AbortSignal} [signal] @returns {Promise<{series: Series[], warnings: string[]}>} */
export function fetchCounters({ run, worker, span }, req, signal) {
  return getJSON("/api/trace/counters", {
    run, worker, span, start_us: timeParam(req.start_us), end_us: timeParam(req.end_us), width_px: req.width_px,
  }, signal);
}

/** @param {Selection} sel @param {number} id @param {AbortSignal} [signal] @returns {Promise<EventDetail>} */
export function fetchEvent({ run, worker, span }, id, signal) {
  return getJSON("/api/trace/event", { run, worker, span, id }, signal);
}

/** @param {Selection} sel @param {string} q @param {boolean} regex @param {AbortSignal} [signal] @returns {Promise<SearchResult>} */
export function fetchSearch({ run, worker, span }, q, regex, signal) {
  return getJSON("/api/trace/search", { run, worker, span, q, regex: regex ? 1 : 0 }, signal);
}

/**
 * The same collective on every shown worker, from one worker's event.
 * @param {Selection} sel @param {number} id @param {string[]} workers @param {AbortSignal} [signal]
 * @returns {Promise<{name: string, group: string, matched: boolean, calls: {worker: string, id: number|null}[]}>}
 */
export function fetchCollective({ run, worker, span }, id, workers, signal) {
  return getJSON("/api/trace/collective", { run, worker, span, id, workers: workers.join(",") }, signal);
}

/**
 * A step's critical path (the first step when `step` is empty).
 * @param {Selection} sel @param {string} step @param {AbortSignal} [signal]
 * @returns {Promise<import("./lib/critpath.js").CriticalPath>}
 */
export function fetchCriticalPath({ run, worker, span }, step, signal) {
  return getJSON("/api/trace/critical_path", { run, worker, span, step: step || undefined }, signal);
}

/** The original trace file of a selection, as a download link. @param {Selection} sel */
export function rawHref({ run, worker, span }) {
  return apiUrl("/api/trace/raw", { run, worker, span });
}

// ---------------------------------------------------------------- sources

/**
 * What the timeline asks for: of one worker, or of several ranks' workers put together.
 * @typedef {{
 *   window: (req: TimeWindow & {width_px: number}, signal: AbortSignal) => Promise<any>,
 *   event: (id: number, signal: AbortSignal) => Promise<EventDetail>,
 *   search: (q: string, regex: boolean, signal: AbortSignal) => Promise<SearchResult>,
 *   counters: ((req: TimeWindow & {width_px: number}, signal: AbortSignal) => Promise<{series: Series[], warnings: string[]}>)|null,
 *   collective: ((id: number, signal: AbortSignal) => Promise<number[]>)|null,
 *   criticalPath: ((step: string, signal: AbortSignal) => Promise<import("./lib/critpath.js").CriticalPath>)|null,
 * }} Source
 */

/** @param {Selection} sel @returns {Source} */
function workerSource(sel) {
  return {
    window: (req, signal) => fetchWindow(sel, req, signal),
    event: (id, signal) => fetchEvent(sel, id, signal),
    search: (q, regex, signal) => fetchSearch(sel, q, regex, signal),
    counters: (req, signal) => fetchCounters(sel, req, signal),
    collective: null,
    criticalPath: (step, signal) => fetchCriticalPath(sel, step, signal),
  };
}

/**
 * Several ranks (lib/rankview.js): each part asked of its rank's worker, on its own clock.
 * @param {Selection} sel @param {import("./lib/rankview.js").Shown[]} shown @returns {Source}
 */
function ranksSource(sel, shown) {
  const of = (/** @type {number} */ k) => ({ ...sel, worker: shown[k].worker });
  const workers = shown.map((s) => s.worker);
  return {
    window: async (req, signal) => mergeWindows(await Promise.all(shown.map(async (s, k) => (
      { shown: s, body: await fetchWindow(of(k), ownWindow(req, s.offset_us), signal) }))), req),
    event: async (id, signal) => {
      const own = localId(id);
      return placeEvent(await fetchEvent(of(own.k), own.id, signal), own.k, shown[own.k].offset_us);
    },
    search: async (q, regex, signal) => mergeSearches(
      await Promise.all(shown.map((_, k) => fetchSearch(of(k), q, regex, signal))), shown),
    counters: null,
    collective: async (id, signal) => {
      const own = localId(id);
      return collectiveIds(await fetchCollective(of(own.k), own.id, workers, signal), shown);
    },
    criticalPath: null,  // one worker's steps: off while several ranks are shown
  };
}

/**
 * The ranks control of a run with several workers: a toggle, and which ranks (Enter applies).
 * Shown ranks change the lanes and their ids: the selection and folds are let go.
 * @param {any} ui @param {boolean} several whether the run has several workers @param {string[]} picked ranks shown now
 */
function ranksControl(ui, several, picked) {
  ui.ranksControl.hidden = !several;
  ui.ranksToggle.checked = picked.length > 0;
  ui.ranksInput.hidden = !picked.length;
  ui.ranksNote.hidden = !picked.length;
  ui.ranksInput.value = picked.join(",");
  ui.ranksToggle.onchange = () => navigate({ ranks: ui.ranksToggle.checked ? "auto" : null, select: null, collapse: null,
    start_us: null, end_us: null });
  ui.ranksInput.onchange = () => navigate({ ranks: ui.ranksInput.value.trim() || "auto", select: null, collapse: null });
}

/**
 * The lanes of the picked ranks on one clock, and the source that serves them.
 * @param {Selection} sel @param {string|undefined} asked the `ranks` parameter @param {AbortSignal} [signal]
 */
async function ranksLanes(sel, asked, signal) {
  const dist = await getJSON("/api/distributed", { run: sel.run, span: sel.span, top: 1 }, signal);
  const ranks = pickRanks(parseRanks(asked), dist.ranks, dist.clock);
  const shown = shownRanks(ranks, dist.ranks, dist.clock);
  const parts = await Promise.all(shown.map(async (s) => ({ shown: s, info: await fetchLanes({ ...sel, worker: s.worker }, signal) })));
  const note = shown.map((s) => rankNote(s, dist.clock.reference)).join(" · ");
  return { ranks, note, info: mergeLanes(parts, dist.clock.reference), source: ranksSource(sel, shown) };
}

// ---------------------------------------------------------------- draw

/**
 * @param {HTMLElement} node
 * @param {string} text
 * @param {"info"|"error"} [tone]
 */
function showMessage(node, text, tone = "info") {
  node.textContent = text;
  node.dataset.tone = tone;
  node.hidden = !text;
}

/**
 * Fetches the lanes and the first window of one worker's span and draws the timeline; wires
 * zoom, pan, selection, search, flows and counters.
 * @param {HTMLElement} root the `[data-view="trace"]` section
 * @param {Selection & {start_us?: string, end_us?: string, select?: string, q?: string, regex?: string,
 *                      flows?: string, counters?: string, collapse?: string, ranks?: string, stacks?: string,
 *                      critical?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const sel = { run: params.run, worker: params.worker, span: params.span };
  const part = (/** @type {string} */ id) => byTestId(root, id);
  const ui = {
    timeline: part("timeline"), range: part("trace-range"), ruler: /** @type {HTMLCanvasElement} */ (part("trace-ruler")),
    countersBox: part("counter-tracks"), counterLabels: part("counter-labels"),
    counterCanvas: /** @type {HTMLCanvasElement} */ (part("counter-canvas")),
    body: part("timeline-body"), labels: part("lane-labels"), stage: part("trace-stage"),
    canvas: /** @type {HTMLCanvasElement} */ (part("trace-canvas")), overlay: /** @type {HTMLCanvasElement} */ (part("trace-overlay")),
    message: part("timeline-message"), tooltip: part("trace-tooltip"), legend: part("trace-legend"),
    search: /** @type {HTMLInputElement} */ (part("trace-search")), regex: /** @type {HTMLInputElement} */ (part("trace-regex")),
    prev: part("search-prev"), next: part("search-next"), count: part("search-count"),
    flowTypes: part("flow-types"), counters: /** @type {HTMLInputElement} */ (part("toggle-counters")),
    stacksControl: part("stacks-control"), stacks: /** @type {HTMLInputElement} */ (part("toggle-stacks")),
    reset: part("reset-zoom"), download: /** @type {HTMLAnchorElement} */ (part("download-trace")),
    details: { panel: part("event-details"), kind: part("event-kind"), title: part("event-title"), body: part("event-body") },
    detailsZoom: part("details-zoom"), detailsClose: part("details-close"),
    ranksControl: part("trace-ranks-control"), ranksToggle: /** @type {HTMLInputElement} */ (part("toggle-ranks")),
    ranksInput: /** @type {HTMLInputElement} */ (part("trace-ranks")), ranksNote: part("trace-ranks-note"),
    critical: /** @type {HTMLInputElement} */ (part("toggle-critical-path")), criticalPanel: part("critical-path"),
  };
  root.toggleAttribute("data-ranks", Boolean(params.ranks));
  ui.ranksNote.textContent = "";
  ui.download.href = rawHref(sel);
  ui.search.value = params.q || "";
  ui.regex.checked = params.regex === "1";
  ui.stacks.checked = params.stacks === "all";
  ui.counters.checked = params.counters === "1";
  ui.criticalPanel.hidden = true;
  ui.details.panel.hidden = true;
  for (const key of ["windows", "drawnBoxes", "drawnMerged", "start", "end"]) delete ui.canvas.dataset[key];
  ui.tooltip.hidden = true;
  showMessage(ui.message, "");
  clear(ui.labels);
  clear(ui.count);

  const several = params.ranks ? null : runHasWorkers(sel.run, signal);
  let info;
  let source = workerSource(sel);
  if (params.ranks) {
    const merged = await ranksLanes(sel, params.ranks, signal);
    ({ info, source } = merged);
    updateQuery({ ranks: merged.ranks.join(",") });
    ranksControl(ui, true, merged.ranks.map(String));
    ui.ranksNote.textContent = merged.note;
    if (params.collapse === undefined) params = { ...params, collapse: hostLanes(info.lanes).join(",") };
  } else {
    info = await fetchLanes(sel, signal);
    ranksControl(ui, false, []);
    several?.then((yes) => { if (!(signal && signal.aborted)) ranksControl(ui, yes, []); });
  }
  // Counters and the critical path are one worker's: off while several ranks are shown.
  ui.counters.disabled = !source.counters;
  if (!source.counters) ui.counters.checked = false;
  ui.critical.disabled = !source.criticalPath;
  ui.critical.checked = Boolean(source.criticalPath) && params.critical !== undefined;
  if (signal && signal.aborted) return;
  showWarnings(part("warnings"), info.warnings || []);
  const lanes = info.lanes || [];
  const bounds = { start_us: info.start_us, end_us: info.end_us };
  clear(ui.legend);
  delete ui.legend.dataset.signature;
  if (!lanes.length || !(bounds.end_us >= bounds.start_us)) {
    ui.timeline.dataset.state = "empty";
    showMessage(ui.message, "This trace has no events to draw on a timeline.");
    return;
  }
  delete ui.timeline.dataset.state;
  if (!(bounds.end_us > bounds.start_us)) bounds.end_us = bounds.start_us + 1; // a single instant
  const controller = timeline({ root, ui, source, info, lanes, bounds, params, signal });
  await controller.ready;
}

/**
 * The timeline's state and behaviour for one mount.
 * @param {object} options
 * @param {HTMLElement} options.root
 * @param {any} options.ui
 * @param {Source} options.source
 * @param {Lanes} options.info
 * @param {Lane[]} options.lanes
 * @param {TimeWindow} options.bounds
 * @param {Record<string, string|undefined>} options.params
 * @param {AbortSignal|undefined} options.signal
 */
function timeline({ ui, source, info, lanes, bounds, params, signal }) {
  const origin = bounds.start_us;
  const kinds = info.kinds || [];
  const steps = (info.steps || []).filter((s) => s.end_us > s.start_us);
  const flowTypes = info.flow_types || [];
  let flowsDrawn = parseFlowTypes(params.flows, flowTypes);
  ui.stacksControl.hidden = !lanes.some((l) => (l.stack_rows || 0) > STACK_ROWS);
  const collapsed = parseCollapsed(params.collapse);
  const arrange = () => laneLayout(lanes, { collapsed, stackRows: ui.stacks.checked ? Infinity : STACK_ROWS });
  let layout = arrange();
  if (params.collapse === undefined) {
    // Counters asked for are drawn above the lanes once loaded: their room is kept for them.
    const room = (ui.body.clientHeight || 400) - (ui.counters.checked ? TRACKS_SHOWN * TRACK_PX : 0);
    for (const id of firstScreenFolds(layout, room, steps)) collapsed.add(id);
    layout = arrange();
  }
  const laneById = new Map(lanes.map((l) => [l.id, l]));
  const listen = { signal };
  const relayout = () => {
    layout = arrange();
    drawLaneLabels(ui.labels, layout, onFold);
    measure();
    requestDraw();
  };
  /** @param {number[]} ids @param {boolean} fold */
  const onFold = (ids, fold) => {
    for (const id of ids) {
      if (fold) collapsed.add(id);
      else collapsed.delete(id);
    }
    // "none": nothing folded, where no `collapse` would fold lanes to fit the first screen.
    updateQuery({ collapse: [...collapsed].sort((a, b) => a - b).join(",") || "none" });
    relayout();
  };
  drawLaneLabels(ui.labels, layout, onFold);

  const fromUrl = parseWindow(params.start_us, params.end_us, bounds);
  // A window outside this trace came with another trace's selection: its event ids are not ours.
  const foreign = Boolean(params.start_us && params.end_us && !fromUrl);
  if (foreign) updateQuery({ start_us: null, end_us: null, select: null });
  const st = {
    view: fromUrl || { ...bounds },
    size: { width: 0, height: 0 },
    /** @type {import("./lib/lanes.js").WindowData|null} */ data: null,
    /** @type {(TimeWindow & {width_px: number})|null} */ have: null,
    /** @type {Placed|null} */ selected: null,
    /** @type {EventDetail|null} */ detail: null,
    /** @type {Placed|null} */ hover: null,
    /** @type {[number, number]|null} */ range: null,
    /** @type {Set<number>} the selected collective's events on every shown rank */ marked: new Set(),
    /** @type {import("./lib/critpath.js").CriticalPath|null} */ path: null,
  };
  /** @type {Record<string, AbortController|null>} */
  const inflight = { window: null, event: null, collective: null, path: null };
  const timers = { busy: 0 };
  const later = deferred();
  let frame = 0;
  const dirty = { all: false, overlay: false };

  const abort = (/** @type {string} */ key) => {
    if (inflight[key]) /** @type {AbortController} */ (inflight[key]).abort();
    inflight[key] = null;
  };
  const fresh = (/** @type {string} */ key) => {
    abort(key);
    const ctl = new AbortController();
    inflight[key] = ctl;
    return ctl;
  };
  if (signal) {
    signal.addEventListener("abort", () => {
      for (const key of Object.keys(inflight)) abort(key);
      for (const t of Object.values(timers)) window.clearTimeout(t);
      later.cancel();
      window.cancelAnimationFrame(frame);
      observer.disconnect();
    });
  }

  // ------------------------------------------------------------ sizes and drawing

  function measure() {
    const plot = /** @type {HTMLElement} */ (ui.stage.parentElement);
    const width = Math.max(50, Math.floor(plot.clientWidth || 800));
    const height = Math.max(40, Math.min(ui.body.clientHeight || 400, layout.height));
    const changed = width !== st.size.width;
    st.size = { width, height };
    ui.stage.style.height = `${height}px`;
    /** @type {HTMLElement} */ (ui.labels.parentElement).style.height = `${layout.height}px`;
    return changed;
  }

  function requestDraw(all = true) {
    if (all) dirty.all = true;
    dirty.overlay = true;
    if (!frame) frame = window.requestAnimationFrame(drawFrame);
  }

  function drawFrame() {
    frame = 0;
    const t0 = performance.now();
    const { width, height } = st.size;
    const scrollTop = ui.body.scrollTop;
    if (dirty.all) {
      const { ctx, dpr } = fitCanvas(ui.canvas, width, height);
      const drawn = drawLanes(ctx, { width, height, scrollTop, dpr, layout, data: st.data, win: st.view, steps });
      ui.canvas.dataset.drawnBoxes = String(drawn.boxes);
      ui.canvas.dataset.drawnMerged = String(drawn.merged);
      drawRulerNow();
      counters.draw();
      ui.range.textContent = rangeText();
    }
    if (dirty.all || dirty.overlay) {
      const { ctx } = fitCanvas(ui.overlay, width, height);
      const flows = st.detail && st.selected ? (st.detail.links || []).filter((l) => linkDrawn(l.relation, flowsDrawn))
        .map((l) => placeLink(l, st.data)) : [];
      const arrows = st.data ? st.data.flows.arrows : [];
      const matches = st.marked.size ? new Set([...search.ids(), ...st.marked]) : search.ids();
      drawOverlay(ctx, { width, height, scrollTop, layout, data: st.data, win: st.view, selected: st.selected,
        hover: st.hover, matches, arrows, flows, range: st.range });
      ui.overlay.dataset.flows = String(flows.length);
      ui.overlay.dataset.windowFlows = String(arrows.length);
      ui.overlay.dataset.windowFlowTypes = [...new Set(arrows.map((a) => a.cat))].sort().join(",");
      if (st.path) {
        const drawn = pathMarks(st.path, layout, st.view, width, scrollTop);
        drawCriticalPath(ctx, drawn, layout.rowPx - 2);
        ui.overlay.dataset.criticalMarks = String(drawn.marks.length);
      }
    }
    dirty.all = false;
    dirty.overlay = false;
    ui.canvas.dataset.drawMs = (performance.now() - t0).toFixed(1);
    ui.canvas.dataset.start = timeParam(st.view.start_us);
    ui.canvas.dataset.end = timeParam(st.view.end_us);
  }

  function drawRulerNow() {
    const height = 40;
    const { ctx } = fitCanvas(ui.ruler, st.size.width, height);
    const named = drawRuler(ctx, { width: st.size.width, height, win: st.view, origin, steps, range: st.range });
    ui.ruler.dataset.steps = JSON.stringify(named);
  }

  function rangeText() {
    const span = st.view.end_us - st.view.start_us;
    const full = bounds.end_us - bounds.start_us;
    if (sameWindow(st.view, bounds, st.size.width)) return `Whole trace · ${formatUs(full)}`;
    return `${formatUs(span)} of ${formatUs(full)} · from ${formatOffset(st.view.start_us - origin)}`;
  }

  // ------------------------------------------------------------ viewport and data

  /** @param {TimeWindow} win */
  function setView(win) {
    const next = clampWindow(win, bounds);
    if (sameWindow(next, st.view, st.size.width)) return;
    st.view = next;
    hideTooltip();
    requestDraw();
    later.set(() => {
      const full = sameWindow(st.view, bounds, st.size.width);
      updateQuery({ start_us: full ? null : timeParam(st.view.start_us), end_us: full ? null : timeParam(st.view.end_us) });
      loadWindow();
      counters.load();
    }, FETCH_DELAY_MS);
  }

  /** @param {boolean} on whether a window request is out */
  function busy(on) {
    window.clearTimeout(timers.busy);
    if (on) {
      ui.timeline.dataset.loading = "true";
      timers.busy = window.setTimeout(() => ui.range.classList.add("is-busy"), BUSY_DELAY_MS);
    } else {
      delete ui.timeline.dataset.loading;
      ui.range.classList.remove("is-busy");
    }
  }

  async function loadWindow() {
    const width = st.size.width;
    if (covers(st.have, st.view, width, bounds)) return;
    const flows = flowTypesParam(flowsDrawn, flowTypes);
    const req = { ...requestWindow(st.view, width, bounds), flows: flows === "0" ? "none" : flows ?? undefined };
    const ctl = fresh("window");
    busy(true);
    try {
      const body = await source.window(req, ctl.signal);
      if (ctl.signal.aborted) return;
      st.data = prepareWindow(body, kinds);
      legend();
      st.have = { start_us: req.start_us, end_us: req.end_us, width_px: req.width_px };
      ui.canvas.dataset.windows = String(Number(ui.canvas.dataset.windows || 0) + 1);
      if (ui.message.dataset.tone === "error") showMessage(ui.message, "");
      requestDraw();
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      showMessage(ui.message, `This part of the timeline could not be loaded: ${errorText(err)}`, "error");
    } finally {
      if (inflight.window === ctl) {
        inflight.window = null;
        busy(false);
      }
    }
  }

  function legend() {
    if (st.data) drawLegend(ui.legend, kinds, st.data.present, st.data.mergedCount > 0, flowsDrawn.length ? st.data.flows : null);
  }

  // ------------------------------------------------------------ selection and details

  /**
   * Selects an event: outline at once when it is drawn, details from the server (beside the
   * timeline, which narrows), its row scrolled into view, optionally a window around it.
   * @param {number} id
   * @param {{zoom?: boolean}} [options]
   */
  async function select(id, { zoom = false } = {}) {
    st.selected = placeOf(st.data, id);
    st.detail = null;
    unmark();
    updateQuery({ select: String(id) });
    requestDraw(false);
    const panel = ui.details;
    panel.panel.hidden = false;
    panel.panel.setAttribute("aria-busy", "true");
    if (!st.selected) {
      panel.kind.textContent = "Event";
      panel.title.textContent = "Loading…";
    }
    const ctl = fresh("event");
    try {
      const event = await source.event(id, ctl.signal);
      if (ctl.signal.aborted) return;
      st.detail = event;
      st.selected = { id: event.id, lane: event.lane, row: event.row, start_us: event.start_us, dur_us: event.dur_us };
      drawDetails(panel, event, origin, laneById, (link) => select(link.id, { zoom: true }));
      panel.panel.dataset.eventId = String(event.id);
      if (zoom) setView(windowAround(event.start_us, event.dur_us, bounds));
      revealRow(st.selected);
      requestDraw(false);
      search.sync(id);
      if (source.collective && isCollectiveEvent(event.name)) markCollective(event.id);
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      st.selected = null;
      delete panel.panel.dataset.eventId;
      panel.kind.textContent = "Event";
      panel.title.textContent = `Event ${id}`;
      const notFound = err instanceof ApiError && err.status === 404;
      panel.body.replaceChildren(el("div", { class: "error-box", testid: "event-error" }, [
        el("div", { class: "error-title", text: notFound ? "No such event in this trace" : "The event could not be loaded" }),
        el("div", { class: "error-message", text: errorText(err) }),
      ]));
      requestDraw(false);
    } finally {
      if (inflight.event === ctl) {
        inflight.event = null;
        panel.panel.removeAttribute("aria-busy");
      }
    }
  }

  function unmark() {
    abort("collective");
    mark([]);
  }

  /** @param {number[]} ids the events marked as the selected collective */
  function mark(ids) {
    st.marked = new Set(ids);
    ui.overlay.dataset.collective = ids.join(",");
    requestDraw(false);
  }

  /** Marks the selected collective on every shown rank. @param {number} id */
  async function markCollective(id) {
    const ctl = fresh("collective");
    try {
      const ids = await /** @type {NonNullable<Source["collective"]>} */ (source.collective)(id, ctl.signal);
      if (!ctl.signal.aborted) mark(ids);
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      mark([]);   // no collective call holds it: the selection alone stays outlined
    } finally {
      if (inflight.collective === ctl) inflight.collective = null;
    }
  }

  function deselect() {
    abort("event");
    unmark();
    st.selected = null;
    st.detail = null;
    ui.details.panel.hidden = true;
  for (const key of ["windows", "drawnBoxes", "drawnMerged", "start", "end"]) delete ui.canvas.dataset[key];
    delete ui.details.panel.dataset.eventId;
    updateQuery({ select: null });
    requestDraw(false);
  }

  /**
   * Scrolls the lanes so that an event's row is in view (a third down), unless it already is.
   * @param {Placed} placed
   */
  function revealRow(placed) {
    const item = layout.lanes.get(placed.lane);
    if (!item) return;
    const y = rowTop(layout, item, placed.row);
    const top = ui.body.scrollTop;
    const height = ui.body.clientHeight;
    if (y >= top && y + layout.rowPx <= top + height) return;
    ui.body.scrollTop = Math.max(0, y - height / 3);
  }

  function frameSelection() {
    if (st.selected) setView(windowAround(st.selected.start_us, st.selected.dur_us, bounds));
  }

  ui.detailsClose.addEventListener("click", deselect, listen);
  ui.detailsZoom.addEventListener("click", frameSelection, listen);

  // ------------------------------------------------------------ search

  const search = searchBox({ input: ui.search, regex: ui.regex, prev: ui.prev, next: ui.next, count: ui.count }, {
    search: (q, regex, searchSignal) => source.search(q, regex, searchSignal),
    // Zoom at once from the match's own times; the details follow.
    go: (match) => {
      setView(windowAround(match.start_us, match.dur_us, bounds));
      select(match.id);
    },
    selected: () => (st.selected ? st.selected.id : null),
    changed: () => requestDraw(false),
    signal,
  });

  // ------------------------------------------------------------ critical path

  /**
   * Draws a step's critical path and its breakdown (the first step for ""), or none when the
   * toggle is off; `zoom` frames the step.
   * @param {string} step @param {{zoom?: boolean}} [options]
   */
  async function showPath(step, { zoom = true } = {}) {
    abort("path");
    if (!ui.critical.checked || !source.criticalPath) {
      st.path = null;
      ui.criticalPanel.hidden = true;
      delete ui.overlay.dataset.criticalPath;
      delete ui.overlay.dataset.criticalMarks;
      updateQuery({ critical: null });
      requestDraw(false);
      return;
    }
    const ctl = fresh("path");
    try {
      const path = await source.criticalPath(step, ctl.signal);
      if (ctl.signal.aborted) return;
      st.path = path;
      updateQuery({ critical: path.step });
      drawBreakdown(ui.criticalPanel, path, (picked) => showPath(picked));
      ui.criticalPanel.hidden = false;
      ui.overlay.dataset.criticalPath = path.step;
      if (zoom) {
        const pad = (path.end_us - path.start_us) * 0.02;
        setView({ start_us: path.start_us - pad, end_us: path.end_us + pad });
      }
      requestDraw(false);
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      st.path = null;
      ui.criticalPanel.replaceChildren(el("div", { class: "error-box", testid: "critical-path-error" }, [
        el("div", { class: "error-title", text: "The critical path could not be loaded" }),
        el("div", { class: "error-message", text: errorText(err) }),
      ]));
      ui.criticalPanel.hidden = false;
      requestDraw(false);
    } finally {
      if (inflight.path === ctl) inflight.path = null;
    }
  }

  ui.critical.addEventListener("change", () => showPath(""), listen);

  // ------------------------------------------------------------ toggles

  drawFlowToggles(ui.flowTypes, flowTypes, flowsDrawn, (chosen) => {
    flowsDrawn = chosen;
    updateQuery({ flows: flowTypesParam(chosen, flowTypes) });
    // The window's arrows come with its data: asked again, of the types drawn now.
    st.have = null;
    loadWindow();
    requestDraw(false);
  });
  ui.stacks.addEventListener("change", () => {
    updateQuery({ stacks: ui.stacks.checked ? "all" : null });
    relayout();
  }, listen);
  ui.counters.addEventListener("change", () => {
    updateQuery({ counters: ui.counters.checked ? "1" : null });
    counters.show(ui.counters.checked);
  }, listen);
  ui.reset.addEventListener("click", () => setView(bounds), listen);

  // ------------------------------------------------------------ pointer

  /** @param {PointerEvent|MouseEvent|WheelEvent} event */
  const plotX = (event) => event.clientX - ui.stage.getBoundingClientRect().left;
  /** @param {PointerEvent|MouseEvent} event content y of the lanes */
  const contentY = (event) => event.clientY - ui.stage.getBoundingClientRect().top + ui.body.scrollTop;

  /** @param {Hit|null} hit @returns {Placed|null} */
  function placedOfHit(hit) {
    if (!hit || !st.data) return null;
    const lane = /** @type {import("./lib/lanes.js").WindowLane} */ (st.data.lanes.get(hit.lane));
    if (hit.kind === "box") return placeOf(st.data, hit.id);
    const m = lane.merged;
    return { id: -1, lane: hit.lane, row: m.row[hit.index], start_us: m.start_us[hit.index], dur_us: m.end_us[hit.index] - m.start_us[hit.index] };
  }

  /** @param {MouseEvent} event @param {string} title @param {string[]} lines */
  function showTooltip(event, title, lines) {
    ui.tooltip.replaceChildren(
      el("div", { class: "tl-tip-title", text: title }),
      ...lines.map((line) => el("div", { class: "tl-tip-line", text: line })),
    );
    ui.tooltip.hidden = false;
    const box = ui.timeline.getBoundingClientRect();
    const tip = ui.tooltip.getBoundingClientRect();
    let x = event.clientX - box.left + 14;
    let y = event.clientY - box.top + 16;
    if (x + tip.width > box.width - 4) x = Math.max(4, event.clientX - box.left - tip.width - 14);
    if (y + tip.height > box.height - 4) y = Math.max(4, event.clientY - box.top - tip.height - 12);
    ui.tooltip.style.transform = `translate(${Math.round(x)}px, ${Math.round(y)}px)`;
  }

  function hideTooltip() {
    ui.tooltip.hidden = true;
    if (st.hover) {
      st.hover = null;
      requestDraw(false);
    }
  }

  /** @param {PointerEvent} event */
  function hoverAt(event) {
    const hit = hitTest(st.data, layout, st.view, st.size.width, plotX(event), contentY(event));
    const placed = placedOfHit(hit);
    const same = (a, b) => (a === b) || (a && b && a.id === b.id && a.start_us === b.start_us && a.lane === b.lane);
    if (!same(placed, st.hover)) {
      st.hover = placed;
      requestDraw(false);
    }
    if (hit && st.data) {
      const text = tooltipText(st.data, hit, origin);
      showTooltip(event, text.title, text.lines);
      ui.stage.style.cursor = "pointer";
    } else {
      ui.tooltip.hidden = true;
      ui.stage.style.cursor = "";
    }
  }

  /** @param {PointerEvent} event */
  function click(event) {
    const hit = hitTest(st.data, layout, st.view, st.size.width, plotX(event), contentY(event));
    if (!hit) {
      if (st.selected) deselect();
      return;
    }
    if (hit.kind === "box") {
      select(hit.id);
      return;
    }
    const placed = /** @type {Placed} */ (placedOfHit(hit));
    setView(windowAround(placed.start_us, placed.dur_us, bounds, { share: 0.9, minSpan: 0 }));
  }

  const counters = counterTracks({ box: ui.countersBox, labels: ui.counterLabels, canvas: ui.counterCanvas }, {
    load: (req, countersSignal) => (source.counters ? source.counters(req, countersSignal) : Promise.resolve({ series: [], warnings: [] })),
    view: () => st.view,
    width: () => st.size.width,
    bounds,
    origin,
    changed: () => requestDraw(),
    tooltip: showTooltip,
    untip: () => { ui.tooltip.hidden = true; },
    signal,
  });

  wireGestures({ stage: ui.stage, ruler: ui.ruler, wheelTargets: [ui.stage, ui.ruler, ui.counterCanvas], body: ui.body, signal }, {
    view: () => st.view,
    size: () => st.size,
    bounds,
    setView,
    setRange: (range) => {
      st.range = range;
      requestDraw();
    },
    click,
    dblclick: (event) => {
      const placed = placedOfHit(hitTest(st.data, layout, st.view, st.size.width, plotX(event), contentY(event)));
      if (placed) setView(windowAround(placed.start_us, placed.dur_us, bounds, { share: 0.85, minSpan: 0 }));
    },
    hover: (event) => (event ? hoverAt(event) : hideTooltip()),
    key: (key) => {
      if (key === "f" || key === "F") frameSelection();
      else if (key === "Escape" && !ui.details.panel.hidden) deselect();
      else return false;
      return true;
    },
    // Keys act only while the timeline is on screen (not behind an error message).
    active: () => ui.timeline.offsetParent !== null,
  });

  ui.body.addEventListener("scroll", () => {
    hideTooltip();
    requestDraw();
  }, { passive: true, signal });

  const observer = new ResizeObserver(() => {
    const widthChanged = measure();
    requestDraw();
    if (widthChanged) {
      later.set(() => {
        loadWindow();
        counters.load();
      }, FETCH_DELAY_MS);
    }
  });

  // ------------------------------------------------------------ first draw

  measure();
  observer.observe(ui.body);
  /** @type {Promise<unknown>[]} */ const first = [loadWindow()];
  const selectId = Number(params.select);
  if (params.select && Number.isInteger(selectId) && !foreign) first.push(select(selectId, { zoom: !fromUrl }));
  if (ui.counters.checked) first.push(counters.show(true));
  if (ui.critical.checked) first.push(showPath(params.critical || "", { zoom: !fromUrl }));
  // A link that only names what to look for (e.g. an operator's "Trace" link) opens at its first match.
  if (ui.search.value.trim()) search.run({ step: !params.select && !fromUrl ? 1 : 0 });
  requestDraw();
  const ready = Promise.all(first).then(() => {
    if (!st.data && !(signal && signal.aborted) && ui.message.dataset.tone === "error") {
      throw new Error(ui.message.textContent || "The timeline could not be loaded.");
    }
  });
  return { ready };
}

/**
 * Whether a run has several workers (the shell's /api/runs), so that ranks can be shown together.
 * @param {string|undefined} run @param {AbortSignal} [signal] @returns {Promise<boolean>}
 */
async function runHasWorkers(run, signal) {
  try {
    const body = await getJSON("/api/runs", {}, signal);
    const found = (body.runs || []).find((/** @type {any} */ r) => r.name === run);
    return Boolean(found && found.workers.length > 1 && found.views.includes("distributed"));
  } catch {
    return false;
  }
}

/** @param {unknown} err */
function errorText(err) {
  return err instanceof Error ? err.message : String(err);
}
