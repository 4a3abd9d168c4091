//! A small loopback HTTP/1.1 server for a documentation folder: the default study crawls the
//! bundled `docsite/` through it, and the crawler tests count its requests.
//!
//! Besides the folder's files it answers the trap URLs of `docsite/TRAPS.md` that need server
//! behaviour (under `/traps/`): an HTTP redirect chain, a longer chain, a redirect off-site, a
//! 10 MB page and a page that never finishes. Plain threads, one per connection: the crawler is
//! its only client, and keeping it free of an async runtime lets it run inside any caller.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Serves `root` on `addr` (port 0: a free one). Every request line is appended to `log`
    /// (flushed at once) so a test can count requests across crawler restarts.
    pub fn start(root: &Path, addr: &str, log: Option<&Path>) -> Result<Server> {
        let root = root.canonicalize().with_context(|| format!("cannot serve {}: no such folder", root.display()))?;
        let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let log = match log {
            Some(p) => Some(Arc::new(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("cannot open request log {}", p.display()))?,
            ))),
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        std::thread::Builder::new().name("docsite-server".into()).spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (root, log) = (root.clone(), log.clone());
                let _ = std::thread::Builder::new().name("docsite-conn".into()).spawn(move || {
                    let _ = handle(conn, &root, log.as_deref());
                });
            }
        })?;
        Ok(Server { addr, stop })
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

const HUGE_BYTES: usize = 10 << 20;

fn handle(conn: TcpStream, root: &Path, log: Option<&Mutex<std::fs::File>>) -> Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut w = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end().to_string();
        // Headers: only If-None-Match matters (no request bodies are expected).
        let mut if_none_match = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.trim().eq_ignore_ascii_case("if-none-match") {
                    if_none_match = Some(v.trim().to_string());
                }
            }
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
        if let Some(log) = log {
            let mut f = log.lock().unwrap();
            writeln!(f, "{method} {target}")?;
            f.flush()?;
        }
        let path = target.split(['?', '#']).next().unwrap_or("/");
        let head = method == "HEAD";
        match path {
            "/traps/http-redirect-1.html" => redirect(&mut w, "/traps/http-redirect-2.html")?,
            "/traps/http-redirect-2.html" => redirect(&mut w, "/traps/http-redirect-3.html")?,
            "/traps/http-redirect-3.html" => redirect(&mut w, "/traps/redirect-final.html")?,
            "/traps/http-redirect-offsite.html" => redirect(&mut w, "https://off-site.example.com/landing.html")?,
            p if p.starts_with("/traps/http-redirect-long-") => {
                // /traps/http-redirect-long-N.html → N+1, ten hops before the final page.
                let n: u32 =
                    p.trim_start_matches("/traps/http-redirect-long-").trim_end_matches(".html").parse().unwrap_or(0);
                let next = if n >= 10 {
                    "/traps/redirect-final.html".to_string()
                } else {
                    format!("/traps/http-redirect-long-{}.html", n + 1)
                };
                redirect(&mut w, &next)?
            }
            "/traps/huge.html" => huge(&mut w, head)?,
            "/traps/never-loads.html" => {
                never_loads(&mut w);
                return Ok(());
            }
            _ => file(&mut w, root, path, head, if_none_match.as_deref())?,
        }
        w.flush()?;
    }
}

fn respond(w: &mut TcpStream, status: &str, ctype: &str, body: &[u8], extra: &str, head: bool) -> Result<()> {
    write!(w, "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}\r\n", body.len())?;
    if !head {
        w.write_all(body)?;
    }
    Ok(())
}

fn redirect(w: &mut TcpStream, to: &str) -> Result<()> {
    respond(w, "302 Found", "text/html", b"<!DOCTYPE html><title>Moved</title>", &format!("Location: {to}\r\n"), false)
}

fn huge(w: &mut TcpStream, head: bool) -> Result<()> {
    let open = b"<!DOCTYPE html><html><head><title>Huge</title></head><body><main id=\"main-content\"><article class=\"markdown-body\"><h1>Huge page</h1>";
    let close = b"</article></main></body></html>";
    let para = b"<p>This paragraph repeats until the page weighs ten megabytes.</p>\n";
    let n = (HUGE_BYTES - open.len() - close.len()) / para.len();
    let len = open.len() + n * para.len() + close.len();
    write!(w, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len}\r\n\r\n")?;
    if head {
        return Ok(());
    }
    w.write_all(open)?;
    let chunk: Vec<u8> = para.iter().copied().cycle().take(para.len() * 1000).collect();
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        w.write_all(&chunk[..k * para.len()])?;
        left -= k;
    }
    w.write_all(close)?;
    Ok(())
}

/// Headers and a first chunk, then one byte a second until the client goes away.
fn never_loads(w: &mut TcpStream) {
    let _ =
        w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n");
    let first = b"<!DOCTYPE html><html><head><title>Never loads</title></head><body><main id=\"main-content\"><article class=\"markdown-body\"><h1>Still loading</h1>";
    let _ = write!(w, "{:x}\r\n", first.len());
    let _ = w.write_all(first);
    let _ = w.write_all(b"\r\n");
    for _ in 0..600 {
        std::thread::sleep(Duration::from_secs(1));
        if w.write_all(b"1\r\n \r\n").and_then(|_| w.flush()).is_err() {
            return;
        }
    }
}

