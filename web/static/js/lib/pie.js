/**
 * Top-N pies: the largest items by some time, one "Other" slice for the rest (so that shares are
 * of the whole, not of the top N), labels shortened for the legend and full names on hover.
 * Pure shaping functions; lib/plot.js draws.
 * @module lib/pie
 */

import { formatCount, formatRatio, formatUs } from "./format.js";
import { layout } from "./plot.js";

/** Top N when the URL does not say. */
export const DEFAULT_TOP = 10;
/** More slices than this are unreadable, and the legend would push the pie away. */
export const MAX_TOP = 50;
/** Legend labels longer than this are cut; hover shows the full name. */
export const LABEL_CHARS = 36;

/**
 * Slice colours, Tableau 20's order of strong tones first, so ten slices stay distinct.
 * Grey is left out: it belongs to "Other".
 */
export const PALETTE = Object.freeze([
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
  "#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d", "#f1ce63", "#d4a6c8", "#fabfd2", "#d7b5a6",
  "#499894", "#b6992d",
]);
export const OTHER_COLOR = "#cfd3d6";

/**
 * @typedef {object} PieItem
 * @property {string} key identity, unique among the items (e.g. name, or name + input shape)
 * @property {string} name what hover shows in full
 * @property {string} [label] a shorter form for the legend (default: the name)
 * @property {number} value a time in microseconds (or whatever `format` reads)
 * @property {string[]} [details] extra hover lines (e.g. "Input shape: [...]")
 */

/**
 * @typedef {object} Slice
 * @property {string} key the item's key; "" for Other
 * @property {string} name
 * @property {string} label
 * @property {number} value
 * @property {number|null} share_ratio of the total of every positive item
 * @property {string[]} details
 * @property {number} [others] for Other: how many items it holds
 */

/**
 * A Top N from the URL: an integer in 1..{@link MAX_TOP}, {@link DEFAULT_TOP} for anything else.
 * @param {string|number|null|undefined} text
 * @returns {number}
 */
export function parseTop(text) {
  const n = Number(text);
  if (text === null || text === undefined || text === "" || !Number.isFinite(n)) return DEFAULT_TOP;
  return Math.min(MAX_TOP, Math.max(1, Math.round(n)));
}

/**
 * The `top` largest items with a positive value, largest first (ties keep input order), then one
 * "Other" slice summing the rest when it is positive.
 * @param {PieItem[]} items
 * @param {number} top
 * @param {string} [noun] what Other counts ("operators" -> "Other (12 operators)")
 * @returns {{slices: Slice[], total: number}}
 */
export function topSlices(items, top, noun = "items") {
  const positive = items
    .map((item, index) => ({ item, index }))
    .filter(({ item }) => Number.isFinite(item.value) && item.value > 0)
    .sort((a, b) => b.item.value - a.item.value || a.index - b.index)
    .map(({ item }) => item);
  const total = positive.reduce((sum, item) => sum + item.value, 0);
  const share = (/** @type {number} */ v) => (total > 0 ? v / total : null);
  const head = positive.slice(0, Math.max(0, top));
  const rest = positive.slice(head.length);
  /** @type {Slice[]} */
  const slices = head.map((item) => ({
    key: item.key, name: item.name, label: item.label ?? item.name, value: item.value,
    share_ratio: share(item.value), details: item.details || [],
  }));
  const restValue = rest.reduce((sum, item) => sum + item.value, 0);
  if (rest.length && restValue > 0) {
    const name = `Other (${formatCount(rest.length)} ${rest.length === 1 ? noun.replace(/s$/, "") : noun})`;
    slices.push({ key: "", name, label: name, value: restValue, share_ratio: share(restValue), details: [], others: rest.length });
  }
  return { slices, total };
}

/**
 * `text` cut to `max` characters with an ellipsis: at the end (kernel names: the start says most), or
 * in the middle ("autograd::engi…ConvolutionBackward0": operator names often differ at the end).
 * @param {string} text
 * @param {number} [max]
 * @param {"end"|"middle"} [cut]
 * @returns {string}
 */
export function shortLabel(text, max = LABEL_CHARS, cut = "end") {
  const s = String(text);
  if (s.length <= max) return s;
  const keep = Math.max(2, max - 1);
  if (cut === "middle") {
    const head = Math.ceil(keep * 0.4);
    return `${s.slice(0, head)}…${s.slice(s.length - (keep - head))}`;
  }
  return `${s.slice(0, keep).trimEnd()}…`;
}

