#!/usr/bin/env node
// Renders GitHub-docs Markdown (the `content/actions` tree of `github/docs`, or the pages beside this
// file, written in that dialect) into a static copy of docs.github.com: Liquid first, then the unified
// pipeline of `src/content-render/unified/processor.ts` in its order, with its own plugins (code
// headers with the hidden clipboard twin, annotated examples rendered three times, alerts, heading
// links, platform/tool switchers) written here after their sources, inside the ArticlePage chrome.
//
//   node render.mjs --out DIR [--content DIR] [--data DIR]
//
// Besides the site it writes DIR/_fences.json: every YAML fence of every page as written in the source
// (after Liquid), and whether js-yaml loads it as a mapping or a sequence: the oracle no renderer quirk
// can touch (each such fence is exactly one pair).
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import matter from 'gray-matter'
import yaml from 'js-yaml'
import { Liquid, Tag, defaultOperators } from 'liquidjs'
import { unified } from 'unified'
import remarkParse from 'remark-parse'
import gfm from 'remark-gfm'
import remark2rehype from 'remark-rehype'
import raw from 'rehype-raw'
import slug from 'rehype-slug'
import highlight from 'rehype-highlight'
import html from 'rehype-stringify'
import { common } from 'lowlight'
import { visit } from 'unist-util-visit'
import { h } from 'hastscript'
import { fromMarkdown } from 'mdast-util-from-markdown'
import { toHast } from 'mdast-util-to-hast'
import { toString } from 'hast-util-to-string'

const here = path.dirname(fileURLToPath(import.meta.url))
const { values: args } = parseArgs({ options: { out: { type: 'string' }, content: { type: 'string' }, data: { type: 'string' } } })
if (!args.out) {
  console.error('usage: render.mjs --out DIR [--content DIR] [--data DIR]')
  process.exit(2)
}
const contentDir = path.resolve(args.content ?? path.join(here, 'content'))
const dataDir = path.resolve(args.data ?? path.join(here, 'data'))
const outDir = path.resolve(args.out)

// ---------- pages ----------
function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? walk(p) : e.name.endsWith('.md') && e.name !== 'README.md' ? [p] : []
  })
}
// content/actions/x/y.md → /actions/x/y; index.md → its folder. The product folder is part of the URL.
const productRoot = path.basename(contentDir) === 'actions' ? path.dirname(contentDir) : contentDir
function urlOf(file) {
  const rel = path.relative(productRoot, file).replace(/\\/g, '/').replace(/\.md$/, '')
  return '/' + rel.replace(/(^|\/)index$/, '')
}
const pages = walk(contentDir).map((file) => {
  const { data, content } = matter(fs.readFileSync(file, 'utf8'))
  return { file, url: urlOf(file), fm: data, body: content }
})
const byUrl = new Map(pages.map((p) => [p.url, p]))
for (const p of pages) for (const r of p.fm.redirect_from ?? []) byUrl.set(r, p)

// ---------- versions: the free-pro-team build ----------
let BUILD = 'fpt'
// Older pages name the plans in full (`free-pro-team: '*'`); some are versioned by a feature flag
// (`feature: actions-caching`): in the build wherever the flag is.
const OLD_PLANS = { 'free-pro-team': 'fpt', 'enterprise-server': 'ghes', 'github-ae': 'ghae' }
const inBuild = (fm, build = BUILD) => {
  if (!fm.versions) return true
  const v = Object.fromEntries(Object.entries(fm.versions).map(([k, x]) => [OLD_PLANS[k] ?? k, x]))
  return v[build] !== undefined || (v.feature !== undefined && [].concat(v.feature).some((f) => feature(f)))
}
// `{% ifversion fpt or ghec %}`: true for the plan being built (a comparison on it, `ghes > 3.12`, holds).
// A feature flag (`{% ifversion actions-caching %}`) holds for the builds its `data/features/NAME.yml`
// lists; a flag whose file is gone had shipped everywhere (the site deletes flags then), so it holds.
const featureCache = new Map()
function feature(name) {
  if (!featureCache.has(name)) {
    const f = path.join(dataDir, 'features', name + '.yml')
    featureCache.set(name, fs.existsSync(f) ? (yaml.load(fs.readFileSync(f, 'utf8'))?.versions ?? {}) : null)
  }
  const v = featureCache.get(name)
  return v === null ? true : v[BUILD] !== undefined
}
function versionExpr(expr) {
  const term = (t) => {
    t = t.trim()
    const neg = t.startsWith('not ')
    const name = (neg ? t.slice(4) : t).trim().split(/\s+/)[0]
    const val = ['fpt', 'ghec', 'ghes', 'ghae'].includes(name) ? name === BUILD : feature(name)
    return neg ? !val : val
  }
  return expr.split(/\s+or\s+/).some((o) => o.split(/\s+and\s+/).every(term)) ? 'true' : 'false'
}

