/**
 * Pure shaping for the Memory Snapshot view: from `/api/snapshot*` JSON to summary cards,
 * Plotly traces of the active memory timeline, segment strips and table rows. No DOM, no Plotly.
 * @module lib/memsnap
 */

import { formatBytes, formatCount, formatOffset, formatRatio } from "./format.js";

/**
 * @typedef {import("./frames.js").Frame} Frame
 * @typedef {{site: string, file: string|null, line: number|null, function: string, op: string|null,
 *            frames: Frame[]}} Site
 * @typedef {{allocation: number, address: number, size_bytes: number, block_bytes: number, stream: number,
 *            first: number, last: number, start_index: number, end_index: number|null,
 *            start_time_us: number|null, end_time_us: number|null, alloc_recorded: boolean, site: number|null}} Band
 * @typedef {{device: number, entries: number, x: number[], time_us: (number|null)[], total_bytes: number[],
 *            other_bytes: number[], bands: Band[], sites: Site[], peak: {index: number, bytes: number,
 *            time_us: number|null}|null, allocations: number, other_allocations: number, warnings: string[]}} Timeline
 * @typedef {{address: number, size_bytes: number, state: "active_allocated"|"active_pending_free"|"inactive",
 *            requested_bytes?: number, alloc_recorded?: boolean, site?: number|null}} Block
 * @typedef {{address: number, total_bytes: number, stream: number, segment_type?: string|null,
 *            is_expandable?: boolean, allocated_bytes: number, pending_free_bytes: number, inactive_bytes: number,
 *            requested_bytes: number, largest_inactive_bytes: number, fragmentation_ratio: number|null,
 *            blocks: Block[]|null}} Segment
 * @typedef {{index: number, time_us: number|null, size_bytes: number, device_free_bytes: number|null,
 *            before?: boolean, device?: number}} Oom
 * @typedef {{segments: number, reserved_bytes: number, allocated_bytes: number, pending_free_bytes: number,
 *            inactive_bytes: number, requested_bytes: number, active_bytes: number,
 *            largest_inactive_bytes: number, fragmentation_ratio: number|null}} StateTotals
 * @typedef {{device: number, index: number, entries: number, entry: Record<string, any>|null,
 *            time_us: number|null, totals: StateTotals, segments: Segment[], sites: Site[], ooms: Oom[],
 *            approximate: boolean, warnings: string[]}} State
 * @typedef {{key: string, label: string, value: string, sub?: string, alert?: boolean, title?: string}} Card
 */

/** Block states, in legend order, with their colours and labels. */
export const BLOCK_STATES = Object.freeze([
  { state: "active_allocated", label: "Allocated", color: "#4e79a7" },
  { state: "active_pending_free", label: "Awaiting free", color: "#f28e2b" },
  { state: "inactive", label: "Inactive (reserved, unused)", color: "#d9dde1" },
]);

/** Colour of the summed small allocations ("other") on the timeline. */
export const OTHER_COLOR = "#c7c9cc";

/** A stable palette for allocation bands: an allocation keeps its colour across reloads. */
export const BAND_PALETTE = Object.freeze([
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
  "#9c755f", "#5778a4", "#e49444", "#d1615d", "#85b6b2", "#6a9f58", "#e7ca60", "#a87c9f",
  "#f1a2a9", "#967662", "#86bcb6", "#8cd17d", "#499894", "#d37295", "#fabfd2", "#79706e",
]);

/**
 * An allocation band's colour, from its allocation number (consecutive allocations differ).
 * @param {number} allocation
 * @returns {string}
 */
export function bandColor(allocation) {
  const n = Number.isFinite(allocation) ? Math.abs(Math.trunc(allocation)) : 0;
  // A stride coprime with the palette's length: neighbours in time get distant colours.
  return BAND_PALETTE[(n * 7) % BAND_PALETTE.length];
}

/**
 * An address as hex: 140071130890240 -> "0x7f6546000000".
 * @param {number|null|undefined} address
 * @returns {string}
 */
export function hexAddress(address) {
  if (typeof address !== "number" || !Number.isFinite(address) || address < 0) return "n/a";
  return `0x${Math.trunc(address).toString(16)}`;
}

/**
 * The device a URL asks for, if the snapshot has it; else the first device (or 0).
 * @param {string|null|undefined} text
 * @param {number[]} devices
 * @returns {number}
 */
