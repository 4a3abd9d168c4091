//! Fetching a page in a real browser: Chromium through chromedriver, driven by fantoccini, and
//! the browser's life cycle (start, PDEATHSIG, reaping what a killed crawl left). Answers in
//! [`Fetched`], as the HTTP fetcher does.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use url::Url;

use super::fetch::{secs, Fetched};
use super::Settings;
use crate::sandbox::{scratch, Confine};

/// Headless Chromium through WebDriver: one tab, pages read from the live DOM.
pub struct Browser {
    client: Option<fantoccini::Client>,
    driver: Option<tokio::process::Child>,
    webdriver_url: String,
    profile_dir: PathBuf,
    /// The browser's TMPDIR ([`browser_tmp`]), removed with it.
    tmp: PathBuf,
    params: Settings,
    /// The network namespace Chromium runs in, or why it runs in the machine's network.
    netns: std::result::Result<crate::sandbox::netns::Netns, String>,
}

pub use crate::assets::which;

/// Reads chromedriver's "started successfully on port N" line; its later output is drained so a
/// full pipe never blocks it.
async fn driver_port(child: &mut tokio::process::Child, exe: &Path) -> Result<u16> {
    use tokio::io::AsyncBufReadExt;
    let out = child.stdout.take().ok_or_else(|| anyhow!("{}: no stdout", exe.display()))?;
    let mut lines = tokio::io::BufReader::new(out).lines();
    let read = async {
        while let Some(line) = lines.next_line().await? {
            if let Some(p) = line.rsplit("on port ").next().filter(|_| line.contains("started successfully")) {
                if let Ok(port) = p.trim().trim_end_matches('.').parse::<u16>() {
                    return Ok(Some(port));
                }
            }
        }
        Ok::<_, std::io::Error>(None)
    };
    let port = match tokio::time::timeout(Duration::from_secs(60), read).await {
        Ok(Ok(Some(p))) => p,
        Ok(Ok(None)) => bail!("{} exited before it listened", exe.display()),
        Ok(Err(e)) => bail!("{}: reading its output: {e}", exe.display()),
        Err(_) => bail!("{} did not say its port within 60 s", exe.display()),
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(port)
}

/// Starts chromedriver on a port the OS picks, bound to die with this process.
async fn spawn_driver(params: &Settings, home: &Path, tmp: &Path) -> Result<(tokio::process::Child, String)> {
    let exe = which(&params.chromedriver).ok_or_else(|| anyhow!("webdriver backend: `{}` not found (install the chromium and chromium-driver packages, or set stages.crawl.chromedriver / webdriver)", params.chromedriver))?;
    // Untrusted pages run in the browser: it sees none of the user's environment (API keys,
    // cloud credentials), only what it needs to start, with a home and a temporary folder of its
    // own (Chromium leaves `org.chromium.*` folders in TMPDIR when it is killed). The kernel ends
    // chromedriver with us: kill_on_drop does not run on SIGKILL.
    std::fs::create_dir_all(home).with_context(|| format!("cannot create {}", home.display()))?;
    let confine = Confine::new().env(BROWSER_ENV, &[("HOME", home.as_os_str()), ("TMPDIR", tmp.as_os_str())]);
    let mut cmd = tokio::process::Command::from(confine.command(&exe));
    // The OS picks the port (no bind-close-reuse race); chromedriver prints it.
    cmd.arg("--port=0")
        .arg("--allowed-ips=127.0.0.1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().with_context(|| format!("cannot start {}", exe.display()))?;
    let port = driver_port(&mut child, &exe).await?;
    Ok((child, format!("http://127.0.0.1:{port}")))
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Browsers left by a killed run of this warehouse are killed: their `--user-data-dir` lies under
/// `dir` in a folder named after the pid of the doc2ci process that started them (`unique()`), and
/// that process is gone. Then the folders of such runs are removed: profile, home and wrapper under
/// `dir`, and their temporary folders ([`browser_tmp`]). Browsers of live runs (this one's other
/// partitions) and their folders are left alone.
pub fn reap_orphans(dir: &Path) -> usize {
    let n = kill_orphans(dir);
    scratch::sweep(dir, "");
    scratch::sweep(&std::env::temp_dir(), TMP_PREFIX);
    n
}

/// Where a warehouse's crawls keep their browsers' profiles, homes and wrappers.
pub fn scratch_root(wh: &crate::warehouse::Warehouse) -> PathBuf {
    wh.meta().join("browser")
}

/// `doc2ci gc` (which holds the lock, so no browser is in use): kills every browser a killed crawl
/// left and removes every browser's folders.
pub fn sweep(wh: &crate::warehouse::Warehouse, ui: &crate::ui::Ui) -> crate::warehouse::Swept {
    let dir = scratch_root(wh);
    let reaped = reap_orphans(&dir);
    if reaped > 0 {
        ui.info(&format!("killed {reaped} browser process(es) left by a killed crawl"));
    }
    let bytes = crate::warehouse::disk_size(&dir);
    let items = std::fs::read_dir(&dir).map(|rd| rd.count()).unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);
    crate::warehouse::Swept { items, bytes }
}

const TMP_PREFIX: &str = "doc2ci-browser-";

/// A fresh temporary folder for one browser, `$TMPDIR/doc2ci-browser-<pid>-XXXXXX`
/// (`sandbox::scratch`: an unpredictable name, 0700). Short on purpose: Chromium puts its sockets
/// in it, and a socket path may not exceed 107 bytes (a folder inside the warehouse was too deep,
/// and Chromium did not start).
fn browser_tmp() -> Result<PathBuf> {
    scratch::owned(TMP_PREFIX)
}

fn kill_orphans(dir: &Path) -> usize {
    let needle = format!("--user-data-dir={}/", dir.display());
    let mut n = 0;
    let Ok(rd) = std::fs::read_dir("/proc") else { return 0 };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let Some(arg) = cmd.split(|b| *b == 0).find(|a| a.starts_with(needle.as_bytes())) else { continue };
        let owner = String::from_utf8_lossy(&arg[needle.len()..]).split('-').next().and_then(|p| p.parse::<u32>().ok());
        if owner.is_none_or(scratch::owner_gone) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            n += 1;
        }
    }
    n
}

