// doc2ci's driver for CircleCI's own config parser (@circleci/circleci-config-parser, the
// parser of CircleCI's config SDK): one process parses many files. Reads JSON lines
// {"id", "text"} on stdin, writes {"id", "ok": true}, {"id", "error": "..."} (the config is
// rejected) or {"id", "crash": "..."} (the parser itself failed) per line.
//
// A config without `workflows` runs its `build` job (CircleCI's implicit workflow); the parser
// does not know that rule, so the driver applies it before parsing.
"use strict";
const readline = require("node:readline");
const yaml = require("yaml");

// The parser keeps a path stack in module state that a throw leaves dirty: a fresh copy after one.
function load() {
  for (const k of Object.keys(require.cache)) if (k.includes("circleci-config")) delete require.cache[k];
  return require("@circleci/circleci-config-parser");
}

function check(parser, text) {
  let doc;
  try {
    doc = yaml.parse(text);
  } catch (e) {
    return { error: `Error while parsing - yaml\n${String((e && e.message) || e).split("\n")[0]}` };
  }
  // What CircleCI refuses before any parsing, and the parser would crash on.
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) {
    return { error: "Error while parsing - config\nthe configuration is not a mapping" };
  }
  if (doc.version === undefined) return { error: "Error while parsing - config/version\nno version" };
  if (doc.jobs === undefined || doc.jobs === null) return { error: "Error while parsing - config/jobs\nno jobs defined" };
  if (doc.workflows === undefined) {
    if (!doc.jobs || typeof doc.jobs !== "object" || !("build" in doc.jobs)) {
      return { error: "Error while parsing - config/workflows\nno workflows, and no job named build for CircleCI to run" };
    }
    doc = { ...doc, workflows: { "doc2ci-implicit": { jobs: ["build"] } } };
  }
  try {
    parser.parseConfig(doc);
    return { ok: true };
  } catch (e) {
    const msg = String((e && e.message) || e);
    // Thrown inside the parser: its module state is dirty (`dirty` is not part of the answer).
    return msg.startsWith("Error while parsing") ? { error: msg, dirty: true } : { crash: msg.split("\n")[0], dirty: true };
  }
}

(async () => {
  let parser = load();
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const { id, text } = JSON.parse(line);
    const { dirty, ...out } = check(parser, text);
    // Reloading costs tens of milliseconds: only after the parser itself threw, not after a text
    // refused before parsing (not YAML, not a mapping, no version or jobs).
    if (dirty) parser = load();
    process.stdout.write(JSON.stringify({ id, ...out }) + "\n");
  }
})().catch((e) => { process.stderr.write(String((e && e.stack) || e) + "\n"); process.exit(2); });
