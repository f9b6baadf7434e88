/**
 * The trace timeline on <canvas>: lane layout, event colours, hit testing (pure functions, tested
 * on their own) and the drawing of lanes, the time ruler and the overlay (selection, hover, search
 * matches, flow arrows, a range being selected).
 *
 * The server does the level of detail: `/api/trace/window` sends per lane the events wide enough
 * to see ("boxes") and merged blocks for the rest; this module draws what it sends, at whatever
 * window is on screen (older data is drawn scaled until newer data arrives).
 * @module lib/timeline
 */

import { formatTick } from "./format.js";
import { boxPixels, rulerTicks, xOf } from "./viewport.js";
import { shortKernelName } from "./format.js";

/**
 * @typedef {import("./viewport.js").TimeWindow} TimeWindow
 * @typedef {{id: number, process: string, name: string, kind: "cpu"|"gpu"|"other", rows: number, events: number}} Lane
 * @typedef {{step: string, start_us: number, end_us: number}} Step
 * @typedef {{type: "process", label: string, y: number, h: number}} ProcessItem
 * @typedef {{type: "lane", lane: Lane, y: number, h: number, collapsed: boolean}} LaneItem
 * @typedef {{items: (ProcessItem|LaneItem)[], lanes: Map<number, LaneItem>, height: number, rowPx: number, padPx: number}} Layout
 * @typedef {{id: number[], start_us: number[], dur_us: number[], row: number[], name: number[], kind: number[]}} Boxes
 * @typedef {{start_us: number[], end_us: number[], row: number[], count: number[], busy_us: number[]}} Merged
 * @typedef {{id: number, boxes: Boxes, merged: Merged, groups: [string, number[]][], fills: string[], byRow: number[]}} WindowLane
 * @typedef {{start_us: number, end_us: number, width_px: number, names: string[], kinds: string[],
 *            lanes: Map<number, WindowLane>, index: Map<number, {lane: number, i: number}>,
 *            boxCount: number, mergedCount: number, labels: (string|null)[], present: Set<string>}} WindowData
 * @typedef {{kind: "box", lane: number, index: number, id: number} | {kind: "merged", lane: number, index: number}} Hit
 * @typedef {{id: number, lane: number, row: number, start_us: number, dur_us: number}} Placed
 */

export const ROW_PX = 14;
export const LANE_PAD_PX = 3;
export const PROCESS_PX = 22;
/** Boxes narrower than this get no name. */
export const LABEL_MIN_PX = 28;

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
const BOX_FONT = `10px ${FONT}`;
const RULER_FONT = `11px ${FONT}`;
const STEP_FONT = `600 10px ${FONT}`;
/** Merged blocks: slate on host lanes, steel blue on GPU streams (kernels, mostly), by how busy. */
const MERGED_RGB = { cpu: "112, 124, 142", gpu: "62, 105, 160", other: "112, 124, 142" };
const STEP_SHADE = "rgba(60, 64, 67, 0.035)";
const STEP_LINE = "rgba(60, 64, 67, 0.22)";
const GRID_LINE = "rgba(60, 64, 67, 0.07)";
const ACCENT = "#f57c00";

// ---------------------------------------------------------------- layout

/**
 * Stacks lanes top to bottom, a header row before each process's lanes; a lane is as tall as its
 * sub-rows (overlapping events on one stream or nested calls on one thread), a collapsed lane one
 * row (its rows drawn over each other, the deepest on top).
 * @param {Lane[]} lanes in the API's order
 * @param {{rowPx?: number, padPx?: number, processPx?: number, collapsed?: Set<number>}} [options]
 * @returns {Layout}
 */
export function laneLayout(lanes, { rowPx = ROW_PX, padPx = LANE_PAD_PX, processPx = PROCESS_PX, collapsed = new Set() } = {}) {
  /** @type {(ProcessItem|LaneItem)[]} */ const items = [];
  /** @type {Map<number, LaneItem>} */ const byId = new Map();
  let y = 0;
  /** @type {string|null} */ let process = null;
  for (const lane of lanes) {
    if (lane.process !== process) {
      process = lane.process;
      items.push({ type: "process", label: process, y, h: processPx });
      y += processPx;
    }
    const folded = collapsed.has(lane.id);
    const h = (folded ? 1 : Math.max(1, lane.rows || 0)) * rowPx + 2 * padPx;
    /** @type {LaneItem} */ const item = { type: "lane", lane, y, h, collapsed: folded };
    items.push(item);
    byId.set(lane.id, item);
    y += h;
  }
  return { items, lanes: byId, height: y, rowPx, padPx };
}

