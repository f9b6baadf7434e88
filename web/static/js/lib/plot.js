/**
 * Plotly helpers: one calm look for every chart, responsive, without modebar clutter.
 * Plotly itself is a classic script served by profboard (`/static/vendor/plotly.min.js`),
 * so it is read from `window.Plotly`.
 * @module lib/plot
 */

const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';

/** Chart options shared by every view. */
export const CONFIG = Object.freeze({
  responsive: true,
  displaylogo: false,
  displayModeBar: "hover",
  // No "Share chart" button: it would upload the data to a cloud service.
  showSendToCloud: false,
  showEditInChartStudio: false,
  modeBarButtonsToRemove: [
    "select2d", "lasso2d", "autoScale2d", "zoomIn2d", "zoomOut2d", "pan2d",
    "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian", "downloadJson", "sendChartToCloud",
  ],
  toImageButtonOptions: { format: "png", scale: 2 },
});

/** @returns {any} the Plotly global, or throws a readable error */
function plotly() {
  const P = /** @type {any} */ (window).Plotly;
  if (!P) throw new Error("Plotly did not load (/static/vendor/plotly.min.js); charts cannot be drawn.");
  return P;
}

/**
 * The default layout, merged one level deep with `overrides` (axes, legend, margin, font).
 * @param {Record<string, any>} [overrides]
 * @returns {Record<string, any>}
 */
export function layout(overrides = {}) {
  /** @type {Record<string, any>} */
  const base = {
    font: { family: FONT, size: 12, color: "#3c4043" },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    margin: { l: 56, r: 16, t: 16, b: 48 },
    hoverlabel: { font: { family: FONT, size: 12 }, bordercolor: "#dadce0" },
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom", font: { size: 12 } },
    xaxis: { automargin: true, gridcolor: "#eceff1", linecolor: "#bdc1c6", tickfont: { size: 11 } },
    yaxis: { automargin: true, gridcolor: "#eceff1", zerolinecolor: "#bdc1c6", tickfont: { size: 11 } },
  };
  for (const [key, value] of Object.entries(overrides)) {
    base[key] = value && typeof value === "object" && !Array.isArray(value) && base[key] && typeof base[key] === "object"
      ? { ...base[key], ...value }
      : value;
  }
  return base;
}

/**
 * Draws (or redraws) a chart into `node`.
 * @param {HTMLElement} node
 * @param {object[]} traces
 * @param {Record<string, any>} chartLayout from {@link layout}
 * @param {Record<string, any>} [config] options added to {@link CONFIG} for this chart
 * @returns {Promise<void>}
 */
export async function draw(node, traces, chartLayout, config = undefined) {
  // A note shown instead of a chart (see showEmpty) goes before Plotly draws there.
  if (!node.querySelector(":scope > .plot-container")) node.replaceChildren();
  await plotly().react(node, traces, chartLayout, config ? { ...CONFIG, ...config } : CONFIG);
}

/**
 * Shows a calm note where a chart would be (no data to chart), freeing the chart if one was drawn.
 * @param {HTMLElement} node
 * @param {string} text
 */
export function showEmpty(node, text) {
  purgeAll(node);
  const note = document.createElement("p");
  note.className = "empty";
  note.textContent = text;
  node.replaceChildren(note);
}

/**
 * Frees the charts inside `root`, and `root` itself when it is one (listeners, WebGL contexts),
 * before their DOM goes away.
 * @param {ParentNode} root
 */
export function purgeAll(root) {
  const P = /** @type {any} */ (window).Plotly;
  if (!P) return;
  const nodes = [...root.querySelectorAll(".js-plotly-plot")];
  if (root instanceof Element && root.classList.contains("js-plotly-plot")) nodes.push(root);
  for (const node of nodes) P.purge(node);
}
