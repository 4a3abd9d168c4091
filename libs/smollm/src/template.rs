//! The GGUF's own chat template, rendered by a real Jinja engine (minijinja) the way llama.cpp's
//! server renders it: `messages`, `add_generation_prompt = true`, the vocabulary's `bos_token` and
//! `eos_token` texts, Jinja2's `trim_blocks` and `lstrip_blocks` (as transformers and llama.cpp set
//! them), Python's string methods (`.strip()`, `.startswith()`, ...) and `raise_exception`. Then
//! llama.cpp's own step: when the vocabulary adds a BOS token itself, a BOS the template wrote is
//! taken off the text, so the prompt holds exactly one either way.

use doc2ci_llm::Message;
use minijinja::{Environment, Error as JinjaError, ErrorKind};

use doc2ci_errors::{fail, Result};

/// A compiled chat template and the special tokens it is rendered with.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    /// The vocabulary adds BOS to every prompt (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("bos", &self.bos).field("add_bos", &self.add_bos).finish()
    }
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`, and renders a two-turn probe conversation: a template that needs what
    /// the embedded kernel does not give it (tools, a date function) is refused now, with
    /// minijinja's reason, not at the first request.
    pub fn new(source: &str, bos: &str, eos: &str, add_bos: bool) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> std::result::Result<String, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
        });
        if let Err(e) = env.add_template_owned(NAME, source.to_string()) {
            fail!(Unsupported, "chat template does not compile: {}", describe(&e));
        }
        let t = ChatTemplate { env, bos: bos.into(), eos: eos.into(), add_bos };
        let probe = [Message::new("system", "s"), Message::new("user", "u")];
        if let Err(e) = t.try_render(&probe) {
            fail!(Unsupported, "chat template does not render a system and a user message: {e}");
        }
        Ok(t)
    }

    /// The prompt text, as llama.cpp's `/apply-template` gives it.
    pub fn render(&self, messages: &[Message]) -> Result<String> {
        match self.try_render(messages) {
            Ok(s) => Ok(s),
            Err(e) => fail!(Request, "the chat template refused this conversation: {e}"),
        }
    }

    fn try_render(&self, messages: &[Message]) -> std::result::Result<String, String> {
        let t = self.env.get_template(NAME).map_err(|e| describe(&e))?;
        let ctx = minijinja::context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => &self.bos,
            eos_token => &self.eos,
        };
        let mut out = t.render(ctx).map_err(|e| describe(&e))?;
        if self.add_bos && !self.bos.is_empty() && out.starts_with(&self.bos) {
            out.drain(..self.bos.len());
        }
        Ok(out)
    }
}

/// minijinja's error with its cause chain, on one line.
fn describe(e: &JinjaError) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(&format!(": {c}"));
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat() -> Vec<Message> {
        vec![Message::new("system", "Be brief."), Message::new("user", "  Hi  ")]
    }

    #[test]
    fn python_string_methods_loops_and_specials_render_as_jinja2() {
        let src = "{{ bos_token }}{% for m in messages %}{% if loop.first and m['role'] == 'system' %}\
                   [{{ m.content | trim }}]\n{% else %}<{{ m.role }}>{{ m['content'].strip() }}{{ eos_token }}\n\
                   {% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
        let t = ChatTemplate::new(src, "<s>", "</s>", false).unwrap();
        assert_eq!(t.render(&chat()).unwrap(), "<s>[Be brief.]\n<user>Hi</s>\n<assistant>");
        // The vocabulary adds BOS itself: the template's is taken off (llama.cpp's rule).
        let t = ChatTemplate::new(src, "<s>", "</s>", true).unwrap();
        assert_eq!(t.render(&chat()).unwrap(), "[Be brief.]\n<user>Hi</s>\n<assistant>");
    }

    #[test]
    fn a_template_that_cannot_run_is_refused_with_its_reason() {
        let e = ChatTemplate::new("{% for m in messages %}", "", "", false).unwrap_err().to_string();
        assert!(e.contains("does not compile"), "{e}");
        let src =
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}";
        let e = ChatTemplate::new(src, "", "", false).unwrap_err().to_string();
        assert!(e.contains("System role not supported"), "{e}");
    }
}
