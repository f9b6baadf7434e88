/**
 * Shaping for the Distributed view: pure functions from `/api/distributed` JSON to the straggler
 * headline, Plotly traces and table rows. No DOM here, so that tests can call every function directly.
 * @module lib/distview
 */

import { CATEGORY_COLORS } from "../overview.js";
import { NA, STEP_CATEGORIES, formatBytes, formatCount, formatUs, timeAxis } from "./format.js";
import { layout } from "./plot.js";

/**
 * @typedef {{worker: string, rank: number, world_size: number|null, backend: string|null, assumed: string[]}} RankInfo
 * @typedef {{device: number, name: string|null, memory_bytes: number|null, compute_capability: string|null}} TopoGpu
 * @typedef {{rank: number, worker: string, process: string|null, gpus: TopoGpu[], assumed: string[]}} TopoProcess
 * @typedef {{node: string, processes: TopoProcess[]}} TopoNode
 * @typedef {{step: string, total_us?: number, computation_us: number, overlapping_us: number,
 *            communication_us: number, other_us: number}} OverlapStep
 * @typedef {{rank: number, worker: string, steps: OverlapStep[], average: Record<string, number|null>}} RankOverlap
 * @typedef {{step: string, communication_us: number, transfer_us: number, wait_us: number,
 *            unattributed_us: number}} WaitStep
 * @typedef {{rank: number, worker: string, steps: WaitStep[], average: Record<string, number|null>}} RankWait
 * @typedef {{name: string, calls: number, total_bytes: number|null, avg_bytes: number|null,
 *            total_latency_us: number, avg_latency_us: number, total_transfer_us: number|null,
 *            avg_transfer_us: number|null}} CommOp
 * @typedef {{rank: number, worker: string, rows: CommOp[]}} RankCommOps
 * @typedef {{rank: number, worker: string, collectives: number, times_last: number, last_ratio: number|null,
 *            median_delay_us: number|null, mean_delay_us: number|null, max_delay_us: number|null,
 *            mean_step_us: number|null, held_per_step_us?: number|null}} StragglerRow
 * @typedef {{rank: number, arrival_us: number, start_us?: number, end_us?: number, delay_us: number}} Arrival
 * @typedef {{step: string, group?: string, name: string, index: number, basis: string, spread_us: number,
 *            last_ranks: number[], arrivals: Arrival[]}} Occurrence
 * @typedef {{calls: {rank: number, unaligned: number}[],
 *            count_mismatches: {step: string, group?: string, name: string, calls: {rank: number, calls: number}[]}[]}} Unaligned
 * @typedef {{name: string, description: string|null, size: number|null, ranks: number[]|null}} ProcessGroup
 * @typedef {{collectives: number, decided: number, basis: Record<string, number>, ranks: StragglerRow[],
 *            stragglers: StragglerRow[], occurrences: Occurrence[], unaligned: Unaligned}} Stragglers
 * @typedef {{rank: number, worker: string, steps: number, average: Record<string, number>}} RankComparison
 * @typedef {{type: string, names: string[], size_bytes: number|null, group_size: number, count: number,
 *            transfer_us: number, median_transfer_us: number, wait_us: number, median_wait_us: number,
 *            algbw_gbps: number|null, busbw_gbps: number|null}} CollectiveRow
 * @typedef {{rows: number[][], columns: {group: string, match: number, name: string, spread_us: number}[],
 *            delay_us: (number|null)[][], max_rows: number, max_columns: number}} DelayMap
 * @typedef {{span: string, ranks: RankInfo[], topology: TopoNode[], groups?: ProcessGroup[], overlap: RankOverlap[],
 *            wait: RankWait[],
 *            comm_ops: RankCommOps[], stragglers: Stragglers, comparison: RankComparison[],
 *            collectives?: CollectiveRow[], delay_map?: DelayMap, warnings: string[]}} Distributed
 * @typedef {{key: string, label: string, color: string, title?: string}} Part
 */

/** The step picker's value for the average over steps. */
export const AVERAGE = "";

