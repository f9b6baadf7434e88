/**
 * The trace timeline's model, without drawing: lane layout (a header per process, lanes as tall
 * as their sub-rows, folded lanes one row), event colours, box names, the window data indexed for
 * drawing, and hit testing. Pure functions.
 * @module lib/lanes
 */

import { formatCount, formatOffset, formatRatio, formatUs, shortKernelName } from "./format.js";

/**
 * @typedef {import("./viewport.js").TimeWindow} TimeWindow
 * @typedef {{id: number, process: string, name: string, kind: "cpu"|"gpu"|"other", rows: number, events: number,
 *            stack_rows?: number}} Lane
 * @typedef {{step: string, start_us: number, end_us: number, host_start_us?: number, host_end_us?: number,
 *            lane?: number|null}} Step
 * @typedef {{type: "process", label: string, y: number, h: number}} ProcessItem
 * @typedef {{type: "lane", lane: Lane, y: number, h: number, collapsed: boolean, fold: [number, number]|null}} LaneItem
 *   `fold` [from, to]: rows from..to-1 drawn over each other on row `from` (the deepest on top)
 * @typedef {{items: (ProcessItem|LaneItem)[], lanes: Map<number, LaneItem>, height: number, rowPx: number, padPx: number}} Layout
 * @typedef {{id: number[], start_us: number[], dur_us: number[], row: number[], name: number[], kind: number[]}} Boxes
 * @typedef {{start_us: number[], end_us: number[], row: number[], count: number[], busy_us: number[], kind: number[]}} Merged
 * @typedef {{id: number, boxes: Boxes, merged: Merged, groups: [string, number[]][], fills: string[], byRow: number[]}} WindowLane
 * @typedef {{start_us: number, end_us: number, width_px: number, names: string[], kinds: string[],
 *            lanes: Map<number, WindowLane>, index: Map<number, {lane: number, i: number}>,
 *            boxCount: number, mergedCount: number, labels: (string|null)[], present: Set<string>,
 *            flows: WindowFlows}} WindowData
 * @typedef {{cat: string, from: Placed, to: Placed}} Arrow
 * @typedef {{total: number|null, arrows: Arrow[]}} WindowFlows
 * @typedef {{kind: "box", lane: number, index: number, id: number} | {kind: "merged", lane: number, index: number}} Hit
 * @typedef {{id: number, lane: number, row: number, start_us: number, dur_us: number}} Placed
 */

export const ROW_PX = 14;
export const LANE_PAD_PX = 3;
export const PROCESS_PX = 22;
/** Boxes narrower than this get no name. */
export const LABEL_MIN_PX = 28;
// ---------------------------------------------------------------- layout

/**
 * How many rows of Python frames a lane shows until the user unfolds them: the two outermost
 * (the script and its training loop, which say what phase the time is in) and one row holding
 * every deeper frame, the deepest drawn on top (the innermost Python call, the one that ran the
 * operators below it). Three rows instead of tens keep the operators and the GPU streams on the
 * first screen.
 */
export const STACK_ROWS = 3;

/**
 * The rows of a lane drawn over each other: all of a folded lane's, or its Python frames past
 * the first `stackRows - 1` (null: none).
 * @param {Lane} lane @param {boolean} collapsed @param {number} stackRows
 * @returns {[number, number]|null}
 */
function foldOf(lane, collapsed, stackRows) {
  const rows = Math.max(1, lane.rows || 0);
  if (collapsed) return rows > 1 ? [0, rows] : null;
  const frames = lane.stack_rows || 0;
  return frames > stackRows ? [stackRows - 1, frames] : null;
}

/**
 * Stacks lanes top to bottom, a header row before each process's lanes; a lane is as tall as its
 * sub-rows (overlapping events on one stream or nested calls on one thread), a collapsed lane one
 * row (its rows drawn over each other, the deepest on top), and a lane's Python frames past
 * `stackRows` rows drawn over each other on its last frame row (Infinity: every frame row).
 * @param {Lane[]} lanes in the API's order
 * @param {{rowPx?: number, padPx?: number, processPx?: number, collapsed?: Set<number>, stackRows?: number}} [options]
 * @returns {Layout}
 */
export function laneLayout(lanes, {
  rowPx = ROW_PX, padPx = LANE_PAD_PX, processPx = PROCESS_PX, collapsed = new Set(), stackRows = Infinity,
} = {}) {
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
    const fold = foldOf(lane, folded, stackRows);
    const rows = Math.max(1, lane.rows || 0) - (fold ? fold[1] - fold[0] - 1 : 0);
    const h = rows * rowPx + 2 * padPx;
    /** @type {LaneItem} */ const item = { type: "lane", lane, y, h, collapsed: folded, fold };
    items.push(item);
    byId.set(lane.id, item);
    y += h;
  }
  return { items, lanes: byId, height: y, rowPx, padPx };
}

