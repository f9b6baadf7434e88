/**
 * Shaping for the torch.compile view: pure functions from `/api/compile` JSON to headline cards,
 * table rows and Plotly traces. No DOM here, so that tests can call every function directly.
 * @module lib/compileview
 */

import { formatCount, formatRatio, formatUs, timeAxis } from "./format.js";
import { layout } from "./plot.js";

/**
 * @typedef {{step: string, start_us: number, end_us: number, total_us: number, calls: number, regions: number,
 *            graph_breaks: number, max_depth: number, compiled_us: number, outside_us: number,
 *            compiled_ratio: number|null}} RegionStep
 * @typedef {{event_id: number, region: string, step: string|null, start_us: number, end_us: number,
 *            regions: number, graph_breaks: number, depth: number}} CompiledCall
 * @typedef {{region: string, parent_region: string, frame: string|null, frames: string[], count: number,
 *            event_id: number, label: string, start_us: number, end_us: number}} BreakLocation
 * @typedef {{calls: number, regions: number, graph_breaks: number, graph_breaks_per_call: number,
 *            max_graph_breaks_per_call: number, max_depth: number}} RegionSummary
 * @typedef {{steps: RegionStep[], calls: CompiledCall[], summary: RegionSummary, locations: BreakLocation[]}} Regions
 * @typedef {{step: string, forward: number, backward: number, paired: number, unpaired_forward: number,
 *            unpaired_backward: number, forward_us: number, backward_us: number}} PieceStep
 * @typedef {{event_id: number, name: string, start_us: number, end_us: number}} UnpairedPiece
 * @typedef {{steps: PieceStep[], forward: number, backward: number, paired: number,
 *            pairs: {forward_event_id: number, backward_event_id: number}[], unpaired: UnpairedPiece[]}} Pieces
 * @typedef {{family: string, kernels: number, total_us: number, time_ratio: number|null}} Family
 * @typedef {{name: string, api: "driver"|"runtime"|"graph", calls: number, total_us: number}} LaunchApi
 * @typedef {{triton: {kernels: number, total_us: number}, other: {kernels: number, total_us: number},
 *            triton_time_ratio: number|null, families: Family[], launches: LaunchApi[]}} KernelMix
 * @typedef {{phase: string, label: string, total_us: number, forward_us: number, backward_us: number,
 *            first_run_us: number}} Phase
 * @typedef {{name: string, pass: string, event_id: number, start_us: number, end_us: number, dur_us: number}} CompileRoot
 * @typedef {{name: string, phase: string, calls: number, self_us: number}} CompileRange
 * @typedef {{total_us: number, forward_us: number, backward_us: number, first_run_us: number, phases: Phase[],
 *            roots: CompileRoot[], top: CompileRange[]}} Breakdown
 * @typedef {{step: string, start_us: number, end_us: number, total_us: number, gpu_busy_us: number,
 *            gpu_idle_us: number, launching_us: number, idle_launching_us: number,
 *            idle_launching_ratio: number|null, launches: number, kernels: number, short_kernels: number,
 *            short_kernel_us: number}} LaunchStep
 * @typedef {{step_us: number|null, idle_launching_us: number|null, gpu_busy_ratio: number|null,
 *            idle_launching_ratio: number|null, launches_per_step: number|null, kernels_per_step: number|null,
 *            kernels: number, short_kernels: number, short_kernel_us: number, short_kernel_ratio: number|null,
 *            kernel_to_launch_ratio: number|null, median_kernel_us: number|null,
 *            median_launch_us: number|null}} LaunchSummary
 * @typedef {{event_id: number, launch_event_id: number, name: string, launch_name: string, kernel_us: number,
 *            launch_us: number, start_us: number, end_us: number}} ShortKernel
 * @typedef {{steps: LaunchStep[], summary: LaunchSummary, worst: ShortKernel[]}} Launch
 * @typedef {{name: string, calls: number, host_us: number, device_us: number}} AtenOp
 * @typedef {{graph_calls: number, triton_calls: number, rows: AtenOp[]}} AtenInGraphs
 * @typedef {{regions: Regions, pieces: Pieces, kernels: KernelMix, compile: Breakdown, launch: Launch,
 *            aten?: AtenInGraphs, warnings: string[]}} Compiled
 * @typedef {{key: string, label: string, value: string, sub?: string, alert?: boolean, title?: string}} Card
 */

