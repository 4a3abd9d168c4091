//! OpenAI's Batch API on the wire: the JSONL request file, `POST /files` (purpose `batch`),
//! `POST /batches`, `GET /batches/{id}` and `GET /files/{id}/content`, and the output and error
//! files read back into answers. The same files are what `vllm run-batch` reads and writes.
//!
//! Owns the protocol only: when to submit, what to remember across a kill and how answers become
//! rows is the engine's (`src/jobs/generate.rs`).

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::{parse_openai, redact_url, snippet, status_error, LlmError, Parsed};

/// The endpoint every line of a chat batch posts to.
pub const CHAT_ENDPOINT: &str = "/v1/chat/completions";

/// Output and error files larger than this are refused (memory stays bounded).
pub const MAX_FILE_BYTES: usize = 512 << 20;

/// One line of a batch input file.
pub fn request_line(custom_id: &str, body: &Value) -> Value {
    json!({"custom_id": custom_id, "method": "POST", "url": CHAT_ENDPOINT, "body": body})
}

/// A batch as the server describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchInfo {
    pub id: String,
    /// validating | failed | in_progress | finalizing | completed | expired | cancelling | cancelled
    pub status: String,
    pub output_file_id: Option<String>,
    pub error_file_id: Option<String>,
    pub total: u64,
    pub completed: u64,
    pub failed: u64,
    /// Why the server refused the whole batch (`errors.data[].message`), if it did.
    pub errors: Option<String>,
    pub metadata: Map<String, Value>,
}

impl BatchInfo {
    fn from_json(v: &Value) -> Result<BatchInfo, String> {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let n = |k: &str| v.pointer(&format!("/request_counts/{k}")).and_then(|x| x.as_u64()).unwrap_or(0);
        let errors = v
            .pointer("/errors/data")
            .and_then(|d| d.as_array())
            .map(|d| d.iter().filter_map(|e| e.get("message").and_then(|m| m.as_str())).collect::<Vec<_>>().join("; "));
        Ok(BatchInfo {
            id: s("id").ok_or_else(|| format!("a batch object without an id: {}", snippet(&v.to_string())))?,
            status: s("status").ok_or("a batch object without a status")?,
            output_file_id: s("output_file_id"),
            error_file_id: s("error_file_id"),
            total: n("total"),
            completed: n("completed"),
            failed: n("failed"),
            errors: errors.filter(|e| !e.is_empty()),
            metadata: v.get("metadata").and_then(|m| m.as_object()).cloned().unwrap_or_default(),
        })
    }

    /// No further change will come: read the files now.
    pub fn is_final(&self) -> bool {
        matches!(self.status.as_str(), "completed" | "failed" | "expired" | "cancelled")
    }
}

/// One line of an output or error file: whose answer, and the answer or why there is none.
pub fn parse_result_line(line: &str) -> Result<(String, Result<Parsed, LlmError>), String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}: {}", snippet(line)))?;
    let id = v.get("custom_id").and_then(|c| c.as_str()).ok_or("a line without custom_id")?.to_string();
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        let code = err.get("code").and_then(|c| c.as_str()).unwrap_or("error");
        let msg = err.get("message").and_then(|m| m.as_str()).unwrap_or_default();
        return Ok((id, Err(LlmError::Http(format!("batch line failed: {code}: {}", snippet(msg))))));
    }
    let resp = v.get("response").filter(|r| !r.is_null()).ok_or("a line with neither response nor error")?;
    let status = resp.get("status_code").and_then(|s| s.as_u64()).unwrap_or(0);
    let body = resp.get("body").cloned().unwrap_or(Value::Null);
    if status != 200 {
        let e = format!("HTTP {status}: {}", snippet(&body.to_string()));
        return Ok((id, Err(status_error(status.min(u16::MAX as u64) as u16, e))));
    }
    Ok((id, parse_openai(&body).map_err(LlmError::BadResponse)))
}

/// Files and Batches endpoints of one server.
pub struct BatchClient {
    base: String,
    shown: String,
    key: Option<String>,
    client: reqwest::Client,
    timeout: Duration,
    retries: u32,
}