/// What of the environment the browser keeps: how to find programs and fonts, the locale, and the
/// crash harness's mark on the processes it starts.
const BROWSER_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "TZ", "DOC2CI_CRASH_HARNESS"];

/// Whether Chromium's own sandbox can run here: not as root (Chromium refuses it), and only with
/// unprivileged user namespaces. When it cannot, the crawler says so once.
pub fn browser_sandbox() -> Result<(), &'static str> {
    if unsafe { libc::geteuid() } == 0 {
        return Err("running as root, where Chromium refuses its sandbox");
    }
    let userns =
        std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone").map_or(true, |v| v.trim() == "1");
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").map_or(true, |v| v.trim() != "0");
    if userns && max {
        Ok(())
    } else {
        Err("unprivileged user namespaces are off in this kernel")
    }
}

const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
];

impl Browser {
    /// Starts chromedriver on a free loopback port (or uses `params.webdriver`) and opens a
    /// session with a fresh Chromium profile under `scratch`, whose network reaches `origin` only.
    pub async fn start(params: &Settings, scratch: PathBuf, origin: &Url) -> Result<Browser> {
        let tmp = browser_tmp()?;
        let netns = match (&params.webdriver, origin.host_str(), origin.port_or_known_default()) {
            (Some(_), ..) => Err("the browser is the one at `webdriver`, not started by doc2ci".into()),
            (None, Some(host), Some(port)) => {
                crate::sandbox::netns::Netns::start(vec![(host.to_string(), port)]).map_err(|e| format!("{e:#}"))
            }
            _ => Err(format!("{origin} names no host and port")),
        };
        let (driver, webdriver_url) = match &params.webdriver {
            Some(u) => (None, u.clone()),
            None => {
                let (child, url) = spawn_driver(params, &scratch.with_extension("home"), &tmp).await?;
                (Some(child), url)
            }
        };
        let mut b =
            Browser { client: None, driver, webdriver_url, profile_dir: scratch, tmp, params: params.clone(), netns };
        b.session().await?;
        Ok(b)
    }

    /// Why Chromium's network is the machine's, when it is.
    pub fn unconfined(&self) -> Option<&str> {
        self.netns.as_ref().err().map(String::as_str)
    }

