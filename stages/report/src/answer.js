// One answer as both pages show it (samples.html and a comparison's page): its badges, scores,
// validators' messages and a line diff against the reference, built with DOM calls only (no text
// of a page, a model or a release ever becomes markup).
// A pair's URL comes from a crawled page or an imported file: a link only when it is http(s), so a
// `javascript:` or `data:` URL in someone's release is shown as text and never runs.
function sourceLink(url) {
  return /^https?:\/\//i.test(url || '') ? el('a', { href: url, rel: 'noopener noreferrer nofollow' }, url) : el('span', { class: 'url' }, url || '');
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) { if (v !== undefined && v !== null) e.setAttribute(k, v); }
  for (const k of kids.flat()) { if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k)); }
  return e;
}
const VALID = { '-1': ['not validated', 'na'], 0: ['generation failed', 'bad'], 1: ['parse error', 'bad'], 2: ['schema-invalid', 'bad'], 3: ['schema-valid', 'ok'] };
function badges(v, l) {
  const [t, c] = VALID[v];
  const out = [el('span', { class: 'b ' + c }, t)];
  if (l === 0) out.push(el('span', { class: 'b bad' }, 'validator rejects'));
  if (l === 1) out.push(el('span', { class: 'b ok' }, 'validator passes'));
  return out;
}
function fmt(x) { return x === null || x === undefined ? '–' : (Math.round(x * 1000) / 1000).toString(); }
function lineDiff(a, b) {
  const n = a.length, m = b.length;
  if (n * m > 4e6) return null;
  const w = m + 1, L = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    L[i * w + j] = a[i] === b[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
  const ops = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { ops.push([' ', b[j]]); i++; j++; }
    else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) ops.push(['-', a[i++]]);
    else ops.push(['+', b[j++]]);
  }
  while (i < n) ops.push(['-', a[i++]]);
  while (j < m) ops.push(['+', b[j++]]);
  return ops;
}
function lines(s) { return (s || '').replace(/\s+$/, '').split('\n').map(x => x.replace(/\s+$/, '')); }
function diffView(ref, out) {
  const ops = lineDiff(lines(ref), lines(out));
  if (!ops) return el('pre', {}, out);
  const cls = { ' ': 'same', '+': 'add', '-': 'del' };
  return el('pre', { class: 'diff' }, ops.map(([op, t]) => el('span', { class: cls[op] }, op + ' ' + t)));
}
function outputView(ref, o) {
  const v = o.error ? 0 : (o.parse_ok === null ? -1 : (!o.parse_ok ? 1 : (!o.schema_ok ? 2 : 3)));
  const judged = o.lint.filter(x => x.kind !== 'audit' && x.ok !== null);
  const l = judged.length ? (judged.every(x => x.ok) ? 1 : 0) : -1;
  const box = el('div', {}, badges(v, l));
  if (o.degenerate) box.append(el('span', { class: 'b warnb' }, o.degenerate));
  if (o.fragment) box.append(el('span', { class: 'b na' }, 'fragment'));
  if (o.finish && o.finish !== 'stop') box.append(el('span', { class: 'b na' }, 'finish: ' + o.finish));
  if (o.truncated) box.append(el('span', { class: 'b warnb' }, 'scored on its beginning'));
  const names = Object.keys(o.scores);
  if (names.length) box.append(el('table', { class: 'scores' }, names.map(k => el('tr', {}, el('td', {}, k), el('td', {}, fmt(o.scores[k]))))));
  if (o.error) box.append(el('ul', { class: 'errs' }, el('li', {}, o.error)));
  if (o.missed && o.missed.length) box.append(el('div', { class: 'muted' }, 'reference leaves this answer misses (path = value; sem_recall counts them)'), el('ul', { class: 'errs' }, o.missed.map(e => el('li', {}, e))));
  if (o.errors && o.errors.length) box.append(el('div', { class: 'muted' }, o.parse_ok ? 'schema errors (instance path: message)' : 'parse error'), el('ul', { class: 'errs' }, o.errors.map(e => el('li', {}, e))));
  for (const x of o.lint) {
    const head = (x.tool || x.kind) + (x.ok === true ? ': passes' : x.ok === false ? ': rejects' : ': not judged' + (x.note ? ' (' + x.note + ')' : ''));
    box.append(el('div', { class: 'muted' }, head));
    if (x.findings.length) box.append(el('ul', { class: 'errs' }, x.findings.map(f => el('li', {}, f))));
  }
  if (o.output !== null) {
    box.append(diffView(ref, o.output));
    box.append(el('details', {}, el('summary', { class: 'muted' }, 'output as generated'), el('pre', {}, o.output)));
  }
  return box;
}
