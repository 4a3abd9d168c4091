//! Chat backends shared by the generate and repair stages: an OpenAI-compatible `/chat/completions` client and
//! Ollama's native `/api/chat` (each with its raw completion where the server has one: `/completions` and
//! `/api/generate` with `raw`), each a pool over several endpoints with per-endpoint concurrency, request and token
//! rate limits (configured, and paced from the provider's rate-limit headers: `adaptive`), retries with exponential
//! backoff and full jitter, a request timeout and a cap on the response size.
//! API keys are read from the environment at construction and only ever sent in the `Authorization` header.
//!
//! Owns: the wire (bodies, parsing, pools, limits, retries). Never decides what to ask: prompts are
//! `stages/generate`'s, which backend a model uses is the engine's `src/backends/`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::sync::Semaphore;

pub mod adaptive;
pub mod batch;

/// Backends outside this crate implement [`Backend`] with it.
pub use async_trait::async_trait;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message { role: role.to_string(), content: content.into() }
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub messages: Vec<Message>,
    /// 0 = greedy.
    pub temperature: f32,
    /// Output cap.
    pub max_tokens: u32,
    pub seed: Option<u64>,
    /// Backend-specific parameters from config, merged into the request body (they win over ours).
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub latency_ms: f64,
    /// "stop" | "length" | ... as the server said; "length" means the output hit `max_tokens`.
    pub finish_reason: Option<String>,
    /// Which endpoint of a pool answered.
    pub endpoint: String,
    /// 1 + retries used.
    pub attempts: u32,
    /// Earlier attempts that reached the server and may have been billed though no answer came
    /// back (a timeout, a 5xx, a body cut short or unreadable; not a 429 or a refused connection).
    pub billed_retries: u32,
}

/// Every variant's message names the endpoint URL (or model) and what happened.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    /// Non-retryable HTTP status (4xx except 408/429).
    #[error("{0}")]
    Http(String),
    /// 429/408/5xx/connection refused or reset/timeout; returned once the retries are exhausted.
    #[error("{0}")]
    Retryable(String),
    /// Garbage, empty, non-UTF-8, oversized or unparsable body.
    #[error("{0}")]
    BadResponse(String),
    #[error("{0}")]
    Other(String),
}

impl LlmError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, LlmError::Retryable(_))
    }
}

/// The role of a request's only message when it asks for a raw completion of its text.
pub const COMPLETION_ROLE: &str = "completion";

#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    async fn chat(&self, req: &Request) -> Result<Reply, LlmError>;
    /// Whether the backend continues a text as is: a request of one message with role
    /// [`COMPLETION_ROLE`] is then completed without the chat template. Only such backends get one.
    fn raw_completion(&self) -> bool {
        false
    }
    /// The log-probability of each token of `text` given the ones before it (teacher forcing),
    /// for a backend that can score a given text; `None` for one that cannot (a chat API).
    async fn token_logprobs(&self, _text: &str) -> Option<Result<Vec<f64>, LlmError>> {
        None
    }
    /// For messages, e.g. "openai http://127.0.0.1:8080/v1 model=smollm2".
    fn describe(&self) -> String;
}

/// Resilience knobs, per endpoint unless said otherwise.
#[derive(Debug, Clone)]
pub struct Limits {
    /// In-flight requests per endpoint.
    pub concurrency: usize,
    /// Requests are spaced `60/rpm` seconds apart per endpoint, so no 60-s window ever holds more than `rpm`.
    pub requests_per_minute: Option<u32>,
    /// Sliding 60-s window over prompt+completion tokens (estimated before sending, corrected from `usage`).
    pub tokens_per_minute: Option<u32>,
    /// Retries on 429/408/5xx/reset/refused/timeout, exponential backoff with full jitter (per pool request).
    pub retries: u32,
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
    /// Per attempt: connect, send, and reading the whole body.
    pub timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            concurrency: 4,
            requests_per_minute: None,
            tokens_per_minute: None,
            retries: 5,
            backoff_initial_ms: 500,
            backoff_max_ms: 30_000,
            timeout_ms: 120_000,
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// e.g. `http://127.0.0.1:8080/v1`; `/chat/completions` is appended.
    pub base_urls: Vec<String>,
    pub model: String,
    /// Name of the environment variable holding the key (sent as `Authorization: Bearer`).
    pub api_key_env: Option<String>,
    /// The key itself, for callers that hold it already (it wins over `api_key_env`); never logged.
    pub api_key: Option<String>,
    pub limits: Limits,
}