/**
 * The top of sub-row `row` of a lane, in content px (every row of a collapsed lane is its first).
 * @param {Layout} layout
 * @param {LaneItem} item
 * @param {number} row
 */
export function rowTop(layout, item, row) {
  return item.y + layout.padPx + (item.collapsed ? 0 : row) * layout.rowPx;
}

/**
 * The lane item and sub-row at content y, or null (a process header, padding, below the last lane).
 * @param {Layout} layout
 * @param {number} y
 * @returns {{item: LaneItem, row: number}|null}
 */
export function laneAt(layout, y) {
  const items = layout.items;
  let lo = 0;
  let hi = items.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const it = items[mid];
    if (y < it.y) hi = mid - 1;
    else if (y >= it.y + it.h) lo = mid + 1;
    else {
      if (it.type !== "lane") return null;
      const row = Math.floor((y - it.y - layout.padPx) / layout.rowPx);
      if (row < 0 || row >= (it.collapsed ? 1 : Math.max(1, it.lane.rows || 0))) return null;
      return { item: it, row };
    }
  }
  return null;
}

// ---------------------------------------------------------------- colours

/** Hue range, saturation and lightness range of each kind's family. */
const FAMILIES = /** @type {Record<string, [number, number, number, number, number]>} */ ({
  kernel: [195, 240, 58, 46, 60],
  memcpy: [22, 34, 80, 52, 60],
  memset: [44, 54, 80, 50, 58],
  cpu_op: [95, 165, 42, 42, 56],
  user_annotation: [265, 300, 40, 58, 68],
  gpu_user_annotation: [265, 300, 40, 60, 70],
  python_function: [18, 58, 34, 56, 70],
  python: [18, 58, 34, 56, 70],
  runtime: [348, 372, 62, 52, 62],
  driver: [330, 350, 55, 52, 62],
  trace: [210, 220, 8, 72, 78],
  other: [200, 220, 10, 62, 72],
});

/** FNV-1a of a string, as an unsigned 32-bit integer. @param {string} text */
function hash(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * A box's fill and text colours: the hue family of its kind, a stable hue and lightness for its name.
 * @param {string} name
 * @param {string} kind e.g. "kernel", "cpu_op"; unknown kinds are "other"
 * @returns {{fill: string, text: string}}
 */
export function eventColor(name, kind) {
  const family = kind in FAMILIES ? kind : "other";
  const [h0, h1, s, l0, l1] = FAMILIES[family];
  const h = hash(`${family}\u0000${name}`);
  const hue = Math.round(h0 + ((h & 0xffff) / 0xffff) * (h1 - h0)) % 360;
  const light = Math.round(l0 + (((h >>> 16) & 0xff) / 0xff) * (l1 - l0));
  return { fill: `hsl(${hue}, ${s}%, ${light}%)`, text: light >= 57 ? "#202124" : "#ffffff" };
}

/**
 * The name shown inside a box: kernels by their own name (no return type, namespaces, templates).
 * @param {string} name
 * @param {string} kind
 */
export function boxLabel(name, kind) {
  return kind === "kernel" ? shortKernelName(name) : name;
}

/**
 * The longest form of `text` that fits `maxPx` (whole, or cut with "…"); null when not even
 * two characters and the ellipsis fit.
 * @param {string} text
 * @param {number} maxPx
 * @param {(s: string) => number} measure width of a string in px
 * @returns {string|null}
 */
export function fitLabel(text, maxPx, measure) {
  if (maxPx <= 0 || !text) return null;
  if (measure(text) <= maxPx) return text;
  let lo = 2;
  let hi = text.length - 1;
  if (measure(`${text.slice(0, lo)}…`) > maxPx) return null;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure(`${text.slice(0, mid)}…`) <= maxPx) lo = mid;
    else hi = mid - 1;
  }
  return `${text.slice(0, lo)}…`;
}

// ---------------------------------------------------------------- window data

/**
 * Indexes an `/api/trace/window` answer for drawing: lanes by id, boxes grouped by colour (one
 * fillStyle change per colour), event ids to their lane and position.
 * @param {any} body the API's JSON
 * @param {string[]} kinds the kind names of `/api/trace/lanes`
 * @returns {WindowData}
 */
