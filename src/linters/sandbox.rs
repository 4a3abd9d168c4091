//! How a lint tool runs: a subprocess in a private folder, with a cleared environment, no network
//! (a new network namespace through `unshare`, when the machine allows one), a timeout, bounded
//! output, and killed with doc2ci (a death signal, its own process group). Model text only ever
//! reaches a tool as a file or on stdin, never through a shell or an argument.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

/// What a run printed and how it ended.
pub struct Ran {
    /// `None` when it was killed at the timeout.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    /// Output past the cap was dropped.
    pub truncated: bool,
}

impl Ran {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// A private folder removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Result<Scratch> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(sweep);
        Ok(Scratch(crate::scratch::mkdtemp(&format!("doc2ci-lint-{tag}-{}", std::process::id()))?))
    }
}

/// Scratch folders of lint runs that were killed (kill -9 runs no destructor): removed by the next
/// process that lints, once their process is gone.
fn sweep() {
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("doc2ci-lint-") else { continue };
        // doc2ci-lint-<tag>-<pid>-<n>
        let mut parts = rest.rsplitn(3, '-');
        let (_n, pid) = (parts.next(), parts.next().and_then(|p| p.parse::<i32>().ok()));
        let Some(pid) = pid else { continue };
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = pid == std::process::id() as i32 || unsafe { libc::kill(pid, 0) } == 0;
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The command prefix that gives a tool a network namespace of its own. As root, `unshare --net`
/// changes no credential, so the death signal armed before it holds; otherwise a user namespace
/// (`--map-root-user`) changes them, which clears the death signal, so `setpriv` arms it again.
fn netns_prefix() -> Vec<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        vec!["unshare", "--net", "--"]
    } else {
        vec!["unshare", "--net", "--map-root-user", "--", "setpriv", "--pdeathsig", "KILL", "--"]
    }
}

