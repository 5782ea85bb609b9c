/**
 * The CLI's logger: logfmt lines on stderr, so stdout stays clean for data.
 *
 * @since 0.1.0
 */
import * as Logger from "effect/Logger"

/**
 * logfmt on stderr (annotations such as `partition` and `owner` become fields).
 *
 * @since 0.1.0
 */
export const stderrLogger = Logger.withConsoleError(Logger.logfmtLogger)
