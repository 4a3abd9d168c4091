//! The embedded model: a llama-architecture GGUF (by default SmolLM2-135M-Instruct) in-process on candle, so the
//! default study needs no server. Measured fixes over candle's stock path (SPEC §9): the tokenizer is rebuilt from the
//! GGUF's tokens and merges like llama.cpp's `smollm` pre-tokenizer (candle's `TokenizerFromGguf` adds a GPT-2 prefix
//! space and the model then answers `<|im_end|>` at once); prefill runs on f32 copies of the file's weights, a real
//! GEMM; decoding runs our own integer kernel on the file's own blocks (`llama.rs`, `q8.rs`), several sequences per
//! step: concurrent requests join one batch ([`backend`]), and each answer is the one it gets alone. A prompt
//! prefills only what follows the whole chunks it shares with the previous prompt (the study's system prompt and
//! instructions), its logits unchanged bit for bit ([`PREFILL_CHUNK`]). Each step takes as many threads as cores
//! are free (`cores.rs`).
//!
//! Owns: running the weights it is given. Never fetches them (`doc2ci setup` does) or builds prompts.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use doc2ci_errors::{fail, Within};
use doc2ci_llm::{Backend, LlmError, Message, Reply, Request};

pub mod cores;
mod llama;
mod template;
pub use doc2ci_errors::{Error, Result};
pub use llama::{prefill_boundary, PREFILL_CHUNK};
pub use q8::Kernel;
pub use template::ChatTemplate;

/// The decoder's numerics, in the cache key of every embedded generation: bumped whenever a
/// change may move a logit (2: prefill in chunks at fixed positions, so shared prefixes reuse).
/// The decoding kernel ([`Kernel::chosen`]) stands beside it: each sums floats in its own order.
pub const NUMERICS: &str = "2";
mod q8;

pub struct Embedded {
    model: llama::Llama,
    tokenizer: tokenizers::Tokenizer,
    template: ChatTemplate,
    /// The BOS id every prompt starts with, when the vocabulary adds one (`add_bos_token`).
    bos: Option<u32>,
    /// The vocabulary's end-of-generation ids (EOS, EOT, EOM) and the turn ends templates write.
    stop: Vec<u32>,
    name: String,
    /// Where the decoding weights came from: the file's own blocks, or (block types the kernel
    /// does not read) the Q8_0 copy cached next to it or converted in memory.
    pub weights_source: String,
    /// Positions the model takes, prompt and answer together.
    context: usize,
    /// The last prompt's tokens and cache: the next prompt prefills only what follows the
    /// prefix they share (the study's system prompt and instructions, few-shot examples).
    last_prompt: std::sync::Mutex<Option<(Vec<u32>, llama::Cache)>>,
    reuse: std::sync::atomic::AtomicBool,
    /// Prompt positions taken from the previous prompt's cache instead of prefilled, in total.
    reused: std::sync::atomic::AtomicUsize,
}

/// A GGUF's metadata string `key` (None: absent or not a string), read without its tensors: what a
/// caller needs to know of a file before handing it to a runtime (its chat template, architecture).
pub fn gguf_metadata_string(path: &Path, key: &str) -> Result<Option<String>> {
    let mut r = BufReader::new(File::open(path).within(|| format!("opening {}", path.display()))?);
    let ct = gguf_file::Content::read(&mut r).within(|| format!("{}: not a GGUF file", path.display()))?;
    Ok(ct.metadata.get(key).and_then(|v| v.to_string().ok()).cloned())
}

fn md_str<'a>(ct: &'a gguf_file::Content, k: &str) -> Result<&'a String> {
    ct.metadata
        .get(k)
        .ok_or_else(|| Error::Unsupported(format!("GGUF has no {k}")))?
        .to_string()
        .within(|| format!("GGUF {k}"))
}

fn md_strings(ct: &gguf_file::Content, k: &str) -> Result<Vec<String>> {
    let v = ct
        .metadata
        .get(k)
        .ok_or_else(|| Error::Unsupported(format!("GGUF has no {k}")))?
        .to_vec()
        .within(|| format!("GGUF {k}"))?;
    v.iter().map(|x| x.to_string().cloned().within(|| format!("GGUF {k}"))).collect()
}

