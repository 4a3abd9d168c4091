//! The sample browser: a static page (`samples.html`) that filters every output of the study by
//! service, model, round, validity and metric range, and shows one pair's description, reference
//! and every model's output beside a line diff against the reference, with its scores, schema
//! errors (instance paths), validator findings and repair rounds.
//!
//! No server: the page loads `samples/index.js` (one compact columnar row per output, enough to
//! filter and sort) and, for the pair opened, the one `samples/chunk-N.js` that holds its texts.
//! Script tags, unlike `fetch`, work from `file://`, so the report opens from disk. At Doc2CI's
//! scale (53,808 outputs) the index is a few MB and a chunk a few hundred KB.

use std::collections::{BTreeMap, HashMap};

use doc2ci_rows::{Contamination, Generation, Lint, MetricInfo, Pair, Score, Validation};
use serde_json::{json, Value};

/// Pairs per chunk file: one chunk is what opening a pair costs.
const CHUNK_PAIRS: usize = 25;
/// Longest text kept per field: a hostile 100 MB output must not make the page unusable.
const MAX_TEXT: usize = 64 * 1024;

/// The rows the browser shows (all empty: no browser).
#[derive(Default)]
pub struct Samples<'a> {
    pub pairs: &'a [Pair],
    pub generations: &'a [Generation],
    pub validations: &'a [Validation],
    pub scores: &'a [Score],
    pub lints: &'a [Lint],
    /// The contamination screen's rows: the "recalled" filter, and each model's continuation of
    /// the pair's prefix beside the true suffix.
    pub contamination: &'a [Contamination],
    /// The reference leaves an output misses (service, reference, output), shown beside an answer
    /// that does not contain its reference; the engine passes the score stage's `missed_leaves`.
    pub missed: Option<&'a (dyn Fn(&str, &str, &str) -> Option<Vec<String>> + Sync)>,
}

/// Missed leaves listed per answer at most: the page shows what is missing, not a dump.
const MAX_MISSED: usize = 40;

type Key<'a> = (&'a str, &'a str, &'a str, u32, u32);

fn key<'a>(service: &'a str, pair: &'a str, model: &'a str, sample: u32, round: u32) -> Key<'a> {
    (service, pair, model, sample, round)
}

pub(crate) fn cap(s: &str) -> Value {
    if s.len() <= MAX_TEXT {
        return Value::from(s);
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Value::from(format!("{}\n… (truncated here: {} bytes in all)", &s[..end], s.len()))
}

fn round4(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1e4).round() / 1e4)
    } else {
        Value::Null
    }
}

/// Validity code of an output: 0 generation error, 1 parse error, 2 schema-invalid, 3 schema-valid,
/// -1 not validated. The page's validity filter reads these.
fn validity(g: &Generation, v: Option<&Validation>) -> i8 {
    match v {
        _ if g.error.is_some() => 0,
        None => -1,
        Some(v) if !v.parse_ok => 1,
        Some(v) if !v.schema_ok => 2,
        Some(_) => 3,
    }
}

/// The service's validators' verdict: 1 when every tool that judged the text passed it, 0 when
/// one rejected it, -1 when none judged it (the study's units count a lint verdict the same way).
fn lint_code(ls: &[&Lint]) -> i8 {
    let judged: Vec<bool> = ls.iter().filter(|l| l.kind != "audit").filter_map(|l| l.ok).collect();
    match judged.is_empty() {
        true => -1,
        false => judged.iter().all(|&ok| ok) as i8,
    }
}

/// The screen's verdict on a model's real reference of a pair: 1 high-risk (recalled), 0 clean,
/// 2 too short to screen, -1 not screened (or its request failed). The page's screen filter
/// reads these.
fn screen_code(c: Option<&&Contamination>) -> i8 {
    match c.map(|c| c.status.as_str()) {
        Some("high_risk") => 1,
        Some("clean") => 0,
        Some("too_short") => 2,
        _ => -1,
    }
}

/// What the page shows of one screen row: the prefix, the true suffix and the continuation.
fn screen_view(c: &Contamination) -> Value {
    json!({
        "variant": c.variant, "status": c.status, "mode": c.mode, "flags": c.flags,
        "prefix": c.prefix.as_deref().map(cap), "suffix": c.suffix.as_deref().map(cap),
        "continuation": c.continuation.as_deref().map(cap), "error": c.error.as_deref().map(cap),
        "s": c.s.map(round4), "t": c.t.map(round4), "p": c.p.map(round4), "l": c.l.map(round4), "b": c.b.map(round4),
        "min_k": c.min_k.map(round4), "twin_edits": c.twin_edits,
    })
}

