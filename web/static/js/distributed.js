/**
 * The Distributed view: every worker of a run's span side by side. Stragglers first (who arrives
 * last at the collectives, by how much, at which calls), the collectives per type and size with
 * their bandwidths and a rank x collective delay map, then the topology, computation versus
 * communication and data transfer versus waiting per rank (one step picker for both), each rank's
 * communication ops and its step-time breakdown. Reads `/api/distributed` (no worker: all of them).
 *
 * Three layers: fetch (`fetchDistributed`), shape (pure functions in lib/distview.js) and draw
 * (`mount` and the `draw*` helpers).
 * @module distributed
 */

import { getJSON } from "./lib/api.js";
import {
  AVERAGE, OVERLAP_PARTS, WAIT_PARTS, assumedLines, comparisonChart, delayChart, delayMapChart, formatBandwidth,
  gpuText, groupLabel, groupLines, lateWindow, manyGroups, rankLabel,
  rankRows, stackedRankChart, stepOptions, stragglerBasisText, stragglerHeadline, topologyMeta,
  unalignedLines, valuesAt, worstOccurrences,
} from "./lib/distview.js";
import {
  PAGE_RANKS, SORTS, TOP, heatStrip, nodeLine, pickedShapes, rankPages, rowsOf, shownRanks, shownText,
} from "./lib/rankdist.js";
import { byTestId, el, showWarnings } from "./lib/dom.js";
import { formatCount, formatRatio, formatText } from "./lib/format.js";
import { draw, showEmpty } from "./lib/plot.js";
import { buildTable, bytesColumn, countColumn, emptyText, timeColumn } from "./lib/table.js";
import { navigate, readQuery, traceHref, updateQuery, viewHref } from "./lib/url.js";

/**
 * @typedef {import("./lib/distview.js").Distributed} Distributed
 * @typedef {import("./lib/table.js").Column} Column
 * @typedef {{run?: string, span?: string, sort?: string}} SpanSelection
 * @typedef {{all: boolean, page: number, picked: number|null}} RankChoice which ranks the per-rank parts show
 */

// ---------------------------------------------------------------- fetch

/**
 * @param {SpanSelection} selection
 * @param {AbortSignal} [signal]
 * @returns {Promise<Distributed>}
 */
export function fetchDistributed({ run, span, sort }, signal) {
  return getJSON("/api/distributed", { run, span, sort, top: String(TOP) }, signal);
}

// ---------------------------------------------------------------- draw helpers


/**
 * Draws a chart and records the unit its y values are in, so that a reader (or a test) can turn
 * them back into microseconds.
 * @param {HTMLElement} node
 * @param {{traces: object[], layout: Record<string, any>, unit: string, divisor: number}} chart
 */
async function drawTimeChart(node, chart) {
  node.dataset.unit = chart.unit;
  node.dataset.divisor = String(chart.divisor);
  await draw(node, chart.traces, chart.layout);
}

/** Node lines the topology shows before "Show the other nodes". */
const NODE_LINES = 12;

/** @param {Distributed} data @returns {(rank: number) => string|undefined} */
function workerOfRank(data) {
  const workers = new Map(data.ranks.map((r) => [r.rank, r.worker]));
  return (rank) => workers.get(rank);
}

/**
 * The Stragglers card: headline, delay-versus-step chart, per-rank table, worst occurrences and
 * what could not be matched.
 * @param {HTMLElement} root
 * @param {Distributed} data
 * @param {SpanSelection} selection
 * @param {number|null} picked the rank picked in the heat strip, marked in the table
 */
