/**
 * The Memory view's curve, as pure functions: from `/api/memory/*` answers to Plotly traces,
 * axis ticks, step bands, peak markers, and the selected time range (absolute trace microseconds
 * in the URL, milliseconds since the trace start on the x axis).
 * @module lib/memcurve
 */

import { formatBytes, formatOffset, formatUs } from "./format.js";

/**
 * @typedef {{start_us: number, end_us: number}} Range absolute trace microseconds
 * @typedef {{step: string, start_us: number, end_us: number}} StepRange
 * @typedef {{bytes: number, t_us: number}} Peak
 * @typedef {{device: string|null, records: number, points: number, t_us: number[],
 *            allocated_bytes: (number|null)[], reserved_bytes: (number|null)[],
 *            peak_allocated: Peak|null, peak_reserved: Peak|null,
 *            at_start: {t_us: number, allocated_bytes: number|null, reserved_bytes: number|null}|null,
 *            capacity_bytes: number|null, reason: string|null, warnings: string[]}} Curve
 */

/** Colours of the two series (Tableau 10, as the Overview's categories). */
export const COLORS = Object.freeze({
  allocated: "#4e79a7",
  allocatedFill: "rgba(78, 121, 167, 0.14)",
  reserved: "#f28e2b",
  capacity: "#d93025",
  stepBand: "rgba(95, 99, 104, 0.07)",
  stepLine: "rgba(95, 99, 104, 0.45)",
  stepText: "#5f6368",
});

/** Room above the highest value, as a share of it: the step labels and the peaks' markers stay clear of the top. */
const HEADROOM = 0.1;

/** @param {unknown} v @returns {v is number} */
const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

/**
 * Microseconds since the trace start as axis milliseconds.
 * @param {number} tUs absolute trace microseconds
 * @param {number} origin the trace start
 * @returns {number}
 */
export function toMs(tUs, origin) {
  return (tUs - origin) / 1000;
}

/**
 * Axis milliseconds back to absolute trace microseconds, to the nanosecond.
 * @param {number} ms
 * @param {number} origin
 * @returns {number}
 */
export function fromMs(ms, origin) {
  return Math.round((origin + ms * 1000) * 1000) / 1000;
}

/**
 * The time span the view covers when no range is selected: the memory records and the steps.
 * @param {{start_us: number|null, end_us: number|null, steps?: StepRange[]}} devices `/api/memory/devices`
 * @returns {Range|null}
 */
export function memoryExtent(devices) {
  const starts = [devices.start_us, ...(devices.steps || []).map((s) => s.start_us)].filter(isNumber);
  const ends = [devices.end_us, ...(devices.steps || []).map((s) => s.end_us)].filter(isNumber);
  if (!starts.length || !ends.length) return null;
  const start = Math.min(...starts);
  const end = Math.max(...ends);
  return end >= start ? { start_us: start, end_us: end } : null;
}

/**
 * The range a URL asks for, cut to the extent; null for none, junk, one outside the extent, or
 * one covering all of it (the whole trace).
 * @param {string|null|undefined} startText
 * @param {string|null|undefined} endText
 * @param {Range|null} extent
 * @returns {Range|null}
 */
export function parseRange(startText, endText, extent) {
  if (startText === null || startText === undefined || startText === ""
    || endText === null || endText === undefined || endText === "") return null;
  const start = Number(startText);
  const end = Number(endText);
  if (!isNumber(start) || !isNumber(end) || !(end > start)) return null;
  return clampRange({ start_us: start, end_us: end }, extent);
}

/**
 * A range cut to the extent; null when it misses the extent or covers all of it.
 * @param {Range} range
 * @param {Range|null} extent
 * @returns {Range|null}
 */
export function clampRange(range, extent) {
  if (!extent) return range.end_us > range.start_us ? { ...range } : null;
  const start = Math.max(range.start_us, extent.start_us);
  const end = Math.min(range.end_us, extent.end_us);
  if (!(end > start)) return null;
  if (start <= extent.start_us && end >= extent.end_us) return null;
  return { start_us: start, end_us: end };
}

/**
 * What a Plotly `plotly_relayout` event says about the x axis: a new range (absolute us), a reset
 * (autorange: double-click or the modebar's reset), or null (nothing about x, e.g. a resize).
 * @param {Record<string, any>} event
 * @param {number} origin
 * @returns {Range|"reset"|null}
 */
export function rangeFromRelayout(event, origin) {
  if (!event || typeof event !== "object") return null;
  if (event["xaxis.autorange"] === true) return "reset";
  const pair = Array.isArray(event["xaxis.range"]) ? event["xaxis.range"] : [event["xaxis.range[0]"], event["xaxis.range[1]"]];
  const [a, b] = pair.map(Number);
  if (!isNumber(a) || !isNumber(b) || a === b) return null;
  return { start_us: fromMs(Math.min(a, b), origin), end_us: fromMs(Math.max(a, b), origin) };
}

