//! Issue 45's time split end to end: pairs dated by what a crawl can know (a stated date, the
//! sitemap, a re-crawl that finds an example new), and a model's scores compared either side of
//! its knowledge cutoff in `stats` and the report.

use crate::common::*;
use crate::crawl::rows;
use std::path::Path;

fn page(title: &str, head: &str, examples: &[&str]) -> String {
    let body: String = examples
        .iter()
        .enumerate()
        .map(|(i, job)| {
            format!(
                "<h2>{title} example {i}</h2><p>The workflow runs {job} on every push.</p>\
                 <pre><code>on: push\njobs:\n  {job}:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make {job}\n</code></pre>"
            )
        })
        .collect();
    format!("<!DOCTYPE html><html><head><title>{title}</title>{head}</head><body><main><h1>{title}</h1>{body}</main></body></html>")
}

fn site(dir: &Path, b_examples: &[&str]) {
    let docs = dir.join("site/docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("index.html"),
        "<html><body><main><a href=\"a.html\">A</a> <a href=\"b.html\">B</a></main></body></html>",
    )
    .unwrap();
    std::fs::write(docs.join("a.html"), page("Alpha", "", &["build"])).unwrap();
    let stated = "<meta property=\"article:modified_time\" content=\"2022-03-04T10:00:00Z\">";
    std::fs::write(docs.join("b.html"), page("Beta", stated, b_examples)).unwrap();
    // The site's own sitemap names its real origin; a served copy is dated all the same.
    std::fs::write(
        dir.join("site/sitemap.xml"),
        "<?xml version=\"1.0\"?><urlset><url><loc>https://docs.example.com/docs/a.html</loc><lastmod>2021-05-06T08:00:00+00:00</lastmod></url></urlset>",
    )
    .unwrap();
}

/// The first crawl dates each example by its page (the sitemap's lastmod for one page, the date the
/// other states); a second crawl after a page gained an example dates that one after the first
/// crawl and keeps the others' dates.
#[test]
fn a_recrawl_dates_what_it_finds_new() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    site(d, &["test"]);
    let cfg = d.join("pipeline.toml");
    std::fs::write(
        &cfg,
        "[study]\nwarehouse = \"wh\"\nthreads = 2\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
         [[sources]]\nname = \"docs\"\nkind = \"crawl\"\nservice = \"github-actions\"\nprofile = \"mini\"\nserve = \"site\"\nbackend = \"http\"\n\n\
         [profiles.mini]\nstart_urls = [\"/docs/index.html\"]\nallowed_prefixes = [\"/docs/\"]\ncontent_root = \"main\"\nyaml_blocks = [\"pre\"]\n\n\
         [stages.crawl]\nrate_limit = 0\n[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n",
    )
    .unwrap();
    run_ok(&["run", "-c", cfg.to_str().unwrap()]);
    let wh = d.join("wh");
    let dated = |wh: &Path| -> Vec<(String, String, String, Option<String>)> {
        rows(wh, "pairs", "title, published, published_source, not_before", "title")
            .into_iter()
            .map(|r| {
                (
                    r["title"].as_str().unwrap().to_string(),
                    r["published"].as_str().unwrap_or("").to_string(),
                    r["published_source"].as_str().unwrap_or("").to_string(),
                    r["not_before"].as_str().map(str::to_string),
                )
            })
            .collect()
    };
    let first = dated(&wh);
    assert_eq!(
        first,
        [
            ("Alpha - Alpha example 0".to_string(), "2021-05-06".to_string(), "sitemap".to_string(), None),
            ("Beta - Beta example 0".into(), "2022-03-04".into(), "stated".into(), None),
        ],
        "{first:?}"
    );
    let pages = rows(&wh, "pages", "url, sitemap_lastmod, changed_after, fetched_at", "seq");
    assert!(pages.iter().all(|p| p["changed_after"].is_null()), "a first crawl: {pages:?}");
    let crawled =
        pages.iter().find(|p| p["url"] == "/docs/b.html").unwrap()["fetched_at"].as_str().unwrap().to_string();

    // The page gains an example; the served folder changed, so the site is crawled again.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    site(d, &["test", "deploy"]);
    run_ok(&["run", "-c", cfg.to_str().unwrap()]);
    let second = dated(&wh);
    let today = &crawled[..10];
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(second[0], first[0], "an unchanged page keeps its dates");
    assert_eq!(second[1], first[1], "an example seen before keeps its date");
    // The new example: after the first crawl, so the page's stated date (before it) is not its date.
    assert_eq!(
        second[2],
        ("Beta - Beta example 1".into(), today.to_string(), "first_crawl".into(), Some(today.to_string()))
    );
    let pages = rows(&wh, "pages", "url, changed_after", "seq");
    let b = pages.iter().find(|p| p["url"] == "/docs/b.html").unwrap();
    assert_eq!(b["changed_after"].as_str(), Some(crawled.as_str()), "{pages:?}");
    let a = pages.iter().find(|p| p["url"] == "/docs/a.html").unwrap();
    assert!(a["changed_after"].is_null(), "{pages:?}");
}