/// Byte-level BPE from the GGUF's vocabulary and merges, pre-tokenized like llama.cpp's `smollm`/`starcoder`
/// pre-tokenizer (every digit alone, then GPT-2's regex, no prefix space); token type 3 (control) is special.
pub fn tokenizer_from_gguf(ct: &gguf_file::Content) -> Result<tokenizers::Tokenizer> {
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::{byte_level::ByteLevel, digits::Digits, sequence::Sequence, PreTokenizerWrapper};
    let model = md_str(ct, "tokenizer.ggml.model")?;
    if model != "gpt2" {
        fail!(Unsupported, "tokenizer.ggml.model is {model:?}; only byte-level BPE (gpt2) is supported");
    }
    let pre = ct.metadata.get("tokenizer.ggml.pre").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
    let split_digits =
        matches!(pre.as_str(), "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva");
    let tokens = md_strings(ct, "tokenizer.ggml.tokens")?;
    let merges = md_strings(ct, "tokenizer.ggml.merges")?;
    let types: Vec<i64> = match ct.metadata.get("tokenizer.ggml.token_type") {
        Some(v) => v.to_vec()?.iter().map(|x| x.to_i32().map(|i| i as i64)).collect::<candle_core::Result<_>>()?,
        None => vec![1; tokens.len()],
    };
    let vocab: tokenizers::models::bpe::Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let merges: Vec<(String, String)> = merges
        .iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| Error::Unsupported(format!("bad merge {m:?}")))
        })
        .collect::<Result<_>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| Error::Tokenizer(format!("BPE from GGUF: {e}")))?;
    let mut tok = tokenizers::Tokenizer::new(bpe);
    let byte_level = ByteLevel::new(false, true, true);
    let mut pres: Vec<PreTokenizerWrapper> = Vec::new();
    if split_digits {
        pres.push(Digits::new(true).into());
    }
    pres.push(byte_level.into());
    tok.with_pre_tokenizer(Some(Sequence::new(pres)));
    tok.with_decoder(Some(ByteLevel::default()));
    let specials: Vec<tokenizers::AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &t)| t == 3)
        .map(|(s, _)| tokenizers::AddedToken::from(s.clone(), true))
        .collect();
    tok.add_special_tokens(specials).map_err(|e| Error::Tokenizer(format!("adding the GGUF's special tokens: {e}")))?;
    Ok(tok)
}

/// Block types the decoding kernel reads as they are in the file.
const OWN_BLOCKS: [GgmlDType; 3] = [GgmlDType::Q8_0, GgmlDType::Q4_0, GgmlDType::Q4_1];
/// Unquantized types: read exactly for the prompt, and quantized to Q8_0 blocks for decoding.
const DENSE: [GgmlDType; 3] = [GgmlDType::F32, GgmlDType::F16, GgmlDType::BF16];
/// Pre-tokenizers this tokenizer reproduces: every digit alone then GPT-2's regex, or GPT-2's alone.
const PRE_DIGITS: [&str; 7] = ["smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"];
const PRE_GPT2: [&str; 2] = ["gpt-2", "gpt2"];

/// The id of a special token (`bos`, `eos`, `eot`, ...) the vocabulary names, if any.
fn special_id(ct: &gguf_file::Content, which: &str) -> Option<u32> {
    ct.metadata.get(&format!("tokenizer.ggml.{which}_token_id")).and_then(|v| v.to_u32().ok())
}

/// The GGUF's chat template, compiled, with its vocabulary's BOS and EOS texts. Whether the
/// vocabulary adds BOS is the file's `add_bos_token`; without one, llama.cpp's default for the
/// byte-level BPE pre-tokenizers this kernel reads is no.
fn template_of(ct: &gguf_file::Content) -> Result<ChatTemplate> {
    let source = md_str(ct, "tokenizer.chat_template")?;
    let tokens = md_strings(ct, "tokenizer.ggml.tokens")?;
    let text = |which: &str| special_id(ct, which).and_then(|i| tokens.get(i as usize)).cloned().unwrap_or_default();
    let add_bos = ct.metadata.get("tokenizer.ggml.add_bos_token").and_then(|v| v.to_bool().ok()).unwrap_or(false);
    ChatTemplate::new(source, &text("bos"), &text("eos"), add_bos)
}