/** How a rank's step splits between computation and communication (definition 3 of the view's note). */
export const OVERLAP_PARTS = Object.freeze([
  { key: "computation_us", label: "Computation", color: "#4e79a7", title: "GPU kernels, no communication running" },
  { key: "overlapping_us", label: "Overlapping", color: "#76b7b2", title: "Computation while communication runs" },
  { key: "communication_us", label: "Communication", color: CATEGORY_COLORS.communication_us,
    title: "Communication with no computation running" },
  { key: "other_us", label: "Other", color: "#bab0ac", title: "Neither computation nor communication" },
]);

/** How a rank's communication time splits between moving data and waiting for the other ranks. */
export const WAIT_PARTS = Object.freeze([
  { key: "transfer_us", label: "Data transfer", color: "#4e79a7", title: "The shortest time any rank spent in the collective" },
  { key: "wait_us", label: "Synchronizing (waiting)", color: "#e15759", title: "Time in the collective beyond the data transfer" },
  { key: "unattributed_us", label: "Unattributed", color: "#bab0ac",
    title: "Communication kernels tied to no call matched across ranks" },
]);

/** Colours of the straggler chart: delay bars (a straggler's outlined in red: the legend shows the bars' fill, so
 * one fill for all) and step-time bars. */
export const DELAY_COLOR = "#f28e2b";
export const STRAGGLER_COLOR = "#e15759";
export const STEP_COLOR = "#a0cbe8";

/** Stragglers the headline names one by one; more are counted, their ranks as runs. */
export const NAMED_STRAGGLERS = 6;

/** Rows of the worst-occurrences table. */
export const WORST_COUNT = 10;

/** @param {unknown} v @returns {v is number} */
function isNumber(v) {
  return typeof v === "number" && Number.isFinite(v);
}

/** @param {number} rank */
export function rankLabel(rank) {
  return `Rank ${rank}`;
}

/**
 * "a", "a and b", "a, b and c".
 * @param {string[]} items
 */
