//! Issue 30: every key of `[stages.*]`, of a site profile, of every `[[sources]]` kind and of every
//! `[[models]]` backend, changed one at a time, re-runs exactly partitions downstream of what it
//! configures, and at least one of them. The keys come from the config types (serialised
//! defaults, `fields_of`), not from a list typed here; what is typed here is only how each key
//! is expected to behave when it is not "re-run what reads it".

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::config::{Config, StageParams};
use crate::engine::{Action, Pipeline};

/// Keys that never change a row: changing them must re-run nothing.
const OPERATIONAL: &[&str] = &[
    "study.threads",
    "study.request_cache",
    "study.request_cache_ttl_days",
    "study.remote",
    "stages.import.batch_size",
    "stages.generate.batch_size",
    "stages.generate.max_cost",
    "models.concurrency",
    "models.api_key_env",
    "models.rpm",
    "models.tpm",
    "models.retries",
    "models.timeout_ms",
    "models.price_per_1k_input",
    "models.price_per_1k_output",
    "models.max_cost",
    "models.parallel",
    "models.threads",
];

/// Keys that name, locate or choose which partitions exist rather than what is in them; a change
/// is another partition (a new name, a file whose content is the input, a stage switched off).
const SHAPE: &[&str] = &[
    "study.warehouse",
    "sources.name",
    "sources.kind",
    "sources.service",
    "sources.path",
    "sources.serve",
    "models.name",
    "models.backend",
    "models.service",
    "models.services",
    "models.path",
    "stages.validate.enabled",
    "stages.score.enabled",
    "stages.lint.enabled",
    "stages.repair.enabled",
    "stages.stats.enabled",
    "stages.report.enabled",
];

fn repo() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

fn shared(file: &str) -> String {
    let p = repo().join("../shared/data/llm4ci").join(file);
    assert!(p.exists(), "real data missing: {}", p.display());
    p.display().to_string()
}

/// One study with every kind of source and model and every stage on.
fn base() -> toml::Table {
    let profile = std::fs::read_to_string(repo().join("pipeline.toml")).unwrap();
    let gha: toml::Table =
        toml::from_str::<toml::Table>(&profile).unwrap()["profiles"]["github-actions"].as_table().unwrap().clone();
    let text = format!(
        r#"
[study]
warehouse = "wh"
threads = 1
request_cache = "off"

[[services]]
name = "github-actions"
display = "GitHub Actions"

[[sources]]
name = "site"
kind = "crawl"
service = "github-actions"
profile = "gha"
serve = "{docsite}"
backend = "http"

[[sources]]
name = "remote"
kind = "crawl"
service = "github-actions"
profile = "github-docs"
url = "https://docs.example.com"

[[sources]]
name = "file"
kind = "import"
service = "github-actions"
format = "llm4ci"
path = "{pairs}"
skip_bad_rows = false

[[models]]
name = "emb"
backend = "embedded"
max_tokens = 32
max_pairs = 3
family = "smollm"
size_b = 0.135
code = false
proprietary = false

[[models]]
name = "oa"
backend = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"
price_per_1k_input = 0.001
price_per_1k_output = 0.002
api_key_env = "KEY"
few_shot = 1
temperature = 0.7

[[models]]
name = "ol"
backend = "ollama"
model = "m"
base_urls = ["http://127.0.0.1:9"]
num_ctx = 2048

[[models]]
name = "ll"
backend = "llama-cpp"
model = "{weights}"
ctx_size = 2048
max_pairs = 2

[[models]]
name = "imp"
backend = "import"
path = "{outputs}"
source = "file"
base_model = "oa"

[stages.repair]
enabled = true
rounds = 1
feedback = ["schema", "lint"]
"#,
        docsite = repo().join("docsite").display(),
        pairs = shared("GitHubActions_Docs.csv.gz"),
        outputs = shared("GitHubActions_gpt-4o_output.csv.gz"),
        // Any file: the walk declares and plans, it never starts the server.
        weights = repo().join("Cargo.toml").display(),
    );
    let mut t: toml::Table = toml::from_str(&text).unwrap();
    t.insert("profiles".into(), toml::Value::Table(toml::Table::from_iter([("gha".to_string(), gha.into())])));
    t
}

