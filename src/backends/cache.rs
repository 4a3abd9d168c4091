//! The request cache shared across studies (issues 16 and 30): an answered request is kept under the
//! hash of everything that shapes its answer — the backend kind, the endpoint (the normalised
//! `base_url`s, or the `cache_namespace` a user declares for endpoints they know to be the same),
//! the model id, the backend's options (`num_ctx`), the weights' content hash and the decoder's
//! numerics version (embedded), the prompt version, the whole request (messages, temperature,
//! token cap, seed, extra body parameters) and the sample number — in a folder outside any
//! warehouse, so a second study folder with the same model and prompts asks nothing and pays
//! nothing, and two servers that both call their model `default` never share answers.
//! Credentials are never part of a request or of a normalised URL, so never of the key; failures
//! are never stored; an entry older than the TTL is asked again. Where: `DOC2CI_REQUEST_CACHE` (a folder, or
//! `off`), else `[study] request_cache` (a folder, or `"off"`), else `~/.cache/doc2ci/requests`;
//! `doc2ci run --no-request-cache` turns it off for one run.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use doc2ci_llm::{Reply, Request};
use serde::{Deserialize, Serialize};

use super::GenSettings;

/// Where the cache lives and how long an entry stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheSettings {
    pub dir: PathBuf,
    pub ttl: Option<Duration>,
}

impl CacheSettings {
    /// The settings for a study: `setting` is `[study] request_cache` (relative to `base`), the
    /// environment wins over it. `None`: off.
    pub fn resolve(setting: Option<&str>, ttl_days: Option<f64>, base: &Path) -> Option<CacheSettings> {
        let env = std::env::var("DOC2CI_REQUEST_CACHE").ok().filter(|v| !v.is_empty());
        let chosen = env.as_deref().or(setting);
        let dir = match chosen {
            Some(v) if ["off", "false", "0", "no"].contains(&v.to_ascii_lowercase().as_str()) => return None,
            Some(v) => base.join(v),
            None => {
                let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).unwrap_or_else(|| ".".into());
                PathBuf::from(home).join(".cache").join("doc2ci").join("requests")
            }
        };
        let ttl = ttl_days.filter(|d| *d > 0.0).map(|d| Duration::from_secs_f64(d * 86_400.0));
        Some(CacheSettings { dir, ttl })
    }
}

/// What is kept of an answer (its endpoint and attempts belong to the run that asked).
#[derive(Serialize, Deserialize)]
struct Entry {
    text: String,
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    latency_ms: f64,
    finish_reason: Option<String>,
}

pub struct RequestCache {
    s: CacheSettings,
    /// Lookups answered and not, logged to `hits.log` when the cache is dropped.
    hits: AtomicU64,
    misses: AtomicU64,
}

/// What `doc2ci cache stats` shows.
#[derive(Debug, Default, PartialEq)]
pub struct CacheStats {
    pub entries: u64,
    pub bytes: u64,
    pub hits: u64,
    pub misses: u64,
    /// Half-written entries of writers that are gone (`doc2ci gc` removes them).
    pub partial: u64,
}

const HITS_LOG: &str = "hits.log";

/// `Reply::endpoint` of an answer that came from the cache (its `attempts` is 0: nothing was asked).
pub const FROM_CACHE: &str = "request cache";

impl RequestCache {
    pub fn new(s: &CacheSettings) -> RequestCache {
        RequestCache { s: s.clone(), hits: AtomicU64::new(0), misses: AtomicU64::new(0) }
    }