/**
 * The row a sub-row is drawn on: rows of a fold on its first, the rows below it moved up.
 * @param {LaneItem} item
 * @param {number} row
 */
export function shownRow(item, row) {
  const fold = item.fold;
  if (!fold || row < fold[0]) return row;
  return row < fold[1] ? fold[0] : row - (fold[1] - fold[0] - 1);
}

/**
 * The top of sub-row `row` of a lane, in content px (rows of a fold share its first row's top).
 * @param {Layout} layout
 * @param {LaneItem} item
 * @param {number} row
 */
export function rowTop(layout, item, row) {
  return item.y + layout.padPx + shownRow(item, row) * layout.rowPx;
}

/**
 * The lane item and drawn row at content y, with the sub-rows drawn there (`rows`: first, last;
 * several on a fold's row), or null (a process header, padding, below the last lane).
 * @param {Layout} layout
 * @param {number} y
 * @returns {{item: LaneItem, row: number, rows: [number, number]}|null}
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
      if (row < 0 || row >= (it.h - 2 * layout.padPx) / layout.rowPx) return null;
      return { item: it, row, rows: rowsAt(it, row) };
    }
  }
  return null;
}

/**
 * The sub-rows drawn on row `row` of a lane: first and last.
 * @param {LaneItem} item @param {number} row @returns {[number, number]}
 */
function rowsAt(item, row) {
  const fold = item.fold;
  if (!fold || row < fold[0]) return [row, row];
  if (row === fold[0]) return [fold[0], fold[1] - 1];
  return [row + fold[1] - fold[0] - 1, row + fold[1] - fold[0] - 1];
}

/**
 * Lanes folded so that the GPU streams fit `heightPx` under the host lanes: host lanes with
 * several rows, fewest events first (the backward thread, busy, comes late), never the main
 * thread's (the lanes of the steps' ProfilerStep events).
 * @param {Layout} layout
 * @param {number} heightPx
 * @param {Step[]} steps `/api/trace/lanes`' steps, with their `lane`
 * @returns {number[]} lane ids to fold, in the order folded
 */
export function firstScreenFolds(layout, heightPx, steps) {
  const lanes = /** @type {LaneItem[]} */ ([...layout.lanes.values()]);
  const gpu = lanes.filter((i) => i.lane.kind === "gpu");
  if (!gpu.length) return [];
  let bottom = Math.max(...gpu.map((i) => i.y + i.h));
  const oneRow = layout.rowPx + 2 * layout.padPx;
  const host = lanes.filter((i) => i.lane.kind !== "gpu" && !i.collapsed && i.h > oneRow);
  const main = new Set(steps.map((s) => s.lane));
  const folds = [];
  const foldable = host.filter((i) => !main.has(i.lane.id));
  for (const item of foldable.sort((a, b) => a.lane.events - b.lane.events)) {
    if (bottom <= heightPx) break;
    bottom -= item.h - oneRow;
    folds.push(item.lane.id);
  }
  return folds;
}

// ---------------------------------------------------------------- kinds and colours

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
 * The colour of merged blocks of a kind family, as the HSL parts of an `hsla(...)`:
 * the family's middle hue, a little darker than its boxes.
 * @param {string} kind
 * @returns {string} e.g. "217, 58%, 42%"
 */
export function kindTint(kind) {
  const [h0, h1, s, l0] = FAMILIES[kind in FAMILIES ? kind : "other"];
  return `${Math.round((h0 + h1) / 2) % 360}, ${s}%, ${Math.max(l0 - 8, 20)}%`;
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
    const merged = lane.merged || { start_us: [], end_us: [], row: [], count: [], busy_us: [], kind: [] };
    for (const k of merged.kind || []) present.add(kinds[k] || "other");
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
    flows: windowFlows(body.flows),
  };
}

/**
 * The window's flow arrows as pairs of placed ends; `total` counts them (null: too many to
 * count), and no arrows come when there are too many to draw.
 * @param {{total: number|null, cat: string[], from_id: number[], from_lane: number[], from_row: number[],
 *          from_us: number[], to_id: number[], to_lane: number[], to_row: number[], to_us: number[]}|undefined} body
 * @returns {WindowFlows}
 */
