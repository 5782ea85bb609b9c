#!/usr/bin/env node
// The `effect-outbox` command: runs the compiled CLI from dist/ (`npm run build` in a clone; the package ships it built).
await import("../dist/programs/cli/main.js")
