/**
 * The torch.compile view: headline cards, graph breaks and where they happen, a first call's compile
 * time by phase, compiled regions per step and per call, CompiledFunction pieces and their pairing,
 * the kernel mix (Triton versus the rest, launches by API), the aten operators compiled graphs ran
 * and launch overhead per step. Reads
 * `/api/compile`, and `/api/recommendations` for the graph_breaks and launch_bound findings.
 *
 * Three layers: fetch (`fetchCompile`), shape (pure functions in lib/compileview.js) and draw
 * (`mount` and the `draw*` helpers).
 * @module compile
 */

import { getJSON, isAbort } from "./lib/api.js";
import {
  LAUNCH_APIS, atenMetaText, breakWhere, familyRows, familySlices, headlineCards, launchChart, launchRows, pairingText,
  perStepText, phaseChart, phaseRows, regionTotals, shortKernelText,
} from "./lib/compileview.js";
import { byTestId, el, showWarnings } from "./lib/dom.js";
import { evidenceTarget, severityBadge, sortFindings } from "./lib/findings.js";
import { formatCount, formatUs, shortKernelName } from "./lib/format.js";
import { draw, showEmpty } from "./lib/plot.js";
import { pieLayout, pieTrace } from "./lib/pie.js";
import { buildTable, countColumn, emptyText, ratioColumn, timeColumn } from "./lib/table.js";
import { traceHref, viewHref } from "./lib/url.js";

/**
 * @typedef {import("./lib/compileview.js").Compiled} Compiled
 * @typedef {import("./lib/compileview.js").Card} Card
 * @typedef {import("./lib/findings.js").Finding} Finding
 * @typedef {import("./lib/table.js").Column} Column
 * @typedef {{run?: string, worker?: string, span?: string}} Selection
 */

/** The findings this view is about, in the Recommendations view. */
export const FINDING_IDS = Object.freeze(["graph_breaks", "launch_bound"]);

/** Rows a page of the per-call table shows. */
const CALLS_PAGE = 20;
/** Rows a page of the compile roots shows (a big model's first run autotunes many kernels, one root each). */
const ROOTS_PAGE = 10;
/** A compile root's pass in words. */
const PASS_NAMES = Object.freeze({ forward: "forward", backward: "backward", first_run: "first run" });

// ---------------------------------------------------------------- fetch

/**
 * @param {Selection} selection
 * @param {AbortSignal} [signal]
 * @returns {Promise<Compiled>}
 */
export function fetchCompile({ run, worker, span }, signal) {
  return getJSON("/api/compile", { run, worker, span }, signal);
}

/**
 * The findings of the rules this view is about; null when they could not be read (the view works without).
 * @param {Selection} selection
 * @param {AbortSignal} [signal]
 * @returns {Promise<Finding[]|null>}
 */
async function fetchFindings({ run, worker, span }, signal) {
  try {
    const data = await getJSON("/api/recommendations", { run, worker, span }, signal);
    return (data.recommendations || []).filter((/** @type {Finding} */ f) => FINDING_IDS.includes(f.id));
  } catch (err) {
    if (isAbort(err)) throw err;
    return null;
  }
}

// ---------------------------------------------------------------- draw helpers

/**
 * A "Trace" link that opens the Trace view on an item (its event selected, else its time range).
 * @param {Selection} selection
 * @param {{event_id?: number, start_us?: number, end_us?: number}} item
 * @param {string} [title]
 * @returns {HTMLElement|string}
 */
function traceAction(selection, item, title = "Open the trace view on this event") {
  const target = evidenceTarget(/** @type {import("./lib/findings.js").Evidence} */ (/** @type {unknown} */ (item)));
  if (!target) return "";
  return el("a", { class: "action-link", text: "Trace", testid: "trace-link", title,
    attrs: { href: traceHref(selection, target) } });
}

/** @param {Selection} selection @param {string} title @returns {Column} */
function traceColumn(selection, title) {
  return { key: "actions", label: "", sortable: false, cellClass: "cell-actions",
    render: (row) => traceAction(selection, row, title) };
}


/** The step column: a link to the step's range in the Trace view. @param {Selection} selection @returns {Column} */
function stepColumn(selection) {
  return { key: "step", label: "Step",
    sortValue: (row) => (Number.isFinite(Number(row.step)) ? Number(row.step) : row.step),
    render: (row) => (Number.isFinite(row.start_us)
      ? el("a", { class: "action-link cmp-step-link", text: String(row.step), title: "Open this step in the trace view",
        attrs: { href: traceHref(selection, { start_us: row.start_us, end_us: row.end_us }) } })
      : String(row.step ?? "outside steps")) };
}

