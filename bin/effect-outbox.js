#!/usr/bin/env node
// Runs the TypeScript CLI entry through tsx's ESM loader (no build step).
import { register } from "tsx/esm/api"

register()
await import("../src/programs/cli/main.ts")