export function joinWords(items) {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

/** @param {number} n @param {string} noun @param {string} [plural] */
function counted(n, noun, plural = `${noun}s`) {
  return `${formatCount(n)} ${Math.round(n) === 1 ? noun : plural}`;
}

/**
 * " (up to 77.8 ms)" when the largest delay says more than the median, else "".
 * @param {StragglerRow} row
 */
function upTo(row) {
  const { median_delay_us: median, max_delay_us: max } = row;
  return isNumber(max) && isNumber(median) && formatUs(max) !== formatUs(median) ? ` (up to ${formatUs(max)})` : "";
}

/**
 * The sentence the view opens with: which rank holds the others up at the collectives and by how much
 * a step (what it costs them: how stragglers are judged), how late it arrives and how often last;
 * or that nobody stands out, or that nothing could be compared. `tone` is "alert" when a rank is named.
 * @param {Stragglers} s
 * @returns {{text: string, tone: "alert"|"calm", ranks: number[]}}
 */
export function stragglerHeadline(s) {
  const named = s.stragglers || [];
  if (!s.collectives) {
    return { tone: "calm", ranks: [], text: "No collective was matched across ranks, so arrivals cannot be compared." };
  }
  if (!named.length || !s.decided) {
    return { tone: "calm", ranks: [], text: `Nobody stands out: every rank arrives together at all ${counted(s.collectives, "collective")}.` };
  }
  const first = named[0];
  const ties = s.collectives - s.decided;
  const tail = ties > 0 ? ` (the other ${counted(ties, "collective")} ended in a tie)` : "";
  const of = `${formatCount(first.times_last)} of ${counted(s.decided, "collective")}`;
  if (named.length === 1) {
    return {
      tone: "alert", ranks: [first.rank],
      text: `${rankLabel(first.rank)} (${first.worker})${holds([first], "holds")} arrives a median `
        + `${formatUs(first.median_delay_us)}${upTo(first)} after the first rank, last at ${of}${tail}.`,
    };
  }
  if (named.length > NAMED_STRAGGLERS) {
    // A thousand ranks: the count, the ranks as runs, and the ranges of what they cost and of their median delays.
    const delays = named.map((r) => r.median_delay_us).filter(isNumber);
    const held = named.map((r) => r.held_per_step_us);
    const cost = held.every(isNumber)
      ? ` hold the others up ${formatUs(Math.min(...held))} to ${formatUs(Math.max(...held))} a step and` : "";
    return {
      tone: "alert", ranks: named.map((r) => r.rank),
      text: `${formatCount(named.length)} ranks (${rankSpans(named.map((r) => r.rank), NAMED_STRAGGLERS)})${cost} `
        + `arrive a median ${formatUs(Math.min(...delays))} to ${formatUs(Math.max(...delays))} after the first rank${tail}.`,
    };
  }
  const who = joinWords(named.map((r) => `${r.rank} (${r.worker})`));
  const delays = joinWords(named.map((r) => formatUs(r.median_delay_us)));
  return {
    tone: "alert", ranks: named.map((r) => r.rank),
    text: `Ranks ${who}${holds(named, "hold")} arrive a median ${delays} after the first rank${tail}.`,
  };
}

/**
 * " holds the others up 3.55 ms a step and" for the named ranks (their `held_per_step_us`), when known.
 * @param {StragglerRow[]} rows
 * @param {string} verb
 */
function holds(rows, verb) {
  const held = rows.map((r) => r.held_per_step_us);
  if (!held.every(isNumber)) return "";
  return ` ${verb} the others up ${joinWords(held.map(formatUs))} a step and`;
}

/**
 * A line under the headline: what the comparison rests on.
 * @param {Stragglers} s
 * @returns {string}
 */
export function stragglerBasisText(s) {
  if (!s.collectives) return "";
  const basis = Object.entries(s.basis || {}).map(([b, n]) => `${formatCount(n)} timed on the ${b.toUpperCase()}`);
  return `${counted(s.collectives, "collective")} matched across ranks${basis.length ? ` (${basis.join(", ")})` : ""}; `
    + "delay = how much later a rank entered a collective than the earliest rank.";
}

/**
 * Grouped bars per rank: median arrival delay (left axis) next to mean step time (right axis), so a
 * rank that arrives late and one whose steps are long are told apart at a glance.
 * @param {Stragglers} s
 * @returns {{traces: object[], layout: Record<string, any>, delayAxis: {unit: string, divisor: number},
 *            stepAxis: {unit: string, divisor: number}}}
 */
export function delayChart(s) {
  const rows = s.ranks || [];
  const named = new Set((s.stragglers || []).map((r) => r.rank));
  const x = rows.map((r) => rankLabel(r.rank));
  const delayAxis = timeAxis(Math.max(0, ...rows.map((r) => r.median_delay_us || 0)));
  const stepAxis = timeAxis(Math.max(0, ...rows.map((r) => r.mean_step_us || 0)));
  const traces = [
    {
      type: "bar", name: "Median arrival delay", x, offsetgroup: "delay", yaxis: "y",
      y: rows.map((r) => (isNumber(r.median_delay_us) ? r.median_delay_us / delayAxis.divisor : null)),
      marker: {
        color: DELAY_COLOR,
        line: { color: STRAGGLER_COLOR, width: rows.map((r) => (named.has(r.rank) ? 2.5 : 0)) },
      },
      customdata: rows.map((r) => `${rankLabel(r.rank)} (${r.worker})<br>median delay ${formatUs(r.median_delay_us)}`
        + `, mean ${formatUs(r.mean_delay_us)}, max ${formatUs(r.max_delay_us)}<br>last at ${formatCount(r.times_last)}`
        + ` of ${counted(s.decided, "collective")}`),
      hovertemplate: "%{customdata}<extra></extra>",
    },
    {
      type: "bar", name: "Mean step time", x, offsetgroup: "step", yaxis: "y2",
      y: rows.map((r) => (isNumber(r.mean_step_us) ? r.mean_step_us / stepAxis.divisor : null)),
      marker: { color: STEP_COLOR, line: { width: 0 } },
      // White text on the pale bar colour would be unreadable.
      hoverlabel: { bgcolor: "#fff", font: { color: "#3c4043" } },
      customdata: rows.map((r) => `${rankLabel(r.rank)} (${r.worker})<br>mean step ${formatUs(r.mean_step_us)}`),
      hovertemplate: "%{customdata}<extra></extra>",
    },
  ];
  const chartLayout = layout({
    barmode: "group",
    bargap: 0.35,
    margin: { l: 64, r: 64, t: 8, b: 36 },
    xaxis: { type: "category" },
    yaxis: { title: { text: delayAxis.axisTitle("Median delay") }, rangemode: "tozero" },
    yaxis2: {
      title: { text: stepAxis.axisTitle("Mean step") }, overlaying: "y", side: "right", rangemode: "tozero",
      showgrid: false, automargin: true, tickfont: { size: 11 }, tickmode: "auto", nticks: 5,
    },
  });
  return { traces, layout: chartLayout, delayAxis, stepAxis };
}

/**
 * A bandwidth in GB/s (1e9 bytes a second, as nccl-tests reports it): 147.478 -> "147.5 GB/s".
 * @param {number|null|undefined} gbps
 * @returns {string}
 */
export function formatBandwidth(gbps) {
  return isNumber(gbps) ? `${gbps < 10 ? gbps.toFixed(2) : gbps.toFixed(1)} GB/s` : NA;
}

/**
 * A delay map row's label: "Rank 3", or "Ranks 0–3" for consecutive ranks folded into one row.
 * @param {number[]} row its first and last rank
 * @returns {string}
 */
export function delayRowLabel([first, last]) {
  return first === last ? rankLabel(first) : `Ranks ${first}–${last}`;
}

/**
 * The rank x collective delay heat map: one row per rank (or folded ranks, their worst delay),
 * one column per collective of the widest spread, in call order; the colour is the delay.
 * @param {DelayMap} map
 * @returns {{traces: object[], layout: Record<string, any>, axis: {unit: string, divisor: number}}}
 */
export function delayMapChart(map) {
  const axis = timeAxis(Math.max(0, ...map.delay_us.flat().filter(isNumber)));
  const y = map.rows.map(delayRowLabel);
  const x = map.columns.map((c) => `#${c.match}`);
  const z = map.delay_us.map((values) => values.map((v) => (isNumber(v) ? v / axis.divisor : null)));
  const text = map.delay_us.map((values, i) => values.map((v, j) => `${y[i]}<br>${map.columns[j].name} ${x[j]}`
    + ` (group ${map.columns[j].group})<br>delay ${formatUs(v)}`));
  const traces = [{
    type: "heatmap", x, y, z, customdata: text, hovertemplate: "%{customdata}<extra></extra>", hoverongaps: false,
    zmin: 0, colorscale: [[0, "#eef3f8"], [0.5, "#f2b45b"], [1, "#c2302e"]],
    // The title beside the bar, not above it, where the chart's mode bar would cover it.
    colorbar: { title: { text: axis.axisTitle("Delay"), side: "right" }, thickness: 12 },
    xgap: x.length <= 64 ? 1 : 0, ygap: y.length <= 64 ? 1 : 0,
  }];
  const chartLayout = layout({
    height: Math.min(640, Math.max(200, 90 + 18 * y.length)),   // room for the colour bar with few rows
    // Room above the map for the chart's mode bar, which covered the colour bar's top.
    margin: { l: 96, r: 16, t: 32, b: 48 },
    xaxis: { type: "category", title: { text: "Collective (call number in its group)" }, showgrid: false },
    yaxis: { type: "category", autorange: "reversed", showgrid: false },
  });
  return { traces, layout: chartLayout, axis };
}

/**
 * Rows of the per-rank straggler table, in rank order, each marked when it is a named straggler.
 * @param {Stragglers} s
 * @returns {(StragglerRow & {straggler: boolean})[]}
 */
export function rankRows(s) {
  const named = new Set((s.stragglers || []).map((r) => r.rank));
  return (s.ranks || []).map((r) => ({ ...r, straggler: named.has(r.rank) }));
}

/**
 * The occurrences with the widest spread between the first and the last rank, worst first.
 * @param {Occurrence[]} occurrences
 * @param {number} [count]
 * @returns {(Occurrence & {call: number, last_text: string})[]}
 */
export function worstOccurrences(occurrences, count = WORST_COUNT) {
  return (occurrences || [])
    .map((o, i) => ({ o, i }))
    .sort((a, b) => (b.o.spread_us || 0) - (a.o.spread_us || 0) || a.i - b.i)
    .slice(0, count)
    .map(({ o }) => ({
      ...o,
      call: o.index + 1,
      last_text: lastText(o.last_ranks || []),
    }));
}

/**
 * Who entered a collective last: "Rank 1, Rank 3"; past {@link NAMED_STRAGGLERS}, "512 ranks: 1, 3, …"; "tie" for none.
 * @param {number[]} ranks
 */
export function lastText(ranks) {
  if (!ranks.length) return "tie";
  if (ranks.length <= NAMED_STRAGGLERS) return ranks.map(rankLabel).join(", ");
  return `${formatCount(ranks.length)} ranks: ${rankSpans(ranks, NAMED_STRAGGLERS)}`;
}

/**
 * Where the Trace view should open to show what the last rank did while the others waited: its
 * call and, before it, as long again as the spread; a twentieth of that on each side, so that the
 * call does not sit on the edge.
 * @param {Occurrence} occurrence
 * @returns {{rank: number, start_us: number, end_us: number}|null}
 */
export function lateWindow(occurrence) {
  const rank = (occurrence.last_ranks || [])[0];
  const arrival = (occurrence.arrivals || []).find((a) => a.rank === rank);
  if (rank === undefined || !arrival || !isNumber(arrival.start_us) || !isNumber(arrival.end_us)) return null;
  const round = (/** @type {number} */ v) => Math.round(v * 1000) / 1000;
  const start = arrival.start_us - Math.max(0, occurrence.spread_us || 0);
  const pad = (arrival.end_us - start) / 20;
  return { rank, start_us: round(start - pad), end_us: round(arrival.end_us + pad) };
}

/**
 * A process group as people know it: "0 (default_pg)"; "unnamed group" when the trace does not say.
 * @param {string|undefined} name
 * @param {ProcessGroup[]} [groups] the run's groups, for their descriptions
 */
export function groupLabel(name, groups = []) {
  if (name === undefined || name === null || name === "") return "unnamed group";
  const group = (groups || []).find((g) => g.name === name);
  return group && group.description ? `${name} (${group.description})` : String(name);
}

/**
 * Whether calls of more than one process group are in play, so that tables and notes must say which.
 * @param {{group?: string}[]} items occurrences or count mismatches
 * @param {ProcessGroup[]} [groups]
 */
export function manyGroups(items, groups = []) {
  const names = new Set([...(items || []).map((i) => i.group ?? ""), ...(groups || []).map((g) => g.name)]);
  return names.size > 1;
}

/**
 * The run's process groups, one line each: "0 (default_pg): 4 ranks, 0, 1, 2, 3".
 * @param {ProcessGroup[]} groups
 * @returns {string[]}
 */
export function groupLines(groups) {
  return (groups || []).map((g) => {
    const ranks = Array.isArray(g.ranks) ? g.ranks : [];
    const size = isNumber(g.size) ? g.size : ranks.length;
    return `${groupLabel(g.name, groups)}: ${counted(size, "rank")}${ranks.length ? ` (${rankSpans(ranks)})` : ""}`;
  });
}

/** @param {string} step */
export function stepText(step) {
  return step === "" || step === null || step === undefined ? "outside steps" : `step ${step}`;
}

/**
 * Sentences about the calls that could not be matched across ranks; empty when every call was matched.
 * Each names its process group when more than one is in play.
 * @param {Unaligned} unaligned
 * @param {ProcessGroup[]} [groups]
 * @returns {string[]}
 */
export function unalignedLines(unaligned, groups = []) {
  if (!unaligned) return [];
  const lines = [];
  const alone = (unaligned.calls || []).filter((c) => c.unaligned > 0);
  if (alone.length) {
    lines.push(`Calls no other rank made at the same place: ${alone.map((c) => `${rankLabel(c.rank)} ${formatCount(c.unaligned)}`).join(", ")}. `
      + "They count in the ops table but not in transfer, waiting or arrivals.");
  }
  const named = manyGroups(unaligned.count_mismatches, groups);
  for (const m of unaligned.count_mismatches || []) {
    const counts = joinWords(m.calls.map((c) => `${rankLabel(c.rank).toLowerCase()} ${formatCount(c.calls)}`));
    const where = stepText(m.step) + (named ? `, group ${groupLabel(m.group, groups)}` : "");
    lines.push(`${where[0].toUpperCase()}${where.slice(1)}, ${m.name}: the ranks made different numbers of calls (${counts}); `
      + "the first ones were matched.");
  }
  return lines;
}

/**
 * The step picker's options: the average, then every step any rank has, in the order they appear.
 * @param {RankOverlap[]} overlap
 * @param {RankWait[]} [wait]
 * @returns {{value: string, label: string}[]}
 */
export function stepOptions(overlap, wait = []) {
  const seen = new Set();
  /** @type {string[]} */ const steps = [];
  for (const rank of [...(overlap || []), ...(wait || [])]) {
    for (const s of rank.steps || []) {
      if (!seen.has(s.step)) {
        seen.add(s.step);
        steps.push(s.step);
      }
    }
  }
  return [{ value: AVERAGE, label: "All steps (average)" }, ...steps.map((s) => ({ value: s, label: s === "" ? "Outside steps" : `Step ${s}` }))];
}

/**
 * A rank's values for the picked step (the average for {@link AVERAGE}); null when it has no such step.
 * @param {{steps: Record<string, any>[], average: Record<string, any>}} rank
 * @param {string} step
 * @returns {Record<string, any>|null}
 */
export function valuesAt(rank, step) {
  if (step === AVERAGE) return rank.average || null;
  return (rank.steps || []).find((s) => s.step === step) || null;
}

/**
 * Stacked bars, one per rank, of `parts` at the picked step.
 * @param {{rank: number, worker: string, steps: Record<string, any>[], average: Record<string, any>}[]} ranks
 * @param {readonly Part[]} parts
 * @param {string} step
 * @param {string} what the y-axis title, before its unit
 * @returns {{traces: object[], layout: Record<string, any>, unit: string, divisor: number}}
 */
export function stackedRankChart(ranks, parts, step, what) {
  const values = ranks.map((r) => valuesAt(r, step));
  const totals = values.map((v) => (v ? parts.reduce((sum, p) => sum + (v[p.key] || 0), 0) : 0));
  const axis = timeAxis(Math.max(0, ...totals));
  const x = ranks.map((r) => rankLabel(r.rank));
  const traces = parts.map((p) => ({
    type: "bar", name: p.label, x,
    y: values.map((v) => (v && isNumber(v[p.key]) ? v[p.key] / axis.divisor : null)),
    marker: { color: p.color, line: { width: 0 } },
    customdata: values.map((v, i) => `${p.label}: ${v ? formatUs(v[p.key]) : "no such step"}`
      + (v && totals[i] > 0 && isNumber(v[p.key]) ? ` (${((v[p.key] / totals[i]) * 100).toFixed(1)} %)` : "")),
    hovertemplate: "%{customdata}<extra></extra>",
  }));
  const chartLayout = layout({
    barmode: "stack",
    bargap: 0.4,
    hovermode: "x unified",
    margin: { l: 64, r: 16, t: 8, b: 36 },
    xaxis: { type: "category" },
    yaxis: { title: { text: axis.axisTitle(what) }, rangemode: "tozero" },
    legend: { traceorder: "normal" },
  });
  return { traces, layout: chartLayout, unit: axis.unit, divisor: axis.divisor };
}

/**
 * The step-time comparison: each rank's average step breakdown (the Overview's categories and
 * colours) as stacked bars side by side; categories no rank spent time in are left out.
 * @param {RankComparison[]} comparison
 * @returns {{traces: object[], layout: Record<string, any>, unit: string, divisor: number}}
 */
export function comparisonChart(comparison) {
  const parts = STEP_CATEGORIES
    .filter(({ key }) => comparison.some((r) => (r.average || {})[key] > 0))
    .map(({ key, label }) => ({ key, label, color: CATEGORY_COLORS[key] }));
  const ranks = comparison.map((r) => ({ rank: r.rank, worker: r.worker, steps: [], average: r.average }));
  return stackedRankChart(ranks, parts, AVERAGE, "Average step time");
}

/**
 * Short text of a GPU of the topology: "GPU 1 · NVIDIA H200 · 139.80 GiB · CC 9.0".
 * @param {TopoGpu} gpu
 * @returns {string}
 */
export function gpuText(gpu) {
  return [`GPU ${gpu.device}`, gpu.name, isNumber(gpu.memory_bytes) ? formatBytes(gpu.memory_bytes) : null,
    gpu.compute_capability ? `CC ${gpu.compute_capability}` : null].filter(Boolean).join(" · ");
}

/**
 * Ranks as runs of consecutive numbers, so that a thousand take one line:
 * [0, 1, 2, 3, 5, 7, 8] -> "0–3, 5, 7, 8"; with `most`, the first `most` runs and "… (N more)".
 * @param {number[]} ranks
 * @param {number} [most]
 * @returns {string}
 */
export function rankSpans(ranks, most = Infinity) {
  const sorted = [...new Set(ranks)].sort((a, b) => a - b);
  const spans = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    spans.push(j - i >= 2 ? `${sorted[i]}–${sorted[j]}` : sorted.slice(i, j + 1).join(", "));
    i = j;
  }
  return spans.length > most ? `${spans.slice(0, most).join(", ")}, … (${formatCount(spans.length - most)} more)` : spans.join(", ");
}