#[derive(Debug, Clone)]
pub struct OllamaConfig {
    /// e.g. `http://127.0.0.1:11434`; `/api/chat` is appended.
    pub base_urls: Vec<String>,
    pub model: String,
    pub num_ctx: Option<u32>,
    pub limits: Limits,
}

/// Responses larger than this are refused (an endless body must not exhaust memory).
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// A pool over `base_urls` speaking OpenAI's chat-completions protocol.
pub fn openai(cfg: OpenAiConfig) -> Result<Arc<dyn Backend>, LlmError> {
    openai_with(cfg, Completions::default())
}

/// What an OpenAI-compatible server offers beside chat on its legacy `/completions` endpoint
/// (llama.cpp's server, vLLM, OpenAI's base models).
#[derive(Debug, Clone, Copy, Default)]
pub struct Completions {
    /// It continues a text as is: a [`COMPLETION_ROLE`] request goes there, without a template.
    pub raw: bool,
    /// It returns a prompt's log-probabilities (`echo` with `logprobs`, as OpenAI's legacy API and
    /// vLLM do): [`Backend::token_logprobs`] asks it.
    pub echo_logprobs: bool,
}

/// [`openai`], with the `/completions` endpoint where the server has one.
pub fn openai_with(cfg: OpenAiConfig, completions: Completions) -> Result<Arc<dyn Backend>, LlmError> {
    let key = match cfg.api_key {
        Some(k) => Some(k),
        None => api_key("openai", &cfg.model, cfg.api_key_env.as_deref())?,
    };
    let pool = Pool::new("openai", &cfg.base_urls, "/chat/completions", &cfg.model, cfg.limits.clone())?;
    let raw = match completions.raw || completions.echo_logprobs {
        true => Some(Pool::new("openai", &cfg.base_urls, "/completions", &cfg.model, cfg.limits)?),
        false => None,
    };
    Ok(Arc::new(OpenAi { pool, raw, echo: completions.echo_logprobs, model: cfg.model, key }))
}

/// The key held by environment variable `var` (None: no key), trimmed; an unset or empty
/// variable is an error naming the variable, never a request sent without the key.
pub fn api_key(kind: &str, model: &str, var: Option<&str>) -> Result<Option<String>, LlmError> {
    let Some(var) = var else { return Ok(None) };
    match std::env::var(var) {
        Ok(k) if !k.trim().is_empty() => Ok(Some(k.trim().to_string())),
        _ => Err(LlmError::Other(format!("{kind} model={model}: api_key_env {var} is not set in the environment"))),
    }
}

/// A pool over `base_urls` speaking Ollama's native `/api/chat`.
pub fn ollama(cfg: OllamaConfig) -> Result<Arc<dyn Backend>, LlmError> {
    let pool = Pool::new("ollama", &cfg.base_urls, "/api/chat", &cfg.model, cfg.limits.clone())?;
    // Every Ollama server continues a text as is on `/api/generate` with `raw: true`.
    let generate = Pool::new("ollama", &cfg.base_urls, "/api/generate", &cfg.model, cfg.limits)?;
    Ok(Arc::new(Ollama { pool, generate, model: cfg.model, num_ctx: cfg.num_ctx }))
}

// ---------------------------------------------------------------------------------------------------------------
// Protocols

struct OpenAi {
    pool: Pool,
    /// The `/completions` endpoint, where the server has one.
    raw: Option<Pool>,
    echo: bool,
    model: String,
    key: Option<String>,
}

/// The only message's text when `req` asks for a raw completion.
fn completion_prompt(req: &Request) -> Option<&str> {
    match req.messages.as_slice() {
        [m] if m.role == COMPLETION_ROLE => Some(&m.content),
        _ => None,
    }
}

/// The `/completions` body continuing `prompt` under `req`'s settings: the chat body with the
/// prompt in place of the messages.
pub fn completion_body(model: &str, req: &Request, prompt: &str) -> Value {
    let mut body = chat_body(model, req);
    let b = body.as_object_mut().expect("an object");
    b.remove("messages");
    b.insert("prompt".into(), json!(prompt));
    body
}

/// `choices[0].text`, `finish_reason`, `usage` of a `/completions` response.
pub fn parse_completion(v: &Value) -> Result<Parsed, String> {
    let choice = first_choice(v)?;
    let text = match choice.get("text") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(format!("choices[0].text is not a string: {}", snippet(&choice.to_string()))),
    };
    Ok(with_usage(v, choice, text))
}

