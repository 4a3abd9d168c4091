//! The embedded model against llama.cpp (its server, the `xllamacpp` peer; its output is committed in
//! `tests/data/llamacpp_reference.json` with the script that made it): identical token ids, identical
//! prompts from the GGUF's Jinja template and from templates in other models' dialects, and greedy
//! generations that agree token for token (float differences may only diverge late).
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use doc2ci_llm::{Message, Request};
use doc2ci_smollm::Embedded;
use serde_json::Value;

fn model() -> Arc<Embedded> {
    static M: OnceLock<Arc<Embedded>> = OnceLock::new();
    M.get_or_init(|| Arc::new(Embedded::load(&doc2ci_testkit::gguf()).expect("load embedded model"))).clone()
}

fn reference() -> Value {
    let p = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("tests/data/llamacpp_reference.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn messages(v: &Value) -> Vec<Message> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn token_ids_equal_llama_cpp() {
    let m = model();
    let r = reference();
    let cases = r["tokenized"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for c in cases {
        let text = c["text"].as_str().unwrap();
        assert_eq!(m.tokenize(text).unwrap(), ids(&c["ids"]), "token ids of {text:?}");
        // Byte-level BPE round-trips (special tokens kept when not skipped).
        let back = m.tokenizer().decode(&ids(&c["ids"]), false).unwrap();
        assert_eq!(back, text);
    }
}

#[test]
fn chatml_prompt_equals_gguf_template_rendering() {
    let m = model();
    for chat in reference()["chats"].as_array().unwrap() {
        let msgs = messages(&chat["messages"]);
        assert_eq!(m.prompt(&msgs).unwrap(), chat["prompt"].as_str().unwrap());
        assert_eq!(m.prompt_ids(&msgs).unwrap(), ids(&chat["prompt_ids"]));
    }
}

/// Chat templates in the dialects of the open models' own (Qwen 2.5, Hermes, Llama 3, Zephyr, and
/// one with namespaces and Python string methods), rendered by minijinja as llama.cpp's Jinja engine
/// renders them, byte for byte, and tokenized to the ids llama.cpp's server gives the prompt (a BOS
/// the template writes is the vocabulary's special token).
#[test]
fn jinja_templates_render_as_llama_cpp_renders_them() {
    let m = model();
    let r = reference();
    let templates = r["templates"].as_array().unwrap();
    assert!(templates.len() >= 5);
    for t in templates {
        let name = t["name"].as_str().unwrap();
        let (bos, eos) = (t["bos_token"].as_str().unwrap(), t["eos_token"].as_str().unwrap());
        let tmpl = doc2ci_smollm::ChatTemplate::new(t["source"].as_str().unwrap(), bos, eos, false).unwrap();
        for chat in t["chats"].as_array().unwrap() {
            let prompt = tmpl.render(&messages(&chat["messages"])).unwrap();
            assert_eq!(prompt, chat["prompt"].as_str().unwrap(), "{name}");
            assert_eq!(m.tokenize(&prompt).unwrap(), ids(&chat["prompt_ids"]), "{name}: token ids");
        }
    }
}

/// The greedy agreement below on every decoding kernel this CPU has, each forced in a process of
/// its own (`DOC2CI_KERNEL` is read once per process): AVX-512 VNNI, AVX2 and scalar.
#[test]
fn greedy_tokens_follow_llama_cpp_on_every_kernel() {
    let kernels = doc2ci_smollm::Kernel::available();
    assert!(kernels.contains(&doc2ci_smollm::Kernel::Scalar));
    for k in kernels {
        let name = format!("{k:?}").to_lowercase();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["greedy_tokens_follow_llama_cpp", "--exact", "--nocapture", "--test-threads", "1"])
            .env("DOC2CI_KERNEL", &name)
            .output()
            .unwrap();
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && log.contains("1 passed"), "{name} kernel:\n{log}");
        assert!(log.contains(&format!("on the {k:?} kernel")), "{name} was not the kernel that ran:\n{log}");
    }
}