/** Kernel families as people name them, with one fixed colour each (Triton in Inductor's orange). */
export const FAMILIES = Object.freeze({
  triton: { label: "Triton (Inductor)", color: "#f28e2b" },
  cublas: { label: "cuBLAS / GEMM", color: "#4e79a7" },
  cudnn: { label: "cuDNN / convolution", color: "#76b7b2" },
  aten: { label: "ATen", color: "#59a14f" },
  flash_attention: { label: "Flash attention", color: "#b07aa1" },
  communication: { label: "NCCL", color: "#e15759" },
  other: { label: "Other", color: "#bab0ac" },
});

/** Launch APIs: how a launch call hands work to the GPU. */
export const LAUNCH_APIS = Object.freeze({
  driver: { label: "Driver", title: "cuLaunchKernel*: how Triton (Inductor) kernels are launched" },
  runtime: { label: "Runtime", title: "cudaLaunchKernel*: how aten ops and libraries (cuBLAS, cuDNN) launch" },
  graph: { label: "CUDA graph", title: "cudaGraphLaunch: one call replays a captured graph of many kernels" },
});

/** The passes of a first call's compile, in the order they happen, with their colours. */
export const PASSES = Object.freeze([
  { key: "forward_us", label: "Forward (frame compile)", color: "#4e79a7" },
  { key: "backward_us", label: "Backward compile", color: "#f28e2b" },
  { key: "first_run_us", label: "First run (autotuning)", color: "#59a14f" },
]);

/** How a step's time splits in the launch-overhead chart. */
export const LAUNCH_PARTS = Object.freeze([
  { key: "busy", label: "GPU busy", color: "#4e79a7" },
  { key: "idle_launching", label: "GPU idle while the CPU launches", color: "#e15759" },
  { key: "idle_other", label: "GPU idle otherwise", color: "#d7dbe0" },
]);

/** @param {unknown} v @returns {v is number} */
function isNumber(v) {
  return typeof v === "number" && Number.isFinite(v);
}

/** @param {number} n @param {string} noun @returns {string} "1 call", "3 calls" (n rounded as shown) */
function plural(n, noun) {
  return `${formatCount(n)} ${noun}${Math.round(n) === 1 ? "" : "s"}`;
}

/** @param {number} part @param {number} whole @returns {number|null} */
function share(part, whole) {
  return isNumber(part) && isNumber(whole) && whole > 0 ? part / whole : null;
}

/**
 * Time inside compiled code over every step: the sums and their share.
 * @param {RegionStep[]} steps
 * @returns {{compiled_us: number, total_us: number, compiled_ratio: number|null}}
 */
export function compiledShare(steps) {
  const compiled = steps.reduce((sum, s) => sum + (s.compiled_us || 0), 0);
  const total = steps.reduce((sum, s) => sum + (s.total_us || 0), 0);
  return { compiled_us: compiled, total_us: total, compiled_ratio: share(compiled, total) };
}

/**
 * The totals row of the per-step regions table (shares from the sums); null for one step or none.
 * @param {RegionStep[]} steps
 * @returns {Record<string, any>|null}
 */
export function regionTotals(steps) {
  if (steps.length < 2) return null;
  const sum = (/** @type {keyof RegionStep} */ key) => steps.reduce((acc, s) => acc + (Number(s[key]) || 0), 0);
  const { compiled_us, total_us, compiled_ratio } = compiledShare(steps);
  return {
    step: "All steps", calls: sum("calls"), regions: sum("regions"), graph_breaks: sum("graph_breaks"),
    max_depth: Math.max(...steps.map((s) => s.max_depth || 0)), compiled_us, outside_us: total_us - compiled_us,
    compiled_ratio,
  };
}