/// Values to try for a key now at `v`, in order; the first the config accepts is used.
fn candidates(v: &Value) -> Vec<Value> {
    let words = [
        "exact",
        "none",
        "normalized",
        "auto",
        "webdriver",
        "http",
        "csv",
        "jsonl",
        "github-docs",
        "oa",
        "emb",
        "site",
        "remote",
    ];
    match v {
        Value::Bool(b) => vec![json!(!b)],
        Value::Number(n) if n.is_u64() || n.is_i64() => {
            let n = n.as_i64().unwrap_or(i64::MAX / 4);
            vec![json!(n + 1), json!(n * 2 + 3)]
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap();
            vec![json!(f * 2.0 + 0.5), json!(f / 2.0)]
        }
        Value::String(s) => {
            let mut c: Vec<Value> = words.iter().filter(|w| *w != s).map(|w| json!(w)).collect();
            c.extend([json!(format!("{s}x")), json!(format!("{s}/x/"))]);
            c
        }
        Value::Array(a) => {
            let mut c = Vec::new();
            let extra = match a.first() {
                Some(Value::String(s)) => json!(format!("{s}x")),
                Some(other) => other.clone(),
                None => json!("x"),
            };
            c.push(Value::Array(a.iter().cloned().chain([extra]).collect()));
            if !a.is_empty() {
                c.push(Value::Array(a[1..].to_vec()));
                c.push(Value::Array(a[..a.len() - 1].to_vec()));
            }
            c.extend([json!(["/x/"]), json!(["emb"])]);
            c
        }
        Value::Object(o) => {
            let mut o = o.clone();
            o.insert("x".into(), json!("y"));
            vec![Value::Object(o)]
        }
        Value::Null => [json!(3), json!(0.5), json!(true), json!("x")]
            .into_iter()
            .chain(words.iter().map(|w| json!(w)))
            .chain([
                json!("http://127.0.0.1:7/v1"),
                json!("file:///tmp/doc2ci-key-walk/mirror"),
                json!(["x"]),
                json!(["emb"]),
                json!(["http://127.0.0.1:7/v1"]),
                json!({"x": "y"}),
            ])
            .collect(),
    }
}

/// Where a key lives in the document and what its partitions are.
struct Key {
    name: String,
    /// The key's class as the lists above name it (`stages.crawl.max_pages`, `models.seed`).
    class: String,
    path: Vec<Seg>,
    now: Value,
    /// Which nodes it configures.
    seed: Box<dyn Fn(&crate::engine::Node) -> bool>,
}

#[derive(Clone)]
enum Seg {
    K(String),
    I(usize),
}

fn get<'a>(t: &'a toml::Value, path: &[Seg]) -> Option<&'a toml::Value> {
    path.iter().try_fold(t, |v, s| match s {
        Seg::K(k) => v.get(k.as_str()),
        Seg::I(i) => v.get(*i),
    })
}

fn set(t: &mut toml::Value, path: &[Seg], v: toml::Value) {
    let (last, init) = path.split_last().unwrap();
    let mut cur = t;
    for s in init {
        cur = match s {
            Seg::K(k) => {
                let tbl = cur.as_table_mut().unwrap();
                tbl.entry(k.clone()).or_insert_with(|| toml::Value::Table(Default::default()))
            }
            Seg::I(i) => &mut cur.as_array_mut().unwrap()[*i],
        };
    }
    match last {
        Seg::K(k) => {
            cur.as_table_mut().unwrap().insert(k.clone(), v);
        }
        Seg::I(i) => cur.as_array_mut().unwrap()[*i] = v,
    }
}

fn keys(doc: &toml::Value, cfg: &Config) -> Vec<Key> {
    let k = |s: &str| Seg::K(s.to_string());
    let mut out = Vec::new();
    // [stages.*]: every field of every stage's parameters, at its effective value.
    let defaults = serde_json::to_value(StageParams::default()).unwrap();
    let effective = serde_json::to_value(&cfg.stages).unwrap();
    for (stage, fields) in defaults.as_object().unwrap() {
        for field in fields.as_object().unwrap().keys() {
            let stage2 = stage.clone();
            out.push(Key {
                name: format!("stages.{stage}.{field}"),
                class: format!("stages.{stage}.{field}"),
                path: vec![k("stages"), k(stage), k(field)],
                now: effective[stage][field].clone(),
                seed: Box::new(move |n| n.stage == stage2),
            });
        }
    }
    // A profile: every field of the profile type.
    let profile = serde_json::to_value(&cfg.sources[0].crawl().unwrap().profile).unwrap();
    for field in crate::keys::fields_of::<doc2ci_crawl::Profile>() {
        out.push(Key {
            name: format!("profiles.gha.{field}"),
            class: format!("profiles.{field}"),
            path: vec![k("profiles"), k("gha"), k(field)],
            now: profile[*field].clone(),
            seed: Box::new(|n| n.part.get("source") == Some("site")),
        });
    }
    // [study], and every entry of [[sources]] and [[models]] with every key any kind takes.
    for (section, fields) in crate::config::entry_keys() {
        let entries = match section {
            "study" => 1,
            s => doc.get(s).and_then(|a| a.as_array()).map_or(0, Vec::len),
        };
        for i in 0..entries {
            for field in &fields {
                let path = match section {
                    "study" => vec![k("study"), k(field)],
                    s => vec![k(s), Seg::I(i), k(field)],
                };
                let now = get(doc, &path).map_or(Value::Null, |v| serde_json::to_value(v).unwrap());
                let seed: Box<dyn Fn(&crate::engine::Node) -> bool> = match section {
                    "sources" => {
                        let name = cfg.sources[i].name.clone();
                        Box::new(move |n| n.part.get("source") == Some(name.as_str()))
                    }
                    "models" => {
                        let name = cfg.models[i].name.clone();
                        Box::new(move |n| n.model.as_deref() == Some(name.as_str()) || n.stage == "models")
                    }
                    _ => Box::new(|_| false),
                };
                let entry = if section == "study" { String::new() } else { format!("[{i}]") };
                out.push(Key {
                    name: format!("{section}{entry}.{field}"),
                    class: format!("{section}.{field}"),
                    path,
                    now,
                    seed,
                });
            }
        }
    }
    out
}