#[test]
fn greedy_tokens_follow_llama_cpp() {
    let m = model();
    eprintln!("{}", m.describe());
    for chat in reference()["chats"].as_array().unwrap() {
        let msgs = messages(&chat["messages"]);
        let want = ids(&chat["greedy_ids"]);
        // The reference script's cap is 64 new tokens.
        let (got, reply) = m.generate_ids(&msgs, 64, 0.0, None).unwrap();
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        eprintln!("{same} of {} greedy tokens agree with llama.cpp", want.len());
        // Decoding computes as llama.cpp does (the file's own Q4_1 blocks against Q8_1-quantized activations,
        // `src/q8.rs`); only the order of float additions differs (and prefill is f32 on the exact weights), yet
        // every greedy token agrees on both prompts (the study prompt: 64 of 64, was 39 on candle's Q8_0 path).
        assert!(
            same == want.len(),
            "only {same} greedy tokens agree:\n ours: {:?}\n peer: {:?}",
            reply.text,
            chat["greedy_text"]
        );
        assert_eq!(reply.prompt_tokens, Some(ids(&chat["prompt_ids"]).len() as u32));
        assert_eq!(reply.completion_tokens, Some(got.len() as u32));
        if want.len() < 64 {
            // The peer stopped at <|im_end|> before the cap: so must we.
            assert_eq!(got, want);
            assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
            assert_eq!(reply.text, chat["greedy_text"].as_str().unwrap());
        } else {
            assert_eq!(reply.finish_reason.as_deref(), Some("length"));
        }
        assert!(reply.latency_ms > 0.0);
    }
}

