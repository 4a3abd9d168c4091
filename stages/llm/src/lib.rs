//! Chat backends shared by the generate and repair stages.
use std::sync::Arc;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub messages: Vec<Message>,
    pub temperature: f32,
    pub max_tokens: u32,
    pub seed: Option<u64>,
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub latency_ms: f64,
    pub finish_reason: Option<String>,
    pub endpoint: String,
    pub attempts: u32,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("{0}")]
    Http(String),
    #[error("{0}")]
    Retryable(String),
    #[error("{0}")]
    BadResponse(String),
    #[error("{0}")]
    Other(String),
}

#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    async fn chat(&self, req: &Request) -> Result<Reply, LlmError>;
    fn describe(&self) -> String;
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub concurrency: usize,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    pub retries: u32,
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
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
    pub base_urls: Vec<String>,
    pub model: String,
    pub api_key_env: Option<String>,
    pub limits: Limits,
}

#[derive(Debug, Clone)]
pub struct OllamaConfig {
    pub base_urls: Vec<String>,
    pub model: String,
    pub num_ctx: Option<u32>,
    pub limits: Limits,
}

pub fn openai(cfg: OpenAiConfig) -> Result<Arc<dyn Backend>, LlmError> {
    let _ = cfg;
    todo!()
}

pub fn ollama(cfg: OllamaConfig) -> Result<Arc<dyn Backend>, LlmError> {
    let _ = cfg;
    todo!()
}
