/**
 * Broker URLs with credentials (`nats://user:pass@host:4222`, `amqp://user:pass@host/vhost`): the
 * credentials are taken out of the URL so that a client is given them as options and the URL can be
 * logged redacted ({@link Redact.url}).
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redact from "./Redact.js"

/**
 * A parsed broker URL.
 *
 * @since 0.1.0
 */
export interface BrokerUrl {
  /** The URL without userinfo. */
  readonly bare: string
  /** The URL for logs and messages. */
  readonly redacted: string
  readonly username: Option.Option<string>
  readonly password: Option.Option<string>
  readonly url: URL
}

/**
 * Parses a broker URL whose scheme is one of `protocols` (e.g. `["nats:", "tls:"]`); the problem,
 * naming only the redacted URL, otherwise.
 *
 * @since 0.1.0
 */
export const parse = (text: string, protocols: ReadonlyArray<string>): Either.Either<BrokerUrl, string> => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return Either.left(`${Redact.url(text)} is not a URL`)
  }
  const redacted = Redact.url(text)
  if (!protocols.includes(url.protocol)) {
    return Either.left(`${redacted} is not a ${protocols.map((p) => `${p}//`).join(" or ")} URL`)
  }
  const decode = (part: string): Option.Option<string> =>
    part === "" ? Option.none() : Option.some(decodeURIComponent(part))
  const username = decode(url.username)
  const password = decode(url.password)
  const bare = new URL(url.href)
  bare.username = ""
  bare.password = ""
  return Either.right({ bare: bare.href, redacted, username, password, url })
}
