/**
 * Shaping for the Module view: pure functions from `/api/modules` and `/api/modules/optree` JSON to the
 * icicle's Plotly trace, the width choices and the short texts the cards show. No DOM here, so
 * that tests can call every function directly.
 * @module lib/moduleview
 */

import { formatCount, formatRatio, formatUs } from "./format.js";
import { layout } from "./plot.js";

/**
 * @typedef {{id: number, parent_id: number|null, name: string, occurrences: number, self_operators: number,
 *            operators: number, host_total_us: number, host_self_us: number, device_total_us: number,
 *            device_self_us: number, backward_host_total_us: number, backward_host_self_us: number,
 *            backward_device_total_us: number, backward_device_self_us: number, compiled_regions: number,
 *            avg_host_total_us: number|null, avg_device_total_us: number|null}} ModuleNode
 * @typedef {{branchvalues: string, ids: string[], labels: string[], parents: string[], host_us: number[],
 *            device_us: number[], backward_device_us: number[]}} Icicle
 * @typedef {{ranges: number, ranges_attributed: number, host_us: number, host_attributed_us: number,
 *            device_us: number, device_attributed_us: number, fwdbwd_flows: number}} Backward
 * @typedef {{modules: ModuleNode[], icicle: Icicle, backward: Backward|null, warnings: string[]}} Modules
 * @typedef {{id: number, parent_id: number|null, name: string, calls: number, host_total_us: number,
 *            host_self_us: number, device_total_us: number, device_self_us: number, children: number[]}} OpNode
 * @typedef {{thread: {pid: string, tid: string}|null, nodes: OpNode[], truncated: boolean, warnings: string[]}} OpTreeData
 * @typedef {"device"|"host"|"backward"} Width
 * @typedef {{label: string, icicle: "device_us"|"host_us"|"backward_device_us", self: keyof ModuleNode,
 *            total: keyof ModuleNode, title: string}} WidthInfo
 */

/**
 * What the icicle's widths can show: the icicle column (self time, so that widths add up under
 * branchvalues "remainder") and the module fields for the hover text.
 * @type {Readonly<Record<Width, WidthInfo>>}
 */
export const WIDTHS = Object.freeze({
  device: { label: "Device time", icicle: "device_us", self: "device_self_us", total: "device_total_us",
    title: "GPU time of the kernels, memcpys and memsets the module's operators launched" },
  host: { label: "Host time", icicle: "host_us", self: "host_self_us", total: "host_total_us",
    title: "Time the module's calls took on the CPU" },
  backward: { label: "Backward device time", icicle: "backward_device_us", self: "backward_device_self_us",
    total: "backward_device_total_us", title: "GPU time autograd's backward ranges launched for the module (through fwdbwd flows)" },
});

/** Height of the path bar (ancestors of the sector zoomed onto) in pixels. */
const PATHBAR_PX = 22;
/** Pixels per icicle level, and the chart's height bounds. */
const LEVEL_PX = 72;
const MIN_HEIGHT_PX = 180;
const MAX_HEIGHT_PX = 460;

/** The icicle's id of the root added above several top-level modules (module ids are numbers). */
export const ALL_ID = "all";

/** Colours of the branches under the top-level modules (each child of the model, e.g. a layer). */
export const BRANCH_COLORS = Object.freeze([
  "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6",
]);
/** The colour of the top-level modules, and of the root above several of them. */
export const TOP_COLOR = "#9aa0a6";

/**
 * A colour per sector: top-level modules grey, each of their children a palette colour kept by
 * its whole branch and paler level by level, so that a layer and what it holds read as one.
 * @param {string[]} ids
 * @param {string[]} parents "" for a top-level sector
 * @returns {string[]} CSS colours
 */
export function branchColors(ids, parents) {
  /** @type {Map<string, number>} */ const branchOf = new Map();
  /** @type {Map<string, number>} */ const depthOf = new Map();
  let next = 0;
  return ids.map((id, i) => {
    const up = parents[i];
    const depth = up && depthOf.has(up) ? /** @type {number} */ (depthOf.get(up)) + 1 : 0;
    depthOf.set(id, depth);
    if (depth === 0) return TOP_COLOR;
    let branch = depth === 1 ? undefined : branchOf.get(up);
    if (branch === undefined) {
      branch = next % BRANCH_COLORS.length;
      next += 1;
    }
    branchOf.set(id, branch);
    return mixWhite(BRANCH_COLORS[branch], Math.min(0.6, (depth - 1) * 0.18));
  });
}

