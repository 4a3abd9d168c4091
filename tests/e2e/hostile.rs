//! Issue 31: what others wrote (pages, files, releases, model output) stays harmless. Each test
//! here failed on the code before its fix.

use crate::common::*;
use crate::study::render;
use std::process::{Command, Stdio};

/// A pair imported from someone's file with a `javascript:` URL: the sample browser shows it as
/// text; only http(s) URLs are links.
#[test]
fn a_javascript_url_in_an_imported_pair_is_never_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pairs = [
        ("evil", "javascript:document.title='pwned'"),
        ("data", "data:text/html,<script>alert(1)</script>"),
        ("fine", "https://docs.example.com/actions/quickstart"),
    ];
    let rows: Vec<serde_json::Value> = pairs
        .iter()
        .map(|(id, url)| {
            serde_json::json!({"id": id, "url": url, "title": format!("Pair {id}"), "description": "Build on push.",
                "reference": format!("on: push\njobs:\n  {id}:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make\n")})
        })
        .collect();
    let outs: Vec<serde_json::Value> =
        pairs.iter().map(|(id, _)| serde_json::json!({"id": id, "output": "on: push\njobs: {}\n"})).collect();
    let service = ("github-actions", "GitHub Actions");
    let cfg = jsonl_study(d, service, "m", (&rows, &outs), "[stages.lint]\nenabled = false\n");
    run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    let wh = d.join("wh");
    let page = wh.join("report/samples.html");
    for (id, url) in pairs {
        let row = duck(
            &wh,
            &format!("SELECT pair_id FROM read_parquet('{{wh}}/pairs/*/*.parquet', hive_partitioning = true) WHERE title = 'Pair {id}'"),
        );
        let pair_id = row[0][0].as_str().unwrap().to_string();
        let dom = render(&page, &format!("pair=github-actions/{pair_id}"));
        assert!(dom.contains("id=\"pair-title\""), "{id}: the pair opens");
        let shown = url.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        if url.starts_with("https://") {
            assert!(dom.contains(&format!("href=\"{url}\"")), "{id}: an http(s) URL is a link");
        } else {
            assert!(!dom.contains("href=\"javascript:") && !dom.contains("href=\"data:"), "{id}: a live link: {dom}");
            assert!(dom.contains(&format!("<span class=\"url\">{shown}</span>")), "{id}: the URL is shown as text");
        }
    }
}

/// An in-scope page whose scripts and images reach for another service on this machine's loopback
/// (a port that is not the site's): Chromium runs in a network namespace of its own whose one way
/// out connects to the crawled origin only, so the service sees no connection at all, while the
/// site's pages are crawled as before.
#[test]
fn a_crawled_page_reaches_no_other_service_of_this_machine() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    assert!(crate::crawl::has_browser(), "chromium and chromedriver are required (scripts/deps.sh installs them)");
    let dir = tempfile::tempdir().unwrap();
    let secret = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = secret.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for _ in secret.incoming() {
            h.fetch_add(1, Ordering::SeqCst);
        }
    });
    let site = dir.path().join("site");
    let copy = std::process::Command::new("cp").arg("-r").arg(crate::crawl::docsite()).arg(&site).status().unwrap();
    assert!(copy.success());
    let reach = format!(
        "<img src=\"http://127.0.0.1:{port}/img.png\"><iframe src=\"http://localhost:{port}/frame\"></iframe>\
         <script>fetch('http://127.0.0.1:{port}/fetch', {{mode: 'no-cors'}}); \
         navigator.sendBeacon('http://127.0.0.1:{port}/beacon', 'x'); new WebSocket('ws://127.0.0.1:{port}/ws');</script></body>"
    );
    for page in ["github-actions/index.html", "github-actions/caching.html"] {
        let p = site.join(page);
        let html = std::fs::read_to_string(&p).unwrap();
        assert!(html.contains("</body>"), "{page}");
        std::fs::write(&p, html.replace("</body>", &reach)).unwrap();
    }
    let cfg = crate::crawl::config(
        dir.path(),
        &["github-actions"],
        &format!("serve = \"{}\"", site.display()),
        "webdriver",
        "rate_limit = 0\ntimeout_secs = 20\n",
    );
    let out = doc2ci(&["run", "-c", cfg.to_str().unwrap()]).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("and nothing else (a network namespace)"), "{said}");
    let pairs = duck(
        &dir.path().join("wh"),
        "SELECT count(*) FROM read_parquet('{wh}/pairs_raw/**/*.parquet', hive_partitioning = true)",
    );
    assert!(pairs[0][0].as_i64().unwrap() > 5, "the site is still crawled: {pairs:?}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a page reached another service of this machine");
}

