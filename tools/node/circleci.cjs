// doc2ci's driver for CircleCI's own config parser (@circleci/circleci-config-parser, the
// parser of CircleCI's config SDK): one process parses many files. Reads JSON lines
// {"id", "text"} on stdin, writes {"id", "ok": true} or {"id", "error": "..."} per line.
"use strict";
const readline = require("node:readline");
const parser = require("@circleci/circleci-config-parser");

(async () => {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const { id, text } = JSON.parse(line);
    let out;
    try {
      parser.parseConfig(text);
      out = { id, ok: true };
    } catch (e) {
      out = { id, error: String((e && e.message) || e) };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  }
})().catch((e) => { process.stderr.write(String((e && e.stack) || e) + "\n"); process.exit(2); });