/** @param {HTMLElement} node @param {Card[]} cards */
function drawCards(node, cards) {
  node.replaceChildren(...cards.map((c) => el("div", {
    class: `cmp-stat${c.alert ? " cmp-stat-alert" : ""}`, testid: `card-${c.key}`, title: c.title || "",
    attrs: { "data-alert": String(Boolean(c.alert)) },
  }, [
    el("div", { class: "cmp-stat-label", text: c.label }),
    el("div", { class: "cmp-stat-value", testid: "card-value", text: c.value }),
    c.sub ? el("div", { class: "cmp-stat-sub", text: c.sub }) : null,
  ])));
}

/**
 * The graph_breaks and launch_bound findings, each linking to the Recommendations view.
 * @param {HTMLElement} root
 * @param {Finding[]|null} findings
 * @param {Selection} selection
 */
function drawFindings(root, findings, selection) {
  const href = viewHref("recommendations", selection);
  /** @type {HTMLAnchorElement} */ (byTestId(root, "recommendations-link")).href = href;
  const node = byTestId(root, "findings");
  if (findings === null) {
    emptyText(node, "The recommendations could not be read; the link above opens them.");
    return;
  }
  if (!findings.length) {
    emptyText(node, "Neither graph_breaks nor launch_bound fired on this trace.");
    return;
  }
  node.replaceChildren(el("ul", { class: "rec-list" }, sortFindings(findings).map((f) =>
    el("li", { class: `rec rec-${f.severity}`, testid: "finding", attrs: { "data-id": f.id } }, [
      el("div", { class: "rec-head" }, [
        severityBadge(f.severity),
        el("span", { class: "rec-title", text: f.title }),
        el("a", { class: "card-link cmp-finding-link", text: "Details →", testid: "finding-link",
          title: `The ${f.id} finding with its numbers and evidence`, attrs: { href } }),
      ]),
    ]))));
}

/** @param {HTMLElement} root @param {Compiled} data @param {Selection} selection */
function drawBreaks(root, data, selection) {
  const { locations, summary } = data.regions;
  const meta = byTestId(root, "breaks-meta");
  const node = byTestId(root, "breaks");
  if (!summary.graph_breaks) {
    meta.textContent = "";
    emptyText(node, summary.calls
      ? "No graph breaks: each call runs one compiled graph."
      : "No compiled regions in this trace, so no graph breaks to show.");
    return;
  }
  meta.textContent = `${formatCount(summary.graph_breaks)} in ${formatCount(summary.calls)} calls, `
    + `${formatCount(locations.length)} place${locations.length === 1 ? "" : "s"}`;
  node.replaceChildren(buildTable({
    caption: "Where the compiled calls broke",
    testid: "breaks-table",
    columns: [
      { key: "where", label: "Where", cellClass: "cell-name cmp-where",
        render: (row) => el("span", { class: "truncate", text: row.where,
          title: row.frames && row.frames.length ? row.frames.join("\n") : row.where }),
        title: "The user's frame when stacks were recorded (hover: the stack), else the region and the region it broke out of" },
      { key: "region", label: "Region", cellClass: "cell-mono", title: "The resume region: frame id / recompile" },
      { key: "parent_region", label: "Broke out of", cellClass: "cell-mono" },
      countColumn("count", "Times", "How often the break happened in this trace"),
      traceColumn(selection, "Open the trace view on the first region opened at this break"),
    ],
    rows: locations.map((l) => ({ ...l, where: breakWhere(l) })),
  }));
}