export function windowFlows(body) {
  if (!body) return { total: 0, arrows: [] };
  const arrows = body.cat.map((cat, i) => ({
    cat,
    from: { id: body.from_id[i], lane: body.from_lane[i], row: body.from_row[i], start_us: body.from_us[i], dur_us: 0 },
    to: { id: body.to_id[i], lane: body.to_lane[i], row: body.to_row[i], start_us: body.to_us[i], dur_us: 0 },
  }));
  return { total: body.total, arrows };
}

/**
 * What is under the pointer: the innermost box of that sub-row (of any row drawn there in a fold,
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
  const [first, last] = at.rows;
  /** @type {Hit|null} */ let best = null;
  let bestMiss = Infinity;
  let bestRow = -1;
  let bestDur = Infinity;
  const b = lane.boxes;
  for (let i = 0; i < b.id.length; i += 1) {
    if (b.row[i] < first || b.row[i] > last) continue;
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
    if (m.row[i] < first || m.row[i] > last) continue;
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

/** Opacity of merged blocks by how busy they are: under a quarter, a half, three quarters, more. */
export const MERGED_ALPHA = [0.28, 0.42, 0.56, 0.7];

/**
 * Which opacity step a merged block gets: its busy time over its span, in quarters.
 * @param {number} busyUs
 * @param {number} spanUs
 */
export function mergedBucket(busyUs, spanUs) {
  if (!(spanUs > 0) || !(busyUs > 0)) return 0;
  return Math.max(0, Math.min(3, Math.floor((busyUs / spanUs) * 4)));
}

/**
 * Where the ruler names a step: the range of its ProfilerStep#N on the host (what the CPU lanes
 * show), and the device tail after it (GPU work the step launched that ends later), if any.
 * @param {Step} step
 * @returns {{start_us: number, end_us: number, tail: [number, number]|null}}
 */
export function stepRange(step) {
  const start = step.host_start_us ?? step.start_us;
  const end = step.host_end_us ?? step.end_us;
  return { start_us: start, end_us: end, tail: step.end_us > end ? [end, step.end_us] : null };
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
 * Lane ids from the URL's `collapse` ("3,4").
 * @param {string|undefined} text
 * @returns {Set<number>}
 */
export function parseCollapsed(text) {
  const parts = String(text || "").split(",").map((part) => part.trim()).filter(Boolean);
  return new Set(parts.map(Number).filter((n) => Number.isInteger(n)));
}

/**
 * The hover text of a box or merged block.
 * @param {WindowData} data
 * @param {Hit} hit
 * @param {number} origin
 * @returns {{title: string, lines: string[]}}
 */
export function tooltipText(data, hit, origin) {
  const lane = /** @type {WindowLane} */ (data.lanes.get(hit.lane));
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
 * @param {{id: number, lane: number, row?: number, start_us: number, dur_us: number}} link
 * @param {WindowData|null} data
 * @returns {Placed}
 */
export function placeLink(link, data) {
  const drawn = placeOf(data, link.id);
  const row = Number.isInteger(link.row) ? /** @type {number} */ (link.row) : drawn ? drawn.row : 0;
  return { id: link.id, lane: link.lane, row, start_us: link.start_us, dur_us: link.dur_us };
}

// ---------------------------------------------------------------- flow types

/** The flow type of a details link's arrow; the operator tree's links (operator, parent) have none. */
const LINK_FLOW_TYPES = Object.freeze({ launches: "ac2g", "launched by": "ac2g", forward: "fwdbwd", backward: "fwdbwd" });

/**
 * The flow types drawn, from the URL's `flows`: absent, every type of the trace; "0", none;
 * else the listed ones the trace has, in the trace's order.
 * @param {string|undefined} text
 * @param {string[]} types the trace's (`/api/trace/lanes`' `flow_types`)
 * @returns {string[]}
 */
export function parseFlowTypes(text, types) {
  if (text === undefined || text === null) return [...types];
  const asked = new Set(String(text).split(",").map((part) => part.trim()));
  return types.filter((t) => asked.has(t));
}

/**
 * The URL's `flows` for the types drawn: null (absent) for all of them, "0" for none.
 * @param {string[]} chosen
 * @param {string[]} types the trace's
 * @returns {string|null}
 */
export function flowTypesParam(chosen, types) {
  const kept = types.filter((t) => chosen.includes(t));
  if (kept.length === types.length) return null;
  return kept.length ? kept.join(",") : "0";
}

/**
 * Whether the arrow to a linked event is drawn: a launch or forward/backward link when its flow
 * type is, the operator tree's links always (they belong to the selection, not to a flow type).
 * @param {string} relation
 * @param {string[]} chosen
 */
export function linkDrawn(relation, chosen) {
  const type = LINK_FLOW_TYPES[/** @type {keyof LINK_FLOW_TYPES} */ (relation)];
  return type ? chosen.includes(type) : true;
}