async function drawStragglers(root, data, selection, picked) {
  const s = data.stragglers;
  const headline = stragglerHeadline(s);
  const line = byTestId(root, "straggler-headline");
  line.textContent = headline.text;
  line.dataset.tone = headline.tone;
  line.dataset.ranks = headline.ranks.join(",");
  byTestId(root, "straggler-basis").textContent = stragglerBasisText(s);
  const total = data.ranks.length;
  byTestId(root, "stragglers-meta").textContent = `${formatCount(total)} rank${total === 1 ? "" : "s"}, span ${data.span}`;
  const worker = workerOfRank(data);

  byTestId(root, "straggler-table").replaceChildren(buildTable({
    caption: "Arrival at the collectives per rank",
    testid: "rank-table",
    rowClass: (row) => [row.straggler ? "row-selected dist-row-straggler" : "",
      row.rank === picked ? "row-selected dist-row-picked" : ""].filter(Boolean).join(" "),
    columns: [
      { key: "rank", label: "Rank", render: (row) => el("span", { class: "dist-rank" }, [
        rankLabel(row.rank), row.straggler ? el("span", { class: "badge badge-high dist-badge", text: "straggler" }) : null,
      ]) },
      { key: "worker", label: "Worker", title: "Opens this worker's Overview",
        render: (row) => el("a", { class: "action-link dist-worker-link", text: row.worker,
          attrs: { href: viewHref("overview", { run: selection.run, worker: row.worker, span: selection.span }) } }) },
      { key: "times_last", label: "Times last", numeric: true, title: "Collectives this rank entered last (ties count for each)",
        format: (v, row) => `${formatCount(v)}${row.last_ratio === null || row.last_ratio === undefined ? "" : ` (${formatRatio(row.last_ratio, 0)})`}` },
      timeColumn("held_per_step_us", "Holds others up", "Per step (median): how long the other ranks waited for this one alone, "
        + "at the collectives it entered last; a rank is named a straggler by this time"),
      timeColumn("median_delay_us", "Median delay", "How much later than the earliest rank it entered, median over the collectives"),
      timeColumn("max_delay_us", "Max delay"),
      timeColumn("mean_step_us", "Mean step"),
    ],
    rows: rankRows(s),
  }));

  const worst = worstOccurrences(s.occurrences);
  const groups = data.groups || [];
  const occNode = byTestId(root, "occurrences");
  if (!worst.length) emptyText(occNode, "No collective was matched across ranks.");
  else {
    occNode.replaceChildren(buildTable({
      caption: "The collectives with the widest spread of arrivals",
      testid: "occurrence-table",
      columns: /** @type {Column[]} */ ([
        { key: "step", label: "Step", format: (v) => (v === "" ? "outside steps" : String(v)) },
        manyGroups(s.occurrences, groups)
          ? { key: "group", label: "Group", format: (v) => groupLabel(v, groups), title: "The process group of the collective" }
          : null,
        { key: "name", label: "Collective", cellClass: "cell-mono" },
        { key: "call", label: "Call", numeric: true, format: (v) => `#${v}`, title: "The k-th call of this collective in the step" },
        timeColumn("spread_us", "Spread", "The last rank's delay behind the first"),
        { key: "last_text", label: "Last" },
        { key: "actions", label: "", sortable: false, cellClass: "cell-actions", render: (row) => {
          const target = lateWindow(row);
          const w = target ? worker(target.rank) : undefined;
          if (!target || !w) return "";
          return el("a", { class: "action-link", text: "Trace", testid: "trace-link",
            title: `What ${rankLabel(target.rank).toLowerCase()} (${w}) did before it arrived: its call and as long again before it`,
            attrs: { href: traceHref({ run: selection.run, worker: w, span: selection.span },
              { start_us: target.start_us, end_us: target.end_us }) } });
        } },
      ].filter((c) => c !== null)),
      rows: worst,
    }));
  }

  const lines = unalignedLines(s.unaligned, groups);
  const note = byTestId(root, "unaligned-note");
  if (!lines.length) {
    note.hidden = true;
    note.replaceChildren();
  } else {
    note.replaceChildren(
      el("div", { class: "note-title", text: "Not every call could be matched across ranks" }),
      el("ul", {}, lines.map((t) => el("li", { text: t }))),
    );
    note.hidden = false;
  }

  const chart = byTestId(root, "delay-chart");
  if (!s.ranks.length || !s.collectives) {
    showEmpty(chart, "No collective was matched across ranks, so there are no delays to chart.");
    return;
  }
  const { traces, layout, delayAxis } = delayChart(s);
  chart.dataset.unit = delayAxis.unit;
  chart.dataset.divisor = String(delayAxis.divisor);
  await draw(chart, traces, layout);
}

/**
 * The Collectives card: the report per collective type and message size with its bandwidths, and
 * the rank x collective delay heat map (every rank, folded by the server beyond its row cap).
 * @param {HTMLElement} root
 * @param {Distributed} data
 */
