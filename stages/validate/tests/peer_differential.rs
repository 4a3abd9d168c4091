//! Differential proof against the peer (check-jsonschema + ruamel.yaml) on the study's real
//! data: the 7,908 generated GitHub Actions workflows and the 1,318 references.
//!
//! The peer's verdicts come from `peers/validity.py`, run here when python3 has
//! check-jsonschema and ruamel.yaml; otherwise from `peer_validity.tsv.gz`, its output
//! committed beside this file. Every disagreement must be listed, with its reason, in
//! `stages/validate/DISAGREEMENTS.md`, and every listed one must still occur.
//!
//! A live peer run also checks doc2ci-yaml's `canon_json` (the score stage's canonical
//! text) byte for byte, through the sha256 of Python's `json.dumps` of ruamel's safe load.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use doc2ci_validate::{Service, Validator, Validity};
use rayon::prelude::*;

const MODELS: [&str; 6] = ["codegemma-7b", "codellama-7b", "gemma3-12b", "gpt-4.1", "gpt-4o", "llama3.1-8b"];

fn manifest_dir() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

fn data_dir() -> PathBuf {
    let p = manifest_dir().join("../../../shared/data/llm4ci");
    assert!(p.exists(), "real data missing: {} (tests read ../shared beside the clone)", p.display());
    p
}

fn assets_dir() -> PathBuf {
    match std::env::var_os("DOC2CI_ASSETS").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/doc2ci/assets"),
    }
}

fn schema(service: Service) -> Vec<u8> {
    let path = assets_dir().join("schemas").join(format!("{}.json", service.name()));
    fs::read(&path).unwrap_or_else(|e| panic!("schema {} is missing ({e}): run `doc2ci setup`", path.display()))
}

struct Row {
    source: String,
    id: String,
    text: String,
}

fn read_csv(path: &Path, column: &str, source: &str) -> Vec<Row> {
    let file = fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rdr = csv::Reader::from_reader(flate2::read::GzDecoder::new(file));
    let headers = rdr.headers().unwrap().clone();
    let col = headers.iter().position(|h| h == column).unwrap();
    let id = headers.iter().position(|h| h == "ID").unwrap();
    rdr.records()
        .map(|r| {
            let r = r.unwrap();
            Row { source: source.into(), id: r[id].to_string(), text: r[col].to_string() }
        })
        .collect()
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Verdict {
    parse_ok: bool,
    schema_ok: bool,
    /// sha256 of the canonical JSON, `-` (load fails) or `!` (dump fails); live runs only.
    canon: Option<String>,
}

fn our_canon(text: &str) -> String {
    use sha2::{Digest, Sha256};
    match doc2ci_yaml::load(text, &doc2ci_yaml::Limits::default()) {
        Err(_) => "-".into(),
        Ok(v) => match doc2ci_yaml::canon_json(&v) {
            None => "!".into(),
            Some(c) => Sha256::digest(c.as_bytes()).iter().map(|b| format!("{b:02x}")).collect(),
        },
    }
}

/// Runs the peer script if python3 has its packages; None when it does not.
fn run_peer(out: &Path) -> Option<String> {
    let probe = Command::new("python3").args(["-c", "import check_jsonschema, ruamel.yaml, jsonschema"]).output();
    if !matches!(probe, Ok(ref o) if o.status.success()) {
        return None;
    }
    let status = Command::new("python3")
        .current_dir(manifest_dir().join("../.."))
        .args(["-m", "peers.validity"])
        .arg(out)
        .arg(data_dir())
        .status()
        .expect("python3 runs");
    assert!(status.success(), "the peer script failed");
    Some(fs::read_to_string(out).unwrap())
}

fn committed_peer() -> String {
    let path = manifest_dir().join("tests/peer_validity.tsv.gz");
    let mut s = String::new();
    flate2::read::GzDecoder::new(fs::File::open(&path).unwrap()).read_to_string(&mut s).unwrap();
    s
}

fn parse_peer(tsv: &str) -> BTreeMap<(String, String), Verdict> {
    tsv.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let verdict =
                Verdict { parse_ok: f[2] == "1", schema_ok: f[3] == "1", canon: f.get(6).map(|c| c.to_string()) };
            ((f[0].to_string(), f[1].to_string()), verdict)
        })
        .collect()
}

/// `(source, id, field)` triples listed in DISAGREEMENTS.md's table rows
/// (`| source | id | field | … |`).
fn listed_disagreements() -> BTreeSet<(String, String, String)> {
    let text = fs::read_to_string(manifest_dir().join("DISAGREEMENTS.md")).expect("DISAGREEMENTS.md exists");
    text.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim().strip_prefix('|')?.split('|').map(str::trim).collect();
            (cells.len() >= 4 && matches!(cells[2], "parse_ok" | "schema_ok" | "canon"))
                .then(|| (cells[0].to_string(), cells[1].to_string(), cells[2].to_string()))
        })
        .collect()
}