/// Everything in `ct` the embedded kernel cannot run as the file says, checked before anything
/// loads: one message naming each (architecture, tokenizer, pre-tokenizer, tensor types, chat
/// template) and the backend that runs it. Nothing is converted, nothing written beside the file.
pub fn check_runnable(ct: &gguf_file::Content, gguf: &Path) -> Result<()> {
    runnable(ct, gguf).map(|_| ())
}

/// [`check_runnable`], giving the compiled chat template when the file runs (compiled once).
fn runnable(ct: &gguf_file::Content, gguf: &Path) -> Result<ChatTemplate> {
    let s = |k: &str| ct.metadata.get(k).and_then(|v| v.to_string().ok()).cloned();
    let mut why = Vec::new();
    match s("general.architecture").as_deref() {
        Some("llama") => {}
        a => why.push(format!("architecture {} (only llama)", a.unwrap_or("(none)"))),
    }
    // The kernel's rotary embedding is plain RoPE: a file that scales it (linear, YaRN, Llama 3's
    // long-context factors) would run with the wrong positions, silently.
    match s("llama.rope.scaling.type").as_deref() {
        None | Some("none") => {}
        Some(t) => why.push(format!("rope scaling {t} (the kernel applies none)")),
    }
    match s("tokenizer.ggml.model").as_deref() {
        Some("gpt2") => match s("tokenizer.ggml.pre").as_deref() {
            Some(p) if PRE_DIGITS.contains(&p) || PRE_GPT2.contains(&p) => {}
            p => why.push(format!("pre-tokenizer {} (not one this tokenizer reproduces)", p.unwrap_or("(none)"))),
        },
        m => why.push(format!("tokenizer {} (only byte-level BPE, gpt2)", m.unwrap_or("(none)"))),
    }
    let mut types: Vec<String> = ct
        .tensor_infos
        .values()
        .map(|t| t.ggml_dtype)
        .filter(|d| !OWN_BLOCKS.contains(d) && !DENSE.contains(d))
        .map(|d| format!("{d:?}"))
        .collect();
    types.sort();
    types.dedup();
    if !types.is_empty() {
        why.push(format!(
            "tensor type {} (the kernel reads Q8_0, Q4_0, Q4_1 and unquantized weights)",
            types.join(", ")
        ));
    }
    let template = match s("tokenizer.chat_template") {
        Some(_) => template_of(ct).map_err(|e| why.push(e.to_string())).ok(),
        None => {
            why.push("no chat template".into());
            None
        }
    };
    if let (true, Some(t)) = (why.is_empty(), template) {
        return Ok(t);
    }
    fail!(
        Unsupported,
        "{}: the embedded kernel does not run {}; backend = \"llama-cpp\" runs any GGUF llama.cpp runs",
        gguf.display(),
        why.join("; ")
    )
}

