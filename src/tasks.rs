//! Declares the study's partitions and runs each one: the glue between the warehouse (I/O,
//! checkpoints) and the stage crates (pure transformations over typed rows).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use datafusion::arrow::array::Array;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;

use doc2ci_import::{ColumnMap, ImportError, Record};
use doc2ci_rows::{ModelRow, Pair, RawPair};

use doc2ci_rows::{Generation, Score, Validation};
use doc2ci_validate::Service;
use rayon::prelude::*;

use crate::assets;
use crate::config::Config;
use crate::engine::Node;
use crate::generation;
use crate::resources;
use crate::ui::Ui;
use crate::warehouse::{
    self, Partition, Warehouse, CODE_BLOCKS, GENERATIONS, MODELS, PAGES, PAIRS, PAIRS_RAW, PAIR_VALIDATIONS, REPAIRS,
    REPORT, SCORES, STATS, VALIDATIONS,
};

#[derive(Debug, Clone)]
pub enum Task {
    ImportPairs {
        source: usize,
    },
    Crawl {
        source: usize,
    },
    Extract {
        source: usize,
        pages: Partition,
    },
    /// Every code block of the pages, for the crawl summary.
    Blocks {
        source: usize,
        pages: Partition,
    },
    Dedupe {
        service: String,
        inputs: Vec<Partition>,
    },
    Models,
    ImportOutputs {
        model: usize,
    },
    ValidateRefs {
        service: Service,
        pairs: Partition,
    },
    Validate {
        service: Service,
        generations: Partition,
    },
    Score {
        service: Service,
        pairs: Partition,
        generations: Partition,
    },
    Generate {
        model: usize,
        service: String,
        pairs: Partition,
    },
    /// Repair round `round` of `model`'s outputs, written by `repairer`; reads every earlier round.
    Repair {
        model: usize,
        repairer: usize,
        service: String,
        round: u32,
        pairs: Partition,
        gens: Vec<Partition>,
        vals: Vec<Partition>,
    },
    RepairSummary {
        model: usize,
        repairer: usize,
        service: String,
        gens: Vec<Partition>,
        vals: Vec<Partition>,
    },
    Stats {
        inputs: Vec<Partition>,
    },
    Report {
        inputs: Vec<Partition>,
    },
}

pub struct TaskOutput {
    pub output_hash: String,
    pub rows: u64,
    pub note: Option<String>,
}

