/**
 * Counter tracks of the trace timeline: GPU utilization, Est. SM efficiency, memory and the trace's
 * own counters as small step charts on one canvas, sharing the lanes' time axis. Reads the
 * `series` of `/api/trace/counters` (for the window on screen, when shown); the scale and value
 * lookup are pure functions, `counterTracks` runs the labels, canvas and hover values.
 * @module lib/counters
 */

import { isAbort } from "./api.js";
import { el } from "./dom.js";
import { NA, formatBytes, formatOffset, formatRatio } from "./format.js";
import { covers, requestWindow, timeOf, xOf } from "./viewport.js";

/**
 * @typedef {import("./viewport.js").TimeWindow} TimeWindow
 * @typedef {{id: string, name: string, unit: "ratio"|"bytes"|"value", t_us: number[], value: (number|null)[]}} Series
 */

export const TRACK_PX = 34;
/** Tracks shown at most before the box scrolls (the CSS's max-height of `.tl-counters`). */
export const TRACKS_SHOWN = 6;

/** Tableau 10, one colour per track in order. */
const COLORS = ["#f28e2b", "#4e79a7", "#59a14f", "#b07aa1", "#76b7b2", "#e15759", "#edc948", "#9c755f", "#ff9da7", "#bab0ac"];

/**
 * The colour of the `index`-th track.
 * @param {number} index
 */
export function trackColor(index) {
  return COLORS[index % COLORS.length];
}

/**
 * The value range a track's height spans: 0..1 for ratios (more when a ratio exceeds 1), else
 * from 0 (or the lowest value, when negative) to the highest value.
 * @param {Series} series
 * @returns {[number, number]}
 */
export function seriesRange(series) {
  let lo = 0;
  let hi = series.unit === "ratio" ? 1 : 0;
  for (const v of series.value) {
    if (v === null || !Number.isFinite(v)) continue;
    if (v > hi) hi = v;
    if (v < lo) lo = v;
  }
  if (hi <= lo) hi = lo + 1;
  return [lo, hi];
}

/**
 * The highest value of a series, null when it has none.
 * @param {Series} series
 * @returns {number|null}
 */
export function seriesMax(series) {
  let hi = null;
  for (const v of series.value) {
    if (v !== null && Number.isFinite(v) && (hi === null || v > hi)) hi = v;
  }
  return hi;
}

/**
 * The sample in force at time `t` (the last one at or before it; counters hold their value until
 * the next sample), or null before the first sample.
 * @param {Series} series
 * @param {number} t
 * @returns {{t_us: number, value: number|null}|null}
 */
export function valueAt(series, t) {
  const ts = series.t_us;
  let lo = 0;
  let hi = ts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] <= t) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found < 0 ? null : { t_us: ts[found], value: series.value[found] };
}

/**
 * A counter value as text, by its unit.
 * @param {number|null|undefined} value
 * @param {"ratio"|"bytes"|"value"} unit
 */
export function formatCounter(value, unit) {
  if (value === null || value === undefined || !Number.isFinite(value)) return NA;
  if (unit === "ratio") return formatRatio(value, 1);
  if (unit === "bytes") return formatBytes(value);
  const abs = Math.abs(value);
  return abs >= 1000 || Number.isInteger(value) ? Math.round(value).toLocaleString("en-US") : value.toPrecision(3);
}

/**
 * Draws one step chart per series, `trackPx` tall each, top to bottom.
 * @param {CanvasRenderingContext2D} ctx
 * @param {{width: number, height: number, series: Series[], win: TimeWindow, trackPx?: number, cursor?: number|null}} view
 */
export function drawCounters(ctx, { width, height, series, win, trackPx = TRACK_PX, cursor = null }) {
  ctx.clearRect(0, 0, width, height);
  series.forEach((s, index) => {
    const top = index * trackPx;
    const plotTop = top + 4;
    const plotH = trackPx - 7;
    const [lo, hi] = seriesRange(s);
    const yOf = (/** @type {number} */ v) => plotTop + plotH - ((v - lo) / (hi - lo)) * plotH;
    const color = trackColor(index);
    ctx.fillStyle = "rgba(60, 64, 67, 0.07)";
    ctx.fillRect(0, top + trackPx - 1, width, 1);

    /** @type {[number, number][][]} */ const runs = [];
    /** @type {[number, number][]} */ let run = [];
    for (let k = 0; k < s.t_us.length; k += 1) {
      const v = s.value[k];
      if (v === null || !Number.isFinite(v)) {
        if (run.length) runs.push(run);
        run = [];
        continue;
      }
      run.push([xOf(s.t_us[k], win, width), yOf(v)]);
    }
    if (run.length) runs.push(run);
    const base = yOf(Math.max(lo, 0));
    for (const points of runs) {
      // A step chart: each sample holds until the next one, the last until the window's end
      // (or a pixel, when a gap follows).
      const lastX = points === runs[runs.length - 1] && s.value[s.value.length - 1] !== null
        ? Math.max(points[points.length - 1][0], width) : points[points.length - 1][0] + 1;
      ctx.beginPath();
      ctx.moveTo(points[0][0], base);
      for (let k = 0; k < points.length; k += 1) {
        const [x, y] = points[k];
        if (k > 0) ctx.lineTo(x, points[k - 1][1]);
        ctx.lineTo(x, y);
      }
      ctx.lineTo(lastX, points[points.length - 1][1]);
      ctx.lineTo(lastX, base);
      ctx.closePath();
      ctx.globalAlpha = 0.28;
      ctx.fillStyle = color;
      ctx.fill();
      ctx.globalAlpha = 1;
      ctx.beginPath();
      for (let k = 0; k < points.length; k += 1) {
        const [x, y] = points[k];
        if (k === 0) ctx.moveTo(x, y);
        else {
          ctx.lineTo(x, points[k - 1][1]);
          ctx.lineTo(x, y);
        }
      }
      ctx.lineTo(lastX, points[points.length - 1][1]);
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.25;
      ctx.stroke();
    }
  });
  if (cursor !== null && cursor >= 0 && cursor <= width) {
    ctx.fillStyle = "rgba(32, 33, 36, 0.45)";
    ctx.fillRect(Math.round(cursor), 0, 1, height);
  }
}