/// A file, with a strong ETag of its content: a re-crawl that sends it back is answered
/// 304 Not Modified without a body while the file is unchanged.
fn file(w: &mut TcpStream, root: &Path, path: &str, head: bool, if_none_match: Option<&str>) -> Result<()> {
    let Some(p) = resolve(root, path) else {
        return respond(
            w,
            "404 Not Found",
            "text/html",
            b"<!DOCTYPE html><title>Not found</title><p>Not found.</p>",
            "",
            head,
        );
    };
    let body = std::fs::read(&p)?;
    let ctype = match p.extension().and_then(|e| e.to_str()) {
        // No charset: pages declare theirs (the ISO-8859-1 trap page relies on it).
        Some("html") => "text/html",
        Some("css") => "text/css",
        Some("txt") | Some("md") => "text/plain; charset=utf-8",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    };
    let etag = format!("\"{}\"", &blake3::hash(&body).to_hex()[..16]);
    if if_none_match.is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*")) {
        write!(w, "HTTP/1.1 304 Not Modified\r\nETag: {etag}\r\nContent-Length: 0\r\n\r\n")?;
        return Ok(());
    }
    respond(w, "200 OK", ctype, &body, &format!("ETag: {etag}\r\n"), head)
}

/// URL path → a regular file under root; `..`, hidden files, folders without an index, and
/// anything a symbolic link leads out of the root to (a checkout's link to `~/.aws/credentials`,
/// `/dev/zero`) are refused. `root` is canonical.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(path);
    let mut p = root.to_path_buf();
    for c in Path::new(decoded.trim_start_matches('/')).components() {
        match c {
            Component::Normal(s) if !s.to_string_lossy().starts_with('.') => p.push(s),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if p.is_dir() {
        p.push("index.html");
    }
    let real = p.canonicalize().ok()?;
    (real.starts_with(root) && std::fs::metadata(&real).is_ok_and(|m| m.is_file() && m.len() <= MAX_FILE))
        .then_some(real)
}

/// Larger files are not served (the crawler would not keep them either).
const MAX_FILE: u64 = 256 << 20;

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every regular file the loopback server would serve from `dir`, so an edit of the site re-crawls
/// it: hidden entries are skipped (the server refuses them), a symbolic link is followed only while
/// it stays inside the folder (one leading out is an error naming it; a linked folder is walked once,
/// so links in a circle end), and FIFOs or devices are never read.
pub fn served_files(dir: &Path) -> Result<Vec<PathBuf>> {
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
    use super::resolve;
    use std::os::unix::fs::symlink;

    /// Issue 31: the loopback server never serves what a link leads to outside its folder.
    #[test]
    fn links_out_of_the_served_folder_are_not_served() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(site.join("index.html"), "ok").unwrap();
        std::fs::write(tmp.path().join("credentials"), "secret").unwrap();
        symlink(tmp.path().join("credentials"), site.join("creds.html")).unwrap();
        symlink("/dev/zero", site.join("zero.html")).unwrap();
        symlink(site.join("index.html"), site.join("alias.html")).unwrap();
        let root = site.canonicalize().unwrap();
        assert!(resolve(&root, "/index.html").is_some());
        assert!(resolve(&root, "/alias.html").is_some(), "a link that stays inside is served");
        assert_eq!(resolve(&root, "/creds.html"), None);
        assert_eq!(resolve(&root, "/zero.html"), None);
        assert_eq!(resolve(&root, "/%2e%2e/credentials"), None);
    }

    /// Issue 31: a served third-party folder's symbolic links never lead the crawl out of it.
    #[test]
    fn served_files_stay_inside_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        std::fs::create_dir_all(site.join("docs")).unwrap();
        std::fs::write(site.join("index.html"), "<p>hi</p>").unwrap();
        std::fs::write(site.join("docs/a.html"), "<p>a</p>").unwrap();
        // Links in a circle, and a link to a folder inside: each folder walked once.
        std::os::unix::fs::symlink(&site, site.join("docs/loop")).unwrap();
        std::os::unix::fs::symlink(site.join("docs"), site.join("also-docs")).unwrap();
        // A FIFO (it would block any reader) is not a served file.
        let fifo = site.join("pipe.html");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let files = super::served_files(&site).unwrap();
        let names: Vec<String> =
            files.iter().map(|p| p.strip_prefix(&site).unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains(&"index.html".to_string()), "{names:?}");
        // A link out of the folder (a checkout's link to a credentials file, to /dev/zero) is refused, named.
        let secret = tmp.path().join("credentials");
        std::fs::write(&secret, "aws_secret_access_key = x").unwrap();
        std::os::unix::fs::symlink(&secret, site.join("docs/creds.html")).unwrap();
        let e = super::served_files(&site).unwrap_err().to_string();
        assert!(e.contains("creds.html") && e.contains("links outside the folder"), "{e}");
        std::fs::remove_file(site.join("docs/creds.html")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", site.join("zero.html")).unwrap();
        assert!(super::served_files(&site).unwrap_err().to_string().contains("zero.html"));
    }
}
