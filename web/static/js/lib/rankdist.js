/**
 * Shaping for the Distributed view at many ranks: which ranks the per-rank charts and tables show
 * (the worst few, a page of all, plus the rank picked), the heat strip of every rank's measures,
 * and the topology's nodes folded to one line each. Pure functions, no DOM.
 * @module lib/rankdist
 */

import { formatCount, formatRatio, formatUs } from "./format.js";
import { layout } from "./plot.js";
import { rankLabel, rankSpans } from "./distview.js";

/**
 * @typedef {{rank: number, worker: string, step_us: number|null, computation_us: number|null,
 *            communication_us: number|null, wait_us: number|null, wait_ratio: number|null,
 *            delay_us: number|null}} RankMeasures
 * @typedef {{sort: string, measure: string, top: number, ranks: number[]}} WorstRanks
 * @typedef {import("./distview.js").TopoNode} TopoNode
 */

/** How many worst ranks the view asks for, and how many ranks a page of "all ranks" holds. */
export const TOP = 16;
export const PAGE_RANKS = 32;

/** What makes a rank worst, as the API's `sort` takes it, with the header's words. */
export const SORTS = Object.freeze([
  { value: "step", label: "step time" },
  { value: "wait", label: "waiting in communication" },
  { value: "delay", label: "arrival delay" },
]);

/** The heat strip's rows: a measure each, with how its value reads. */
export const MEASURES = Object.freeze([
  { key: "step_us", label: "Step time", text: (/** @type {number} */ v) => formatUs(v) },
  { key: "computation_us", label: "Computation", text: (/** @type {number} */ v) => formatUs(v) },
  { key: "communication_us", label: "Communication", text: (/** @type {number} */ v) => formatUs(v) },
  { key: "wait_ratio", label: "Waiting share", text: (/** @type {number} */ v) => formatRatio(v, 0) },
  { key: "delay_us", label: "Arrival delay", text: (/** @type {number} */ v) => formatUs(v) },
]);

/** @param {unknown} v @returns {v is number} */
const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

/**
 * The ranks the per-rank charts and tables show, in rank order: a page of every rank when `all`,
 * else the worst ones; the picked rank is always among them.
 * @param {number[]} ranks every rank of the run, in rank order
 * @param {number[]} worst the API's worst ranks
 * @param {{all?: boolean, page?: number, picked?: number|null}} [options]
 * @returns {number[]}
 */
export function shownRanks(ranks, worst, { all = false, page = 1, picked = null } = {}) {
  const base = all ? ranks.slice((page - 1) * PAGE_RANKS, page * PAGE_RANKS) : worst;
  const set = new Set(base);
  if (picked !== null && ranks.includes(picked)) set.add(picked);
  return ranks.filter((r) => set.has(r));
}

/** @param {number} total @returns {number} pages of {@link PAGE_RANKS} ranks */
export function rankPages(total) {
  return Math.max(1, Math.ceil(total / PAGE_RANKS));
}

/**
 * Rows whose `rank` is shown, in their order.
 * @template {{rank: number}} T
 * @param {T[]} rows
 * @param {number[]} shown
 * @returns {T[]}
 */
export function rowsOf(rows, shown) {
  const set = new Set(shown);
  return (rows || []).filter((r) => set.has(r.rank));
}

/**
 * The line above the per-rank parts: what they show and why.
 * @param {number} total ranks in the run
 * @param {number[]} shown
 * @param {WorstRanks} worst
 * @param {{all?: boolean, page?: number}} [options]
 */
export function shownText(total, shown, worst, { all = false, page = 1 } = {}) {
  if (all) return `Ranks ${rankSpans(shown)} (page ${formatCount(page)} of ${formatCount(rankPages(total))}) of ${formatCount(total)}`;
  const sort = (SORTS.find((s) => s.value === worst.sort) || SORTS[0]).label;
  if (total <= worst.ranks.length) return `All ${formatCount(total)} ranks, worst first by ${sort}: ${worst.ranks.join(", ")}`;
  const extra = shown.length - worst.ranks.length;
  return `The worst ${formatCount(worst.ranks.length)} of ${formatCount(total)} ranks by ${sort}`
    + `${extra > 0 ? " and the rank picked" : ""}: ${rankSpans(shown)}`;
}

/**
 * A heat strip: one row per measure, one column per rank; each row coloured from its own lowest
 * (pale) to its highest value (dark), the exact value in the tooltip. Columns are rank numbers, so a
 * click tells the rank.
 * @param {RankMeasures[]} rows every rank's measures
 * @param {number|null} [picked] the rank marked with a line
 * @returns {{traces: object[], layout: Record<string, any>}}
 */
export function heatStrip(rows, picked = null) {
  const measures = MEASURES.filter((m) => rows.some((r) => isNumber(r[m.key])));
  const x = rows.map((r) => r.rank);
  const z = measures.map((m) => {
    const values = rows.map((r) => r[m.key]).filter(isNumber);
    const lo = Math.min(...values);
    const span = Math.max(...values) - lo;
    return rows.map((r) => (isNumber(r[m.key]) ? (span > 0 ? (r[m.key] - lo) / span : 0) : null));
  });
  const text = measures.map((m) => rows.map((r) => `${rankLabel(r.rank)} (${r.worker})<br>${m.label}: `
    + `${isNumber(r[m.key]) ? m.text(r[m.key]) : "none"}`));
  const chartLayout = layout({
    height: 40 + 26 * Math.max(1, measures.length),
    margin: { l: 110, r: 16, t: 4, b: 32 },
    // Whole ranks only: a tick between two would read as a rank.
    xaxis: { type: "linear", title: { text: "Rank" }, showgrid: false, zeroline: false, tickformat: "d",
      ...(x.length <= 32 ? { tick0: 0, dtick: 1 } : {}),
      range: [Math.min(...x) - 0.5, Math.max(...x) + 0.5] },
    yaxis: { showgrid: false, autorange: "reversed", fixedrange: true },
    shapes: pickedShapes(picked),
  });
  const traces = [{
    type: "heatmap", x, y: measures.map((m) => m.label), z, customdata: text,
    hovertemplate: "%{customdata}<extra></extra>", showscale: false, xgap: x.length <= 64 ? 1 : 0, ygap: 2,
    zmin: 0, zmax: 1, colorscale: [[0, "#eef3f8"], [0.5, "#f2b45b"], [1, "#c2302e"]], hoverongaps: false,
  }];
  return { traces, layout: chartLayout };
}

/**
 * The outline of the picked rank's column in the heat strip (none when no rank is picked).
 * @param {number|null} rank
 * @returns {object[]}
 */
export function pickedShapes(rank) {
  return rank === null ? [] : [{ type: "rect", xref: "x", yref: "paper", x0: rank - 0.5, x1: rank + 0.5, y0: 0, y1: 1,
    line: { color: "#202124", width: 2 }, fillcolor: "rgba(0,0,0,0)" }];
}

/**
 * One line per node of the topology: its ranks as runs, its processes and GPUs by model.
 * @param {TopoNode} node
 * @returns {string}
 */
export function nodeLine(node) {
  const models = new Map();
  for (const p of node.processes) for (const g of p.gpus) models.set(g.name || "GPU", (models.get(g.name || "GPU") || 0) + 1);
  const gpus = [...models].map(([name, n]) => `${formatCount(n)}× ${name}`).join(", ");
  const n = node.processes.length;
  return [`ranks ${rankSpans(node.processes.map((p) => p.rank))}`, `${formatCount(n)} process${n === 1 ? "" : "es"}`,
    gpus || "no GPU kernels"].join(" · ");
}
