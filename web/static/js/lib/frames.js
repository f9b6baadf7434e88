/**
 * Python call-stack frames as the API gives them (`{file, line, function}`, innermost first):
 * their text, editor links and what the copy buttons copy. Pure functions.
 * @module lib/frames
 */

/**
 * @typedef {{file: string|null, line: number|null, function: string, path?: string|null}} Frame
 *   `path`: where a relative `file` is on the server, found under its --source-root
 * @typedef {{from: string, to: string}} SourceMap a server path prefix and what it is on this computer
 */

/**
 * Whether a path is absolute (POSIX "/x", Windows "C:\x" or "C:/x", UNC "\\host\x").
 * PyTorch 2.x records frames relative to `sys.path` ("torch/nn/modules/conv.py"), 1.x absolute.
 * @param {string|null|undefined} path
 * @returns {boolean}
 */
export function isAbsolutePath(path) {
  if (!path) return false;
  return path.startsWith("/") || /^[A-Za-z]:[\\/]/.test(path) || path.startsWith("\\\\");
}

/**
 * "file(line)", "file" without a line, "" without a file.
 * @param {Frame} frame
 * @returns {string}
 */
export function frameLocation(frame) {
  if (!frame.file) return "";
  return frame.line === null || frame.line === undefined ? frame.file : `${frame.file}(${frame.line})`;
}

/**
 * A frame as PyTorch names it: "file(line): function", or the function alone (built-ins).
 * @param {Frame} frame
 * @returns {string}
 */
export function frameText(frame) {
  const where = frameLocation(frame);
  return where ? `${where}: ${frame.function}` : frame.function;
}

/**
 * What a frame's copy button copies, "path:line" (what editors and `code -g` open); null without a file.
 * @param {Frame} frame
 * @returns {string|null}
 */
export function frameCopyText(frame) {
  if (!frame.file) return null;
  return frame.line === null || frame.line === undefined ? frame.file : `${frame.file}:${frame.line}`;
}

/**
 * The frame's file as an absolute path on the server: where the server found it (`path`), or the
 * recorded path when it is absolute; null otherwise.
 * @param {Frame} frame
 * @returns {string|null}
 */
export function serverPath(frame) {
  if (frame.path) return frame.path;
  return frame.file && isAbsolutePath(frame.file) ? frame.file : null;
}

/**
 * `path` as it is on this computer: a path under the map's server prefix moves under its local one.
 * @param {string} path
 * @param {SourceMap|null} map
 * @returns {string}
 */
export function mapPath(path, map) {
  if (!map || !map.from || !path.startsWith(map.from)) return path;
  return map.to + path.slice(map.from.length);
}

/**
 * A VS Code link (`vscode://file/<absolute path>:<line>`) for a frame whose file has an absolute path
 * ({@link serverPath}), moved to this computer by `map`; null otherwise.
 * @param {Frame} frame
 * @param {SourceMap|null} [map]
 * @returns {string|null}
 */
export function editorHref(frame, map = null) {
  const found = serverPath(frame);
  if (!found) return null;
  let path = mapPath(found, map).replace(/\\/g, "/");
  if (!path.startsWith("/")) path = `/${path}`; // C:/x -> /C:/x
  const line = frame.line === null || frame.line === undefined ? "" : `:${frame.line}`;
  return `vscode://file${encodeURI(path).replace(/#/g, "%23").replace(/\?/g, "%3F")}${line}`;
}

/**
 * Whether a frame is library code rather than the user's own: built-ins (no file), PyTorch and its
 * domain libraries ("torch/...", "torchvision/..." as 2.x records them), and anything under
 * site-packages / dist-packages. A heuristic for dimming, never for hiding.
 * @param {Frame} frame
 * @returns {boolean}
 */
export function isLibraryFrame(frame) {
  if (!frame.file) return true;
  const path = frame.file.replace(/\\/g, "/");
  return /(^|\/)(site|dist)-packages\//.test(path) || /^torch\w*\//.test(path) || /\/lib\/python\d[\d.]*\/[^/]+\.py$/.test(path);
}
