/**
 * The trace timeline's viewport maths: which time window is on screen, how zoom, pan and
 * "zoom to this event" change it, where a time falls in pixels, the ruler's tick steps, and when
 * the data on hand no longer serves the view (a new `/api/trace/window` request). Pure functions.
 *
 * Times are absolute trace microseconds (`*_us`, as the API uses them); x is in CSS pixels from
 * the plot's left edge.
 * @module lib/viewport
 */

/**
 * @typedef {{start_us: number, end_us: number}} TimeWindow
 */

/** The narrowest window one can zoom to: 50 ns across the plot. */
export const MIN_SPAN_US = 0.05;

/** A zoom-to-event leaves the event this share of the window (the rest is context around it). */
export const FOCUS_SHARE = 0.4;

/** ... and never shows less than this, so that a 2 us kernel keeps its neighbours in view. */
export const MIN_FOCUS_SPAN_US = 20;

/** @param {number} value @param {number} lo @param {number} hi */
function clamp(value, lo, hi) {
  return Math.min(hi, Math.max(lo, value));
}

/**
 * `win` moved and shrunk as little as needed to lie within `bounds` and be at least `minSpan` wide.
 * A window wider than the bounds becomes the bounds; a reversed or non-finite one too.
 * @param {TimeWindow} win
 * @param {TimeWindow} bounds
 * @param {number} [minSpan]
 * @returns {TimeWindow}
 */
export function clampWindow(win, bounds, minSpan = MIN_SPAN_US) {
  const full = bounds.end_us - bounds.start_us;
  if (!(full > 0)) return { start_us: bounds.start_us, end_us: bounds.end_us };
  let { start_us: start, end_us: end } = win;
  if (!Number.isFinite(start) || !Number.isFinite(end) || end <= start) return { ...bounds };
  let span = clamp(end - start, Math.min(minSpan, full), full);
  const center = (start + end) / 2;
  start = center - span / 2;
  end = start + span;
  if (start < bounds.start_us) {
    start = bounds.start_us;
    end = start + span;
  }
  if (end > bounds.end_us) {
    end = bounds.end_us;
    start = Math.max(bounds.start_us, end - span);
    span = end - start;
  }
  return { start_us: start, end_us: end };
}

/**
 * Zooms by `factor` (below 1: in, above 1: out) keeping the time under `anchor` (0..1 across the
 * plot) where it is, then clamps.
 * @param {TimeWindow} win
 * @param {number} factor new span / old span
 * @param {number} anchor 0 = left edge, 1 = right edge
 * @param {TimeWindow} bounds
 * @returns {TimeWindow}
 */
export function zoomAt(win, factor, anchor, bounds) {
  const span = win.end_us - win.start_us;
  const a = clamp(Number.isFinite(anchor) ? anchor : 0.5, 0, 1);
  const pivot = win.start_us + a * span;
  const full = bounds.end_us - bounds.start_us;
  const next = clamp(span * factor, Math.min(MIN_SPAN_US, full), full);
  const start = pivot - a * next;
  // Clamping keeps the span: at an edge the window slides instead of shrinking.
  return clampWindow({ start_us: start, end_us: start + next }, bounds);
}

/**
 * Moves the window by `deltaUs` (positive: later), keeping its span.
 * @param {TimeWindow} win
 * @param {number} deltaUs
 * @param {TimeWindow} bounds
 * @returns {TimeWindow}
 */
export function panBy(win, deltaUs, bounds) {
  return clampWindow({ start_us: win.start_us + deltaUs, end_us: win.end_us + deltaUs }, bounds);
}

/**
 * The window that shows `[start, start + dur]` with context around it: the event takes
 * `share` of the width (1: exactly the event), at least `minSpan` wide, centred, clamped.
 * @param {number} startUs
 * @param {number} durUs
 * @param {TimeWindow} bounds
 * @param {{share?: number, minSpan?: number}} [options]
 * @returns {TimeWindow}
 */
export function windowAround(startUs, durUs, bounds, { share = FOCUS_SHARE, minSpan = MIN_FOCUS_SPAN_US } = {}) {
  const dur = Math.max(0, Number.isFinite(durUs) ? durUs : 0);
  const span = Math.max(dur / clamp(share, 0.01, 1), minSpan, MIN_SPAN_US);
  const center = startUs + dur / 2;
  return clampWindow({ start_us: center - span / 2, end_us: center + span / 2 }, bounds);
}

/**
 * Whether two windows are the same to within a thousandth of a pixel at `width`.
 * @param {TimeWindow} a
 * @param {TimeWindow} b
 * @param {number} width
 */
export function sameWindow(a, b, width = 1000) {
  const eps = ((a.end_us - a.start_us) / Math.max(1, width)) * 1e-3;
  return Math.abs(a.start_us - b.start_us) <= eps && Math.abs(a.end_us - b.end_us) <= eps;
}

/**
 * The x (CSS px) of time `t` in a plot `width` wide showing `win`.
 * @param {number} t
 * @param {TimeWindow} win
 * @param {number} width
 */
export function xOf(t, win, width) {
  return ((t - win.start_us) / (win.end_us - win.start_us)) * width;
}

/**
 * The time at x (CSS px).
 * @param {number} x
 * @param {TimeWindow} win
 * @param {number} width
 */
