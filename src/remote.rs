//! The warehouse mirrored to object storage (`[study] remote = "s3://bucket/prefix"`, `gs://…`,
//! `az://…`, `file:///…`) through the `object_store` crate, so a cluster reads the study where it
//! sits: DuckDB, Polars or Spark on `s3://bucket/prefix/generations/**/*.parquet`, Hive layout
//! unchanged.
//!
//! The local warehouse stays the engine's working copy (lock, state, checkpoints are local); at the
//! end of every `doc2ci run`, and on `doc2ci push`, each changed file is put under the same
//! relative key, and `_doc2ci/manifest.json` (whose mirror it is, every key it wrote and its hash)
//! is swapped in last. The mirror touches only its own: it deletes only objects its manifest says
//! this warehouse wrote, never a URL without a prefix, and never mixes into a prefix holding
//! objects it did not write (another study, a fresh warehouse against an existing mirror) unless
//! the user adopts it (`doc2ci push --adopt`). Object stores publish an object whole or not at all (a single PUT,
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

/// The mirror's own record, `_doc2ci/manifest.json` under the prefix: whose mirror it is (the
/// warehouse's id) and every object it wrote (relative path → blake3), so any machine agrees on
/// what the mirror may delete.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    #[serde(default)]
    warehouse: Option<String>,
    #[serde(default)]
    written: String,
    files: BTreeMap<String, String>,
}

