/**
 * What the CLI checks before it opens a SQLite file, and how an opening failure is told: one line, no
 * stack trace. Read-only commands never create a file (a mistyped path is "no such database file"); a
 * missing parent directory is created one level at a time, so an impossible path (under `/proc`, a file,
 * a read-only mount) fails at once instead of retrying. Exit code 2 for a path or file that cannot be used,
 * 1 for anything else.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { CliFailure } from "./Settings.js"

/** The `code` and first message line of an error and of its `cause` chain, outermost first. */
const chain = (error: unknown): ReadonlyArray<{ readonly code: string | undefined; readonly message: string }> => {
  const out: Array<{ code: string | undefined; message: string }> = []
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    if (typeof current !== "object") {
      out.push({ code: undefined, message: String(current) })
      break
    }
    const code = "code" in current && typeof current.code === "string" ? current.code : undefined
    const message = "message" in current && typeof current.message === "string" ? current.message : ""
    const problems =
      "problems" in current && Array.isArray(current.problems) ? current.problems.map(String).join("; ") : ""
    out.push({ code, message: (problems.length > 0 ? problems : message).split("\n")[0] ?? "" })
    current = "cause" in current ? current.cause : undefined
  }
  return out
}

/**
 * The SQLite or system error code found in an error's cause chain (`SQLITE_FULL`, `EROFS`, …).
 *
 * @since 0.1.0
 */
export const errorCode = (error: unknown): string | undefined =>
  chain(error).find((link) => link.code !== undefined)?.code

/**
 * The most specific one-line message of an error's cause chain.
 *
 * @since 0.1.0
 */
export const innermostMessage = (error: unknown): string => {
  const messages = chain(error)
    .map((link) => link.message)
    .filter((message) => message.length > 0)
  return messages[messages.length - 1] ?? String(error)
}

const readOnlyCodes = new Set(["SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "EROFS", "EACCES", "EPERM"])

/**
 * A plain-words reason for a SQLite error code, when the code has one.
 *
 * @since 0.1.0
 */
export const reasonOf = (code: string | undefined): string | undefined => {
  if (code === undefined) return undefined
  if (code === "SQLITE_FULL" || code === "ENOSPC") return "disk full"
  if (code === "SQLITE_NOTADB") return "not a SQLite database"
  if (code.startsWith("SQLITE_CORRUPT")) return "the database file is corrupt"
  if (readOnlyCodes.has(code) || code.startsWith("SQLITE_READONLY") || code.startsWith("SQLITE_CANTOPEN")) {
    return "cannot write the file or its directory (read-only or no permission)"
  }
  if (code === "SQLITE_IOERR" || code.startsWith("SQLITE_IOERR_")) return "I/O error"
  return undefined
}

/**
 * A one-line {@link CliFailure} for a backend that could not be opened (exit 2 when the reason is a
 * known file problem).
 *
 * @since 0.1.0
 */
export const failure = (label: string, cause: Cause.Cause<unknown>): CliFailure => {
  const error = Cause.squash(cause)
  if (error instanceof CliFailure) return error
  const reason = reasonOf(errorCode(error))
  return reason !== undefined
    ? new CliFailure({ message: `cannot open the ${label} backend: ${reason}`, exitCode: 2 })
    : new CliFailure({ message: `cannot open the ${label} backend: ${innermostMessage(error)}`, exitCode: 1 })
}

/**
 * The failure of opening SQLite file `file`.
 *
 * @since 0.1.0
 */
export const openFailure = (file: string, cause: Cause.Cause<unknown>): CliFailure => failure(`sqlite (${file})`, cause)

/** An in-memory database name (the rule of `SqliteDatabase.isMemory`, without loading the SQLite driver). */
const isMemory = (filename: string): boolean =>
  filename === ":memory:" || filename === "" || filename.startsWith("file::memory:")

const bad = (message: string): CliFailure => new CliFailure({ message, exitCode: 2 })

const statOf = (target: string): fs.Stats | undefined => {
  try {
    return fs.statSync(target)
  } catch {
    return undefined
  }
}

/**
 * Creates the missing directories above `file` one level at a time (never `mkdir -p`, which loops on
 * some paths such as `/proc/x/y`).
 */
const ensureParent = (file: string): void => {
  const missing: Array<string> = []
  let directory = path.dirname(path.resolve(file))
  for (;;) {
    const stat = statOf(directory)
    if (stat !== undefined) {
      if (!stat.isDirectory()) throw bad(`cannot create ${file}: ${directory} is not a directory`)
      break
    }
    missing.unshift(directory)
    const parent = path.dirname(directory)
    if (parent === directory) break
    directory = parent
  }
  for (const level of missing) {
    try {
      fs.mkdirSync(level)
    } catch (error) {
      const code = errorCode(error)
      if (code !== "EEXIST") {
        throw bad(`cannot create directory ${level} for ${file}: ${reasonOf(code) ?? code ?? innermostMessage(error)}`)
      }
    }
  }
}

/**
 * Checks the SQLite path before opening it: for `readOnly` commands the file must exist; otherwise its
 * directory is created when missing. A path that cannot be used fails with exit code 2.
 *
 * @since 0.1.0
 */
export const check = (file: string, options: { readonly readOnly: boolean }): Effect.Effect<void, CliFailure> =>
  Effect.try({
    try: () => {
      if (isMemory(file) || file.startsWith("file:")) return
      const stat = statOf(file)
      if (stat !== undefined) {
        if (stat.isDirectory()) throw bad(`${file} is a directory, not a SQLite database file`)
        return
      }
      if (options.readOnly) throw bad(`no such database file: ${file}`)
      ensureParent(file)
    },
    catch: (error) => (error instanceof CliFailure ? error : bad(`cannot use ${file}: ${innermostMessage(error)}`))
  })