/**
 * The counter tracks of one mount: shown or hidden, fetched for the window on screen (when the
 * data on hand no longer covers it), labels, drawing and the value under the pointer.
 * @param {{box: HTMLElement, labels: HTMLElement, canvas: HTMLCanvasElement}} ui
 * @param {object} hooks
 * @param {(req: TimeWindow & {width_px: number}, signal: AbortSignal) => Promise<{series: Series[]}>} hooks.load
 * @param {() => TimeWindow} hooks.view
 * @param {() => number} hooks.width the plot's width, CSS px
 * @param {TimeWindow} hooks.bounds the trace
 * @param {number} hooks.origin the trace's start, for times in tooltips
 * @param {() => void} hooks.changed something needs drawing
 * @param {(event: MouseEvent, title: string, lines: string[]) => void} hooks.tooltip shows a tooltip at the pointer
 * @param {() => void} hooks.untip hides it
 * @param {AbortSignal} [hooks.signal] fires when the view is remounted
 */
export function counterTracks(ui, { load, view, width, bounds, origin, changed, tooltip, untip, signal }) {
  /** @type {Series[]|null} */ let series = null;
  /** @type {(TimeWindow & {width_px: number})|null} */ let have = null;
  /** @type {AbortController|null} */ let inflight = null;
  /** @type {number|null} */ let cursor = null;
  const listen = { signal };

  function drawLabels() {
    if (!series || !series.length) {
      ui.labels.replaceChildren(el("div", { class: "tl-counter-empty", testid: "counter-empty",
        text: series ? "This trace records no counters." : "Loading counters…" }));
      return;
    }
    ui.labels.replaceChildren(...series.map((s, i) => {
      const max = seriesMax(s);
      return el("div", {
        class: "tl-counter-label", testid: "counter-label", title: s.name,
        attrs: { style: `height: ${TRACK_PX}px; --track-color: ${trackColor(i)}` },
      }, [
        el("span", { class: "tl-counter-name", text: s.name }),
        el("span", { class: "tl-counter-max", text: max === null ? "no samples here" : `max ${formatCounter(max, s.unit)}` }),
      ]);
    }));
  }

  /** Fetches the series for the view unless the data on hand covers it. */
  async function fetchSeries() {
    if (ui.box.hidden || covers(have, view(), width(), bounds)) return;
    const req = requestWindow(view(), width(), bounds);
    if (inflight) inflight.abort();
    const ctl = new AbortController();
    inflight = ctl;
    try {
      const body = await load(req, ctl.signal);
      if (ctl.signal.aborted) return;
      series = body.series || [];
      have = req;
      drawLabels();
      changed();
    } catch (err) {
      if (ctl.signal.aborted || isAbort(err)) return;
      ui.labels.replaceChildren(el("div", { class: "tl-counter-error", testid: "counter-error",
        text: `Counters could not be loaded: ${err instanceof Error ? err.message : String(err)}` }));
    } finally {
      if (inflight === ctl) inflight = null;
    }
  }

  /** @param {boolean} on */
  function show(on) {
    ui.box.hidden = !on;
    if (!on) {
      if (inflight) inflight.abort();
      inflight = null;
      changed();
      return Promise.resolve();
    }
    if (!series) drawLabels();
    changed();
    return fetchSeries();
  }

  function draw() {
    if (ui.box.hidden || !series) return;
    const height = Math.max(1, series.length * TRACK_PX);
    const w = width();
    const dpr = window.devicePixelRatio || 1;
    if (ui.canvas.width !== Math.round(w * dpr)) ui.canvas.width = Math.round(w * dpr);
    if (ui.canvas.height !== Math.round(height * dpr)) ui.canvas.height = Math.round(height * dpr);
    ui.canvas.style.width = `${w}px`;
    ui.canvas.style.height = `${height}px`;
    const ctx = /** @type {CanvasRenderingContext2D} */ (ui.canvas.getContext("2d"));
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    drawCounters(ctx, { width: w, height, series, win: view(), cursor });
    ui.canvas.dataset.tracks = String(series.length);
  }

  ui.canvas.addEventListener("pointermove", (event) => {
    if (!series || !series.length) return;
    const rect = ui.canvas.getBoundingClientRect();
    const track = series[Math.floor((event.clientY - rect.top) / TRACK_PX)];
    cursor = event.clientX - rect.left;
    changed();
    if (!track) return;
    const t = timeOf(cursor, view(), width());
    const sample = valueAt(track, t);
    tooltip(event, track.name, [
      sample ? formatCounter(sample.value, track.unit) : "No sample yet",
      `At ${formatOffset(t - origin)}`,
    ]);
  }, listen);
  ui.canvas.addEventListener("pointerleave", () => {
    cursor = null;
    untip();
    changed();
  }, listen);
  if (signal) signal.addEventListener("abort", () => { if (inflight) inflight.abort(); });

  ui.box.hidden = true;
  return { show, load: fetchSeries, draw };
}