/// Whether the file starts with the GGUF magic (a file shorter than it is not a GGUF).
pub fn is_gguf(path: &Path) -> std::io::Result<bool> {
    let mut magic = [0u8; 4];
    match File::open(path)?.read_exact(&mut magic) {
        Ok(()) => Ok(&magic == b"GGUF"),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Why a file candle cannot parse was refused: a GGUF in a newer format or tensor type (I-quants),
/// or not a GGUF at all.
fn unreadable(gguf: &Path, e: impl std::fmt::Display) -> Error {
    if is_gguf(gguf).unwrap_or(false) {
        Error::Unsupported(format!(
            "{}: a GGUF the embedded kernel cannot read ({e}); backend = \"llama-cpp\" runs any GGUF llama.cpp runs",
            gguf.display()
        ))
    } else {
        Error::Unsupported(format!("{}: not a GGUF file", gguf.display()))
    }
}

/// One generation request of a batch.
#[derive(Debug, Clone)]
pub struct Ask {
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    pub temperature: f32,
    pub seed: Option<u64>,
}

/// A sequence being generated: its cache, sampler and tokens so far.
struct Seq {
    sampler: LogitsProcessor,
    cache: llama::Cache,
    prompt_tokens: usize,
    max_tokens: usize,
    out: Vec<u32>,
    /// The last token drawn: the next step's input.
    next: u32,
    finish: Option<&'static str>,
    started: Instant,
}

impl Embedded {
    pub fn load(gguf: &Path) -> Result<Embedded> {
        let open = || -> Result<_> {
            let mut r = BufReader::new(File::open(gguf).within(|| format!("opening {}", gguf.display()))?);
            let ct = gguf_file::Content::read(&mut r).map_err(|e| unreadable(gguf, e))?;
            Ok((ct, r))
        };
        let (ct, mut r) = open()?;
        let template = runnable(&ct, gguf)?;
        Kernel::chosen()?;
        let tokenizer = tokenizer_from_gguf(&ct).within(|| format!("tokenizer of {}", gguf.display()))?;
        let bos = special_id(&ct, "bos").filter(|_| template.add_bos);
        let mut stop = Vec::new();
        for t in ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"] {
            stop.extend(tokenizer.token_to_id(t));
        }
        // llama.cpp ends a turn at any end-of-generation token the vocabulary names.
        stop.extend(["eos", "eot", "eom"].iter().filter_map(|k| special_id(&ct, k)));
        stop.sort();
        stop.dedup();
        let name = ct
            .metadata
            .get("general.basename")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_else(|| gguf.file_stem().unwrap_or_default().to_string_lossy().to_string());
        // Prefill weights come from the file, exactly; so do the decoding ones where the kernel
        // reads the file's blocks (Q8_0, Q4_0, Q4_1). Unquantized matrices are quantized to Q8_0
        // blocks in memory for decoding, and the load says so.
        let (same, mut r2) = open()?;
        let model = llama::Llama::load((&ct, &mut r), (&same, &mut r2), &Device::Cpu)
            .within(|| format!("loading {}", gguf.display()))?;
        let dense = ct.tensor_infos.values().any(|t| t.shape.dims().len() == 2 && DENSE.contains(&t.ggml_dtype));
        let weights_source = if dense {
            format!("{} (its own blocks; unquantized matrices as Q8_0 blocks for decoding)", gguf.display())
        } else {
            format!("{} (its own blocks)", gguf.display())
        };
        let context = model.context;
        Ok(Embedded {
            model,
            tokenizer,
            template,
            bos,
            stop,
            name,
            weights_source,
            context,
            last_prompt: Default::default(),
            reuse: true.into(),
            reused: 0.into(),
        })
    }

    /// Whether a prompt reuses the cache of the prefix it shares with the previous one (default
    /// on; a prefix's keys and values are the same whichever prompt computed them). Either way
    /// the next prompt has none to share.
    pub fn reuse_prefixes(&self, on: bool) {
        self.reuse.store(on, std::sync::atomic::Ordering::Relaxed);
        *self.last_prompt.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// A cache already holding the longest prefix `ids` shares with the previous prompt (at
    /// least the last token is left to prefill, for its logits), and how many positions it holds.
    fn shared_prefix(&self, ids: &[u32]) -> llama::Cache {
        if !self.reuse.load(std::sync::atomic::Ordering::Relaxed) {
            return llama::Cache::default();
        }
        let last = self.last_prompt.lock().unwrap_or_else(|e| e.into_inner());
        match last.as_ref() {
            Some((prev, cache)) => {
                let n = prev.iter().zip(ids).take_while(|(a, b)| a == b).count().min(ids.len().saturating_sub(1));
                // Whole chunks only: the rest is then prefilled exactly as with the prefix.
                let n = llama::prefill_boundary(n);
                self.reused.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                cache.prefix(n)
            }
            None => llama::Cache::default(),
        }
    }

    /// Prompt positions so far taken from a shared prefix instead of prefilled.
    pub fn reused_positions(&self) -> usize {
        self.reused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Only the whole chunks of a prompt are ever reused, so only those are copied.
    fn keep_prompt(&self, ids: &[u32], cache: &llama::Cache) {
        if self.reuse.load(std::sync::atomic::Ordering::Relaxed) {
            let kept = cache.prefix(llama::prefill_boundary(ids.len()));
            *self.last_prompt.lock().unwrap_or_else(|e| e.into_inner()) = Some((ids.to_vec(), kept));
        }
    }

    /// The logits after `ids`, prefilled after the first `from` positions came from a cache of
    /// them (0: the whole prompt at once): the check that reusing a prefix changes no logit.
    pub fn prompt_logits(&self, ids: &[u32], from: usize) -> Result<Vec<f32>> {
        cores::on_free(|| {
            let mut cache = llama::Cache::default();
            if from > 0 {
                self.model.prefill(&ids[..from], &mut cache)?;
            }
            Ok(self.model.prefill(&ids[from..], &mut cache)?.to_vec1()?)
        })
    }

    /// The log-probability of each token of `text` given the ones before it (teacher forcing;
    /// BOS first when the vocabulary adds one, so the first token is scored too when it does),
    /// with the natural log-softmax of the f32 prefill's logits.
    pub fn token_logprobs(&self, text: &str) -> Result<Vec<f64>> {
        let mut ids: Vec<u32> = self.bos.into_iter().collect();
        ids.extend(self.tokenize(text)?);
        if ids.len() < 2 {
            return Ok(Vec::new());
        }
        let logits = cores::on_free(|| {
            let mut cache = llama::Cache::default();
            self.model.prefill_all(&ids[..ids.len() - 1], &mut cache)
        })?;
        let rows: Vec<Vec<f32>> = logits.to_vec2()?;
        Ok(rows
            .iter()
            .zip(&ids[1..])
            .map(|(row, &next)| {
                let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
                let lse = max + row.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln();
                row[next as usize] as f64 - lse
            })
            .collect())
    }

    pub fn tokenizer(&self) -> &tokenizers::Tokenizer {
        &self.tokenizer
    }

    /// Token ids as llama.cpp gives them with `parse_special = true` and no BOS (SmolLM2 adds none).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self
            .tokenizer
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(format!("tokenizing: {e}")))?
            .get_ids()
            .to_vec())
    }

    /// The prompt text, as llama.cpp's `/apply-template` gives it.
    pub fn prompt(&self, messages: &[Message]) -> Result<String> {
        self.template.render(messages)
    }

    /// The prompt's token ids, as llama.cpp's server tokenizes it (special tokens parsed, BOS
    /// first when the vocabulary adds one).
    /// A single [`doc2ci_llm::COMPLETION_ROLE`] message is the text to continue, as is.
    pub fn prompt_ids(&self, messages: &[Message]) -> Result<Vec<u32>> {
        let mut ids: Vec<u32> = self.bos.into_iter().collect();
        match messages {
            [m] if m.role == doc2ci_llm::COMPLETION_ROLE => ids.extend(self.tokenize(&m.content)?),
            _ => ids.extend(self.tokenize(&self.prompt(messages)?)?),
        }
        Ok(ids)
    }

    /// Greedy when temperature == 0; sampling with the seed otherwise. Blocking, CPU-bound.
    pub fn generate(
        &self,
        messages: &[Message],
        max_tokens: u32,
        temperature: f32,
        seed: Option<u64>,
    ) -> Result<Reply> {
        let (ids, reply) = self.generate_ids(messages, max_tokens, temperature, seed)?;
        let _ = ids;
        Ok(reply)
    }

    /// Like `generate`, also returning the completion's token ids (for comparisons with llama.cpp).
    /// Each step runs on as many threads as cores are free then ([`cores::on_free`]).
    pub fn generate_ids(
        &self,
        messages: &[Message],
        max_tokens: u32,
        temperature: f32,
        seed: Option<u64>,
    ) -> Result<(Vec<u32>, Reply)> {
        let mut seq = cores::on_free(|| self.start(messages, max_tokens, temperature, seed))?;
        while seq.finish.is_none() {
            let logits = cores::on_free(|| self.model.forward(&[seq.next], &mut seq.cache))?;
            self.take(&mut seq, &logits)?;
        }
        self.finish(seq)
    }

    /// A sequence with its prompt prefilled and its first token drawn (or finished already).
    fn start(&self, messages: &[Message], max_tokens: u32, temperature: f32, seed: Option<u64>) -> Result<Seq> {
        let started = Instant::now();
        let prompt_ids = self.prompt_ids(messages)?;
        if prompt_ids.len() >= self.context {
            fail!(
                Request,
                "{}: prompt has {} tokens; the embedded model takes at most {}",
                self.name,
                prompt_ids.len(),
                self.context
            );
        }
        let sampling =
            if temperature <= 0.0 { Sampling::ArgMax } else { Sampling::All { temperature: temperature as f64 } };
        let mut seq = Seq {
            sampler: LogitsProcessor::from_sampling(seed.unwrap_or_else(rand_seed), sampling),
            cache: llama::Cache::default(),
            prompt_tokens: prompt_ids.len(),
            max_tokens: max_tokens as usize,
            out: Vec::new(),
            next: 0,
            finish: None,
            started,
        };
        if max_tokens == 0 {
            seq.finish = Some("length");
            return Ok(seq);
        }
        seq.cache = self.shared_prefix(&prompt_ids);
        let logits = self.model.prefill(&prompt_ids[seq.cache.pos..], &mut seq.cache)?;
        self.keep_prompt(&prompt_ids, &seq.cache);
        self.take(&mut seq, &logits)?;
        Ok(seq)
    }

    /// Draws the sequence's next token from its logits; finishes it at a stop token, at
    /// `max_tokens`, or where the context ends.
    fn take(&self, seq: &mut Seq, logits: &Tensor) -> Result<()> {
        let next = seq.sampler.sample(logits)?;
        if self.stop.contains(&next) {
            seq.finish = Some("stop");
            return Ok(());
        }
        seq.out.push(next);
        seq.next = next;
        if seq.out.len() >= seq.max_tokens || seq.cache.pos + 1 > self.context {
            seq.finish = Some("length");
        }
        Ok(())
    }

    fn finish(&self, seq: Seq) -> Result<(Vec<u32>, Reply)> {
        let text = self.tokenizer.decode(&seq.out, true).map_err(|e| Error::Tokenizer(format!("decoding: {e}")))?;
        let reply = Reply {
            text,
            prompt_tokens: Some(seq.prompt_tokens as u32),
            completion_tokens: Some(seq.out.len() as u32),
            latency_ms: seq.started.elapsed().as_secs_f64() * 1e3,
            finish_reason: seq.finish.map(String::from),
            endpoint: format!("embedded:{}", self.name),
            attempts: 1,

            billed_retries: 0,
        };
        Ok((seq.out, reply))
    }

    /// Generates every request together: each sequence is prefilled alone, then all that are still
    /// running decode one token per step in one batch ([`llama::Llama::forward_batch`]). Each answer
    /// is the one [`Self::generate_ids`] gives for it alone. Each step runs on the cores free then.
    pub fn generate_batch(&self, asks: &[Ask]) -> Vec<Result<(Vec<u32>, Reply)>> {
        let mut seqs: Vec<Option<Result<Seq>>> = asks
            .iter()
            .map(|a| Some(cores::on_free(|| self.start(&a.messages, a.max_tokens, a.temperature, a.seed))))
            .collect();
        self.decode_all(&mut seqs);
        seqs.into_iter().map(|s| s.expect("every sequence kept").and_then(|s| self.finish(s))).collect()
    }

    /// Decodes every running sequence of `seqs` to its end, all together.
    fn decode_all(&self, seqs: &mut [Option<Result<Seq>>]) {
        loop {
            let mut running: Vec<&mut Seq> =
                seqs.iter_mut().filter_map(|s| s.as_mut()?.as_mut().ok()).filter(|s| s.finish.is_none()).collect();
            if running.is_empty() {
                return;
            }
            if let Err(e) = cores::on_free(|| self.step(&mut running)) {
                // A failed step fails every sequence it held (they share the batch).
                let msg = e.to_string();
                for s in seqs.iter_mut() {
                    if matches!(s, Some(Ok(q)) if q.finish.is_none()) {
                        *s = Some(Err(Error::Request(msg.clone())));
                    }
                }
                return;
            }
        }
    }

    /// One token for each of `running`.
    fn step(&self, running: &mut [&mut Seq]) -> Result<()> {
        let tokens: Vec<u32> = running.iter().map(|s| s.next).collect();
        let mut caches: Vec<&mut llama::Cache> = running.iter_mut().map(|s| &mut s.cache).collect();
        let logits = self.model.forward_batch(&tokens, &mut caches)?;
        for (i, seq) in running.iter_mut().enumerate() {
            self.take(seq, &logits.get(i)?)?;
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        let kernel = Kernel::chosen().map_or_else(|e| e.to_string(), |k| format!("{k:?}"));
        format!(
            "embedded {} (f32 prefill, batched integer decoding on the {kernel} kernel; weights from {})",
            self.name, self.weights_source
        )
    }
}

fn rand_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    (t as u64) ^ ((std::process::id() as u64) << 32)
}

