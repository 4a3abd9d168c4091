//! The warehouse mirrored to object storage (`[study] remote = "s3://bucket/prefix"`, `gs://…`,
//! `az://…`, `file:///…`) through the `object_store` crate, so a cluster reads the study where it
//! sits: DuckDB, Polars or Spark on `s3://bucket/prefix/generations/**/*.parquet`, Hive layout
//! unchanged.
//!
//! The local warehouse stays the engine's working copy (lock, state, checkpoints are local); at the
//! end of every `doc2ci run`, and on `doc2ci push`, each changed file is put under the same
//! relative key, files gone locally are deleted, and `_doc2ci/manifest.json` (every key and its
//! hash) is swapped in last. Object stores publish an object whole or not at all (a single PUT,
//! or a multipart upload that is invisible until completed), and a partition is one object at a
//! fixed key, so a reader sees a partition's old rows or its new ones, never a partial file, even
//! if the run is killed mid-upload; the next sync finishes the job. What was uploaded is recorded
//! in `_doc2ci/remote.json` beside the local warehouse, so an unchanged file is never sent twice.
//!
//! Credentials come from the store's usual environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ALLOW_HTTP`; `GOOGLE_*`; `AZURE_*`), never from a file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use futures_util::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload, WriteMultipart};
use serde::{Deserialize, Serialize};

use crate::ui::Ui;
use crate::warehouse::{atomic_write, Warehouse};

/// Files larger than this go up as a multipart upload, in parts of this size.
const PART: usize = 8 << 20;

/// A remote location: its store and the key prefix the warehouse lives under.
pub struct Remote {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: Key,
}

/// What the last syncs uploaded (relative path → blake3 of the bytes), for one remote URL.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    url: String,
    files: BTreeMap<String, String>,
}

#[derive(Debug, Default, PartialEq)]
pub struct Synced {
    pub uploaded: usize,
    pub unchanged: usize,
    pub deleted: usize,
    pub bytes: u64,
}

/// The URL names a store this build supports (checked when the config loads).
pub fn check_url(url: &str) -> Result<(ObjectStoreScheme, String)> {
    let u = url::Url::parse(url).with_context(|| format!("remote {url:?} is not a URL"))?;
    let (scheme, path) = ObjectStoreScheme::parse(&u)
        .map_err(|e| anyhow!("remote {url:?}: {e} (s3://, gs://, az:// or file:// URLs)"))?;
    match scheme {
        ObjectStoreScheme::Local
        | ObjectStoreScheme::AmazonS3
        | ObjectStoreScheme::GoogleCloudStorage
        | ObjectStoreScheme::MicrosoftAzure => Ok((scheme, path.to_string())),
        other => bail!("remote {url:?}: {other:?} is not a supported store (s3, gs, az, file)"),
    }
}

impl Remote {
    pub fn open(url: &str) -> Result<Remote> {
        let (scheme, path) = check_url(url)?;
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::Local => Arc::new(object_store::local::LocalFileSystem::new()),
            ObjectStoreScheme::AmazonS3 => {
                Arc::new(object_store::aws::AmazonS3Builder::from_env().with_url(url).build()?)
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                Arc::new(object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(url).build()?)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                Arc::new(object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url).build()?)
            }
            _ => unreachable!("check_url admits these four"),
        };
        let prefix = Key::parse(&path).map_err(|e| anyhow!("[study] remote {url:?}: {e}"))?;
        Ok(Remote { url: url.to_string(), store, prefix })
    }

    fn key(&self, rel: &str) -> Key {
        rel.split('/').fold(self.prefix.clone(), |k, part| k.join(part))
    }

    /// Brings the remote copy up to the local warehouse.
    pub fn sync(&self, wh: &Warehouse, ui: &Ui) -> Result<Synced> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(self.sync_async(wh, ui))
    }

    async fn sync_async(&self, wh: &Warehouse, ui: &Ui) -> Result<Synced> {
        let record_path = wh.meta().join("remote.json");
        let mut record: Record = std::fs::read(&record_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|r: &Record| r.url == self.url)
            .unwrap_or_else(|| Record { url: self.url.clone(), files: BTreeMap::new() });
        let local = local_files(&wh.root)?;
        let mut out = Synced::default();
        for rel in &local {
            let path = wh.root.join(rel);
            let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let hash = blake3::hash(&bytes).to_hex().to_string();
            if record.files.get(rel) == Some(&hash) {
                out.unchanged += 1;
                continue;
            }
            crate::engine::test_hook("DOC2CI_TEST_REMOTE_DELAY_MS");
            out.bytes += bytes.len() as u64;
            self.put(rel, bytes).await.with_context(|| format!("uploading {rel} to {}", self.url))?;
            record.files.insert(rel.clone(), hash);
            atomic_write(&record_path, &serde_json::to_vec(&record)?)?;
            out.uploaded += 1;
        }
        // Files no longer in the warehouse (stale partitions, gc) go from the remote too.
        // Compared as keys, encoded as the store spells them.
        let keep: BTreeSet<String> = local.iter().map(|r| self.key(r).to_string()).collect();
        let meta_dir = self.key("_doc2ci").to_string();
        let mut listing = self.store.list(Some(&self.prefix));
        let mut stale = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.with_context(|| format!("listing {}", self.url))?;
            let k = meta.location.to_string();
            if !k.starts_with(&format!("{meta_dir}/")) && !keep.contains(&k) {
                stale.push(meta.location);
            }
        }
        for key in stale {
            self.store.delete(&key).await.with_context(|| format!("deleting {key} from {}", self.url))?;
            out.deleted += 1;
        }
        record.files.retain(|k, _| local.contains(k));
        atomic_write(&record_path, &serde_json::to_vec(&record)?)?;
        let manifest = serde_json::json!({"written": crate::warehouse::now(), "files": record.files});
        self.store
            .put(&self.key("_doc2ci/manifest.json"), PutPayload::from(serde_json::to_vec_pretty(&manifest)?))
            .await
            .with_context(|| format!("writing the manifest to {}", self.url))?;
        if out.uploaded + out.deleted > 0 {
            ui.info(&format!(
                "remote {}: {} files uploaded ({:.1} MiB), {} unchanged, {} deleted",
                self.url,
                out.uploaded,
                out.bytes as f64 / (1 << 20) as f64,
                out.unchanged,
                out.deleted
            ));
        }
        Ok(out)
    }

    /// One object, whole: a single PUT, or a multipart upload completed only after its last part.
    async fn put(&self, rel: &str, bytes: Vec<u8>) -> Result<()> {
        let key = self.key(rel);
        if bytes.len() <= PART {
            self.store.put(&key, PutPayload::from(bytes)).await?;
            return Ok(());
        }
        let upload = self.store.put_multipart(&key).await?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
        for chunk in bytes.chunks(PART) {
            w.wait_for_capacity(2).await?;
            w.write(chunk);
            crate::engine::test_hook("DOC2CI_TEST_REMOTE_DELAY_MS");
        }
        w.finish().await?;
        Ok(())
    }
}

/// Every file of the warehouse's tables (and the report's files), relative, `_doc2ci/` aside.
fn local_files(root: &Path) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
        };
        for e in rd {
            let e = e?;
            let path = e.path();
            let rel = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
            if rel == "_doc2ci" {
                continue;
            }
            if e.file_type()?.is_dir() {
                stack.push(path);
            } else if !rel.ends_with(".tmp") && !rel.contains(".tmp-") {
                // (an atomic write's temporary is never part of the warehouse)
                out.insert(rel);
            }
        }
    }
    Ok(out)
}