pub fn build_nodes(cfg: &Config) -> Result<Vec<Node>> {
    let mut nodes: Vec<Node> = Vec::new();
    for (i, s) in cfg.sources.iter().enumerate() {
        if let Some(spec) = &s.crawl {
            let pages = Partition::new(PAGES, &[&s.service, &s.name]);
            let pr = &spec.profile;
            // Remote sites are re-crawled once their pages are older than max_age.
            let epoch = match &spec.url {
                Some(_) if cfg.stages.crawl.max_age_hours > 0.0 => {
                    (chrono::Utc::now().timestamp() as f64 / 3600.0 / cfg.stages.crawl.max_age_hours).floor() as i64
                }
                _ => 0,
            };
            nodes.push(Node {
                stage: "crawl",
                part: pages.clone(),
                deps: vec![],
                files: spec.serve.as_deref().map(served_files).unwrap_or_default(),
                pinned: vec![],
                params: json!({"start_urls": pr.start_urls, "allowed_prefixes": pr.allowed_prefixes, "keep_query": pr.keep_query,
                               "url": spec.url, "backend": crate::crawl::resolve_backend(cfg, spec), "crawl": cfg.stages.crawl, "epoch": epoch}),
                version: crate::code::version(&["doc2ci-crawl", "glue:crawl"]),
                task: Task::Crawl { source: i },
                model: None,
            });
            let crawl_node = nodes.len() - 1;
            nodes.push(Node {
                stage: "extract",
                part: Partition::new(PAIRS_RAW, &[&s.service, &s.name]),
                deps: vec![crawl_node],
                files: vec![],
                pinned: vec![],
                params: json!({"content_root": pr.content_root, "remove": pr.remove, "yaml_blocks": pr.yaml_blocks, "code_blocks": pr.code_blocks, "prose_blocks": pr.prose_blocks, "keep_hidden": pr.keep_hidden}),
                version: crate::code::version(&["doc2ci-crawl"]),
                task: Task::Extract { source: i, pages: pages.clone() },
                model: None,
            });
            nodes.push(Node {
                stage: "extract",
                part: Partition::new(CODE_BLOCKS, &[&s.service, &s.name]),
                deps: vec![crawl_node],
                files: vec![],
                pinned: vec![],
                params: nodes[nodes.len() - 1].params.clone(),
                version: crate::code::version(&["doc2ci-crawl"]),
                task: Task::Blocks { source: i, pages },
                model: None,
            });
            continue;
        }
        nodes.push(Node {
            stage: "import",
            part: Partition::new(PAIRS_RAW, &[&s.service, &s.name]),
            deps: vec![],
            files: vec![if s.format == "benchmark" {
                s.path.join(crate::release::PAIRS_JSONL)
            } else {
                s.path.clone()
            }],
            pinned: vec![],
            params: json!({"format": s.format, "columns": s.columns, "skip_bad_rows": s.skip_bad_rows}),
            version: crate::code::version(&["doc2ci-import"]),
            task: Task::ImportPairs { source: i },
            model: None,
        });
    }
    for svc in &cfg.services {
        let deps: Vec<usize> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.part.table == PAIRS_RAW.name && n.part.get("service") == Some(&svc.name))
            .map(|(i, _)| i)
            .collect();
        if deps.is_empty() {
            continue;
        }
        let inputs = deps.iter().map(|&d| nodes[d].part.clone()).collect();
        nodes.push(Node {
            stage: "dedupe",
            part: Partition::new(PAIRS, &[&svc.name]),
            deps,
            files: vec![],
            pinned: vec![],
            params: serde_json::to_value(&cfg.stages.dedupe)?,
            version: crate::code::version(&["doc2ci-dedupe"]),
            task: Task::Dedupe { service: svc.name.clone(), inputs },
            model: None,
        });
    }
    nodes.push(Node {
        stage: "models",
        part: Partition::new(MODELS, &[]),
        deps: vec![],
        files: vec![],
        pinned: vec![],
        params: serde_json::to_value(model_rows(cfg))?,
        version: crate::code::version(&["doc2ci-rows"]),
        task: Task::Models,
        model: None,
    });
    for (i, m) in cfg.models.iter().enumerate() {
        if m.backend != "import" {
            continue;
        }
        let service = m.service.clone().expect("config checked: import models name their service");
        let Some(dedupe) =
            nodes.iter().position(|n| n.stage == "dedupe" && n.part.get("service") == Some(service.as_str()))
        else {
            bail!("model `{}`: service `{service}` has no source of pairs", m.name);
        };
        nodes.push(Node {
            stage: "import",
            part: Partition::new(GENERATIONS, &[&service, &m.name]),
            deps: vec![dedupe],
            files: vec![m.path.clone().expect("config checked: import models have a path")],
            pinned: vec![],
            params: json!({"format": m.format, "columns": m.columns, "skip_bad_rows": m.skip_bad_rows, "source": m.source}),
            version: crate::code::version(&["doc2ci-import"]),
            task: Task::ImportOutputs { model: i },
            model: Some(m.name.clone()),
        });
    }
    for (i, m) in cfg.models.iter().enumerate() {
        let Some(g) = &m.gen else { continue };
        for service in &g.services {
            // A service without pairs has nothing to ask.
            let Some(dedupe) =
                nodes.iter().position(|n| n.stage == "dedupe" && n.part.get("service") == Some(service.as_str()))
            else {
                continue;
            };
            nodes.push(Node {
                stage: "generate",
                part: Partition::new(GENERATIONS, &[service, &m.name]),
                deps: vec![dedupe],
                files: vec![],
                pinned: model_pins(m),
                params: json!({"gen": g.key, "prompt": generation::PROMPT_VERSION, "keep_leaks": cfg.stages.dedupe.keep_leaks}),
                version: crate::code::version(&["doc2ci-generate", "doc2ci-llm", "doc2ci-smollm", "glue:generation"]),
                task: Task::Generate { model: i, service: service.clone(), pairs: nodes[dedupe].part.clone() },
                model: Some(m.name.clone()),
            });
        }
    }
    add_quality_nodes(cfg, &mut nodes)?;
    add_repair_nodes(cfg, &mut nodes)?;
    add_study_nodes(cfg, &mut nodes)?;
    Ok(nodes)
}

/// The embedded model's weights stand in its cache keys by their pinned hash.
fn model_pins(m: &crate::config::Model) -> Vec<(String, String)> {
    match &m.gen {
        Some(g) if g.key.backend == "embedded" => assets::pinned_sha256(crate::config::SMOLLM2_GGUF)
            .map(|h| vec![(crate::config::SMOLLM2_GGUF.to_string(), h)])
            .unwrap_or_default(),
        _ => vec![],
    }
}