/** @param {HTMLElement} root @param {Compiled} data @param {Selection} selection */
async function drawCompile(root, data, selection) {
  const breakdown = data.compile;
  const node = byTestId(root, "compile");
  const meta = byTestId(root, "compile-meta");
  if (!(breakdown.total_us > 0)) {
    meta.textContent = "";
    node.replaceChildren(el("p", { class: "empty", testid: "no-compile",
      text: "This trace holds no compilation: profile the first call to see where compile time goes." }));
    return;
  }
  meta.textContent = `${formatUs(breakdown.total_us)}: forward ${formatUs(breakdown.forward_us)}, `
    + `backward ${formatUs(breakdown.backward_us)}, first run ${formatUs(breakdown.first_run_us)}`;
  const chart = el("div", { class: "chart cmp-chart-phases", testid: "phase-chart" });
  const time = (/** @type {string} */ key, /** @type {string} */ label) => timeColumn(key, label);
  node.replaceChildren(
    chart,
    el("div", { testid: "phase-table" }, [buildTable({
      caption: "Compile time by phase and pass",
      columns: [
        { key: "label", label: "Phase" },
        time("forward_us", "Forward"), time("backward_us", "Backward"), time("first_run_us", "First run"),
        time("total_us", "Total"), ratioColumn("share_ratio", "Share"),
      ],
      rows: phaseRows(breakdown),
    })]),
    el("h3", { class: "cmp-subtitle", text: "Costliest compile ranges (exclusive time)" }),
    el("div", { class: "table-wrap-heads", testid: "top-ranges" }, [buildTable({
      caption: "The compile ranges with the most exclusive time",
      columns: [
        { key: "name", label: "Range", truncate: true, cellClass: "cell-name cell-mono" },
        { key: "phase", label: "Phase", format: (v) => phaseLabel(breakdown, v) },
        countColumn("calls", "Calls"), timeColumn("self_us", "Self time"),
        { key: "actions", label: "", sortable: false, cellClass: "cell-actions",
          render: (row) => el("a", { class: "action-link", text: "Trace", testid: "trace-link",
            title: "Find this range in the trace view", attrs: { href: traceHref(selection, { q: row.name }) } }) },
      ],
      rows: breakdown.top || [],
    })]),
    el("h3", { class: "cmp-subtitle", text: "Compile roots, in time order" }),
    el("div", { class: "table-wrap-heads", testid: "roots" }, [buildTable({
      caption: "The outermost compile ranges",
      pageSize: (breakdown.roots || []).length > ROOTS_PAGE ? ROOTS_PAGE : undefined,
      columns: [
        { key: "name", label: "Range", truncate: true, cellClass: "cell-name cell-mono" },
        { key: "pass", label: "Pass", format: (v) => PASS_NAMES[v] || String(v) },
        timeColumn("dur_us", "Duration"),
        traceColumn(selection, "Open the trace view on this compile range"),
      ],
      rows: breakdown.roots || [],
    })]),
  );
  const { traces, layout } = phaseChart(breakdown);
  await draw(chart, traces, layout);
}

/** @param {import("./lib/compileview.js").Breakdown} breakdown @param {string} phase */
function phaseLabel(breakdown, phase) {
  const found = (breakdown.phases || []).find((p) => p.phase === phase);
  return found ? found.label : phase;
}

/** @param {HTMLElement} root @param {Compiled} data @param {Selection} selection */
function drawRegions(root, data, selection) {
  const { steps, calls, summary } = data.regions;
  byTestId(root, "regions-meta").textContent = `${formatCount(summary.calls)} calls, ${formatCount(summary.regions)} regions`;
  const stepsNode = byTestId(root, "region-steps");
  if (!steps.length) emptyText(stepsNode, "No steps found in this trace.");
  else {
    stepsNode.replaceChildren(buildTable({
      caption: "Compiled regions per step",
      testid: "region-steps-table",
      columns: [
        stepColumn(selection),
        countColumn("calls", "Calls"), countColumn("regions", "Regions"),
        countColumn("graph_breaks", "Graph breaks"), countColumn("max_depth", "Depth", "The deepest nesting (1 = none)"),
        timeColumn("compiled_us", "Compiled time", "The union of the compiled regions inside the step"),
        timeColumn("outside_us", "Outside time", "Eager code, the optimizer, data loading, ..."),
        ratioColumn("compiled_ratio", "Compiled share"),
      ],
      rows: steps,
      footer: regionTotals(steps) || undefined,
    }));
  }
  const callsNode = byTestId(root, "calls");
  if (!calls.length) {
    emptyText(callsNode, "No compiled calls in this trace.");
    return;
  }
  callsNode.replaceChildren(buildTable({
    caption: "Compiled calls",
    testid: "calls-table",
    pageSize: calls.length > CALLS_PAGE ? CALLS_PAGE : undefined,
    columns: [
      countColumn("index", "#"),
      { key: "step", label: "Step", format: (v) => (v === null || v === undefined ? "outside steps" : String(v)) },
      { key: "region", label: "Region", cellClass: "cell-mono" },
      countColumn("regions", "Regions"), countColumn("graph_breaks", "Graph breaks"), countColumn("depth", "Depth"),
      timeColumn("dur_us", "Duration"),
      traceColumn(selection, "Open the trace view on this compiled call"),
    ],
    rows: calls.map((c, i) => ({ ...c, index: i + 1, dur_us: c.end_us - c.start_us })),
  }));
}

