/**
 * The Trace view: every event of one worker's span on a canvas timeline, lanes per thread and
 * CUDA stream, with zoom and pan, search, event details and their links, flow arrows and counter
 * tracks. The server does the level of detail: the view asks `/api/trace/window` for what is on
 * screen at its pixel width (debounced, the previous request aborted) and draws the older data
 * scaled meanwhile.
 *
 * Layers: fetch (`fetch*`), shape (pure functions exported for tests: here, in lib/viewport.js,
 * lib/timeline.js and lib/counters.js) and draw (`mount`, the timeline controller, the details
 * panel). View state lives in the URL: `start_us`, `end_us` (absolute trace microseconds),
 * `select` (event id), `q` and `regex`, `flows=0`, `counters=1`, `collapse` (folded lane ids).
 * @module trace
 */

import { ApiError, apiUrl, getJSON, isAbort } from "./lib/api.js";
import { byTestId, clear, el, showWarnings } from "./lib/dom.js";
import { NA, formatCount, formatOffset, formatRatio, formatUs } from "./lib/format.js";
import { TRACK_PX, drawCounters, formatCounter, seriesMax, trackColor, valueAt } from "./lib/counters.js";
import { frameItem } from "./lib/stacks.js";
import {
  drawLanes, drawOverlay, drawRuler, eventColor, fitCanvas, hitTest, laneLayout, placeOf, prepareWindow, rowTop,
} from "./lib/timeline.js";
import {
  clampWindow, covers, panBy, parseWindow, requestWindow, sameWindow, timeOf, timeParam, windowAround, zoomAt,
} from "./lib/viewport.js";
import { updateQuery } from "./lib/url.js";

/**
 * @typedef {import("./lib/viewport.js").TimeWindow} TimeWindow
 * @typedef {import("./lib/timeline.js").Lane} Lane
 * @typedef {import("./lib/timeline.js").Step} Step
 * @typedef {import("./lib/timeline.js").Placed} Placed
 * @typedef {import("./lib/timeline.js").Hit} Hit
 * @typedef {import("./lib/counters.js").Series} Series
 * @typedef {{start_us: number, end_us: number, lanes: Lane[], steps: Step[], kinds: string[], warnings: string[]}} Lanes
 * @typedef {{relation: string, id: number, name: string, start_us: number, dur_us: number, lane: number, row?: number}} Link
 * @typedef {{id: number, name: string, cat: string, kind: string, lane: number, row: number, start_us: number,
 *            dur_us: number, step: string|null, fields: Record<string, any>, frames: import("./lib/frames.js").Frame[],
 *            links: Link[], warnings: string[]}} EventDetail
 * @typedef {{id: number, name: string, lane: number, start_us: number, dur_us: number}} Match
 * @typedef {{q: string, total: number, matches: Match[], warnings: string[]}} SearchResult
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

/** Wait this long after the last viewport change before asking for its data. */
const FETCH_DELAY_MS = 80;
const SEARCH_DELAY_MS = 250;
/** Show "Loading…" in the corner only for slower answers. */
const BUSY_DELAY_MS = 300;
const KEY_ZOOM = 0.8;
const KEY_PAN = 0.15;

// ---------------------------------------------------------------- fetch

/** @param {Selection} sel @param {AbortSignal} [signal] @returns {Promise<Lanes>} */
export function fetchLanes({ run, worker, span }, signal) {
  return getJSON("/api/trace/lanes", { run, worker, span }, signal);
}