/// Repair rounds: round k of (service, model) writes `generations/…/round-k.parquet`, which
/// the ordinary validate and score nodes then read like any generations partition, and
/// round k+1 reads every earlier round. A summary per (service, model) fills `repairs`.
fn add_repair_nodes(cfg: &Config, nodes: &mut Vec<Node>) -> Result<()> {
    let rp = &cfg.stages.repair;
    if !rp.enabled || !cfg.stages.validate.enabled {
        return Ok(());
    }
    let round0: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.part.table == GENERATIONS.name && n.part.file.is_none())
        .map(|(i, _)| i)
        .collect();
    for g0 in round0 {
        let gp0 = nodes[g0].part.clone();
        let service = gp0.get("service").unwrap_or_default().to_string();
        let model_name = gp0.get("model").unwrap_or_default().to_string();
        let Some(model) = cfg.models.iter().position(|m| m.name == model_name) else { continue };
        if rp.models.as_ref().is_some_and(|ms| !ms.contains(&model_name)) {
            continue;
        }
        let repairer = match &rp.model {
            Some(r) => cfg.models.iter().position(|m| &m.name == r).expect("config checked the repair model"),
            None if cfg.models[model].gen.is_some() => model,
            None => continue,
        };
        let Ok(svc) = service.parse::<Service>() else { continue };
        let Some(v0) = nodes
            .iter()
            .position(|n| n.part.table == VALIDATIONS.name && n.part.values == gp0.values && n.part.file.is_none())
        else {
            continue;
        };
        let Some(dedupe) =
            nodes.iter().position(|n| n.stage == "dedupe" && n.part.get("service") == Some(service.as_str()))
        else {
            continue;
        };
        let rm = &cfg.models[repairer];
        let params = json!({"repairer": rm.name, "gen": rm.gen.as_ref().map(|g| &g.key), "prompt": generation::PROMPT_VERSION,
            "original": generation::prompt_options(cfg.models[model].gen.as_ref())});
        let (mut gs, mut vs) = (vec![g0], vec![v0]);
        for round in 1..=rp.rounds {
            let file = format!("round-{round}");
            let mut deps = vec![dedupe];
            deps.extend(&gs);
            deps.extend(&vs);
            nodes.push(Node {
                stage: "repair",
                part: Partition::new(GENERATIONS, &[&service, &model_name]).with_file(&file),
                deps,
                files: vec![],
                pinned: model_pins(rm),
                params: params.clone(),
                version: crate::code::version(&["doc2ci-generate", "doc2ci-llm", "doc2ci-smollm", "glue:generation"]),
                task: Task::Repair {
                    model,
                    repairer,
                    service: service.clone(),
                    round,
                    pairs: nodes[dedupe].part.clone(),
                    gens: gs.iter().map(|&i| nodes[i].part.clone()).collect(),
                    vals: vs.iter().map(|&i| nodes[i].part.clone()).collect(),
                },
                model: Some(model_name.clone()),
            });
            let gk = nodes.len() - 1;
            let (vk, _) = push_quality(cfg, nodes, svc, dedupe, gk)?;
            gs.push(gk);
            vs.push(vk.expect("validate is enabled"));
        }
        let mut deps = gs.clone();
        deps.extend(&vs);
        nodes.push(Node {
            stage: "repair",
            part: Partition::new(REPAIRS, &[&service, &model_name]),
            deps,
            files: vec![],
            pinned: vec![],
            params: json!({"repairer": rm.name}),
            version: crate::code::version(&["doc2ci-generate", "doc2ci-llm", "doc2ci-smollm", "glue:generation"]),
            task: Task::RepairSummary {
                model,
                repairer,
                service: service.clone(),
                gens: gs.iter().map(|&i| nodes[i].part.clone()).collect(),
                vals: vs.iter().map(|&i| nodes[i].part.clone()).collect(),
            },
            model: Some(model_name.clone()),
        });
    }
    Ok(())
}

/// stats (every score and validation partition, and the models) then report (that, plus stats).
fn add_study_nodes(cfg: &Config, nodes: &mut Vec<Node>) -> Result<()> {
    let mut deps: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.part.table == SCORES.name || n.part.table == VALIDATIONS.name)
        .map(|(i, _)| i)
        .collect();
    if deps.is_empty() {
        return Ok(());
    }
    if let Some(m) = nodes.iter().position(|n| n.part.table == MODELS.name) {
        deps.push(m);
    }
    let inputs: Vec<Partition> = deps.iter().map(|&d| nodes[d].part.clone()).collect();
    if cfg.stages.stats.enabled {
        nodes.push(Node {
            stage: "stats",
            part: Partition::new(STATS, &[]),
            deps: deps.clone(),
            files: vec![],
            pinned: vec![],
            params: serde_json::to_value(&cfg.stages.stats)?,
            version: crate::code::version(&["doc2ci-stats"]),
            task: Task::Stats { inputs: inputs.clone() },
            model: None,
        });
        if cfg.stages.report.enabled {
            let mut rdeps = deps;
            rdeps.push(nodes.len() - 1);
            let mut rinputs = inputs;
            rinputs.push(Partition::new(STATS, &[]));
            let services: Vec<(String, String)> =
                cfg.services.iter().map(|s| (s.name.clone(), s.display.clone())).collect();
            nodes.push(Node {
                stage: "report",
                part: Partition::new(REPORT, &[]),
                deps: rdeps,
                files: vec![],
                pinned: vec![],
                params: json!({"report": cfg.stages.report, "services": services}),
                version: crate::code::version(&["doc2ci-report"]),
                task: Task::Report { inputs: rinputs },
                model: None,
            });
        }
    }
    Ok(())
}

