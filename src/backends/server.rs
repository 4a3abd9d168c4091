//! Keys of every backend that calls a server (`openai`, `ollama`, …): the endpoint pool, extra
//! body parameters and the client's limits. A backend that runs in-process takes none of them, so
//! they are a type of their own that only server backends parse.

use std::ops::Range;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::GenSettings;
use crate::keys::{fields_of, Ctx, Entry};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerKeys {
    #[serde(default)]
    base_url: Option<Spanned<String>>,
    #[serde(default)]
    base_urls: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    params: Option<Spanned<toml::Table>>,
    #[serde(default)]
    rpm: Option<u32>,
    #[serde(default)]
    tpm: Option<u32>,
    #[serde(default)]
    retries: Option<u32>,
    #[serde(default)]
    timeout_ms: Option<Spanned<u64>>,
    /// Endpoints the user knows serve the same model (a fleet, a moved server): answers cached or
    /// stored under this name are shared between them, whatever their URLs.
    #[serde(default)]
    cache_namespace: Option<Spanned<String>>,
}

/// The keys a server backend takes besides its own.
pub fn fields() -> &'static [&'static str] {
    fields_of::<ServerKeys>()
}

/// The server keys of a `[[models]]` entry (taken out of the entry), checked and set.
pub fn take(cx: &Ctx, e: &mut Entry, model: &str, g: &mut GenSettings) -> Result<()> {
    let backend = g.key.backend.clone();
    let span: Range<usize> = e.span.clone();
    let k: ServerKeys = e.part(cx)?;
    let mut base_urls: Vec<String> = Vec::new();
    if let Some(u) = &k.base_url {
        base_urls.push(u.get_ref().clone());
    }
    if let Some(us) = &k.base_urls {
        if k.base_url.is_some() {
            return cx.err(
                us.span(),
                "models.base_urls",
                format!("model `{model}`: give `base_url` or `base_urls`, not both"),
            );
        }
        if us.get_ref().is_empty() {
            return cx.err(us.span(), "models.base_urls", format!("model `{model}`: the list is empty"));
        }
        base_urls.extend(us.get_ref().iter().cloned());
    }
    let url_span = k.base_url.as_ref().map(|s| s.span()).or(k.base_urls.as_ref().map(|s| s.span()));
    for u in &base_urls {
        if !(u.starts_with("http://") || u.starts_with("https://")) {
            return cx.err(
                url_span.clone().unwrap_or(span.clone()),
                "models.base_url",
                format!("model `{model}`: `{}` is not an http:// or https:// URL", doc2ci_llm::redact_url(u)),
            );
        }
    }
    if base_urls.is_empty() {
        return cx.err(
            span,
            "models.base_url",
            format!("model `{model}`: the {backend} backend needs `base_url` (or `base_urls` for a pool)"),
        );
    }
    let timeout_ms = k.timeout_ms.as_ref().map_or(120_000, |t| *t.get_ref());
    if let Some(t) = &k.timeout_ms {
        if timeout_ms == 0 {
            return cx.err(t.span(), "models.timeout_ms", format!("model `{model}`: at least 1"));
        }
    }
    let params = match &k.params {
        Some(t) => match serde_json::to_value(t.get_ref())? {
            serde_json::Value::Object(o) => o,
            _ => unreachable!("a TOML table is a JSON object"),
        },
        None => serde_json::Map::new(),
    };
    g.key.endpoint = Some(match &k.cache_namespace {
        Some(n) if n.get_ref().trim().is_empty() => {
            return cx.err(n.span(), "models.cache_namespace", format!("model `{model}`: an empty namespace"))
        }
        Some(n) => format!("namespace:{}", n.get_ref()),
        None => endpoint_identity(&base_urls),
    });
    g.base_urls = base_urls;
    g.key.params = params;
    (g.rpm, g.tpm, g.retries, g.timeout_ms) = (k.rpm, k.tpm, k.retries.unwrap_or(5), timeout_ms);
    Ok(())
}

/// The endpoints as a cache knows them: each URL without credentials, fragment or trailing `/`,
/// scheme and host in lower case, the default port dropped; sorted, so a pool's order does not
/// matter.
pub fn endpoint_identity(urls: &[String]) -> String {
    let mut out: Vec<String> = urls
        .iter()
        .map(|u| match url::Url::parse(u) {
            Ok(mut p) => {
                let _ = p.set_username("");
                let _ = p.set_password(None);
                p.set_fragment(None);
                let path = p.path().trim_end_matches('/').to_string();
                p.set_path(&path);
                p.to_string().trim_end_matches('/').to_string()
            }
            Err(_) => u.trim_end_matches('/').to_string(),
        })
        .collect();
    out.sort();
    out.dedup();
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::endpoint_identity;

    #[test]
    fn endpoints_are_known_without_credentials_or_spelling() {
        let a = endpoint_identity(&["http://user:secret@LocalHost:80/v1/".into()]);
        assert_eq!(a, "http://localhost/v1");
        assert!(!a.contains("secret"));
        assert_eq!(
            endpoint_identity(&["http://b:8001/v1".into(), "http://a:8000/v1".into()]),
            endpoint_identity(&["http://a:8000/v1#x".into(), "http://b:8001/v1".into()])
        );
        assert_ne!(endpoint_identity(&["http://a:8000/v1".into()]), endpoint_identity(&["http://a:8001/v1".into()]));
    }
}
