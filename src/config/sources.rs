//! `[[sources]]`: where each service's pairs come from, as types.
//!
//! An entry is its common keys ([`Common`]) plus the keys of its kind: [`FileKeys`] (a file
//! of pairs, as a model's outputs are) or [`CrawlKeys`] (a documentation site and its profile).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::{check_name, CrawlSource, FileKeys, ImportSource, Service, Source, SourceKind, CRAWL_BACKENDS};
use crate::keys::{fields_of, Ctx, Entry};

/// Keys of every `[[sources]]` entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Common {
    #[serde(default)]
    name: Option<Spanned<String>>,
    kind: Spanned<String>,
    service: Spanned<String>,
}

/// Keys of `kind = "crawl"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CrawlKeys {
    #[serde(default)]
    profile: Option<Spanned<String>>,
    #[serde(default)]
    serve: Option<Spanned<String>>,
    #[serde(default)]
    url: Option<Spanned<String>>,
    #[serde(default)]
    backend: Option<Spanned<String>>,
}

/// Every key a `[[sources]]` entry may take, whatever its kind (read from the types).
pub(super) fn keys() -> Vec<&'static str> {
    [fields_of::<Common>(), fields_of::<FileKeys>(), fields_of::<CrawlKeys>()].concat()
}

/// Every `[[sources]]` entry, typed; names are unique.
pub(super) fn sources(
    cx: &Ctx,
    entries: Vec<Entry>,
    services: &[Service],
    profiles: &BTreeMap<String, Spanned<toml::Table>>,
) -> Result<Vec<Source>> {
    let mut sources: Vec<Source> = Vec::new();
    for mut e in entries {
        let c: Common = e.part(cx)?;
        let service = super::known_service(cx, services, &c.service, "sources.service")?;
        let crawl = match c.kind.get_ref().as_str() {
            "crawl" => true,
            "import" => false,
            other => {
                return cx.err(
                    c.kind.span(),
                    "sources.kind",
                    format!("unsupported kind `{other}` (supported: import, crawl)"),
                )
            }
        };
        // A key of the other kind would be ignored: name it as such rather than as unknown.
        let foreign = if crawl { e.foreign::<CrawlKeys>() } else { e.foreign::<FileKeys>() };
        if let Some((k, sp)) = foreign {
            let msg = match k {
                _ if !crawl && fields_of::<CrawlKeys>().contains(&k) => "only crawl sources take this key",
                "columns" | "skip_bad_rows" if crawl => "a crawl source has no columns",
                _ if crawl && fields_of::<FileKeys>().contains(&k) => {
                    "a crawl source takes `serve` or `url`, not this key"
                }
                _ => "",
            };
            if !msg.is_empty() {
                return cx.err(sp, &format!("sources.{k}"), msg);
            }
        }
        let span = e.span.clone();
        let head = Head { span: span.clone(), name: c.name, service };
        let src =
            if crawl { crawl_source(cx, head, e.rest(cx)?, profiles)? } else { import_source(cx, head, e.rest(cx)?)? };
        if sources.iter().any(|x| x.name == src.name) {
            return cx.err(span, "sources.name", format!("duplicate source name `{}`: give one a `name`", src.name));
        }
        sources.push(src);
    }
    Ok(sources)
}

/// What every kind of source entry has: where it is written, its `name`, its service.
struct Head {
    span: std::ops::Range<usize>,
    name: Option<Spanned<String>>,
    service: String,
}

fn import_source(cx: &Ctx, head: Head, s: FileKeys) -> Result<Source> {
    let Head { span, name, service } = head;
    let (full, format) =
        s.file_and_format(cx, span, "sources", "missing: an import source needs a file", "benchmark")?;
    let path = s.path.as_ref().expect("file_and_format checked it");
    // A released benchmark is a folder (`doc2ci export benchmark`); every other format a file.
    if (format == "benchmark") != full.is_dir() {
        let want = if format == "benchmark" { "a folder written by `doc2ci export benchmark`" } else { "a file" };
        return cx.err(path.span(), "sources.path", format!("`{}` is not {want}", path.get_ref()));
    }
    let name = match &name {
        Some(n) => {
            if let Err(m) = check_name("source name", n.get_ref()) {
                return cx.err(n.span(), "sources.name", m);
            }
            n.get_ref().clone()
        }
        None => file_stem(&full),
    };
    Ok(Source {
        name,
        service,
        kind: SourceKind::Import(ImportSource {
            format,
            path: full,
            columns: s.columns,
            skip_bad_rows: s.skip_bad_rows,
        }),
    })
}

