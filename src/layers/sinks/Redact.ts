/**
 * Redaction of destination URLs for logs and error messages: a sink URL may carry credentials in its
 * userinfo (`user:pass@`) or its query (`?api_key=…`). Every sink logs and reports URLs only through
 * {@link url}, and scrubs foreign error text (a client library's message may quote the URL) with
 * {@link scrubber}.
 *
 * @since 0.1.0
 */

const mask = "***"

/**
 * The URL with its userinfo replaced by `***` and every query value by `***` (names kept, so an operator
 * can still tell which parameter is wrong). Text that is not a URL becomes `<invalid url>`.
 *
 * @since 0.1.0
 */
export const url = (text: string): string => {
  let parsed: URL
  try {
    parsed = new URL(text)
  } catch {
    return "<invalid url>"
  }
  const userinfo = parsed.username !== "" || parsed.password !== "" ? `${mask}@` : ""
  const names = Array.from(parsed.searchParams.keys())
  const query = names.length === 0 ? "" : `?${names.map((name) => `${encodeURIComponent(name)}=${mask}`).join("&")}`
  const hash = parsed.hash === "" ? "" : "#…"
  return `${parsed.protocol}//${userinfo}${parsed.host}${parsed.pathname}${query}${hash}`
}

/**
 * The secret parts of a URL: the raw and decoded username, password and query values. Parts shorter than
 * 3 characters are left alone: they are no secret, and masking them would mangle every message.
 *
 * @since 0.1.0
 */
export const secretsOf = (text: string): ReadonlyArray<string> => {
  let parsed: URL
  try {
    parsed = new URL(text)
  } catch {
    return [text]
  }
  const raw = [parsed.username, parsed.password, ...rawQueryValues(parsed.search)]
  const decoded = raw.map(safeDecode)
  return Array.from(new Set([...raw, ...decoded].filter((part) => part.length >= 3))).sort(
    (a, b) => b.length - a.length
  )
}

/**
 * A function replacing every occurrence of the given URLs (whole, then their secret parts, longest first)
 * in a text by their redacted form or `***`.
 *
 * @since 0.1.0
 */
export const scrubber =
  (...urls: ReadonlyArray<string>) =>
  (text: string): string => {
    let out = text
    for (const each of urls) {
      if (each.length > 0) out = out.split(each).join(url(each))
    }
    for (const secret of urls.flatMap(secretsOf)) out = out.split(secret).join(mask)
    return out
  }

const rawQueryValues = (search: string): ReadonlyArray<string> =>
  search
    .replace(/^\?/, "")
    .split("&")
    .map((pair) => {
      const at = pair.indexOf("=")
      return at < 0 ? "" : pair.slice(at + 1)
    })

const safeDecode = (text: string): string => {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "))
  } catch {
    return text
  }
}
