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

use crate::config::Config;
use crate::engine::Node;
use crate::ui::Ui;
use crate::warehouse::{self, Partition, Warehouse, GENERATIONS, MODELS, PAIRS, PAIRS_RAW};

#[derive(Debug, Clone)]
pub enum Task {
    ImportPairs { source: usize },
    Dedupe { service: String, inputs: Vec<Partition> },
    Models,
    ImportOutputs { model: usize },
}

pub struct TaskOutput {
    pub output_hash: String,
    pub rows: u64,
    pub note: Option<String>,
}

pub fn build_nodes(cfg: &Config) -> Result<Vec<Node>> {
    let mut nodes: Vec<Node> = Vec::new();
    for (i, s) in cfg.sources.iter().enumerate() {
        nodes.push(Node {
            stage: "import",
            part: Partition::new(PAIRS_RAW, &[&s.service, &s.name]),
            deps: vec![],
            files: vec![s.path.clone()],
            params: json!({"format": s.format, "columns": s.columns, "skip_bad_rows": s.skip_bad_rows}),
            version: 1,
            task: Task::ImportPairs { source: i },
            model: None,
        });
    }
    for svc in &cfg.services {
        let deps: Vec<usize> = nodes.iter().enumerate().filter(|(_, n)| n.part.get("service") == Some(&svc.name)).map(|(i, _)| i).collect();
        if deps.is_empty() {
            continue;
        }
        let inputs = deps.iter().map(|&d| nodes[d].part.clone()).collect();
        nodes.push(Node {
            stage: "dedupe",
            part: Partition::new(PAIRS, &[&svc.name]),
            deps,
            files: vec![],
            params: serde_json::to_value(&cfg.stages.dedupe)?,
            version: 1,
            task: Task::Dedupe { service: svc.name.clone(), inputs },
            model: None,
        });
    }
    nodes.push(Node {
        stage: "models",
        part: Partition::new(MODELS, &[]),
        deps: vec![],
        files: vec![],
        params: serde_json::to_value(model_rows(cfg))?,
        version: 1,
        task: Task::Models,
        model: None,
    });
    for (i, m) in cfg.models.iter().enumerate() {
        if m.backend != "import" {
            continue;
        }
        let service = m.service.clone().expect("config checked: import models name their service");
        let Some(dedupe) = nodes.iter().position(|n| n.stage == "dedupe" && n.part.get("service") == Some(service.as_str())) else {
            bail!("model `{}`: service `{service}` has no source of pairs", m.name);
        };
        nodes.push(Node {
            stage: "import",
            part: Partition::new(GENERATIONS, &[&service, &m.name]),
            deps: vec![dedupe],
            files: vec![m.path.clone().expect("config checked: import models have a path")],
            params: json!({"format": m.format, "columns": m.columns, "skip_bad_rows": m.skip_bad_rows, "source": m.source}),
            version: 1,
            task: Task::ImportOutputs { model: i },
            model: Some(m.name.clone()),
        });
    }
    Ok(nodes)
}

fn model_rows(cfg: &Config) -> Vec<ModelRow> {
    cfg.models
        .iter()
        .map(|m| ModelRow { model: m.name.clone(), backend: m.backend.clone(), family: m.family.clone(), size_b: m.size_b, code: m.code, proprietary: m.proprietary })
        .collect()
}

pub fn execute(node: &Node, cfg: &Config, wh: &Warehouse, key: &str, ui: &Ui) -> Result<TaskOutput> {
    match &node.task {
        Task::ImportPairs { source } => {
            let s = &cfg.sources[*source];
            let map = ColumnMap::for_format(&s.format, &s.columns).map_err(|e| anyhow!("source `{}`: {e}", s.name))?;
            let mut position = 0u64;
            let (rows, note) = batched(wh, node, key, cfg, &s.path, &s.format, s.skip_bad_rows, ui, |rec, idx| {
                position = idx;
                doc2ci_import::to_raw_pair(&rec, &map, &s.service, &s.name, position).map(Some)
            })?;
            finish(wh, node, key, &rows, note)
        }
        Task::Dedupe { service, inputs } => {
            let mut raw: Vec<RawPair> = Vec::new();
            for p in inputs {
                raw.extend(wh.read::<RawPair>(p)?);
            }
            let pairs = doc2ci_dedupe::dedupe(&raw, cfg.stages.dedupe.mode);
            let distinct: std::collections::HashSet<(String, String)> = pairs.iter().map(|p| (doc2ci_rows::collapse_ws(&p.title), doc2ci_rows::collapse_ws(&p.description))).collect();
            let note = format!("{service}: {} raw → {} kept, {} copies dropped, {} distinct title+description", raw.len(), pairs.len(), raw.len() - pairs.len(), distinct.len());
            finish(wh, node, key, &pairs, Some(note))
        }
        Task::Models => finish(wh, node, key, &model_rows(cfg), None),
        Task::ImportOutputs { model } => {
            let m = &cfg.models[*model];
            let service = m.service.as_deref().unwrap_or_default();
            let pairs: Vec<Pair> = wh.read(&Partition::new(PAIRS, &[service]))?;
            let map = ColumnMap::for_format(&m.format, &m.columns).map_err(|e| anyhow!("model `{}`: {e}", m.name))?;
            let mut att = doc2ci_import::Attacher::new(&pairs, m.source.as_deref().unwrap_or_default(), service, &m.name);
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
    }
}

fn finish<T: Serialize + DeserializeOwned>(wh: &Warehouse, node: &Node, key: &str, rows: &[T], note: Option<String>) -> Result<TaskOutput> {
    let output_hash = wh.write(&node.part, rows)?;
    wh.checkpoint(&node.part, key).clear();
    Ok(TaskOutput { output_hash, rows: rows.len() as u64, note })
}

/// Streams a file's records through `convert`, checkpointing every `batch_size` records so a
/// killed run resumes after the last finished batch with no row lost or repeated.
#[allow(clippy::too_many_arguments)]
fn batched<T, F>(wh: &Warehouse, node: &Node, key: &str, cfg: &Config, path: &Path, format: &str, skip_bad: bool, ui: &Ui, mut convert: F) -> Result<(Vec<T>, Option<String>)>
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
    let note = (skipped > 0).then(|| format!("skipped {skipped} bad rows (skip_bad_rows = true), e.g. {}", first_bad.join("; ")));
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
            let it = doc2ci_import::csv_records(open_input(path)?).map_err(|e| anyhow!("{name}:{}: {}", e.line, e.message))?;
            Ok(Box::new(it))
        }
        "jsonl" => Ok(Box::new(doc2ci_import::jsonl_records(BufReader::new(open_input(path)?)))),
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
        let fmts: Vec<ArrayFormatter> = b.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &opts)).collect::<std::result::Result<_, _>>()?;
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
