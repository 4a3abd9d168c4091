//! [`score_all`]: one generations partition scored against its pairs, as the engine's score stage
//! writes it to `scores`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use doc2ci_rows::{Generation, Pair, Score};
use rayon::prelude::*;

use crate::{CrystalContext, Needs, Prepared, Sides, METRICS};

/// What the embedding callback returns: a vector per text, in order, and how many texts it had to
/// embed now (not found in its cache), which the stage reports.
pub type Embedded = (Vec<Arc<Vec<f32>>>, usize);

#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    #[error("generation for unknown pair {0}")]
    UnknownPair(String),
    #[error("the embedder returned {got} vectors for {expected} texts")]
    Embeddings { expected: usize, got: usize },
}

/// Every registered metric of every generation against its pair's reference, and the callback's
/// count of newly embedded texts.
///
/// The CrystalBLEU context comes from the references of all `pairs` (the service's), so a
/// partition's scores do not depend on which pairs its model answered. Each used reference is
/// prepared once (many outputs share it). `embed` is called once, with the cleaned texts of the
/// used references (in pair order) then of every output (in generation order); it is not called
/// when no metric needs embeddings. Its error is returned as is.
pub fn score_all<E: From<ScoreError>>(
    pairs: &[Pair],
    gens: &[Generation],
    embed: impl FnOnce(&[&str]) -> Result<Embedded, E>,
) -> Result<(Vec<Score>, usize), E> {
    let ctx = CrystalContext::from_references(pairs.iter().map(|p| p.reference.as_str()));
    let index: HashMap<&str, usize> = pairs.iter().enumerate().map(|(i, p)| (p.pair_id.as_str(), i)).collect();
    let used: Vec<usize> = {
        let mut u: Vec<usize> = gens.iter().filter_map(|g| index.get(g.pair_id.as_str()).copied()).collect();
        u.sort_unstable();
        u.dedup();
        u
    };
    let refs: HashMap<usize, Prepared> =
        used.par_iter().map(|&i| (i, Prepared::for_service(&pairs[i].reference, &ctx, &pairs[i].service))).collect();
    // An output is prepared where it is scored and dropped after: each is scored once, and a
    // prepared text holds its n-gram tables (hundreds of bytes per character), so a partition's
    // outputs prepared at once held hundreds of megabytes. Only their cleaned texts are kept.
    fn output(g: &Generation) -> &str {
        g.output.as_deref().unwrap_or("")
    }

    let (vecs, embedded) = if METRICS.iter().any(|m| m.needs == Needs::Embeddings) {
        let cleaned: Vec<String> = gens.par_iter().map(|g| crate::cleaned(output(g))).collect();
        let mut texts: Vec<&str> = used.iter().map(|i| refs[i].clean()).collect();
        texts.extend(cleaned.iter().map(String::as_str));
        let (vecs, embedded) = embed(&texts)?;
        if vecs.len() != texts.len() {
            return Err(ScoreError::Embeddings { expected: texts.len(), got: vecs.len() }.into());
        }
        (Some(vecs), embedded)
    } else {
        (None, 0)
    };
    let ref_vec: HashMap<usize, &[f32]> = match &vecs {
        Some(v) => used.iter().zip(v).map(|(i, v)| (*i, v.as_slice())).collect(),
        None => HashMap::new(),
    };
    let out_vec = |k: usize| vecs.as_ref().map(|v| v[used.len() + k].as_slice());

    let rows = gens
        .par_iter()
        .enumerate()
        .map(|(k, g)| {
            let i = *index.get(g.pair_id.as_str()).ok_or_else(|| ScoreError::UnknownPair(g.pair_id.clone()))?;
            let reference = &refs[&i];
            let o = &Prepared::for_service(output(g), &ctx, &g.service);
            let sides = Sides { reference, output: o, embeddings: out_vec(k).map(|ov| (ref_vec[&i], ov)) };
            let metrics = METRICS
                .iter()
                .map(|m| {
                    let v = m.score(&sides).expect("every metric is computable once embeddings are present");
                    (Cow::Borrowed(m.info.name), v)
                })
                .collect();
            Ok(Score {
                pair_id: g.pair_id.clone(),
                service: g.service.clone(),
                model: g.model.clone(),
                sample: g.sample,
                round: g.round,
                metrics,
                truncated: reference.truncated || o.truncated,
            })
        })
        .collect::<Result<Vec<_>, ScoreError>>()?;
    Ok((rows, embedded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{euclidean, score_prepared, MetricValue};
    use doc2ci_testkit::pair;

    fn generation(pair_id: &str, sample: u32, output: Option<&str>) -> Generation {
        doc2ci_testkit::generation(pair_id, "m", (sample, 0), output)
    }

    /// A deterministic stand-in for the embedder: a text's vector depends on the text only.
    fn vector(t: &str) -> Arc<Vec<f32>> {
        Arc::new(vec![t.len() as f32 + 1.0, t.bytes().filter(|b| *b == b':').count() as f32, 1.0])
    }

    #[test]
    fn scores_every_metric_in_registry_order_with_one_embedding_call() {
        let pairs = [
            pair("a", "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n"),
            pair("b", "unused: reference\n"),
            pair("c", "version: 2.1\njobs: {}\n"),
        ];
        let gens = [
            generation("c", 0, Some("version: 2.1\njobs: {}\n")),
            generation("a", 0, Some("on: [push]\njobs:\n  t: {runs-on: ubuntu-22.04}\n")),
            generation("a", 1, None),
        ];
        let mut calls = Vec::new();
        let (rows, embedded) = score_all(&pairs, &gens, |texts: &[&str]| {
            calls.push(texts.iter().map(|t| t.to_string()).collect::<Vec<_>>());
            Ok::<_, ScoreError>((texts.iter().map(|t| vector(t)).collect(), 4))
        })
        .unwrap();
        assert_eq!(embedded, 4, "the callback's count is passed through");
        // Used references in pair order (b is not used), then every output in generation order.
        let ctx = CrystalContext::from_references(pairs.iter().map(|p| p.reference.as_str()));
        let clean = |t: &str| Prepared::new(t, &ctx).clean().to_string();
        let expected = vec![
            clean(&pairs[0].reference),
            clean(&pairs[2].reference),
            clean(gens[0].output.as_deref().unwrap()),
            clean(gens[1].output.as_deref().unwrap()),
            String::new(),
        ];
        assert_eq!(calls, vec![expected]);

        let names: Vec<&str> = METRICS.iter().map(|m| m.info.name).collect();
        for (row, g) in rows.iter().zip(&gens) {
            assert_eq!((row.pair_id.as_str(), row.sample, row.truncated), (g.pair_id.as_str(), g.sample, false));
            assert_eq!(row.metrics.iter().map(|(n, _)| n.as_ref()).collect::<Vec<_>>(), names);
            let reference = &pairs.iter().find(|p| p.pair_id == g.pair_id).unwrap().reference;
            let output = g.output.as_deref().unwrap_or("");
            let lexical = score_prepared(&Prepared::new(reference, &ctx), &Prepared::new(output, &ctx));
            for (name, v) in &row.metrics {
                if let Some(l) = lexical.get(name) {
                    assert_eq!(*v, l, "{name}");
                }
            }
            let (rv, ov) = (vector(&clean(reference)), vector(&clean(output)));
            assert_eq!(row.get("cosine"), Some(MetricValue::Float(crate::cosine(&rv, &ov))));
            assert_eq!(row.get("euclidean"), Some(MetricValue::Float(euclidean(&rv, &ov))));
        }
        assert_eq!(rows[0].get("exact"), Some(MetricValue::Bool(true)));
        assert_eq!(rows[1].get("exact"), Some(MetricValue::Bool(false)));
    }

    #[test]
    fn unknown_pairs_and_embedder_errors_fail_the_partition() {
        #[derive(Debug, PartialEq)]
        enum E {
            Score(String),
            Embed,
        }
        impl From<ScoreError> for E {
            fn from(e: ScoreError) -> E {
                E::Score(e.to_string())
            }
        }
        let pairs = [pair("a", "on: push\n")];
        let ok = |t: &[&str]| Ok::<_, E>((t.iter().map(|t| vector(t)).collect(), 0));
        let e = score_all(&pairs, &[generation("zz", 0, Some("x: 1"))], ok).unwrap_err();
        assert_eq!(e, E::Score("generation for unknown pair zz".into()));
        let e = score_all(&pairs, &[generation("a", 0, Some("x: 1"))], |_: &[&str]| Err::<Embedded, _>(E::Embed));
        assert_eq!(e.unwrap_err(), E::Embed, "the callback's error is returned as is");
        let short = |_: &[&str]| Ok::<_, E>((vec![vector("x")], 0));
        let e = score_all(&pairs, &[generation("a", 0, Some("x: 1"))], short).unwrap_err();
        assert_eq!(e, E::Score("the embedder returned 1 vectors for 2 texts".into()));
    }

    #[test]
    fn an_overlong_text_flags_its_row() {
        let pairs = [pair("a", "on: push\n")];
        let huge = "a: b\n".repeat(crate::MAX_SCORED_BYTES / 4);
        let gens = [generation("a", 0, Some(&huge)), generation("a", 1, Some("on: push\n"))];
        let ok = |t: &[&str]| Ok::<_, ScoreError>((t.iter().map(|t| vector(t)).collect(), 0));
        let (rows, _) = score_all(&pairs, &gens, ok).unwrap();
        assert_eq!(rows.iter().map(|r| r.truncated).collect::<Vec<_>>(), [true, false]);
    }
}
