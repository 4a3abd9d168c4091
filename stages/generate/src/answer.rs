//! What a `generations` row keeps of a model's answer, wherever the answer came from: a live
//! request, the request cache, a provider batch or a batch results file. One function, so the
//! four cannot disagree on fence stripping, the degenerate flag or the cost.

use doc2ci_rows::{Generation, RowKey};

/// An answer as every backend reports it, reduced to what a row keeps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub text: String,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub latency_ms: f64,
    /// `length` means the answer hit `max_tokens`.
    pub finish_reason: Option<String>,
    pub attempts: u32,
}

/// The row of one answer, or of the failure (already worded: who failed and how) that left none.
/// `prices` per 1k input and output tokens, when known.
pub fn answer_row(key: RowKey, answer: Result<Answer, String>, prices: (Option<f64>, Option<f64>)) -> Generation {
    let mut row = Generation::at(key);
    match answer {
        Ok(a) => {
            let output = crate::strip_fences(&a.text);
            let hit_cap = a.finish_reason.as_deref() == Some("length");
            let kind = crate::degenerate(&output, hit_cap);
            row.cost = match prices {
                (None, None) => None,
                (pi, po) => Some(
                    pi.unwrap_or(0.0) * a.prompt_tokens.unwrap_or(0) as f64 / 1000.0
                        + po.unwrap_or(0.0) * a.completion_tokens.unwrap_or(0) as f64 / 1000.0,
                ),
            };
            row.output = Some(output);
            row.raw_output = Some(a.text);
            row.latency_ms = Some(a.latency_ms);
            row.prompt_tokens = a.prompt_tokens;
            row.completion_tokens = a.completion_tokens;
            row.degenerate = kind.is_some();
            row.degenerate_kind = kind.map(|k| k.as_str().to_string());
            row.finish_reason = a.finish_reason;
            row.attempts = Some(a.attempts);
        }
        Err(e) => row.error = Some(e),
    }
    row
}

/// A batch request's `custom_id`: its pair, sample and round (pair ids never hold `/`), so a
/// results file names the row each line belongs to.
pub fn custom_id(pair_id: &str, sample: u32, round: u32) -> String {
    format!("{pair_id}/{sample}/{round}")
}

/// Parses a [`custom_id`] back: (pair id, sample, round).
pub fn parse_custom_id(id: &str) -> Option<(&str, u32, u32)> {
    let mut it = id.rsplitn(3, '/');
    let round = it.next()?.parse().ok()?;
    let sample = it.next()?.parse().ok()?;
    Some((it.next().filter(|p| !p.is_empty())?, sample, round))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_ids_round_trip_and_refuse_what_is_not_one() {
        assert_eq!(parse_custom_id(&custom_id("p-1", 2, 3)), Some(("p-1", 2, 3)));
        for bad in ["", "p/1", "/1/2", "p/x/2", "p/1/-2"] {
            assert_eq!(parse_custom_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_answer_row_strips_fences_and_costs_the_priced_side() {
        let key = RowKey { pair_id: "p".into(), service: "s".into(), model: "m".into(), sample: 0, round: 1 };
        let a = Answer {
            text: "```yaml\na: 1\n```".into(),
            prompt_tokens: Some(1000),
            completion_tokens: Some(500),
            finish_reason: Some("length".into()),
            attempts: 2,
            ..Default::default()
        };
        let row = answer_row(key.clone(), Ok(a), (Some(0.5), None));
        assert_eq!(row.output.as_deref(), Some("a: 1\n"));
        assert_eq!(row.cost, Some(0.5));
        assert_eq!((row.round, row.attempts), (1, Some(2)));
        let failed = answer_row(key, Err("model `m`: failed: x".into()), (None, None));
        assert_eq!((failed.output, failed.error.as_deref(), failed.cost), (None, Some("model `m`: failed: x"), None));
    }
}
