/**
 * The Trace view's critical path (/api/trace/critical_path): where its segments are drawn over the
 * lanes, how they are drawn (each event on the path outlined in its bound's colour, consecutive
 * ones joined by a line), and the breakdown by bound beside the timeline (a stacked bar and a table).
 * The shaping functions are pure; `drawCriticalPath` and `drawBreakdown` draw.
 * @module critpath
 */

import { el } from "./dom.js";
import { formatRatio, formatUs } from "./format.js";
import { rowTop } from "./lanes.js";
import { boxPixels, xOf } from "./viewport.js";

/**
 * @typedef {{kind: string, bound: string, start_us: number, end_us: number, id: number|null,
 *            lane: number|null, row: number|null}} Segment
 * @typedef {{step: string, start_us: number, end_us: number, total_us: number, steps: string[],
 *            segments: Segment[], breakdown: Record<string, number>, approximated: string[]}} CriticalPath
 * @typedef {{x: number, y: number, w: number, bound: string}} Mark
 */

/** The bounds in the API's order, with their labels and colours. */
export const BOUNDS = Object.freeze([
  { id: "cpu", label: "CPU", color: "#1967d2" },
  { id: "data_loading", label: "Data loading", color: "#8e24aa" },
  { id: "launch_overhead", label: "Launch overhead", color: "#f9ab00" },
  { id: "gpu_compute", label: "GPU compute", color: "#188038" },
  { id: "communication", label: "Communication", color: "#00838f" },
  { id: "kernel_overhead", label: "Kernel-to-kernel", color: "#e8710a" },
  { id: "sync", label: "Sync", color: "#d93025" },
]);
const COLOR = Object.fromEntries(BOUNDS.map((b) => [b.id, b.color]));
/** The line joining consecutive events of the path. */
const LINK = "rgba(217, 48, 37, 0.85)";

/**
 * The breakdown's rows: the bounds with time, largest first, with their share of the step.
 * @param {CriticalPath} path
 * @returns {{id: string, label: string, color: string, us: number, share: number}[]}
 */
export function breakdownRows(path) {
  const total = path.total_us > 0 ? path.total_us : 1;
  return BOUNDS.map((b) => ({ ...b, us: path.breakdown[`${b.id}_us`] || 0 }))
    .filter((r) => r.us > 0)
    .map((r) => ({ ...r, share: r.us / total }))
    .sort((a, b) => b.us - a.us);
}

/**
 * Where the path is drawn: a mark per segment whose event is on a lane shown (in plot px, y the
 * row's top), and the lines joining each mark to the next one (its end to the next one's start,
 * at mid-row); segments without an event (host time between operators, gaps between GPU work)
 * are crossed by the line.
 * @param {CriticalPath} path
 * @param {import("./lanes.js").Layout} layout
 * @param {import("./viewport.js").TimeWindow} win
 * @param {number} width
 * @param {number} scrollTop
 * @returns {{marks: Mark[], links: [number, number, number, number][]}}
 */
export function pathMarks(path, layout, win, width, scrollTop) {
  /** @type {Mark[]} */ const marks = [];
  /** @type {[number, number, number, number][]} */ const links = [];
  const half = layout.rowPx / 2;
  /** @type {{x: number, y: number}|null} */ let last = null;
  for (const s of path.segments) {
    const item = s.lane === null ? undefined : layout.lanes.get(s.lane);
    if (!item || s.row === null) continue;
    const y = rowTop(layout, item, s.row) - scrollTop + 1;
    if (last) links.push([last.x, last.y, xOf(s.start_us, win, width), y + half - 1]);
    last = { x: xOf(s.end_us, win, width), y: y + half - 1 };
    const px = boxPixels(s.start_us, s.end_us - s.start_us, win, width, 2);
    if (px) marks.push({ x: px[0], y, w: px[1] - px[0], bound: s.bound });
  }
  return { marks, links };
}

/**
 * Draws the path's marks and links on the overlay (over what is already there).
 * @param {CanvasRenderingContext2D} ctx
 * @param {{marks: Mark[], links: [number, number, number, number][]}} drawn
 * @param {number} boxH
 */
export function drawCriticalPath(ctx, { marks, links }, boxH) {
  ctx.save();
  ctx.strokeStyle = LINK;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  for (const [x0, y0, x1, y1] of links) {
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1, y1);
  }
  ctx.stroke();
  ctx.lineWidth = 2;
  for (const m of marks) {
    ctx.strokeStyle = COLOR[m.bound] || LINK;
    ctx.strokeRect(m.x - 1, m.y - 1, Math.max(m.w, 1) + 2, boxH + 2);
  }
  ctx.restore();
}

/**
 * The breakdown panel: a step picker, a stacked bar, a table by bound and what was approximated.
 * @param {HTMLElement} node
 * @param {CriticalPath} path
 * @param {(step: string) => void} onStep
 */
export function drawBreakdown(node, path, onStep) {
  const rows = breakdownRows(path);
  const options = path.steps.map((s) => el("option", { text: `Step ${s}`, attrs: { value: s } }));
  const picker = /** @type {HTMLSelectElement} */ (
    el("select", { testid: "critical-path-step", attrs: { "aria-label": "Step" } }, options));
  picker.value = path.step;
  picker.addEventListener("change", () => onStep(picker.value));
  const bar = el("div", { class: "critpath-bar", testid: "critical-path-bar" }, rows.map((r) => {
    const part = el("span", { title: `${r.label}: ${formatUs(r.us)} (${formatRatio(r.share, 1)})` });
    part.style.width = `${(r.share * 100).toFixed(3)}%`;
    part.style.background = r.color;
    return part;
  }));
  const table = el("table", { class: "critpath-table", testid: "critical-path-breakdown" }, [
    el("tbody", {}, rows.map((r) => el("tr", { attrs: { "data-bound": r.id } }, [
      el("td", {}, [swatch(r.color), r.label]),
      el("td", { class: "num", text: formatUs(r.us) }),
      el("td", { class: "num", text: formatRatio(r.share, 1) }),
    ]))),
  ]);
  node.replaceChildren(
    el("div", { class: "critpath-head" }, [
      el("strong", { text: "Critical path" }), picker,
      el("span", { class: "critpath-total", text: `${formatUs(path.total_us)} · ${path.segments.length} segments` }),
    ]),
    bar, table,
    path.approximated.length ? el("ul", { class: "critpath-approx", testid: "critical-path-approximated" },
      path.approximated.map((a) => el("li", { text: `Approximated: ${a}` }))) : null,
  );
}

/** @param {string} color */
function swatch(color) {
  const node = el("span", { class: "swatch" });
  node.style.background = color;
  return node;
}