/**
 * `hex` mixed with white: 0 keeps it, 1 is white.
 * @param {string} hex "#rrggbb"
 * @param {number} amount
 * @returns {string} "rgb(r, g, b)"
 */
function mixWhite(hex, amount) {
  const channel = (/** @type {number} */ at) => {
    const c = parseInt(hex.slice(at, at + 2), 16);
    return Math.round(c + (255 - c) * amount);
  };
  return `rgb(${channel(1)}, ${channel(3)}, ${channel(5)})`;
}

/** @param {number[]|undefined} values @returns {number} */
function sum(values) {
  return (values || []).reduce((acc, v) => acc + (Number.isFinite(v) ? v : 0), 0);
}

/**
 * The widths offered, each with whether it has anything to draw.
 * @param {Modules} data
 * @returns {{key: Width, label: string, title: string, available: boolean}[]}
 */
export function widthChoices(data) {
  return /** @type {Width[]} */ (Object.keys(WIDTHS)).map((key) => {
    const info = WIDTHS[key];
    const available = sum(data.icicle[info.icicle]) > 0 && (key !== "backward" || Boolean(data.backward));
    return { key, label: info.label, title: info.title, available };
  });
}

/**
 * The width to draw: `wanted` (from the URL) when it has something to draw, else device time,
 * else host time.
 * @param {string|null|undefined} wanted
 * @param {Modules} data
 * @returns {Width}
 */
export function pickWidth(wanted, data) {
  const choices = widthChoices(data);
  const ok = (/** @type {string|null|undefined} */ key) => choices.some((c) => c.key === key && c.available);
  if (ok(wanted)) return /** @type {Width} */ (wanted);
  return ok("device") ? "device" : "host";
}

/**
 * The icicle trace of the module tree for one width, or null when that width is zero everywhere.
 * Values are self times with branchvalues "remainder", so a sector is as wide as its total.
 * @param {Modules} data
 * @param {Width} width
 * @param {string|null} [level] id of the module to show as the root (a zoomed-in view)
 * @returns {object|null}
 */
export function icicleTrace(data, width, level = null) {
  const info = WIDTHS[width];
  const ice = data.icicle;
  const values = (ice[info.icicle] || []).map((v) => (Number.isFinite(v) && v > 0 ? v : 0));
  if (!ice.ids.length || !(sum(values) > 0)) return null;
  const byId = new Map(data.modules.map((m) => [String(m.id), m]));
  const customdata = ice.ids.map((id, i) => {
    const m = byId.get(id);
    return [
      formatUs(m ? /** @type {number} */ (m[info.self]) : values[i]),
      m ? formatUs(/** @type {number} */ (m[info.total])) : "",
      m ? `${formatCount(m.occurrences)} occurrence${m.occurrences === 1 ? "" : "s"}` : "",
    ];
  });
  let ids = ice.ids;
  let labels = ice.labels;
  let parents = ice.parents;
  const colors = branchColors(ids, parents);
  // Several top-level modules (the model, its loss): Plotly would add an unnamed root above them;
  // a named one reads better and is where zooming out ends.
  if (parents.filter((p) => !p).length > 1) {
    ids = [ALL_ID, ...ids];
    labels = ["All modules", ...labels];
    parents = ["", ...parents.map((p) => p || ALL_ID)];
    values.unshift(0);
    customdata.unshift([formatUs(0), formatUs(sum(values)), "the top-level modules together"]);
    colors.unshift("#e8eaed");
  }
  /** @type {Record<string, any>} */
  const trace = {
    type: "icicle",
    ids,
    labels,
    parents,
    values,
    branchvalues: "remainder",
    customdata,
    sort: false,
    tiling: { orientation: "v", pad: 1 },
    pathbar: { visible: true, side: "top", thickness: PATHBAR_PX, textfont: { size: 12 } },
    hoverlabel: { bgcolor: "#fff", bordercolor: "#dadce0", align: "left", font: { color: "#202124" } },
    marker: { colors, line: { color: "#fff", width: 1 } },
    texttemplate: "%{label}<br>%{customdata[1]}",
    textposition: "middle center",
    insidetextfont: { size: 12 },
    hovertemplate: `<b>%{label}</b><br>${info.label}: %{customdata[1]} total, %{customdata[0]} self`
      + "<br>%{customdata[2]}<br>%{percentRoot:.1%} of the whole<extra></extra>",
  };
  // Plotly paints the root sector with `root.color`, not with its marker colour.
  trace.root = { color: colors[0] };
  // Zooming onto a module with nothing of this width would leave an empty chart.
  const focus = level ? byId.get(level) : undefined;
  if (focus && Number(focus[info.total]) > 0) trace.level = level;
  return trace;
}