/// `choices[0]` of an OpenAI-style response, unless it carries an error object instead.
fn first_choice(v: &Value) -> Result<&Value, String> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(format!("error object in a 200 response: {}", snippet(&err.to_string())));
    }
    v.get("choices")
        .and_then(|c| c.as_array())
        .and_then(|c| c.first())
        .ok_or_else(|| format!("no choices[0] in {}", snippet(&v.to_string())))
}

/// `text` with the choice's `finish_reason` and the response's `usage` token counts.
fn with_usage(v: &Value, choice: &Value, text: String) -> Parsed {
    let finish = choice.get("finish_reason").and_then(|f| f.as_str()).map(str::to_string);
    let usage = v.get("usage");
    let num = |k: &str| usage.and_then(|u| u.get(k)).and_then(|n| n.as_u64()).map(|n| n as u32);
    (text, finish, num("prompt_tokens"), num("completion_tokens"))
}

/// The prompt's token log-probabilities of an `echo` response (`max_tokens = 1`): of
/// `choices[0].logprobs.token_logprobs`, the tokens before the completion's
/// (`usage.completion_tokens`, else `usage.prompt_tokens` from the start, else all but the last),
/// the first (scored against nothing: null) left out.
pub fn parse_echo_logprobs(v: &Value) -> Result<Vec<f64>, String> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(format!("error object in a 200 response: {}", snippet(&err.to_string())));
    }
    let lp = v.pointer("/choices/0/logprobs").filter(|l| !l.is_null()).ok_or_else(|| {
        format!(
            "no choices[0].logprobs in {}: the server does not echo a prompt's log-probabilities",
            snippet(&v.to_string())
        )
    })?;
    let values = lp.get("token_logprobs").and_then(|t| t.as_array()).ok_or("no logprobs.token_logprobs")?;
    let usage = |k: &str| v.pointer(&format!("/usage/{k}")).and_then(|n| n.as_u64()).map(|n| n as usize);
    let in_prompt = match (usage("completion_tokens"), usage("prompt_tokens")) {
        (Some(c), _) => values.len().saturating_sub(c),
        (None, Some(p)) => p.min(values.len()),
        (None, None) => values.len().saturating_sub(1),
    };
    let out: Vec<f64> = values.iter().take(in_prompt).filter_map(|x| x.as_f64()).collect();
    if out.is_empty() {
        return Err("the server returned no log-probability for the prompt's tokens".into());
    }
    Ok(out)
}

/// The echoed log-probabilities, carried through the pool as the text of a reply (its parsers
/// return text).
fn parse_echo(v: &Value) -> Result<Parsed, String> {
    let lp = parse_echo_logprobs(v)?;
    Ok((serde_json::to_string(&lp).expect("numbers"), None, None, None))
}

impl OpenAi {
    fn body(&self, req: &Request) -> Value {
        chat_body(&self.model, req)
    }
}

/// The chat-completions body of `req` (also a line's `body` in a batch file).
pub fn chat_body(model: &str, req: &Request) -> Value {
    {
        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body.insert("messages".into(), json!(req.messages));
        body.insert("temperature".into(), json!(req.temperature));
        body.insert("max_tokens".into(), json!(req.max_tokens));
        if let Some(seed) = req.seed {
            body.insert("seed".into(), json!(seed));
        }
        body.insert("stream".into(), json!(false));
        for (k, v) in &req.extra {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }
}

/// `choices[0].message.content`, `finish_reason`, `usage` of a chat-completions response.
pub fn parse_openai(v: &Value) -> Result<(String, Option<String>, Option<u32>, Option<u32>), String> {
    let choice = first_choice(v)?;
    let message = choice.get("message").ok_or("choices[0] has no message")?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        // Reasoning or tool-calling models may send null content; an empty answer is still an answer.
        Some(Value::Null) | None => String::new(),
        Some(other) => {
            return Err(format!("choices[0].message.content is not a string: {}", snippet(&other.to_string())))
        }
    };
    Ok(with_usage(v, choice, text))
}