export function prepareWindow(body, kinds) {
  const names = Array.isArray(body.names) ? body.names : [];
  /** @type {Map<number, WindowLane>} */ const lanes = new Map();
  /** @type {Map<number, {lane: number, i: number}>} */ const index = new Map();
  /** @type {Map<string, string>} */ const colorOf = new Map();
  /** @type {Set<string>} */ const present = new Set();
  let boxCount = 0;
  let mergedCount = 0;
  for (const lane of body.lanes || []) {
    const boxes = lane.boxes || { id: [], start_us: [], dur_us: [], row: [], name: [], kind: [] };
    const merged = lane.merged || { start_us: [], end_us: [], row: [], count: [], busy_us: [] };
    /** @type {Map<string, number[]>} */ const groups = new Map();
    const n = boxes.id.length;
    /** @type {string[]} */ const fills = new Array(n);
    for (let i = 0; i < n; i += 1) {
      const kind = kinds[boxes.kind[i]] || "other";
      present.add(kind);
      const key = `${boxes.name[i]}:${kind}`;
      let fill = colorOf.get(key);
      if (fill === undefined) {
        fill = eventColor(String(names[boxes.name[i]] ?? ""), kind).fill;
        colorOf.set(key, fill);
      }
      fills[i] = fill;
      const group = groups.get(fill);
      if (group) group.push(i);
      else groups.set(fill, [i]);
      index.set(boxes.id[i], { lane: lane.id, i });
    }
    boxCount += n;
    mergedCount += merged.start_us.length;
    // Drawing order of a collapsed lane: outer rows first, so that the deepest calls show.
    const byRow = Array.from({ length: n }, (_, i) => i).sort((a, c) => boxes.row[a] - boxes.row[c]);
    lanes.set(lane.id, { id: lane.id, boxes, merged, groups: [...groups], fills, byRow });
  }
  return {
    start_us: body.start_us, end_us: body.end_us, width_px: body.width_px, names, kinds,
    lanes, index, boxCount, mergedCount, labels: new Array(names.length).fill(undefined), present,
  };
}

/**
 * What is under the pointer: the innermost box of that sub-row (of any row in a collapsed lane,
 * the deepest) whose pixels (at least one wide, `slop` px of tolerance) hold x, else a merged
 * block; null for empty space.
 * @param {WindowData|null} data
 * @param {Layout} layout
 * @param {TimeWindow} win
 * @param {number} width plot width, CSS px
 * @param {number} x CSS px in the plot
 * @param {number} y content px (scroll included)
 * @param {number} [slop]
 * @returns {Hit|null}
 */
export function hitTest(data, layout, win, width, x, y, slop = 2) {
  if (!data) return null;
  const at = laneAt(layout, y);
  if (!at) return null;
  const lane = data.lanes.get(at.item.lane.id);
  if (!lane) return null;
  const perPx = (win.end_us - win.start_us) / width;
  const t = win.start_us + x * perPx;
  const tol = slop * perPx;
  const anyRow = at.item.collapsed;
  /** @type {Hit|null} */ let best = null;
  let bestMiss = Infinity;
  let bestRow = -1;
  let bestDur = Infinity;
  const b = lane.boxes;
  for (let i = 0; i < b.id.length; i += 1) {
    if (!anyRow && b.row[i] !== at.row) continue;
    const start = b.start_us[i];
    const end = start + Math.max(b.dur_us[i], perPx);
    const miss = t < start ? start - t : t > end ? t - end : 0;
    if (miss > tol) continue;
    const better = miss < bestMiss
      || (miss === bestMiss && (b.row[i] > bestRow || (b.row[i] === bestRow && b.dur_us[i] < bestDur)));
    if (better) {
      best = { kind: "box", lane: lane.id, index: i, id: b.id[i] };
      bestMiss = miss;
      bestRow = b.row[i];
      bestDur = b.dur_us[i];
    }
  }
  if (best && bestMiss === 0) return best;
  const m = lane.merged;
  for (let i = 0; i < m.start_us.length; i += 1) {
    if (!anyRow && m.row[i] !== at.row) continue;
    const end = Math.max(m.end_us[i], m.start_us[i] + perPx);
    const miss = t < m.start_us[i] ? m.start_us[i] - t : t > end ? t - end : 0;
    if (miss <= tol && miss < bestMiss) {
      best = { kind: "merged", lane: lane.id, index: i };
      bestMiss = miss;
    }
  }
  return best;
}