/**
 * What the view assumed about ranks and processes (no distributedInfo, unusual worker names), as
 * warning lines: one per assumption, naming the ranks it was made for.
 * @param {RankInfo[]} ranks
 * @param {TopoNode[]} topology
 * @returns {string[]}
 */
export function assumedLines(ranks, topology) {
  /** @type {Map<string, {rank: number, worker: string}[]>} */
  const made = new Map();
  const note = (/** @type {{rank: number, worker: string, assumed?: string[]}} */ who) => {
    for (const what of who.assumed || []) {
      if (!made.has(what)) made.set(what, []);
      made.get(what)?.push(who);
    }
  };
  for (const r of ranks || []) note(r);
  for (const node of topology || []) for (const p of node.processes || []) note(p);
  return [...made].map(([what, who]) => (who.length === 1
    ? `${rankLabel(who[0].rank)} (${who[0].worker}): ${what}`
    : `Ranks ${rankSpans(who.map((w) => w.rank))}: ${what}`));
}

/**
 * The topology card's meta line: ranks, nodes, world size, backend.
 * @param {RankInfo[]} ranks
 * @param {TopoNode[]} topology
 * @returns {string}
 */
export function topologyMeta(ranks, topology) {
  const gpus = (topology || []).reduce((n, node) => n + node.processes.reduce((m, p) => m + p.gpus.length, 0), 0);
  const worlds = [...new Set((ranks || []).map((r) => r.world_size).filter(isNumber))];
  const backends = [...new Set((ranks || []).map((r) => r.backend).filter(Boolean))];
  return [
    counted((ranks || []).length, "rank"),
    counted((topology || []).length, "node"),
    counted(gpus, "GPU"),
    worlds.length ? `world size ${worlds.join(" / ")}` : null,
    backends.length ? backends.join(", ") : null,
  ].filter(Boolean).join(" · ");
}
