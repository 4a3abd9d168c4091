//! stats + report + open coding end to end on a small slice of the real llm4ci data (30 pairs,
//! three models): the stats table reads back in DuckDB and agrees with scipy/statsmodels recomputed
//! from the warehouse's own scores, the HTML report renders in headless Chromium with one mark per
//! model in each scatter figure, and a filled coding sheet round-trips with sklearn's κ.

use crate::common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

const PAIRS: usize = 30;
/// (name, size_b, code, proprietary)
const STUDY_MODELS: &[(&str, &str, &str, &str)] =
    &[("gpt-4o", "", "false", "true"), ("llama3.1-8b", "8", "false", "false"), ("codellama-7b", "7", "true", "false")];
/// (fine-tuned, base): declared so, to exercise RQ6's fine-tuning contrast on real outputs.
const FINE_TUNED: (&str, &str) = ("codellama-7b", "llama3.1-8b");

fn write_study(dir: &Path) -> PathBuf {
    slice_rows(&shared().join("GitHubActions_Docs.csv.gz"), &dir.join("docs.csv"), 0..PAIRS);
    let mut s = String::from("[study]\nwarehouse = \"wh\"\nthreads = 2\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n[[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"llm4ci\"\npath = \"docs.csv\"\nservice = \"github-actions\"\n");
    for (m, size, code, prop) in STUDY_MODELS {
        slice_rows(&output_file(m), &dir.join(format!("{m}.csv")), 0..PAIRS);
        s.push_str(&format!("\n[[models]]\nname = \"{m}\"\nbackend = \"import\"\npath = \"{m}.csv\"\nfamily = \"x\"\ncode = {code}\nproprietary = {prop}\n"));
        if !size.is_empty() {
            s.push_str(&format!("size_b = {size}\n"));
        }
        if *m == FINE_TUNED.0 {
            s.push_str(&format!("base_model = \"{}\"\n", FINE_TUNED.1));
        }
    }
    s.push_str("\n[stages.stats]\nbootstrap_resamples = 500\n");
    let p = dir.join("pipeline.toml");
    std::fs::write(&p, s).unwrap();
    p
}