#[test]
fn seeded_sampling_is_reproducible_and_max_tokens_caps() {
    let m = model();
    let msgs = vec![Message::new("user", "Write a haiku about continuous integration.")];
    let a = m.generate(&msgs, 12, 0.8, Some(7)).unwrap();
    let b = m.generate(&msgs, 12, 0.8, Some(7)).unwrap();
    assert_eq!(a.text, b.text);
    assert!(a.completion_tokens.unwrap() <= 12);
    let one = m.generate(&msgs, 1, 0.0, None).unwrap();
    assert_eq!(one.completion_tokens, Some(1));
    assert_eq!(one.finish_reason.as_deref(), Some("length"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_adapter_serves_concurrent_requests() {
    let b = doc2ci_smollm::backend(model());
    assert!(b.describe().contains("embedded"));
    let req = Request {
        messages: vec![Message::new("user", "What is 2+2?")],
        temperature: 0.0,
        max_tokens: 16,
        seed: None,
        extra: Default::default(),
    };
    let (x, y) = tokio::join!(b.chat(&req), b.chat(&req));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert_eq!(x.text, y.text, "greedy is deterministic even when requests queue");
    assert!(x.text.contains('4'), "{:?}", x.text);
}

#[test]
fn decoding_reads_the_files_own_q4_blocks_and_writes_no_copy() {
    let m = model();
    assert!(m.weights_source.ends_with("(its own blocks)"), "{}", m.weights_source);
    let dir = doc2ci_testkit::gguf().parent().unwrap().to_path_buf();
    let listing = || {
        let mut v: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        v.sort();
        v
    };
    let before = listing();
    let _ = Embedded::load(&doc2ci_testkit::gguf()).unwrap();
    assert_eq!(listing(), before, "a file was written beside the weights");
}

/// A file in a block type the kernel does not read (Q5_0, made here from the Q4_1 file's weights)
/// is refused before loading, with a message that names the type and the backend that runs it;
/// nothing is converted and nothing is written beside it.
#[test]
fn files_the_kernel_cannot_run_are_refused_with_what_runs_them() {
    use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
    let dir = tempfile_dir("q5");
    let q5 = dir.join("smollm2-q5_0.gguf");
    let dev = candle_core::Device::Cpu;
    let mut r = std::io::BufReader::new(std::fs::File::open(doc2ci_testkit::gguf()).unwrap());
    let ct = gguf_file::Content::read(&mut r).unwrap();
    let mut tensors = Vec::new();
    for name in ct.tensor_infos.keys() {
        let q = ct.tensor(&mut r, name, &dev).unwrap();
        let q = match q.dtype() {
            GgmlDType::Q4_1 => QTensor::quantize(&q.dequantize(&dev).unwrap(), GgmlDType::Q5_0).unwrap(),
            _ => q,
        };
        tensors.push((name.clone(), q));
    }
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, q)| (n.as_str(), q)).collect();
    let write = |path: &std::path::Path, meta: &[(&str, &gguf_file::Value)]| {
        gguf_file::write(&mut std::fs::File::create(path).unwrap(), meta, &tensors).unwrap();
    };
    let meta: Vec<(&str, &gguf_file::Value)> = ct.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    write(&q5, &meta);
    let err = Embedded::load(&q5).err().expect("a Q5_0 file is refused").to_string();
    assert!(err.contains("tensor type Q5_0") && err.contains("backend = \"llama-cpp\""), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing written beside the file");

    // Every reason at once: another architecture, tokenizer and template.
    let (arch, tok, tmpl) = (
        gguf_file::Value::String("qwen2".into()),
        gguf_file::Value::String("llama".into()),
        gguf_file::Value::String(
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
                .into(),
        ),
    );
    let yarn = gguf_file::Value::String("yarn".into());
    let mut meta: Vec<(&str, &gguf_file::Value)> = ct
        .metadata
        .iter()
        .map(|(k, v)| match k.as_str() {
            "general.architecture" => (k.as_str(), &arch),
            "tokenizer.ggml.model" => (k.as_str(), &tok),
            "tokenizer.chat_template" => (k.as_str(), &tmpl),
            _ => (k.as_str(), v),
        })
        .collect();
    meta.push(("llama.rope.scaling.type", &yarn));
    let other = dir.join("other.gguf");
    write(&other, &meta);
    let err = Embedded::load(&other).err().expect("refused").to_string();
    for part in
        ["architecture qwen2", "tokenizer llama", "tensor type Q5_0", "System role not supported", "rope scaling yarn"]
    {
        assert!(err.contains(part), "{part}: {err}");
    }
    std::fs::write(dir.join("text.gguf"), "not a model").unwrap();
    let err = Embedded::load(&dir.join("text.gguf")).err().expect("refused").to_string();
    assert!(err.contains("text.gguf: not a GGUF file"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("doc2ci-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Decoding several sequences in one batch changes nothing in any of them: each answer (greedy, and
/// sampled with its seed) has the token ids it gets alone, whatever shares its batch and however
/// long the others run; and through the backend, requests in flight together get those answers too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_sequences_equal_each_generated_alone() {
    let m = model();
    let r = reference();
    let chats = r["chats"].as_array().unwrap().iter().map(|c| messages(&c["messages"]));
    let texts = r["tokenized"].as_array().unwrap().iter().take(3);
    let texts = texts.map(|c| vec![Message::new("user", c["text"].as_str().unwrap())]);
    let mut asks: Vec<doc2ci_smollm::Ask> = chats
        .chain(texts)
        .map(|messages| doc2ci_smollm::Ask { messages, max_tokens: 40, temperature: 0.0, seed: None })
        .collect();
    // Different lengths and a sampled one: sequences leave the batch at different steps.
    asks[0].max_tokens = 7;
    let last = asks.len() - 1;
    asks[last].temperature = 0.8;
    asks[last].seed = Some(11);
    asks.push(doc2ci_smollm::Ask { max_tokens: 0, ..asks[1].clone() });
    assert!(asks.len() >= 4, "a batch of several sequences");
    let together = m.generate_batch(&asks);
    for (a, got) in asks.iter().zip(&together) {
        let (ids, reply) = got.as_ref().unwrap();
        let (alone, alone_reply) = m.generate_ids(&a.messages, a.max_tokens, a.temperature, a.seed).unwrap();
        assert_eq!(ids, &alone, "batched tokens of {:?}", a.messages.last().unwrap().content);
        assert_eq!(
            (reply.text.as_str(), &reply.finish_reason),
            (alone_reply.text.as_str(), &alone_reply.finish_reason)
        );
    }
    let b = doc2ci_smollm::backend(m.clone());
    let reqs: Vec<Request> = asks
        .iter()
        .map(|a| Request {
            messages: a.messages.clone(),
            temperature: a.temperature,
            max_tokens: a.max_tokens,
            seed: a.seed,
            extra: Default::default(),
        })
        .collect();
    let replies = futures_join(b.clone(), reqs).await;
    for (got, want) in replies.iter().zip(&together) {
        assert_eq!(got.as_ref().unwrap().text, want.as_ref().unwrap().1.text, "served in one batch");
    }
}

async fn futures_join(
    b: Arc<dyn doc2ci_llm::Backend>,
    reqs: Vec<Request>,
) -> Vec<Result<doc2ci_llm::Reply, doc2ci_llm::LlmError>> {
    let handles: Vec<_> = reqs
        .into_iter()
        .map(|r| {
            let b = b.clone();
            tokio::spawn(async move { b.chat(&r).await })
        })
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// Prompts of one study share their system prompt and instructions: a prompt prefills only what
/// follows the prefix it shares with the previous one, and every greedy token is the one a model
/// that prefills each prompt whole gives.
#[test]
fn a_shared_prompt_prefix_is_reused_and_changes_no_token() {
    let reusing = Embedded::load(&doc2ci_testkit::gguf()).unwrap();
    let whole = Embedded::load(&doc2ci_testkit::gguf()).unwrap();
    whole.reuse_prefixes(false);
    let r = reference();
    let study = messages(&r["chats"][0]["messages"]);
    let task = study[1].content.split("\n\n").next().unwrap().to_string();
    let descriptions = [
        "Run the test suite on every push to main with Node.js 20.",
        "Build a Docker image on tags and push it to the registry.",
        "Cache pip dependencies between jobs and run pytest on Python 3.12.",
        "Deploy the site to pages when the docs folder changes.",
    ];
    for d in descriptions {
        let msgs = vec![study[0].clone(), Message::new("user", format!("{task}\n\n{d}"))];
        let (got, reply) = reusing.generate_ids(&msgs, 48, 0.0, None).unwrap();
        let (want, _) = whole.generate_ids(&msgs, 48, 0.0, None).unwrap();
        assert_eq!(got, want, "tokens for {d:?}: {}", reply.text);
        // Sampling reads every logit: the same seed draws the same tokens only from the same logits.
        let (got, _) = reusing.generate_ids(&msgs, 48, 1.0, Some(5)).unwrap();
        let (want, _) = whole.generate_ids(&msgs, 48, 1.0, Some(5)).unwrap();
        assert_eq!(got, want, "sampled tokens for {d:?}");
    }
    // Every prompt after the first shares at least the system prompt and the instructions.
    let shared = reusing.prompt_ids(&[study[0].clone(), Message::new("user", task.clone())]).unwrap();
    assert!(
        reusing.reused_positions() >= 7 * doc2ci_smollm::prefill_boundary(shared.len() - 8),
        "{} positions reused, the shared prefix has about {}",
        reusing.reused_positions(),
        shared.len()
    );
    assert_eq!(whole.reused_positions(), 0);
    // The logits themselves, bit for bit, after every whole number of chunks taken from a cache.
    // A long prompt: chunks of every length.
    let long = format!("{}\n\n{}", study[1].content, descriptions.join(" ").repeat(8));
    let ids = whole.prompt_ids(&[study[0].clone(), Message::new("user", long)]).unwrap();
    assert!(ids.len() > 600, "{} positions", ids.len());
    let all = whole.prompt_logits(&ids, 0).unwrap();
    let mut starts: Vec<usize> = (1..ids.len()).map(doc2ci_smollm::prefill_boundary).filter(|&b| b > 0).collect();
    starts.dedup();
    assert_eq!(starts, [64, 128, 256, 512], "chunks end at doubling positions");
    for from in starts {
        let got = whole.prompt_logits(&ids, from).unwrap();
        let same = all.iter().zip(&got).filter(|(a, b)| a.to_bits() == b.to_bits()).count();
        assert_eq!(same, all.len(), "logits after a cached prefix of {from} of {} positions", ids.len());
    }
}

/// Teacher forcing, which Min-K% Prob reads (`Embedded::token_logprobs`), against llama.cpp on four
/// real llm4ci references: the log-probability of every token given the ones before it, from
/// `tests/data/llamacpp_logprobs.json` (made by `peers/token_logprobs.py`). The f32 prefill and
/// llama.cpp's quantised matmuls round differently, so values agree to a tolerance, not bit for bit.
#[test]
fn token_logprobs_follow_llama_cpp() {
    // Measured 2026-12-07 on these 315 tokens: mean 0.078, largest 1.015, Min-K% 0.068 (of values
    // near -8), correlation 0.999. Limits: those with a margin.
    const MEAN_TOLERANCE: f64 = 0.1;
    const TOLERANCE: f64 = 1.25;
    const MIN_K_TOLERANCE: f64 = 0.1;
    const MIN_CORRELATION: f64 = 0.99;
    let p = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("tests/data/llamacpp_logprobs.json");
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let m = model();
    let min_k = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = ((s.len() as f64 * 0.2) as usize).max(1);
        s[..n].iter().sum::<f64>() / n as f64
    };
    let (mut worst, mut sum, mut n, mut worst_min_k) = (0f64, 0f64, 0usize, 0f64);
    let (mut all_ours, mut all_theirs) = (Vec::new(), Vec::new());
    for t in reference["texts"].as_array().unwrap() {
        let text = t["text"].as_str().unwrap();
        assert_eq!(m.tokenize(text).unwrap(), ids(&t["ids"]), "text {}", t["id"]);
        let theirs: Vec<f64> = t["logprobs"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let ours = m.token_logprobs(text).unwrap();
        assert_eq!(ours.len(), theirs.len(), "text {}: one value per token after the first", t["id"]);
        for (a, b) in ours.iter().zip(&theirs) {
            worst = worst.max((a - b).abs());
            sum += (a - b).abs();
            n += 1;
        }
        worst_min_k = worst_min_k.max((min_k(&ours) - min_k(&theirs)).abs());
        all_ours.extend(ours);
        all_theirs.extend(theirs);
    }
    let mu = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (ma, mb) = (mu(&all_ours), mu(&all_theirs));
    let cov: f64 = all_ours.iter().zip(&all_theirs).map(|(a, b)| (a - ma) * (b - mb)).sum();
    let var = |v: &[f64], m: f64| v.iter().map(|x| (x - m) * (x - m)).sum::<f64>();
    let r = cov / (var(&all_ours, ma) * var(&all_theirs, mb)).sqrt();
    let mean = sum / n as f64;
    let said = format!("{n} tokens: mean |difference| {mean:.4}, largest {worst:.4}, correlation {r:.4}; Min-K% largest {worst_min_k:.4}");
    eprintln!("{said}");
    assert!(
        mean < MEAN_TOLERANCE && worst < TOLERANCE && worst_min_k < MIN_K_TOLERANCE && r > MIN_CORRELATION,
        "{said}"
    );
}
