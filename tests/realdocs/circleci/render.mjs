#!/usr/bin/env node
// Renders CircleCI-docs AsciiDoc (the `docs/<component>/modules/<module>/pages/*.adoc` tree of
// `circleci/circleci-docs`, or the pages beside this file, written in that dialect) into a static copy
// of circleci.com/docs with the engines of its Antora build: Asciidoctor.js 2.2 (Antora 3.1's), the
// Asciidoctor Tabs extension, and Shiki 0.14 through a syntax highlighter written after
// antora-shiki-extension (its `<pre class="shiki highlight …"><code data-lang=…>`, callout markers
// moved into the line they follow, and the fragment serialised as a whole HTML document), inside the
// Antora UI's page chrome (navbar, component navigation, breadcrumbs toolbar, info bar with the
// Markdown twin link, "On this page" aside, article footer), with the UI's scripts that hide the
// inactive tab panels and add copy toolbars.
//
//   node render.mjs --out DIR [--content DIR]
//
// Besides the site it writes DIR/_fences.json: every YAML listing of every page as written in the
// source (callout markers stripped) and whether js-yaml loads it as a mapping or a sequence.
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import yaml from 'js-yaml'

const require = createRequire(import.meta.url)
const asciidoctor = require('@asciidoctor/core')()
const tabs = require('@asciidoctor/tabs')
const shiki = require('shiki')

const here = path.dirname(fileURLToPath(import.meta.url))
const { values: args } = parseArgs({ options: { out: { type: 'string' }, content: { type: 'string' } } })
if (!args.out) {
  console.error('usage: render.mjs --out DIR [--content DIR]')
  process.exit(2)
}
const contentDir = path.resolve(args.content ?? path.join(here, 'docs'))
const outDir = path.resolve(args.out)
const THEME = 'dracula'
const highlighter = await shiki.getHighlighter({ theme: THEME })

// ---------- the syntax highlighter (after antora-shiki-extension) ----------
const START = new RegExp(`^<pre class="shiki ${THEME}" style="background-color: #[0-9a-f]{3,8}" tabindex="0"><code>`, 'i')
asciidoctor.SyntaxHighlighter.register('shiki', {
  handlesHighlighting() {
    return true
  },
  highlight(node, source, lang) {
    let inner
    try {
      inner = highlighter.codeToHtml(source, { lang, theme: THEME }).replace(START, '').slice(0, -'</code></pre>'.length)
    } catch {
      return source // as the extension does for a language Shiki does not know
    }
    const bg = highlighter.getBackgroundColor(THEME)
    return `<pre class="shiki highlight ${THEME}" style="--shiki-background-color: ${bg}; "><code ${lang ? ` data-lang="${lang}"` : ''} class="shiki  "style="--shiki-line-number-start: 1; --shiki-line-number-color: #d1d2d7;">${inner}</code></pre>`
  },
  format(node) {
    const moved = node.getContent().replace(/<\/span>(<i class="conum" data-value="\d+"><\/i>(?:<b>\(\d+\)<\/b>)?)/g, '$1</span>')
    return `<html><head></head><body>${moved}</body></html>`
  },
})

// ---------- pages ----------
function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? walk(p) : e.name.endsWith('.adoc') && !e.name.startsWith('_') ? [p] : []
  })
}
// docs/<component>/modules/<module>/pages/<page>.adoc → /docs/<component>/[<module>/]<page>/
function urlOf(file) {
  const rel = path.relative(contentDir, file).split(path.sep)
  const [component, , module, , ...page] = rel
  const name = page.join('/').replace(/\.adoc$/, '')
  const parts = [component, module === 'ROOT' ? null : module, name === 'index' ? null : name].filter(Boolean)
  return '/docs/' + parts.join('/') + '/'
}
// Only `pages/` are pages (partials, examples and attachments are included or linked from them).
const pages = walk(contentDir)
  .filter((f) => path.relative(contentDir, f).split(path.sep)[3] === 'pages')
  .map((file) => ({ file, url: urlOf(file), component: path.relative(contentDir, file).split(path.sep)[0] }))

const esc = (s) => String(s ?? '').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
const UI_SCRIPT = `<script>
// 08-tabs.js: the first tab of each set is selected, the other panels hidden.
document.querySelectorAll('.openblock.tabs').forEach(function (set) {
  set.classList.remove('is-loading');
  set.querySelectorAll('.tabpanel').forEach(function (panel, i) {
    if (i > 0) { panel.hidden = true; panel.classList.add('is-hidden'); }
  });
  set.querySelectorAll('li.tab').forEach(function (tab, i) { tab.classList.toggle('is-selected', i === 0); });
});
// 04-copy-to-clipboard.js: a toolbox with the language and a copy button on each listing.
document.querySelectorAll('.doc pre.highlight, .doc .literalblock pre').forEach(function (pre) {
  var code = pre.querySelector('code[data-lang]');
  var box = document.createElement('div');
  box.className = 'source-toolbox';
  box.innerHTML = (code ? '<span class="source-lang">' + code.dataset.lang + '</span>' : '') + '<button class="copy-button" title="Copy to clipboard">Copy</button>';
  pre.parentNode.appendChild(box);
});
</script>`

