import * as Command from "@effect/cli/Command"
import * as DlqCommand from "../src/programs/cli/DlqCommand.ts"
import * as RelayCommand from "../src/programs/cli/RelayCommand.ts"
import * as InspectCommand from "../src/programs/cli/InspectCommand.ts"
import { check } from "../src/programs/cli/UnknownFlags.ts"
const root = Command.make("effect-outbox").pipe(Command.withSubcommands([RelayCommand.command, DlqCommand.command, InspectCommand.command]))
const tree = { root: root.descriptor, groups: new Map([["dlq", DlqCommand.command.descriptor]]) }
for (const a of [["relay","stdout","--frobnicate"],["relay","webhook","http://x","--batch-size","3","--json"],["dlq","redrive","--frobnicate","a"],["dlq","redrive","--route","r","--all"],["dlq","purge","--all","--limit","-1"],["inspect","--json","--sqlite-file=x"],["--frob"],["inspect","--help"], ["dlq", "--help"], ["dlq", "--frob"]]) console.log(a.join(" "), "=>", check(tree, a))