async function drawCollectives(root, data) {
  const rows = data.collectives || [];
  const map = data.delay_map;
  const folded = map && map.rows.some(([first, last]) => first !== last);
  byTestId(root, "collectives-meta").textContent = `${formatCount(rows.reduce((n, r) => n + r.count, 0))} matched`
    + ` collectives${folded ? ` · map: consecutive ranks folded into ${formatCount(map.rows.length)} rows, their worst delay` : ""}`;
  const report = byTestId(root, "collective-report");
  if (!rows.length) emptyText(report, "No collective was matched across ranks.");
  else {
    report.replaceChildren(buildTable({
      caption: "Matched collectives per type and message size",
      testid: "collective-table",
      sort: { key: "transfer_us", desc: true },
      columns: [
        { key: "type", label: "Type", cellClass: "cell-mono", title: "The calls' names reduced to NCCL's collective types",
          render: (row) => el("span", { text: row.type, title: row.names.join(", ") }) },
        bytesColumn("size_bytes", "Size", "nccl-tests' message size: the whole buffer (all_gather: input x group size)"),
        countColumn("group_size", "Ranks", "The process group's size (n in the bus bandwidth factor)"),
        countColumn("count", "Count", "Collectives matched across ranks"),
        timeColumn("transfer_us", "Transfer", "Summed: each collective's shortest time among the ranks (moving data)"),
        timeColumn("median_transfer_us", "Median transfer"),
        timeColumn("wait_us", "Wait", "Summed: each collective's longest time among the ranks minus its shortest (skew)"),
        { key: "algbw_gbps", label: "algbw", numeric: true, format: (v) => formatBandwidth(v),
          title: "Algorithm bandwidth: size x count / transfer" },
        { key: "busbw_gbps", label: "busbw", numeric: true, format: (v) => formatBandwidth(v),
          title: "Bus bandwidth: algbw x NCCL's factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; others 1)" },
      ],
      rows,
    }));
  }
  const chart = byTestId(root, "delay-map");
  if (!map || !map.columns.length) {
    showEmpty(chart, "No symmetric collective was matched across ranks: no delays to map.");
    return;
  }
  const { traces, layout, axis } = delayMapChart(map);
  await drawTimeChart(chart, { traces, layout, unit: axis.unit, divisor: axis.divisor });
}

/** @param {HTMLElement} root @param {Distributed} data */
function drawTopology(root, data) {
  byTestId(root, "topology-meta").textContent = topologyMeta(data.ranks, data.topology);
  const groups = byTestId(root, "process-groups");
  const lines = groupLines(data.groups || []);
  groups.hidden = !lines.length;
  groups.replaceChildren(...(lines.length ? [
    el("span", { class: "dist-node-kicker", text: lines.length === 1 ? "Process group" : "Process groups" }),
    ...lines.map((t) => el("span", { class: "dist-group", testid: "process-group", text: t })),
  ] : []));
  const node = byTestId(root, "topology");
  if (!data.topology.length) {
    emptyText(node, "No process or GPU information in these traces.");
    return;
  }
  // Small runs open every node; a big one shows a line per node, its processes built when opened,
  // and the first NODE_LINES nodes until asked for all.
  const open = data.ranks.length <= TOP;
  node.classList.toggle("dist-topology-folded", !open);
  const line = (/** @type {import("./lib/distview.js").TopoNode} */ n) => {
    const details = /** @type {HTMLDetailsElement} */ (el("details", { class: "dist-node", testid: "topology-node",
      attrs: { "data-node": n.node } }, [
      el("summary", {}, [el("span", { class: "dist-node-title" }, [
        el("span", { class: "dist-node-kicker", text: "Node" }),
        el("span", { class: "dist-node-name", text: n.node }),
        el("span", { class: "muted", testid: "topology-node-line", text: ` · ${nodeLine(n)}` }),
      ])]),
    ]));
    const fill = () => {
      if (details.open && details.childElementCount < 2) details.append(processList(n));
    };
    details.addEventListener("toggle", fill);
    details.open = open;
    fill();
    return details;
  };
  node.replaceChildren(...data.topology.slice(0, NODE_LINES).map(line));
  const rest = data.topology.slice(NODE_LINES);
  if (rest.length) {
    const more = el("button", { class: "pager-button dist-more-nodes", testid: "all-nodes",
      text: `Show the other ${formatCount(rest.length)} nodes`, attrs: { type: "button" } });
    more.addEventListener("click", () => more.replaceWith(...rest.map(line)));
    node.append(more);
  }
}

