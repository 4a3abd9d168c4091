//! The extractor against the bundled site's golden pairs (computed by `peers/docsite.py`, the
//! Python reference): a file-based crawl with the profiles of `docsite/PROFILES.md` must give
//! exactly the golden `http` pairs, page by page and in order, and the same skipped blocks.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use doc2ci_crawl::{
    decode_page, extract, in_scope, links, normalize, Profile, Robots, Scope, HIDDEN, OUTSIDE_ROOT, REMOVED_BY_RULE,
};
use url::Url;

fn site() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../../docsite")
}

fn profiles() -> BTreeMap<String, Profile> {
    let md = std::fs::read_to_string(site().join("PROFILES.md")).unwrap();
    let mut out = BTreeMap::new();
    for block in md.split("```toml\n").skip(1) {
        let body = block.split("```").next().unwrap();
        #[derive(serde::Deserialize)]
        struct F {
            profiles: BTreeMap<String, Profile>,
        }
        let f: F = toml::from_str(body).unwrap();
        out.extend(f.profiles);
    }
    out
}

/// (url path, title, description, reference, position) of the golden pairs a backend sees.
type Row = (String, String, String, String, u64);

fn golden(profile: &str, backend: &str) -> Vec<Row> {
    let g = doc2ci_testkit::golden_pairs(profile, backend);
    g.into_iter().map(|p| (p.url, p.title, p.description, p.reference, p.position)).collect()
}

/// Breadth-first over the site's files, as the reference crawl does.
fn crawl(p: &Profile) -> (Vec<Row>, Vec<String>, BTreeMap<String, usize>) {
    let compiled = p.compile().unwrap();
    let origin = Url::parse("http://docs.test/").unwrap();
    let robots = Robots::parse(&std::fs::read_to_string(site().join("robots.txt")).unwrap());
    let scope = Scope {
        origin: origin.clone(),
        prefixes: p.allowed_prefixes.clone(),
        exclude: p.exclude_paths.clone(),
        robots,
    };
    let mut queue: VecDeque<Url> =
        p.start_urls.iter().map(|s| normalize(&origin.join(s).unwrap(), p.keep_query)).collect();
    let mut seen: HashSet<Url> = queue.iter().cloned().collect();
    let (mut rows, mut pages, mut skipped) = (Vec::new(), Vec::new(), BTreeMap::new());
    while let Some(u) = queue.pop_front() {
        let file = site().join(u.path().trim_start_matches('/'));
        let Ok(bytes) = std::fs::read(&file) else { continue }; // served by the test server only
        let (html, _) = decode_page(&bytes, Some("text/html"));
        pages.push(u.path().to_string());
        let e = extract(&html, &compiled);
        assert!(e.error.is_none(), "{u}: {:?}", e.error);
        for x in e.pairs {
            rows.push((u.path().to_string(), x.title, x.description, x.reference, x.position));
        }
        for s in e.skipped {
            *skipped.entry(s.reason).or_insert(0) += 1;
        }
        for l in links(&html, &u) {
            let l = normalize(&l, p.keep_query);
            if in_scope(&l, &scope).is_none() && seen.insert(l.clone()) {
                queue.push_back(l);
            }
        }
    }
    (rows, pages, skipped)
}

#[test]
fn every_profile_extracts_the_golden_http_pairs() {
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(site().join("golden-pairs.json")).unwrap()).unwrap();
    let profiles = profiles();
    assert_eq!(profiles.len(), 5);
    let mut total = 0;
    for (name, p) in &profiles {
        let (rows, pages, skipped) = crawl(p);
        let want = golden(name, "http");
        for (a, b) in rows.iter().zip(&want) {
            assert_eq!(a, b, "profile {name}: first differing pair");
        }
        assert_eq!(rows.len(), want.len(), "profile {name}: pair count");
        let summary = &g["summary"][name];
        assert_eq!(rows.len() as u64, summary["pairs_http"].as_u64().unwrap(), "{name}");
        let want_pages: Vec<String> =
            summary["pages"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        assert_eq!(pages, want_pages, "profile {name}: pages in crawl order");
        let counts = |key: &str| -> BTreeMap<String, usize> {
            summary[key].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap() as usize)).collect()
        };
        // Blocks the walk met and skipped, and (issue 30) blocks it never reached: removed by a
        // rule, hidden, or outside the content root, which the reference counts on its own.
        let never_reached = [REMOVED_BY_RULE, HIDDEN, OUTSIDE_ROOT];
        let (removed, met): (BTreeMap<String, usize>, BTreeMap<String, usize>) =
            skipped.into_iter().partition(|(k, _)| never_reached.contains(&k.as_str()));
        assert_eq!(met, counts("skipped"), "profile {name}: skipped blocks by reason");
        assert_eq!(removed, counts("removed_http"), "profile {name}: YAML blocks never reached, by reason");
        total += rows.len();
    }
    assert_eq!(total, 49 + 48 + 46 + 41 + 6);
}

#[test]
fn removing_every_table_loses_circleci_admonitions() {
    // The profile decides: CircleCI notes live in admonition tables, so `table` would drop prose.
    let mut p = profiles()["circleci"].clone();
    let (keep, _, _) = crawl(&p);
    p.remove.push("table".into());
    let (lose, _, _) = crawl(&p);
    assert_eq!(keep.len(), lose.len());
    assert!(
        keep.iter().zip(&lose).any(|(a, b)| a.2.len() > b.2.len()),
        "some description must lose an admonition's text"
    );
}