/// A seeded generator for the fuzz tests (xorshift64*): the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn cases(default: usize) -> usize {
    std::env::var("DOC2CI_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs doc2ci, killed after `limit` (reaped by `wait4`, which also gives its own peak RSS); returns (finished in time, exit success, stderr+stdout,
/// seconds, peak RSS in KiB of that process alone, from wait4).
#[allow(clippy::zombie_processes)] // reaped by wait4, not Child::wait
fn run_bounded(args: &[&str], limit: std::time::Duration) -> (bool, bool, String, f64, i64) {
    use std::io::Read;
    let t0 = std::time::Instant::now();
    let mut child = doc2ci(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Both streams drained at once: read one after the other, a full stdout pipe would stall the
    // run until the kill.
    fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            String::from_utf8_lossy(&b).into_owned()
        })
    }
    let (out, err) = (drain(child.stdout.take().unwrap()), drain(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    let mut in_time = true;
    loop {
        // SAFETY: wait4 on our own child, with valid pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if t0.elapsed() > limit && in_time {
            in_time = false;
            let _ = child.kill();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let said = err.join().unwrap() + &out.join().unwrap();
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (in_time, ok, said, t0.elapsed().as_secs_f64(), usage.ru_maxrss)
}

/// What every hostile input must get: an answer within its time bound and 1 GiB, never a panic,
/// and when it fails, an error that names `name` (the file or URL).
fn judge(case: &str, r: &(bool, bool, String, f64, i64), name: &str, worst: &mut (f64, i64, String)) -> Option<String> {
    let (in_time, ok, said, secs, rss) = r;
    if *secs > worst.0 {
        worst.0 = *secs;
    }
    if *rss > worst.1 {
        *worst = (worst.0, *rss, case.to_string());
    }
    let tail = || said.lines().rev().take(6).collect::<Vec<_>>().join(" | ");
    if !in_time {
        return Some(format!("{case}: no answer within its bound ({secs:.0} s)"));
    }
    if said.contains("panicked") {
        return Some(format!("{case}: a panic: {}", tail()));
    }
    if *rss > 1 << 20 {
        return Some(format!("{case}: peak RSS {} MiB", rss >> 10));
    }
    if !ok && !said.contains(name) {
        return Some(format!("{case}: the error does not name {name}: {}", tail()));
    }
    None
}

/// Issue 31: the import readers on mutated files. Valid CSV (the predecessor's format), JSON Lines,
/// Parquet and release files, then truncated, bit-flipped, spliced with NULs, invalid UTF-8 and
/// quotes, a 9 MiB cell, a 40 MiB line, gzipped whole or cut, or replaced by a gzip bomb: each
/// import answers within 10 s and 1 GiB, without a panic, and a refusal names the file.
/// `DOC2CI_FUZZ_CASES` cases (bench/fuzz.sh runs more).
#[test]
fn hostile_inputs_import_files_fuzzed() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let row = |i: usize| {
        (
            format!("{i}"),
            format!("https://docs.example.com/actions/{i}"),
            format!("Page {i} - \"quoted\", with comma"),
            "Build on push.\nSecond line.".to_string(),
            format!("on: push\njobs:\n  b{i}:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"{i}\"\n"),
        )
    };
    let csv = {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(["ID", "URL", "Title", "Description", "Code"]).unwrap();
        for i in 0..6 {
            let r = row(i);
            w.write_record([r.0, r.1, r.2, r.3, r.4]).unwrap();
        }
        w.into_inner().unwrap()
    };
    let jsonl: Vec<u8> = (0..6)
        .map(|i| {
            let r = row(i);
            serde_json::json!({"id": r.0, "url": r.1, "title": r.2, "description": r.3, "reference": r.4}).to_string()
                + "\n"
        })
        .collect::<String>()
        .into_bytes();
    let parquet = {
        let (src, p) = (d.join("base.jsonl"), d.join("base.parquet"));
        std::fs::write(&src, &jsonl).unwrap();
        let sql =
            format!("COPY (SELECT * FROM read_json_auto('{}')) TO '{}' (FORMAT parquet)", src.display(), p.display());
        let r = Command::new("python3")
            .args(["-c", "import duckdb, sys; duckdb.execute(sys.argv[1])", &sql])
            .output()
            .unwrap();
        assert!(r.status.success(), "DuckDB writes the Parquet base case: {}", String::from_utf8_lossy(&r.stderr));
        std::fs::read(&p).unwrap()
    };
    let gzip = |b: &[u8]| {
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(b).unwrap();
        g.finish().unwrap()
    };
    let bomb = {
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![b'a'; 1 << 20];
        for _ in 0..1024 {
            g.write_all(&zeros).unwrap();
        }
        g.finish().unwrap()
    };
    let mutate = |rng: &mut Rng, base: &[u8]| -> (String, Vec<u8>) {
        let mut b = base.to_vec();
        let at = |rng: &mut Rng, b: &Vec<u8>| rng.below(b.len() + 1);
        match rng.below(10) {
            0 => {
                let i = at(rng, &b);
                b.truncate(i);
                ("truncated".into(), b)
            }
            1 => {
                for _ in 0..1 + rng.below(8) {
                    let i = rng.below(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
                ("bits flipped".into(), b)
            }
            2 => {
                for _ in 0..1 + rng.below(6) {
                    let i = at(rng, &b);
                    const JUNK: &[&[u8]] = &[b"\0", b"\xff\xfe", b"\"", b"\n", b"\r\n", b",", b"{", b"\xc3"];
                    let junk = JUNK[rng.below(JUNK.len())];
                    b.splice(i..i, junk.iter().copied());
                }
                ("bytes spliced in".into(), b)
            }
            3 => {
                let i = at(rng, &b);
                b.splice(i..i, std::iter::repeat_n(b'x', 9 << 20));
                ("a 9 MiB run".into(), b)
            }
            4 => {
                let i = at(rng, &b);
                b.splice(i..i, std::iter::repeat_n(b'y', 40 << 20));
                ("a 40 MiB line".into(), b)
            }
            5 => ("gzipped".into(), gzip(&b)),
            6 => {
                let g = gzip(&b);
                let i = rng.below(g.len());
                ("gzip cut short".into(), g[..i].to_vec())
            }
            7 => ("a gzip bomb (1 GiB of one byte)".into(), bomb.clone()),
            8 => {
                let i = at(rng, &b);
                let j = (i + rng.below(64)).min(b.len());
                let piece = b[i..j].to_vec();
                for _ in 0..rng.below(20_000) {
                    b.splice(i..i, piece.iter().copied());
                }
                ("a piece repeated".into(), b)
            }
            _ => ("empty".into(), Vec::new()),
        }
    };
    let n = cases(40);
    let (mut failures, mut worst) = (Vec::new(), (0.0f64, 0i64, String::new()));
    for k in 0..n {
        let case_dir = d.join(format!("case{k}"));
        std::fs::create_dir_all(&case_dir).unwrap();
        let (format, base, file): (&str, &[u8], &str) = match k % 4 {
            0 => ("llm4ci", &csv, "pairs.csv"),
            1 => ("jsonl", &jsonl, "pairs.jsonl"),
            2 => ("parquet", &parquet, "pairs.parquet"),
            _ => ("benchmark", &jsonl, "release"),
        };
        let (how, bytes) = mutate(&mut rng, base);
        let path = if format == "benchmark" {
            let rel = case_dir.join("release");
            std::fs::create_dir_all(&rel).unwrap();
            std::fs::write(rel.join("pairs.jsonl"), &bytes).unwrap();
            // Half the releases list the mutated file's own checksum (then its content is what is fuzzed).
            let sum_of = if rng.below(2) == 0 { bytes.clone() } else { base.to_vec() };
            let sum = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
            let mut sum = sum;
            sum.stdin.take().unwrap().write_all(&sum_of).unwrap();
            let hex = String::from_utf8(sum.wait_with_output().unwrap().stdout).unwrap();
            let hex = hex.split_whitespace().next().unwrap().to_string();
            std::fs::write(rel.join("SHA256SUMS"), format!("{hex}  pairs.jsonl\n")).unwrap();
            rel
        } else {
            let p = case_dir.join(file);
            std::fs::write(&p, &bytes).unwrap();
            p
        };
        let cfg = case_dir.join("pipeline.toml");
        std::fs::write(
            &cfg,
            format!(
                "[study]\nwarehouse = \"wh\"\nthreads = 2\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
                 [[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"{format}\"\npath = \"{}\"\nservice = \"github-actions\"\n\n\
                 [stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n",
                path.display()
            ),
        )
        .unwrap();
        let case = format!("case {k} ({format}, {how}, {} bytes)", bytes.len());
        let r = run_bounded(&["run", "-c", cfg.to_str().unwrap()], std::time::Duration::from_secs(10));
        let name = path.file_name().unwrap().to_str().unwrap();
        if let Some(f) = judge(&case, &r, name, &mut worst) {
            failures.push(f);
        }
        std::fs::remove_dir_all(&case_dir).unwrap();
    }
    eprintln!(
        "import fuzz: {n} cases, slowest {:.1} s, peak RSS {} MiB ({}), {} failed",
        worst.0,
        worst.1 >> 10,
        worst.2,
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One hostile HTTP answer of kind `k` (a page, or a chat completion when `chat`).
fn hostile_answer(s: &mut std::net::TcpStream, k: usize, chat: bool) {
    use std::io::Write;
    let body: Vec<u8> = if chat {
        br#"{"choices":[{"message":{"content":"on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make\n"}}],"usage":{"prompt_tokens":5,"completion_tokens":5}}"#.to_vec()
    } else {
        b"<html><body><main><h1>T</h1><p>Build.</p><pre><code class=\"language-yaml\">on: push\njobs:\n  b:\n    runs-on: x\n</code></pre></main></body></html>".to_vec()
    };
    let ctype = if chat { "application/json" } else { "text/html; charset=utf-8" };
    let head = |status: &str, extra: &str, len: Option<usize>| {
        let len = len.map(|l| format!("Content-Length: {l}\r\n")).unwrap_or_default();
        format!("HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n{len}{extra}Connection: close\r\n\r\n").into_bytes()
    };
    let _ = match k {
        0 => s.write_all(&[head("200 OK", "", Some(body.len())), body].concat()),
        1 => s.write_all(b"HTTP/1.1 abc OK\r\n\r\n<html>"),
        2 => s.write_all(&[head("200 OK", "", Some(100_000)), body[..10].to_vec()].concat()),
        3 => s.write_all(&[head("200 OK", "Content-Length: -5\r\nContent-Length: abc\r\n", None), body].concat()),
        4 => s.write_all(&[head("200 OK", "Content-Length: 3\r\n", Some(body.len())), body].concat()),
        5 => s.write_all(&head("429 Too Many Requests", "Retry-After: 1e20\r\n", Some(0))),
        6 => s.write_all(&head("503 Unavailable", "Retry-After: Wed, 21 Oct 2999 07:28:00 GMT\r\n", Some(0))),
        7 => {
            let etag = format!("ETag: \"{}\"\r\nLast-Modified: yesterday-ish\r\n", "e".repeat(100 << 10));
            s.write_all(&[head("200 OK", &etag, Some(body.len())), body].concat())
        }
        8 => s.write_all(&[head("200 OK", "Transfer-Encoding: chunked\r\n", None), b"zz\r\nabc\r\n".to_vec()].concat()),
        9 => {
            // Endless, close-delimited.
            let _ = s.write_all(&head("200 OK", "", None));
            let chunk = vec![b'a'; 64 << 10];
            for _ in 0..(4 << 10) {
                if s.write_all(&chunk).is_err() {
                    break;
                }
            }
            Ok(())
        }
        10 => {
            // A byte every 200 ms for up to 30 s.
            let _ = s.write_all(&head("200 OK", "", Some(1000)));
            for _ in 0..150 {
                if s.write_all(b"a").is_err() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Ok(())
        }
        11 => s.write_all(&[head("200 OK", "Content-Encoding: gzip\r\n", Some(body.len())), body].concat()),
        12 => s.write_all(&head("301 Moved", "Location: http://[::1\r\n", Some(0))),
        13 => s.write_all(
            &[head("200 OK", &format!("X-Long: {}\r\n", "h".repeat(1 << 20)), Some(body.len())), body].concat(),
        ),
        14 => {
            // Nesting a parser could recurse into: 200,000 levels.
            let bomb =
                if chat { [b"[".repeat(200_000), b"]".repeat(200_000)].concat() } else { b"<div>".repeat(200_000) };
            s.write_all(&[head("200 OK", "", Some(bomb.len())), bomb].concat())
        }
        _ => {
            let bad = [b"\xff\xfe\xc3(".to_vec(), body].concat();
            s.write_all(&[head("200 OK", "Content-Type: text/html; charset=utf-99\r\n", Some(bad.len())), bad].concat())
        }
    };
}

/// Issue 31: the HTTP paths on hostile answers. A loopback server answers each page of a crawl and
/// each chat completion with one of 16 kinds of damage (a garbage status line, lying, negative or
/// doubled Content-Length, absurd Retry-After values, a 100 KiB ETag, broken chunking, an endless
/// body, a byte every 200 ms, a false gzip, a broken redirect, a 1 MiB header, a 200,000-level
/// nesting bomb, an unknown charset), chosen by a seeded generator. Both runs finish within their
/// bound and 1 GiB, without a panic; every page is a row (fetched or an error), every pair gets an
/// answer or an error naming the endpoint. `DOC2CI_FUZZ_CASES` pages and requests.
#[test]
fn hostile_inputs_http_responses_fuzzed() {
    use std::io::Read;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = cases(32);
    let mut rng = Rng(0x51ed_270b_2795_7a11);
    let kinds: std::sync::Arc<Vec<usize>> =
        std::sync::Arc::new((0..n).map(|i| if i < 16 { i } else { rng.below(16) }).collect());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let chats = std::sync::Arc::new(AtomicUsize::new(0));
    {
        let (kinds, chats) = (kinds.clone(), chats.clone());
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let (kinds, chats) = (kinds.clone(), chats.clone());
                std::thread::spawn(move || {
                    let mut s = s;
                    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                    let mut req = Vec::new();
                    let mut buf = [0u8; 8192];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 1 << 16 {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(k) => req.extend_from_slice(&buf[..k]),
                        }
                    }
                    let text = String::from_utf8_lossy(&req).into_owned();
                    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                    if path.starts_with("/v1/") {
                        // The body is read (or not): the answer does not depend on it.
                        let k = chats.fetch_add(1, Ordering::SeqCst);
                        hostile_answer(&mut s, kinds[k % kinds.len()], true);
                    } else if let Some(k) = path.strip_prefix("/en/actions/p").and_then(|k| k.parse::<usize>().ok()) {
                        hostile_answer(&mut s, kinds[k % kinds.len()], false);
                    } else if path == "/en/actions" || path == "/en/actions/" {
                        let links: String =
                            (0..kinds.len()).map(|k| format!("<a href=\"/en/actions/p{k}\">p{k}</a>")).collect();
                        let page = format!("<html><body><main><h1>Start</h1>{links}</main></body></html>");
                        use std::io::Write;
                        let _ = s.write_all(
                            format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}", page.len()).as_bytes(),
                        );
                    } else {
                        use std::io::Write;
                        let _ =
                            s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    }
                });
            }
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut worst = (0.0f64, 0i64, String::new());
    let mut failures = Vec::new();

    // The crawl: the start page links every hostile page.
    let cfg = d.join("crawl.toml");
    std::fs::write(
        &cfg,
        format!(
            "[study]\nwarehouse = \"wh-crawl\"\nthreads = 2\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
             [[sources]]\nname = \"docs\"\nkind = \"crawl\"\nservice = \"github-actions\"\nprofile = \"github-docs\"\nurl = \"{origin}\"\nbackend = \"http\"\n\n\
             [stages.crawl]\nrate_limit = 0\nremote_rate_limit = 1000\ntimeout_secs = 2\nretries = 1\nmax_page_bytes = 2000000\n\
             [stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n"
        ),
    )
    .unwrap();
    let limit = std::time::Duration::from_secs(30 + 6 * n as u64);
    let r = run_bounded(&["run", "-c", cfg.to_str().unwrap()], limit);
    if let Some(f) = judge("crawl", &r, &origin, &mut worst) {
        failures.push(f);
    }
    if r.1 {
        let pages = duck(
            &d.join("wh-crawl"),
            "SELECT requested_url, error, fetch_ms FROM read_parquet('{wh}/pages/**/*.parquet', hive_partitioning = true)",
        );
        // Each hostile page is answered within 10 s, its retries included.
        for p in pages.iter().filter(|p| p[2].as_u64().is_some_and(|ms| ms >= 10_000)) {
            failures.push(format!("crawl: {} took {} ms", p[0], p[2]));
        }
        let slowest = pages.iter().filter_map(|p| p[2].as_u64()).max().unwrap_or(0);
        eprintln!("http fuzz: slowest page answered in {slowest} ms");
        for k in 0..n {
            let url = format!("{origin}/en/actions/p{k}");
            if !pages.iter().any(|p| p[0].as_str() == Some(url.as_str())) {
                failures.push(format!("crawl: {url} (kind {}) is not a row of pages", kinds[k]));
            }
        }
    }

    // Generation: each request of an OpenAI-compatible model answered with damage.
    let pairs: String = (0..n)
        .map(|i| {
            serde_json::json!({"id": i.to_string(), "url": format!("https://docs.example.com/{i}"), "title": format!("T{i}"),
                "description": "Build on push.", "reference": "on: push\n"})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(d.join("pairs.jsonl"), pairs).unwrap();
    let cfg = d.join("generate.toml");
    std::fs::write(
        &cfg,
        format!(
            "[study]\nwarehouse = \"wh-gen\"\nthreads = 2\nmax_error_rate = 1.0\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
             [[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"jsonl\"\npath = \"{}\"\nservice = \"github-actions\"\n\n\
             [[models]]\nname = \"hostile\"\nbackend = \"openai\"\nbase_url = \"{origin}/v1\"\nmodel = \"m\"\nretries = 1\ntimeout_ms = 2000\n\n\
             [stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n",
            d.join("pairs.jsonl").display()
        ),
    )
    .unwrap();
    let r = run_bounded(&["run", "-c", cfg.to_str().unwrap()], limit);
    if let Some(f) = judge("generate", &r, &origin, &mut worst) {
        failures.push(f);
    }
    if r.1 {
        let gens = duck(
            &d.join("wh-gen"),
            "SELECT output IS NOT NULL, error, latency_ms FROM read_parquet('{wh}/generations/**/*.parquet', hive_partitioning = true)",
        );
        let slowest = gens.iter().filter_map(|g| g[2].as_f64()).fold(0.0, f64::max);
        eprintln!("http fuzz: slowest request answered in {slowest:.0} ms");
        if slowest >= 10_000.0 {
            failures.push(format!("generate: a request took {slowest:.0} ms"));
        }
        if gens.len() != n {
            failures.push(format!("generate: {} rows for {n} pairs", gens.len()));
        }
        for g in &gens {
            if g[0] != true && !g[1].as_str().is_some_and(|e| e.contains("127.0.0.1")) {
                failures.push(format!("generate: an error that names no endpoint: {g:?}"));
            }
        }
    }
    eprintln!(
        "http fuzz: {n} pages and {n} requests ({} chat calls), slowest run {:.1} s, peak RSS {} MiB ({}), {} failed",
        chats.load(Ordering::SeqCst),
        worst.0,
        worst.1 >> 10,
        worst.2,
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
