/**
 * Decoding a list of stored rows or items: every one of them, or the first failure. Shared by the SQL and
 * DynamoDB backends, whose drivers return rows and items of different shapes.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"

/**
 * Decodes every item with `decode`, in order; fails with the first item's failure.
 *
 * @since 0.1.0
 */
export const decodeAll = <I, A, E>(
  items: Iterable<I>,
  decode: (item: I) => Either.Either<A, E>
): Either.Either<Array<A>, E> => {
  const out: Array<A> = []
  for (const item of items) {
    const decoded = decode(item)
    if (Either.isLeft(decoded)) return Either.left(decoded.left)
    out.push(decoded.right)
  }
  return Either.right(out)
}