/** @param {HTMLElement} root @param {Compiled} data @param {Selection} selection */
function drawPieces(root, data, selection) {
  const { pieces } = data;
  const node = byTestId(root, "pieces");
  byTestId(root, "pieces-meta").textContent = `${formatCount(pieces.paired)} paired`;
  const line = el("p", { class: "cmp-line", testid: "pairing", text: pairingText(pieces) });
  if (!pieces.forward && !pieces.backward) {
    node.replaceChildren(line);
    return;
  }
  const unpaired = pieces.unpaired || [];
  node.replaceChildren(...[
    line,
    buildTable({
      caption: "CompiledFunction pieces per step",
      testid: "pieces-table",
      columns: [
        { key: "step", label: "Step" },
        countColumn("forward", "Forward pieces"), countColumn("backward", "Backward pieces"),
        countColumn("paired", "Paired"), countColumn("unpaired_forward", "Unpaired forward"),
        countColumn("unpaired_backward", "Unpaired backward"),
        timeColumn("forward_us", "Forward time"), timeColumn("backward_us", "Backward time"),
      ],
      rows: pieces.steps,
    }),
    unpaired.length ? el("h3", { class: "cmp-subtitle", text: "Unpaired pieces" }) : null,
    unpaired.length ? el("div", { class: "table-wrap-heads", testid: "unpaired" }, [buildTable({
      caption: "Pieces without a partner",
      columns: [
        { key: "name", label: "Piece", cellClass: "cell-mono" },
        timeColumn("dur_us", "Duration"),
        traceColumn(selection, "Open the trace view on this piece"),
      ],
      rows: unpaired.map((p) => ({ ...p, dur_us: p.end_us - p.start_us })),
    })]) : null,
  ].filter((n) => n !== null));
}

/** @param {HTMLElement} root @param {Compiled} data */
async function drawKernelMix(root, data) {
  const mix = data.kernels;
  const kernels = (mix.triton.kernels || 0) + (mix.other.kernels || 0);
  byTestId(root, "kernels-meta").textContent = `${formatCount(kernels)} kernels, `
    + `${formatUs((mix.triton.total_us || 0) + (mix.other.total_us || 0))}`;
  byTestId(root, "families").replaceChildren(buildTable({
    caption: "Kernel time and count by family",
    testid: "families-table",
    columns: [
      { key: "label", label: "Family" },
      countColumn("kernels", "Kernels"), ratioColumn("count_ratio", "Count share"),
      timeColumn("total_us", "Time"), ratioColumn("time_ratio", "Time share"),
    ],
    rows: familyRows(mix),
  }));
  const launches = launchRows(mix);
  const launchNode = byTestId(root, "launches");
  if (!launches.length) emptyText(launchNode, "No launch calls were recorded.");
  else {
    launchNode.replaceChildren(buildTable({
      caption: "Launch calls by API",
      testid: "launches-table",
      columns: [
        { key: "api_label", label: "API", render: (row) => el("span", { text: row.api_label,
          title: (LAUNCH_APIS[row.api] || { title: "" }).title, attrs: { "data-api": row.api } }) },
        { key: "name", label: "Call", cellClass: "cell-mono" },
        countColumn("calls", "Calls"), ratioColumn("calls_ratio", "Share"),
        timeColumn("total_us", "Time"), timeColumn("mean_us", "Mean"),
      ],
      rows: launches,
    }));
  }
  const chart = byTestId(root, "kernel-mix-chart");
  const { slices, colors } = familySlices(mix);
  if (!slices.length) showEmpty(chart, "No kernel time was recorded.");
  else await draw(chart, [pieTrace(slices, { colors })], pieLayout());
}

/**
 * The aten operators compiled graphs ran (extern kernels such as `aten::mm`, and fallbacks), each
 * linking to the Operator view.
 * @param {HTMLElement} root
 * @param {Compiled} data
 * @param {Selection} selection
 */