export function parseDevice(text, devices) {
  const wanted = text === null || text === undefined || text === "" ? NaN : Number(text);
  if (Number.isInteger(wanted) && devices.includes(wanted)) return wanted;
  return devices.length ? devices[0] : 0;
}

/**
 * The history point a URL asks for (-1: before the first entry), or null (the final state) when
 * absent, junk or past the history.
 * @param {string|null|undefined} text
 * @param {number} entries the device's history length
 * @returns {number|null}
 */
export function parseAt(text, entries) {
  if (text === null || text === undefined || text === "") return null;
  const n = Number(text);
  if (!Number.isInteger(n) || n < -1 || n >= entries) return null;
  return n;
}

/**
 * The history index nearest to a clicked x (entry index axis), clamped to -1..entries-1.
 * @param {number} x
 * @param {number} entries
 * @returns {number|null} null when the history is empty or x is not a number
 */
export function indexAt(x, entries) {
  if (!Number.isFinite(x) || !(entries > 0)) return null;
  return Math.min(entries - 1, Math.max(-1, Math.round(x)));
}

/**
 * The unit of a bytes axis, 1024-based like formatBytes, chosen from its largest value.
 * @param {number} maxBytes
 * @returns {{unit: string, divisor: number}}
 */
export function bytesAxis(maxBytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (i < units.length - 1 && Math.abs(maxBytes) >= 1024 ** (i + 1)) i += 1;
  return { unit: units[i], divisor: 1024 ** i };
}

/**
 * One device's totals from the summary (the overall ones when the device is not listed).
 * @param {Record<string, any>} summary `/api/snapshot`
 * @param {number} device
 * @returns {Record<string, any>}
 */
export function deviceTotals(summary, device) {
  const found = (summary.per_device || []).find((/** @type {any} */ d) => d.device === device);
  return found || summary;
}

/**
 * The summary cards of one device: reserved, allocated, inactive (fragmentation), awaiting free,
 * segments, history entries and OOM events.
 * @param {Record<string, any>} summary `/api/snapshot`
 * @param {number} device
 * @returns {Card[]}
 */
export function summaryCards(summary, device) {
  const d = deviceTotals(summary, device);
  const ooms = ((summary.ooms && summary.ooms.events) || []).filter((/** @type {Oom} */ o) =>
    o.device === undefined || o.device === device);
  const types = d.segment_types && typeof d.segment_types === "object"
    ? Object.entries(d.segment_types).map(([k, v]) => `${formatCount(/** @type {number} */ (v))} ${k}`).join(", ")
    : "";
  return [
    { key: "reserved", label: "Reserved", value: formatBytes(d.reserved_bytes),
      title: "Memory the caching allocator holds from CUDA (the sum of its segments)" },
    { key: "allocated", label: "Allocated", value: formatBytes(d.allocated_bytes),
      sub: d.requested_bytes !== undefined ? `${formatBytes(d.requested_bytes)} requested` : undefined,
      title: "Blocks handed out to tensors and not freed (block sizes; requested: what the tensors asked for)" },
    { key: "inactive", label: "Inactive", value: formatBytes(d.inactive_bytes),
      sub: `${formatRatio(d.fragmentation_ratio, 1)} of reserved`,
      title: "Reserved but unused: free blocks inside segments (fragmentation). Largest free block: "
        + formatBytes(d.largest_inactive_block_bytes ?? d.largest_inactive_bytes) },
    { key: "pending", label: "Awaiting free", value: formatBytes(d.pending_free_bytes),
      title: "Freed by the program, still in use by another stream (record_stream) until its work completes" },
    { key: "segments", label: "Segments", value: formatCount(d.segments), sub: types || undefined,
      title: "cudaMalloc'd regions the allocator splits into blocks" },
    { key: "history", label: "History", value: formatCount(d.trace_entries ?? summary.trace_entries),
      sub: summary.history ? "entries" : "none recorded",
      title: "Allocator actions recorded by torch.cuda.memory._record_memory_history" },
    { key: "ooms", label: "OOM events", value: formatCount(ooms.length), alert: ooms.length > 0,
      title: "Out-of-memory errors the allocator recorded" },
  ];
}