/**
 * The lane, row and time of a drawn event, for outlines and arrows; null when it is not in the data.
 * @param {WindowData|null} data
 * @param {number} id
 * @returns {Placed|null}
 */
export function placeOf(data, id) {
  const at = data ? data.index.get(id) : undefined;
  if (!data || !at) return null;
  const b = /** @type {WindowLane} */ (data.lanes.get(at.lane)).boxes;
  return { id, lane: at.lane, row: b.row[at.i], start_us: b.start_us[at.i], dur_us: b.dur_us[at.i] };
}

// ---------------------------------------------------------------- drawing

/**
 * Sizes a canvas for `width` x `height` CSS px at the device's pixel ratio and returns its context,
 * scaled so that drawing is in CSS px (sharp on HiDPI screens).
 * @param {HTMLCanvasElement} canvas
 * @param {number} width
 * @param {number} height
 */
export function fitCanvas(canvas, width, height) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(width * dpr));
  const h = Math.max(1, Math.round(height * dpr));
  if (canvas.width !== w) canvas.width = w;
  if (canvas.height !== h) canvas.height = h;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, dpr };
}

/** @type {WeakMap<CanvasRenderingContext2D, CanvasPattern|null>} */
const hatches = new WeakMap();

/** Diagonal white stripes laid over merged blocks. @param {CanvasRenderingContext2D} ctx */
function hatch(ctx) {
  if (!hatches.has(ctx)) {
    const tile = document.createElement("canvas");
    tile.width = 6;
    tile.height = 6;
    const t = /** @type {CanvasRenderingContext2D} */ (tile.getContext("2d"));
    t.strokeStyle = "rgba(255, 255, 255, 0.55)";
    t.lineWidth = 1.5;
    t.beginPath();
    t.moveTo(-1, 7);
    t.lineTo(7, -1);
    t.stroke();
    hatches.set(ctx, ctx.createPattern(tile, "repeat"));
  }
  return hatches.get(ctx);
}

/**
 * Draws step bands: every other step shaded, a line at each boundary, over the full height.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Step[]} steps
 * @param {TimeWindow} win
 * @param {number} width
 * @param {number} top
 * @param {number} height
 */
function drawStepBands(ctx, steps, win, width, top, height) {
  ctx.fillStyle = STEP_SHADE;
  steps.forEach((step, k) => {
    if (k % 2 === 1) return;
    const px = boxPixels(step.start_us, step.end_us - step.start_us, win, width, 0);
    if (px) ctx.fillRect(px[0], top, px[1] - px[0], height);
  });
  ctx.fillStyle = STEP_LINE;
  for (const step of steps) {
    for (const t of [step.start_us, step.end_us]) {
      const x = xOf(t, win, width);
      if (x >= -1 && x <= width + 1) ctx.fillRect(Math.round(x), top, 1, height);
    }
  }
}

/**
 * Draws the lanes: process bands, lane separators, step bands, merged blocks (hatched) and boxes
 * with their names where they fit. Returns how many boxes and merged blocks were drawn.
 * @param {CanvasRenderingContext2D} ctx
 * @param {{width: number, height: number, scrollTop: number, dpr: number, layout: Layout,
 *          data: WindowData|null, win: TimeWindow, steps: Step[]}} view
 * @returns {{boxes: number, merged: number}}
 */