/// Ids of the nodes `seed` selects and of every node that reads them, directly or not.
fn downstream(p: &Pipeline, seed: &dyn Fn(&crate::engine::Node) -> bool) -> BTreeSet<String> {
    let mut hit: Vec<bool> = Vec::with_capacity(p.nodes.len());
    for n in &p.nodes {
        let h = seed(n) || n.deps.iter().any(|&d| hit[d]);
        hit.push(h);
    }
    p.nodes.iter().zip(hit).filter(|(_, h)| *h).map(|(n, _)| n.part.id()).collect()
}

/// One partition as declared: its id, parameters, pinned inputs and the partitions it reads.
type Declared = (String, Value, Vec<(String, String)>, Vec<String>);

/// What a study declares.
fn declared(p: &Pipeline) -> Vec<Declared> {
    let id = |i: &usize| p.nodes[*i].part.id();
    p.nodes.iter().map(|n| (n.part.id(), n.params.clone(), n.pinned.clone(), n.deps.iter().map(id).collect())).collect()
}

fn declare(dir: &Path, doc: &toml::Value) -> Option<(Config, Pipeline)> {
    let file = dir.join("pipeline.toml");
    let text = toml::to_string(doc).unwrap();
    let cfg = Config::parse(&file, &text).ok()?;
    let p = super::pipeline(&cfg).ok()?;
    Some((cfg, p))
}

#[test]
fn every_config_key_reruns_exactly_what_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let doc = toml::Value::Table(base());
    let (cfg, base_p) = declare(dir.path(), &doc).expect("the base study parses and declares");
    base_p.pretend_ran().unwrap();
    assert!(base_p.plan().unwrap().items.iter().all(|i| i.action == Action::Reuse), "the base study is current");

    let mut table: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let mut exercised: BTreeSet<String> = BTreeSet::new();
    let all = keys(&doc, &cfg);
    assert!(all.len() > 100, "{} keys", all.len());
    for key in &all {
        if SHAPE.contains(&key.class.as_str()) {
            continue;
        }
        // The first value the config accepts; for a key that should shape rows, the first that
        // changes what the study declares (a value equal to the default changes nothing). A key the
        // jobs do not hold never changes the declaration, so it is never exercised, and fails below.
        let operational = OPERATIONAL.contains(&key.class.as_str());
        let mut found = None;
        for c in candidates(&key.now) {
            let mut d = doc.clone();
            let Ok(v) = toml::Value::try_from(&c) else { continue };
            set(&mut d, &key.path, v);
            if let Some((_, p)) = declare(dir.path(), &d) {
                if operational || declared(&p) != declared(&base_p) {
                    found = Some((c, p));
                    break;
                }
            }
        }
        let Some((value, p)) = found else { continue };
        exercised.insert(key.class.clone());
        let plan = p.plan().unwrap();
        let ran: BTreeSet<String> =
            plan.items.iter().filter(|i| i.action == Action::Run).map(|i| p.nodes[i.node].part.id()).collect();
        let stale: BTreeSet<String> = plan.stale.iter().cloned().collect();
        if OPERATIONAL.contains(&key.class.as_str()) {
            assert!(
                ran.is_empty() && stale.is_empty(),
                "{} = {value}: re-runs {ran:?} (stale {stale:?}) though it changes no row",
                key.name
            );
            table.insert(key.name.clone(), (value.to_string(), 0));
            continue;
        }
        let mut scope = downstream(&base_p, &*key.seed);
        scope.extend(downstream(&p, &*key.seed));
        assert!(!ran.is_empty() || !stale.is_empty(), "{} = {value}: nothing re-runs", key.name);
        let outside: Vec<&String> = ran.iter().chain(&stale).filter(|id| !scope.contains(*id)).collect();
        assert!(outside.is_empty(), "{} = {value}: re-runs {outside:?}, which nothing it configures feeds", key.name);
        table.insert(key.name.clone(), (value.to_string(), ran.len() + stale.len()));
    }
    // Every key class the types name was changed somewhere (or is a shape key).
    let classes: BTreeSet<String> = all.iter().map(|k| k.class.clone()).collect();
    let missed: Vec<&String> =
        classes.iter().filter(|c| !exercised.contains(*c) && !SHAPE.contains(&c.as_str())).collect();
    assert!(missed.is_empty(), "keys no value of which the test study accepts: {missed:?}");
    for list in [OPERATIONAL, SHAPE] {
        for c in list {
            assert!(classes.contains(*c), "`{c}` is listed here but no config type has it");
        }
    }
    eprintln!("key | changed to | partitions re-run");
    for (k, (v, n)) in &table {
        eprintln!("{k} | {v} | {n}");
    }
}
