// doc2ci's driver for gitlab-ci-local (its expansion of a pipeline as GitLab does and its JSON
// Schema check, `--list`): one process checks many texts, one after another, each in a fresh
// folder of its own under the scratch folder (gitlab-ci-local reads `.gitlab-ci.yml` from its
// working folder and keeps state there). Reads JSON lines {"id", "text"} on stdin and writes
// {"id", "ok", "output"} per line: `ok` and `output` are what the command line gives for the same
// text (exit status 0, and stdout then stderr), so the verdicts read from them are the same.
// Each folder is removed once its text is answered.
//
// gitlab-ci-local compiles its JSON Schema for every text (a new Ajv, the same options, the same
// schema object): about 0.3 s, most of a text's time. The compiled function depends only on the
// schema and those options and keeps no state between calls, so the driver compiles it once.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { AssertionError } from "node:assert";
import { handler } from "gitlab-ci-local/src/handler.js";
import { WriteStreamsMock } from "gitlab-ci-local/src/write-streams.js";
import schema from "gitlab-ci-local/src/schema/index.js";
import Ajv from "ajv";

const compile = Ajv.prototype.compile;
let compiled = null;
Ajv.prototype.compile = function (s, meta) {
  if (s !== schema) return compile.call(this, s, meta);
  compiled ??= compile.call(this, s, meta);
  return compiled;
};

// What gitlab-ci-local prints itself (`console.log` of a warning, say) belongs to the text being
// checked, as on the command line, where it is part of that text's stdout and stderr; the
// answers go out through the original stdout only.
const answer = process.stdout.write.bind(process.stdout);
const warn = process.stderr.write.bind(process.stderr);
let current = null;
process.stdout.write = (chunk, ...rest) => (current ? (current.stdout(String(chunk)), true) : answer(chunk, ...rest));
process.stderr.write = (chunk, ...rest) => (current ? (current.stderr(String(chunk)), true) : warn(chunk, ...rest));

const scratch = process.cwd();
let n = 0;
for await (const line of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  const { id, text } = JSON.parse(line);
  // gitlab-ci-local wants a relative `cwd`.
  const rel = `t${n++}`;
  const dir = path.join(scratch, rel);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, ".gitlab-ci.yml"), text);
  const ws = new WriteStreamsMock();
  current = ws;
  let ok = true;
  try {
    // The command line's `--list --no-evaluate-rule-changes`, in the text's own folder.
    await handler({ cwd: rel, list: true, evaluateRuleChanges: false }, ws, []);
  } catch (e) {
    ok = false;
    // As gitlab-ci-local's own entry point reports an error.
    if (e instanceof AssertionError) ws.stderr(`${e.message.trim()}\n`);
    else if (e instanceof AggregateError) e.errors.forEach((x) => ws.stderr(`${x.stack ?? x}\n`));
    else ws.stderr(`${e.stack ?? e}\n`);
  }
  ws.flush();
  current = null;
  const output = ws.stdoutLines.join("\n") + "\n" + ws.stderrLines.join("\n");
  answer(JSON.stringify({ id, ok, output }) + "\n");
  fs.rmSync(dir, { recursive: true, force: true });
}