    /// Entries, bytes, and the hits and misses every run has logged.
    pub fn stats(s: &CacheSettings) -> CacheStats {
        let mut st = CacheStats::default();
        for shard in std::fs::read_dir(&s.dir).into_iter().flatten().flatten() {
            for e in std::fs::read_dir(shard.path()).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                if name.ends_with(".part") {
                    st.partial += 1;
                } else if name.ends_with(".json") {
                    (st.entries, st.bytes) = (st.entries + 1, st.bytes + len);
                }
            }
        }
        for line in std::fs::read_to_string(s.dir.join(HITS_LOG)).unwrap_or_default().lines() {
            let n: Vec<u64> = line.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            if let [_, h, m] = n[..] {
                (st.hits, st.misses) = (st.hits + h, st.misses + m);
            }
        }
        st
    }

    /// The content address of one request of sample `sample` to the model `g` describes. Version
    /// 2: entries written under version 1's key (no endpoint, options or weights) are never served.
    pub fn key(g: &GenSettings, req: &Request, sample: u32) -> String {
        let messages: Vec<(&str, &str)> = req.messages.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
        let k = &g.key;
        let body = serde_json::json!({
            "v": 2, "kind": k.backend, "endpoint": k.endpoint, "model": k.model_id, "num_ctx": k.num_ctx,
            "weights": super::pins(Some(g)), "prompt": doc2ci_generate::PROMPT_VERSION,
            "messages": messages, "temperature": req.temperature, "max_tokens": req.max_tokens, "seed": req.seed,
            "extra": req.extra, "sample": sample,
        });
        blake3::hash(body.to_string().as_bytes()).to_hex().to_string()
    }

    fn path(&self, key: &str) -> PathBuf {
        self.s.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// The stored answer, unless it is missing, unreadable or older than the TTL.
    pub fn get(&self, key: &str) -> Option<Reply> {
        let r = self.read(key);
        let counter = if r.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        r
    }

    fn read(&self, key: &str) -> Option<Reply> {
        let p = self.path(key);
        if let Some(ttl) = self.s.ttl {
            let age = std::fs::metadata(&p).ok()?.modified().ok()?;
            if SystemTime::now().duration_since(age).unwrap_or_default() > ttl {
                return None;
            }
        }
        let e: Entry = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
        Some(Reply {
            text: e.text,
            prompt_tokens: e.prompt_tokens,
            completion_tokens: e.completion_tokens,
            latency_ms: e.latency_ms,
            finish_reason: e.finish_reason,
            endpoint: FROM_CACHE.into(),
            attempts: 0,

            billed_retries: 0,
        })
    }

    /// Removes what killed writers left half-written (`.<key>.<pid>.part` of a process that is
    /// gone; the cache is shared, so a live writer's file stays): how many files and bytes.
    pub fn sweep(&self) -> (usize, u64) {
        let (mut n, mut bytes) = (0, 0);
        for shard in std::fs::read_dir(&self.s.dir).into_iter().flatten().flatten() {
            for e in std::fs::read_dir(shard.path()).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name.strip_suffix(".part").and_then(|s| s.rsplit('.').next()) else { continue };
                let alive = pid.parse::<u32>().is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
                if alive {
                    continue;
                }
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                if std::fs::remove_file(e.path()).is_ok() {
                    (n, bytes) = (n + 1, bytes + len);
                }
            }
        }
        (n, bytes)
    }

    /// Stores an answer (written aside and renamed: a reader never sees half an entry).
    pub fn put(&self, key: &str, r: &Reply) -> Result<()> {
        let p = self.path(key);
        let dir = p.parent().expect("a cache path has a folder");
        std::fs::create_dir_all(dir).with_context(|| format!("creating the request cache {}", dir.display()))?;
        let e = Entry {
            text: r.text.clone(),
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            latency_ms: r.latency_ms,
            finish_reason: r.finish_reason.clone(),
        };
        let tmp = dir.join(format!(".{key}.{}.part", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec(&e)?).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &p).with_context(|| format!("writing {}", p.display()))?;
        Ok(())
    }
}