/// A `kind = "crawl"` source checked against its profile.
fn crawl_source(
    cx: &Ctx,
    head: Head,
    s: CrawlKeys,
    profiles: &BTreeMap<String, Spanned<toml::Table>>,
) -> Result<Source> {
    let Head { span, name, service } = head;
    let Some(pname) = s.profile else {
        return cx.err(span, "sources.profile", "missing: a crawl source names its site profile (`[profiles.NAME]`)");
    };
    let profile = resolve_profile(cx, &pname, profiles)?;
    let (serve, url) = match (&s.serve, &s.url) {
        (Some(d), None) => {
            let full = cx.path(d.span(), "sources.serve", d.get_ref())?;
            if !full.is_dir() {
                return cx.err(d.span(), "sources.serve", format!("`{}` is not a folder", d.get_ref()));
            }
            (Some(full), None)
        }
        (None, Some(u)) => match url::Url::parse(u.get_ref()) {
            Ok(p) if matches!(p.scheme(), "http" | "https") && p.host().is_some() => (None, Some(p)),
            _ => {
                let shown = doc2ci_llm::redact_url(u.get_ref());
                return cx.err(u.span(), "sources.url", format!("`{shown}` is not an http(s) URL"));
            }
        },
        (Some(_), Some(u)) => return cx.err(u.span(), "sources.url", "give `serve` or `url`, not both"),
        (None, None) => {
            return cx.err(
                span,
                "sources.url",
                "missing: a crawl source needs `url` (a site) or `serve` (a folder doc2ci serves)",
            )
        }
    };
    let backend = match &s.backend {
        Some(b) if !CRAWL_BACKENDS.contains(&b.get_ref().as_str()) => {
            return cx.err(
                b.span(),
                "sources.backend",
                format!("unknown backend `{}` (one of {})", b.get_ref(), CRAWL_BACKENDS.join(", ")),
            )
        }
        b => b.as_ref().map(|b| b.get_ref().clone()),
    };
    // Without a `name`, the profile's name names the source, so it must be path-safe too.
    let (name, name_span) = match &name {
        Some(n) => (n.get_ref().clone(), n.span()),
        None => (pname.get_ref().clone(), pname.span()),
    };
    if let Err(m) = check_name("source name", &name) {
        return cx.err(name_span, "sources.name", m);
    }
    // Credentials in the URL go to the site in an Authorization header, and nowhere else: every
    // URL doc2ci stores, prints or exports is the site's without them.
    let (url, auth) = match url {
        Some(mut u) => {
            let auth = (!u.username().is_empty() || u.password().is_some()).then(|| super::Credentials {
                user: percent_decoded(u.username()),
                password: u.password().map(percent_decoded),
            });
            let _ = u.set_username("");
            let _ = u.set_password(None);
            (Some(u.to_string()), auth)
        }
        None => (None, None),
    };
    Ok(Source {
        name,
        service,
        kind: SourceKind::Crawl(CrawlSource {
            profile_name: pname.get_ref().clone(),
            profile,
            serve,
            url,
            auth,
            backend,
        }),
    })
}

/// `%XX` escapes of a URL's user or password decoded (a `+` stays a `+`).
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let (mut out, mut i) = (Vec::with_capacity(b.len()), 0);
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A source's profile: a `[profiles.NAME]` table (with `base = "<built-in>"` it starts from that
/// built-in profile and overrides single keys), else a built-in profile of that name.
fn resolve_profile(
    cx: &Ctx,
    pname: &Spanned<String>,
    profiles: &BTreeMap<String, Spanned<toml::Table>>,
) -> Result<doc2ci_crawl::Profile> {
    let name = pname.get_ref();
    let key = format!("profiles.{name}");
    let profile = match profiles.get(name) {
        Some(t) => {
            let mut table = t.get_ref().clone();
            let parsed = match table.remove("base") {
                Some(toml::Value::String(b)) => match doc2ci_crawl::builtin(&b) {
                    Some(base) => {
                        let o = serde_json::to_value(&table)?;
                        let serde_json::Value::Object(o) = o else { unreachable!("a table is an object") };
                        doc2ci_crawl::with_overrides(&base, o).map_err(|e| e.0)
                    }
                    None => {
                        return cx.err(
                            t.span(),
                            &format!("{key}.base"),
                            format!(
                                "no built-in profile `{b}` (built-in: {})",
                                doc2ci_crawl::builtin_names().collect::<Vec<_>>().join(", ")
                            ),
                        )
                    }
                },
                Some(_) => {
                    return cx.err(t.span(), &format!("{key}.base"), "the name of a built-in profile (a string)")
                }
                None => {
                    toml::Value::Table(table).try_into::<doc2ci_crawl::Profile>().map_err(|e| e.message().to_string())
                }
            };
            match parsed {
                Ok(p) => (p, t.span()),
                Err(m) => return cx.err(t.span(), &key, m),
            }
        }
        None => match doc2ci_crawl::builtin(name) {
            Some(p) => (p, pname.span()),
            None => {
                let mut names: Vec<&str> = profiles.keys().map(String::as_str).collect();
                names.extend(doc2ci_crawl::builtin_names().map(|n| -> &str { n }));
                return cx.err(
                    pname.span(),
                    "sources.profile",
                    format!("no profile `{name}` (declared or built-in: {})", names.join(", ")),
                );
            }
        },
    };
    if let Err(m) = profile.0.compile() {
        return cx.err(profile.1, &key, m);
    }
    Ok(profile.0)
}

/// `GitHubActions_Docs.csv.gz` → `GitHubActions_Docs`: a readable default source name.
fn file_stem(p: &Path) -> String {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.split('.').next().unwrap_or("source").to_string();
    stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}