/** @param {Selection} sel @param {TimeWindow & {width_px: number}} req @param {AbortSignal} [signal] */
export function fetchWindow({ run, worker, span }, req, signal) {
  return getJSON("/api/trace/window", {
    run, worker, span, start_us: timeParam(req.start_us), end_us: timeParam(req.end_us), width_px: req.width_px,
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

/** The original trace file of a selection, as a download link. @param {Selection} sel */
export function rawHref({ run, worker, span }) {
  return apiUrl("/api/trace/raw", { run, worker, span });
}

// ---------------------------------------------------------------- shape

/** How kinds read in the UI. */
export const KIND_LABELS = Object.freeze({
  kernel: "Kernel", memcpy: "Memcpy", memset: "Memset", cpu_op: "CPU op", user_annotation: "User annotation",
  gpu_user_annotation: "GPU user annotation", python_function: "Python function", python: "Python",
  runtime: "Runtime", driver: "Driver", trace: "Trace", other: "Other",
});

/** @param {string} kind */
export function kindLabel(kind) {
  return KIND_LABELS[/** @type {keyof KIND_LABELS} */ (kind)] || kind || "Event";
}

/** "launched by" -> "Launched by". @param {string} relation */
export function relationLabel(relation) {
  const text = String(relation || "linked");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

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
 * A field value as text: strings as they are, everything else as compact JSON.
 * @param {unknown} value
 */
export function fieldText(value) {
  if (value === null || value === undefined) return NA;
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/**
 * The label/value pairs at the top of the details panel.
 * @param {EventDetail} event
 * @param {number} origin trace start, us
 * @param {Lane|undefined} lane
 * @returns {[string, string][]}
 */
export function eventFacts(event, origin, lane) {
  return [
    ["Duration", formatUs(event.dur_us)],
    ["Start", formatOffset(event.start_us - origin)],
    ["Step", event.step || NA],
    ["Category", event.cat || NA],
    ["Lane", lane ? `${lane.process} · ${lane.name}` : NA],
  ];
}

/**
 * The hover text of a box or merged block.
 * @param {import("./lib/timeline.js").WindowData} data
 * @param {Hit} hit
 * @param {number} origin
 * @returns {{title: string, lines: string[]}}
 */
export function tooltipText(data, hit, origin) {
  const lane = /** @type {import("./lib/timeline.js").WindowLane} */ (data.lanes.get(hit.lane));
  if (hit.kind === "merged") {
    const m = lane.merged;
    const span = m.end_us[hit.index] - m.start_us[hit.index];
    const count = m.count[hit.index];
    return {
      title: `${formatCount(count)} event${count === 1 ? "" : "s"}, merged`,
      lines: [
        `Busy ${formatUs(m.busy_us[hit.index])} of ${formatUs(span)}${span > 0 ? ` (${formatRatio(Math.min(1, m.busy_us[hit.index] / span), 0)})` : ""}`,
        `From ${formatOffset(m.start_us[hit.index] - origin)}`,
        "Too small to tell apart at this zoom: click to zoom in",
      ],
    };
  }
  const b = lane.boxes;
  const kind = data.kinds[b.kind[hit.index]] || "other";
  return {
    title: String(data.names[b.name[hit.index]] ?? ""),
    lines: [`${kindLabel(kind)} · ${formatUs(b.dur_us[hit.index])}`, `At ${formatOffset(b.start_us[hit.index] - origin)}`],
  };
}

/**
 * Where a linked event sits, for its flow arrow: the link's own row, else the row it is drawn in
 * now, else its lane's first row.
 * @param {Link} link
 * @param {import("./lib/timeline.js").WindowData|null} data
 * @returns {Placed}
 */
export function placeLink(link, data) {
  const drawn = placeOf(data, link.id);
  const row = Number.isInteger(link.row) ? /** @type {number} */ (link.row) : drawn ? drawn.row : 0;
  return { id: link.id, lane: link.lane, row, start_us: link.start_us, dur_us: link.dur_us };
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
 * The label column: a header per process and a label per lane, buttons that fold lanes (a folded
 * lane is one row, its calls drawn over each other); a process header folds all its lanes.
 * @param {HTMLElement} node
 * @param {import("./lib/timeline.js").Layout} layout
 * @param {(ids: number[], fold: boolean) => void} onFold
 */
function drawLaneLabels(node, layout, onFold) {
  const items = layout.items;
  node.replaceChildren(...items.map((item, k) => {
    if (item.type === "process") {
      /** @type {import("./lib/timeline.js").LaneItem[]} */ const own = [];
      for (let j = k + 1; j < items.length && items[j].type === "lane"; j += 1) own.push(/** @type {any} */ (items[j]));
      const folded = own.every((i) => i.collapsed);
      const button = el("button", { class: "tl-process", text: item.label, testid: "process-label",
        title: `${item.label}: click to ${folded ? "unfold" : "fold"} its lanes`,
        attrs: { type: "button", style: `height: ${item.h}px`, "aria-expanded": String(!folded) } });
      button.addEventListener("click", () => onFold(own.map((i) => i.lane.id), !folded));
      return button;
    }
    const { lane } = item;
    const button = el("button", {
      class: `tl-lane tl-lane-${lane.kind}`, testid: "lane-label",
      title: `${lane.process} · ${lane.name}\n${formatCount(lane.events)} events, ${lane.rows} row${lane.rows === 1 ? "" : "s"}`
        + (lane.rows > 1 ? `\nClick to ${item.collapsed ? "unfold" : "fold"} its rows` : ""),
      attrs: { type: "button", style: `height: ${item.h}px`, "data-lane": String(lane.id), "aria-expanded": String(!item.collapsed) },
    }, [el("span", { class: "tl-lane-name", text: lane.name })]);
    if (lane.rows > 1) button.addEventListener("click", () => onFold([lane.id], !item.collapsed));
    else button.disabled = true;
    return button;
  }));
}

/**
 * Lane ids from the URL's `collapse` ("3,4").
 * @param {string|undefined} text
 * @returns {Set<number>}
 */
export function parseCollapsed(text) {
  const parts = String(text || "").split(",").map((part) => part.trim()).filter(Boolean);
  return new Set(parts.map(Number).filter((n) => Number.isInteger(n)));
}

/**
 * A colour key of the kinds drawn now (in the API's kind order), and of merged blocks.
 * @param {HTMLElement} node
 * @param {string[]} kinds every kind name
 * @param {Set<string>} present the kinds drawn
 * @param {boolean} merged whether merged blocks are drawn
 */
function drawLegend(node, kinds, present, merged) {
  const shown = kinds.filter((k) => present.has(k));
  const signature = JSON.stringify([shown, merged]);
  if (node.dataset.signature === signature) return;
  node.dataset.signature = signature;
  const items = shown.map((kind) => el("span", { class: "legend-item", testid: "legend-item" }, [
      el("span", { class: "swatch", attrs: { style: `background: ${eventColor("", kind).fill}` } }),
    kindLabel(kind),
  ]));
  if (merged) {
    items.push(el("span", { class: "legend-item", testid: "legend-item",
      title: "Events too small to draw one by one at this zoom; hover for their count" }, [
      el("span", { class: "swatch swatch-merged" }), "Merged",
    ]));
  }
  node.replaceChildren(...items);
}

/**
 * The details panel: facts, linked events (buttons that select them), fields, call stack.
 * @param {{panel: HTMLElement, kind: HTMLElement, title: HTMLElement, body: HTMLElement}} ui
 * @param {EventDetail} event
 * @param {number} origin
 * @param {Map<number, Lane>} lanes
 * @param {(link: Link) => void} follow
 */
function drawDetails(ui, event, origin, lanes, follow) {
  ui.kind.textContent = kindLabel(event.kind);
  ui.title.textContent = event.name;
  ui.title.title = event.name;
  const facts = el("dl", { class: "details-facts", testid: "event-facts" }, eventFacts(event, origin, lanes.get(event.lane))
    .map(([label, value]) => el("div", { class: "stat" }, [el("dt", { text: label }), el("dd", { text: value, title: value })])));
  const parts = [...(event.warnings || []).map((w) => el("p", { class: "note note-warn", text: w })), facts];

  const links = event.links || [];
  if (links.length) {
    parts.push(el("section", { class: "details-section" }, [
      el("h3", { class: "details-heading", text: "Linked events" }),
      el("ul", { class: "details-links" }, links.map((link) => {
        const button = el("button", {
          class: "link-button", testid: "event-link", title: `${relationLabel(link.relation)}: ${link.name}`,
          attrs: { type: "button", "data-relation": link.relation, "data-id": String(link.id) },
        }, [
          el("span", { class: "link-relation", text: relationLabel(link.relation) }),
          el("span", { class: "link-name", text: link.name }),
          el("span", { class: "link-dur", text: formatUs(link.dur_us) }),
        ]);
        button.addEventListener("click", () => follow(link));
        return el("li", {}, [button]);
      })),
    ]));
  }
  const fields = Object.entries(event.fields || {});
  if (fields.length) {
    parts.push(el("section", { class: "details-section" }, [
      el("h3", { class: "details-heading", text: "Fields" }),
      el("dl", { class: "kv details-fields", testid: "event-fields" }, fields.flatMap(([key, value]) => [
        el("dt", { text: key }), el("dd", { text: fieldText(value) }),
      ])),
    ]));
  }
  const frames = event.frames || [];
  if (frames.length) {
    parts.push(el("section", { class: "details-section" }, [
      el("h3", { class: "details-heading", text: `Call stack (${frames.length} frame${frames.length === 1 ? "" : "s"}, innermost first)` }),
      el("ol", { class: "frames", testid: "event-frames" }, frames.map(frameItem)),
    ]));
  }
  ui.body.replaceChildren(...parts);
}

/**
 * Fetches the lanes and the first window of one worker's span and draws the timeline; wires
 * zoom, pan, selection, search, flows and counters.
 * @param {HTMLElement} root the `[data-view="trace"]` section
 * @param {Selection & {start_us?: string, end_us?: string, select?: string, q?: string, regex?: string,
 *                      flows?: string, counters?: string, collapse?: string}} params
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
    flows: /** @type {HTMLInputElement} */ (part("toggle-flows")), counters: /** @type {HTMLInputElement} */ (part("toggle-counters")),
    reset: part("reset-zoom"), download: /** @type {HTMLAnchorElement} */ (part("download-trace")),
    details: { panel: part("event-details"), kind: part("event-kind"), title: part("event-title"), body: part("event-body") },
    detailsZoom: part("details-zoom"), detailsClose: part("details-close"),
  };
  ui.download.href = rawHref(sel);
  ui.search.value = params.q || "";
  ui.regex.checked = params.regex === "1";
  ui.flows.checked = params.flows !== "0";
  ui.counters.checked = params.counters === "1";
  ui.details.panel.hidden = true;
  ui.countersBox.hidden = true;
  ui.tooltip.hidden = true;
  showMessage(ui.message, "");
  clear(ui.labels);
  clear(ui.count);

  const info = await fetchLanes(sel, signal);
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
  const controller = timeline({ root, ui, sel, info, lanes, bounds, params, signal });
  await controller.ready;
}

/**
 * The timeline's state and behaviour for one mount.
 * @param {object} options
 * @param {HTMLElement} options.root
 * @param {any} options.ui
 * @param {Selection} options.sel
 * @param {Lanes} options.info
 * @param {Lane[]} options.lanes
 * @param {TimeWindow} options.bounds
 * @param {Record<string, string|undefined>} options.params
 * @param {AbortSignal|undefined} options.signal
 */
function timeline({ ui, sel, info, lanes, bounds, params, signal }) {
  const origin = bounds.start_us;
  const kinds = info.kinds || [];
  const steps = (info.steps || []).filter((s) => s.end_us > s.start_us);
  const collapsed = parseCollapsed(params.collapse);
  let layout = laneLayout(lanes, { collapsed });
  const laneById = new Map(lanes.map((l) => [l.id, l]));
  const listen = { signal };
  /** @param {number[]} ids @param {boolean} fold */
  const onFold = (ids, fold) => {
    for (const id of ids) {
      if (fold) collapsed.add(id);
      else collapsed.delete(id);
    }
    layout = laneLayout(lanes, { collapsed });
    drawLaneLabels(ui.labels, layout, onFold);
    updateQuery({ collapse: [...collapsed].sort((a, b) => a - b).join(",") || null });
    measure();
    requestDraw();
  };
  drawLaneLabels(ui.labels, layout, onFold);

  const fromUrl = parseWindow(params.start_us, params.end_us, bounds);
  const st = {
    view: fromUrl || { ...bounds },
    size: { width: 0, height: 0 },
    /** @type {import("./lib/timeline.js").WindowData|null} */ data: null,
    /** @type {(TimeWindow & {width_px: number})|null} */ have: null,
    /** @type {Series[]|null} */ series: null,
    /** @type {(TimeWindow & {width_px: number})|null} */ seriesHave: null,
    /** @type {Placed|null} */ selected: null,
    /** @type {EventDetail|null} */ detail: null,
    /** @type {Placed|null} */ hover: null,
    /** @type {[number, number]|null} */ range: null,
    /** @type {number|null} */ counterCursor: null,
    search: { q: "", regex: false, /** @type {Match[]} */ matches: [], total: 0, index: -1, ids: new Set() },
    pointerX: /** @type {number|null} */ (null),
  };
  /** @type {Record<string, AbortController|null>} */ const inflight = { window: null, counters: null, event: null, search: null };
  const timers = { fetch: 0, search: 0, busy: 0 };
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
      drawCountersNow();
      ui.range.textContent = rangeText();
    }
    if (dirty.all || dirty.overlay) {
      const { ctx } = fitCanvas(ui.overlay, width, height);
      const flows = ui.flows.checked && st.detail && st.selected ? (st.detail.links || []).map((l) => placeLink(l, st.data)) : [];
      drawOverlay(ctx, { width, height, scrollTop, layout, data: st.data, win: st.view, selected: st.selected,
        hover: st.hover, matches: st.search.ids, flows, range: st.range });
      ui.overlay.dataset.flows = String(flows.length);
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
    drawRuler(ctx, { width: st.size.width, height, win: st.view, origin, steps, range: st.range });
  }

  function drawCountersNow() {
    if (ui.countersBox.hidden || !st.series) return;
    const height = Math.max(1, st.series.length * TRACK_PX);
    const { ctx } = fitCanvas(ui.counterCanvas, st.size.width, height);
    drawCounters(ctx, { width: st.size.width, height, series: st.series, win: st.view, cursor: st.counterCursor });
    ui.counterCanvas.dataset.tracks = String(st.series.length);
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
    window.clearTimeout(timers.fetch);
    timers.fetch = window.setTimeout(() => {
      const full = sameWindow(st.view, bounds, st.size.width);
      updateQuery({ start_us: full ? null : timeParam(st.view.start_us), end_us: full ? null : timeParam(st.view.end_us) });
      loadWindow();
      loadCounters();
    }, FETCH_DELAY_MS);
  }

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
    const req = requestWindow(st.view, width, bounds);
    const ctl = fresh("window");
    busy(true);
    try {
      const body = await fetchWindow(sel, req, ctl.signal);
      if (ctl.signal.aborted) return;
      st.data = prepareWindow(body, kinds);
      drawLegend(ui.legend, kinds, st.data.present, st.data.mergedCount > 0);
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

  async function loadCounters() {
    if (!ui.counters.checked) return;
    const width = st.size.width;
    if (covers(st.seriesHave, st.view, width, bounds)) return;
    const req = requestWindow(st.view, width, bounds);
    const ctl = fresh("counters");
    try {
      const body = await fetchCounters(sel, req, ctl.signal);
      if (ctl.signal.aborted) return;
      st.series = body.series || [];
      st.seriesHave = req;
      drawCounterLabels();
      requestDraw();
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      ui.counterLabels.replaceChildren(el("div", { class: "tl-counter-error", testid: "counter-error",
        text: `Counters could not be loaded: ${errorText(err)}` }));
    } finally {
      if (inflight.counters === ctl) inflight.counters = null;
    }
  }

  function drawCounterLabels() {
    const series = st.series || [];
    if (!series.length) {
      ui.counterLabels.replaceChildren(el("div", { class: "tl-counter-empty", testid: "counter-empty",
        text: "This trace records no counters." }));
      return;
    }
    ui.counterLabels.replaceChildren(...series.map((s, i) => el("div", {
      class: "tl-counter-label", testid: "counter-label", title: s.name,
      attrs: { style: `height: ${TRACK_PX}px; --track-color: ${trackColor(i)}` },
    }, [
      el("span", { class: "tl-counter-name", text: s.name }),
      el("span", { class: "tl-counter-max", text: seriesMax(s) === null ? "no samples here" : `max ${formatCounter(seriesMax(s), s.unit)}` }),
    ])));
  }

  // ------------------------------------------------------------ selection and details

  /**
   * Selects an event: outline at once when it is drawn, details from the server, and optionally
   * a window around it.
   * @param {number} id
   * @param {{zoom?: boolean, reveal?: boolean}} [options] reveal: scroll its lane into view
   */
  async function select(id, { zoom = false, reveal = zoom } = {}) {
    st.selected = placeOf(st.data, id);
    st.detail = null;
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
      const event = await fetchEvent(sel, id, ctl.signal);
      if (ctl.signal.aborted) return;
      st.detail = event;
      st.selected = { id: event.id, lane: event.lane, row: event.row, start_us: event.start_us, dur_us: event.dur_us };
      drawDetails(panel, event, origin, laneById, (link) => select(link.id, { zoom: true }));
      panel.panel.dataset.eventId = String(event.id);
      if (zoom) setView(windowAround(event.start_us, event.dur_us, bounds));
      if (reveal) revealRow(st.selected);
      requestDraw(false);
      syncSearchIndex(id);
      placeLinks(event, ctl.signal);
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

  /**
   * Finds the rows of linked events (for their arrows) when the API leaves them out and they are
   * few; the others point at their lane's first row.
   * @param {EventDetail} event
   * @param {AbortSignal} linkSignal
   */
  async function placeLinks(event, linkSignal) {
    const missing = (event.links || []).filter((l) => !Number.isInteger(l.row));
    if (!missing.length || missing.length > 8) return;
    await Promise.all(missing.map(async (link) => {
      try {
        link.row = (await fetchEvent(sel, link.id, linkSignal)).row;
      } catch {
        // the arrow keeps its fallback row
      }
    }));
    if (!linkSignal.aborted) requestDraw(false);
  }

  function deselect() {
    abort("event");
    st.selected = null;
    st.detail = null;
    ui.details.panel.hidden = true;
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

  /** @param {string|{text: string, title: string}} [what] @param {string} [tone] */
  function showCount(what = "", tone = "") {
    const { text, title } = typeof what === "string" ? { text: what, title: "" } : what;
    ui.count.textContent = text;
    ui.count.title = title;
    ui.count.dataset.tone = tone;
  }

  /** @param {number} id */
  function syncSearchIndex(id) {
    const index = st.search.matches.findIndex((m) => m.id === id);
    if (index >= 0 && index !== st.search.index) {
      st.search.index = index;
      showCount(searchCountText(index, st.search.total, st.search.matches.length));
    }
  }

  /** @param {{step?: number}} [options] step to a match once the answer is in (1: next, -1: previous) */
  async function runSearch({ step = 0 } = {}) {
    window.clearTimeout(timers.search);
    const q = ui.search.value.trim();
    const regex = ui.regex.checked;
    updateQuery({ q: q || null, regex: regex ? "1" : null });
    if (!q) {
      abort("search");
      st.search = { q: "", regex, matches: [], total: 0, index: -1, ids: new Set() };
      showCount();
      requestDraw(false);
      return;
    }
    const ctl = fresh("search");
    showCount("Searching…");
    try {
      const result = await fetchSearch(sel, q, regex, ctl.signal);
      if (ctl.signal.aborted) return;
      const matches = result.matches || [];
      st.search = { q, regex, matches, total: result.total ?? matches.length, index: -1, ids: new Set(matches.map((m) => m.id)) };
      const current = st.selected ? matches.findIndex((m) => m.id === /** @type {Placed} */ (st.selected).id) : -1;
      st.search.index = current;
      showCount(searchCountText(current, st.search.total, matches.length));
      requestDraw(false);
      inflight.search = null; // answered: stepping must not search again
      if (step) stepMatch(step);
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      st.search = { q, regex, matches: [], total: 0, index: -1, ids: new Set() };
      showCount(errorText(err), "error");
      requestDraw(false);
    } finally {
      if (inflight.search === ctl) inflight.search = null;
    }
  }

  /** @param {number} dir */
  function stepMatch(dir) {
    const { matches } = st.search;
    const q = ui.search.value.trim();
    if (q !== st.search.q || ui.regex.checked !== st.search.regex || inflight.search) {
      runSearch({ step: dir });
      return;
    }
    if (!matches.length) return;
    const n = matches.length;
    const index = st.search.index < 0 ? (dir > 0 ? 0 : n - 1) : (st.search.index + dir + n) % n;
    st.search.index = index;
    showCount(searchCountText(index, st.search.total, n));
    const match = matches[index];
    // Zoom at once from the match's own times; the details follow.
    setView(windowAround(match.start_us, match.dur_us, bounds));
    select(match.id, { reveal: true });
  }

  ui.search.addEventListener("input", () => {
    window.clearTimeout(timers.search);
    timers.search = window.setTimeout(() => runSearch(), SEARCH_DELAY_MS);
  }, listen);
  ui.search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      stepMatch(event.shiftKey ? -1 : 1);
    } else if (event.key === "Escape" && ui.search.value) {
      event.stopPropagation();
    }
  }, listen);
  ui.regex.addEventListener("change", () => runSearch(), listen);
  ui.next.addEventListener("click", () => stepMatch(1), listen);
  ui.prev.addEventListener("click", () => stepMatch(-1), listen);

  // ------------------------------------------------------------ toggles

  ui.flows.addEventListener("change", () => {
    updateQuery({ flows: ui.flows.checked ? null : "0" });
    requestDraw(false);
  }, listen);
  ui.counters.addEventListener("change", () => {
    updateQuery({ counters: ui.counters.checked ? "1" : null });
    showCounters();
  }, listen);
  ui.reset.addEventListener("click", () => setView(bounds), listen);

  function showCounters() {
    ui.countersBox.hidden = !ui.counters.checked;
    if (ui.counters.checked) {
      if (!st.series) {
        ui.counterLabels.replaceChildren(el("div", { class: "tl-counter-empty", text: "Loading counters…" }));
      }
      loadCounters();
    }
    requestDraw();
  }

  // ------------------------------------------------------------ pointer

  /** @param {PointerEvent|MouseEvent|WheelEvent} event */
  const plotX = (event) => event.clientX - ui.stage.getBoundingClientRect().left;
  /** @param {PointerEvent|MouseEvent} event content y of the lanes */
  const contentY = (event) => event.clientY - ui.stage.getBoundingClientRect().top + ui.body.scrollTop;

  /** @param {Hit|null} hit @returns {Placed|null} */
  function placedOfHit(hit) {
    if (!hit || !st.data) return null;
    const lane = /** @type {import("./lib/timeline.js").WindowLane} */ (st.data.lanes.get(hit.lane));
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

  /** @type {{mode: "pan"|"range", x0: number, y0: number, t0: number, view0: TimeWindow, scroll0: number, moved: boolean, id: number, target: HTMLElement}|null} */
  let drag = null;

  /** @param {PointerEvent} event @param {"pan"|"range"} mode @param {HTMLElement} target */
  function startDrag(event, mode, target) {
    if (event.button !== 0) return;
    event.preventDefault();
    target.setPointerCapture(event.pointerId);
    drag = { mode, x0: event.clientX, y0: event.clientY, t0: timeOf(plotX(event), st.view, st.size.width), view0: st.view,
      scroll0: ui.body.scrollTop, moved: false, id: event.pointerId, target };
    hideTooltip();
  }

  /** @param {PointerEvent} event */
  function moveDrag(event) {
    if (!drag) return false;
    const dx = event.clientX - drag.x0;
    const dy = event.clientY - drag.y0;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return true;
    drag.moved = true;
    if (drag.mode === "pan") {
      const perPx = (drag.view0.end_us - drag.view0.start_us) / st.size.width;
      setView(panBy(drag.view0, -dx * perPx, bounds));
      ui.body.scrollTop = drag.scroll0 - dy;
      ui.stage.style.cursor = "grabbing";
    } else {
      const t = timeOf(Math.max(0, Math.min(st.size.width, plotX(event))), st.view, st.size.width);
      st.range = [drag.t0, t];
      requestDraw();
    }
    return true;
  }

  /** @param {PointerEvent} event */
  function endDrag(event) {
    if (!drag) return;
    const done = drag;
    drag = null;
    ui.stage.style.cursor = "";
    if (done.target.hasPointerCapture(done.id)) done.target.releasePointerCapture(done.id);
    if (done.mode === "range" && st.range) {
      const [a, b] = st.range;
      st.range = null;
      const perPx = (st.view.end_us - st.view.start_us) / st.size.width;
      if (Math.abs(b - a) >= 3 * perPx) setView({ start_us: Math.min(a, b), end_us: Math.max(a, b) });
      requestDraw();
      return;
    }
    if (!done.moved && done.target === ui.stage) click(event);
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

  ui.stage.addEventListener("pointerdown", (event) => {
    startDrag(event, event.shiftKey || event.altKey || event.ctrlKey || event.metaKey ? "range" : "pan", ui.stage);
  }, listen);
  ui.ruler.addEventListener("pointerdown", (event) => startDrag(event, "range", ui.ruler), listen);
  for (const target of [ui.stage, ui.ruler]) {
    target.addEventListener("pointermove", (event) => {
      st.pointerX = plotX(event);
      if (moveDrag(event)) return;
      if (target === ui.stage) hoverAt(event);
    }, listen);
    target.addEventListener("pointerup", endDrag, listen);
    target.addEventListener("pointercancel", () => {
      drag = null;
      st.range = null;
      requestDraw();
    }, listen);
  }
  ui.stage.addEventListener("pointerleave", () => {
    st.pointerX = null;
    if (!drag) hideTooltip();
  }, listen);
  ui.stage.addEventListener("dblclick", (event) => {
    const hit = hitTest(st.data, layout, st.view, st.size.width, plotX(event), contentY(event));
    const placed = placedOfHit(hit);
    if (placed) setView(windowAround(placed.start_us, placed.dur_us, bounds, { share: 0.85, minSpan: 0 }));
  }, listen);

  /** @param {WheelEvent} event */
  function wheel(event) {
    event.preventDefault();
    const scale = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? st.size.height : 1;
    const dx = event.deltaX * scale;
    const dy = event.deltaY * scale;
    const perPx = (st.view.end_us - st.view.start_us) / st.size.width;
    if (event.shiftKey || Math.abs(dx) > Math.abs(dy)) {
      setView(panBy(st.view, (Math.abs(dx) > Math.abs(dy) ? dx : dy) * perPx, bounds));
      return;
    }
    const factor = Math.exp(dy * (event.ctrlKey ? 0.01 : 0.0015));
    setView(zoomAt(st.view, factor, plotX(event) / st.size.width, bounds));
  }
  for (const target of [ui.stage, ui.ruler, ui.counterCanvas]) target.addEventListener("wheel", wheel, { passive: false, signal });

  ui.counterCanvas.addEventListener("pointermove", (event) => {
    if (!st.series || !st.series.length) return;
    const rect = ui.counterCanvas.getBoundingClientRect();
    const index = Math.floor((event.clientY - rect.top) / TRACK_PX);
    const series = st.series[index];
    st.counterCursor = event.clientX - rect.left;
    requestDraw();
    if (!series) return;
    const t = timeOf(st.counterCursor, st.view, st.size.width);
    const sample = valueAt(series, t);
    showTooltip(event, series.name, [
      sample ? formatCounter(sample.value, series.unit) : "No sample yet",
      `At ${formatOffset(t - origin)}`,
    ]);
  }, listen);
  ui.counterCanvas.addEventListener("pointerleave", () => {
    st.counterCursor = null;
    ui.tooltip.hidden = true;
    requestDraw();
  }, listen);

  ui.body.addEventListener("scroll", () => {
    hideTooltip();
    requestDraw();
  }, { passive: true, signal });

  // ------------------------------------------------------------ keys (as in chrome://tracing)

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (isTyping(/** @type {HTMLElement|null} */ (event.target))) return;
    if (ui.timeline.offsetParent === null) return; // the view is hidden (an error is shown instead)
    const key = event.key.toLowerCase();
    const anchor = st.pointerX === null ? 0.5 : st.pointerX / st.size.width;
    const span = st.view.end_us - st.view.start_us;
    if (key === "w") setView(zoomAt(st.view, KEY_ZOOM, anchor, bounds));
    else if (key === "s") setView(zoomAt(st.view, 1 / KEY_ZOOM, anchor, bounds));
    else if (key === "a") setView(panBy(st.view, -KEY_PAN * span, bounds));
    else if (key === "d") setView(panBy(st.view, KEY_PAN * span, bounds));
    else if (key === "f") frameSelection();
    else if (key === "0") setView(bounds);
    else if (event.key === "Escape" && !ui.details.panel.hidden) deselect();
    else return;
    event.preventDefault();
  }, listen);

  const observer = new ResizeObserver(() => {
    const widthChanged = measure();
    requestDraw();
    if (widthChanged) {
      window.clearTimeout(timers.fetch);
      timers.fetch = window.setTimeout(() => {
        loadWindow();
        loadCounters();
      }, FETCH_DELAY_MS);
    }
  });

  // ------------------------------------------------------------ first draw

  measure();
  observer.observe(ui.body);
  ui.countersBox.hidden = !ui.counters.checked;
  /** @type {Promise<unknown>[]} */ const first = [loadWindow()];
  const selectId = Number(params.select);
  if (params.select && Number.isInteger(selectId)) first.push(select(selectId, { zoom: !fromUrl, reveal: true }));
  if (ui.counters.checked) first.push(loadCounters());
  // A link that only names what to look for (e.g. an operator's "Trace" link) opens at its first match.
  if (ui.search.value.trim()) runSearch({ step: !params.select && !fromUrl ? 1 : 0 });
  requestDraw();
  const ready = Promise.all(first).then(() => {
    if (!st.data && !(signal && signal.aborted) && ui.message.dataset.tone === "error") {
      throw new Error(ui.message.textContent || "The timeline could not be loaded.");
    }
  });
  return { ready };
}

/**
 * Whether keys pressed in `target` are typing (text fields, selects), not timeline commands.
 * @param {HTMLElement|null} target
 */
export function isTyping(target) {
  if (!target) return false;
  if (target.isContentEditable || target.tagName === "TEXTAREA" || target.tagName === "SELECT") return true;
  return target.tagName === "INPUT" && !["checkbox", "radio", "button", "submit", "reset"].includes(/** @type {HTMLInputElement} */ (target).type);
}

/** @param {unknown} err */
function errorText(err) {
  return err instanceof Error ? err.message : String(err);
}