export function drawLanes(ctx, { width, height, scrollTop, dpr, layout, data, win, steps }) {
  ctx.clearRect(0, 0, width, height);
  const top = scrollTop;
  const bottom = scrollTop + height;
  const snap = (/** @type {number} */ v) => Math.round(v * dpr) / dpr;

  // Backgrounds: process header bands and lane separators.
  for (const item of layout.items) {
    if (item.y + item.h < top || item.y > bottom) continue;
    const y = item.y - top;
    if (item.type === "process") {
      ctx.fillStyle = "#f1f3f4";
      ctx.fillRect(0, y, width, item.h);
      ctx.fillStyle = "#dadce0";
      ctx.fillRect(0, y + item.h - 1, width, 1);
    } else {
      ctx.fillStyle = GRID_LINE;
      ctx.fillRect(0, y + item.h - 1, width, 1);
    }
  }
  drawStepBands(ctx, steps, win, width, 0, height);

  let boxes = 0;
  let merged = 0;
  if (!data) return { boxes, merged };
  const { rowPx } = layout;
  const boxH = rowPx - 2;
  /** @type {[number, number, number, number][]} */ const labelled = [];
  const pattern = hatch(ctx);
  for (const item of layout.items) {
    if (item.type !== "lane" || item.y + item.h < top || item.y > bottom) continue;
    const lane = data.lanes.get(item.lane.id);
    if (!lane) continue;
    const base = rowTop(layout, item, 0) - top + 1;
    const folded = item.collapsed;
    const shown = (/** @type {number} */ row) => (folded ? 0 : row);
    const rowVisible = (/** @type {number} */ row) => {
      const y = base + shown(row) * rowPx;
      return y + rowPx >= 0 && y <= height;
    };
    // Merged blocks first: a box drawn over one (it happens at block edges) stays readable.
    const m = lane.merged;
    /** @type {[number, number, number][][]} */ const buckets = [[], [], [], []];
    for (let i = 0; i < m.start_us.length; i += 1) {
      if (!rowVisible(m.row[i])) continue;
      const span = m.end_us[i] - m.start_us[i];
      const px = boxPixels(m.start_us[i], span, win, width, 1);
      if (!px) continue;
      const x0 = snap(px[0]);
      buckets[mergedBucket(m.busy_us[i], span)].push([x0, base + shown(m.row[i]) * rowPx, Math.max(1, snap(px[1]) - x0)]);
      merged += 1;
    }
    const rgb = MERGED_RGB[item.lane.kind] || MERGED_RGB.other;
    buckets.forEach((rects, k) => {
      if (!rects.length) return;
      ctx.fillStyle = `rgba(${rgb}, ${MERGED_ALPHA[k]})`;
      for (const [x, y, w] of rects) ctx.fillRect(x, y, w, boxH);
      if (pattern) {
        ctx.fillStyle = pattern;
        for (const [x, y, w] of rects) if (w >= 4) ctx.fillRect(x, y, w, boxH);
      }
    });
    const b = lane.boxes;
    /** @param {number} i */
    const drawBox = (i) => {
      if (!rowVisible(b.row[i])) return;
      const px = boxPixels(b.start_us[i], b.dur_us[i], win, width, 1);
      if (!px) return;
      const x0 = snap(px[0]);
      const w = Math.max(1 / dpr, snap(px[1]) - x0);
      ctx.fillRect(x0, base + shown(b.row[i]) * rowPx, w, boxH);
      boxes += 1;
      // Names in a collapsed lane would be drawn over each other.
      if (w >= LABEL_MIN_PX && !folded) labelled.push([lane.id, i, x0, w]);
    };
    if (folded) {
      for (const i of lane.byRow) {
        ctx.fillStyle = lane.fills[i];
        drawBox(i);
      }
    } else {
      for (const [fill, indices] of lane.groups) {
        ctx.fillStyle = fill;
        for (const i of indices) drawBox(i);
      }
    }
  }
  drawBoxLabels(ctx, data, labelled, layout, top, width);
  return { boxes, merged };
}

/** Opacity of merged blocks by how busy they are: under a quarter, a half, three quarters, more. */
const MERGED_ALPHA = [0.28, 0.42, 0.56, 0.7];

/**
 * Which opacity step a merged block gets: its busy time over its span, in quarters.
 * @param {number} busyUs
 * @param {number} spanUs
 */
export function mergedBucket(busyUs, spanUs) {
  if (!(spanUs > 0) || !(busyUs > 0)) return 0;
  return Math.max(0, Math.min(3, Math.floor((busyUs / spanUs) * 4)));
}

/** Widths of text at the box font, cached (the same names recur on every frame). */
const widths = new Map();

/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {WindowData} data
 * @param {[number, number, number, number][]} labelled lane id, box index, x, width
 * @param {Layout} layout
 * @param {number} top scroll offset
 * @param {number} width plot width
 */
