/**
 * Plain-text output helpers of the CLI: aligned tables, durations and counts, and {@link inert}, the one
 * escaping of control characters every human-facing output goes through (log lines, `inspect`, `dlq`),
 * so a partition key or route holding ESC or BEL cannot drive the terminal.
 *
 * @since 0.1.0
 */

const controls = /[\u0000-\u001f\u007f-\u009f]/g

/**
 * The text with every control character (C0 including tab and newline, DEL, C1) written as a `\uXXXX`
 * escape, so it cannot move the cursor, change the title or clear the screen. Inside JSON string literals
 * the escapes are valid JSON and decode to the same text.
 *
 * @since 0.1.0
 */
export const inert = (text: string): string =>
  text.replace(controls, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/**
 * {@link inert} applied to each line of a multi-line text (the line breaks themselves are kept).
 *
 * @since 0.1.0
 */
export const inertLines = (text: string): string => text.split("\n").map(inert).join("\n")

/**
 * Renders rows as an aligned text table with a header and a rule under it. Numeric-looking cells are
 * right-aligned; every cell is {@link inert}.
 *
 * @since 0.1.0
 */
export const table = (headers: ReadonlyArray<string>, cells: ReadonlyArray<ReadonlyArray<string>>): string => {
  const rows = cells.map((row) => row.map(inert))
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length))
  )
  const numeric = headers.map(
    (_, column) =>
      rows.length > 0 && rows.every((row) => /^-?[\d,.]+[a-z]*(\d+[a-z]+)?( ?[a-z%/]+)?$|^-$/.test(row[column] ?? ""))
  )
  const line = (cells: ReadonlyArray<string>): string =>
    cells
      .map((cell, column) => {
        const width = widths[column] ?? 0
        return numeric[column] === true ? cell.padStart(width) : cell.padEnd(width)
      })
      .join("  ")
      .trimEnd()
  const rule = widths.map((width) => "-".repeat(width)).join("  ")
  return [line(headers), rule, ...rows.map(line)].join("\n")
}

/**
 * `12,345`.
 *
 * @since 0.1.0
 */
export const count = (n: number): string => Math.round(n).toLocaleString("en-US")

/**
 * A count with its noun in the right number: `1 entry`, `2 entries`, `0 entries`.
 *
 * @since 0.1.0
 */
export const counted = (n: number, singular: string, plural: string): string =>
  `${count(n)} ${n === 1 ? singular : plural}`

/**
 * A short age: `850ms`, `12.3s`, `4m05s`, `2h10m`, `3d04h`.
 *
 * @since 0.1.0
 */
export const age = (millis: number): string => {
  if (millis < 0) return "0ms"
  if (millis < 1000) return `${Math.round(millis)}ms`
  if (millis < 60_000) return `${(millis / 1000).toFixed(1)}s`
  const seconds = Math.floor(millis / 1000)
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, "0")}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 24 * 60) return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, "0")}m`
  const hours = Math.floor(minutes / 60)
  return `${Math.floor(hours / 24)}d${String(hours % 24).padStart(2, "0")}h`
}
