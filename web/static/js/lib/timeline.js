/**
 * The trace timeline on <canvas>: the drawing of lanes, the time ruler and the overlay (selection,
 * hover, search matches, flow arrows, a range being selected). The model it draws (layout, colours,
 * window data, hit testing) is lib/lanes.js.
 *
 * The server does the level of detail: `/api/trace/window` sends per lane the events wide enough
 * to see ("boxes") and merged blocks for the rest; this module draws what it sends, at whatever
 * window is on screen (older data is drawn scaled until newer data arrives). The lane labels and
 * the colour key beside the canvas are DOM, built here too.
 * @module lib/timeline
 */

import { el } from "./dom.js";
import { formatCount, formatTick } from "./format.js";
import {
  LABEL_MIN_PX, MERGED_ALPHA, boxLabel, eventColor, fitLabel, kindLabel, kindTint, mergedBucket, placeOf, rowTop,
  shownRow, stepLabel, stepRange,
} from "./lanes.js";
import { boxPixels, rulerTicks, xOf } from "./viewport.js";

/**
 * @typedef {import("./viewport.js").TimeWindow} TimeWindow
 * @typedef {import("./lanes.js").Step} Step
 * @typedef {import("./lanes.js").Layout} Layout
 * @typedef {import("./lanes.js").LaneItem} LaneItem
 * @typedef {import("./lanes.js").WindowData} WindowData
 * @typedef {import("./lanes.js").WindowLane} WindowLane
 * @typedef {import("./lanes.js").Placed} Placed
 * @typedef {import("./lanes.js").Arrow} Arrow
 */

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
const BOX_FONT = `10px ${FONT}`;
const RULER_FONT = `11px ${FONT}`;
const STEP_FONT = `600 10px ${FONT}`;
const STEP_SHADE = "rgba(60, 64, 67, 0.035)";
const STEP_LINE = "rgba(60, 64, 67, 0.22)";
const GRID_LINE = "rgba(60, 64, 67, 0.07)";
/** A step's device tail on the ruler: GPU work it launched that ends after its host range. */
const STEP_TAIL = "rgba(25, 103, 210, 0.45)";
const ACCENT = "#f57c00";
/** Arrows of the selected event, and the window's arrows by flow kind (fainter). */
const SELECTED_ARROW = "rgba(32, 33, 36, 0.85)";
const ARROW_COLORS = { ac2g: "rgba(25, 103, 210, 0.45)", fwdbwd: "rgba(142, 36, 170, 0.5)" };
const ARROW_LABELS = { ac2g: "Launch → GPU", fwdbwd: "Forward → backward" };
const FLOW_TITLES = {
  ac2g: "Arrows from each runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...) to the GPU work it queued (ac2g)",
  fwdbwd: "Arrows from each forward operator to the backward operator autograd ran for it (fwdbwd)",
};

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
 * Draws step bands (each step's ProfilerStep#N on the host): every other step shaded, a line at
 * each boundary, over the full height.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Step[]} steps
 * @param {TimeWindow} win
 * @param {number} width
 * @param {number} top
 * @param {number} height
 */
