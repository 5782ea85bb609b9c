/**
 * `effect-outbox dashboard`: serves the operations dashboard (and `/metrics`, `/healthz`, `/readyz`) over
 * a store without running a relay, read-only: redrive and purge are refused whatever the flags say.
 * Until SIGINT/SIGTERM.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { httpOptions, opsApp, serve } from "./HttpOptions.js"
import { httpConfig, load } from "./Settings.js"
import { flagEntries, resolve, storeOptions, withStores } from "./StoreOptions.js"

/**
 * The `dashboard` command.
 *
 * @since 0.1.0
 */
export const command = Command.make(
  "dashboard",
  {
    ...storeOptions,
    httpPort: httpOptions.httpPort,
    httpHost: httpOptions.httpHost,
    httpShowPayloads: httpOptions.httpShowPayloads,
    httpAllowedHost: httpOptions.httpAllowedHost
  },
  (flags) =>
    Effect.gen(function* () {
      const { provider, store } = yield* resolve(
        flags,
        flagEntries([
          ["http.port", flags.httpPort],
          ["http.host", flags.httpHost],
          ["http.showPayloads", flags.httpShowPayloads ? Option.some("true") : Option.none()],
          [
            "http.allowedHosts",
            flags.httpAllowedHost.length === 0 ? Option.none() : Option.some(flags.httpAllowedHost.join("\n"))
          ]
        ])
      )
      const loaded = yield* load(httpConfig, provider)
      const settings = { ...loaded, port: Option.orElseSome(loaded.port, () => 8080), allowMutations: false }
      return yield* withStores(store, Layer.launch(serve(settings, opsApp(settings, {}))), { readOnly: true })
    })
).pipe(
  Command.withDescription(
    "Serve the read-only operations dashboard for a store (no relay; default port 8080), until SIGINT/SIGTERM"
  )
)