/// Sequences decoded together at most: candle's quantized matmul reads a weight tile once for up to
/// 16 rows; 8 keeps a prefill's stall of the others short.
pub const MAX_BATCH: usize = 8;

type Answer = Result<(Vec<u32>, Reply)>;

/// A request waiting for the decoding loop, with where its answer goes.
struct Job {
    ask: Ask,
    reply: tokio::sync::oneshot::Sender<Answer>,
}

/// Continuous batching: one thread owns the decoding loop; a request that arrives joins the batch
/// at the next step (its prompt prefilled alone), and each sequence leaves when it ends.
struct EmbeddedBackend {
    model: Arc<Embedded>,
    jobs: Mutex<std::sync::mpsc::Sender<Job>>,
}

fn serve(model: Arc<Embedded>, jobs: std::sync::mpsc::Receiver<Job>, max_batch: usize) {
    let mut running: Vec<(Seq, tokio::sync::oneshot::Sender<Answer>)> = Vec::new();
    loop {
        let mut arrived = Vec::new();
        if running.is_empty() {
            match jobs.recv() {
                Ok(j) => arrived.push(j),
                Err(_) => return,
            }
        }
        while running.len() + arrived.len() < max_batch {
            match jobs.try_recv() {
                Ok(j) => arrived.push(j),
                Err(_) => break,
            }
        }
        for j in arrived {
            let a = &j.ask;
            match cores::on_free(|| model.start(&a.messages, a.max_tokens, a.temperature, a.seed)) {
                Ok(seq) if seq.finish.is_none() => running.push((seq, j.reply)),
                Ok(seq) => drop(j.reply.send(model.finish(seq))),
                Err(e) => drop(j.reply.send(Err(e))),
            }
        }
        // A caller that gave up (a timeout dropped its future) frees its slot.
        running.retain(|(_, reply)| !reply.is_closed());
        if running.is_empty() {
            continue;
        }
        let mut seqs: Vec<&mut Seq> = running.iter_mut().map(|(s, _)| s).collect();
        if let Err(e) = cores::on_free(|| model.step(&mut seqs)) {
            let msg = e.to_string();
            for (_, reply) in running.drain(..) {
                let _ = reply.send(Err(Error::Request(msg.clone())));
            }
            continue;
        }
        let (done, rest): (Vec<_>, Vec<_>) = running.into_iter().partition(|(s, _)| s.finish.is_some());
        running = rest;
        for (seq, reply) in done {
            let _ = reply.send(model.finish(seq));
        }
    }
}