/// validate and score nodes for one generations partition (any round); returns their indices.
fn push_quality(
    cfg: &Config,
    nodes: &mut Vec<Node>,
    service: Service,
    dedupe: usize,
    g: usize,
) -> Result<(Option<usize>, Option<usize>)> {
    let pin = |rel: &str| -> Result<(String, String)> {
        let h = assets::pinned_sha256(rel).ok_or_else(|| anyhow!("internal: {rel} is not in the asset manifests"))?;
        Ok((rel.to_string(), h))
    };
    let gp = nodes[g].part.clone();
    let name = gp.get("service").unwrap_or_default().to_string();
    let model = gp.get("model").unwrap_or_default().to_string();
    let pairs = nodes[dedupe].part.clone();
    let with_file = |p: Partition| match &gp.file {
        Some(f) => p.with_file(f),
        None => p,
    };
    let (mut v, mut s) = (None, None);
    if cfg.stages.validate.enabled {
        nodes.push(Node {
            stage: "validate",
            part: with_file(Partition::new(VALIDATIONS, &[&name, &model])),
            deps: vec![g],
            files: vec![],
            pinned: vec![pin(&resources::schema_asset(service))?],
            params: serde_json::to_value(&cfg.stages.validate)?,
            version: crate::code::version(&["doc2ci-validate"]),
            task: Task::Validate { service, generations: gp.clone() },
            model: Some(model.clone()),
        });
        v = Some(nodes.len() - 1);
    }
    if cfg.stages.score.enabled {
        nodes.push(Node {
            stage: "score",
            part: with_file(Partition::new(SCORES, &[&name, &model])),
            deps: vec![dedupe, g],
            files: vec![],
            pinned: vec![pin(resources::EMBED_MODEL)?, pin(resources::EMBED_TOKENIZER)?],
            params: serde_json::to_value(&cfg.stages.score)?,
            version: crate::code::version(&["doc2ci-score", "doc2ci-embed"]),
            task: Task::Score { service, pairs, generations: gp },
            model: Some(model),
        });
        s = Some(nodes.len() - 1);
    }
    Ok((v, s))
}

/// The rows stats and report read: every score and validation partition, and the models.
fn study_rows(wh: &Warehouse, inputs: &[Partition]) -> Result<(Vec<doc2ci_stats::study::Unit>, Vec<ModelRow>)> {
    let (mut scores, mut vals, mut models) = (Vec::new(), Vec::new(), Vec::new());
    for p in inputs {
        if p.table == SCORES.name {
            scores.extend(wh.read::<Score>(p)?);
        } else if p.table == VALIDATIONS.name {
            vals.extend(wh.read::<Validation>(p)?);
        } else if p.table == MODELS.name {
            models.extend(wh.read::<ModelRow>(p)?);
        }
    }
    Ok((doc2ci_stats::study::units(&scores, &vals), models))
}

fn stats_params(cfg: &Config) -> doc2ci_stats::study::Params {
    let s = &cfg.stages.stats;
    doc2ci_stats::study::Params {
        seed: s.bootstrap_seed,
        resamples: s.bootstrap_resamples,
        ci_metrics: s.ci_metrics.clone(),
    }
}

/// validate and score: one partition per (service, model), plus each service's references.
fn add_quality_nodes(cfg: &Config, nodes: &mut Vec<Node>) -> Result<()> {
    if !cfg.stages.validate.enabled && !cfg.stages.score.enabled {
        return Ok(());
    }
    let pin = |rel: &str| -> Result<(String, String)> {
        let h = assets::pinned_sha256(rel).ok_or_else(|| anyhow!("internal: {rel} is not in the asset manifests"))?;
        Ok((rel.to_string(), h))
    };
    let dedupes: Vec<usize> = nodes.iter().enumerate().filter(|(_, n)| n.stage == "dedupe").map(|(i, _)| i).collect();
    for d in dedupes {
        let name = nodes[d].part.get("service").unwrap_or_default().to_string();
        let Ok(service) = name.parse::<Service>() else {
            // A service outside the four has no schema and no metrics context: nothing to check.
            continue;
        };
        let pairs = nodes[d].part.clone();
        let gens: Vec<usize> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.part.table == GENERATIONS.name && n.part.get("service") == Some(name.as_str()))
            .map(|(i, _)| i)
            .collect();
        if cfg.stages.validate.enabled {
            nodes.push(Node {
                stage: "validate",
                part: Partition::new(PAIR_VALIDATIONS, &[&name]),
                deps: vec![d],
                files: vec![],
                pinned: vec![pin(&resources::schema_asset(service))?],
                params: serde_json::to_value(&cfg.stages.validate)?,
                version: crate::code::version(&["doc2ci-validate"]),
                task: Task::ValidateRefs { service, pairs },
                model: None,
            });
        }
        for g in gens {
            push_quality(cfg, nodes, service, d, g)?;
        }
    }
    Ok(())
}