// ---------- Liquid ----------
// Older pages still test versions the way the site did before `ifversion` (`{% if currentVersion ==
// "free-pro-team@latest" or currentVersion ver_gt "enterprise-server@3.0" %}`): the build's version
// is in the context, and `ver_gt`/`ver_lt` compare two Enterprise Server releases only.
const release = (v) => (typeof v === 'string' && v.startsWith('enterprise-server@') ? v.slice(18).split('.').map(Number) : null)
const verCmp = (l, r) => {
  const [a, b] = [release(l), release(r)]
  return a && b ? a[0] - b[0] || a[1] - b[1] : null
}
const engine = new Liquid({
  extname: '.md',
  strictFilters: false,
  operators: {
    ...defaultOperators,
    ver_gt: (l, r) => verCmp(l, r) > 0,
    ver_lt: (l, r) => verCmp(l, r) !== null && verCmp(l, r) < 0,
  },
})
const versionContext = () => ({
  currentVersion: BUILD === 'fpt' ? 'free-pro-team@latest' : 'enterprise-server@3.14',
  enterpriseServerVersions: ['enterprise-server@3.14', 'enterprise-server@3.13'],
})
function dataValue(ref) {
  const parts = ref.split('.')
  if (parts[0] === 'reusables') {
    const f = path.join(dataDir, ...parts) + '.md'
    return fs.existsSync(f) ? renderLiquid(fs.readFileSync(f, 'utf8')).trim() : ''
  }
  if (parts[0] === 'variables') {
    const f = path.join(dataDir, 'variables', parts[1] + '.yml')
    if (!fs.existsSync(f)) return ''
    let v = yaml.load(fs.readFileSync(f, 'utf8'))
    for (const k of parts.slice(2)) v = v?.[k]
    return typeof v === 'string' ? renderLiquid(v) : ''
  }
  return ''
}
engine.registerTag(
  'data',
  class extends Tag {
    constructor(token, remain, liquid) {
      super(token, remain, liquid)
      this.ref = token.args.trim()
    }
    *render() {
      return dataValue(this.ref)
    }
  },
)
// liquid/indented-data-reference.ts: a reusable inside a list item, every line indented.
engine.registerTag(
  'indented_data_reference',
  class extends Tag {
    constructor(token, remain, liquid) {
      super(token, remain, liquid)
      const [ref, ...opts] = token.args.trim().split(/\s+/)
      this.ref = ref
      this.spaces = Number((opts.find((o) => o.startsWith('spaces=')) ?? 'spaces=0').slice(7))
    }
    *render() {
      const pad = ' '.repeat(this.spaces)
      return dataValue(this.ref)
        .split('\n')
        .map((l) => (l ? pad + l : l))
        .join('\n')
    }
  },
)
// The block tags of liquid/extended-markdown.ts, still in older pages: `{% note %}` and its kin
// become the site's alert boxes, `{% rowheaders %}` marks a table whose first cells head rows.
const blockTag = (name, open, close, sep = '\n\n') =>
  engine.registerTag(
    name,
    class extends Tag {
      constructor(token, remain, liquid) {
        super(token, remain, liquid)
        this.tpls = []
        const stream = liquid.parser.parseStream(remain)
        stream
          .on('tag:end' + name, () => stream.stop())
          .on('template', (t) => this.tpls.push(t))
          .on('end', () => {
            throw new Error(`tag ${token.getText()} not closed`)
          })
        stream.start()
      }
      *render(ctx, emitter) {
        const out = yield this.liquid.renderer.renderTemplates(this.tpls, ctx)
        emitter.write(`${open}${sep}${out}${sep}${close}`)
      }
    },
  )
