import { pathsOf, storeConfig, relayConfig, unknownKeys } from "../src/programs/cli/Settings.ts"
console.log(pathsOf(storeConfig), pathsOf(relayConfig))
console.log(unknownKeys({ relay: { batchSize: 3, batchsize: 4 }, sink: { url: "x", tpye: 1 }, backend: "sqlite", extra: { a: 1 } }))
