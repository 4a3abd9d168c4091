//! Which URLs a crawl may request, in one canonical spelling, and how page bytes become text.

use url::Url;

use crate::Robots;

/// Fragment dropped (one document), query dropped unless the profile keeps it.
pub fn normalize(u: &Url, keep_query: bool) -> Url {
    let mut u = u.clone();
    u.set_fragment(None);
    if !keep_query {
        u.set_query(None);
    }
    u
}

/// The boundary of one crawl: the origin it started on, the profile's prefixes, robots.txt.
#[derive(Debug, Clone)]
pub struct Scope {
    pub origin: Url,
    pub prefixes: Vec<String>,
    /// Paths containing any of these are out of scope even under an allowed prefix.
    pub exclude: Vec<String>,
    pub robots: Robots,
}

/// Why a URL is out of scope, or `None` when the crawl may request it.
pub fn in_scope(u: &Url, scope: &Scope) -> Option<&'static str> {
    if !matches!(u.scheme(), "http" | "https") {
        return Some("not http");
    }
    if u.scheme() != scope.origin.scheme()
        || u.host_str() != scope.origin.host_str()
        || u.port_or_known_default() != scope.origin.port_or_known_default()
    {
        return Some("off-site");
    }
    let path = u.path();
    if !scope.prefixes.iter().any(|p| path.starts_with(p.as_str())) {
        return Some("outside the allowed prefixes");
    }
    if scope.exclude.iter().any(|x| path.contains(x.as_str())) {
        return Some("excluded by the profile");
    }
    if !scope.robots.allows(path) {
        return Some("disallowed by robots.txt");
    }
    None
}

/// Page bytes → text: the `Content-Type` charset, else a `<meta charset>` in the first KiB,
/// else UTF-8 (invalid bytes replaced). Returns the text and the encoding used.
pub fn decode_page(bytes: &[u8], content_type: Option<&str>) -> (String, &'static str) {
    let from_header = content_type.and_then(|ct| {
        ct.split(';').skip(1).find_map(|p| {
            let (k, v) = p.split_once('=')?;
            (k.trim().eq_ignore_ascii_case("charset")).then(|| v.trim().trim_matches('"').to_string())
        })
    });
    let label = from_header.or_else(|| meta_charset(&bytes[..bytes.len().min(1024)]));
    let enc = label.and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes())).unwrap_or(encoding_rs::UTF_8);
    // A BOM wins over both, as in browsers.
    let (text, used, _) = enc.decode(bytes);
    (text.into_owned(), used.name())
}

fn meta_charset(head: &[u8]) -> Option<String> {
    let lower: Vec<u8> = head.iter().map(|b| b.to_ascii_lowercase()).collect();
    let s = String::from_utf8_lossy(&lower);
    let at = s.find("charset=")?;
    let rest = s[at + 8..].trim_start_matches(['"', '\'']);
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_and_scope() {
        let u = Url::parse("http://h.test:8000/gha/caching.html?ref=sidebar#x").unwrap();
        assert_eq!(normalize(&u, false).as_str(), "http://h.test:8000/gha/caching.html");
        assert_eq!(normalize(&u, true).as_str(), "http://h.test:8000/gha/caching.html?ref=sidebar");
        let scope = Scope {
            exclude: vec![],
            origin: Url::parse("http://h.test:8000/").unwrap(),
            prefixes: vec!["/gha/".into()],
            robots: Robots::parse("User-agent: *\nDisallow: /gha/drafts/\n"),
        };
        assert_eq!(in_scope(&u, &scope), None);
        for (s, why) in [
            ("http://h.test:8080/gha/a.html", "off-site"),
            ("https://h.test:8000/gha/a.html", "off-site"),
            ("http://off-site.example.com/gha/a.html", "off-site"),
            ("ftp://h.test:8000/gha/a.html", "not http"),
            ("mailto:a@example.com", "not http"),
            ("http://h.test:8000/other/a.html", "outside the allowed prefixes"),
            ("http://h.test:8000/gha/drafts/a.html", "disallowed by robots.txt"),
        ] {
            assert_eq!(in_scope(&Url::parse(s).unwrap(), &scope), Some(why), "{s}");
        }
    }

    #[test]
    fn decoding_honours_header_then_meta() {
        let latin1 = b"<meta charset=\"iso-8859-1\"><p>D\xe9ploiement</p>";
        assert!(decode_page(latin1, Some("text/html")).0.contains("Déploiement"));
        let utf8 = "<p>Déploiement</p>".as_bytes();
        assert!(decode_page(utf8, None).0.contains("Déploiement"));
        assert!(decode_page(b"<p>D\xe9p</p>", Some("text/html; charset=ISO-8859-1")).0.contains("Dép"));
    }
}