function drawStepBands(ctx, steps, win, width, top, height) {
  const ranges = steps.map(stepRange);
  ctx.fillStyle = STEP_SHADE;
  ranges.forEach((range, k) => {
    if (k % 2 === 1) return;
    const px = boxPixels(range.start_us, range.end_us - range.start_us, win, width, 0);
    if (px) ctx.fillRect(px[0], top, px[1] - px[0], height);
  });
  ctx.fillStyle = STEP_LINE;
  for (const range of ranges) {
    for (const t of [range.start_us, range.end_us]) {
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
    const fold = item.fold;
    const shown = (/** @type {number} */ row) => shownRow(item, row);
    // Names of rows drawn over each other would be drawn over each other too.
    const named = (/** @type {number} */ row) => !fold || row < fold[0] || row >= fold[1];
    const rowVisible = (/** @type {number} */ row) => {
      const y = base + shown(row) * rowPx;
      return y + rowPx >= 0 && y <= height;
    };
    // Merged blocks first: a box drawn over one (it happens at block edges) stays readable.
    const m = lane.merged;
    // Blocks by (kind, busyness): each group is one fill colour.
    /** @type {Map<string, [number, number, number][]>} */ const buckets = new Map();
    for (let i = 0; i < m.start_us.length; i += 1) {
      if (!rowVisible(m.row[i])) continue;
      const span = m.end_us[i] - m.start_us[i];
      const px = boxPixels(m.start_us[i], span, win, width, 1);
      if (!px) continue;
      const x0 = snap(px[0]);
      const kind = data.kinds[m.kind[i]] || "other";
      const key = `${kind}|${mergedBucket(m.busy_us[i], span)}`;
      if (!buckets.has(key)) buckets.set(key, []);
      /** @type {[number, number, number][]} */ (buckets.get(key)).push(
        [x0, base + shown(m.row[i]) * rowPx, Math.max(1, snap(px[1]) - x0)]);
      merged += 1;
    }
    buckets.forEach((rects, key) => {
      const [kind, bucket] = key.split("|");
      ctx.fillStyle = `hsla(${kindTint(kind)}, ${MERGED_ALPHA[Number(bucket)]})`;
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
      if (w >= LABEL_MIN_PX && named(b.row[i])) labelled.push([lane.id, i, x0, w]);
    };
    if (fold) {
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
 * Draws the time ruler: step names on a top strip over each step's ProfilerStep#N on the host, a
 * thin bar under the strip for its device tail, ticks with times since the trace start below,
 * and the range being selected, if any.
 * @param {CanvasRenderingContext2D} ctx
 * @param {{width: number, height: number, win: TimeWindow, origin: number, steps: Step[],
 *          range?: [number, number]|null}} view
 * @returns {{label: string, start_us: number, end_us: number}[]} the step names drawn and where
 */
export function drawRuler(ctx, { width, height, win, origin, steps, range = null }) {
  ctx.clearRect(0, 0, width, height);
  const strip = 16;
  ctx.fillStyle = "#fafafa";
  ctx.fillRect(0, 0, width, strip);
  drawStepBands(ctx, steps, win, width, 0, height);
  ctx.font = STEP_FONT;
  ctx.textBaseline = "middle";
  /** @type {{label: string, start_us: number, end_us: number}[]} */ const named = [];
  for (const step of steps) {
    const at = stepRange(step);
    const tail = at.tail && boxPixels(at.tail[0], at.tail[1] - at.tail[0], win, width, 0);
    if (tail) {
      ctx.fillStyle = STEP_TAIL;
      ctx.fillRect(tail[0], strip - 3, tail[1] - tail[0], 2);
    }
    const px = boxPixels(at.start_us, at.end_us - at.start_us, win, width, 0);
    if (!px) continue;
    const left = Math.max(px[0], 0) + 4;
    const text = fitLabel(stepLabel(step.step), Math.min(px[1], width) - left - 4, (s) => ctx.measureText(s).width);
    if (!text) continue;
    ctx.fillStyle = "#5f6368";
    ctx.fillText(text, left, strip / 2 + 0.5);
    named.push({ label: text, start_us: at.start_us, end_us: at.end_us });
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
  return named;
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
 * Draws what changes without new data: search matches, the hovered and the selected event, the
 * window's flow arrows (faint), arrows from the selected event to its linked events, and the
 * range being selected.
 * @param {CanvasRenderingContext2D} ctx
 * @param {{width: number, height: number, scrollTop: number, layout: Layout, data: WindowData|null,
 *          win: TimeWindow, selected: Placed|null, hover: Placed|null, matches: Set<number>,
 *          arrows: Arrow[], flows: Placed[], range: [number, number]|null}} view
 */
export function drawOverlay(ctx, { width, height, scrollTop, layout, data, win, selected, hover, matches, arrows, flows, range }) {
  ctx.clearRect(0, 0, width, height);
  for (const arrow of arrows) {
    drawArrow(ctx, layout, win, width, scrollTop, arrow.from, arrow.to, ARROW_COLORS[arrow.cat] || SELECTED_ARROW);
  }
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
    for (const target of flows) drawArrow(ctx, layout, win, width, scrollTop, selected, target, SELECTED_ARROW);
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
 * @param {string} color
 */
function drawArrow(ctx, layout, win, width, scrollTop, a, b, color) {
  const ia = layout.lanes.get(a.lane);
  const ib = layout.lanes.get(b.lane);
  if (!ia || !ib) return;
  const [from, to, fromItem, toItem] = a.start_us <= b.start_us ? [a, b, ia, ib] : [b, a, ib, ia];
  const x0 = xOf(from.start_us, win, width);
  const x1 = xOf(to.start_us, win, width);
  const y0 = rowTop(layout, fromItem, from.row) - scrollTop + layout.rowPx / 2;
  const y1 = rowTop(layout, toItem, to.row) - scrollTop + layout.rowPx / 2;
  const bend = Math.max(24, Math.abs(x1 - x0) * 0.4);
  ctx.strokeStyle = color;
  ctx.fillStyle = color;
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

// ---------------------------------------------------------------- labels and key (DOM)

/**
 * The label column: a header per process and a label per lane, buttons that fold lanes (a folded
 * lane is one row, its calls drawn over each other); a process header folds all its lanes.
 * @param {HTMLElement} node
 * @param {import("./lanes.js").Layout} layout
 * @param {(ids: number[], fold: boolean) => void} onFold
 */
export function drawLaneLabels(node, layout, onFold) {
  const items = layout.items;
  node.replaceChildren(...items.map((item, k) => {
    if (item.type === "process") {
      /** @type {import("./lanes.js").LaneItem[]} */ const own = [];
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
        + (item.fold && !item.collapsed ? `\nPython frames: rows ${item.fold[0] + 1} to ${lane.stack_rows} drawn on one`
          + " (the innermost on top; Full Python stacks unfolds them)" : "")
        + (lane.rows > 1 ? `\nClick to ${item.collapsed ? "unfold" : "fold"} its rows` : ""),
      attrs: { type: "button", style: `height: ${item.h}px`, "data-lane": String(lane.id), "aria-expanded": String(!item.collapsed) },
    }, [el("span", { class: "tl-lane-name", text: lane.name })]);
    if (lane.rows > 1) button.addEventListener("click", () => onFold([lane.id], !item.collapsed));
    else button.disabled = true;
    return button;
  }));
}

/**
 * A colour key of the kinds drawn now (in the API's kind order), of merged blocks, and of the
 * flow arrows (or how many there are when too many to draw).
 * @param {HTMLElement} node
 * @param {string[]} kinds every kind name
 * @param {Set<string>} present the kinds drawn
 * @param {boolean} merged whether merged blocks are drawn
 * @param {import("./lanes.js").WindowFlows|null} flows the window's arrows, null when not shown
 */
export function drawLegend(node, kinds, present, merged, flows) {
  const shown = kinds.filter((k) => present.has(k));
  const cats = flows ? [...new Set(flows.arrows.map((a) => a.cat))].sort() : [];
  const hidden = flows && !flows.arrows.length && flows.total !== 0 ? flows.total : 0;
  const signature = JSON.stringify([shown, merged, cats, hidden]);
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
  for (const cat of cats) {
    items.push(el("span", { class: "legend-item", testid: "legend-flow" }, [
      el("span", { class: "swatch swatch-arrow", attrs: { style: `background: ${ARROW_COLORS[cat] || SELECTED_ARROW}` } }),
      ARROW_LABELS[cat] || cat,
    ]));
  }
  if (hidden !== 0) {
    const count = hidden === null ? "Too many" : formatCount(hidden);
    items.push(el("span", { class: "legend-item legend-note", testid: "legend-flow-note",
      text: `${count} flow arrows here: zoom in to draw them` }));
  }
  node.replaceChildren(...items);
}

/**
 * A checkbox per flow type of the trace, each with its arrows' colour; hidden when it has none.
 * @param {HTMLElement} node
 * @param {string[]} types the trace's flow types
 * @param {string[]} chosen the types drawn
 * @param {(chosen: string[]) => void} onChange
 */
export function drawFlowToggles(node, types, chosen, onChange) {
  node.hidden = !types.length;
  /** @type {HTMLInputElement[]} */ const boxes = [];
  const items = types.map((type) => {
    const box = /** @type {HTMLInputElement} */ (el("input", { testid: "toggle-flow",
      attrs: { type: "checkbox", "data-type": type } }));
    box.checked = chosen.includes(type);
    box.addEventListener("change", () => onChange(boxes.filter((b) => b.checked).map((b) => String(b.dataset.type))));
    boxes.push(box);
    return el("label", { class: "check", title: FLOW_TITLES[type] || `Flow events of category ${type}` }, [
      box, el("span", { class: "swatch swatch-arrow", attrs: { style: `background: ${ARROW_COLORS[type] || SELECTED_ARROW}` } }),
      ARROW_LABELS[type] || type,
    ]);
  });
  node.replaceChildren(el("span", { class: "control-label", text: "Flows" }), ...items);
}
