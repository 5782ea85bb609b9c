/**
 * How the command line's help and usage errors read: `@effect/cli` renders them with ANSI styles, a
 * usage line naming only the last subcommand (`$ relay`), variadic arguments that may be left out shown
 * without brackets (`--header text...`) and a command table padded to its longest synopsis (hundreds of
 * spaces). The console here rewrites that text before it is written: styles only on a terminal without
 * `NO_COLOR`, `$ effect-outbox relay` (the full command path), `[--header text]...`, and a command table
 * of names and descriptions.
 *
 * @since 0.1.0
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"

/**
 * Whether output may carry ANSI styles: only on a terminal and without `NO_COLOR` (https://no-color.org).
 *
 * @since 0.1.0
 */
export const colorAllowed = (stream: { readonly isTTY?: boolean | undefined }, env: NodeJS.ProcessEnv): boolean =>
  stream.isTTY === true && (env["NO_COLOR"] === undefined || env["NO_COLOR"] === "")

const ansi = /\u001b\[[0-9;]*m/g

/**
 * Removes ANSI style sequences.
 *
 * @since 0.1.0
 */
export const stripAnsi = (text: string): string => text.replace(ansi, "")

/** The subcommand words of an argv (after node and script): the leading words before any flag. */
export const commandPath = (args: ReadonlyArray<string>): ReadonlyArray<string> => {
  const path: Array<string> = []
  for (const arg of args) {
    if (arg.startsWith("-")) break
    path.push(arg)
  }
  return path
}

/** A command-table row: `  - name synopsis  description` (the synopsis is dropped, the name kept). */
const commandRow = /^( {2,}- )([a-z][\w-]*(?: [a-z][\w-]*)*)(.*?) {2,}(\S.*)$/

/**
 * Rewrites a help or usage text (see the module doc). `path` is the command path the user typed (e.g.
 * `["dlq", "redrive"]`), of which `@effect/cli` prints only the last word.
 *
 * @since 0.1.0
 */
export const rewrite = (text: string, path: ReadonlyArray<string>, color: boolean): string => {
  const plain = color ? text : stripAnsi(text)
  const rows = plain.split("\n").map((line) => commandRow.exec(stripAnsi(line)))
  const width = Math.max(0, ...rows.map((row) => (row === null ? 0 : (row[2] ?? "").length)))
  const last = path[path.length - 1]
  return plain
    .split("\n")
    .map((line, index) => {
      const row = rows[index]
      if (row !== null && row !== undefined) return `${row[1]}${(row[2] ?? "").padEnd(width)}  ${row[4] ?? ""}`
      const usage = /^(\$ )(\S+)(.*)$/.exec(line)
      if (usage !== null && last !== undefined && usage[2] === last) {
        line = `${usage[1]}${["effect-outbox", ...path].join(" ")}${usage[3] ?? ""}`
      }
      // a variadic that may be left out (zero or more) is optional: `[--header text]...`, `[<id>...]`
      return line
        .replace(/(^|[\s(])(--[\w-]+ \w+)\.\.\./g, "$1[$2]...")
        .replace(/(^|[\s(])(<[\w-]+>)\.\.\./g, "$1[$2...]")
    })
    .join("\n")
}

/**
 * Runs `effect` with a console whose `log` and `error` rewrite what `@effect/cli` prints (see
 * {@link rewrite}) when help was asked for or the text is a usage; other output (data) is written as is,
 * apart from ANSI styles when they are not allowed.
 *
 * @since 0.1.0
 */
export const withHelpConsole = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  args: ReadonlyArray<string>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(Console.consoleWith(Effect.succeed), (base) => {
    const path = commandPath(args)
    const color = colorAllowed(process.stdout, process.env)
    const help = args.includes("--help") || args.includes("-h")
    const rewriteOne = (value: string): string =>
      help || value.includes("USAGE") ? rewrite(value, path, color) : color ? value : stripAnsi(value)
    const text = (values: ReadonlyArray<unknown>): ReadonlyArray<unknown> =>
      values.map((value) => (typeof value === "string" ? rewriteOne(value) : value))
    const console: Console.Console = {
      ...base,
      log: (...values) => base.log(...text(values)),
      error: (...values) => base.error(...text(values)),
      unsafe: {
        ...base.unsafe,
        log: (...values) => base.unsafe.log(...text(values)),
        error: (...values) => base.unsafe.error(...text(values))
      }
    }
    return Effect.withConsole(effect, console)
  })
