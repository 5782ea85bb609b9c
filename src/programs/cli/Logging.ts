/**
 * The CLI's logger: logfmt lines on stderr, so stdout stays clean for data. Control characters in a line
 * (from a partition key, a route, an error message) are escaped by `Format.inert`.
 *
 * @since 0.1.0
 */
import * as Logger from "effect/Logger"
import { inertLines } from "./Format.js"

/**
 * logfmt on stderr (annotations such as `partition` and `owner` become fields), control characters escaped.
 *
 * @since 0.1.0
 */
export const stderrLogger = Logger.withConsoleError(Logger.map(Logger.logfmtLogger, inertLines))