/**
 * The headline cards: calls, graph breaks per call (an alert when any), regions, nesting depth, time in
 * compiled code, Triton's share of kernel time, GPU idle while launching, and compile time when the
 * trace holds a compile.
 * @param {Compiled} data
 * @returns {Card[]}
 */
export function headlineCards(data) {
  const { summary } = data.regions;
  const steps = data.regions.steps || [];
  const inside = compiledShare(steps);
  const mix = data.kernels;
  const kernels = (mix.triton.kernels || 0) + (mix.other.kernels || 0);
  const launch = data.launch.summary;
  /** @type {Card[]} */
  const cards = [
    { key: "calls", label: "Compiled calls", value: formatCount(summary.calls),
      sub: steps.length ? `${plural(steps.length, "step")}` : "no steps",
      title: "Top-level compiled regions: each run of a compiled function (its breaks nested inside)" },
    { key: "graph-breaks", label: "Graph breaks per call", value: formatCount(summary.graph_breaks_per_call),
      alert: summary.graph_breaks_per_call > 0 || summary.max_graph_breaks_per_call > 0,
      sub: summary.graph_breaks
        ? `${formatCount(summary.graph_breaks)} in all, at most ${formatCount(summary.max_graph_breaks_per_call)} per call`
        : "none",
      title: "The typical (median) call's regions less one: where Dynamo fell back to Python and resumed" },
    { key: "regions", label: "Compiled regions", value: formatCount(summary.regions),
      sub: summary.calls ? `${(summary.regions / summary.calls).toFixed(summary.regions % summary.calls ? 1 : 0)} per call` : "",
      title: "Torch-Compiled Region events: one per compiled graph run" },
    { key: "depth", label: "Max nesting depth", value: formatCount(summary.max_depth),
      sub: "1 = no nesting", title: "How deep regions nest inside one call: each break opens a region inside the last" },
    { key: "compiled-share", label: "Time in compiled code", value: formatRatio(inside.compiled_ratio),
      sub: inside.total_us > 0 ? `${formatUs(inside.compiled_us)} of ${formatUs(inside.total_us)} of steps` : "",
      title: "The union of the compiled regions inside the steps, as a share of step time" },
    { key: "triton-share", label: "Triton share of kernel time", value: formatRatio(mix.triton_time_ratio),
      sub: `${formatCount(mix.triton.kernels)} of ${plural(kernels, "kernel")}`,
      title: "GPU time of triton_* kernels (generated by Inductor) over all kernel time" },
    { key: "idle-launching", label: "GPU idle while launching", value: formatRatio(launch.idle_launching_ratio),
      sub: isNumber(launch.idle_launching_us) ? `${formatUs(launch.idle_launching_us)} per step` : "",
      title: "Step time when the CPU is inside a launch call and no GPU work runs (mean over steps)" },
  ];
  if (data.compile.total_us > 0) {
    cards.push({ key: "compile-time", label: "Compile time", value: formatUs(data.compile.total_us),
      sub: "first call", title: "torch.compile's own time in this trace (Dynamo, AOT autograd, Inductor, Triton)" });
  }
  return cards;
}

/**
 * Where a graph break is, in words: the user's frame when stacks were recorded, else the region
 * and the region it broke out of.
 * @param {BreakLocation} location
 * @returns {string}
 */
export function breakWhere(location) {
  return location.frame || `region ${location.region} inside region ${location.parent_region}`;
}

/**
 * One line on how CompiledFunction pieces pair up.
 * @param {Pieces} pieces
 * @returns {string}
 */