function drawBoxLabels(ctx, data, labelled, layout, top, width) {
  if (!labelled.length) return;
  ctx.font = BOX_FONT;
  ctx.textBaseline = "middle";
  const measure = (/** @type {string} */ s) => {
    let w = widths.get(s);
    if (w === undefined) {
      w = ctx.measureText(s).width;
      if (widths.size > 20000) widths.clear();
      widths.set(s, w);
    }
    return w;
  };
  for (const [laneId, i, x, w] of labelled) {
    const lane = /** @type {WindowLane} */ (data.lanes.get(laneId));
    const item = /** @type {LaneItem} */ (layout.lanes.get(laneId));
    const b = lane.boxes;
    const nameIndex = b.name[i];
    let label = data.labels[nameIndex];
    const kind = data.kinds[b.kind[i]] || "other";
    if (label === undefined) {
      label = boxLabel(String(data.names[nameIndex] ?? ""), kind);
      data.labels[nameIndex] = label;
    }
    // Text starts inside the visible part of a box that reaches past the left edge.
    const left = Math.max(x, 0) + 3;
    const right = Math.min(x + w, width) - 3;
    const text = fitLabel(/** @type {string} */ (label), right - left, measure);
    if (!text) continue;
    ctx.fillStyle = eventColor(String(data.names[nameIndex] ?? ""), kind).text;
    ctx.fillText(text, left, rowTop(layout, item, b.row[i]) - top + layout.rowPx / 2 + 0.5);
  }
}

/**
 * Draws the time ruler: step names on a top strip, ticks with times since the trace start below,
 * and the range being selected, if any.
 * @param {CanvasRenderingContext2D} ctx
 * @param {{width: number, height: number, win: TimeWindow, origin: number, steps: Step[],
 *          range?: [number, number]|null}} view
 */
export function drawRuler(ctx, { width, height, win, origin, steps, range = null }) {
  ctx.clearRect(0, 0, width, height);
  const strip = 16;
  ctx.fillStyle = "#fafafa";
  ctx.fillRect(0, 0, width, strip);
  drawStepBands(ctx, steps, win, width, 0, height);
  ctx.font = STEP_FONT;
  ctx.textBaseline = "middle";
  ctx.fillStyle = "#5f6368";
  for (const step of steps) {
    const px = boxPixels(step.start_us, step.end_us - step.start_us, win, width, 0);
    if (!px) continue;
    const left = Math.max(px[0], 0) + 4;
    const text = fitLabel(stepLabel(step.step), Math.min(px[1], width) - left - 4, (s) => ctx.measureText(s).width);
    if (text) ctx.fillText(text, left, strip / 2 + 0.5);
  }
  ctx.fillStyle = "#dadce0";
  ctx.fillRect(0, strip, width, 1);
  ctx.fillRect(0, height - 1, width, 1);

  const { step, ticks } = rulerTicks(win, width, origin);
  const maxOffset = Math.max(Math.abs(win.start_us - origin), Math.abs(win.end_us - origin));
  // Minor ticks: five per step.
  ctx.fillStyle = "#bdc1c6";
  const minor = step / 5;
  const firstMinor = Math.ceil((win.start_us - origin) / minor);
  for (let k = firstMinor; origin + k * minor <= win.end_us && k - firstMinor < 2000; k += 1) {
    ctx.fillRect(Math.round(xOf(origin + k * minor, win, width)), height - 5, 1, 4);
  }
  ctx.font = RULER_FONT;
  ctx.textBaseline = "alphabetic";
  for (const tick of ticks) {
    const x = Math.round(tick.x);
    ctx.fillStyle = "#80868b";
    ctx.fillRect(x, strip + 1, 1, height - strip - 2);
    ctx.fillStyle = "#3c4043";
    ctx.fillText(formatTick(tick.offset, step, maxOffset), x + 4, height - 7);
  }
  if (range) drawRange(ctx, range, win, width, height);
}

/**
 * "Step 12" for "ProfilerStep#12" or "12"; other names as they are.
 * @param {string} name
 */