#[async_trait::async_trait]
impl Backend for EmbeddedBackend {
    async fn chat(&self, req: &Request) -> Result<Reply, LlmError> {
        let ask = Ask {
            messages: req.messages.clone(),
            max_tokens: req.max_tokens,
            temperature: req.temperature,
            seed: req.seed,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.jobs.lock().map(|q| q.send(Job { ask, reply: tx }).is_ok()).unwrap_or(false);
        if !sent {
            return Err(LlmError::Other(format!("{}: the decoding thread has stopped", self.describe())));
        }
        match rx.await {
            Ok(Ok((_, reply))) => Ok(reply),
            Ok(Err(e)) => Err(LlmError::Other(format!("{}: {e:#}", self.describe()))),
            Err(_) => Err(LlmError::Other(format!("{}: the decoding thread has stopped", self.describe()))),
        }
    }
    fn raw_completion(&self) -> bool {
        true
    }
    async fn token_logprobs(&self, text: &str) -> Option<Result<Vec<f64>, LlmError>> {
        let (model, text) = (self.model.clone(), text.to_string());
        let r = tokio::task::spawn_blocking(move || model.token_logprobs(&text)).await;
        Some(match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(LlmError::Other(format!("{}: {e:#}", self.describe()))),
            Err(e) => Err(LlmError::Other(format!("{}: scoring stopped: {e}", self.describe()))),
        })
    }
    fn describe(&self) -> String {
        self.model.describe()
    }
}

/// Backend adapter: concurrent requests (up to [`MAX_BATCH`]) are decoded together by one thread.
pub fn backend(model: Arc<Embedded>) -> Arc<dyn Backend> {
    let (tx, rx) = std::sync::mpsc::channel();
    let m = model.clone();
    std::thread::Builder::new()
        .name("smollm-decode".into())
        .spawn(move || serve(m, rx, MAX_BATCH))
        .expect("starting the embedded model's decoding thread");
    Arc::new(EmbeddedBackend { model, jobs: Mutex::new(tx) })
}
