/**
 * Names an unknown command-line flag before `@effect/cli` parses the command line: without this check a
 * stray `--frobnicate` of a command with positional arguments (`relay webhook <url>`, `dlq redrive [ids…]`)
 * is taken as a positional value and reported as an unrelated error — or, for `dlq redrive`, as an entry
 * id. The known flags of each command come from its own descriptor, so they never drift from the options.
 *
 * @since 0.1.0
 */
import * as Descriptor from "@effect/cli/CommandDescriptor"
import type * as Usage from "@effect/cli/Usage"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"

/** The flags `@effect/cli` adds to every command: flag → whether it takes a value. */
const builtIn: ReadonlyMap<string, boolean> = new Map([
  ["--help", false],
  ["-h", false],
  ["--version", false],
  ["--wizard", false],
  ["--completions", true],
  ["--log-level", true]
])

/** Every named option of a usage: flag → whether it takes a value. */
const flagsOf = (usage: Usage.Usage, into: Map<string, boolean>): Map<string, boolean> => {
  switch (usage._tag) {
    case "Named":
      for (const name of usage.names) if (name.startsWith("-")) into.set(name, Option.isSome(usage.acceptedValues))
      return into
    case "Optional":
    case "Repeated":
      return flagsOf(usage.usage, into)
    case "Alternation":
    case "Concat":
      flagsOf(usage.left, into)
      return flagsOf(usage.right, into)
    case "Empty":
    case "Mixed":
      return into
  }
}

const isFlag = (token: string): boolean => token.startsWith("-") && token.length > 1 && !/^-\d/.test(token)

/**
 * A command whose subcommands are checked: the root, and each command group under its name (a group's
 * own subcommands are not visible through its parent's descriptor).
 *
 * @since 0.1.0
 */
export interface CommandTree {
  readonly root: Descriptor.Command<unknown>
  readonly groups: ReadonlyMap<string, Descriptor.Command<unknown>>
}

/**
 * The first unknown flag of `args` (the arguments after the program name) for the command they select,
 * as a message (`unknown flag --frobnicate for relay`), or `None`.
 *
 * @since 0.1.0
 */
export const check = (tree: CommandTree, args: ReadonlyArray<string>): Option.Option<string> => {
  let command: Descriptor.Command<unknown> = tree.root
  const path: Array<string> = []
  let index = 0
  // descend through subcommand names given before any flag or value
  for (; index < args.length; index++) {
    const token = args[index]
    if (token === undefined) break
    const next = HashMap.get(Descriptor.getSubcommands(command), token)
    if (Option.isNone(next)) break
    command = (path.length === 0 ? tree.groups.get(token) : undefined) ?? next.value
    path.push(token)
  }
  const known = flagsOf(Descriptor.getUsage(command), new Map(builtIn))
  for (; index < args.length; index++) {
    const token = args[index]
    if (token === undefined || token === "--") break
    if (!isFlag(token)) continue
    const name = token.includes("=") ? token.slice(0, token.indexOf("=")) : token
    const takesValue = known.get(name)
    if (takesValue === undefined) {
      return Option.some(`unknown flag ${name}${path.length > 0 ? ` for ${path.join(" ")}` : ""}`)
    }
    if (takesValue && !token.includes("=")) index++
  }
  return Option.none()
}
