//! Heavy things loaded once per process and shared by every partition that needs them:
//! compiled JSON Schemas, the embedding model, and the embedding cache.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, Result};
use doc2ci_rows::{text_hash, Embedding};
use doc2ci_validate::{Service, Validator};

use crate::assets;
use crate::warehouse::{self, Warehouse};

/// Asset path of the service's schema, as `doc2ci setup` unpacks it.
pub fn schema_asset(service: Service) -> String {
    service.def().schema_asset.to_string()
}

pub const EMBED_MODEL: &str = "models/all-minilm-l6-v2/model.safetensors";
pub const EMBED_TOKENIZER: &str = "models/all-minilm-l6-v2/tokenizer.json";
pub const EMBED_CONFIG: &str = "models/all-minilm-l6-v2/config.json";

pub fn validator() -> Result<&'static Validator> {
    static V: OnceLock<std::result::Result<Validator, String>> = OnceLock::new();
    V.get_or_init(|| {
        let mut schemas = Vec::new();
        for s in Service::all() {
            let path = assets::require(&schema_asset(s)).map_err(|e| format!("{e:#}"))?;
            schemas.push((s, std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?));
        }
        Validator::new(schemas.iter().map(|(s, b)| (*s, b.as_slice()))).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| anyhow!("{e}"))
}

fn embedder() -> Result<&'static doc2ci_embed::Embedder> {
    static E: OnceLock<std::result::Result<doc2ci_embed::Embedder, String>> = OnceLock::new();
    E.get_or_init(|| {
        let get = |rel: &str| assets::require(rel).map_err(|e| format!("{e:#}"));
        let (m, t, c): (PathBuf, PathBuf, PathBuf) = (get(EMBED_MODEL)?, get(EMBED_TOKENIZER)?, get(EMBED_CONFIG)?);
        doc2ci_embed::Embedder::load(&m, &t, &c).map_err(|e| format!("loading the embedding model: {e:#}"))
    })
    .as_ref()
    .map_err(|e| anyhow!("{e}"))
}

/// Texts already embedded, by content hash: a re-run or a new model embeds only new texts.
/// Kept as Parquet under `_doc2ci/cache/embeddings/<model>/`, one file per batch of new texts.
struct Cache {
    dir: PathBuf,
    vectors: HashMap<String, Arc<Vec<f32>>>,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// Texts embedded (and cached) at a time: large enough for the embedder's packed batches, small
/// enough that a kill loses a few seconds of work.
const EMBED_CHUNK: usize = 256;

/// Embeddings of `texts` (in order) and how many had to be computed now. Serialised: the
/// embedder already uses every core, and a second partition then finds the shared references cached.
pub fn embed(wh: &Warehouse, texts: &[&str]) -> Result<(Vec<Arc<Vec<f32>>>, usize)> {
    let mut guard = CACHE.lock().map_err(|_| anyhow!("embedding cache poisoned by an earlier panic"))?;
    let model_id = assets::pinned_sha256(EMBED_MODEL).unwrap_or_else(|| "unpinned".into());
    let dir = wh.meta().join("cache/embeddings").join(&model_id[..16.min(model_id.len())]);
    if guard.as_ref().is_none_or(|c| c.dir != dir) {
        let mut vectors = HashMap::new();
        for f in warehouse::parquet_files(&dir) {
            match warehouse::read_file_rows::<Embedding>(&f, None) {
                Ok(rows) => {
                    for e in rows {
                        vectors.insert(e.text_hash, Arc::new(e.vector));
                    }
                }
                // A cache is only a cache: a damaged file is set aside (its texts are embedded
                // again), never a reason to fail every score partition.
                Err(e) => {
                    let aside = f.with_extension("corrupt");
                    let _ = std::fs::rename(&f, &aside);
                    tracing::warn!(
                        "embedding cache: {} is unreadable ({e:#}); moved to {}",
                        f.display(),
                        aside.display()
                    );
                }
            }
        }
        *guard = Some(Cache { dir: dir.clone(), vectors });
    }
    let cache = guard.as_mut().expect("initialised above");
    let hashes: Vec<String> = texts.iter().map(|t| text_hash(t)).collect();
    let mut missing: Vec<(String, &str)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (h, t) in hashes.iter().zip(texts) {
        if !cache.vectors.contains_key(h) && seen.insert(h.clone()) {
            missing.push((h.clone(), t));
        }
    }
    // Embedded and written a chunk at a time (texts of similar length together, as the embedder
    // packs them): a killed run keeps every finished chunk.
    missing.sort_by_key(|(_, t)| t.len());
    for chunk in missing.chunks(EMBED_CHUNK) {
        let vecs = embedder()?.embed(&chunk.iter().map(|(_, t)| *t).collect::<Vec<_>>())?;
        let rows: Vec<Embedding> =
            chunk.iter().zip(vecs).map(|((h, _), v)| Embedding { text_hash: h.clone(), vector: v }).collect();
        std::fs::create_dir_all(&dir)?;
        warehouse::write_rows_file(&dir.join(format!("emb-{}.parquet", warehouse::unique())), &rows)?;
        for r in rows {
            cache.vectors.insert(r.text_hash, Arc::new(r.vector));
        }
    }
    let out = hashes.iter().map(|h| cache.vectors[h].clone()).collect();
    Ok((out, missing.len()))
}