function layout(page, doc) {
  const title = doc.getDocumentTitle()
  const nav = pages
    .filter((p) => p.component === page.component)
    .map((p) => `<li class="nav-item" data-depth="1"><a class="nav-link" href="${p.url}">${esc(path.basename(p.file, '.adoc'))}</a></li>`)
    .join('')
  const crumbs = page.url.split('/').filter(Boolean).slice(1)
  const toc = doc.findBy({ context: 'section' }).filter((s) => s.getLevel() === 1)
  return `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>${esc(title)} :: CircleCI Documentation</title>
<link rel="alternate" type="text/markdown" href="index.md">
<link rel="canonical" href="https://docs.example.com${page.url}"></head>
<body class="article">
<header class="header"><nav class="navbar"><div class="navbar-brand"><a class="navbar-item" href="/docs/">CircleCI Docs</a></div>
<div class="navbar-menu"><a class="navbar-item" href="/docs/guides/getting-started/first-steps/">Guides</a><a class="navbar-item" href="/docs/reference/configuration-reference/">Reference</a><a class="navbar-item" href="/docs/orbs/use/orb-intro/">Orbs</a><a class="navbar-item" href="/docs/server-admin/server-4.8/overview/">Server</a><a class="navbar-item" href="/docs/llms.txt">llms.txt</a></div></nav></header>
<div class="body">
<div class="nav-container" data-component="${page.component}" data-version=""><aside class="nav"><div class="panels"><div class="nav-panel-menu is-active" data-panel="menu"><nav class="nav-menu"><h3 class="title"><a href="/docs/${page.component}/">${esc(page.component)}</a></h3><ul class="nav-list">${nav}</ul></nav></div></div></aside></div>
<main class="article">
<div class="toolbar" role="navigation"><nav class="breadcrumbs" aria-label="breadcrumbs"><ul>${crumbs.map((c) => `<li>${esc(c)}</li>`).join('')}</ul></nav></div>
<div class="content">
<aside class="toc sidebar" data-title="On this page" data-levels="2"><div class="toc-menu"><ul>${toc.map((s) => `<li><a href="#${s.getId()}">${esc(s.getTitle())}</a></li>`).join('')}</ul></div></aside>
<article class="doc">
<h1 class="page">${esc(title)}</h1>
<div class="flex flex-wrap gap-2 items-center mb-4"><span class="text-sm">Last updated</span> <span class="platform-badge" data-platform="Cloud">Cloud</span><span class="platform-badge" data-platform="Server v4+">Server v4+</span>
<div data-dropdown><button class="dropdown-toggle">Markdown</button><div class="dropdown-menu"><a href="index.md">View markdown</a><button class="copy-markdown-link">Copy link</button></div></div></div>
${doc.convert()}
</article>
<footer class="article-footer"><p>Was this page helpful?</p><button id="docs-vote-yes">Yes</button><button id="docs-vote-no">No</button>
<p><a href="https://code.example.com/circleci-docs/edit${page.url}">Edit this page</a></p></footer>
</div>
</main>
</div>
<footer class="footer"><p>© CircleCI, Inc. <a href="https://www.example.com/privacy/">Privacy</a></p></footer>
${UI_SCRIPT}
</body></html>
`
}

// ---------- render ----------
fs.rmSync(outDir, { recursive: true, force: true })
const fences = {}
for (const page of pages) {
  const registry = asciidoctor.Extensions.create()
  tabs.register(registry)
  const source = fs.readFileSync(page.file, 'utf8')
  const doc = asciidoctor.load(source, {
    safe: 'safe',
    extension_registry: registry,
    attributes: { sectanchors: '', idprefix: '', idseparator: '-', icons: 'font', 'source-highlighter': 'shiki', experimental: '' },
  })
  const list = (fences[page.url] = [])
  for (const block of doc.findBy({ context: 'listing' })) {
    const lang = block.getAttribute('language')
    if (lang !== 'yaml' && lang !== 'yml') continue
    const code = block.getSource().replace(/[ \t]*(#\s*)?<\d+>[ \t]*$/gm, '')
    let parsed = null
    try {
      parsed = yaml.load(code)
    } catch {}
    list.push({ code, collection: parsed !== null && typeof parsed === 'object' })
  }
  const file = path.join(outDir, page.url, 'index.html')
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, layout(page, doc))
  fs.writeFileSync(path.join(path.dirname(file), 'index.md'), `# ${doc.getDocumentTitle()}\n\n(the page as Markdown)\n`)
}
fs.mkdirSync(path.join(outDir, 'docs'), { recursive: true })
fs.writeFileSync(path.join(outDir, 'docs', 'llms.txt'), 'CircleCI docs for language models\n')
fs.writeFileSync(path.join(outDir, '_fences.json'), JSON.stringify(fences, null, 1))
console.error(`render: ${pages.length} pages into ${outDir}`)