#[async_trait::async_trait]
impl Backend for OpenAi {
    async fn chat(&self, req: &Request) -> Result<Reply, LlmError> {
        if let (Some(raw), Some(prompt)) = (&self.raw, completion_prompt(req)) {
            let body = completion_body(&self.model, req, prompt);
            return raw.run(req, &body, self.key.as_deref(), parse_completion).await;
        }
        let body = self.body(req);
        self.pool.run(req, &body, self.key.as_deref(), parse_openai).await
    }
    fn raw_completion(&self) -> bool {
        self.raw.is_some()
    }
    async fn token_logprobs(&self, text: &str) -> Option<Result<Vec<f64>, LlmError>> {
        let raw = self.raw.as_ref().filter(|_| self.echo)?;
        let req = Request {
            messages: vec![Message::new(COMPLETION_ROLE, text)],
            temperature: 0.0,
            max_tokens: 1,
            seed: None,
            extra: Map::new(),
        };
        let mut body = completion_body(&self.model, &req, text);
        body["echo"] = json!(true);
        body["logprobs"] = json!(1);
        let reply = raw.run(&req, &body, self.key.as_deref(), parse_echo).await;
        Some(reply.and_then(|r| {
            serde_json::from_str(&r.text).map_err(|e| LlmError::BadResponse(format!("echoed log-probabilities: {e}")))
        }))
    }
    fn describe(&self) -> String {
        format!("openai {} model={}", self.pool.urls(), self.model)
    }
}

struct Ollama {
    pool: Pool,
    generate: Pool,
    model: String,
    num_ctx: Option<u32>,
}

/// Keys of Ollama's /api/chat body that live at the top level; every other extra parameter is a model option.
const OLLAMA_TOP_LEVEL: &[&str] = &["format", "keep_alive", "think", "tools", "template", "raw", "images"];

impl Ollama {
    /// A raw completion: `/api/generate` with `raw: true` (no template), the chat body's options.
    fn generate_body(&self, req: &Request, prompt: &str) -> Value {
        let mut body = self.body(req);
        let b = body.as_object_mut().expect("an object");
        b.remove("messages");
        b.insert("prompt".into(), json!(prompt));
        b.insert("raw".into(), json!(true));
        body
    }

    fn body(&self, req: &Request) -> Value {
        let mut options = Map::new();
        options.insert("temperature".into(), json!(req.temperature));
        options.insert("num_predict".into(), json!(req.max_tokens));
        if let Some(seed) = req.seed {
            options.insert("seed".into(), json!(seed));
        }
        if let Some(n) = self.num_ctx {
            options.insert("num_ctx".into(), json!(n));
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("messages".into(), json!(req.messages));
        body.insert("stream".into(), json!(false));
        for (k, v) in &req.extra {
            if k == "options" {
                if let Value::Object(o) = v {
                    options.extend(o.clone());
                }
            } else if OLLAMA_TOP_LEVEL.contains(&k.as_str()) {
                body.insert(k.clone(), v.clone());
            } else {
                options.insert(k.clone(), v.clone());
            }
        }
        body.insert("options".into(), Value::Object(options));
        Value::Object(body)
    }
}

/// `message.content`, `done_reason`, `prompt_eval_count`, `eval_count` of an Ollama chat response.
pub fn parse_ollama(v: &Value) -> Result<(String, Option<String>, Option<u32>, Option<u32>), String> {
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("error in a 200 response: {}", snippet(err)));
    }
    let text = v
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(|c| c.as_str())
        .ok_or_else(|| format!("no message.content in {}", snippet(&v.to_string())))?
        .to_string();
    if v.get("done").and_then(|d| d.as_bool()) == Some(false) {
        return Err("response has done=false (a streamed chunk, not a whole answer)".into());
    }
    let finish = v.get("done_reason").and_then(|f| f.as_str()).map(str::to_string);
    let num = |k: &str| v.get(k).and_then(|n| n.as_u64()).map(|n| n as u32);
    Ok((text, finish, num("prompt_eval_count"), num("eval_count")))
}

/// `response`, `done_reason`, `prompt_eval_count`, `eval_count` of an Ollama generate response.
pub fn parse_ollama_generate(v: &Value) -> Result<Parsed, String> {
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("error in a 200 response: {}", snippet(err)));
    }
    let text = v
        .get("response")
        .and_then(|c| c.as_str())
        .ok_or_else(|| format!("no response in {}", snippet(&v.to_string())))?
        .to_string();
    if v.get("done").and_then(|d| d.as_bool()) == Some(false) {
        return Err("response has done=false (a streamed chunk, not a whole answer)".into());
    }
    let finish = v.get("done_reason").and_then(|f| f.as_str()).map(str::to_string);
    let num = |k: &str| v.get(k).and_then(|n| n.as_u64()).map(|n| n as u32);
    Ok((text, finish, num("prompt_eval_count"), num("eval_count")))
}

