//! Issue 30: every key of `[stages.*]`, of a site profile, of every `[[sources]]` kind and of every
//! `[[models]]` backend, changed one at a time, re-runs exactly partitions downstream of what it
//! configures, and at least one of them. The keys come from the config types (serialised
//! defaults, `fields_of`), not from a list typed here; what is typed here is only how each key
//! is expected to behave when it is not "re-run what reads it".

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::config::Config;
use crate::engine::{Action, Pipeline};

/// Keys that never change a row: changing them must re-run nothing.
const OPERATIONAL: &[&str] = &[
    "study.threads",
    "study.request_cache",
    "study.request_cache_ttl_days",
    "study.remote",
    "study.max_error_rate",
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
    "stages.contamination.enabled",
    "stages.contamination.services",
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

[stages.contamination]
enabled = true
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
        "2024-06-30",
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
    // [stages.*]: every field of every section's type, at its effective value.
    for section in super::sections() {
        let (stage, effective) = (section.name, (section.read)(cfg).unwrap());
        for field in (section.defaults)().as_object().unwrap().keys() {
            out.push(Key {
                name: format!("stages.{stage}.{field}"),
                class: format!("stages.{stage}.{field}"),
                path: vec![k("stages"), k(stage), k(field)],
                now: effective[field].clone(),
                seed: Box::new(move |n| n.stage == stage),
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
    let cfg = Config::parse(&file, &text).ok().filter(|c| super::check(c).is_ok())?;
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

/// A config as `doc2ci` loads it: parsed, then every stage's section read and checked.
fn checked(text: &str) -> Result<Config, String> {
    let c = Config::parse(&std::env::temp_dir().join("pipeline.toml"), text).map_err(|e| e.to_string())?;
    super::check(&c).map_err(|e| e.to_string())?;
    Ok(c)
}

#[test]
fn stage_settings_errors_name_line_and_key() {
    const HEAD: &str =
        "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n";
    const MODEL: &str = "[[models]]\nname = \"x\"\nbackend = \"embedded\"\n";
    let cases: &[(&str, &str, &str)] = &[
        ("[stages.crawl]\nmax_pages = 0\n", ":10:", "`stages.crawl.max_pages`: must be above 0"),
        ("[stages.crawl]\nretries = 1\nrate_limit = -1.0\n", ":11:", "`stages.crawl.rate_limit`: must not be negative"),
        ("[stages.crawl]\nbackend = \"telnet\"\n", ":10:", "unknown backend `telnet`"),
        ("[stages.crawl]\nmax_pagess = 1\n", "line 10", "max_pagess"),
        ("[stages.crawl]\nmax_pages = \"many\"\n", "line 10", "invalid type"),
        ("[stages.reprt]\nenabled = false\n", ":9:", "`stages.reprt`: unknown stage (one of import, dedupe"),
        ("[stages]\ncrawl = 3\n", ":10:", "a table"),
        ("[stages.import]\nbatch_size = 0\n", ":10:", "`stages.import.batch_size`: must be at least 1"),
        ("[stages.generate]\nmax_cost = 0.0\n", ":10:", "`stages.generate.max_cost`: must be above 0"),
        ("[stages.stats]\nci_metrics = [\"bleu\", \"nope\"]\n", ":10:", "unknown metric `nope`"),
        ("[stages.stats]\nbootstrap_resamples = 0\n", ":10:", "bootstrap_resamples"),
        (
            "[stages.repair]\nenabled = true\nmodel = \"nope\"\n",
            ":11:",
            "`stages.repair.model`: `nope`: no such [[models]]",
        ),
        ("[stages.repair]\nenabled = true\nfeedback = [\"lint\"]\n", ":11:", "must include \"schema\""),
        ("[stages.repair]\nenabled = true\nrounds = 0\n", ":11:", "`stages.repair.rounds`"),
        ("[stages.repair]\nenabled = true\n[stages.validate]\nenabled = false\n", ":9:", "enable [stages.validate]"),
        (
            "[stages.repair]\nenabled = true\nfeedback = [\"schema\", \"lint\"]\n[stages.lint]\nenabled = false\n",
            ":11:",
            "needs the lint stage",
        ),
    ];
    for (body, line, what) in cases {
        let e = checked(&format!("{HEAD}{MODEL}{body}")).unwrap_err();
        assert!(e.contains(line) && e.contains(what), "{body}: {e}");
    }
    let c = checked(&format!("{HEAD}{MODEL}[stages.repair]\nenabled = true\nmodel = \"x\"\n")).unwrap();
    let repair: super::repair::Settings = c.section().unwrap();
    assert!(repair.enabled && repair.rounds == 2 && repair.model.as_deref() == Some("x"));
    // Not written: the defaults, which pass their own checks.
    let c = checked(HEAD).unwrap();
    for s in super::sections() {
        assert_eq!((s.read)(&c).unwrap(), (s.defaults)(), "[stages.{}]", s.name);
    }
}

#[test]
fn unknown_service_names_its_line_while_validate_or_score_runs() {
    let cfg = "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"G\"\n[[services]]\nname = \"gitlab\"\ndisplay = \"GitLab\"\n";
    let e = checked(cfg).unwrap_err();
    assert!(e.contains(":7:") && e.contains("unknown service `gitlab`") && e.contains("gitlab-ci"), "{e}");
    let off = format!(
        "{cfg}[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n"
    );
    assert!(checked(&off).is_ok());
}

/// A `[stages.*]` type left out of [`super::sections`] would be read by its stage yet refused as
/// an unknown stage when written: every `impl Section` in `src/` must be listed.
#[test]
fn every_section_type_is_listed() {
    fn walk(dir: &Path, names: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, names);
            } else if let Ok(text) = std::fs::read_to_string(&p) {
                for rest in text.split("\nimpl Section for ").skip(1) {
                    let name = rest.split("const NAME: &'static str = \"").nth(1).and_then(|r| r.split('"').next());
                    names.push(name.expect("an impl Section names its section").to_string());
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut found);
    found.sort();
    let mut listed: Vec<String> = super::sections().map(|s| s.name.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed);
}

/// The checks' registry as the study declares it: every answer, repair rounds included, gets
/// exactly one partition of each check beside it; a round reads the earlier rounds' partitions of
/// the checks its `feedback` quotes and of no other; stats reads every check's partitions but the
/// references' lints. Each check under its own name, writing its own table of the catalogue.
#[test]
fn every_answer_gets_every_check_and_rounds_read_what_they_quote() {
    let checks = super::CHECKS;
    let names: BTreeSet<&str> = checks.iter().map(|c| c.settings.name).collect();
    assert_eq!(names.len(), checks.len());
    for c in checks {
        assert!(super::tables::TABLES.contains(&c.table), "{}", c.table.name);
    }
    assert!(checks.iter().any(|c| c.feedback == Some("schema")), "repair always quotes schema errors");

    let dir = tempfile::tempdir().unwrap();
    let (_, p) = declare(dir.path(), &toml::Value::Table(base())).expect("the base study declares");
    let n = &p.nodes;
    let gens: Vec<usize> = (0..n.len()).filter(|&i| n[i].part.table == super::GENERATIONS.name).collect();
    let rounds: Vec<usize> = gens.iter().copied().filter(|&i| n[i].part.file.is_some()).collect();
    assert!(!rounds.is_empty(), "the base study repairs");
    for &gi in &gens {
        for c in checks {
            let of: Vec<usize> =
                (0..n.len()).filter(|&i| n[i].part.table == c.table.name && n[i].deps.contains(&gi)).collect();
            assert_eq!(of.len(), 1, "{} of {}", c.table.name, n[gi].part.id());
            assert_eq!(n[of[0]].part.id(), n[gi].part.sibling(c.table).id());
        }
    }
    for &gk in &rounds {
        let read: BTreeSet<&str> = n[gk].deps.iter().map(|&d| n[d].part.table).collect();
        for c in checks {
            // The base study quotes schema and lint findings; scores are never quoted.
            assert_eq!(read.contains(c.table.name), c.feedback.is_some(), "{} in {}", c.table.name, n[gk].part.id());
        }
    }
    let stats = n.iter().find(|x| x.part.table == super::tables::STATS.name).expect("stats declared");
    let reads: BTreeSet<String> = stats.deps.iter().map(|&d| n[d].part.id()).collect();
    for x in n {
        let Some(c) = checks.iter().find(|c| c.table.name == x.part.table) else { continue };
        let reference = x.part.get("model") == Some(super::lint::REFERENCE);
        assert_eq!(reads.contains(&x.part.id()), c.stats && !reference, "{}", x.part.id());
    }
}
