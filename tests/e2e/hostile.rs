//! Issue 31: what others wrote (pages, files, releases, model output) stays harmless. Each test
//! here failed on the code before its fix.

use crate::common::*;
use crate::study::render;

/// A pair imported from someone's file with a `javascript:` URL: the sample browser shows it as
/// text; only http(s) URLs are links.
#[test]
fn a_javascript_url_in_an_imported_pair_is_never_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pairs = [
        ("evil", "javascript:document.title='pwned'"),
        ("data", "data:text/html,<script>alert(1)</script>"),
        ("fine", "https://docs.example.com/actions/quickstart"),
    ];
    let lines: Vec<String> = pairs
        .iter()
        .map(|(id, url)| {
            serde_json::json!({"id": id, "url": url, "title": format!("Pair {id}"), "description": "Build on push.",
                "reference": format!("on: push\njobs:\n  {id}:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make\n")})
            .to_string()
        })
        .collect();
    std::fs::write(d.join("pairs.jsonl"), lines.join("\n") + "\n").unwrap();
    let outs: Vec<String> = pairs
        .iter()
        .map(|(id, _)| serde_json::json!({"id": id, "output": "on: push\njobs: {}\n"}).to_string())
        .collect();
    std::fs::write(d.join("outputs.jsonl"), outs.join("\n") + "\n").unwrap();
    let cfg = d.join("pipeline.toml");
    std::fs::write(
        &cfg,
        "[study]\nwarehouse = \"wh\"\nthreads = 2\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
         [[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"jsonl\"\npath = \"pairs.jsonl\"\nservice = \"github-actions\"\n\n\
         [[models]]\nname = \"m\"\nbackend = \"import\"\nformat = \"jsonl\"\npath = \"outputs.jsonl\"\nsource = \"docs\"\n\n\
         [stages.lint]\nenabled = false\n",
    )
    .unwrap();
    run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    let wh = d.join("wh");
    let page = wh.join("report/samples.html");
    for (id, url) in pairs {
        let row = duck(
            &wh,
            &format!("SELECT pair_id FROM read_parquet('{{wh}}/pairs/*/*.parquet', hive_partitioning = true) WHERE title = 'Pair {id}'"),
        );
        let pair_id = row[0][0].as_str().unwrap().to_string();
        let dom = render(&page, &format!("pair=github-actions/{pair_id}"));
        assert!(dom.contains("id=\"pair-title\""), "{id}: the pair opens");
        let shown = url.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        if url.starts_with("https://") {
            assert!(dom.contains(&format!("href=\"{url}\"")), "{id}: an http(s) URL is a link");
        } else {
            assert!(!dom.contains("href=\"javascript:") && !dom.contains("href=\"data:"), "{id}: a live link: {dom}");
            assert!(dom.contains(&format!("<span class=\"url\">{shown}</span>")), "{id}: the URL is shown as text");
        }
    }
}

/// An in-scope page whose scripts and images reach for another service on this machine's loopback
/// (a port that is not the site's): Chromium runs in a network namespace of its own whose one way
/// out connects to the crawled origin only, so the service sees no connection at all, while the
/// site's pages are crawled as before.
#[test]
fn a_crawled_page_reaches_no_other_service_of_this_machine() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    assert!(crate::crawl::has_browser(), "chromium and chromedriver are required (scripts/deps.sh installs them)");
    let dir = tempfile::tempdir().unwrap();
    let secret = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = secret.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for _ in secret.incoming() {
            h.fetch_add(1, Ordering::SeqCst);
        }
    });
    let site = dir.path().join("site");
    let copy = std::process::Command::new("cp").arg("-r").arg(crate::crawl::docsite()).arg(&site).status().unwrap();
    assert!(copy.success());
    let reach = format!(
        "<img src=\"http://127.0.0.1:{port}/img.png\"><iframe src=\"http://localhost:{port}/frame\"></iframe>\
         <script>fetch('http://127.0.0.1:{port}/fetch', {{mode: 'no-cors'}}); \
         navigator.sendBeacon('http://127.0.0.1:{port}/beacon', 'x'); new WebSocket('ws://127.0.0.1:{port}/ws');</script></body>"
    );
    for page in ["github-actions/index.html", "github-actions/caching.html"] {
        let p = site.join(page);
        let html = std::fs::read_to_string(&p).unwrap();
        assert!(html.contains("</body>"), "{page}");
        std::fs::write(&p, html.replace("</body>", &reach)).unwrap();
    }
    let cfg = crate::crawl::config(
        dir.path(),
        &["github-actions"],
        &format!("serve = \"{}\"", site.display()),
        "webdriver",
        "rate_limit = 0\ntimeout_secs = 20\n",
    );
    let out = doc2ci(&["run", "-c", cfg.to_str().unwrap()]).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("and nothing else (a network namespace)"), "{said}");
    let pairs = duck(
        &dir.path().join("wh"),
        "SELECT count(*) FROM read_parquet('{wh}/pairs_raw/**/*.parquet', hive_partitioning = true)",
    );
    assert!(pairs[0][0].as_i64().unwrap() > 5, "the site is still crawled: {pairs:?}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a page reached another service of this machine");
}