/// Each user of the cache logs what it found, one line (`<unix seconds> <hits> <misses>`) appended
/// in one write, so concurrent studies never interleave a line.
impl Drop for RequestCache {
    fn drop(&mut self) {
        let (h, m) = (*self.hits.get_mut(), *self.misses.get_mut());
        if h + m == 0 {
            return;
        }
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let line = format!("{now} {h} {m}\n");
        let _ = std::fs::create_dir_all(&self.s.dir);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.s.dir.join(HITS_LOG));
        if let Ok(mut f) = log {
            let _ = std::io::Write::write_all(&mut f, line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use doc2ci_llm::Message;

    fn req(text: &str) -> Request {
        Request {
            messages: vec![Message::new("user", text)],
            temperature: 0.0,
            max_tokens: 64,
            seed: None,
            extra: Default::default(),
        }
    }

    fn reply() -> Reply {
        Reply {
            text: "on: push".into(),
            prompt_tokens: Some(10),
            completion_tokens: Some(3),
            latency_ms: 12.0,
            finish_reason: Some("stop".into()),
            endpoint: "http://127.0.0.1:1/v1".into(),
            attempts: 2,
            billed_retries: 0,
        }
    }

    /// A model of `backend` at one endpoint, as the config would set it (the key's tests as a user
    /// declares models are `config::tests::request_cache_keys_follow_what_shapes_the_answer`).
    fn model(backend: &str, model: &str) -> GenSettings {
        GenSettings {
            key: crate::backends::GenKey {
                backend: backend.into(),
                model_id: model.into(),
                max_tokens: 64,
                temperature: 0.0,
                samples: 1,
                seed: 0,
                few_shot: 0,
                retrieval: 0,
                retrieval_chars: 0,
                num_ctx: None,
                endpoint: Some(crate::backends::server::endpoint_identity(&["http://h/v1".into()])),
                params: Default::default(),
                max_pairs: None,
            },
            base_urls: vec!["http://h/v1".into()],
            api_key_env: None,
            concurrency: 1,
            rpm: None,
            tpm: None,
            retries: 0,
            timeout_ms: 1000,
            price_per_1k_input: None,
            price_per_1k_output: None,
            max_cost: None,
            services: vec![],
            model_file: None,
            local: Default::default(),
            completions: Default::default(),
        }
    }

    #[test]
    fn stats_count_entries_bytes_hits_and_misses() {
        let dir = tempfile::tempdir().unwrap();
        let s = CacheSettings { dir: dir.path().into(), ttl: None };
        let k = RequestCache::key(&model("openai", "m"), &req("a"), 0);
        {
            let c = RequestCache::new(&s);
            assert!(c.get(&k).is_none());
            c.put(&k, &reply()).unwrap();
        }
        {
            let c = RequestCache::new(&s);
            assert!(c.get(&k).is_some());
            assert!(c.get(&k).is_some());
        }
        let st = RequestCache::stats(&s);
        let bytes = std::fs::metadata(dir.path().join(&k[..2]).join(format!("{k}.json"))).unwrap().len();
        assert_eq!(st, CacheStats { entries: 1, bytes, hits: 2, misses: 1, partial: 0 });
    }

    #[test]
    fn gc_sweeps_only_dead_writers_half_files() {
        let dir = tempfile::tempdir().unwrap();
        let c = RequestCache::new(&CacheSettings { dir: dir.path().into(), ttl: None });
        let k = RequestCache::key(&model("openai", "m"), &req("a"), 0);
        c.put(&k, &reply()).unwrap();
        let shard = dir.path().join(&k[..2]);
        // A writer that no longer runs (pid far above pid_max), and one that does (us).
        std::fs::write(shard.join(format!(".{k}.4294967295.part")), b"half").unwrap();
        std::fs::write(shard.join(format!(".{k}.{}.part", std::process::id())), b"live").unwrap();
        assert_eq!(c.sweep(), (1, 4));
        assert!(c.get(&k).is_some(), "a whole entry stays");
        assert!(shard.join(format!(".{k}.{}.part", std::process::id())).exists());
    }

    #[test]
    fn an_answer_comes_back_marked_and_expires() {
        let dir = tempfile::tempdir().unwrap();
        let c = RequestCache::new(&CacheSettings { dir: dir.path().into(), ttl: None });
        let k = RequestCache::key(&model("openai", "m"), &req("a"), 0);
        assert!(c.get(&k).is_none());
        c.put(&k, &reply()).unwrap();
        let hit = c.get(&k).unwrap();
        assert_eq!((hit.text.as_str(), hit.attempts, hit.endpoint.as_str()), ("on: push", 0, FROM_CACHE));
        let stale = RequestCache::new(&CacheSettings { dir: dir.path().into(), ttl: Some(Duration::from_nanos(1)) });
        std::thread::sleep(Duration::from_millis(5));
        assert!(stale.get(&k).is_none(), "an entry older than the TTL is asked again");
        std::fs::write(c.path(&k), b"{not json").unwrap();
        assert!(c.get(&k).is_none(), "a corrupt entry is a miss, never an error");
    }

    #[test]
    fn settings_resolve_from_config_and_turn_off() {
        let base = Path::new("/study");
        assert_eq!(CacheSettings::resolve(Some("off"), None, base), None);
        assert_eq!(CacheSettings::resolve(Some("cache"), Some(1.0), base).unwrap().dir, PathBuf::from("/study/cache"));
        assert_eq!(
            CacheSettings::resolve(Some("cache"), Some(1.0), base).unwrap().ttl,
            Some(Duration::from_secs(86_400))
        );
    }
}