/** @param {import("./lib/distview.js").TopoNode} n @returns {HTMLElement} */
function processList(n) {
  return el("ul", { class: "dist-procs" }, n.processes.map((p) => el("li", { class: "dist-proc", testid: "topology-process",
    attrs: { "data-rank": String(p.rank) } }, [
    el("span", { class: "dist-proc-rank", text: rankLabel(p.rank) }),
    el("span", { class: "dist-proc-worker", text: p.worker, title: "Worker" }),
    el("span", { class: "muted", text: `pid ${formatText(p.process)}` }),
    el("span", { class: "dist-gpus" }, p.gpus.length
      ? p.gpus.map((g) => el("span", { class: "dist-gpu", testid: "topology-gpu", text: gpuText(g),
        attrs: { "data-device": String(g.device) } }))
      : [el("span", { class: "muted", text: "no GPU kernels" })]),
  ])));
}

/**
 * The overlap and wait charts at the picked step.
 * @param {HTMLElement} root
 * @param {Distributed} data
 * @param {string} step
 */
async function drawRankCharts(root, data, step) {
  const overlap = byTestId(root, "overlap-chart");
  const wait = byTestId(root, "wait-chart");
  const jobs = [];
  if (!data.overlap.length) showEmpty(overlap, "No ranks.");
  else jobs.push(drawTimeChart(overlap, stackedRankChart(data.overlap, OVERLAP_PARTS, step, step === AVERAGE ? "Average step" : "Step")));
  const communicates = data.wait.some((r) => {
    const v = valuesAt(r, step);
    return Boolean(v) && WAIT_PARTS.some((p) => v[p.key] > 0);
  });
  if (!communicates) {
    showEmpty(wait, step === AVERAGE ? "No communication time in this span." : "No communication time in this step.");
    delete wait.dataset.unit;
  } else jobs.push(drawTimeChart(wait, stackedRankChart(data.wait, WAIT_PARTS, step, "Communication")));
  overlap.dataset.step = step;
  wait.dataset.step = step;
  await Promise.all(jobs);
}

/**
 * The step picker; changing it redraws both charts and keeps the step in the URL.
 * @param {HTMLElement} root
 * @param {Distributed} data
 * @param {string|undefined} wanted the URL's `step`
 * @returns {string} the step shown
 */
function setupStepPicker(root, data, wanted) {
  const select = /** @type {HTMLSelectElement} */ (byTestId(root, "step-picker"));
  const options = stepOptions(data.overlap, data.wait);
  const step = options.some((o) => o.value === wanted) ? /** @type {string} */ (wanted) : AVERAGE;
  select.replaceChildren(...options.map((o) => el("option", { text: o.label, attrs: { value: o.value } })));
  select.value = step;
  // Assigned, not added: a remount for a new selection replaces the handler.
  select.onchange = () => {
    updateQuery({ step: select.value === AVERAGE ? null : select.value });
    drawRankCharts(root, data, select.value).catch((err) => console.error(err));
  };
  return step;
}

/**
 * The communication ops table of one rank, with the rank picker above it.
 * @param {HTMLElement} root
 * @param {Distributed} data
 * @param {string|undefined} wanted the URL's `rank`
 * @param {(rank: number) => void} onPick told when the user picks a rank
 */
