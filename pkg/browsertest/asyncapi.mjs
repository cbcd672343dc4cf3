// Validates an AsyncAPI document with the AsyncAPI project's own parser (@asyncapi/parser): the file named by
// the first argument, or standard input. Prints one JSON line, {"errors":[...],"warnings":[...]}, each entry
// {"code","message","path"}, and exits 1 when the parser reports an error (or cannot read the document).
import { readFileSync } from "node:fs";
import { Parser, DiagnosticSeverity } from "@asyncapi/parser";

const text = readFileSync(process.argv[2] ?? 0, "utf8");
const parser = new Parser();
const { document, diagnostics } = await parser.parse(text);
const pick = (sev) =>
  diagnostics
    .filter((d) => d.severity === sev)
    .map((d) => ({ code: String(d.code), message: d.message, path: d.path.join("/") }));
const out = { errors: pick(DiagnosticSeverity.Error), warnings: pick(DiagnosticSeverity.Warning) };
if (document) {
  out.channels = document.channels().all().map((c) => ({ id: c.id(), address: c.address(), messages: c.messages().all().map((m) => m.id()) }));
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(out.errors.length > 0 || !document ? 1 : 0);
