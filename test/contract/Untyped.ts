/**
 * Calls from untyped JavaScript: the contract suites pass values of the wrong runtime type (a number
 * where a string is declared, `undefined` in an id list) to check that the ports refuse them with a typed
 * error rather than a defect or a silently wrong result.
 */

// typed as `Function` so that `Reflect.apply` returns a value the call site may type
const identity: Function = (value: unknown): unknown => value

/** `value` typed as whatever the call site declares, as an untyped JavaScript caller could pass it. */
export const untyped = <T>(value: unknown): T => Reflect.apply(identity, undefined, [value])
