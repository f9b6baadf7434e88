/**
 * The only place where numbers become text: times, sizes, ratios and their labels.
 * Data keeps its units in its field names (`*_us`, `*_bytes`, `*_ratio`); this module turns
 * them into what people read.
 * @module lib/format
 */

/** Shown for a value the trace does not provide. */
export const NA = "n/a";

/**
 * The step-time categories, in the order every view shows them.
 * @type {{key: string, label: string}[]}
 */
export const STEP_CATEGORIES = [
  { key: "kernel_us", label: "Kernel" },
  { key: "memcpy_us", label: "Memcpy" },
  { key: "memset_us", label: "Memset" },
  { key: "communication_us", label: "Communication" },
  { key: "runtime_us", label: "Runtime" },
  { key: "dataloader_us", label: "DataLoader" },
  { key: "cpu_exec_us", label: "CPU Exec" },
  { key: "other_us", label: "Other" },
];

/** @param {unknown} value @returns {value is number} */
function isNumber(value) {
  return typeof value === "number" && Number.isFinite(value);
}

/**
 * Three significant digits at most, no trailing zeros beyond them: 123, 12.3, 1.23.
 * @param {number} value
 * @returns {string}
 */
function sig3(value) {
  const abs = Math.abs(value);
  if (abs >= 100) return String(Math.round(value));
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/**
 * A duration in microseconds: "123 us", "12.3 ms", "1.23 s".
 * @param {number|null|undefined} us
 * @returns {string}
 */
export function formatUs(us) {
  if (!isNumber(us)) return NA;
  const abs = Math.abs(us);
  if (abs === 0) return "0 us";
  if (abs < 1) return `${us.toFixed(2)} us`;
  if (abs < 1000) return `${abs < 10 ? us.toFixed(1) : String(Math.round(us))} us`;
  if (abs < 1e6) return `${sig3(us / 1e3)} ms`;
  return `${sig3(us / 1e6)} s`;
}

/**
 * A point in time since the trace start, precise enough to tell events apart:
 * "850.250 us", "12.346 ms" (to the microsecond), "1.234567 s".
 * @param {number|null|undefined} us
 * @returns {string}
 */
export function formatOffset(us) {
  if (!isNumber(us)) return NA;
  const abs = Math.abs(us);
  if (abs === 0) return "0 us";
  if (abs < 1000) return `${us.toFixed(3)} us`;
  if (abs < 1e6) return `${(us / 1e3).toFixed(3)} ms`;
  return `${(us / 1e6).toFixed(6)} s`;
}

/**
 * A time ruler's tick label: the unit follows the largest time on the ruler (so labels stay short
 * deep into a long trace), the decimals follow the tick step: "1.2 ms", "120.346 ms", "0.3 s".
 * @param {number} offsetUs the tick's time since the trace start
 * @param {number} stepUs the distance between ticks
 * @param {number} maxUs the largest time the ruler shows
 * @returns {string}
 */
export function formatTick(offsetUs, stepUs, maxUs) {
  const abs = Math.abs(maxUs);
  const [unit, divisor] = abs >= 1e6 ? ["s", 1e6] : abs >= 1e3 ? ["ms", 1e3] : ["us", 1];
  const digits = Math.max(0, Math.min(9, Math.ceil(-Math.log10(stepUs / divisor) - 1e-9)));
  const value = offsetUs / divisor;
  const text = value.toFixed(digits);
  return `${/^-0(\.0*)?$/.test(text) ? text.slice(1) : text} ${unit}`;
}

/**
 * The unit an axis of durations should use, chosen from its largest value.
 * @param {number} maxUs
 * @returns {{unit: string, divisor: number, axisTitle: (what: string) => string}}
 */
export function timeAxis(maxUs) {
  const pick = maxUs >= 1e6 ? ["s", 1e6] : maxUs >= 1e3 ? ["ms", 1e3] : ["us", 1];
  const [unit, divisor] = /** @type {[string, number]} */ (pick);
  return { unit, divisor, axisTitle: (what) => `${what} (${unit})` };
}

/**
 * A size in bytes, 1024-based as the reference plugin shows it, with the binary units' names (the
 * reference wrote "GB" for 2^30 bytes): 34084028416 -> "31.74 GiB". Bandwidths alone are decimal (GB/s).
 * @param {number|null|undefined} bytes
 * @returns {string}
 */
export function formatBytes(bytes) {
  if (!isNumber(bytes)) return NA;
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes;
  let i = 0;
  while (Math.abs(value) >= 1024 && i < units.length - 1) {
    value /= 1024;
    i += 1;
  }
  return i === 0 ? `${Math.round(value)} B` : `${value.toFixed(2)} ${units[i]}`;
}

/**
 * A 0..1 share as a percentage, two decimals by default: 0.5551 -> "55.51 %".
 * @param {number|null|undefined} ratio
 * @param {number} [digits] decimals (0 for progress: "43 %")
 * @returns {string}
 */
export function formatRatio(ratio, digits = 2) {
  if (!isNumber(ratio)) return NA;
  return `${(ratio * 100).toFixed(digits)} %`;
}

/**
 * A count with thousands separators.
 * @param {number|null|undefined} n
 * @returns {string}
 */
export function formatCount(n) {
  if (!isNumber(n)) return NA;
  return Math.round(n).toLocaleString("en-US");
}

/**
 * Any value, formatted by its field name's unit suffix (`_us`, `_bytes`, `_ratio`).
 * @param {string} key e.g. "sync_us"
 * @param {unknown} value
 * @returns {string}
 */
export function formatField(key, value) {
  if (value === null || value === undefined) return NA;
  if (key.endsWith("_us")) return formatUs(/** @type {number} */ (value));
  if (key.endsWith("_bytes")) return formatBytes(/** @type {number} */ (value));
  if (key.endsWith("_ratio")) return formatRatio(/** @type {number} */ (value));
  if (isNumber(value)) return Number.isInteger(value) ? formatCount(value) : sig3(value);
  return String(value);
}

/**
 * A field name as words, without its unit suffix: "achieved_occupancy_ratio" -> "achieved occupancy".
 * @param {string} key
 * @returns {string}
 */
export function fieldLabel(key) {
  return key.replace(/_(us|bytes|ratio)$/, "").replace(/_/g, " ");
}

/**
 * A compute capability as shown: "9.0"; null -> "n/a".
 * @param {string|null|undefined} value
 * @returns {string}
 */
export function formatText(value) {
  return value === null || value === undefined || value === "" ? NA : String(value);
}

/** Kernel entry points named after a generic wrapper: their first template argument says what they run. */
const GENERIC_KERNEL = /^(?:Kernel\d*|device_kernel|kernel)$/;

/**
 * Splits `text` at depth 0 into the part outside brackets and the first `<...>` group's inside.
 * @param {string} text
 * @returns {{outside: string, firstTemplate: string}}
 */
function splitBrackets(text) {
  let outside = "";
  let firstTemplate = "";
  let depth = 0;
  let inFirst = false;
  let seenTemplate = false;
  for (const ch of text) {
    if (ch === "<" || ch === "(") {
      if (depth === 0 && ch === "<" && !seenTemplate) inFirst = true;
      else if (inFirst) firstTemplate += ch;
      depth += 1;
    } else if (ch === ">" || ch === ")") {
      depth = Math.max(0, depth - 1);
      if (depth === 0 && inFirst) {
        inFirst = false;
        seenTemplate = true;
      } else if (inFirst) firstTemplate += ch;
    } else if (depth === 0) {
      outside += ch;
    } else if (inFirst) {
      firstTemplate += ch;
    }
  }
  return { outside, firstTemplate };
}

/**
 * A kernel's name without return type, namespaces, template arguments and parameters, for chart
 * labels: "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, ...)"
 * becomes "cunn_SoftMaxForward". Generic wrappers keep their first template argument
 * ("Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>"). Unparsable names come back whole.
 * @param {string} name
 * @returns {string}
 */
export function shortKernelName(name) {
  const text = String(name).trim().replace(/^void\s+/, "");
  const { outside, firstTemplate } = splitBrackets(text);
  const base = outside.split("::").filter(Boolean).pop() || "";
  if (!base.trim()) return text;
  if (GENERIC_KERNEL.test(base) && firstTemplate) {
    const arg = firstTemplate.split(",")[0].trim();
    return `${base}<${splitBrackets(arg).outside.split("::").filter(Boolean).pop() || arg}>`;
  }
  return base.trim();
}
