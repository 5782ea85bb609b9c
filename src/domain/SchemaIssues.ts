/**
 * Schema parse failures described by field and expectation, never by the rejected value (R-PERSIST-5:
 * a typed error names what was wrong, never its value — a header or payload field may hold a secret).
 * Every error built from a Schema decode (`InvalidRecord`, `CorruptRecord`, malformed items) uses this
 * instead of a formatter that quotes `actual` values.
 *
 * @since 0.1.0
 */
import * as AST from "effect/SchemaAST"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"

const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.length === 0
    ? "the value"
    : path
        .map((key, index) =>
          typeof key === "number" ? `[${key}]` : `${index === 0 ? "" : "."}${String(key).slice(0, 64)}`
        )
        .join("")

/** What a schema expects, by its annotations or its shape; never a value that was given. */
const expected = (ast: AST.AST): string => {
  const named = Option.orElse(
    Option.orElse(AST.getIdentifierAnnotation(ast), () => AST.getTitleAnnotation(ast)),
    () => AST.getDescriptionAnnotation(ast)
  )
  const text = Option.getOrElse(named, () => String(ast))
  return text.length > 80 ? `${text.slice(0, 80)}…` : text
}

const collect = (issue: ParseResult.ParseIssue, path: ReadonlyArray<PropertyKey>, out: Array<string>): void => {
  if (out.length >= 3) return
  switch (issue._tag) {
    case "Pointer": {
      const more = Array.isArray(issue.path) ? issue.path : [issue.path]
      return collect(issue.issue, [...path, ...more], out)
    }
    case "Composite": {
      const issues = Array.isArray(issue.issues) ? issue.issues : [issue.issues]
      for (const each of issues) collect(each, path, out)
      return
    }
    case "Refinement":
      if (issue.kind === "From") return collect(issue.issue, path, out)
      out.push(`${pathText(path)}: expected ${expected(issue.ast)}`)
      return
    case "Transformation":
      return collect(issue.issue, path, out)
    case "Type":
      out.push(`${pathText(path)}: expected ${expected(issue.ast)}`)
      return
    case "Missing":
      out.push(`${pathText(path)} is missing`)
      return
    case "Unexpected":
      out.push(`${pathText(path)} is not allowed`)
      return
    case "Forbidden":
      out.push(`${pathText(path)} cannot be checked`)
      return
  }
}

/**
 * The problems of a parse failure (at most three, `; `-separated), each naming the field and what was
 * expected (`headers.authorization: expected string`), never the value given.
 *
 * @since 0.1.0
 */
export const describe = (error: ParseResult.ParseError | ParseResult.ParseIssue): string => {
  const out: Array<string> = []
  collect(error._tag === "ParseError" ? error.issue : error, [], out)
  return out.length === 0 ? "the value does not match its schema" : out.join("; ")
}
