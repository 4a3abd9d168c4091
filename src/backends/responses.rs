//! `backend = "openai-responses"`: OpenAI's Responses API (`POST {base_url}/responses`), for
//! models served only there. Same pool, limits, retries and key handling as `openai`; the request
//! is `input` + `max_output_tokens` and the answer is the text of the `message` output items.

use std::sync::Arc;

use anyhow::Result;
use doc2ci_llm::{Backend, LlmError, Parsed, Pool, Reply, Request};
use serde_json::{json, Map, Value};

use super::{GenSettings, Kind};

pub const KIND: Kind = Kind::api_server("openai-responses", build);

fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    let key = doc2ci_llm::api_key("openai-responses", &g.key.model_id, g.api_key_env.as_deref())?;
    let pool = Pool::new("openai-responses", &g.base_urls, "/responses", &g.key.model_id, super::limits(g))?;
    Ok(Arc::new(Responses { pool, model: g.key.model_id.clone(), key }))
}

struct Responses {
    pool: Pool,
    model: String,
    key: Option<String>,
}

impl Responses {
    fn body(&self, req: &Request) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("input".into(), json!(req.messages));
        body.insert("temperature".into(), json!(req.temperature));
        body.insert("max_output_tokens".into(), json!(req.max_tokens));
        // Nothing of a benchmark run is kept on the provider's side.
        body.insert("store".into(), json!(false));
        for (k, v) in &req.extra {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }
}

/// The `output_text` parts of every `message` item; `incomplete` because of `max_output_tokens`
/// is reported as `length`, like chat completions' finish reason, so degenerate detection agrees.
fn parse(v: &Value) -> Result<Parsed, String> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(format!("error object in a 200 response: {err}"));
    }
    let items = v.get("output").and_then(|o| o.as_array()).ok_or("no `output` array in the response")?;
    let mut text = String::new();
    for item in items.iter().filter(|i| i.get("type").and_then(|t| t.as_str()) == Some("message")) {
        for part in item.get("content").and_then(|c| c.as_array()).into_iter().flatten() {
            if part.get("type").and_then(|t| t.as_str()) == Some("output_text") {
                text.push_str(part.get("text").and_then(|t| t.as_str()).ok_or("an output_text part has no text")?);
            }
        }
    }
    let finish = match v.get("status").and_then(|s| s.as_str()) {
        Some("incomplete") => {
            let why = v.pointer("/incomplete_details/reason").and_then(|r| r.as_str()).unwrap_or("incomplete");
            Some(if why == "max_output_tokens" { "length".to_string() } else { why.to_string() })
        }
        Some(s) => Some(if s == "completed" { "stop".to_string() } else { s.to_string() }),
        None => None,
    };
    let num = |k: &str| v.pointer(&format!("/usage/{k}")).and_then(|n| n.as_u64()).map(|n| n as u32);
    Ok((text, finish, num("input_tokens"), num("output_tokens")))
}

#[doc2ci_llm::async_trait]
impl Backend for Responses {
    async fn chat(&self, req: &Request) -> Result<Reply, LlmError> {
        self.pool.run(req, &self.body(req), self.key.as_deref(), parse).await
    }
    fn describe(&self) -> String {
        format!("openai-responses {} model={}", self.pool.urls(), self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_message_text_usage_and_a_token_cap() {
        let v = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "reasoning", "summary": []},
                       {"type": "message", "role": "assistant", "content": [
                           {"type": "output_text", "text": "on: push\n", "annotations": []},
                           {"type": "output_text", "text": "jobs: {}", "annotations": []}]}],
            "usage": {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19}});
        let (text, finish, p, c) = parse(&v).unwrap();
        assert_eq!(text, "on: push\njobs: {}");
        assert_eq!(finish.as_deref(), Some("length"));
        assert_eq!((p, c), (Some(12), Some(7)));
        let done = json!({"status": "completed", "output": [{"type": "message", "content": [{"type": "output_text", "text": "a: 1"}]}]});
        assert_eq!(parse(&done).unwrap().1.as_deref(), Some("stop"));
        assert!(parse(&json!({"error": {"message": "bad"}})).is_err());
        assert!(parse(&json!({"status": "completed"})).is_err());
    }
}