#[test]
fn validity_agrees_with_check_jsonschema_on_real_data() {
    let dir = data_dir();
    let mut rows = Vec::new();
    for m in MODELS {
        rows.extend(read_csv(&dir.join(format!("GitHubActions_{m}_output.csv.gz")), "LLM_YML_Output", m));
    }
    let n_outputs = rows.len();
    rows.extend(read_csv(&dir.join("GitHubActions_Docs.csv.gz"), "Code", "reference"));
    assert_eq!(n_outputs, 7908);
    assert_eq!(rows.len(), 7908 + 1318);

    let validator = Validator::new([(
        "github-actions".parse::<Service>().unwrap(),
        &schema("github-actions".parse::<Service>().unwrap())[..],
    )])
    .unwrap();
    let start = Instant::now();
    let ours: Vec<Validity> = rows
        .par_iter()
        .map(|r| validator.validate("github-actions".parse::<Service>().unwrap(), &r.text).unwrap())
        .collect();
    println!("doc2ci validated {} texts in {:?}", rows.len(), start.elapsed());

    let tmp = std::env::temp_dir().join(format!("doc2ci-validity-peer-{}.tsv", std::process::id()));
    let start = Instant::now();
    let (peer_tsv, from) = match run_peer(&tmp) {
        Some(t) => (t, "ran peers/validity.py"),
        None => {
            assert!(
                std::env::var_os("DOC2CI_REQUIRE_PEERS").is_none(),
                "DOC2CI_REQUIRE_PEERS is set and the peer is missing (run scripts/deps.sh test)"
            );
            (committed_peer(), "python3 lacks check-jsonschema/ruamel.yaml: using the committed peer_validity.tsv.gz")
        }
    };
    let _ = fs::remove_file(&tmp);
    println!("peer: {from} ({:?})", start.elapsed());
    if std::env::var_os("DOC2CI_WRITE_PEER").is_some() {
        let out = fs::File::create(manifest_dir().join("tests/peer_validity.tsv.gz")).unwrap();
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::best());
        for l in peer_tsv.lines() {
            let f: Vec<&str> = l.split('\t').collect();
            writeln!(gz, "{}\t{}\t{}\t{}", f[0], f[1], f[2], f[3]).unwrap();
        }
        gz.finish().unwrap();
    }
    let peer = parse_peer(&peer_tsv);
    assert_eq!(peer.len(), rows.len(), "the peer judged every text once");

    let mut found = BTreeSet::new();
    let mut report = String::new();
    let mut per_source: BTreeMap<&str, [usize; 5]> = BTreeMap::new();
    let live = peer.values().all(|p| p.canon.is_some());
    let canons: Vec<Option<String>> = rows.par_iter().map(|r| live.then(|| our_canon(&r.text))).collect();
    let mut canon_agree = 0;
    for ((row, v), canon) in rows.iter().zip(&ours).zip(&canons) {
        let p = &peer[&(row.source.clone(), row.id.clone())];
        if let (Some(ours), Some(theirs)) = (canon, &p.canon) {
            if ours == theirs {
                canon_agree += 1;
            } else {
                found.insert((row.source.clone(), row.id.clone(), "canon".to_string()));
                report.push_str(&format!(
                    "| {} | {} | canon | ours {ours}, peer {theirs} |\n  text: {:?}\n",
                    row.source,
                    row.id,
                    row.text.chars().take(300).collect::<String>()
                ));
            }
        }
        let s = per_source.entry(row.source.as_str()).or_default();
        s[0] += 1;
        s[1] += usize::from(v.parse_ok);
        s[2] += usize::from(v.schema_ok);
        s[3] += usize::from(v.fragment);
        s[4] += usize::from(v.parse_ok == p.parse_ok && v.schema_ok == p.schema_ok);
        for (field, a, b) in [("parse_ok", v.parse_ok, p.parse_ok), ("schema_ok", v.schema_ok, p.schema_ok)] {
            if a != b {
                found.insert((row.source.clone(), row.id.clone(), field.to_string()));
                let first = v.errors.first().map(String::as_str).unwrap_or("");
                report.push_str(&format!(
                    "| {} | {} | {field} | ours {a}, peer {b} | {first} |\n  text: {:?}\n",
                    row.source,
                    row.id,
                    row.text.chars().take(300).collect::<String>()
                ));
            }
        }
    }
    println!("source        texts  parse_ok  schema_ok  fragment  agree");
    for (src, s) in &per_source {
        println!("{src:<12} {:>6} {:>9} {:>10} {:>9} {:>6}", s[0], s[1], s[2], s[3], s[4]);
    }
    let refs = per_source["reference"];
    println!(
        "references: {} of {} are fragments ({:.1}%); {} parse as a mapping, {} pass the schema",
        refs[3],
        refs[0],
        100.0 * refs[3] as f64 / refs[0] as f64,
        refs[1],
        refs[2]
    );
    let outputs_agree: usize = per_source.iter().filter(|(k, _)| **k != "reference").map(|(_, s)| s[4]).sum();
    println!("outputs: {outputs_agree} of {n_outputs} agree with the peer on both parse_ok and schema_ok");
    if live {
        println!("canon_json: {canon_agree} of {} texts byte-identical to Python's json.dumps", rows.len());
    }

    let mut listed = listed_disagreements();
    if !live {
        listed.retain(|(_, _, field)| field != "canon");
    }
    let unlisted: Vec<_> = found.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&found).collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "disagreements not listed in DISAGREEMENTS.md: {unlisted:?}\nlisted but no longer found: {stale:?}\n{report}"
    );
}