export function pairingText(pieces) {
  if (!pieces.forward && !pieces.backward) {
    return "No CompiledFunction pieces: the compiled code ran without autograd (inference, or no input needs grad).";
  }
  const unpaired = (pieces.forward - pieces.paired) + (pieces.backward - pieces.paired);
  const head = `${plural(pieces.forward, "forward piece")} and ${plural(pieces.backward, "backward piece")}: `
    + `${plural(pieces.paired, "pair")} joined by forward → backward flows`;
  return unpaired > 0 ? `${head}, ${formatCount(unpaired)} unpaired.` : `${head}; every piece is paired.`;
}

/**
 * The kernel-mix donut's slices: each family's kernel time, largest first, empty families left out.
 * @param {KernelMix} mix
 * @returns {{slices: import("./pie.js").Slice[], colors: Map<string, string>}}
 */
export function familySlices(mix) {
  const families = (mix.families || []).filter((f) => f.total_us > 0);
  const slices = families.map((f) => {
    const label = (FAMILIES[f.family] || FAMILIES.other).label;
    return { key: f.family, name: label, label, value: f.total_us, share_ratio: f.time_ratio,
      details: [`${plural(f.kernels, "kernel")}`] };
  });
  const colors = new Map(families.map((f) => [f.family, (FAMILIES[f.family] || FAMILIES.other).color]));
  return { slices, colors };
}

/**
 * Rows of the kernel-family table: the API's families with their label and share of kernel count.
 * @param {KernelMix} mix
 */
export function familyRows(mix) {
  const count = (mix.families || []).reduce((sum, f) => sum + (f.kernels || 0), 0);
  return (mix.families || []).map((f) => ({
    ...f, label: (FAMILIES[f.family] || FAMILIES.other).label, count_ratio: share(f.kernels, count),
  }));
}

/**
 * Rows of the launch table: each launch call name with its API's label, mean time and share of calls.
 * @param {KernelMix} mix
 */
export function launchRows(mix) {
  const calls = (mix.launches || []).reduce((sum, l) => sum + (l.calls || 0), 0);
  return (mix.launches || []).map((l) => ({
    ...l, api_label: (LAUNCH_APIS[l.api] || { label: l.api }).label,
    mean_us: l.calls > 0 ? l.total_us / l.calls : null, calls_ratio: share(l.calls, calls),
  }));
}

/**
 * Rows of the compile-phase table: each phase's time per pass and its share of the compile.
 * @param {Breakdown} breakdown
 */
export function phaseRows(breakdown) {
  return (breakdown.phases || []).map((p) => ({ ...p, share_ratio: share(p.total_us, breakdown.total_us) }));
}

/**
 * The compile break-down chart: one horizontal bar per phase (Dynamo on top, in pipeline order),
 * stacked by pass; passes with no time are left out. `customdata` keeps each bar's microseconds.
 * @param {Breakdown} breakdown
 * @returns {{traces: object[], layout: Record<string, any>}}
 */
export function phaseChart(breakdown) {
  const phases = breakdown.phases || [];
  const axis = timeAxis(Math.max(0, ...phases.map((p) => p.total_us || 0)));
  const y = phases.map((p) => p.label);
  const traces = PASSES.filter((pass) => phases.some((p) => p[pass.key] > 0)).map((pass) => ({
    type: "bar",
    orientation: "h",
    name: pass.label,
    y,
    x: phases.map((p) => (p[pass.key] || 0) / axis.divisor),
    customdata: phases.map((p) => p[pass.key] || 0),
    hovertext: phases.map((p) => `${p.label}, ${pass.label.toLowerCase()}: ${formatUs(p[pass.key])} `
      + `(${formatRatio(share(p[pass.key], breakdown.total_us))} of compile)`),
    hoverinfo: "text",
    marker: { color: pass.color, line: { width: 0 } },
  }));
  const chartLayout = layout({
    barmode: "stack",
    bargap: 0.35,
    margin: { l: 8, r: 72, t: 8, b: 44 },
    legend: { traceorder: "normal" },
    xaxis: { title: { text: axis.axisTitle("Exclusive time") }, rangemode: "tozero" },
    yaxis: { autorange: "reversed", type: "category", ticksuffix: "  " },
    annotations: phases.filter((p) => p.total_us > 0).map((p) => ({
      x: p.total_us / axis.divisor, y: p.label, text: formatUs(p.total_us), showarrow: false,
      xanchor: "left", xshift: 4, font: { size: 11, color: "#5f6368" },
    })),
  });
  return { traces, layout: chartLayout };
}