/// Every file of a served folder, so an edit of the site re-crawls it.
fn served_files(dir: &Path) -> Vec<std::path::PathBuf> {
    fn walk(d: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

fn model_rows(cfg: &Config) -> Vec<ModelRow> {
    cfg.models
        .iter()
        .map(|m| ModelRow {
            model: m.name.clone(),
            backend: m.backend.clone(),
            family: m.family.clone(),
            size_b: m.size_b,
            code: m.code,
            proprietary: m.proprietary,
            base_model: m.base_model.clone(),
        })
        .collect()
}

pub fn execute(node: &Node, cfg: &Config, wh: &Warehouse, key: &str, ui: &Ui) -> Result<TaskOutput> {
    match &node.task {
        Task::ImportPairs { source } => {
            let s = &cfg.sources[*source];
            let map = ColumnMap::for_format(&s.format, &s.columns).map_err(|e| anyhow!("source `{}`: {e}", s.name))?;
            let mut position = 0u64;
            let benchmark = s.format == "benchmark";
            let (rows, note) = batched(wh, node, key, cfg, &s.path, &s.format, s.skip_bad_rows, ui, |rec, idx| {
                position = idx;
                // A released benchmark holds every service: this source takes its own.
                if benchmark && rec.fields.get("service").and_then(|v| v.as_deref()) != Some(s.service.as_str()) {
                    return Ok(None);
                }
                doc2ci_import::to_raw_pair(&rec, &map, &s.service, &s.name, position).map(Some)
            })?;
            finish(wh, node, key, &rows, note)
        }
        Task::Crawl { source } => {
            let (pages, note) = crate::crawl::crawl(cfg, &cfg.sources[*source], wh, node, key, ui)?;
            finish(wh, node, key, &pages, Some(note))
        }
        Task::Extract { source, pages } => {
            let (rows, note) = crate::crawl::extract(&cfg.sources[*source], wh, pages)?;
            finish(wh, node, key, &rows, Some(note))
        }
        Task::Blocks { source, pages } => {
            let rows = crate::crawl::code_blocks(&cfg.sources[*source], wh, pages)?;
            let pairs = rows.iter().filter(|b| b.kind == "pair").count();
            finish(wh, node, key, &rows, Some(format!("{} code blocks, {pairs} pairs", rows.len())))
        }
        Task::Dedupe { service, inputs } => {
            let mut raw: Vec<RawPair> = Vec::new();
            for p in inputs {
                raw.extend(wh.read::<RawPair>(p)?);
            }
            let pairs = doc2ci_dedupe::dedupe(&raw, cfg.stages.dedupe.mode);
            let distinct: std::collections::HashSet<(String, String)> = pairs
                .iter()
                .map(|p| (doc2ci_rows::collapse_ws(&p.title), doc2ci_rows::collapse_ws(&p.description)))
                .collect();
            let leaks = pairs.iter().filter(|p| p.leak.is_some()).count();
            let note = format!(
                "{service}: {} raw → {} kept, {} copies dropped, {} distinct title+description, {leaks} leaking their reference{}",
                raw.len(),
                pairs.len(),
                raw.len() - pairs.len(),
                distinct.len(),
                if leaks > 0 && !cfg.stages.dedupe.keep_leaks { " (not asked: [stages.dedupe] keep_leaks = true asks them)" } else { "" }
            );
            finish(wh, node, key, &pairs, Some(note))
        }
        Task::Models => finish(wh, node, key, &model_rows(cfg), None),
        Task::ImportOutputs { model } => {
            let m = &cfg.models[*model];
            let service = m.service.as_deref().unwrap_or_default();
            let pairs: Vec<Pair> = wh.read(&Partition::new(PAIRS, &[service]))?;
            let map = ColumnMap::for_format(&m.format, &m.columns).map_err(|e| anyhow!("model `{}`: {e}", m.name))?;
            let mut att =
                doc2ci_import::Attacher::new(&pairs, m.source.as_deref().unwrap_or_default(), service, &m.name);
            let path = m.path.as_ref().expect("import model has a path");
            let mut dropped = 0usize;
            let (rows, note) = batched(wh, node, key, cfg, path, &m.format, m.skip_bad_rows, ui, |rec, _| {
                let out = doc2ci_import::to_output(&rec, &map)?;
                let g = att.attach(out)?;
                if g.is_none() {
                    dropped += 1;
                }
                Ok(g)
            })?;
            let mut note = note.map_or(String::new(), |n| format!("{n}; "));
            note.push_str(&format!("{} attached, {dropped} outputs of dropped duplicate pairs not kept", rows.len()));
            finish(wh, node, key, &rows, Some(note))
        }
        Task::ValidateRefs { service, pairs } => {
            let v = resources::validator()?;
            let pairs: Vec<Pair> = wh.read(pairs)?;
            let rows: Vec<Validation> = pairs
                .par_iter()
                .map(|p| validation(v, *service, &p.pair_id, "reference", 0, 0, Some(&p.reference), None))
                .collect::<Result<_>>()?;
            let frag = rows.iter().filter(|r| r.fragment).count();
            let parsed = rows.iter().filter(|r| r.parse_ok).count();
            let note = format!("{} references: {parsed} parse as mappings, {frag} fragments", rows.len());
            finish(wh, node, key, &rows, Some(note))
        }
        Task::Generate { model, service, pairs } => {
            let (rows, note) = generation::generate(wh, node, key, cfg, ui, *model, service, pairs)?;
            finish(wh, node, key, &rows, Some(note))
        }
        Task::Repair { model, repairer, service, round, pairs, gens, vals } => {
            let (rows, note) =
                generation::repair(wh, node, key, cfg, ui, *model, *repairer, service, *round, pairs, gens, vals)?;
            finish(wh, node, key, &rows, Some(note))
        }
        Task::RepairSummary { model, repairer, service, gens, vals } => {
            let rows = generation::repair_summary(
                wh,
                service,
                &cfg.models[*model].name,
                &cfg.models[*repairer].name,
                gens,
                vals,
            )?;
            let note = rows
                .iter()
                .map(|r| format!("round {}: {}/{} fixed", r.round, r.fixed, r.attempted))
                .collect::<Vec<_>>()
                .join(", ");
            finish(wh, node, key, &rows, Some(note))
        }
        Task::Validate { service, generations } => {
            let v = resources::validator()?;
            let gens: Vec<Generation> = wh.read(generations)?;
            let rows: Vec<Validation> = gens
                .par_iter()
                .map(|g| {
                    validation(
                        v,
                        *service,
                        &g.pair_id,
                        &g.model,
                        g.sample,
                        g.round,
                        g.output.as_deref(),
                        g.error.as_deref(),
                    )
                })
                .collect::<Result<_>>()?;
            let ok = rows.iter().filter(|r| r.schema_ok).count();
            finish(wh, node, key, &rows, Some(format!("{ok}/{} schema-valid", rows.len())))
        }
        Task::Score { pairs, generations, .. } => {
            let pairs: Vec<Pair> = wh.read(pairs)?;
            let gens: Vec<Generation> = wh.read(generations)?;
            let (rows, embedded) = score(wh, &pairs, &gens)?;
            finish(wh, node, key, &rows, Some(format!("{embedded} new texts embedded")))
        }
        Task::Stats { inputs } => {
            let (units, models) = study_rows(wh, inputs)?;
            let rows = doc2ci_stats::study::run(&units, &models, &stats_params(cfg));
            let tests: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.test.as_str()).collect();
            let note = format!(
                "{} rows over {} outputs ({})",
                rows.len(),
                units.len(),
                tests.into_iter().collect::<Vec<_>>().join(", ")
            );
            finish(wh, node, key, &rows, Some(note))
        }
        Task::Report { inputs } => {
            let (study, stats_part) = inputs.split_at(inputs.len() - 1);
            let (units, models) = study_rows(wh, study)?;
            let stats: Vec<doc2ci_stats::study::StatRow> = wh.read(&stats_part[0])?;
            let services: std::collections::BTreeMap<String, String> =
                cfg.services.iter().map(|s| (s.name.clone(), s.display.clone())).collect();
            let input = doc2ci_report::Input {
                title: &cfg.stages.report.title,
                models: &models,
                units: &units,
                stats: &stats,
                services: &services,
            };
            let files = doc2ci_report::build(&input);
            let rows: Vec<doc2ci_report::FileRow> =
                files.iter().map(|(p, c)| doc2ci_report::FileRow::new(p, c)).collect();
            let extra: Vec<(String, Vec<u8>)> = files.into_iter().map(|(p, c)| (p, c.into_bytes())).collect();
            publish_delay();
            let output_hash = wh.write_with(&node.part, &rows, &extra)?;
            let dir = wh.dir(&node.part);
            Ok(TaskOutput {
                output_hash,
                rows: rows.len() as u64,
                note: Some(format!("{} files in {}", rows.len(), dir.display())),
            })
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn validation(
    v: &doc2ci_validate::Validator,
    service: Service,
    pair_id: &str,
    model: &str,
    sample: u32,
    round: u32,
    text: Option<&str>,
    error: Option<&str>,
) -> Result<Validation> {
    let (parse_ok, schema_ok, errors, fragment) = match text {
        Some(t) => {
            let r = v.validate(service, t).map_err(|e| anyhow!("{e}"))?;
            (r.parse_ok, r.schema_ok, r.errors, r.fragment)
        }
        None => (false, false, vec![format!("no output: {}", error.unwrap_or("the backend returned nothing"))], false),
    };
    Ok(Validation {
        pair_id: pair_id.into(),
        service: service.name().into(),
        model: model.into(),
        sample,
        round,
        parse_ok,
        schema_ok,
        errors,
        fragment,
    })
}

/// Every metric of every generation against its pair's reference. References are prepared
/// once (many models share them) and each distinct cleaned text is embedded once.
fn score(wh: &Warehouse, pairs: &[Pair], gens: &[Generation]) -> Result<(Vec<Score>, usize)> {
    let ctx = doc2ci_score::CrystalContext::from_references(pairs.iter().map(|p| p.reference.as_str()));
    let index: std::collections::HashMap<&str, usize> =
        pairs.iter().enumerate().map(|(i, p)| (p.pair_id.as_str(), i)).collect();
    let used: Vec<usize> = {
        let mut u: Vec<usize> = gens.iter().filter_map(|g| index.get(g.pair_id.as_str()).copied()).collect();
        u.sort_unstable();
        u.dedup();
        u
    };
    let refs: std::collections::HashMap<usize, doc2ci_score::Prepared> =
        used.par_iter().map(|&i| (i, doc2ci_score::Prepared::new(&pairs[i].reference, &ctx))).collect();
    let outs: Vec<doc2ci_score::Prepared> =
        gens.par_iter().map(|g| doc2ci_score::Prepared::new(g.output.as_deref().unwrap_or(""), &ctx)).collect();
    let mut texts: Vec<&str> = used.iter().map(|i| refs[i].clean()).collect();
    texts.extend(outs.iter().map(|o| o.clean()));
    let (vecs, embedded) = resources::embed(wh, &texts)?;
    let ref_vec: std::collections::HashMap<usize, &Vec<f32>> =
        used.iter().zip(&vecs).map(|(i, v)| (*i, v.as_ref())).collect();
    let out_vecs = &vecs[used.len()..];
    let rows = gens
        .par_iter()
        .zip(outs.par_iter())
        .zip(out_vecs.par_iter())
        .map(|((g, o), ov)| {
            let i =
                *index.get(g.pair_id.as_str()).ok_or_else(|| anyhow!("generation for unknown pair {}", g.pair_id))?;
            let l = doc2ci_score::score_prepared(&refs[&i], o);
            let rv = ref_vec[&i];
            Ok(Score {
                pair_id: g.pair_id.clone(),
                service: g.service.clone(),
                model: g.model.clone(),
                sample: g.sample,
                round: g.round,
                cosine: doc2ci_score::cosine(rv, ov),
                euclidean: doc2ci_score::euclidean(rv, ov),
                bleu: l.bleu,
                crystal_bleu: l.crystal_bleu,
                rouge_l: l.rouge_l,
                chrf: l.chrf,
                tree_edit: l.tree_edit,
                levenshtein: l.levenshtein,
                exact: l.exact == 1.0,
                kv_exact: l.kv_exact,
                kv_wildcard: l.kv_wildcard,
                truncated: refs[&i].truncated || o.truncated,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((rows, embedded))
}

fn finish<T: Serialize + DeserializeOwned>(
    wh: &Warehouse,
    node: &Node,
    key: &str,
    rows: &[T],
    note: Option<String>,
) -> Result<TaskOutput> {
    publish_delay();
    let output_hash = wh.write(&node.part, rows)?;
    wh.checkpoint(&node.part, key).clear();
    Ok(TaskOutput { output_hash, rows: rows.len() as u64, note })
}

/// For the crash harness only (`tests/crash/harness.py`): a pause between computing a partition and
/// publishing it, so that a kill can land inside even the stages that take milliseconds.
fn publish_delay() {
    if let Some(ms) = std::env::var("DOC2CI_TEST_STAGE_DELAY_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Streams a file's records through `convert`, checkpointing every `batch_size` records so a
/// killed run resumes after the last finished batch with no row lost or repeated.
#[allow(clippy::too_many_arguments)]
fn batched<T, F>(
    wh: &Warehouse,
    node: &Node,
    key: &str,
    cfg: &Config,
    path: &Path,
    format: &str,
    skip_bad: bool,
    ui: &Ui,
    mut convert: F,
) -> Result<(Vec<T>, Option<String>)>
where
    T: Serialize + DeserializeOwned,
    F: FnMut(Record, u64) -> std::result::Result<Option<T>, ImportError>,
{
    let batch_size = cfg.stages.import.batch_size as u64;
    let ckpt = wh.checkpoint(&node.part, key);
    let (mut rows, done, mut seq, mut skipped) = ckpt.resume::<T>()?;
    if done > 0 {
        ui.info(&format!("{}: resuming after {done} records", node.label()));
    }
    let delay = std::env::var("DOC2CI_TEST_BATCH_DELAY_MS").ok().and_then(|v| v.parse::<u64>().ok());
    let mut batch: Vec<T> = Vec::new();
    let mut consumed = 0u64;
    let mut first_bad: Vec<String> = Vec::new();
    let name = path.display();
    for rec in records(path, format)? {
        consumed += 1;
        if consumed <= done {
            continue;
        }
        let r = rec.and_then(|rec| convert(rec, consumed - 1));
        match r {
            Ok(Some(row)) => batch.push(row),
            Ok(None) => {}
            // A column missing from the header (or the first JSON record) is missing from every row:
            // skipping rows would "succeed" with nothing.
            Err(e) if e.missing_column.is_some() && (format != "jsonl" || consumed == 1) => bail!(
                "{name}: {} (file-level: no row of this file can be read; skip_bad_rows skips bad rows, not a missing column)",
                e.message
            ),
            Err(e) if skip_bad => {
                skipped += 1;
                if first_bad.len() < 3 {
                    first_bad.push(format!("{name}:{}: {}", e.line, e.message));
                }
            }
            Err(e) => bail!("{name}:{}: {}", e.line, e.message),
        }
        if consumed % batch_size == 0 {
            seq += 1;
            ckpt.commit(seq, consumed, skipped, &batch)?;
            rows.append(&mut batch);
            if let Some(ms) = delay {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
    }
    rows.append(&mut batch);
    let note = (skipped > 0)
        .then(|| format!("skipped {skipped} bad rows (skip_bad_rows = true), e.g. {}", first_bad.join("; ")));
    if let Some(n) = &note {
        ui.info(&format!("{}: {n}", node.label()));
    }
    Ok((rows, note))
}

type Records = Box<dyn Iterator<Item = std::result::Result<Record, ImportError>>>;

fn records(path: &Path, format: &str) -> Result<Records> {
    let name = path.display().to_string();
    match format {
        "llm4ci" | "csv" => {
            let it = doc2ci_import::csv_records(open_input(path)?)
                .map_err(|e| anyhow!("{name}:{}: {}", e.line, e.message))?;
            Ok(Box::new(it))
        }
        "jsonl" => Ok(Box::new(doc2ci_import::jsonl_records(BufReader::new(open_input(path)?)))),
        "benchmark" => {
            crate::release::verify(path)?;
            let f = path.join(crate::release::PAIRS_JSONL);
            Ok(Box::new(doc2ci_import::jsonl_records(BufReader::new(open_input(&f)?))))
        }
        "parquet" => Ok(Box::new(parquet_records(path)?.into_iter().map(Ok))),
        other => bail!("{name}: unknown format `{other}`"),
    }
}

/// Opens a file, decompressing gzip when its magic bytes say so (whatever its name).
pub fn open_input(path: &Path) -> Result<Box<dyn Read>> {
    let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut magic = [0u8; 2];
    let n = f.read(&mut magic)?;
    let f = File::open(path)?;
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(BufReader::new(f)))))
    } else {
        Ok(Box::new(BufReader::new(f)))
    }
}

/// Parquet rows as records of text fields; "line" is the 1-based row number.
fn parquet_records(path: &Path) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    let opts = FormatOptions::default();
    for b in warehouse::read_batches(path)? {
        let schema = b.schema();
        let fmts: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
            .collect::<std::result::Result<_, _>>()?;
        for row in 0..b.num_rows() {
            let fields = schema
                .fields()
                .iter()
                .zip(b.columns())
                .zip(&fmts)
                .map(|((f, col), fmt)| (f.name().clone(), (!col.is_null(row)).then(|| fmt.value(row).to_string())))
                .collect();
            out.push(Record { line: out.len() as u64 + 1, fields });
        }
    }
    Ok(out)
}
