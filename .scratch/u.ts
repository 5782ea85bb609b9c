import * as Command from "@effect/cli/Command"
import * as DlqCommand from "../src/programs/cli/DlqCommand.ts"
import * as RelayCommand from "../src/programs/cli/RelayCommand.ts"
import * as HashMap from "effect/HashMap"
const root = Command.make("effect-outbox").pipe(Command.withSubcommands([RelayCommand.command, DlqCommand.command]))
const walk = (u: any, depth = 0): string => u._tag === "Named" ? `N(${u.names.join("|")})` : u._tag === "Mixed" ? "M" : u._tag === "Empty" ? "E" : u._tag === "Optional" || u._tag === "Repeated" ? `${u._tag[0]}(${walk(u.usage)})` : `${u._tag[0]}(${walk(u.left)}, ${walk(u.right)})`
console.log(walk(Command.getUsage(root)))
console.log(walk(Command.getUsage(RelayCommand.command)))
console.log(Array.from(HashMap.keys(Command.getSubcommands(root))))
console.log(Array.from(HashMap.keys(Command.getSubcommands(DlqCommand.command))))