#[async_trait::async_trait]
impl Backend for Ollama {
    async fn chat(&self, req: &Request) -> Result<Reply, LlmError> {
        if let Some(prompt) = completion_prompt(req) {
            let body = self.generate_body(req, prompt);
            return self.generate.run(req, &body, None, parse_ollama_generate).await;
        }
        let body = self.body(req);
        self.pool.run(req, &body, None, parse_ollama).await
    }
    fn raw_completion(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        format!("ollama {} model={}", self.pool.urls(), self.model)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Pool, limiters, retries

/// What a protocol's parser takes from a 200 response: text, finish reason, prompt and completion tokens.
pub type Parsed = (String, Option<String>, Option<u32>, Option<u32>);

struct Endpoint {
    /// The full URL requests go to.
    url: String,
    /// The URL as logged and stored: credentials and query redacted ([`redact_url`]).
    shown: String,
    sem: Semaphore,
    /// Requests waiting for or holding a permit: the load used to pick an endpoint.
    load: AtomicUsize,
    spacing: Option<Spacing>,
    tokens: Option<TokenWindow>,
    /// The provider's own limits, as its rate-limit headers describe them.
    adaptive: adaptive::Adaptive,
}

/// Endpoints of one model sharing its limits: least-loaded choice, retries with backoff and
/// Retry-After, bounded bodies. A protocol (`Backend`) is a request body and a response parser
/// over it.
pub struct Pool {
    kind: &'static str,
    model: String,
    endpoints: Vec<Endpoint>,
    limits: Limits,
    client: reqwest::Client,
    next: AtomicUsize,
}

/// Failure of one attempt: the error plus a server-requested delay.
struct Failure {
    err: LlmError,
    retry_after: Option<Duration>,
    /// The request reached the server, which may have billed it though no answer came back.
    billed: bool,
}

impl Failure {
    fn maybe_billed(&self) -> bool {
        self.billed
    }
}

impl Pool {
    /// `path` is appended to each base URL (`/chat/completions`).
    pub fn new(
        kind: &'static str,
        base_urls: &[String],
        path: &str,
        model: &str,
        limits: Limits,
    ) -> Result<Pool, LlmError> {
        if base_urls.is_empty() {
            return Err(LlmError::Other(format!("{kind} model={model}: no base_url configured")));
        }
        if limits.concurrency == 0 {
            return Err(LlmError::Other(format!("{kind} model={model}: concurrency must be at least 1")));
        }
        let mut endpoints = Vec::new();
        for base in base_urls {
            let base = base.trim().trim_end_matches('/');
            let url = format!("{base}{path}");
            let parsed = reqwest::Url::parse(&url).map_err(|e| {
                LlmError::Other(format!("{kind} model={model}: bad base_url {:?}: {e}", redact_url(base)))
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(LlmError::Other(format!(
                    "{kind} model={model}: base_url {:?} is not http(s)",
                    redact_url(base)
                )));
            }
            endpoints.push(Endpoint {
                shown: redact_url(&url),
                url,
                sem: Semaphore::new(limits.concurrency),
                load: AtomicUsize::new(0),
                spacing: limits
                    .requests_per_minute
                    .filter(|&r| r > 0)
                    .map(|r| Spacing::new(Duration::from_secs_f64(60.0 / r as f64))),
                tokens: limits
                    .tokens_per_minute
                    .filter(|&t| t > 0)
                    .map(|t| TokenWindow::new(t as u64, Duration::from_secs(60))),
                adaptive: Default::default(),
            });
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(limits.timeout_ms.clamp(1, 10_000)))
            .pool_max_idle_per_host(limits.concurrency.max(1) * 2)
            .build()
            .map_err(|e| LlmError::Other(format!("{kind} model={model}: HTTP client: {e}")))?;
        Ok(Pool { kind, model: model.to_string(), endpoints, limits, client, next: AtomicUsize::new(0) })
    }

    /// The endpoints as logged (credentials and queries redacted).
    pub fn urls(&self) -> String {
        self.endpoints.iter().map(|e| e.shown.as_str()).collect::<Vec<_>>().join(",")
    }

    /// Least-loaded endpoint, ties broken round-robin; `avoid` (the one that just failed) only if it is alone.
    fn pick(&self, avoid: Option<usize>) -> usize {
        let n = self.endpoints.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let mut best: Option<(usize, usize)> = None;
        for off in 0..n {
            let i = (start + off) % n;
            if Some(i) == avoid && n > 1 {
                continue;
            }
            let load = self.endpoints[i].load.load(Ordering::Relaxed);
            if best.is_none_or(|(_, l)| load < l) {
                best = Some((i, load));
            }
        }
        best.map(|(i, _)| i).unwrap_or(0)
    }

    /// Sends `body` (with `key` as a bearer token) until an answer parses or the retries run out.
    pub async fn run(
        &self,
        req: &Request,
        body: &Value,
        key: Option<&str>,
        parse: fn(&Value) -> Result<Parsed, String>,
    ) -> Result<Reply, LlmError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| LlmError::Other(format!("{} model={}: request body: {e}", self.kind, self.model)))?;
        // Rough prompt size for the token limiter, corrected from the server's usage afterwards.
        let estimate = req.messages.iter().map(|m| m.content.len() as u64 / 4 + 4).sum::<u64>() + req.max_tokens as u64;
        let started = Instant::now();
        let mut avoid = None;
        let mut attempt = 0u32;
        let mut billed_retries = 0u32;
        loop {
            attempt += 1;
            let i = self.pick(avoid);
            let ep = &self.endpoints[i];
            ep.load.fetch_add(1, Ordering::Relaxed);
            let result = async {
                let _permit = ep.sem.acquire().await.map_err(|_| Failure {
                    err: LlmError::Other("endpoint closed".into()),
                    retry_after: None,
                    billed: false,
                })?;
                if let Some(s) = &ep.spacing {
                    s.wait().await;
                }
                if let Some(t) = &ep.tokens {
                    t.acquire(estimate).await;
                }
                let mut ticket = ep.adaptive.acquire(estimate).await;
                let r = self.attempt(ep, &body, key, parse, &mut ticket).await;
                if let (Some(t), Ok(p)) = (&ep.tokens, &r) {
                    if let (Some(pt), Some(ct)) = (p.2, p.3) {
                        t.correct(estimate, pt as u64 + ct as u64);
                    }
                }
                r
            }
            .await;
            ep.load.fetch_sub(1, Ordering::Relaxed);
            match result {
                Ok((text, finish_reason, prompt_tokens, completion_tokens)) => {
                    return Ok(Reply {
                        text,
                        prompt_tokens,
                        completion_tokens,
                        latency_ms: started.elapsed().as_secs_f64() * 1e3,
                        finish_reason,
                        endpoint: ep.shown.clone(),
                        attempts: attempt,
                        billed_retries,
                    })
                }
                // A server that asks for more than doc2ci ever waits is not waited for: the
                // request fails now, saying so (a hostile `Retry-After: 1e20` stalled a study 10 min
                // a request).
                Err(f) if f.err.is_retryable() && f.retry_after.is_some_and(|ra| ra > MAX_RETRY_AFTER) => {
                    return Err(LlmError::Retryable(format!(
                        "{}: Retry-After {} s is more than the {} s doc2ci waits (not retried)",
                        f.err,
                        f.retry_after.unwrap_or_default().as_secs(),
                        MAX_RETRY_AFTER.as_secs()
                    )))
                }
                Err(f) if f.err.is_retryable() && attempt <= self.limits.retries => {
                    billed_retries += u32::from(f.maybe_billed());
                    avoid = Some(i);
                    let cap = self
                        .limits
                        .backoff_initial_ms
                        .saturating_mul(1u64 << (attempt - 1).min(30))
                        .min(self.limits.backoff_max_ms.max(self.limits.backoff_initial_ms));
                    // Full jitter: uniform in [0, cap].
                    let jitter = Duration::from_millis(rand::random_range(0..=cap));
                    let wait = match f.retry_after {
                        Some(ra) => ra.max(jitter),
                        None => jitter,
                    };
                    tokio::time::sleep(wait).await;
                }
                Err(f) => {
                    return Err(match f.err {
                        LlmError::Retryable(m) if attempt > 1 => {
                            LlmError::Retryable(format!("{m} (gave up after {attempt} attempts)"))
                        }
                        e => e,
                    })
                }
            }
        }
    }

    /// One HTTP exchange, time-capped as a whole and size-capped while reading the body.
    async fn attempt(
        &self,
        ep: &Endpoint,
        body: &[u8],
        key: Option<&str>,
        parse: fn(&Value) -> Result<Parsed, String>,
        ticket: &mut adaptive::Ticket<'_>,
    ) -> Result<Parsed, Failure> {
        let timeout = Duration::from_millis(self.limits.timeout_ms.max(1));
        let what = format!("{} {} model={}", self.kind, ep.shown, self.model);
        match tokio::time::timeout(timeout, self.exchange(ep, body, key, &what, ticket)).await {
            Err(_) => Err(Failure {
                err: LlmError::Retryable(format!("{what}: timed out after {} ms", timeout.as_millis())),
                retry_after: None,
                billed: true,
            }),
            Ok(Err(f)) => Err(f),
            Ok(Ok(bytes)) => {
                let bad = |m: String| Failure {
                    err: LlmError::BadResponse(format!("{what}: {m}")),
                    retry_after: None,
                    billed: true,
                };
                if bytes.iter().all(|b| b.is_ascii_whitespace()) {
                    return Err(bad("empty response body".into()));
                }
                let text = std::str::from_utf8(&bytes).map_err(|e| {
                    bad(format!("response body is not UTF-8 ({e}): {}", snippet(&String::from_utf8_lossy(&bytes))))
                })?;
                let v: Value = serde_json::from_str(text).map_err(|e| {
                    let hint = if e.is_eof() { " (truncated?)" } else { "" };
                    bad(format!("response is not JSON{hint}: {e}: {}", snippet(text)))
                })?;
                parse(&v).map_err(bad)
            }
        }
    }

    async fn exchange(
        &self,
        ep: &Endpoint,
        body: &[u8],
        key: Option<&str>,
        what: &str,
        ticket: &mut adaptive::Ticket<'_>,
    ) -> Result<Vec<u8>, Failure> {
        let mut rb = self
            .client
            .post(&ep.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body.to_vec());
        if let Some(k) = key {
            rb = rb.bearer_auth(k);
        }
        let mut resp = rb.send().await.map_err(|e| transport(what, "sending the request", e))?;
        let status = resp.status();
        ticket.answered(resp.headers());
        let retry_after = retry_after(resp.headers());
        let mut buf = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    if buf.len() + c.len() > MAX_BODY_BYTES {
                        return Err(Failure {
                            err: LlmError::BadResponse(format!(
                                "{what}: response body exceeds {} MiB (HTTP {status}); stopped reading",
                                MAX_BODY_BYTES >> 20
                            )),
                            retry_after: None,
                            billed: true,
                        });
                    }
                    buf.extend_from_slice(&c);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(transport(
                        what,
                        &format!("reading the body of an HTTP {status} response after {} bytes", buf.len()),
                        e,
                    ))
                }
            }
        }
        if status.is_success() {
            return Ok(buf);
        }
        let msg = format!("{what}: HTTP {status}: {}", snippet(&String::from_utf8_lossy(&buf)));
        // A 5xx may come after the work was done; a 429 or 408 is refused before it starts.
        let billed = status.is_server_error();
        Err(Failure { err: status_error(status.as_u16(), msg), retry_after, billed })
    }
}