    /// The Chromium chromedriver starts, wrapped so that it dies with chromedriver (`setpriv
    /// --pdeathsig`), a killed crawl leaving no browser behind, and so that it runs in its network
    /// namespace. None: chromedriver's own choice.
    fn chromium_binary(&self) -> Option<String> {
        let chromium = match &self.params.chromium {
            Some(b) => PathBuf::from(b),
            None => ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|c| which(c))?,
        };
        let mut run: Vec<String> = self.netns.as_ref().map(|n| n.enter()).unwrap_or_default();
        run.push(chromium.display().to_string());
        let run = run.iter().map(|a| sh_quote(a)).collect::<Vec<_>>().join(" ");
        let script = match which("setpriv") {
            // The death signal is armed only once setpriv runs: a chromedriver killed just before
            // that would leave Chromium without it, so the armed process checks that its parent is
            // still the one that started it (field 4 of /proc/self/stat) before it becomes Chromium.
            Some(setpriv) => format!(
                "#!/bin/sh\np=$PPID\nexec {} --pdeathsig KILL -- /bin/sh -c \
                 '[ \"$(cut -d\" \" -f4 /proc/$$/stat)\" = \"$0\" ] && exec \"$@\"' \"$p\" {run} \"$@\"\n",
                sh_quote(&setpriv.display().to_string()),
            ),
            None if self.netns.is_ok() => format!("#!/bin/sh\nexec {run} \"$@\"\n"),
            None => return Some(chromium.display().to_string()),
        };
        let wrapper = self.profile_dir.with_extension("chromium.sh");
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&wrapper, script).ok()?;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).ok()?;
        Some(wrapper.display().to_string())
    }

    async fn session(&mut self) -> Result<()> {
        if let Some(c) = self.client.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
        }
        // A chromedriver that died (crashed, or killed by someone else) is started again: one
        // lost driver must not fail every page after it.
        if let Some(d) = self.driver.as_mut() {
            if !matches!(d.try_wait(), Ok(None)) {
                self.respawn_driver().await?;
            }
        }
        let _ = std::fs::remove_dir_all(&self.profile_dir);
        std::fs::create_dir_all(&self.profile_dir)?;
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect();
        if browser_sandbox().is_err() {
            args.push("--no-sandbox".into());
        }
        if let Ok(n) = &self.netns {
            args.extend(n.chromium_args());
        }
        args.push(format!("--user-data-dir={}", self.profile_dir.display()));
        args.push(format!("--user-agent={}", self.params.user_agent));
        let mut opts = json!({ "args": args });
        if let Some(bin) = self.chromium_binary() {
            opts["binary"] = json!(bin);
        }
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), opts);
        caps.insert("pageLoadStrategy".into(), json!("normal"));
        let mut deadline = Instant::now() + Duration::from_secs(30);
        let mut respawned = false;
        let client = loop {
            let conn = hyper_util::client::legacy::connect::HttpConnector::new();
            match fantoccini::ClientBuilder::new(conn).capabilities(caps.clone()).connect(&self.webdriver_url).await {
                Ok(c) => break c,
                // chromedriver needs a moment before it listens.
                Err(e)
                    if Instant::now() < deadline
                        && self.driver.is_some()
                        && !matches!(e, fantoccini::error::NewSessionError::SessionNotCreated(_)) =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // Our own driver that stopped answering gets one fresh start.
                Err(_) if self.driver.is_some() && !respawned => {
                    respawned = true;
                    self.respawn_driver().await?;
                    deadline = Instant::now() + Duration::from_secs(30);
                }
                Err(e) => bail!("cannot open a WebDriver session at {}: {e}", self.webdriver_url),
            }
        };
        let t = secs(&self.params);
        client
            .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(Some(t), Some(t), Some(Duration::ZERO)))
            .await
            .map_err(|e| anyhow!("WebDriver timeouts: {e}"))?;
        self.client = Some(client);
        Ok(())
    }

    async fn respawn_driver(&mut self) -> Result<()> {
        if let Some(mut d) = self.driver.take() {
            let _ = d.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), d.wait()).await;
        }
        let (child, url) = spawn_driver(&self.params, &self.profile_dir.with_extension("home"), &self.tmp).await?;
        self.driver = Some(child);
        self.webdriver_url = url;
        Ok(())
    }

    pub async fn fetch(&mut self, url: &Url) -> Fetched {
        let t0 = Instant::now();
        let mut last = String::new();
        for attempt in 0..=self.params.retries {
            match self.once(url, t0).await {
                // As the http backend: a server error is worth another try (never a 404), with backoff.
                Ok(f) if f.status.is_some_and(|st| st >= 500) && attempt < self.params.retries => {
                    last = format!("{url}: {}", f.error.unwrap_or_default());
                    tokio::time::sleep(Duration::from_millis(200 << (attempt + 1).min(5))).await;
                }
                Ok(mut f) => {
                    if attempt > 0 && f.error.is_some() {
                        f.error = f.error.map(|e| format!("{e} (gave up after {} attempt(s))", attempt + 1));
                    }
                    return f;
                }
                Err(e) => {
                    last = e;
                    // A load that timed out may still be running: a new session is the sure way out.
                    if let Err(e) = self.session().await {
                        return Fetched::failed(
                            url,
                            format!("{last}; and the browser could not be restarted: {e}"),
                            t0,
                        );
                    }
                    if attempt == self.params.retries {
                        break;
                    }
                }
            }
        }
        Fetched::failed(url, format!("{last} (gave up after {} attempt(s))", self.params.retries + 1), t0)
    }

    async fn once(&mut self, url: &Url, t0: Instant) -> std::result::Result<Fetched, String> {
        let c = self.client.as_ref().ok_or("no browser session")?;
        // WebDriver's own timeout should fire first; this one guards against a wedged driver.
        let guard = secs(&self.params) + Duration::from_secs(10);
        match tokio::time::timeout(guard, c.goto(url.as_str())).await {
            Err(_) => return Err(format!("{url}: page load did not finish within {}s", self.params.timeout_secs)),
            Ok(Err(e)) => {
                let m = e.to_string();
                if m.to_lowercase().contains("timeout") {
                    return Err(format!("{url}: page load timed out after {}s", self.params.timeout_secs));
                }
                return Err(format!("{url}: {m}"));
            }
            Ok(Ok(())) => {}
        }
        // URL, status and DOM read in one script, so a meta refresh cannot slip between them.
        let script = "const max = arguments[0];
            const nav = performance.getEntriesByType('navigation')[0];
            const h = document.documentElement ? document.documentElement.outerHTML : '';
            const dt = document.doctype ? '<!DOCTYPE ' + document.doctype.name + '>' : '';
            return {url: document.URL, status: nav && nav.responseStatus ? nav.responseStatus : null,
                    redirects: nav ? nav.redirectCount : 0,
                    transfer: nav && nav.transferSize ? nav.transferSize : 0,
                    len: h.length, html: h.length > max ? null : dt + h,
                    ctype: document.contentType, charset: document.characterSet};";
        let v = tokio::time::timeout(guard, c.execute(script, vec![json!(self.params.max_page_bytes)]))
            .await
            .map_err(|_| format!("{url}: reading the DOM timed out"))?
            .map_err(|e| format!("{url}: reading the DOM: {e}"))?;
        let final_url = v["url"].as_str().and_then(|u| Url::parse(u).ok()).unwrap_or_else(|| url.clone());
        let status = v["status"].as_u64().map(|s| s as u32);
        let len = v["len"].as_u64().unwrap_or(0);
        let mut f = Fetched {
            final_url,
            status,
            content_type: v["ctype"].as_str().map(str::to_string),
            encoding: v["charset"].as_str().map(str::to_string),
            bytes: len,
            html: None,
            error: None,
            ms: 0,
            etag: None,
            last_modified: None,
            not_modified: false,
            transferred: v["transfer"].as_u64().unwrap_or(0),
        };
        match &v["html"] {
            Value::String(h) => {
                f.bytes = h.len() as u64;
                f.html = Some(h.clone());
            }
            _ => {
                f.error = Some(format!(
                    "page too large: {len} characters exceeds max_page_bytes = {}",
                    self.params.max_page_bytes
                ))
            }
        }
        // Chromium follows up to 20 redirects itself: the crawl's own bound holds for it too
        // (the navigation's same-origin redirects, which is all a crawl's scope allows).
        let redirects = v["redirects"].as_u64().unwrap_or(0);
        if redirects > self.params.max_redirects as u64 {
            f.error =
                Some(format!("{url}: {redirects} redirects, more than max_redirects = {}", self.params.max_redirects));
            f.html = None;
        }
        if let Some(s) = status.filter(|s| *s >= 400) {
            f.error = Some(format!("HTTP {s}"));
            f.html = None;
        }
        f.ms = t0.elapsed().as_millis() as u64;
        Ok(f)
    }

    pub async fn close(mut self) {
        if let Some(c) = self.client.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
        }
        if let Some(mut d) = self.driver.take() {
            let _ = d.kill().await;
        }
        let _ = std::fs::remove_dir_all(&self.profile_dir);
        let _ = std::fs::remove_dir_all(self.profile_dir.with_extension("home"));
        let _ = std::fs::remove_dir_all(&self.tmp);
        let _ = std::fs::remove_file(self.profile_dir.with_extension("chromium.sh"));
    }
}