/// The JSON a check of the `peers` package prints (`python3 -m peers.<module>`).
fn python(module: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new("python3")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-m", &format!("peers.{module}")])
        .args(args)
        .output()
        .expect("python3");
    assert!(out.status.success(), "peers.{module} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("peers.{module}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// `page` (with its URL fragment) as headless Chromium renders it, after its scripts ran; fails on
/// any console error.
pub(crate) fn render(page: &Path, fragment: &str) -> String {
    let chrome = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"])
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}#{fragment}", page.display()))
        .output()
        .expect("chromium is installed (scripts/deps.sh)");
    let log = String::from_utf8_lossy(&chrome.stderr);
    assert!(chrome.status.success(), "chromium failed: {log}");
    assert!(!log.contains("CONSOLE") && !log.contains("Uncaught"), "console errors in {fragment}: {log}");
    String::from_utf8_lossy(&chrome.stdout).into_owned()
}

/// Text as it appears in a dumped DOM.
fn html_text(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('\u{a0}', "&nbsp;")
}

pub(crate) fn matches_shown(dom: &str) -> u64 {
    let n = dom.split("id=\"count\" data-n=\"").nth(1).expect("the match count").split('"').next().unwrap();
    n.parse().unwrap()
}

/// The sample browser, in headless Chromium, against the warehouse as DuckDB reads it: the
/// filters count what SQL counts, and one pair shows its texts, every model and its schema errors.
fn sample_browser(wh: &Path) {
    let page = wh.join("report/samples.html");
    let t = |table: &str| format!("read_parquet('{{wh}}/{table}/*/*/*.parquet', hive_partitioning = true)");
    let (gens, vals, scores) = (t("generations"), t("validations"), t("scores"));
    let valid = duck(
        wh,
        &format!("SELECT count(*) FROM {vals} v JOIN {gens} g USING (service, model, pair_id, sample, round) WHERE v.model = 'gpt-4o' AND v.round = 0 AND g.error IS NULL AND v.schema_ok"),
    )[0][0]
        .as_u64()
        .unwrap();
    let dom = render(&page, "model=gpt-4o&valid=valid");
    assert_eq!(matches_shown(&dom), valid, "schema-valid gpt-4o outputs");
    assert_eq!(count(&dom, "data-pair=\""), valid.min(100) as usize, "listed rows");
    let ranged = duck(
        wh,
        &format!("SELECT count(*) FROM {scores} WHERE model = 'llama3.1-8b' AND round = 0 AND round(cosine, 4) BETWEEN 0.5 AND 0.9"),
    )[0][0]
        .as_u64()
        .unwrap();
    let dom = render(&page, "model=llama3.1-8b&metric=cosine&min=0.5&max=0.9");
    assert!(ranged > 0, "a metric range with outputs in it");
    assert_eq!(matches_shown(&dom), ranged, "cosine in [0.5, 0.9]");

    // One pair whose gpt-4o output breaks the schema: its texts, every model, the error with its path.
    let row = &duck(
        wh,
        &format!("SELECT v.pair_id, v.errors[1], p.description, p.reference FROM {vals} v JOIN read_parquet('{{wh}}/pairs/*/*.parquet', hive_partitioning = true) p USING (service, pair_id) WHERE v.model = 'gpt-4o' AND v.parse_ok AND NOT v.schema_ok ORDER BY v.pair_id LIMIT 1"),
    )[0];
    let (id, error) = (row[0].as_str().unwrap(), row[1].as_str().unwrap());
    let dom = render(&page, &format!("pair=github-actions/{id}"));
    assert!(dom.contains("id=\"pair-title\""), "the pair opens: {dom}");
    for (m, ..) in STUDY_MODELS {
        assert!(dom.contains(&format!("data-model=\"{m}\"")), "{m}'s output is shown");
    }
    assert!(dom.contains(&html_text(error)), "gpt-4o's schema error `{error}` is shown");
    let first = |s: &str| s.lines().find(|l| !l.trim().is_empty()).unwrap().trim().to_string();
    assert!(dom.contains(&html_text(&first(row[2].as_str().unwrap()))), "the description");
    assert!(dom.contains(&html_text(&first(row[3].as_str().unwrap()))), "the reference");
    assert!(dom.contains("class=\"del\"") || dom.contains("class=\"add\""), "a diff against the reference");
    assert!(render(&page, "pair=github-actions/no-such-pair").contains("id=\"missing\""));
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn stats_report_and_coding_on_a_real_slice() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_study(dir.path());
    let c = cfg.to_str().unwrap();
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("stats") && out.contains("report"), "{out}");
    let wh = dir.path().join("wh");

    // The stats table, read by DuckDB, agrees with scipy/statsmodels recomputed from the warehouse.
    let check = python("stats_check", &[wh.to_str().unwrap()]);
    assert!(check["rows"].as_u64().unwrap() > 50, "{check}");
    for (k, v) in check["compared"].as_object().unwrap() {
        assert!(v.as_u64().unwrap() > 0, "no {k} rows compared: {check}");
    }
    assert_eq!(check["mismatches"].as_array().unwrap().len(), 0, "{check}");

    // The report: files present, HTML renders in headless Chromium without console errors.
    let report = wh.join("report");
    for f in [
        "index.html",
        "report.md",
        "tables/table1.csv",
        "tables/table2.csv",
        "tables/rq2_scale.csv",
        "tables/rq3_services.csv",
        "tables/rq6_repair.csv",
        "tables/fragments.csv",
        "tables/stats.csv",
        "figures/fig3_similarity_validity.svg",
        "figures/fig5_repair_plane.svg",
        "figures/fig4_tiers.svg",
        "figures/box_cosine.svg",
    ] {
        let p = report.join(f);
        // One service and no repair rounds: the RQ3 table holds just its header.
        let min = if f.starts_with("tables/") && f != "tables/stats.csv" { 20 } else { 100 };
        assert!(p.exists() && std::fs::metadata(&p).unwrap().len() > min, "{} missing or empty", p.display());
    }
    let table1 = std::fs::read_to_string(report.join("tables/table1.csv")).unwrap();
    assert_eq!(table1.lines().count(), 1 + STUDY_MODELS.len(), "{table1}");
    assert!(table1.contains("Proprietary") && table1.contains("Small"), "{table1}");
    for fig in ["fig3_similarity_validity", "fig5_repair_plane"] {
        let svg = std::fs::read_to_string(report.join(format!("figures/{fig}.svg"))).unwrap();
        assert_eq!(count(&svg, "<circle"), STUDY_MODELS.len(), "{fig}: one mark per model");
        for (m, ..) in STUDY_MODELS {
            assert!(svg.contains(m), "{fig} labels {m}");
        }
    }
    // RQ6's fine-tuning contrast: base vs fine-tuned, paired, in the table and as an arrow in Fig. 5
    // (stats_check.py above already recomputed these rows' Wilcoxon and McNemar with scipy/statsmodels).
    let rq6 = std::fs::read_to_string(report.join("tables/rq6_repair.csv")).unwrap();
    let ft_rows: Vec<&str> = rq6.lines().filter(|l| l.contains("fine-tuned vs base")).collect();
    assert!(
        ft_rows.iter().any(|l| l.starts_with("mcnemar")) && ft_rows.iter().any(|l| l.starts_with("wilcoxon")),
        "{rq6}"
    );
    assert!(ft_rows.iter().all(|l| l.contains(FINE_TUNED.0) && l.contains(FINE_TUNED.1)), "{rq6}");
    let fig = |f: &str| std::fs::read_to_string(report.join(format!("figures/{f}.svg"))).unwrap();
    assert_eq!(
        count(&fig("fig5_repair_plane"), "<polygon"),
        count(&fig("fig3_similarity_validity"), "<polygon") + 1,
        "one fine-tuning arrow head"
    );
    let boxes = std::fs::read_to_string(report.join("figures/box_cosine.svg")).unwrap();
    for (m, ..) in STUDY_MODELS {
        assert!(boxes.contains(m), "box plot labels {m}");
    }
    let html = report.join("index.html");
    let chrome = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=2000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium is installed (scripts/deps.sh)");
    let dom = String::from_utf8_lossy(&chrome.stdout);
    let log = String::from_utf8_lossy(&chrome.stderr);
    assert!(chrome.status.success(), "chromium failed: {log}");
    assert!(!log.contains("CONSOLE") && !log.contains("Uncaught"), "console errors: {log}");
    assert!(count(&dom, "<svg") >= 4, "figures in the rendered DOM");
    assert_eq!(count(&dom, "<table"), count(&std::fs::read_to_string(&html).unwrap(), "<table"));
    assert!(dom.contains("Table I.") && dom.contains("Tests run"));

    assert!(dom.contains("id=\"headline\"") && dom.contains("href=\"samples.html\""), "headline and browser link");
    sample_browser(&wh);

    // Nothing changed: nothing re-runs, including stats and report.
    let again = run_ok(&["run", "--config", c]);
    assert!(again.contains("nothing to do"), "{again}");

    // Open coding round trip.
    let sheet = dir.path().join("sheet.csv");
    let out = run_ok(&["coding", "sample", "--config", c, "--out", sheet.to_str().unwrap(), "--margin", "0.10"]);
    // 90 outputs, 95% ± 10% with the finite-population correction → 47.
    assert!(out.contains("drew 47 of 90"), "{out}");
    let (a, b) = (dir.path().join("coder1.csv"), dir.path().join("coder2.csv"));
    let verdicts = ["usable", "partial", "unusable"];
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    for (path, shift, acc) in [(&a, 0usize, &mut va), (&b, 1usize, &mut vb)] {
        let mut r = csv::Reader::from_path(&sheet).unwrap();
        let h = r.headers().unwrap().clone();
        let vcol = h.iter().position(|x| x == "verdict").unwrap();
        let ccol = h.iter().position(|x| x == "issue_codes").unwrap();
        let mut w = csv::Writer::from_path(path).unwrap();
        w.write_record(&h).unwrap();
        let mut per_model = std::collections::BTreeMap::new();
        for (i, rec) in r.records().enumerate() {
            let rec = rec.unwrap();
            *per_model.entry(rec[2].to_string()).or_insert(0) += 1;
            let mut f: Vec<String> = rec.iter().map(String::from).collect();
            // The second coder disagrees on every third row.
            let v = verdicts[(i * 7 + if i % 3 == 0 { shift } else { 0 }) % 3];
            f[vcol] = v.into();
            f[ccol] = if v == "usable" {
                String::new()
            } else {
                format!("omission/missing-step;misinterpretation/wrong-value{}", i % 2)
            };
            acc.push(v.to_string());
            w.write_record(&f).unwrap();
        }
        w.flush().unwrap();
        let (lo, hi) = (per_model.values().min().unwrap(), per_model.values().max().unwrap());
        assert!(hi - lo <= 1, "evenly across models: {per_model:?}");
    }
    let out = run_ok(&["coding", "import", "--config", c, a.to_str().unwrap(), b.to_str().unwrap()]);
    let k3 = out.split("κ (3-point) = ").nth(1).unwrap().split(',').next().unwrap().trim().parse::<f64>().unwrap();
    let kb = out
        .split("κ (usable vs not) = ")
        .nth(1)
        .unwrap()
        .split('.')
        .take(2)
        .collect::<Vec<_>>()
        .join(".")
        .parse::<f64>()
        .unwrap();
    let sk = python("kappa_check", &[&serde_json::to_string(&va).unwrap(), &serde_json::to_string(&vb).unwrap()]);
    assert!((k3 - sk["kappa3"].as_f64().unwrap()).abs() < 5e-4, "ours {k3}, sklearn {}", sk["kappa3"]);
    assert!((kb - sk["kappa_binary"].as_f64().unwrap()).abs() < 5e-4, "ours {kb}, sklearn {}", sk["kappa_binary"]);
    assert!(
        out.contains("## By service")
            && out.contains("## By tier")
            && out.contains("## By type")
            && out.contains("omission"),
        "{out}"
    );

    // Bad sheets: an unknown verdict and a row that was never drawn, each named by file:line.
    let text = std::fs::read_to_string(&a).unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, text.replacen(",usable,", ",fine,", 1)).unwrap();
    let err = run_err(&["coding", "import", "--config", c, bad.to_str().unwrap()]);
    assert!(err.contains("bad.csv:") && err.contains("verdict `fine`"), "{err}");
    std::fs::write(&bad, text.replacen("S0002,", "S9999,", 1)).unwrap();
    // Rows are ordered by stratum, not by id: the line is wherever S0002 stood (1-based).
    let line = text.lines().position(|l| l.contains("S0002,")).unwrap() + 1;
    let err = run_err(&["coding", "import", "--config", c, bad.to_str().unwrap()]);
    assert!(err.contains(&format!("bad.csv:{line}:")) && err.contains("`S9999` is not in the drawn sample"), "{err}");
}
