//! crawl: a documentation site → `pages` (raw HTML kept, so extraction never needs the network
//! again). The fetching itself (browser, HTTP, politeness, the loopback server) is in
//! `crate::crawl`; this file declares the partition and what re-crawls it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::config::{Config, CrawlParams};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::tables::PAGES;
use crate::warehouse::Partition;

/// The crawl node of source `source`, then its extract nodes.
pub fn declare(cfg: &Config, source: usize, g: &mut Graph) -> Result<()> {
    let s = &cfg.sources[source];
    let spec = s.crawl().expect("a crawl source");
    // Remote sites are re-crawled once their pages are older than max_age.
    let epoch = match &spec.url {
        Some(_) if cfg.stages.crawl.max_age_hours > 0.0 => {
            (chrono::Utc::now().timestamp() as f64 / 3600.0 / cfg.stages.crawl.max_age_hours).floor() as i64
        }
        _ => 0,
    };
    let backend = crate::crawl::resolve_backend(&cfg.stages.crawl, spec);
    let site = crate::crawl::Site::of(s).expect("a crawl source");
    let job = Crawl { site, params: cfg.stages.crawl.clone(), backend, epoch };
    let pages = g.add(
        Node::new("crawl", Partition::new(PAGES, &[&s.service, &s.name]), job)
            .files(spec.serve.as_deref().map(served_files).transpose()?.unwrap_or_default()),
    );
    super::extract::declare(s, pages, g);
    Ok(())
}

/// The site, the part of its profile the crawl reads, and every crawl setting.
#[derive(Serialize)]
struct Crawl {
    site: crate::crawl::Site,
    params: CrawlParams,
    backend: String,
    /// Which `max_age_hours` window this is: a remote site is fetched again in the next one.
    epoch: i64,
}

impl Job for Crawl {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let (pages, note) = crate::crawl::crawl(&self.params, &self.site, &self.backend, cx)?;
        cx.publish(&pages, Some(note))
    }
}

/// Every regular file the loopback server would serve from `dir`, so an edit of the site re-crawls
/// it: hidden entries are skipped (the server refuses them), a symbolic link is followed only while
/// it stays inside the folder (one leading out is an error naming it; a linked folder is walked once,
/// so links in a circle end), and FIFOs or devices are never read.
fn served_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let root = dir.canonicalize().with_context(|| format!("cannot serve {}", dir.display()))?;
    let mut seen = std::collections::HashSet::from([root.clone()]);
    let (mut out, mut todo) = (Vec::new(), vec![root.clone()]);
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d).with_context(|| format!("cannot list {}", d.display()))?;
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let p = e.path();
            let Ok(real) = p.canonicalize() else { continue }; // a dangling link serves nothing
            if !real.starts_with(&root) {
                bail!(
                    "served folder {}: {} links outside the folder (to {}); doc2ci serves only what is inside it",
                    dir.display(),
                    p.display(),
                    real.display()
                );
            }
            let Ok(meta) = std::fs::metadata(&real) else { continue };
            if meta.is_dir() {
                if seen.insert(real) {
                    todo.push(p);
                }
            } else if meta.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::served_files;
    use std::os::unix::fs::symlink;

    /// Issue 31: a served third-party folder's symbolic links never lead the crawl out of it.
    #[test]
    fn served_files_stay_inside_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        std::fs::create_dir_all(site.join("docs")).unwrap();
        std::fs::write(site.join("index.html"), "<p>hi</p>").unwrap();
        std::fs::write(site.join("docs/a.html"), "<p>a</p>").unwrap();
        // Links in a circle, and a link to a folder inside: each folder walked once.
        symlink(&site, site.join("docs/loop")).unwrap();
        symlink(site.join("docs"), site.join("also-docs")).unwrap();
        // A FIFO (it would block any reader) is not a served file.
        let fifo = site.join("pipe.html");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let files = served_files(&site).unwrap();
        let names: Vec<String> =
            files.iter().map(|p| p.strip_prefix(&site).unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains(&"index.html".to_string()), "{names:?}");
        // A link out of the folder (a checkout's link to a credentials file, to /dev/zero) is refused, named.
        let secret = tmp.path().join("credentials");
        std::fs::write(&secret, "aws_secret_access_key = x").unwrap();
        symlink(&secret, site.join("docs/creds.html")).unwrap();
        let e = served_files(&site).unwrap_err().to_string();
        assert!(e.contains("creds.html") && e.contains("links outside the folder"), "{e}");
        std::fs::remove_file(site.join("docs/creds.html")).unwrap();
        symlink("/dev/zero", site.join("zero.html")).unwrap();
        assert!(served_files(&site).unwrap_err().to_string().contains("zero.html"));
    }
}