impl BatchClient {
    /// `base_url` as for chat (`…/v1`); `key` is sent as a bearer token and never shown.
    pub fn new(base_url: &str, key: Option<String>, timeout_ms: u64, retries: u32) -> Result<BatchClient, LlmError> {
        let base = base_url.trim().trim_end_matches('/').to_string();
        let shown = redact_url(&base);
        let url = reqwest::Url::parse(&base).map_err(|e| LlmError::Other(format!("bad base_url {shown:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(LlmError::Other(format!("base_url {shown:?} is not http(s)")));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| LlmError::Other(format!("HTTP client: {e}")))?;
        Ok(BatchClient { base, shown, key, client, timeout: Duration::from_millis(timeout_ms.max(1)), retries })
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Uploads a batch input file; its id.
    pub async fn upload(&self, filename: &str, jsonl: &[u8]) -> Result<String, LlmError> {
        let boundary = format!("doc2ci-{}", boundary_for(jsonl));
        let mut body = Vec::with_capacity(jsonl.len() + 400);
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n").as_bytes(),
        );
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
                 Content-Type: application/jsonl\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(jsonl);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let ctype = format!("multipart/form-data; boundary={boundary}");
        let v = self.json(reqwest::Method::POST, "/files", Some((ctype, body))).await?;
        v.get("id").and_then(|i| i.as_str()).map(str::to_string).ok_or_else(|| {
            LlmError::BadResponse(format!("{}/files: no file id in {}", self.shown, snippet(&v.to_string())))
        })
    }

    /// Creates a batch over an uploaded file; `metadata` lets a resumed run find it again.
    pub async fn create(&self, input_file_id: &str, metadata: &Map<String, Value>) -> Result<BatchInfo, LlmError> {
        let body = json!({"input_file_id": input_file_id, "endpoint": CHAT_ENDPOINT,
                          "completion_window": "24h", "metadata": metadata});
        let v = self
            .json(reqwest::Method::POST, "/batches", Some(("application/json".into(), body.to_string().into_bytes())))
            .await?;
        self.info(&v, "/batches")
    }

    pub async fn get(&self, id: &str) -> Result<BatchInfo, LlmError> {
        let path = format!("/batches/{id}");
        let v = self.json(reqwest::Method::GET, &path, None).await?;
        self.info(&v, &path)
    }

    /// The newest batch whose metadata has `key = value` (a submission whose id a kill lost).
    pub async fn find(&self, key: &str, value: &str) -> Result<Option<BatchInfo>, LlmError> {
        let mut after: Option<String> = None;
        // Ten pages of 100: a study's own batches are recent.
        for _ in 0..10 {
            let path = match &after {
                Some(a) => format!("/batches?limit=100&after={a}"),
                None => "/batches?limit=100".to_string(),
            };
            let v = self.json(reqwest::Method::GET, &path, None).await?;
            let data = v.get("data").and_then(|d| d.as_array()).cloned().unwrap_or_default();
            for b in &data {
                if b.pointer(&format!("/metadata/{key}")).and_then(|x| x.as_str()) == Some(value) {
                    return self.info(b, &path).map(Some);
                }
            }
            if v.get("has_more").and_then(|h| h.as_bool()) != Some(true) {
                return Ok(None);
            }
            after = v.get("last_id").and_then(|l| l.as_str()).map(str::to_string);
            if after.is_none() {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// A file's bytes (an output or error file).
    pub async fn content(&self, file_id: &str) -> Result<Vec<u8>, LlmError> {
        self.send(reqwest::Method::GET, &format!("/files/{file_id}/content"), None).await
    }

    fn info(&self, v: &Value, path: &str) -> Result<BatchInfo, LlmError> {
        BatchInfo::from_json(v).map_err(|e| LlmError::BadResponse(format!("{}{path}: {e}", self.shown)))
    }

    async fn json(&self, m: reqwest::Method, path: &str, body: Option<(String, Vec<u8>)>) -> Result<Value, LlmError> {
        let bytes = self.send(m, path, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::BadResponse(format!(
                "{}{path}: response is not JSON: {e}: {}",
                self.shown,
                snippet(&String::from_utf8_lossy(&bytes))
            ))
        })
    }

    /// One call, retried on 429/408/5xx and transport failures with exponential backoff.
    async fn send(&self, m: reqwest::Method, path: &str, body: Option<(String, Vec<u8>)>) -> Result<Vec<u8>, LlmError> {
        let what = format!("{}{path}", self.shown);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let r = tokio::time::timeout(self.timeout, self.once(m.clone(), path, body.clone(), &what)).await;
            let r = r.unwrap_or_else(|_| {
                Err(LlmError::Retryable(format!("{what}: timed out after {} ms", self.timeout.as_millis())))
            });
            match r {
                Err(e) if e.is_retryable() && attempt <= self.retries => {
                    let ms = 500u64.saturating_mul(1 << (attempt - 1).min(6)).min(30_000);
                    tokio::time::sleep(Duration::from_millis(rand::random_range(ms / 2..=ms))).await;
                }
                r => return r,
            }
        }
    }

    async fn once(
        &self,
        m: reqwest::Method,
        path: &str,
        body: Option<(String, Vec<u8>)>,
        what: &str,
    ) -> Result<Vec<u8>, LlmError> {
        let mut rb = self.client.request(m, format!("{}{path}", self.base));
        if let Some((ctype, bytes)) = body {
            rb = rb.header(reqwest::header::CONTENT_TYPE, ctype).body(bytes);
        }
        if let Some(k) = &self.key {
            rb = rb.bearer_auth(k);
        }
        let retryable = |e: reqwest::Error| LlmError::Retryable(format!("{what}: {}", e.without_url()));
        let mut resp = rb.send().await.map_err(retryable)?;
        let status = resp.status();
        let mut buf = Vec::new();
        while let Some(c) = resp.chunk().await.map_err(retryable)? {
            if buf.len() + c.len() > MAX_FILE_BYTES {
                return Err(LlmError::BadResponse(format!("{what}: response exceeds {} MiB", MAX_FILE_BYTES >> 20)));
            }
            buf.extend_from_slice(&c);
        }
        if status.is_success() {
            return Ok(buf);
        }
        let msg = format!("{what}: HTTP {status}: {}", snippet(&String::from_utf8_lossy(&buf)));
        Err(status_error(status.as_u16(), msg))
    }
}

/// A boundary that cannot occur in the body it delimits (a hash of the body, hex).
fn boundary_for(bytes: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{:016x}{:08x}", h.finish(), bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_error_lines_as_the_provider_writes_them() {
        let ok = r#"{"id":"batch_req_1","custom_id":"p1:0:0","response":{"status_code":200,"request_id":"r",
            "body":{"choices":[{"index":0,"message":{"role":"assistant","content":"on: push"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":9,"completion_tokens":3}}},"error":null}"#
            .replace('\n', "");
        let (id, r) = parse_result_line(&ok).unwrap();
        assert_eq!(id, "p1:0:0");
        assert_eq!(r.unwrap(), ("on: push".to_string(), Some("stop".to_string()), Some(9), Some(3)));
        let bad = r#"{"id":"x","custom_id":"p2:0:0","response":{"status_code":400,"body":{"error":{"message":"bad"}}},"error":null}"#;
        assert!(matches!(parse_result_line(bad).unwrap().1, Err(LlmError::Http(m)) if m.contains("HTTP 400")));
        let err = r#"{"id":"x","custom_id":"p3:0:0","response":null,"error":{"code":"batch_expired","message":"not done in time"}}"#;
        assert!(matches!(parse_result_line(err).unwrap().1, Err(LlmError::Http(m)) if m.contains("batch_expired")));
        assert!(parse_result_line("{}").is_err());
        assert!(parse_result_line("nope").is_err());
    }

    #[test]
    fn a_batch_object_is_read_with_its_counts_and_errors() {
        let v = json!({"id": "batch_1", "object": "batch", "status": "failed", "output_file_id": null,
            "request_counts": {"total": 3, "completed": 0, "failed": 3}, "metadata": {"doc2ci": "k"},
            "errors": {"object": "list", "data": [{"code": "invalid_json", "message": "line 2 is not JSON", "line": 2}]}});
        let b = BatchInfo::from_json(&v).unwrap();
        assert_eq!((b.total, b.failed, b.is_final()), (3, 3, true));
        assert_eq!(b.errors.as_deref(), Some("line 2 is not JSON"));
        assert_eq!(b.metadata.get("doc2ci"), Some(&json!("k")));
    }
}