/**
 * How many levels a trace's sectors span (a root alone is 1).
 * @param {{ids: string[], parents: string[]}} trace
 * @returns {number}
 */
export function levelCount({ ids, parents }) {
  /** @type {Map<string, number>} */ const depth = new Map();
  let deepest = 0;
  ids.forEach((id, i) => {
    const d = parents[i] && depth.has(parents[i]) ? /** @type {number} */ (depth.get(parents[i])) + 1 : 1;
    depth.set(id, d);
    deepest = Math.max(deepest, d);
  });
  return deepest;
}

/**
 * The icicle chart (trace, layout and a height that fits its levels), or null when the width has
 * nothing to draw.
 * @param {Modules} data
 * @param {Width} width
 * @param {string|null} [level]
 * @returns {{traces: object[], layout: Record<string, any>, height: number}|null}
 */
export function icicleChart(data, width, level = null) {
  const trace = icicleTrace(data, width, level);
  if (!trace) return null;
  const levels = levelCount(/** @type {any} */ (trace));
  return {
    height: Math.max(MIN_HEIGHT_PX, Math.min(MAX_HEIGHT_PX, levels * LEVEL_PX + PATHBAR_PX + 12)),
    traces: [trace],
    // Labels smaller than 10 px would be unreadable: Plotly hides them (hover still tells).
    // Plotly draws the path bar (shown once zoomed in) above the sectors, inside the top margin.
    layout: layout({ margin: { l: 4, r: 4, t: PATHBAR_PX + 4, b: 4 }, uniformtext: { minsize: 10, mode: "hide" } }),
  };
}

/**
 * The module tree card's line: how many modules and, when there are any, the backward attribution.
 * @param {Modules} data
 * @returns {string}
 */
export function moduleMeta(data) {
  const n = data.modules.length;
  const roots = data.modules.filter((m) => m.parent_id === null || m.parent_id === undefined).length;
  if (!n) return "";
  return `${formatCount(n)} module node${n === 1 ? "" : "s"}, ${formatCount(roots)} top-level`;
}

/**
 * How much backward time the fwdbwd flows tied to modules, in words; "" without a backward summary.
 * @param {Backward|null} backward
 * @returns {string}
 */
export function backwardText(backward) {
  if (!backward) return "";
  if (!backward.ranges) return "No backward ranges in this trace: the backward columns are empty.";
  const share = (/** @type {number} */ part, /** @type {number} */ whole) => (whole > 0 ? formatRatio(part / whole, 1) : "n/a");
  return `Backward: ${formatCount(backward.ranges_attributed)} of ${formatCount(backward.ranges)} autograd ranges `
    + `tied to a module through ${formatCount(backward.fwdbwd_flows)} fwdbwd flows, `
    + `${share(backward.device_attributed_us, backward.device_us)} of backward device time `
    + `(${formatUs(backward.device_attributed_us)} of ${formatUs(backward.device_us)}), `
    + `${share(backward.host_attributed_us, backward.host_us)} of backward host time.`;
}

/**
 * Which thread the operator tree shows, and how big it is.
 * @param {OpTreeData} tree
 * @returns {string}
 */
export function threadText(tree) {
  if (!tree.thread) return "";
  const { pid, tid } = tree.thread;
  const where = pid === tid ? `main thread ${tid}` : `thread ${tid} of process ${pid}`;
  return `${where}, ${formatCount(tree.nodes.length)} nodes`;
}

/** A capped tree's summary node ("… 12 more"): its numbers are sums of the siblings left out. */
const MORE = /^…\s*[\d,]+\s+more\b/;

/**
 * Whether an operator-tree node stands for siblings left out by the cap.
 * @param {{name: string}} node
 * @returns {boolean}
 */
export function isMoreNode(node) {
  return MORE.test(String(node.name));
}