export function timeOf(x, win, width) {
  return win.start_us + (x / width) * (win.end_us - win.start_us);
}

/**
 * The pixel span `[x0, x1)` an event covers, at least `minPx` wide, cut to the plot (with a margin
 * so that strokes at the edges do not show); null when it lies outside.
 * @param {number} startUs
 * @param {number} durUs
 * @param {TimeWindow} win
 * @param {number} width
 * @param {number} [minPx]
 * @returns {[number, number]|null}
 */
export function boxPixels(startUs, durUs, win, width, minPx = 1) {
  const x0 = xOf(startUs, win, width);
  let x1 = xOf(startUs + Math.max(0, durUs), win, width);
  if (x1 - x0 < minPx) x1 = x0 + minPx;
  if (x1 < 0 || x0 > width) return null;
  return [Math.max(x0, -2), Math.min(x1, width + 2)];
}

/**
 * A "nice" tick step (1, 2 or 5 times a power of ten, in us) so that ticks are at least `minPx` apart.
 * @param {number} spanUs
 * @param {number} width
 * @param {number} [minPx]
 */
export function niceStep(spanUs, width, minPx = 90) {
  if (!(spanUs > 0) || !(width > 0)) return 1;
  const raw = (spanUs * minPx) / width;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) {
    if (m * power >= raw * (1 - 1e-9)) return m * power;
  }
  return 10 * power;
}

/**
 * The ruler's ticks: times (absolute us) at multiples of a nice step counted from `origin`
 * (the trace start), with their x.
 * @param {TimeWindow} win
 * @param {number} width
 * @param {number} origin
 * @param {number} [minPx]
 * @returns {{step: number, ticks: {t: number, offset: number, x: number}[]}}
 */
export function rulerTicks(win, width, origin, minPx = 90) {
  const step = niceStep(win.end_us - win.start_us, width, minPx);
  const first = Math.ceil((win.start_us - origin) / step - 1e-9);
  const last = Math.floor((win.end_us - origin) / step + 1e-9);
  const ticks = [];
  for (let k = first; k <= last && ticks.length < 1000; k += 1) {
    const offset = k * step;
    const t = origin + offset;
    ticks.push({ t, offset, x: xOf(t, win, width) });
  }
  return { step, ticks };
}

/**
 * The window to ask the server for: the view widened by `pad` spans each side (so that panning
 * shows data at once), clamped, and its pixel width at the view's resolution.
 * @param {TimeWindow} view
 * @param {number} width CSS px of the plot
 * @param {TimeWindow} bounds
 * @param {number} [pad]
 * @param {number} [maxPx] the widest request
 * @returns {TimeWindow & {width_px: number}}
 */
export function requestWindow(view, width, bounds, pad = 0.5, maxPx = 6000) {
  const span = view.end_us - view.start_us;
  const perPx = span / Math.max(1, width);
  const widest = Math.max(span, Math.min(span * (1 + 2 * pad), perPx * maxPx));
  const extra = (widest - span) / 2;
  const start = Math.max(bounds.start_us, view.start_us - extra);
  const end = Math.min(bounds.end_us, view.end_us + extra);
  return { start_us: start, end_us: end, width_px: Math.max(1, Math.round((end - start) / perPx)) };
}

/**
 * Whether data fetched for `have` (a window and its pixel width) still serves `view` at `width`:
 * it covers the view and is not coarser than the view's pixels by more than `tolerance`.
 * @param {(TimeWindow & {width_px: number})|null} have
 * @param {TimeWindow} view
 * @param {number} width
 * @param {TimeWindow} bounds
 * @param {number} [tolerance]
 */
export function covers(have, view, width, bounds, tolerance = 1.15) {
  if (!have) return false;
  const eps = ((view.end_us - view.start_us) / Math.max(1, width)) * 0.5;
  const left = have.start_us <= view.start_us + eps || have.start_us <= bounds.start_us;
  const right = have.end_us >= view.end_us - eps || have.end_us >= bounds.end_us;
  if (!left || !right) return false;
  const haveRes = (have.end_us - have.start_us) / Math.max(1, have.width_px);
  const viewRes = (view.end_us - view.start_us) / Math.max(1, width);
  return haveRes <= viewRes * tolerance;
}

/**
 * A window from the URL's `start_us` / `end_us`, clamped to the trace; null when absent,
 * unreadable, or outside the trace altogether (a window of another span or run, kept in the URL
 * when the selection changed: trace clocks differ, so it says nothing about this trace).
 * @param {string|undefined} start
 * @param {string|undefined} end
 * @param {TimeWindow} bounds
 * @returns {TimeWindow|null}
 */
export function parseWindow(start, end, bounds) {
  if (start === undefined || end === undefined || start === "" || end === "") return null;
  const s = Number(start);
  const e = Number(end);
  if (!Number.isFinite(s) || !Number.isFinite(e) || e <= s) return null;
  if (e < bounds.start_us || s > bounds.end_us) return null;
  return clampWindow({ start_us: s, end_us: e }, bounds);
}

/**
 * A time as the URL keeps it: absolute microseconds to the nanosecond, without float noise.
 * @param {number} us
 * @returns {string}
 */
export function timeParam(us) {
  return us.toFixed(3).replace(/\.?0+$/, "");
}
