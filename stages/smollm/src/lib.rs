//! The embedded model: SmolLM2-135M-Instruct in-process.
use std::sync::Arc;

pub struct Embedded {}

impl Embedded {
    pub fn load(gguf: &std::path::Path) -> anyhow::Result<Embedded> {
        let _ = gguf;
        todo!()
    }

    pub fn generate(
        &self,
        messages: &[doc2ci_llm::Message],
        max_tokens: u32,
        temperature: f32,
        seed: Option<u64>,
    ) -> anyhow::Result<doc2ci_llm::Reply> {
        let _ = (messages, max_tokens, temperature, seed);
        todo!()
    }
}

pub fn backend(model: Arc<Embedded>) -> Arc<dyn doc2ci_llm::Backend> {
    let _ = model;
    todo!()
}