/// A non-2xx status as an error: 429, 408 and 5xx are worth retrying, any other is final.
pub(crate) fn status_error(code: u16, msg: String) -> LlmError {
    if code == 429 || code == 408 || code >= 500 {
        LlmError::Retryable(msg)
    } else {
        LlmError::Http(msg)
    }
}

/// A URL as it may be logged or stored: userinfo (`user:pass@`) and the query (`?api-key=…`) are
/// replaced, so a key pasted into a base URL never reaches a log, an error row or a checkpoint.
pub fn redact_url(u: &str) -> String {
    match reqwest::Url::parse(u) {
        Ok(mut url) => {
            let had_user = !url.username().is_empty() || url.password().is_some();
            let had_query = url.query().is_some();
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            let mut s = url.to_string();
            if had_user {
                if let Some(i) = s.find("://") {
                    s.insert_str(i + 3, "***@");
                }
            }
            if had_query {
                s.push_str("?***");
            }
            // Url adds a `/` to an empty path; keep what the user wrote recognisable.
            if !u.trim_end_matches(['?', '#']).ends_with('/') && s.ends_with('/') && !had_query {
                s.pop();
            }
            s
        }
        // Not a URL: still never show what sits between `://` and `@`, or after `?`.
        Err(_) => {
            let mut s = u.split(['?', '#']).next().unwrap_or_default().to_string();
            if let (Some(a), Some(b)) = (s.find("://"), s.rfind('@')) {
                if b > a {
                    s.replace_range(a + 3..b, "***");
                }
            }
            s
        }
    }
}

