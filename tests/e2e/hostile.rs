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