/// A model that reproduces every reference published before its cutoff and misses every one
/// after: the time split says so (Cliff's δ of after vs before = −1, Holm p tiny), the subset
/// means are 1 and 0, and the report tabulates it.
#[test]
fn the_time_split_compares_pairs_either_side_of_the_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut pairs = Vec::new();
    let mut outs = Vec::new();
    for i in 0..24 {
        let old = i % 2 == 0;
        let reference = format!(
            "on: push\njobs:\n  job{i}:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: make target{i}\n"
        );
        let published = if old { "2022-06-01" } else { "2025-02-01" };
        pairs.push(serde_json::json!({"id": format!("p{i}"), "url": format!("https://docs.example.com/{i}"),
            "title": format!("Pair {i}"), "description": format!("Build target {i} on push."),
            "reference": reference, "published": published}));
        let output = if old { reference.clone() } else { "name: other\non: workflow_dispatch\njobs: {}\n".to_string() };
        outs.push(serde_json::json!({"id": format!("p{i}"), "output": output}));
    }
    let cfg = jsonl_study(
        d,
        ("github-actions", "GitHub Actions"),
        "m",
        (&pairs, &outs),
        "knowledge_cutoff = \"2024-01-01\"\n\n[stages.lint]\nenabled = false\n",
    );
    run_ok(&["run", "-c", cfg.to_str().unwrap()]);
    let wh = d.join("wh");
    let sources = duck(&wh, "SELECT DISTINCT published_source FROM read_parquet('{wh}/pairs/*/*.parquet')");
    assert_eq!(sources, [[serde_json::json!("source")]]);
    let split = duck(
        &wh,
        "SELECT effect, p_holm, b, c, ci_high FROM read_parquet('{wh}/stats/*.parquet') WHERE test = 'time_split' AND service = 'all' AND metric = 'cosine'",
    );
    assert_eq!(split.len(), 1, "{split:?}");
    let r = &split[0];
    assert_eq!(r[0].as_f64(), Some(-1.0), "{r:?}");
    assert!(r[1].as_f64().unwrap() < 1e-3, "{r:?}");
    assert_eq!((r[2].as_u64(), r[3].as_u64()), (Some(12), Some(12)));
    assert!(r[4].as_f64().unwrap() < 0.0, "the CI excludes 0: {r:?}");
    let means = duck(
        &wh,
        "SELECT group_b, effect FROM read_parquet('{wh}/stats/*.parquet') WHERE test = 'subset_mean' AND service = 'all' AND metric = 'exact' ORDER BY group_b",
    );
    assert_eq!(
        means,
        [
            [serde_json::json!("after 2024-01-01"), serde_json::json!(0.0)],
            [serde_json::json!("before 2024-01-01"), serde_json::json!(1.0)]
        ]
    );
    let table = std::fs::read_to_string(wh.join("report/tables/time_split.csv")).unwrap();
    assert!(table.lines().any(|l| l.starts_with("m,") && l.contains(",cosine,2024-01-01,12 / 12 (0),")), "{table}");
    let report = std::fs::read_to_string(wh.join("report/report.md")).unwrap();
    assert!(report.contains("Time split"), "the report shows the split");
}