/// Transport failures (refused, reset, closed mid-body, timeouts) are worth retrying; the chain names the cause.
fn transport(what: &str, doing: &str, e: reqwest::Error) -> Failure {
    // reqwest's message carries the request URL, credentials and query included; `what` names it redacted.
    let e = e.without_url();
    let mut msg = format!("{what}: {doing}: {e}");
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    let err = if e.is_builder() { LlmError::Other(msg) } else { LlmError::Retryable(msg) };
    // A refused connection sent nothing; a reset or a cut body may come after the work was done.
    let billed = !(e.is_builder() || e.is_connect());
    Failure { err, retry_after: None, billed }
}

/// The longest wait a `Retry-After` may ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// `Retry-After` in seconds (OpenAI also sends `retry-after-ms`), clamped to a day before it
/// becomes a duration (a server's `1e20` must not overflow one); more than [`MAX_RETRY_AFTER`]
/// fails the request. HTTP dates are ignored (backoff applies).
fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |k: &str| {
        h.get(k)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite() && *x >= 0.0)
    };
    let max = 86_400.0;
    get("retry-after-ms")
        .map(|ms| Duration::from_secs_f64((ms / 1e3).min(max)))
        .or_else(|| get("retry-after").map(|s| Duration::from_secs_f64(s.min(max))))
}

