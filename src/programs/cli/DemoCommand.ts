/**
 * placeholder
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"

/**
 * The `demo` command.
 *
 * @since 0.1.0
 */
export const command = Command.make("demo", {}, () => Effect.void)