function drawCommOps(root, data, wanted, onPick) {
  const select = /** @type {HTMLSelectElement} */ (byTestId(root, "rank-picker"));
  const node = byTestId(root, "comm-ops");
  const ranks = data.comm_ops;
  if (!ranks.length) {
    select.replaceChildren();
    select.disabled = true;
    emptyText(node, "No ranks.");
    return;
  }
  select.disabled = false;
  select.replaceChildren(...ranks.map((r) => el("option", { text: `${rankLabel(r.rank)} (${r.worker})`,
    attrs: { value: String(r.rank) } })));
  const current = ranks.find((r) => String(r.rank) === wanted) || ranks[0];
  select.value = String(current.rank);

  /** @param {import("./lib/distview.js").RankCommOps} entry */
  const show = (entry) => {
    node.dataset.rank = String(entry.rank);
    if (!entry.rows.length) {
      emptyText(node, `${rankLabel(entry.rank)} made no collective calls in this span.`);
      return;
    }
    node.replaceChildren(buildTable({
      caption: `Communication operations of ${rankLabel(entry.rank).toLowerCase()}`,
      testid: "comm-ops-table",
      sort: { key: "total_latency_us", desc: true },
      columns: [
        { key: "name", label: "Name", cellClass: "cell-name cell-mono" },
        countColumn("calls", "Calls"),
        bytesColumn("total_bytes", "Total size", "Input tensors' size, summed over the calls"),
        bytesColumn("avg_bytes", "Avg size"),
        timeColumn("total_latency_us", "Total latency", "GPU kernel time of the calls (a gloo call: its host time)"),
        timeColumn("avg_latency_us", "Avg latency"),
        timeColumn("total_transfer_us", "Total data transfer", "The shortest time any rank spent in each matched call, summed"),
        timeColumn("avg_transfer_us", "Avg data transfer"),
      ],
      rows: entry.rows,
    }));
  };
  show(current);
  select.onchange = () => {
    const entry = ranks.find((r) => String(r.rank) === select.value) || ranks[0];
    onPick(entry.rank);
  };
}

/** @param {HTMLElement} root @param {Distributed} data */
async function drawComparison(root, data) {
  const chart = byTestId(root, "comparison-chart");
  const steps = data.comparison.map((r) => r.steps);
  byTestId(root, "comparison-meta").textContent = steps.length
    ? `average over ${[...new Set(steps)].map((n) => formatCount(n)).join(" / ")} step${steps.every((n) => n === 1) ? "" : "s"} per rank`
    : "";
  if (!data.comparison.some((r) => (r.average || {}).total_us > 0)) {
    showEmpty(chart, "No step time to compare.");
    return;
  }
  await drawTimeChart(chart, comparisonChart(data.comparison));
}

// ---------------------------------------------------------------- mount

/**
 * Fetches and draws the Distributed view of one span of every worker of a run.
 * @param {HTMLElement} root the `[data-view="distributed"]` section
 * @param {SpanSelection & {step?: string, rank?: string}} params
 * @param {{signal?: AbortSignal}} [context]
 */
export async function mount(root, params, { signal } = {}) {
  const data = await fetchDistributed(params, signal);
  if (signal && signal.aborted) return;
  // The server's span (its default when the URL names none) is what the links below must carry.
  const selection = { run: params.run, span: data.span };
  showWarnings(byTestId(root, "warnings"), [...(data.warnings || []), ...assumedLines(data.ranks, data.topology)]);
  drawTopology(root, data);
  const choice = choiceOf(params);
  const redraw = setupRankControls(root, data, choice, (c) => drawShown(root, data, selection, c, params.step, redraw));
  await Promise.all([drawRankStrip(root, data, choice, redraw), drawShown(root, data, selection, choice, params.step, redraw),
    drawCollectives(root, data)]);
}

/**
 * The per-rank parts (stragglers, the step charts, the ops table, the step comparison) for the ranks
 * `choice` shows, the others left out.
 * @param {HTMLElement} root
 * @param {Distributed} data
 * @param {SpanSelection} selection
 * @param {RankChoice} choice
 * @param {string|undefined} step the URL's `step`
 * @param {(choice: RankChoice) => void} redraw
 */
async function drawShown(root, data, selection, choice, step, redraw) {
  const ranks = data.ranks.map((r) => r.rank);
  const shown = shownRanks(ranks, data.worst.ranks, choice);
  byTestId(root, "shown-ranks").textContent = shownText(ranks.length, shown, data.worst, choice);
  root.dataset.shownRanks = shown.join(",");
  /** @type {Distributed} */
  const sub = {
    ...data, overlap: rowsOf(data.overlap, shown), wait: rowsOf(data.wait, shown), comm_ops: rowsOf(data.comm_ops, shown),
    comparison: rowsOf(data.comparison, shown), stragglers: { ...data.stragglers, ranks: rowsOf(data.stragglers.ranks, shown) },
  };
  const pick = (/** @type {number} */ rank) => redraw({ ...choice, picked: rank });
  drawCommOps(root, sub, choice.picked === null ? undefined : String(choice.picked), pick);
  const picked = setupStepPicker(root, sub, step);
  await Promise.all([
    drawStragglers(root, sub, selection, choice.picked),
    drawRankCharts(root, sub, picked),
    drawComparison(root, sub),
  ]);
}