for (const [name, color] of [['note', 'accent'], ['tip', 'success'], ['warning', 'attention'], ['danger', 'danger']])
  blockTag(name, `<div class="ghd-alert ghd-alert-${color} ghd-spotlight-${color}">`, '</div>')
blockTag('rowheaders', '<div class="ghd-tool rowheaders">', '</div>')
// liquid/tool.ts: one block tag per platform and tool, `<div class="ghd-tool NAME">…</div>`.
const TOOLS = ['mac', 'windows', 'linux', 'webui', 'cli', 'api', 'curl', 'desktop', 'codespaces', 'vscode', 'bash', 'powershell']
for (const name of TOOLS) blockTag(name, `<div class="ghd-tool ${name}">`, '</div>\n', '')
engine.registerTag(
  'octicon',
  class extends Tag {
    constructor(token, remain, liquid) {
      super(token, remain, liquid)
      this.name = (token.args.match(/"([^"]+)"/) ?? [, 'dot'])[1]
    }
    *render() {
      return `<svg class="octicon octicon-${this.name}" aria-hidden="true" width="16" height="16"></svg>`
    }
  },
)
function renderLiquid(src) {
  const pre = src
    .replace(/\{%-?\s*ifversion\s+([^%]+?)\s*-?%\}/g, (_, e) => `{% if ${versionExpr(e)} %}`)
    .replace(/\{%-?\s*elsif\s+([^%]+?)\s*-?%\}/g, (_, e) => `{% elsif ${versionExpr(e)} %}`)
    .replace(/\{%-?\s*endifversion\s*-?%\}/g, '{% endif %}')
  return engine.parseAndRenderSync(pre, versionContext())
}