/**
 * The launch-overhead chart: per step, the shares of step time the GPU is busy, idle while the CPU
 * launches, and idle otherwise, as stacked horizontal bars (first step on top).
 * @param {LaunchStep[]} steps
 * @returns {{traces: object[], layout: Record<string, any>, height: number}}
 */
export function launchChart(steps) {
  const y = steps.map((s) => `Step ${s.step}`);
  const parts = {
    busy: (/** @type {LaunchStep} */ s) => s.gpu_busy_us || 0,
    idle_launching: (/** @type {LaunchStep} */ s) => s.idle_launching_us || 0,
    idle_other: (/** @type {LaunchStep} */ s) => Math.max(0, (s.total_us || 0) - (s.gpu_busy_us || 0) - (s.idle_launching_us || 0)),
  };
  const traces = LAUNCH_PARTS.map((part) => ({
    type: "bar",
    orientation: "h",
    name: part.label,
    y,
    x: steps.map((s) => (share(parts[part.key](s), s.total_us) || 0) * 100),
    customdata: steps.map((s) => parts[part.key](s)),
    hovertext: steps.map((s, i) => `${y[i]}: ${part.label.toLowerCase()} ${formatUs(parts[part.key](s))} `
      + `(${formatRatio(share(parts[part.key](s), s.total_us))})`),
    hoverinfo: "text",
    marker: { color: part.color, line: { width: 0 } },
  }));
  const height = Math.min(480, 120 + 28 * Math.max(1, steps.length));
  const chartLayout = layout({
    barmode: "stack",
    bargap: 0.3,
    margin: { l: 8, r: 16, t: 8, b: 44 },
    legend: { traceorder: "normal" },
    xaxis: { title: { text: "Share of step time" }, range: [0, 101], dtick: 20, ticksuffix: " %" },
    yaxis: { autorange: "reversed", type: "category", ticksuffix: "  " },
  });
  return { traces, layout: chartLayout, height };
}

/**
 * The aten card's meta line: how many graph calls ran, and what their direct children were.
 * @param {AtenInGraphs} aten
 * @returns {string}
 */
export function atenMetaText(aten) {
  if (!aten.graph_calls) return "";
  const ops = aten.rows.reduce((sum, r) => sum + (r.calls || 0), 0);
  return `${plural(aten.graph_calls, "graph call")}: ${plural(aten.triton_calls, "Triton kernel call")}, `
    + `${plural(ops, "aten call")}`;
}

/**
 * The launch card's meta line: launch calls and kernels launched one by one, per step (means).
 * @param {LaunchSummary} summary
 * @returns {string}
 */
export function perStepText(summary) {
  if (!isNumber(summary.launches_per_step)) return "";
  return `per step: ${plural(summary.launches_per_step, "launch call")}, `
    + `${plural(summary.kernels_per_step || 0, "kernel")} launched one by one`;
}

/**
 * The line under the launch chart: how many launched kernels ran shorter than their launch call.
 * @param {LaunchSummary} summary
 * @returns {string}
 */
export function shortKernelText(summary) {
  if (!summary.kernels) return "No kernel could be tied to its launch call.";
  return `${formatCount(summary.short_kernels)} of ${plural(summary.kernels, "launched kernel")} `
    + `(${formatRatio(summary.short_kernel_ratio)}) ran shorter than the call that launched them; `
    + `median kernel ${formatUs(summary.median_kernel_us)}, median launch call ${formatUs(summary.median_launch_us)}.`;
}