/**
 * The totals cards of the allocator state at a point.
 * @param {StateTotals} totals
 * @returns {Card[]}
 */
export function stateCards(totals) {
  return [
    { key: "reserved", label: "Reserved", value: formatBytes(totals.reserved_bytes) },
    { key: "allocated", label: "Allocated", value: formatBytes(totals.allocated_bytes) },
    { key: "pending", label: "Awaiting free", value: formatBytes(totals.pending_free_bytes) },
    { key: "inactive", label: "Inactive", value: formatBytes(totals.inactive_bytes),
      sub: `${formatRatio(totals.fragmentation_ratio, 1)} fragmentation` },
    { key: "largest", label: "Largest free", value: formatBytes(totals.largest_inactive_bytes),
      title: "The largest inactive block: the biggest allocation that fits without a new segment" },
    { key: "segments", label: "Segments", value: formatCount(totals.segments) },
  ];
}

/**
 * Text safe inside Plotly's hover labels (which read `<` and `&` as markup).
 * @param {string} text
 * @returns {string}
 */
export function plotText(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * A source path without its install prefix: ".../site-packages/torch/nn/modules/conv.py" ->
 * "torch/nn/modules/conv.py"; other long absolute paths keep their last three parts.
 * @param {string|null|undefined} path
 * @returns {string}
 */
export function shortPath(path) {
  if (!path) return "";
  const text = String(path).replace(/\\/g, "/");
  const m = text.match(/.*\/(?:site|dist)-packages\/(.+)$/);
  if (m) return m[1];
  const parts = text.split("/").filter(Boolean);
  return parts.length > 3 && text.length > 48 ? `…/${parts.slice(-3).join("/")}` : text;
}

/**
 * A frame as one short line: "torch/nn/modules/conv.py:548 _conv_forward".
 * @param {Frame} frame
 * @returns {string}
 */
export function shortFrame(frame) {
  if (!frame.file) return frame.function;
  const line = frame.line === null || frame.line === undefined ? "" : `:${frame.line}`;
  return `${shortPath(frame.file)}${line} ${frame.function}`;
}

/**
 * A site's name as shown in tables: its frame shortened ("torchvision/models/resnet.py:92 forward"),
 * or the operator / text the server gave.
 * @param {{site: string, file?: string|null, line?: number|null, function?: string}} site
 * @returns {string}
 */
export function siteLabel(site) {
  if (site.file) return shortFrame({ file: site.file, line: site.line ?? null, function: site.function || "" }).trim();
  return site.site;
}

/**
 * Up to `n` innermost frames of a site.
 * @param {Site|undefined} site
 * @param {number} n
 * @returns {Frame[]}
 */
export function topFrames(site, n) {
  return ((site && site.frames) || []).slice(0, n);
}

/**
 * "+12.346 ms" since the history's first entry, or "" without times.
 * @param {number|null|undefined} t
 * @param {number|null|undefined} t0
 * @returns {string}
 */
export function sinceStart(t, t0) {
  if (typeof t !== "number" || typeof t0 !== "number") return "";
  return `+${formatOffset(t - t0)}`;
}

/**
 * The hover label of one allocation band (Plotly markup, escaped).
 * @param {Band} band
 * @param {Site[]} sites
 * @param {number|null} t0 the history's first time
 * @returns {string}
 */
export function bandLabel(band, sites, t0) {
  const site = band.site === null || band.site === undefined ? undefined : sites[band.site];
  const freed = band.end_index === null || band.end_index === undefined
    ? "still live at the snapshot"
    : `freed at entry ${formatCount(band.end_index)} ${sinceStart(band.end_time_us, t0)}`.trim();
  const made = band.alloc_recorded === false
    ? "allocated before the history"
    : `allocated at entry ${formatCount(band.start_index)} ${sinceStart(band.start_time_us, t0)}`.trim();
  const lines = [
    `<b>${plotText(formatBytes(band.size_bytes))}</b> at ${hexAddress(band.address)} (stream ${band.stream})`,
    plotText(`${made}; ${freed}`),
  ];
  if (site) {
    lines.push(`site: ${plotText(siteLabel(site))}${site.op && site.op !== site.site ? ` (${plotText(site.op)})` : ""}`);
    const frames = topFrames(site, 4);
    if (frames.length) {
      lines.push(...frames.map((f) => `<span style="color:#5f6368">  ${plotText(shorten(shortFrame(f), 90))}</span>`));
      if (site.frames.length > frames.length) lines.push(`<span style="color:#5f6368">  … ${site.frames.length - frames.length} more</span>`);
    }
  } else {
    lines.push("no stack recorded");
  }
  return lines.join("<br>");
}

/**
 * Cuts long text in the middle of its path part: keeps the start and the end.
 * @param {string} text
 * @param {number} max
 * @returns {string}
 */
export function shorten(text, max) {
  if (text.length <= max) return text;
  const keep = Math.max(4, max - 1);
  const head = Math.floor(keep * 0.35);
  return `${text.slice(0, head)}…${text.slice(text.length - (keep - head))}`;
}

/**
 * The outline of a step-shaped area between two step curves over positions `from..to` of `x`
 * (value k holds from x[k] to x[k+1]; the last one ends at x[to]): along the top left to right,
 * back along the bottom, with runs of equal values joined.
 * @param {number[]} x
 * @param {number} from
 * @param {number} to
 * @param {(k: number) => number} top
 * @param {(k: number) => number} bottom
 * @returns {{xs: number[], ys: number[]}}
 */
export function stepArea(x, from, to, top, bottom) {
  const n = x.length;
  const end = (/** @type {number} */ k) => (k < n - 1 ? x[k + 1] : x[k]);
  /** @type {number[]} */ const xs = [];
  /** @type {number[]} */ const ys = [];
  /** @param {(k: number) => number} value @param {boolean} forward */
  const edge = (value, forward) => {
    let k = forward ? from : to;
    while (forward ? k <= to : k >= from) {
      const v = value(k);
      let j = k;
      // Extend the run of equal values.
      while (forward ? j + 1 <= to && value(j + 1) === v : j - 1 >= from && value(j - 1) === v) j += forward ? 1 : -1;
      if (forward) {
        xs.push(x[k], end(j));
      } else {
        xs.push(end(k), x[j]);
      }
      ys.push(v, v);
      k = forward ? j + 1 : j - 1;
    }
  };
  edge(top, true);
  edge(bottom, false);
  xs.push(xs[0]);
  ys.push(ys[0]);
  return { xs, ys };
}

/**
 * Stacks the allocation bands in allocation order (a band sits on the bands allocated before it
 * that are still live; when one is freed, those above drop), then the summed small allocations
 * on top, each as its own area over its live range only, so a chart of 150 bands draws a few
 * thousand points instead of 150 full-length curves.
 * @param {Timeline} timeline
 * @param {number} divisor bytes per axis unit
 * @returns {{bands: {xs: number[], ys: number[]}[], other: {xs: number[], ys: number[]}|null}}
 */
export function stackBands(timeline, divisor) {
  const { x, bands } = timeline;
  const n = x.length;
  const base = new Float64Array(n);
  const out = [];
  for (const band of bands) {
    const first = Math.max(0, Math.min(n - 1, band.first));
    const last = Math.max(first, Math.min(n - 1, band.last));
    const size = band.size_bytes / divisor;
    const bottom = Float64Array.from(base.subarray(first, last + 1));
    for (let k = first; k <= last; k++) base[k] += size;
    out.push(stepArea(x, first, last, (k) => bottom[k - first] + size, (k) => bottom[k - first]));
  }
  const other = timeline.other_bytes;
  let lo = 0;
  while (lo < n && !(other[lo] > 0)) lo++;
  let hi = n - 1;
  while (hi >= lo && !(other[hi] > 0)) hi--;
  const otherArea = lo <= hi && n
    ? stepArea(x, lo, hi, (k) => base[k] + other[k] / divisor, (k) => base[k])
    : null;
  return { bands: out, other: otherArea };
}

/**
 * The Plotly traces of the active memory timeline: one filled area per allocation band (see
 * {@link stackBands}), the summed small allocations on top, and the total as a thin line that
 * carries the per-point hover. Bands show their label when hovered inside.
 * @param {Timeline} timeline
 * @param {{divisor: number}} axis from {@link bytesAxis}
 * @param {number|null} t0 the history's first time (for "+ms" in labels)
 * @returns {object[]}
 */
export function timelineTraces(timeline, axis, t0) {
  const { x, bands, sites } = timeline;
  const stacked = stackBands(timeline, axis.divisor);
  /** @type {object[]} */
  const traces = bands.map((band, i) => {
    const color = bandColor(band.allocation);
    return {
      type: "scatter",
      mode: "lines",
      name: formatBytes(band.size_bytes),
      x: stacked.bands[i].xs,
      y: stacked.bands[i].ys,
      fill: "toself",
      line: { width: 0, color },
      fillcolor: color,
      hoveron: "fills",
      text: bandLabel(band, sites, t0),
      hoverlabel: { bgcolor: "#fff", bordercolor: color, font: { color: "#202124" }, align: "left", namelength: 0 },
      showlegend: false,
      meta: { allocation: band.allocation },
    };
  });
  if (stacked.other) {
    traces.push({
      type: "scatter",
      mode: "lines",
      name: "Other allocations",
      x: stacked.other.xs,
      y: stacked.other.ys,
      fill: "toself",
      line: { width: 0, color: OTHER_COLOR },
      fillcolor: OTHER_COLOR,
      hoveron: "fills",
      text: `${formatCount(timeline.other_allocations)} smaller allocations, summed`,
      hoverlabel: { namelength: 0, align: "left" },
      showlegend: false,
    });
  }
  traces.push({
    type: "scatter",
    mode: "lines",
    name: "Total live",
    x,
    y: timeline.total_bytes.map((v) => v / axis.divisor),
    line: { width: 1, shape: "hv", color: "#5f6368" },
    hoveron: "points",
    customdata: x.map((xi, i) => [
      formatBytes(timeline.total_bytes[i]),
      formatBytes(timeline.other_bytes[i]),
      xi < 0 ? "before the history" : `after entry ${formatCount(xi)} ${sinceStart(timeline.time_us[i], t0)}`.trim(),
    ]),
    hovertemplate: "<b>%{customdata[0]}</b> live %{customdata[2]}<br>"
      + "in smaller allocations: %{customdata[1]}<br><i>click to see the allocator state here</i><extra></extra>",
    hoverlabel: { align: "left" },
    showlegend: false,
  });
  return traces;
}

/**
 * The vertical markers of the timeline: the state shown (`at`) and OOM events.
 * @param {number|null} at
 * @param {Oom[]} ooms
 * @returns {object[]}
 */
export function timelineShapes(at, ooms) {
  /** @type {object[]} */
  const shapes = ooms.map((o) => ({
    type: "line", xref: "x", yref: "paper", x0: o.index, x1: o.index, y0: 0, y1: 1,
    line: { color: "#c5221f", width: 1.5, dash: "dot" },
  }));
  if (at !== null) {
    shapes.push({
      type: "line", xref: "x", yref: "paper", x0: at, x1: at, y0: 0, y1: 1,
      line: { color: "#1a73e8", width: 1.5, dash: "dash" },
    });
  }
  return shapes;
}

/**
 * The timeline's annotations: the peak, OOM events and the state shown.
 * @param {Timeline} timeline
 * @param {{divisor: number}} axis
 * @param {number|null} at
 * @param {Oom[]} ooms
 * @returns {object[]}
 */
export function timelineAnnotations(timeline, axis, at, ooms) {
  /** @type {object[]} */
  const out = [];
  if (timeline.peak && timeline.peak.bytes > 0) {
    out.push({
      x: timeline.peak.index, y: timeline.peak.bytes / axis.divisor, xref: "x", yref: "y",
      text: `Peak ${formatBytes(timeline.peak.bytes)}`, showarrow: true, arrowhead: 2, arrowsize: 1, arrowwidth: 1.2,
      arrowcolor: "#202124", ax: 0, ay: -26, font: { size: 12, color: "#202124" },
      bgcolor: "rgba(255,255,255,0.85)", borderpad: 2, name: "peak",
    });
  }
  for (const o of ooms) {
    out.push({ x: o.index, y: 1, xref: "x", yref: "paper", yanchor: "bottom", text: "OOM", showarrow: false,
      font: { size: 11, color: "#c5221f" }, name: "oom" });
  }
  if (at !== null) {
    out.push({ x: at, y: 1, xref: "x", yref: "paper", yanchor: "bottom", xanchor: "left",
      text: at < 0 ? "state: before the history" : `state: after entry ${formatCount(at)}`, showarrow: false,
      font: { size: 11, color: "#1a73e8" }, name: "at" });
  }
  return out;
}

/**
 * @typedef {{left: number, width: number, state: string, count: number, bytes: number, block: Block|null}} Piece
 */

/**
 * A segment's blocks as pieces of a strip: `left` and `width` as 0..1 of the segment; blocks
 * narrower than `minWidth` next to each other are merged into one piece (its state the one with
 * most bytes), so a segment of thousands of blocks stays a few hundred elements. A segment whose
 * blocks were left out (null) becomes three pieces from its totals.
 * @param {Segment} segment
 * @param {number} [minWidth] 0..1
 * @returns {Piece[]}
 */
export function blockPieces(segment, minWidth = 0.004) {
  const total = segment.total_bytes;
  if (!(total > 0)) return [];
  if (!Array.isArray(segment.blocks)) {
    /** @type {Piece[]} */ const out = [];
    let left = 0;
    for (const [state, bytes] of /** @type {[string, number][]} */ ([
      ["active_allocated", segment.allocated_bytes], ["active_pending_free", segment.pending_free_bytes],
      ["inactive", segment.inactive_bytes]])) {
      if (bytes > 0) {
        out.push({ left, width: bytes / total, state, count: 0, bytes, block: null });
        left += bytes / total;
      }
    }
    return out;
  }
  /** @type {Piece[]} */ const out = [];
  /** @type {{left: number, end: number, bytes: Record<string, number>, count: number}|null} */ let small = null;
  const flush = () => {
    if (!small) return;
    const state = Object.entries(small.bytes).sort((a, b) => b[1] - a[1])[0][0];
    const bytes = Object.values(small.bytes).reduce((s, v) => s + v, 0);
    out.push({ left: small.left, width: small.end - small.left, state, count: small.count, bytes, block: null });
    small = null;
  };
  for (const block of segment.blocks) {
    const left = (block.address - segment.address) / total;
    const width = block.size_bytes / total;
    if (width < minWidth) {
      if (small && Math.abs(small.end - left) > 1e-9) flush();
      if (!small) small = { left, end: left, bytes: {}, count: 0 };
      small.end = left + width;
      small.bytes[block.state] = (small.bytes[block.state] || 0) + block.size_bytes;
      small.count += 1;
      if (small.end - small.left >= minWidth) flush();
      continue;
    }
    flush();
    out.push({ left, width, state: block.state, count: 1, bytes: block.size_bytes, block });
  }
  flush();
  return out;
}

/**
 * A piece's tooltip.
 * @param {Piece} piece
 * @param {Site[]} sites
 * @returns {string}
 */
export function pieceTitle(piece, sites) {
  const label = (BLOCK_STATES.find((s) => s.state === piece.state) || { label: piece.state }).label;
  if (!piece.block) {
    return piece.count > 1
      ? `${formatCount(piece.count)} small blocks, ${formatBytes(piece.bytes)} (mostly ${label.toLowerCase()})`
      : `${label}: ${formatBytes(piece.bytes)}`;
  }
  const b = piece.block;
  const parts = [`${label}: ${formatBytes(b.size_bytes)} at ${hexAddress(b.address)}`];
  if (b.requested_bytes !== undefined && b.requested_bytes !== b.size_bytes) parts.push(`requested ${formatBytes(b.requested_bytes)}`);
  const site = b.site === null || b.site === undefined ? undefined : sites[b.site];
  if (site) parts.push(site.op ? `${site.site} (${site.op})` : site.site);
  else if (b.alloc_recorded === false) parts.push("allocated before the recorded history");
  return parts.join("\n");
}

/**
 * What the state section says it shows.
 * @param {State} state
 * @param {number|null} at
 * @param {number|null} t0
 * @returns {string}
 */
export function stateCaption(state, at, t0) {
  if (at === null) return "Final state, as stored in the snapshot";
  if (at < 0) return "Before the first recorded entry";
  const e = state.entry;
  const what = e ? ` (${String(e.action).replace(/_/g, " ")} ${formatBytes(e.size_bytes)})` : "";
  const when = sinceStart(state.time_us, t0);
  return `After entry ${formatCount(at)} of ${formatCount(state.entries)}${what}${when ? `, ${when}` : ""}`;
}