/**
 * The URL form of a range: `start_us`, `end_us` to the nanosecond, or nulls (removed) for none.
 * @param {Range|null} range
 * @returns {{start_us: string|null, end_us: string|null}}
 */
export function rangeQuery(range) {
  const text = (/** @type {number} */ v) => v.toFixed(3).replace(/\.?0+$/, "");
  return range ? { start_us: text(range.start_us), end_us: text(range.end_us) } : { start_us: null, end_us: null };
}

/**
 * The line saying which range the tables show.
 * @param {Range|null} range null: the whole trace
 * @param {Range|null} extent
 * @param {number} origin
 * @returns {string}
 */
export function rangeLabel(range, extent, origin) {
  if (!range) {
    if (!extent) return "Whole trace";
    return `Whole trace: ${formatOffset(extent.start_us - origin)} – ${formatOffset(extent.end_us - origin)}`;
  }
  const of = extent ? ` of ${formatUs(extent.end_us - extent.start_us)}` : "";
  return `Selected ${formatOffset(range.start_us - origin)} – ${formatOffset(range.end_us - origin)}`
    + ` (${formatUs(range.end_us - range.start_us)}${of})`;
}

/**
 * The step whose range equals `range` (a step chosen in the step picker), or null.
 * @param {Range|null} range
 * @param {StepRange[]} steps
 * @returns {StepRange|null}
 */
export function stepOfRange(range, steps) {
  if (!range) return null;
  const close = (/** @type {number} */ a, /** @type {number} */ b) => Math.abs(a - b) < 0.01;
  return steps.find((s) => close(s.start_us, range.start_us) && close(s.end_us, range.end_us)) || null;
}

/**
 * A "nice" tick step (1, 2, 2.5 or 5 times a power of ten) near `raw`.
 * @param {number} raw
 * @returns {number}
 */
export function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / power;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 2.5 ? 2.5 : fraction <= 5 ? 5 : 10;
  return nice * power;
}

const BYTE_UNITS = /** @type {const} */ ([["GiB", 1024 ** 3], ["MiB", 1024 ** 2], ["KiB", 1024], ["B", 1]]);

/**
 * Y-axis ticks for sizes, 1024-based like formatBytes: ticks at round numbers of one unit
 * ("0", "512 MiB", "1 GiB", "1.5 GiB"), about `count` of them between 0 and `maxBytes`.
 * @param {number} maxBytes top of the axis
 * @param {number} [count]
 * @returns {{tickvals: number[], ticktext: string[]}}
 */
export function byteTicks(maxBytes, count = 5) {
  const top = isNumber(maxBytes) && maxBytes > 0 ? maxBytes : 1;
  const [unit, size] = BYTE_UNITS.find(([, s]) => top >= s) || BYTE_UNITS[BYTE_UNITS.length - 1];
  const step = size === 1 ? Math.max(1, niceStep(top / count)) : niceStep(top / size / count);
  let digits = 0;
  while (digits < 6 && Math.abs(step * 10 ** digits - Math.round(step * 10 ** digits)) > 1e-9) digits += 1;
  /** @type {number[]} */ const tickvals = [];
  /** @type {string[]} */ const ticktext = [];
  for (let i = 0; i * step * size <= top * (1 + 1e-9) && i < 100; i += 1) {
    const value = i * step;
    tickvals.push(value * size);
    ticktext.push(i === 0 ? "0" : `${Number(value.toFixed(digits))} ${unit}`);
  }
  return { tickvals, ticktext };
}

/**
 * The step-plot points to draw over `span`: the value in effect at the span's start (from
 * `at_start`) first, the API's points, then the last value held to the span's end.
 * @param {Curve} curve
 * @param {Range} span what the x axis shows
 * @returns {{t_us: number[], allocated: (number|null)[], reserved: (number|null)[]}}
 */
export function curvePoints(curve, span) {
  const t = [...(curve.t_us || [])];
  const allocated = [...(curve.allocated_bytes || [])];
  const reserved = [...(curve.reserved_bytes || [])];
  const first = curve.at_start;
  if (first && (!t.length || t[0] > first.t_us)) {
    t.unshift(first.t_us);
    allocated.unshift(first.allocated_bytes);
    reserved.unshift(first.reserved_bytes);
  }
  if (t.length && t[t.length - 1] < span.end_us) {
    t.push(span.end_us);
    allocated.push(allocated[allocated.length - 1]);
    reserved.push(reserved[reserved.length - 1]);
  }
  return { t_us: t, allocated, reserved };
}

/**
 * The highest finite value of some series (0 when none).
 * @param {...(number|null)[]} series
 * @returns {number}
 */
export function maxBytes(...series) {
  let top = 0;
  for (const values of series) for (const v of values) if (isNumber(v) && v > top) top = v;
  return top;
}

/**
 * Plotly traces of the curve: reserved (a line) and allocated (filled), both as steps ("hv"),
 * with the peaks as markers. Reserved is left out when it is never above zero (host memory).
 * @param {Curve} curve
 * @param {Range} span what the x axis shows (absolute us)
 * @param {number} origin the trace start
 * @returns {object[]}
 */