const MANIFEST: &str = "_doc2ci/manifest.json";

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
        | ObjectStoreScheme::MicrosoftAzure => {
            // The bucket's root (or `/`) holds other things: the mirror would mix into them.
            if path.as_ref().trim_matches('/').is_empty() {
                bail!("remote {url:?} names no prefix: give the folder the warehouse is mirrored under (s3://bucket/my-study)");
            }
            Ok((scheme, path.to_string()))
        }
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

    /// Brings the remote copy up to the local warehouse. `adopt`: take over a prefix that holds
    /// objects this warehouse did not write (they are kept; only what it writes is ever deleted).
    pub fn sync(&self, wh: &Warehouse, ui: &Ui, adopt: bool) -> Result<Synced> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(self.sync_async(wh, ui, adopt))
    }

    /// Copies the mirror's files of `tables` into the warehouse folder `dest` (what `compare`
    /// reads of another study's mirror), each checked against the manifest's hash as it lands; a
    /// file already there with that hash is not fetched again. Only what the manifest lists is
    /// read, and no key leaves `dest`. Returns how many files were fetched.
    pub fn download(&self, tables: &[&str], dest: &Path) -> Result<usize> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async {
            let Some(m) = self.manifest().await? else {
                bail!("{} holds no doc2ci mirror ({MANIFEST} is missing): `doc2ci push` writes one", self.url)
            };
            let mut fetched = 0;
            let wanted: BTreeMap<&String, &String> =
                m.files.iter().filter(|(rel, _)| tables.iter().any(|t| rel.starts_with(&format!("{t}/")))).collect();
            // A partition the mirror no longer has must not be read from an earlier copy.
            for t in tables {
                for rel in local_files(&dest.join(t)).unwrap_or_default() {
                    if !wanted.contains_key(&format!("{t}/{rel}")) {
                        let _ = std::fs::remove_file(dest.join(t).join(&rel));
                    }
                }
            }
            for (rel, want) in wanted {
                let plain = rel.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'));
                if !plain || !rel.ends_with(".parquet") {
                    bail!("{}: {MANIFEST} lists `{rel}`, which is not a warehouse file", self.url);
                }
                let path = dest.join(rel);
                if std::fs::read(&path).is_ok_and(|b| blake3::hash(&b).to_hex().as_str() == want) {
                    continue;
                }
                let bytes = self
                    .store
                    .get(&self.key(rel))
                    .await
                    .with_context(|| format!("reading {rel} from {}", self.url))?
                    .bytes()
                    .await
                    .with_context(|| format!("reading {rel} from {}", self.url))?;
                if blake3::hash(&bytes).to_hex().as_str() != want {
                    bail!("{}: {rel} is not the file its manifest lists (changed since the last push?)", self.url);
                }
                std::fs::create_dir_all(path.parent().expect("a relative key has a folder"))?;
                atomic_write(&path, &bytes)?;
                fetched += 1;
            }
            Ok(fetched)
        })
    }

    /// The remote's manifest, if the prefix has one.
    async fn manifest(&self) -> Result<Option<Manifest>> {
        match self.store.get(&self.key(MANIFEST)).await {
            Ok(r) => {
                let bytes = r.bytes().await.with_context(|| format!("reading {MANIFEST} from {}", self.url))?;
                let m = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{}: {MANIFEST} is not a doc2ci mirror manifest", self.url))?;
                Ok(Some(m))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {MANIFEST} from {}", self.url)),
        }
    }

    async fn put_manifest(&self, m: &Manifest) -> Result<()> {
        self.store
            .put(&self.key(MANIFEST), PutPayload::from(serde_json::to_vec_pretty(m)?))
            .await
            .with_context(|| format!("writing the manifest to {}", self.url))?;
        Ok(())
    }

    /// Up to `n` keys under the prefix, and whether there are more.
    async fn some_keys(&self, n: usize) -> Result<(Vec<String>, bool)> {
        let mut listing = self.store.list(Some(&self.prefix));
        let mut out = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.with_context(|| format!("listing {}", self.url))?;
            if out.len() == n {
                return Ok((out, true));
            }
            out.push(meta.location.to_string());
        }
        Ok((out, false))
    }

    /// The objects under the prefix this warehouse owns: those its manifest lists, when the
    /// manifest is this warehouse's. Anything else there is someone else's, and refused unless
    /// adopted.
    async fn owned(&self, wh: &Warehouse, id: &str, adopt: bool) -> Result<BTreeMap<String, String>> {
        let local_record = std::fs::read(wh.meta().join("remote.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
            .is_some_and(|r| r.url == self.url);
        let take_over = "point `[study] remote` at a prefix of its own, or take this one over with \
                         `doc2ci push --adopt` (what is there is kept: only objects this warehouse writes are \
                         ever deleted)";
        match self.manifest().await? {
            Some(m) if m.warehouse.as_deref() == Some(id) => Ok(m.files),
            // Written by an older doc2ci, which recorded no owner: ours if this warehouse synced here.
            Some(m) if m.warehouse.is_none() && local_record => Ok(m.files),
            Some(_) if adopt => Ok(BTreeMap::new()),
            Some(m) => bail!(
                "remote {} is the mirror of another warehouse ({}, {} objects, written {}): doc2ci will not \
                 overwrite or delete them; {take_over}",
                self.url,
                m.warehouse.as_deref().map_or("written by an older doc2ci".to_string(), |w| format!("id {w}")),
                m.files.len(),
                m.written
            ),
            None if adopt => Ok(BTreeMap::new()),
            None => {
                let (some, more) = self.some_keys(5).await?;
                if !some.is_empty() {
                    bail!(
                        "remote {} already holds objects doc2ci did not write ({}{}): it will not mix the warehouse \
                         into them; {take_over}",
                        self.url,
                        some.join(", "),
                        if more { ", …" } else { "" }
                    );
                }
                Ok(BTreeMap::new())
            }
        }
    }

    async fn sync_async(&self, wh: &Warehouse, ui: &Ui, adopt: bool) -> Result<Synced> {
        let id = wh.id()?;
        let mut owned = self.owned(wh, &id, adopt).await?;
        let record_path = wh.meta().join("remote.json");
        let mut record: Record = std::fs::read(&record_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|r: &Record| r.url == self.url)
            .unwrap_or_else(|| Record { url: self.url.clone(), files: BTreeMap::new() });
        let local = local_files(&wh.root)?;
        let mut out = Synced::default();
        let mut todo = Vec::new();
        for rel in &local {
            let path = wh.root.join(rel);
            let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let hash = blake3::hash(&bytes).to_hex().to_string();
            if record.files.get(rel) == Some(&hash) && owned.contains_key(rel) {
                out.unchanged += 1;
            } else {
                todo.push((rel.clone(), hash, bytes));
            }
        }
        // What is about to be written is recorded as this warehouse's first: a sync killed mid-way
        // leaves no object that the next one would take for someone else's.
        let mut manifest = Manifest { warehouse: Some(id), written: crate::warehouse::now(), files: owned.clone() };
        if todo.iter().any(|(rel, _, _)| !owned.contains_key(rel)) {
            manifest.files.extend(todo.iter().map(|(rel, hash, _)| (rel.clone(), hash.clone())));
            self.put_manifest(&manifest).await?;
        }
        for (rel, hash, bytes) in todo {
            crate::engine::test_hook("DOC2CI_TEST_REMOTE_DELAY_MS");
            out.bytes += bytes.len() as u64;
            self.put(&rel, bytes).await.with_context(|| format!("uploading {rel} to {}", self.url))?;
            owned.insert(rel.clone(), hash.clone());
            record.files.insert(rel, hash);
            atomic_write(&record_path, &serde_json::to_vec(&record)?)?;
            out.uploaded += 1;
        }
        // Objects this warehouse wrote whose files are gone (stale partitions, gc) go from the
        // remote too; nothing it did not write is ever deleted.
        for rel in owned.keys().filter(|r| !local.contains(*r)).cloned().collect::<Vec<_>>() {
            match self.store.delete(&self.key(&rel)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e).with_context(|| format!("deleting {rel} from {}", self.url)),
            }
            owned.remove(&rel);
            out.deleted += 1;
        }
        record.files.retain(|k, _| local.contains(k));
        atomic_write(&record_path, &serde_json::to_vec(&record)?)?;
        manifest.files = owned;
        manifest.written = crate::warehouse::now();
        self.put_manifest(&manifest).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use doc2ci_testkit::files as tree;

    /// A warehouse with one table file `name` holding `body`.
    fn warehouse(dir: &Path, files: &[(&str, &str)]) -> Warehouse {
        for (rel, body) in files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        Warehouse::new(dir)
    }

    fn url(p: &Path) -> String {
        format!("file://{}", p.display())
    }

    #[test]
    fn a_url_without_a_prefix_is_refused() {
        for u in ["s3://bucket", "s3://bucket/", "file:///", "gs://b"] {
            let e = check_url(u).unwrap_err().to_string();
            assert!(e.contains("names no prefix"), "{u}: {e}");
        }
        assert!(check_url("s3://bucket/study").is_ok());
    }

    #[test]
    fn the_mirror_never_deletes_or_mixes_into_what_it_did_not_write() {
        let ui = Ui::new(true);
        let tmp = tempfile::tempdir().unwrap();
        let remote = tmp.path().join("bucket");
        let mirror = remote.join("study");
        // Another study's folder and a notes file already under the prefix.
        std::fs::create_dir_all(mirror.join("other-study")).unwrap();
        std::fs::write(mirror.join("other-study/part-0.parquet"), "theirs").unwrap();
        std::fs::write(mirror.join("NOTES.md"), "keep me").unwrap();
        let wh = warehouse(&tmp.path().join("wh"), &[("pairs/service=a/part-0.parquet", "p")]);
        let r = Remote::open(&url(&mirror)).unwrap();
        let e = r.sync(&wh, &ui, false).unwrap_err().to_string();
        assert!(e.contains("did not write") && e.contains("NOTES.md") && e.contains("--adopt"), "{e}");
        assert_eq!(tree(&mirror).len(), 2, "a refused sync writes nothing");

        // Adopted: its files are kept, the warehouse's are added, and what goes is only its own.
        r.sync(&wh, &ui, true).unwrap();
        assert!(tree(&mirror).contains("NOTES.md") && tree(&mirror).contains("other-study/part-0.parquet"));
        assert!(tree(&mirror).contains("pairs/service=a/part-0.parquet"));
        std::fs::remove_file(wh.root.join("pairs/service=a/part-0.parquet")).unwrap();
        let s = r.sync(&wh, &ui, false).unwrap();
        assert_eq!(s.deleted, 1);
        assert_eq!(
            tree(&mirror),
            BTreeSet::from(["NOTES.md".into(), "other-study/part-0.parquet".into(), MANIFEST.into()])
        );
    }

    #[test]
    fn a_fresh_warehouse_against_a_populated_mirror_is_refused() {
        let ui = Ui::new(true);
        let tmp = tempfile::tempdir().unwrap();
        let mirror = tmp.path().join("bucket/study");
        let files = [("pairs/service=a/part-0.parquet", "p"), ("scores/service=a/model=m/part-0.parquet", "s")];
        let a = warehouse(&tmp.path().join("a"), &files);
        Remote::open(&url(&mirror)).unwrap().sync(&a, &ui, false).unwrap();
        let before = tree(&mirror);
        assert_eq!(before.len(), 3);
        // Another machine: same study, empty warehouse. Without the owner check it would delete all.
        let b = warehouse(&tmp.path().join("b"), &[]);
        let e = Remote::open(&url(&mirror)).unwrap().sync(&b, &ui, false).unwrap_err().to_string();
        assert!(e.contains("mirror of another warehouse") && e.contains("2 objects"), "{e}");
        assert_eq!(tree(&mirror), before);
        // The owner, even after forgetting what it uploaded, still syncs (the manifest says it is its).
        std::fs::remove_file(a.meta().join("remote.json")).unwrap();
        let s = Remote::open(&url(&mirror)).unwrap().sync(&a, &ui, false).unwrap();
        assert_eq!((s.uploaded, s.deleted), (2, 0));
    }

    #[test]
    fn neighbouring_prefixes_are_separate_mirrors() {
        let ui = Ui::new(true);
        let tmp = tempfile::tempdir().unwrap();
        let bucket = tmp.path().join("bucket");
        let a = warehouse(&tmp.path().join("a"), &[("pairs/service=a/part-0.parquet", "a")]);
        let b = warehouse(&tmp.path().join("b"), &[("pairs/service=b/part-0.parquet", "b")]);
        Remote::open(&url(&bucket.join("study"))).unwrap().sync(&a, &ui, false).unwrap();
        Remote::open(&url(&bucket.join("study2"))).unwrap().sync(&b, &ui, false).unwrap();
        std::fs::remove_file(a.root.join("pairs/service=a/part-0.parquet")).unwrap();
        Remote::open(&url(&bucket.join("study"))).unwrap().sync(&a, &ui, false).unwrap();
        assert_eq!(tree(&bucket.join("study")), BTreeSet::from([MANIFEST.to_string()]));
        assert_eq!(
            tree(&bucket.join("study2")),
            BTreeSet::from(["pairs/service=b/part-0.parquet".to_string(), MANIFEST.to_string()])
        );
    }
}