pub(crate) fn snippet(s: &str) -> String {
    let s = s.trim();
    let cut: String = s.chars().take(300).collect();
    if cut.len() < s.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// Evenly spaced admissions: each caller reserves the next slot `interval` after the previous one.
pub struct Spacing {
    interval: Duration,
    next: Mutex<Option<Instant>>,
}

impl Spacing {
    pub fn new(interval: Duration) -> Spacing {
        Spacing { interval, next: Mutex::new(None) }
    }
    pub async fn wait(&self) {
        let slot = {
            let mut next = self.next.lock().unwrap();
            let now = Instant::now();
            let slot = match *next {
                Some(t) if t > now => t,
                _ => now,
            };
            *next = Some(slot + self.interval);
            slot
        };
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// Sliding-window token budget: admits a request when the tokens admitted in the last `window` plus its estimate
/// fit the budget (a request larger than the whole budget waits for an empty window, then goes alone).
pub struct TokenWindow {
    budget: u64,
    window: Duration,
    log: Mutex<std::collections::VecDeque<(Instant, u64)>>,
}

impl TokenWindow {
    pub fn new(budget: u64, window: Duration) -> TokenWindow {
        TokenWindow { budget, window, log: Mutex::new(Default::default()) }
    }
    pub async fn acquire(&self, tokens: u64) {
        loop {
            let wait = {
                let mut log = self.log.lock().unwrap();
                let now = Instant::now();
                while log.front().is_some_and(|(t, _)| now.duration_since(*t) >= self.window) {
                    log.pop_front();
                }
                let used: u64 = log.iter().map(|(_, n)| n).sum();
                if log.is_empty() || used + tokens <= self.budget {
                    log.push_back((now, tokens));
                    return;
                }
                // Wait until the oldest entry leaves the window, then look again.
                let (oldest, _) = log.front().copied().unwrap();
                self.window.saturating_sub(now.duration_since(oldest)) + Duration::from_millis(1)
            };
            tokio::time::sleep(wait).await;
        }
    }
    /// Replace an estimate by the actual count (the most recent entry with that estimate).
    pub fn correct(&self, estimate: u64, actual: u64) {
        let mut log = self.log.lock().unwrap();
        if let Some(e) = log.iter_mut().rev().find(|(_, n)| *n == estimate) {
            e.1 = actual;
        }
    }
}

#[cfg(test)]
mod redact_tests {
    use super::redact_url;

    #[test]
    fn credentials_and_queries_never_shown() {
        assert_eq!(redact_url("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
        assert_eq!(redact_url("https://user:sk-SECRET@api.example.com/v1"), "https://***@api.example.com/v1");
        assert_eq!(
            redact_url("https://x.example.com/openai/deployments/d/chat?api-key=sk-SECRET&v=1"),
            "https://x.example.com/openai/deployments/d/chat?***"
        );
        assert!(!redact_url("nonsense://a:sk-SECRET@b?k=sk-SECRET").contains("SECRET"));
    }
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    /// Issue 30: a `Retry-After` no duration can hold is clamped before it becomes one (the
    /// end-to-end cases are `tests/wire.rs`).
    #[test]
    fn an_absurd_retry_after_is_clamped() {
        for (k, v) in [("retry-after", "1e20"), ("retry-after-ms", "1e300")] {
            let h = reqwest::header::HeaderMap::from_iter([(
                reqwest::header::HeaderName::from_static(k),
                reqwest::header::HeaderValue::from_static(v),
            )]);
            assert_eq!(retry_after(&h), Some(Duration::from_secs(86_400)), "{k}: {v}");
        }
    }
}