export function curveTraces(curve, span, origin) {
  const points = curvePoints(curve, span);
  const x = points.t_us.map((t) => toMs(t, origin));
  const hover = (/** @type {(number|null)[]} */ values) => values.map((v) => formatBytes(v));
  /** @type {object[]} */
  const traces = [];
  if (maxBytes(points.reserved) > 0) {
    traces.push({
      type: "scatter", mode: "lines", name: "Reserved", showlegend: false, x, y: points.reserved,
      line: { shape: "hv", color: COLORS.reserved, width: 1.5 },
      customdata: hover(points.reserved), hovertemplate: "Reserved: %{customdata}<extra></extra>",
    });
  }
  traces.push({
    type: "scatter", mode: "lines", name: "Allocated", showlegend: false, x, y: points.allocated,
    line: { shape: "hv", color: COLORS.allocated, width: 1.5 },
    fill: "tozeroy", fillcolor: COLORS.allocatedFill,
    customdata: hover(points.allocated), hovertemplate: "Allocated: %{customdata}<extra></extra>",
  });
  for (const [key, name, color] of /** @type {const} */ ([
    ["peak_reserved", "Peak reserved", COLORS.reserved], ["peak_allocated", "Peak allocated", COLORS.allocated]])) {
    const peak = curve[key];
    if (!peak || (key === "peak_reserved" && !(peak.bytes > 0))) continue;
    traces.push({
      type: "scatter", mode: "markers", name, showlegend: false, x: [toMs(peak.t_us, origin)], y: [peak.bytes],
      marker: { color: "#fff", size: 9, line: { color, width: 2 } },
      hovertemplate: `${name}: ${formatBytes(peak.bytes)} at ${formatOffset(peak.t_us - origin)}<extra></extra>`,
    });
  }
  return traces;
}

/**
 * Step boundaries: every other step shaded, a dotted line at each step start and a label
 * ("step 2") over the top of each step's visible part.
 * @param {StepRange[]} steps
 * @param {Range} span
 * @param {number} origin
 * @returns {{shapes: object[], annotations: object[]}}
 */
export function stepMarks(steps, span, origin) {
  /** @type {object[]} */ const shapes = [];
  /** @type {object[]} */ const annotations = [];
  steps.forEach((step, i) => {
    if (!(step.end_us > span.start_us && step.start_us < span.end_us)) return;
    const x0 = toMs(Math.max(step.start_us, span.start_us), origin);
    const x1 = toMs(Math.min(step.end_us, span.end_us), origin);
    if (i % 2 === 0) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0, x1, y0: 0, y1: 1, fillcolor: COLORS.stepBand,
        line: { width: 0 }, layer: "below" });
    }
    if (step.start_us >= span.start_us) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0, x1: x0, y0: 0, y1: 1,
        line: { color: COLORS.stepLine, width: 1, dash: "dot" }, layer: "below" });
    }
    // Above the plot area, clear of the curve and the peak labels.
    annotations.push({ x: x0, y: 1, xref: "x", yref: "paper", xanchor: "left", yanchor: "bottom", showarrow: false,
      text: `step ${step.step}`, font: { size: 11, color: COLORS.stepText }, xshift: 2 });
  });
  return { shapes, annotations };
}

/**
 * The device capacity as a dashed line with its label, when it fits under `top`.
 * @param {number|null} capacity
 * @param {number} top the y axis top
 * @returns {{shapes: object[], annotations: object[]}}
 */
export function capacityMarks(capacity, top) {
  if (!isNumber(capacity) || capacity <= 0 || capacity > top) return { shapes: [], annotations: [] };
  return {
    shapes: [{ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: capacity, y1: capacity,
      line: { color: COLORS.capacity, width: 1.5, dash: "dash" } }],
    annotations: [{ x: 1, y: capacity, xref: "paper", yref: "y", xanchor: "right", yanchor: "bottom", showarrow: false,
      text: `capacity ${formatBytes(capacity)}`, font: { size: 11, color: COLORS.capacity } }],
  };
}

/**
 * The y axis top: the highest value drawn (and the capacity when asked), plus room for labels.
 * @param {Curve} curve
 * @param {Range} span
 * @param {boolean} toCapacity
 * @returns {number}
 */
export function yTop(curve, span, toCapacity) {
  const points = curvePoints(curve, span);
  let top = maxBytes(points.allocated, points.reserved) * (1 + HEADROOM);
  // The capacity line needs only room for its label above it.
  if (toCapacity && isNumber(curve.capacity_bytes)) top = Math.max(top, curve.capacity_bytes * 1.08);
  return Math.max(1, top);
}

/**
 * How allocated memory changed over what is drawn: the first and last values and their difference.
 * @param {Curve} curve
 * @param {Range} span
 * @returns {{from: number, to: number, change: number}|null}
 */
export function allocatedChange(curve, span) {
  const values = curvePoints(curve, span).allocated.filter(isNumber);
  if (!values.length) return null;
  const from = values[0];
  const to = values[values.length - 1];
  return { from, to, change: to - from };
}