/// Whether this machine can give a tool a network namespace of its own (probed once).
pub fn netns() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let p = netns_prefix();
        Command::new(p[0])
            .args(&p[1..])
            .arg("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Output kept per stream.
pub const MAX_OUTPUT: usize = 16 << 20;

/// The writable memory a lint tool may use.
const TOOL_MEMORY: libc::rlim_t = 3 << 30;

/// Runs `program args` in `dir` with `stdin`, offline when the machine allows it, for at most
/// `timeout` of wall time and as much CPU time (a tool's budget: the lint stage runs one tool
/// process per core, so a tool that spreads over threads cannot take the cores of the others;
/// the runtimes' own worker pools are asked to stay at one thread).
pub fn run(program: &Path, args: &[String], dir: &Path, stdin: Option<Vec<u8>>, timeout: Duration) -> Result<Ran> {
    let mut cmd = if netns() {
        let p = netns_prefix();
        let mut c = Command::new(p[0]);
        c.args(&p[1..]).arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("TMPDIR", dir)
        .env("LANG", "C.UTF-8")
        .env("NO_COLOR", "1")
        .env("RAYON_NUM_THREADS", "1")
        .env("TOKIO_WORKER_THREADS", "1")
        .env("UV_THREADPOOL_SIZE", "1")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let cpu_secs = timeout.as_secs_f64().ceil().max(1.0) as libc::rlim_t;
    // SAFETY: prctl and setrlimit are async-signal-safe; the tool dies with the thread that waits
    // for it, so a killed doc2ci leaves no linter behind.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // Heap and other writable memory capped: a hostile text cannot make a tool take the
            // machine's memory (address-space reservations, which WebAssembly makes, do not count).
            let cap = libc::rlimit { rlim_cur: TOOL_MEMORY, rlim_max: TOOL_MEMORY };
            libc::setrlimit(libc::RLIMIT_DATA, &cap);
            // SIGKILL at the budget: a tool cannot catch it and keep going.
            let cpu = libc::rlimit { rlim_cur: cpu_secs, rlim_max: cpu_secs };
            libc::setrlimit(libc::RLIMIT_CPU, &cpu);
            Ok(())
        });
    }
    let mut child = cmd.spawn().with_context(|| format!("starting {}", program.display()))?;
    let pid = child.id() as i32;
    let writer = stdin.map(|bytes| {
        let mut w = child.stdin.take().expect("stdin is piped");
        std::thread::spawn(move || {
            let _ = w.write_all(&bytes);
        })
    });
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let (mut kept, mut buf, mut dropped) = (Vec::new(), vec![0u8; 64 << 10], false);
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let room = MAX_OUTPUT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped |= n > room;
            }
            (kept, dropped)
        })
    };
    let out = read(Box::new(child.stdout.take().expect("stdout is piped")));
    let err = read(Box::new(child.stderr.take().expect("stderr is piped")));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() >= timeout {
            // The whole group: node's helpers too.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // No group kill after a normal exit: the reaped pid may already name another process. (The
    // tools start no helpers; node cannot, under its permission model.)
    if let Some(w) = writer {
        let _ = w.join();
    }
    let (o, to) = out.join().map_err(|_| anyhow!("reading {}'s output", program.display()))?;
    let (e, te) = err.join().map_err(|_| anyhow!("reading {}'s errors", program.display()))?;
    Ok(Ran {
        status,
        stdout: String::from_utf8_lossy(&o).into_owned(),
        stderr: String::from_utf8_lossy(&e).into_owned(),
        truncated: to || te,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_past_its_timeout_is_killed_with_its_children() {
        let s = Scratch::new("t").unwrap();
        let r = run(
            Path::new("/bin/sh"),
            &["-c".into(), "sleep 30 & sleep 30".into()],
            &s.0,
            None,
            Duration::from_millis(300),
        )
        .unwrap();
        assert!(r.status.is_none());
    }

    #[test]
    fn a_killed_runs_scratch_is_swept() {
        // A pid that cannot be alive: above the kernel's pid_max.
        let dead = std::env::temp_dir().join("doc2ci-lint-t-99999999-0");
        std::fs::create_dir_all(&dead).unwrap();
        sweep();
        assert!(!dead.exists());
        let mine = Scratch::new("t").unwrap();
        sweep();
        assert!(mine.0.exists(), "a live process's scratch folder stays");
    }

    #[test]
    fn output_is_bounded_and_stdin_arrives() {
        let s = Scratch::new("t").unwrap();
        let r = run(Path::new("/bin/cat"), &[], &s.0, Some(b"hello".to_vec()), Duration::from_secs(60)).unwrap();
        assert!(r.success());
        assert_eq!(r.stdout, "hello");
        let big = run(
            Path::new("/bin/sh"),
            &["-c".into(), "head -c 40000000 /dev/zero".into()],
            &s.0,
            None,
            Duration::from_secs(60),
        )
        .unwrap();
        assert!(big.truncated && big.stdout.len() == MAX_OUTPUT);
    }

    #[test]
    fn a_tool_gets_its_cpu_budget_and_single_threaded_runtimes() {
        let s = Scratch::new("t").unwrap();
        let r = run(
            Path::new("/bin/sh"),
            &["-c".into(), "ulimit -t; ulimit -d; echo $RAYON_NUM_THREADS $TOKIO_WORKER_THREADS".into()],
            &s.0,
            None,
            Duration::from_millis(7_300),
        )
        .unwrap();
        assert_eq!(r.stdout, format!("8\n{}\n1 1\n", TOOL_MEMORY / 1024));
    }

    #[test]
    fn the_environment_is_cleared_and_home_is_private() {
        let s = Scratch::new("t").unwrap();
        let r = run(
            Path::new("/bin/sh"),
            &["-c".into(), "echo $HOME; echo ${CARGO_MANIFEST_DIR:-none}".into()],
            &s.0,
            None,
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(r.stdout, format!("{}\nnone\n", s.0.display()));
    }
}
