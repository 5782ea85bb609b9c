/**
 * `effect-outbox demo` (what `npm start` runs): see {@link Demo.run}. Exits 0 when the verification
 * holds, 1 otherwise. The demo (with its HTTP client and receiver) is imported only when the command runs.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import type * as Demo from "./Demo.js"
import { CliFailure } from "./Settings.js"
import * as Telemetry from "./Telemetry.js"

/**
 * The `demo` command.
 *
 * @since 0.1.0
 */
export const command = Command.make(
  "demo",
  {
    records: Options.integer("records").pipe(
      Options.withDescription("Events to publish, orders and invoices (default 1000)"),
      Options.withDefault(1_000)
    ),
    partitions: Options.integer("partitions").pipe(
      Options.withDescription("Partitions to spread them over (default 8)"),
      Options.withDefault(8)
    ),
    dataDir: Options.text("data-dir").pipe(
      Options.withDescription("Directory of the demo database, invoice ledger and log (default .data)"),
      Options.withDefault(".data")
    ),
    timeout: Options.integer("timeout").pipe(
      Options.withDescription("Seconds before the demo gives up (default 120)"),
      Options.withDefault(120)
    ),
    httpPort: Options.integer("http-port").pipe(
      Options.withDescription("Port of the read-only dashboard on 127.0.0.1 (default 0: a free port)"),
      Options.withDefault(0)
    ),
    linger: Options.integer("linger").pipe(
      Options.withDescription("Seconds the dashboard keeps serving after the verification (default 0)"),
      Options.withDefault(0)
    )
  },
  (flags) =>
    Effect.gen(function* () {
      if (flags.linger < 0 || flags.httpPort < 0 || flags.httpPort > 65535) {
        return yield* new CliFailure({ message: "--linger must be at least 0 and --http-port 0 to 65535", exitCode: 2 })
      }
      if (flags.records < 1 || flags.partitions < 1 || flags.timeout < 1) {
        return yield* new CliFailure({
          message: "--records, --partitions and --timeout must be at least 1",
          exitCode: 2
        })
      }
      const { run } = yield* Effect.promise(() => import("./Demo.js"))
      const result = yield* run({
        records: flags.records,
        partitions: flags.partitions,
        dataDir: flags.dataDir,
        timeoutMillis: flags.timeout * 1000,
        write: (text) => {
          process.stdout.write(text)
        },
        tty: process.stdout.isTTY === true,
        tracing: Telemetry.endpoint() !== undefined,
        httpPort: flags.httpPort,
        lingerMillis: flags.linger * 1000
      })
      if (!result.ok) return yield* new CliFailure({ message: "demo verification failed", exitCode: 1 })
    })
).pipe(Command.withDescription("Run the end-to-end demo on an embedded SQLite file (what npm start runs)"))