// ---------- unified plugins (after src/content-render/unified/*.ts) ----------
function parseInfoString() {
  return (tree) =>
    visit(tree, 'code', (node) => {
      if (!node.lang) return
      // The older form `yaml{:copy}`: the language, then its options in braces.
      const old = node.lang.match(/^([^{]+)\{:(.+)\}$/)
      if (old) {
        node.lang = old[1]
        node.meta = [old[2], node.meta].filter(Boolean).join(' ')
      }
      const meta = {}
      for (const k of (node.meta ?? '').split(/\s+/g).filter(Boolean)) {
        const [key, ...v] = k.split(/[:=]/)
        meta[key] = v.length ? v.join(':') : true
      }
      // mdast-util-to-hast copies `meta` onto the code element's data, where the plugins read it.
      node.meta = meta
    })
}
// [AUTOTITLE](/actions/x) takes the title of the page it links to; every local link gets /en.
function rewriteLocalLinks() {
  return (tree) =>
    visit(tree, 'link', (node) => {
      if (!node.url.startsWith('/') || node.url.startsWith('/en/')) return
      const [p, frag] = node.url.split('#')
      const target = byUrl.get(p)
      for (const c of node.children)
        if (c.type === 'text' && /^\s*AUTOTITLE\s*$/.test(c.value)) c.value = target?.fm.title ?? p
      node.url = '/en' + (target ? target.url : p) + (frag ? '#' + frag : '')
    })
}
const meta = (pre) => pre.children[0]?.data?.meta ?? {}
const LANG_NAMES = { yaml: 'YAML', yml: 'YAML', shell: 'Shell', bash: 'Bash', json: 'JSON', javascript: 'JavaScript', text: 'Text', dockerfile: 'Dockerfile', powershell: 'PowerShell', python: 'Python' }
function hash(s) {
  let x = 2166136261
  for (const c of s) x = Math.imul(x ^ c.codePointAt(0), 16777619) >>> 0
  return String(x)
}
function header(lang, code, subnav = null) {
  const id = hash(code)
  return h('header', { class: ['d-flex', 'flex-items-center', 'flex-justify-between', 'p-2', 'text-small', 'rounded-top-1', 'border-top', 'border-left', 'border-right'] }, [
    h('span', { className: 'flex-1' }, LANG_NAMES[lang] ?? lang),
    subnav,
    h('button', { class: ['js-btn-copy', 'btn', 'btn-sm', 'tooltipped', 'tooltipped-nw'], 'aria-label': `Copy ${LANG_NAMES[lang] ?? lang} code to clipboard`, 'data-clipboard': id },
      h('svg', { class: ['octicon', 'octicon-copy'], width: 16, height: 16, ariaHidden: 'true' }, h('path', { d: 'M0 6.75C0 5.784.784 5 1.75 5h1.5' }))),
    h('pre', { hidden: true, 'data-clipboard': id }, code),
  ])
}
function codeHeader() {
  return (tree) =>
    visit(tree, 'element', (node, index, parent) => {
      if (node.tagName !== 'pre' || !(meta(node).copy || meta(node).prompt) || meta(node).annotate) return
      const code = node.children[0]
      const lang = (code.properties.className?.[0] ?? '').replace('language-', '')
      parent.children[index] = h('div', { className: 'code-example' }, [header(lang, toString(code)), node])
    })
}
const COMMENT = { yaml: /^\s*#[^!]\s*|^\s*#$/, yml: /^\s*#[^!]\s*|^\s*#$/, shell: /^\s*#[^!]\s*|^\s*#$/, bash: /^\s*#[^!]\s*|^\s*#$/, javascript: /^\s*\/\/\s*/ }
function annotate() {
  return (tree) =>
    visit(tree, 'element', (node, index, parent) => {
      if (node.tagName !== 'pre' || !meta(node).annotate) return
      const lang = node.children[0].properties.className[0].replace('language-', '')
      const code = toString(node.children[0])
      const re = COMMENT[lang]
      if (!re || !re.test(code.split('\n')[0])) throw new Error(`annotated ${lang} example must start with a comment: ${code.split('\n')[0]}`)
      const lines = code.split('\n').filter((l) => l.trim())
      const groups = [[]]
      let on = re.test(lines[0])
      for (const l of lines) {
        if (on !== re.test(l)) {
          on = !on
          groups.push([])
        }
        groups.at(-1).push(l)
      }
      const rows = []
      for (let i = 0; i < groups.length; i += 2) {
        if (!groups[i + 1]) throw new Error('each annotation needs a note and a code block')
        rows.push([groups[i], groups[i + 1]])
      }
      const subnav = h('div', { className: 'annotate-toggle' }, [
        h('button', { name: 'annotate-display', value: 'beside', type: 'button', className: 'annotate-option' }, ['Beside']),
        h('button', { name: 'annotate-display', value: 'inline', type: 'button', className: 'annotate-option' }, ['Inline']),
      ])
      parent.children[index] = h('div', { class: 'annotate beside' },
        h('div', { className: 'annotate-header' }, header(lang, code, subnav)),
        h('div', { className: 'annotate-beside' }, rows.map(([note, block]) =>
          h('div', { className: 'annotate-row' }, [
            h('div', { className: 'annotate-code' }, h('pre', h('code', { className: `language-${lang}` }, block.join('\n')))),
            h('div', { className: 'annotate-note' }, toHast(fromMarkdown(note.map((l) => l.replace(re, '')).join('\n')))),
          ]))),
        h('div', { className: 'annotate-inline' }, [h('pre', h('code', { className: `language-${lang}` }, code))]))
    })
}
function headingLinks() {
  return (tree) =>
    visit(tree, 'element', (node) => {
      if (!/^h[1-6]$/.test(node.tagName) || !node.properties?.id) return
      node.properties.tabIndex = -1
      node.children = [h('a', { className: 'heading-link', href: `#${node.properties.id}` }, [...node.children, h('span', { className: 'heading-link-symbol', ariaHidden: 'true' })])]
    })
}
const ALERTS = { NOTE: 'accent', IMPORTANT: 'done', WARNING: 'attention', TIP: 'success', CAUTION: 'danger' }
const ALERT_RE = /\[!(NOTE|IMPORTANT|WARNING|TIP|CAUTION)\]/gi
function alerts() {
  const strip = (n) => {
    if (Array.isArray(n)) return n.map(strip)
    if (n.children) n.children = n.children.map(strip)
    if (n.value) n.value = n.value.replace(ALERT_RE, '')
    return n
  }
  return (tree) =>
    visit(tree, 'element', (node) => {
      if (node.tagName !== 'blockquote') return
      const m = JSON.stringify(node.children).match(ALERT_RE)
      if (!m) return
      const key = m[0].slice(2, -1).toUpperCase()
      node.tagName = 'div'
      node.properties = { className: `ghd-alert ghd-alert-${ALERTS[key]}`, dataContainer: 'alert' }
      node.children = [
        h('p', { className: 'ghd-alert-title' }, h('svg', { className: 'octicon mr-2', width: 16, height: 16, ariaHidden: true }, h('path', { d: 'M0 8a8 8 0 1 1 16 0' })), key[0] + key.slice(1).toLowerCase()),
        ...strip(node.children),
      ]
    })
}
// wrap-procedural-images.ts: images in ordered lists get a wrapper div.
function wrapProceduralImages() {
  return (tree) =>
    visit(tree, 'element', (node, index, parent) => {
      if (node.tagName === 'img' && parent?.tagName === 'p') parent.children[index] = h('div', { className: 'procedural-image-wrapper' }, [node])
    })
}
const processor = unified()
  .use(remarkParse)
  .use(gfm)
  .use(parseInfoString)
  .use(rewriteLocalLinks)
  .use(remark2rehype, { allowDangerousHtml: true })
  .use(slug)
  .use(headingLinks)
  .use(codeHeader)
  .use(annotate)
  .use(highlight, { languages: common, subset: false, aliases: { json: 'jsonc', plaintext: ['text'] } })
  .use(raw)
  .use(wrapProceduralImages)
  .use(alerts)
  .use(html)

// ---------- the ArticlePage chrome ----------
const esc = (s) => String(s ?? '').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
function layout(page, body, toc) {
  const title = renderLiquid(page.fm.title ?? '')
  const intro = page.fm.intro ? renderLiquid(page.fm.intro) : ''
  const platform = /class="ghd-tool (mac|windows|linux)"/.test(body)
  const nav = pages
    .filter((p) => inBuild(p.fm))
    .map((p) => `<li><a href="/en${p.url}">${esc(renderLiquid(p.fm.shortTitle ?? p.fm.title ?? p.url))}</a></li>`)
    .join('')
  const crumbs = page.url.split('/').filter(Boolean)
  return `<!DOCTYPE html>
<html lang="en" data-color-mode="auto"><head><meta charset="utf-8">
<title>${esc(title)} - GitHub Docs</title>
<meta name="description" content="${esc(intro.replace(/<[^>]+>/g, ''))}">
<link rel="alternate" hreflang="ja" href="/ja${page.url}">
<link rel="alternate" hreflang="es" href="/es${page.url}">
<meta property="og:url" content="https://docs.example.com/en${page.url}">
</head><body>
<a href="#main-content" class="visually-hidden skip-button">Skip to main content</a>
<div data-container="header"><header class="Header_header"><nav aria-label="Global"><a href="/en">GitHub Docs</a>
<a href="/en/enterprise-server@3.14${page.url}">Enterprise Server 3.14</a>
<a href="/en/enterprise-cloud@latest${page.url}">Enterprise Cloud</a>
<a href="/en/repositories">Repositories</a><a href="/ja${page.url}">日本語</a></nav>
<button aria-label="Search">Search</button></header></div>
<div class="d-flex">
<div data-container="nav" class="SidebarNav"><nav aria-label="Product sidebar"><h2>GitHub Actions</h2><ul>${nav}</ul></nav></div>
<div class="flex-column flex-1 min-width-0">
<main id="main-content" class="Main_main">
<div class="container-xl px-3 px-md-6 my-4">
<div class="d-none d-xxl-block mt-3 mr-auto width-full"><nav data-testid="breadcrumbs-header" aria-label="Breadcrumb"><ul>${crumbs.map((c, i) => `<li><a href="/en/${crumbs.slice(0, i + 1).join('/')}">${esc(c)}</a></li>`).join('')}</ul></nav></div>
<div class="ArticleGridLayout_container">
<div class="ArticleGridLayout_topper"><h1 id="title-h1" class="border-bottom-0">${esc(title)}</h1></div>
<div id="article-intro" class="ArticleGridLayout_intro f4 pb-4">
${intro ? `<div data-testid="lead" data-search="lead" class="_page-intro f2 color-fg-muted mb-3"><p>${intro}</p></div>` : ''}
${platform ? `<div data-testid="platform-picker"><nav class="UnderlineNav" aria-label="Platform"><a href="?platform=mac" data-platform="mac">Mac</a><a href="?platform=windows" data-platform="windows">Windows</a><a href="?platform=linux" data-platform="linux">Linux</a></nav></div>` : ''}
</div>
<div class="ArticleGridLayout_sidebar" data-container="toc">${toc.length > 1 ? `<h2 id="in-this-article" class="mb-1 ml-3">In this article</h2><nav><ul>${toc.map(([id, t]) => `<li><a href="#${id}">${esc(t)}</a></li>`).join('')}</ul></nav>` : ''}</div>
<div class="ArticleGridLayout_content" data-container="article">
<div id="article-contents">
<div class="MarkdownContent_markdownBody__v5MYy markdown-body">${body}</div>
</div>
</div>
</div>
</div>
</main>
<footer data-container="footer"><section class="container-xl"><h3>Help and support</h3><h4>Did you find what you needed?</h4>
<button>Yes</button><button>No</button><p><a href="/en/site-policy/privacy">Privacy policy</a></p></section></footer>
</div></div>
${platform ? PICKER_SCRIPT : ''}
</body></html>
`
}
// What the PlatformPicker does after hydration: show one platform, hide the others with an inline style.
const PICKER_SCRIPT = `<script>
(function () {
  var p = new URLSearchParams(location.search).get('platform') || 'linux';
  document.querySelectorAll('.ghd-tool').forEach(function (el) {
    if (/\\b(mac|windows|linux)\\b/.test(el.className) && !el.classList.contains(p)) el.style.display = 'none';
  });
})();
</script>`

// ---------- render ----------
// Each page in the free-pro-team build (`/en/`, and `/ja/` as the other language), and in the
// Enterprise Server build where its versions say so: the whole site, of which a crawl keeps `/en/actions`.
fs.rmSync(outDir, { recursive: true, force: true })
const fences = {}
let n = 0
for (const [build, prefixes] of [['fpt', ['/en', '/ja']], ['ghes', ['/en/enterprise-server@3.14']]]) {
  BUILD = build
  for (const page of pages) {
    if (!inBuild(page.fm)) continue
    const md = renderLiquid(page.body)
    const body = String(processor.processSync(md))
    const toc = [...body.matchAll(/<h2 id="([^"]+)"[^>]*><a class="heading-link"[^>]*>(.*?)<span/g)].map((m) => [m[1], m[2].replace(/<[^>]+>/g, '')])
    const out = layout(page, body, toc)
    for (const prefix of prefixes) {
      const file = path.join(outDir, prefix, page.url, 'index.html')
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, out)
      n++
    }
    if (build !== 'fpt') continue
    const list = (fences['/en' + page.url] = [])
    visit(unified().use(remarkParse).use(gfm).parse(md), 'code', (c) => {
      const lang = (c.lang ?? '').replace(/\{:.*\}$/, '')
      if (lang !== 'yaml' && lang !== 'yml') return
      let doc = null
      try {
        doc = yaml.load(c.value)
      } catch {}
      list.push({ code: c.value, collection: doc !== null && typeof doc === 'object' })
    })
  }
}
fs.writeFileSync(path.join(outDir, '_fences.json'), JSON.stringify(fences, null, 1))
console.error(`render: ${n} pages into ${outDir}`)
