/**
 * The `effect-outbox` command line: `relay`, `enqueue`, `inspect`, `dlq list|redrive|purge` and `demo`
 * (what `npm start` runs). Logs go to stderr in logfmt (level from `OUTBOX_LOG_LEVEL`, default Info) so
 * stdout stays clean for data (the stdout sink, `--json`). Optional OTLP export when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Exit codes: 0 success, 1 failure, 2 bad usage or configuration,
 * 0 after SIGINT/SIGTERM once the relay has shut down cleanly (leases released).
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as DashboardCommand from "./DashboardCommand.js"
import * as DemoCommand from "./DemoCommand.js"
import * as DlqCommand from "./DlqCommand.js"
import * as EnqueueCommand from "./EnqueueCommand.js"
import * as HelpText from "./HelpText.js"
import * as InspectCommand from "./InspectCommand.js"
import * as RelayCommand from "./RelayCommand.js"
import * as Telemetry from "./Telemetry.js"
import { inertLines } from "./Format.js"
import { stderrLogger } from "./Logging.js"
import { CliFailure } from "./Settings.js"
import * as UnknownFlags from "./UnknownFlags.js"

/**
 * The root command.
 *
 * @since 0.1.0
 */
export const root = Command.make("effect-outbox").pipe(
  Command.withDescription("A durable transactional outbox for Effect: relay, enqueue, inspect, dead letters, demo"),
  Command.withSubcommands([
    DemoCommand.command,
    RelayCommand.command,
    EnqueueCommand.command,
    InspectCommand.command,
    DlqCommand.command,
    DashboardCommand.command
  ])
)

/**
 * Runs the CLI on `argv` (`process.argv` shape: node, script, …args).
 *
 * @since 0.1.0
 */
export const cli = Command.run(root, { name: "effect-outbox", version: "0.1.0" })

const logLevel = (text: string | undefined): LogLevel.LogLevel =>
  Option.getOrElse(
    Option.fromNullable(LogLevel.allLevels.find((level) => level.label.toLowerCase() === text?.trim().toLowerCase())),
    () => LogLevel.Info
  )

/**
 * Logging of the CLI: logfmt on stderr at `OUTBOX_LOG_LEVEL` (default Info).
 *
 * @since 0.1.0
 */
export const loggerLayer: Layer.Layer<never> = Layer.merge(
  Logger.replace(Logger.defaultLogger, stderrLogger),
  Logger.minimumLogLevel(logLevel(process.env["OUTBOX_LOG_LEVEL"]))
)

const describe = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
    const tag = "_tag" in error && typeof error._tag === "string" ? `${error._tag}: ` : ""
    return `${tag}${error.message}`
  }
  return String(error)
}

/**
 * Exit code for the outcome of a command.
 *
 * @since 0.1.0
 */
export const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit)) return 0
  if (Cause.isInterruptedOnly(exit.cause)) return 0
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    if (failure.value instanceof CliFailure) return failure.value.exitCode
    if (ValidationError.isValidationError(failure.value)) return 2
  }
  return 1
}

const commandTree: UnknownFlags.CommandTree = {
  root: root.descriptor,
  groups: new Map([["dlq", DlqCommand.command.descriptor]])
}

/**
 * Runs the CLI on `argv` after refusing an unknown flag by name (exit code 2).
 *
 * @since 0.1.0
 */
export const checkedCli = (argv: ReadonlyArray<string>) =>
  Option.match(UnknownFlags.check(commandTree, argv.slice(2)), {
    onNone: () => HelpText.withHelpConsole(cli(argv), argv.slice(2)),
    onSome: (message) => Effect.fail(new CliFailure({ message: `${message} (see --help)`, exitCode: 2 }))
  })

const program = Effect.suspend(() => checkedCli(process.argv)).pipe(
  Effect.tapErrorCause((cause) => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      // @effect/cli has already printed its own usage errors
      if (ValidationError.isValidationError(failure.value)) return Effect.void
      if (failure.value instanceof CliFailure)
        return Console.error(inertLines(`effect-outbox: ${failure.value.message}`))
      return Console.error(inertLines(`effect-outbox: ${describe(failure.value)}`))
    }
    return Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Console.error(inertLines(`effect-outbox: ${Cause.pretty(cause)}`))
  }),
  Effect.provide(Layer.mergeAll(NodeContext.layer, Layer.provide(Telemetry.layer, loggerLayer), loggerLayer))
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => onExit(exitCode(exit))
})