/// One answer as the pages show it (`answer.js`'s `outputView`): its texts capped, its verdicts,
/// scores, validators' findings and the reference leaves it misses.
pub(crate) fn answer(
    g: &Generation,
    v: Option<&Validation>,
    sc: Option<&Score>,
    ls: &[&Lint],
    metrics: &[&MetricInfo],
    missed: Option<Vec<String>>,
) -> Value {
    let score_obj: serde_json::Map<String, Value> = metrics
        .iter()
        .filter_map(|m| sc.and_then(|s| s.get(m.name)).map(|x| (m.name.to_string(), round4(x.as_f64()))))
        .collect();
    let lint_list: Vec<Value> = ls
        .iter()
        .map(|l| {
            json!({
                "tool": l.tool, "kind": l.kind, "ok": l.ok, "note": l.note,
                "findings": l.findings.iter().take(50).map(|f| {
                    let at = f.line.map(|n| format!("line {n}: ")).unwrap_or_default();
                    cap(&format!("{at}{} ({})", f.message, f.rule))
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let missed = missed.map(|m| {
        let n = m.len();
        let mut shown: Vec<Value> = m.into_iter().take(MAX_MISSED).map(|l| cap(&l)).collect();
        if n > MAX_MISSED {
            shown.push(Value::from(format!("… and {} more", n - MAX_MISSED)));
        }
        shown
    });
    json!({
        "model": g.model, "sample": g.sample, "round": g.round,
        "output": g.output.as_deref().map(cap), "error": g.error.as_deref().map(cap),
        "degenerate": g.degenerate_kind.as_deref().or(g.degenerate.then_some("degenerate")),
        "finish": g.finish_reason,
        "parse_ok": v.map(|v| v.parse_ok), "schema_ok": v.map(|v| v.schema_ok), "fragment": v.map(|v| v.fragment),
        "errors": v.map(|v| v.errors.iter().take(50).map(|e| cap(e)).collect::<Vec<_>>()),
        "scores": score_obj, "truncated": sc.map(|s| s.truncated), "lint": lint_list, "missed": missed,
    })
}

/// A page of the report's HTML templates with the shared answer view and style filled in; the
/// title (escaped) last, so no text of it is ever taken for a placeholder.
pub(crate) fn page(template: &str, title: &str) -> String {
    template
        .replace("{{STYLE}}", include_str!("answer.css"))
        .replace("{{ANSWER_JS}}", include_str!("answer.js"))
        .replace("{{TITLE}}", &crate::esc(title))
}

/// `samples.html` and its data files, or nothing when there are no generations.
pub fn files(
    s: &Samples,
    title: &str,
    services: &BTreeMap<String, String>,
    metrics: &[MetricInfo],
) -> Vec<(String, String)> {
    if s.generations.is_empty() {
        return vec![];
    }
    let vals: HashMap<Key, &Validation> =
        s.validations.iter().map(|v| (key(&v.service, &v.pair_id, &v.model, v.sample, v.round), v)).collect();
    let scores: HashMap<Key, &Score> =
        s.scores.iter().map(|v| (key(&v.service, &v.pair_id, &v.model, v.sample, v.round), v)).collect();
    let mut lints: HashMap<Key, Vec<&Lint>> = HashMap::new();
    for l in s.lints {
        lints.entry(key(&l.service, &l.pair_id, &l.model, l.sample, l.round)).or_default().push(l);
    }
    let metrics: Vec<&MetricInfo> =
        metrics.iter().filter(|m| s.scores.iter().take(1000).any(|r| r.get(m.name).is_some())).collect();
    // (service, pair, model) → the screen's rows, the real reference first.
    let mut screens: HashMap<(&str, &str, &str), Vec<&Contamination>> = HashMap::new();
    for c in s.contamination {
        screens.entry((&c.service, &c.pair_id, &c.model)).or_default().push(c);
    }
    for v in screens.values_mut() {
        v.sort_by_key(|c| c.variant != "real");
    }

    // Pairs in report order: services as configured, then the pair's position in its source.
    let svc_order: Vec<&String> = services.keys().collect();
    let svc_idx = |svc: &str| svc_order.iter().position(|s| s.as_str() == svc);
    let mut pairs: Vec<&Pair> = s.pairs.iter().filter(|p| svc_idx(&p.service).is_some()).collect();
    pairs.sort_by_key(|p| (svc_idx(&p.service), p.position, p.pair_id.clone()));
    let pair_idx: HashMap<(&str, &str), usize> =
        pairs.iter().enumerate().map(|(i, p)| ((p.service.as_str(), p.pair_id.as_str()), i)).collect();

    let mut gens: Vec<(usize, &Generation)> = s
        .generations
        .iter()
        .filter_map(|g| pair_idx.get(&(g.service.as_str(), g.pair_id.as_str())).map(|&i| (i, g)))
        .collect();
    gens.sort_by(|a, b| (a.0, &a.1.model, a.1.sample, a.1.round).cmp(&(b.0, &b.1.model, b.1.sample, b.1.round)));
    let mut last_round: HashMap<(usize, &str, u32), u32> = HashMap::new();
    for (p, g) in &gens {
        let e = last_round.entry((*p, g.model.as_str(), g.sample)).or_default();
        *e = (*e).max(g.round);
    }
    let models: Vec<&str> = {
        let mut m: Vec<&str> = gens.iter().map(|(_, g)| g.model.as_str()).collect();
        m.sort_unstable();
        m.dedup();
        m
    };
    let model_idx: HashMap<&str, usize> = models.iter().enumerate().map(|(i, m)| (*m, i)).collect();

    // The index: one column per field, one entry per output.
    let (mut cp, mut cm, mut cs, mut cr, mut clast, mut cv, mut cl, mut cc) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut cx: Vec<Vec<Value>> = vec![Vec::with_capacity(gens.len()); metrics.len()];
    // Pair by pair (the outputs are sorted by pair), each chunk written out as soon as its pairs are
    // done: only one chunk's records are ever held as JSON values.
    let mut chunk_files: Vec<(String, String)> = vec![];
    let mut chunk: Vec<Value> = vec![];
    let mut index_pairs = Vec::with_capacity(pairs.len());
    let mut next = gens.iter().peekable();
    for (i, pr) in pairs.iter().enumerate() {
        let mut outs: Vec<Value> = vec![];
        while let Some((p, g)) = next.next_if(|(p, _)| *p == i) {
            let k = key(&g.service, &g.pair_id, &g.model, g.sample, g.round);
            let v = vals.get(&k).copied();
            let sc = scores.get(&k).copied();
            let ls: &[&Lint] = lints.get(&k).map_or(&[], |v| v.as_slice());
            cp.push(*p);
            cm.push(model_idx[g.model.as_str()]);
            cs.push(g.sample);
            cr.push(g.round);
            clast.push((last_round[&(*p, g.model.as_str(), g.sample)] == g.round) as u8);
            cv.push(validity(g, v));
            cl.push(lint_code(ls));
            let screen = screens.get(&(g.service.as_str(), g.pair_id.as_str(), g.model.as_str()));
            cc.push(screen_code(screen.and_then(|v| v.iter().find(|c| c.variant == "real"))));
            for (col, m) in cx.iter_mut().zip(&metrics) {
                col.push(sc.and_then(|s| s.get(m.name)).map_or(Value::Null, |x| round4(x.as_f64())));
            }
            // Which reference leaves the answer misses, where it does not contain its reference.
            let contained = sc.and_then(|s| s.get("sem_contains")).map(|v| v.as_f64() == 1.0);
            let missed = match (s.missed, contained, g.output.as_deref()) {
                (Some(f), Some(false), Some(out)) => f(&g.service, &pr.reference, out),
                _ => None,
            };
            outs.push(answer(g, v, sc, ls, &metrics, missed));
        }
        let mut screened: Vec<(&str, Value)> = screens
            .iter()
            .filter(|((svc, pair, _), _)| *svc == pr.service && *pair == pr.pair_id)
            .map(|((_, _, m), v)| (*m, Value::Array(v.iter().map(|c| screen_view(c)).collect())))
            .collect();
        screened.sort_by(|a, b| a.0.cmp(b.0));
        let screened: serde_json::Map<String, Value> = screened.into_iter().map(|(m, v)| (m.to_string(), v)).collect();
        let n = i / CHUNK_PAIRS;
        index_pairs.push(json!([svc_idx(&pr.service), pr.pair_id, pr.title, n]));
        chunk.push(json!({
            "key": format!("{}/{}", pr.service, pr.pair_id), "service": pr.service, "title": pr.title, "url": pr.url,
            "description": cap(&pr.description), "reference": cap(&pr.reference), "copies": pr.n_copies,
            "outputs": outs, "screens": screened,
        }));
        if chunk.len() == CHUNK_PAIRS || i + 1 == pairs.len() {
            let records = Value::Array(std::mem::take(&mut chunk));
            chunk_files.push((format!("samples/chunk-{n}.js"), format!("doc2ciChunk({n},{records});\n")));
        }
    }
    let values: serde_json::Map<String, Value> =
        metrics.iter().zip(cx).map(|(m, col)| (m.name.to_string(), Value::Array(col))).collect();
    let index = json!({
        "title": title,
        "services": svc_order.iter().map(|s| json!([s, services[*s]])).collect::<Vec<_>>(),
        "models": models,
        "metrics": metrics.iter().map(|m| json!({"name": m.name, "higher": m.higher_is_better})).collect::<Vec<_>>(),
        "pairs": index_pairs,
        "rows": {"p": cp, "m": cm, "s": cs, "r": cr, "last": clast, "v": cv, "l": cl, "c": cc},
        "values": values,
    });
    let mut files = vec![
        ("samples.html".to_string(), page(PAGE, title)),
        ("samples/index.js".to_string(), format!("doc2ciIndex({index});\n")),
    ];
    files.extend(chunk_files);
    files
}

/// The page: its script builds the filters from the index, keeps every choice in the URL's
/// fragment (a link opens the same view) and renders with DOM calls only (no text becomes markup).
const PAGE: &str = include_str!("browser.html");

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(pair: &str, model: &str, round: u32, out: &str) -> Generation {
        Generation {
            pair_id: pair.into(),
            service: "gha".into(),
            model: model.into(),
            sample: 0,
            round,
            output: Some(out.into()),
            ..Generation::default()
        }
    }

    fn pair(id: &str, position: u64) -> Pair {
        Pair {
            pair_id: id.into(),
            service: "gha".into(),
            url: "http://example.com/x".into(),
            title: format!("title {id}"),
            description: "Run the tests".into(),
            reference: "on: push\n".into(),
            n_copies: 1,
            urls: vec![],
            source: "docs".into(),
            source_id: id.into(),
            source_ids: vec![],
            position,
            leak: None,
            published: None,
            published_source: None,
            not_before: None,
        }
    }

    fn val(pair: &str, model: &str, round: u32, schema_ok: bool) -> Validation {
        Validation {
            pair_id: pair.into(),
            service: "gha".into(),
            model: model.into(),
            sample: 0,
            round,
            parse_ok: true,
            schema_ok,
            errors: if schema_ok { vec![] } else { vec!["/jobs: 'build' is not of type 'object'".into()] },
            fragment: false,
        }
    }

    fn parse_js(text: &str, call: &str) -> Value {
        let body = text.strip_prefix(call).and_then(|t| t.strip_suffix(");\n")).expect("a call of the loader");
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn index_rows_and_chunks_carry_validity_rounds_and_capped_texts() {
        let huge = "x".repeat(MAX_TEXT * 3);
        let pairs: Vec<Pair> = (0..30).map(|i| pair(&format!("p{i:02}"), 30 - i)).collect();
        let gens = vec![gen("p00", "m1", 0, "on: pull"), gen("p00", "m1", 1, "on: push"), gen("p01", "m2", 0, &huge)];
        let vals = vec![val("p00", "m1", 0, false), val("p00", "m1", 1, true)];
        let services = BTreeMap::from([("gha".to_string(), "GitHub Actions".to_string())]);
        let s = Samples { pairs: &pairs, generations: &gens, validations: &vals, ..Default::default() };
        let files: BTreeMap<String, String> = files(&s, "T", &services, &[]).into_iter().collect();
        assert!(files["samples.html"].contains("samples/index.js"));
        // 30 pairs → two chunks; position orders them (p29 first).
        assert!(files.contains_key("samples/chunk-1.js") && !files.contains_key("samples/chunk-2.js"));
        let ix = parse_js(&files["samples/index.js"], "doc2ciIndex(");
        assert_eq!(ix["pairs"][0][1], "p29");
        let rows = &ix["rows"];
        // Rows follow the pairs' order (p01 before p00), then model, sample and round.
        assert_eq!(rows["r"], json!([0, 0, 1]));
        assert_eq!(rows["last"], json!([1, 0, 1]), "round 1 is p00/m1's last round");
        assert_eq!(rows["v"], json!([-1, 2, 3]));
        assert_eq!(rows["l"], json!([-1, -1, -1]));
        let c1 = parse_js(&files["samples/chunk-1.js"], "doc2ciChunk(1,");
        let p00 = c1.as_array().unwrap().iter().find(|p| p["key"] == "gha/p00").unwrap();
        assert_eq!(p00["outputs"].as_array().unwrap().len(), 2);
        assert_eq!(p00["outputs"][0]["errors"][0], "/jobs: 'build' is not of type 'object'");
        let p01 = c1.as_array().unwrap().iter().find(|p| p["key"] == "gha/p01").unwrap();
        let out = p01["outputs"][0]["output"].as_str().unwrap();
        assert!(out.len() < MAX_TEXT + 100 && out.ends_with(&format!("{} bytes in all)", huge.len())));
    }
}
