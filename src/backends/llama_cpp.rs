//! `backend = "llama-cpp"`: any GGUF llama.cpp runs, with no server to install. doc2ci starts
//! llama.cpp's own server for it (the pinned xllamacpp wheel `doc2ci setup` unpacks; nothing is
//! compiled) on a loopback port the OS picks, once per process and model file, talks to it through
//! the OpenAI-compatible client with the GGUF's own chat template, and the server ends with doc2ci
//! however doc2ci ends. The file's content hash and the server's pinned build stand in the cache keys.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use doc2ci_llm::Backend;
use serde::Deserialize;

use crate::sandbox::Confine;
use toml::Spanned;

use super::{GenSettings, Kind};
use crate::assets;
use crate::keys::{fields_of, Ctx, Entry};

pub const KIND: Kind = Kind {
    server: false,
    own: fields_of::<Keys>,
    keys,
    model_file: true,
    pins,
    ..Kind::api_server("llama-cpp", build)
};

/// The server's package, the runner that starts it, and its library (what the pin stands for).
const SERVER_DIR: &str = "tools/xllamacpp";
const SERVER_LIB: &str = "tools/xllamacpp/xllamacpp/xllamacpp.abi3.so";
const RUNNER: &str = include_str!("llama_cpp.py");
/// Context per slot when `ctx_size` is not given.
const DEFAULT_CTX: u32 = 4096;
/// A model file loads within this (a 7B Q4 from a cold disk takes tens of seconds).
const LOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// What a server doc2ci starts itself is given besides the model file. Slots and threads are speed;
/// the template shapes every prompt, so it stands in the cache keys (`pins`).
#[derive(Debug, Clone, Default)]
pub struct LocalServer {
    /// Requests decoded together (0: the model's `concurrency`).
    pub slots: usize,
    pub threads: Option<usize>,
    /// None: the GGUF's own `tokenizer.chat_template`.
    pub chat_template: Option<ChatTemplate>,
}

/// A chat template the user chose over the GGUF's own (or for a GGUF that has none).
#[derive(Debug, Clone)]
pub enum ChatTemplate {
    /// One of llama.cpp's built-in templates, by name (`gemma`, `chatml`, `llama3`, ...).
    Builtin(String),
    /// A Jinja file's text, rendered by llama.cpp's Jinja engine.
    Jinja(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    /// A llama.cpp built-in template name, or a `.jinja` file (relative to the config).
    #[serde(default)]
    chat_template: Option<Spanned<String>>,
    /// Server slots: how many of a partition's requests are decoded together (default: `concurrency`).
    #[serde(default)]
    parallel: Option<Spanned<usize>>,
    /// Context per slot, in tokens: a prompt and its answer must fit (default 4096).
    #[serde(default)]
    ctx_size: Option<Spanned<u32>>,
    /// CPU threads of the server (default: the cores this process may use).
    #[serde(default)]
    threads: Option<Spanned<usize>>,
    #[serde(default)]
    top_p: Option<Spanned<f64>>,
    #[serde(default)]
    top_k: Option<Spanned<u32>>,
}

fn keys(cx: &Ctx, model: &str, e: Entry, g: &mut GenSettings) -> Result<()> {
    let span = e.span.clone();
    let k: Keys = e.rest(cx)?;
    if g.model_file.is_none() {
        return cx.err(
            span,
            "models.model",
            format!("model `{model}`: the llama-cpp backend needs `model = \"path/to/file.gguf\"` (any GGUF llama.cpp runs)"),
        );
    }
    let positive = |v: &Option<Spanned<usize>>, key: &str| -> Result<Option<usize>> {
        match v {
            Some(s) if *s.get_ref() == 0 => cx.err(s.span(), key, format!("model `{model}`: at least 1")),
            s => Ok(s.as_ref().map(|s| *s.get_ref())),
        }
    };
    // llama.cpp's server continues a text as is on `/v1/completions`; it echoes no prompt
    // log-probabilities.
    g.completions.raw = true;
    g.local.slots = positive(&k.parallel, "models.parallel")?.unwrap_or(g.concurrency);
    g.local.threads = positive(&k.threads, "models.threads")?;
    g.local.chat_template = match &k.chat_template {
        None => None,
        Some(t) if t.get_ref().ends_with(".jinja") => {
            let file = cx.path(t.span(), "models.chat_template", t.get_ref())?;
            let text = std::fs::read_to_string(&file);
            match text {
                Ok(text) => Some(ChatTemplate::Jinja(text)),
                Err(e) => {
                    return cx.err(
                        t.span(),
                        "models.chat_template",
                        format!("model `{model}`: {}: {e}", file.display()),
                    )
                }
            }
        }
        Some(t)
            if t.get_ref().is_empty()
                || !t.get_ref().chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            return cx.err(
                t.span(),
                "models.chat_template",
                format!(
                    "model `{model}`: a llama.cpp built-in template name (chatml, gemma, llama3, ...) or a .jinja file"
                ),
            )
        }
        Some(t) => Some(ChatTemplate::Builtin(t.get_ref().clone())),
    };
    let ctx = match &k.ctx_size {
        Some(c) if *c.get_ref() < 256 => {
            return cx.err(c.span(), "models.ctx_size", format!("model `{model}`: at least 256 tokens"))
        }
        c => c.as_ref().map_or(DEFAULT_CTX, |c| *c.get_ref()),
    };
    if ctx < g.key.max_tokens {
        return cx.err(
            k.ctx_size.as_ref().map_or(span, |c| c.span()),
            "models.ctx_size",
            format!("model `{model}`: ctx_size {ctx} is smaller than max_tokens {}", g.key.max_tokens),
        );
    }
    // The context decides what is cut, so it is in the key, as Ollama's num_ctx is.
    g.key.num_ctx = Some(ctx);
    if let Some(p) = &k.top_p {
        if !(*p.get_ref() > 0.0 && *p.get_ref() <= 1.0) {
            return cx.err(p.span(), "models.top_p", format!("model `{model}`: top_p must be in (0, 1]"));
        }
        g.key.params.insert("top_p".into(), serde_json::json!(p.get_ref()));
    }
    if let Some(t) = &k.top_k {
        g.key.params.insert("top_k".into(), serde_json::json!(t.get_ref()));
    }
    // A local server on CPU: a long answer of a large model takes minutes, not a network's seconds.
    g.timeout_ms = 1_800_000;
    g.retries = 1;
    Ok(())
}