/**
 * The sort picker (a new sort asks the server again), "Show all ranks" and its pager; returns the
 * function that records a new choice in the URL and redraws.
 * @param {HTMLElement} root
 * @param {Distributed} data
 * @param {RankChoice} choice
 * @param {(choice: RankChoice) => Promise<void>} draw
 * @returns {(choice: RankChoice) => void}
 */
function setupRankControls(root, data, choice, draw) {
  const total = data.ranks.length;
  byTestId(root, "ranks-meta").textContent = `${formatCount(total)} rank${total === 1 ? "" : "s"}`
    + (data.missing_ranks && data.missing_ranks.length ? ` · ${formatCount(data.missing_ranks.length)} missing` : "");
  const sort = /** @type {HTMLSelectElement} */ (byTestId(root, "sort-picker"));
  sort.replaceChildren(...SORTS.map((s) => el("option", { text: s.label, attrs: { value: s.value } })));
  sort.value = data.worst.sort;
  sort.onchange = () => navigate({ sort: sort.value === SORTS[0].value ? null : sort.value });
  const all = byTestId(root, "all-ranks");
  const prev = /** @type {HTMLButtonElement} */ (byTestId(root, "ranks-prev"));
  const next = /** @type {HTMLButtonElement} */ (byTestId(root, "ranks-next"));
  const pages = rankPages(total);
  let current = choice;
  const show = (/** @type {RankChoice} */ c) => {
    all.textContent = c.all ? `Worst ${formatCount(TOP)} only` : "Show all ranks";
    all.setAttribute("aria-pressed", String(c.all));
    all.hidden = total <= TOP;
    prev.hidden = next.hidden = !c.all || total <= PAGE_RANKS;
    prev.disabled = c.page <= 1;
    next.disabled = c.page >= pages;
  };
  const redraw = (/** @type {RankChoice} */ c) => {
    current = { ...c, page: Math.min(Math.max(1, c.page), pages) };
    show(current);
    updateQuery({ ranks: current.all ? "all" : null, rank_page: current.all && current.page > 1 ? String(current.page) : null,
      rank: current.picked === null ? null : String(current.picked) });
    markPicked(byTestId(root, "rank-strip"), current.picked);
    draw(current).catch((err) => console.error(err));
  };
  all.onclick = () => redraw({ ...current, all: !current.all, page: 1 });
  prev.onclick = () => redraw({ ...current, page: current.page - 1 });
  next.onclick = () => redraw({ ...current, page: current.page + 1 });
  show(choice);  // the first draw is mount's
  return redraw;
}

/**
 * The heat strip of every rank's measures; a click on a rank picks it.
 * @param {HTMLElement} root
 * @param {Distributed} data
 * @param {RankChoice} choice
 * @param {(choice: RankChoice) => void} redraw
 */
async function drawRankStrip(root, data, choice, redraw) {
  const node = byTestId(root, "rank-strip");
  if (!data.distribution.length) {
    showEmpty(node, "No ranks.");
    return;
  }
  const { traces, layout } = heatStrip(data.distribution, choice.picked);
  await draw(node, traces, layout);
  const plot = /** @type {any} */ (node);
  plot.removeAllListeners?.("plotly_click");
  plot.on("plotly_click", (/** @type {any} */ event) => {
    const rank = event.points && event.points.length ? Number(event.points[0].x) : NaN;
    if (Number.isFinite(rank)) redraw({ ...choiceOf(readQuery()), picked: rank });
  });
}

/**
 * Which ranks the URL asks for: `ranks=all` (with `rank_page`), and the picked `rank`.
 * @param {Record<string, string|undefined>} params
 * @returns {RankChoice}
 */
function choiceOf(params) {
  const picked = Number.parseInt(params.rank ?? "", 10);
  return { all: params.ranks === "all", page: Math.max(1, Number.parseInt(params.rank_page ?? "1", 10) || 1),
    picked: Number.isFinite(picked) ? picked : null };
}

/** @param {HTMLElement} node the heat strip @param {number|null} rank outlined, or none */
function markPicked(node, rank) {
  const plot = /** @type {any} */ (node);
  if (plot.data && window.Plotly) /** @type {any} */ (window).Plotly.relayout(node, { shapes: pickedShapes(rank) });
}