export function stepLabel(name) {
  const match = /^(?:ProfilerStep#)?(\d+)$/.exec(name);
  return match ? `Step ${match[1]}` : name;
}

/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {[number, number]} range times, either order
 * @param {TimeWindow} win
 * @param {number} width
 * @param {number} height
 */
function drawRange(ctx, range, win, width, height) {
  const x0 = xOf(Math.min(...range), win, width);
  const x1 = xOf(Math.max(...range), win, width);
  ctx.fillStyle = "rgba(26, 115, 232, 0.12)";
  ctx.fillRect(x0, 0, x1 - x0, height);
  ctx.fillStyle = "rgba(26, 115, 232, 0.8)";
  ctx.fillRect(Math.round(x0), 0, 1, height);
  ctx.fillRect(Math.round(x1), 0, 1, height);
}

/**
 * Draws what changes without new data: search matches, the hovered and the selected event, flow
 * arrows from the selected event to its linked events, and the range being selected.
 * @param {CanvasRenderingContext2D} ctx
 * @param {{width: number, height: number, scrollTop: number, layout: Layout, data: WindowData|null,
 *          win: TimeWindow, selected: Placed|null, hover: Placed|null, matches: Set<number>,
 *          flows: Placed[], range: [number, number]|null}} view
 */
export function drawOverlay(ctx, { width, height, scrollTop, layout, data, win, selected, hover, matches, flows, range }) {
  ctx.clearRect(0, 0, width, height);
  const boxH = layout.rowPx - 2;
  /** @param {Placed} p @returns {[number, number, number]|null} x, y, w */
  const rect = (p) => {
    const item = layout.lanes.get(p.lane);
    if (!item) return null;
    const px = boxPixels(p.start_us, p.dur_us, win, width, 1);
    const y = rowTop(layout, item, p.row) - scrollTop + 1;
    if (!px || y + boxH < 0 || y > height) return null;
    return [px[0], y, px[1] - px[0]];
  };
  if (data && matches.size) {
    ctx.strokeStyle = ACCENT;
    ctx.lineWidth = 1.5;
    for (const id of matches) {
      const p = placeOf(data, id);
      const r = p && rect(p);
      if (r) ctx.strokeRect(r[0] - 0.75, r[1] - 0.75, Math.max(r[2], 1) + 1.5, boxH + 1.5);
    }
  }
  if (hover && (!selected || hover.id !== selected.id)) {
    const r = rect(hover);
    if (r) {
      ctx.strokeStyle = "rgba(32, 33, 36, 0.75)";
      ctx.lineWidth = 1;
      ctx.strokeRect(r[0] - 0.5, r[1] - 0.5, Math.max(r[2], 1) + 1, boxH + 1);
    }
  }
  if (selected) {
    for (const target of flows) drawArrow(ctx, layout, win, width, scrollTop, selected, target);
    const r = rect(selected);
    if (r) {
      ctx.strokeStyle = "#ffffff";
      ctx.lineWidth = 4;
      ctx.strokeRect(r[0] - 1, r[1] - 1, Math.max(r[2], 1) + 2, boxH + 2);
      ctx.strokeStyle = "#202124";
      ctx.lineWidth = 2;
      ctx.strokeRect(r[0] - 1, r[1] - 1, Math.max(r[2], 1) + 2, boxH + 2);
    }
  }
  if (range) drawRange(ctx, range, win, width, height);
}

/**
 * A flow arrow between two events, from the one that starts first to the other's start.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Layout} layout
 * @param {TimeWindow} win
 * @param {number} width
 * @param {number} scrollTop
 * @param {Placed} a
 * @param {Placed} b
 */
function drawArrow(ctx, layout, win, width, scrollTop, a, b) {
  const ia = layout.lanes.get(a.lane);
  const ib = layout.lanes.get(b.lane);
  if (!ia || !ib) return;
  const [from, to, fromItem, toItem] = a.start_us <= b.start_us ? [a, b, ia, ib] : [b, a, ib, ia];
  const x0 = xOf(from.start_us, win, width);
  const x1 = xOf(to.start_us, win, width);
  const y0 = rowTop(layout, fromItem, from.row) - scrollTop + layout.rowPx / 2;
  const y1 = rowTop(layout, toItem, to.row) - scrollTop + layout.rowPx / 2;
  const bend = Math.max(24, Math.abs(x1 - x0) * 0.4);
  ctx.strokeStyle = "rgba(32, 33, 36, 0.85)";
  ctx.fillStyle = "rgba(32, 33, 36, 0.85)";
  ctx.lineWidth = 1.25;
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.bezierCurveTo(x0 + bend, y0, x1 - bend, y1, x1, y1);
  ctx.stroke();
  // The head points along the curve's last tangent (horizontal, into the target's start).
  ctx.beginPath();
  ctx.moveTo(x1, y1);
  ctx.lineTo(x1 - 7, y1 - 4);
  ctx.lineTo(x1 - 7, y1 + 4);
  ctx.closePath();
  ctx.fill();
  ctx.beginPath();
  ctx.arc(x0, y0, 2.5, 0, Math.PI * 2);
  ctx.fill();
}