/// The model file's content hash, and the server build's pinned hash: answers change with either.
fn pins(g: &GenSettings) -> Vec<(String, String)> {
    let mut pins = match &g.model_file {
        Some(p) => super::embedded::content_hash(p).map(|h| vec![(g.key.model_id.clone(), h)]).unwrap_or_default(),
        None => vec![],
    };
    if let Some(h) = assets::pinned_sha256(SERVER_LIB) {
        pins.push(("llama.cpp server".into(), h));
    }
    match &g.local.chat_template {
        Some(ChatTemplate::Builtin(name)) => pins.push(("chat template".into(), name.clone())),
        Some(ChatTemplate::Jinja(text)) => {
            pins.push(("chat template".into(), blake3::hash(text.as_bytes()).to_hex().to_string()))
        }
        None => {}
    }
    pins
}

/// A started server: its address, and the pipe whose end tells it doc2ci is gone.
struct Running {
    url: String,
    _lifeline: ChildStdin,
}

fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    let file = g.model_file.as_ref().ok_or_else(|| anyhow!("the llama-cpp backend needs `model` (a GGUF file)"))?;
    let url = server(file, g)?;
    let config = doc2ci_llm::OpenAiConfig {
        base_urls: vec![format!("{url}/v1")],
        model: "doc2ci".into(),
        api_key_env: None,
        api_key: None,
        limits: super::limits(g),
    };
    Ok(doc2ci_llm::openai_with(config, g.completions)?)
}