function drawAten(root, data, selection) {
  const aten = data.aten || { graph_calls: 0, triton_calls: 0, rows: [] };
  const node = byTestId(root, "aten");
  byTestId(root, "aten-meta").textContent = atenMetaText(aten);
  if (!aten.graph_calls) {
    node.replaceChildren(el("p", { class: "empty" }, [
      "No ", el("code", { text: "## Call CompiledFxGraph" }),
      " ranges in this trace, so the operators compiled graphs left to aten cannot be told apart.",
    ]));
    return;
  }
  if (!aten.rows.length) {
    emptyText(node, "Compiled graphs ran no aten operators: Inductor generated every kernel they launched.");
    return;
  }
  node.replaceChildren(buildTable({
    caption: "Aten operators run inside compiled graphs",
    testid: "aten-table",
    columns: [
      { key: "name", label: "Operator", cellClass: "cell-name cell-mono",
        title: "Extern kernels Inductor calls on purpose (matmuls, convolutions) and fallbacks for ops it cannot lower" },
      countColumn("calls", "Calls"), timeColumn("host_us", "Host time"),
      timeColumn("device_us", "Device time", "GPU time of the kernels the calls launched"),
      { key: "actions", label: "", sortable: false, cellClass: "cell-actions",
        render: (row) => el("a", { class: "action-link", text: "Operator", testid: "operator-link",
          title: `Find ${row.name} in the operator view`, attrs: { href: viewHref("operators", { ...selection, q: row.name }) } }) },
    ],
    rows: aten.rows,
  }));
}

/** @param {HTMLElement} root @param {Compiled} data @param {Selection} selection */
async function drawLaunch(root, data, selection) {
  const { steps, summary, worst } = data.launch;
  byTestId(root, "launch-meta").textContent = perStepText(summary);
  byTestId(root, "short-kernels").textContent = shortKernelText(summary);
  const chart = byTestId(root, "launch-chart");
  const stepsNode = byTestId(root, "launch-steps");
  if (!steps.length) {
    showEmpty(chart, "No steps found in this trace.");
    stepsNode.replaceChildren();
  } else {
    stepsNode.replaceChildren(buildTable({
      caption: "Launch overhead per step",
      testid: "launch-table",
      columns: [
        stepColumn(selection),
        timeColumn("total_us", "Step time"), timeColumn("gpu_busy_us", "GPU busy"),
        timeColumn("idle_launching_us", "Idle while launching", "Step time inside a launch call with no GPU work running"),
        ratioColumn("idle_launching_ratio", "Idle launching share"),
        countColumn("launches", "Launches"), countColumn("kernels", "Kernels", "Kernels tied to a launch call"),
        countColumn("short_kernels", "Shorter than launch"),
      ],
      rows: steps,
    }));
  }
  const worstNode = byTestId(root, "worst");
  if (!worst.length) emptyText(worstNode, "No kernel ran shorter than its launch call.");
  else {
    worstNode.replaceChildren(buildTable({
      caption: "Kernels shorter than their launch call",
      testid: "worst-table",
      columns: [
        { key: "name", label: "Kernel", cellClass: "cell-name cell-kernel",
          render: (row) => el("span", { class: "truncate", text: shortKernelName(row.name), title: row.name }) },
        { key: "launch_name", label: "Launch call", cellClass: "cell-mono" },
        timeColumn("kernel_us", "Kernel time"), timeColumn("launch_us", "Launch time"),
        traceColumn(selection, "Open the trace view on this kernel"),
      ],
      rows: worst,
    }));
  }
  if (steps.length) {
    const { traces, layout, height } = launchChart(steps);
    chart.style.height = `${height}px`;
    await draw(chart, traces, layout);
  }
}

// ---------------------------------------------------------------- mount

/**
 * Fetches and draws the torch.compile view of one worker's span.
 * @param {HTMLElement} root the `[data-view="compile"]` section
 * @param {Selection} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const selection = { run: params.run, worker: params.worker, span: params.span };
  const [data, findings] = await Promise.all([fetchCompile(selection, signal), fetchFindings(selection, signal)]);
  if (signal && signal.aborted) return;
  showWarnings(byTestId(root, "warnings"), data.warnings || []);
  drawCards(byTestId(root, "cards"), headlineCards(data));
  drawFindings(root, findings, selection);
  drawBreaks(root, data, selection);
  drawRegions(root, data, selection);
  drawPieces(root, data, selection);
  drawAten(root, data, selection);
  await Promise.all([
    drawCompile(root, data, selection),
    drawKernelMix(root, data),
    drawLaunch(root, data, selection),
  ]);
}