/**
 * Short labels that stay distinct: Plotly merges pie slices that share a label, and long kernel
 * names often share their first few dozen characters. Repeats get " #2", " #3", ...
 * @param {string[]} names
 * @param {number} [max]
 * @param {"end"|"middle"} [cut] see {@link shortLabel}
 * @returns {string[]}
 */
export function uniqueLabels(names, max = LABEL_CHARS, cut = "end") {
  /** @type {Map<string, number>} */ const seen = new Map();
  const taken = new Set();
  return names.map((name) => {
    const base = shortLabel(name, max, cut);
    let label = base;
    let n = seen.get(base) || 1;
    while (taken.has(label)) {
      n += 1;
      label = `${base} #${n}`;
    }
    seen.set(base, n);
    taken.add(label);
    return label;
  });
}

/**
 * Text for Plotly's SVG labels, which read a few HTML-like tags (`<b>`, `<br>`) and entities:
 * `<`, `>` and `&` of C++ names are escaped so they show as written.
 * @param {string} text
 * @returns {string}
 */
export function plotlyText(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * A long name as hover lines of at most `width` characters (at most `lines` lines), escaped for Plotly.
 * @param {string} text
 * @param {number} [width]
 * @param {number} [lines]
 * @returns {string}
 */
export function hoverLines(text, width = 56, lines = 8) {
  const s = String(text);
  /** @type {string[]} */ const out = [];
  for (let i = 0; i < s.length && out.length < lines; i += width) out.push(s.slice(i, i + width));
  if (s.length > width * lines) out[out.length - 1] = `${out[out.length - 1].slice(0, width - 1)}…`;
  return out.map(plotlyText).join("<br>");
}

/**
 * A colour per key, in order of first appearance over several slice lists, so that one operator has
 * one colour in every pie of a view.
 * @param {Slice[][]} sliceLists
 * @returns {Map<string, string>}
 */
export function colorMap(sliceLists) {
  /** @type {Map<string, string>} */ const colors = new Map();
  for (const slices of sliceLists) {
    for (const slice of slices) {
      if (slice.key && !colors.has(slice.key)) colors.set(slice.key, PALETTE[colors.size % PALETTE.length]);
    }
  }
  return colors;
}

/**
 * The Plotly donut of some slices.
 * @param {Slice[]} slices
 * @param {object} [options]
 * @param {Map<string, string>} [options.colors] from {@link colorMap}; default: palette order
 * @param {(value: number) => string} [options.format] the value as text (default a duration)
 * @param {"end"|"middle"} [options.cut] where long legend labels are cut (see {@link shortLabel})
 * @returns {object}
 */
export function pieTrace(slices, { colors, format = formatUs, cut = "end" } = {}) {
  const labels = uniqueLabels(slices.map((s) => s.label), LABEL_CHARS, cut);
  return {
    type: "pie",
    hole: 0.45,
    sort: false,
    direction: "clockwise",
    labels: labels.map(plotlyText),
    values: slices.map((s) => s.value),
    marker: {
      colors: slices.map((s, i) => (!s.key ? OTHER_COLOR : (colors && colors.get(s.key)) || PALETTE[i % PALETTE.length])),
      line: { color: "#fff", width: 1 },
    },
    // Slices under 5 % get no label: they would overlap.
    text: slices.map((s) => (s.share_ratio !== null && s.share_ratio >= 0.05 ? formatRatio(s.share_ratio, 1) : "")),
    textinfo: "text",
    textposition: "inside",
    insidetextorientation: "horizontal",
    insidetextfont: { color: "#fff", size: 11 },
    customdata: slices.map((s) => [
      hoverLines(s.name),
      ...s.details.map((d) => hoverLines(d)),
      `<b>${format(s.value)}</b> (${formatRatio(s.share_ratio)})`,
    ].join("<br>")),
    hovertemplate: "%{customdata}<extra></extra>",
    hoverlabel: { align: "left" },
  };
}

/**
 * The layout of a donut with its legend on the right.
 * @param {Record<string, any>} [overrides]
 */
export function pieLayout(overrides = {}) {
  return layout({
    margin: { l: 8, r: 8, t: 8, b: 8 },
    showlegend: true,
    legend: { orientation: "v", x: 1.02, xanchor: "left", y: 0.5, yanchor: "middle", font: { size: 11 } },
    ...overrides,
  });
}