/// The server of `file` with these slots, context and threads: started on first use, then shared
/// by every partition and model entry of this process that asks for the same.
fn server(file: &Path, g: &GenSettings) -> Result<String> {
    static RUNNING: OnceLock<Mutex<HashMap<String, Running>>> = OnceLock::new();
    let threads = g.local.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (template, jinja) = match &g.local.chat_template {
        Some(ChatTemplate::Builtin(name)) => (Some(name.as_str()), false),
        Some(ChatTemplate::Jinja(text)) => (Some(text.as_str()), true),
        None => (None, true),
    };
    let args = serde_json::json!({
        "model": file, "threads": threads, "parallel": g.local.slots.max(1),
        "ctx": g.key.num_ctx.unwrap_or(DEFAULT_CTX), "alias": "doc2ci", "template": template, "jinja": jinja,
    })
    .to_string();
    let mut running =
        RUNNING.get_or_init(Default::default).lock().map_err(|_| anyhow!("llama.cpp servers poisoned"))?;
    if let Some(r) = running.get(&args) {
        return Ok(r.url.clone());
    }
    check_gguf(file)?;
    if template.is_none() && doc2ci_smollm::gguf_metadata_string(file, "tokenizer.chat_template")?.is_none() {
        // llama.cpp would answer with ChatML in silence, which a model not trained on it turns to garbage.
        bail!(
            "{} has no chat template (tokenizer.chat_template): set `chat_template` to the model's own, as a \
             llama.cpp built-in name (gemma, llama3, chatml, phi3, ...) or a .jinja file",
            file.display()
        );
    }
    let r = start(file, &args)?;
    let url = r.url.clone();
    running.insert(args, r);
    Ok(url)
}

/// A file llama.cpp would refuse with "check the input params" is named for what it is.
fn check_gguf(file: &Path) -> Result<()> {
    if !doc2ci_smollm::is_gguf(file).with_context(|| format!("cannot read {}", file.display()))? {
        bail!("{} is not a GGUF file (it does not start with the GGUF magic)", file.display());
    }
    Ok(())
}

fn start(file: &Path, args: &str) -> Result<Running> {
    let dir = assets::require(SERVER_LIB)
        .map(|_| assets::assets_dir().join(SERVER_DIR))
        .context("the llama-cpp backend runs llama.cpp's server from the assets: run `doc2ci setup`")?;
    for rel in ["tools/xllamacpp/xllamacpp/__init__.py", "tools/xllamacpp/xllamacpp/_version.py"] {
        assets::require(rel)?;
    }
    let python: PathBuf = std::env::var_os("DOC2CI_PYTHON").unwrap_or_else(|| "python3".into()).into();
    // The server keeps doc2ci's environment (it loads weights the study names, not untrusted
    // text). The thread below that starts it waits for it, so the death signal fires only when
    // doc2ci itself ends.
    let mut cmd = Confine::new().command(&python);
    cmd.arg("-c")
        .arg(RUNNER)
        .arg(args)
        .env("PYTHONPATH", &dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr_tail = Arc::new(Mutex::new(Vec::<u8>::new()));
    let tail = stderr_tail.clone();
    std::thread::Builder::new().name("llama-cpp-server".into()).spawn(move || {
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(Err(anyhow!("cannot start {} (set DOC2CI_PYTHON): {e}", python.display())));
                return;
            }
        };
        let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        // Its log, last 4 KiB kept: the reason when it fails to load.
        if let Some(mut err) = stderr {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    t.extend_from_slice(&buf[..n]);
                    let cut = t.len().saturating_sub(4096);
                    t.drain(..cut);
                }
            });
        }
        let mut line = String::new();
        let read = stdout.map(|o| BufReader::new(o).read_line(&mut line));
        let _ = tx.send(Ok((stdin, line, read.is_some())));
        let _ = child.wait();
    })?;
    let fail = |why: String| {
        std::thread::sleep(Duration::from_millis(200));
        let tail = String::from_utf8_lossy(&stderr_tail.lock().unwrap_or_else(|p| p.into_inner())).trim().to_string();
        anyhow!(
            "llama.cpp's server for {}: {why}{}",
            file.display(),
            if tail.is_empty() { String::new() } else { format!(":\n{tail}") }
        )
    };
    let (stdin, line, _) = match rx.recv_timeout(LOAD_TIMEOUT) {
        Ok(r) => r?,
        Err(_) => return Err(fail(format!("not listening after {} s", LOAD_TIMEOUT.as_secs()))),
    };
    #[derive(Deserialize)]
    struct Ready {
        url: String,
    }
    let ready: Ready = serde_json::from_str(line.trim()).map_err(|_| fail("it ended before it listened".into()))?;
    let stdin = stdin.ok_or_else(|| anyhow!("internal: the server's stdin is not piped"))?;
    Ok(Running { url: ready.url, _lifeline: stdin })
}
