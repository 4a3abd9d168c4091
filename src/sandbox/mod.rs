//! Confinement, in one place. Every process doc2ci starts is started through a [`Confine`]: what
//! of the environment it sees, that it dies with doc2ci, its memory and CPU limits, its process
//! group and whether it has a network. Untrusted text and pages reach such a process in a private
//! folder from [`scratch`]; the browser's network is a namespace whose one way out is a gate to the
//! crawled origin ([`netns`]); [`run`] waits for a process with a timeout and bounded output.
//!
//! The callers hold only their policy: the lint tools (`crate::linters`), chromedriver and
//! Chromium (`crate::crawl::browser`) and llama.cpp's server (`crate::backends::llama_cpp`). None
//! of them writes a `pre_exec` of its own.

pub mod netns;
mod run;
pub mod scratch;

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

pub use run::{run, Ran, MAX_OUTPUT};
pub use scratch::Scratch;

/// What a started process may see and use.
#[derive(Debug, Clone, Default)]
pub struct Confine {
    /// `None`: the parent's environment.
    env: Option<Env>,
    /// Writable memory, bytes (`RLIMIT_DATA`).
    memory: Option<u64>,
    /// CPU time, seconds (`RLIMIT_CPU`).
    cpu: Option<u64>,
    group: bool,
    offline: bool,
}

#[derive(Debug, Clone)]
struct Env {
    keep: &'static [&'static str],
    set: Vec<(String, OsString)>,
}

impl Confine {
    /// Dies with the thread that starts it (a death signal, so a killed doc2ci leaves nothing
    /// behind); otherwise as its parent.
    pub fn new() -> Confine {
        Confine::default()
    }

    /// Sees none of doc2ci's environment (API keys, cloud credentials) but the variables named in
    /// `keep`, as doc2ci has them, and `set`.
    pub fn env(mut self, keep: &'static [&'static str], set: &[(&str, &OsStr)]) -> Confine {
        self.env = Some(Env { keep, set: set.iter().map(|(k, v)| (k.to_string(), v.to_os_string())).collect() });
        self
    }

    /// At most `bytes` of heap and other writable memory: a hostile input cannot make it take the
    /// machine's (address-space reservations, which WebAssembly makes, do not count).
    pub fn memory(mut self, bytes: u64) -> Confine {
        self.memory = Some(bytes);
        self
    }

    /// At most `secs` of CPU time, then SIGKILL, which it cannot catch and keep going.
    pub fn cpu(mut self, secs: u64) -> Confine {
        self.cpu = Some(secs);
        self
    }

    /// A process group of its own, which [`run`] kills whole at the timeout (helpers included).
    pub fn own_group(mut self) -> Confine {
        self.group = true;
        self
    }

    /// No network: a network namespace of its own with nothing in it, when the machine gives one
    /// ([`offline_available`]; a caller that must not run networked checks it first).
    pub fn offline(mut self) -> Confine {
        self.offline = true;
        self
    }

    /// `program`, confined; the caller adds its arguments, folder and streams.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = if self.offline && offline_available() {
            let p = offline_prefix();
            let mut c = Command::new(p[0]);
            c.args(&p[1..]).arg(program);
            c
        } else {
            Command::new(program)
        };
        if let Some(env) = &self.env {
            cmd.env_clear();
            for keep in env.keep {
                if let Some(v) = std::env::var_os(keep) {
                    cmd.env(keep, v);
                }
            }
            for (k, v) in &env.set {
                cmd.env(k, v);
            }
        }
        if self.group {
            cmd.process_group(0);
        }
        let limit = |n: u64| libc::rlimit { rlim_cur: n as libc::rlim_t, rlim_max: n as libc::rlim_t };
        let (memory, cpu) = (self.memory.map(limit), self.cpu.map(limit));
        // SAFETY: prctl and setrlimit are async-signal-safe and touch only values copied in.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                for (resource, cap) in [(libc::RLIMIT_DATA, &memory), (libc::RLIMIT_CPU, &cpu)] {
                    if let Some(cap) = cap {
                        if libc::setrlimit(resource, cap) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                Ok(())
            });
        }
        cmd
    }
}

/// The command prefix that gives a process a network namespace of its own. As root, `unshare
/// --net` changes no credential, so the death signal armed before it holds; otherwise a user
/// namespace (`--map-root-user`) changes them, which clears the death signal, so `setpriv` arms it
/// again.
fn offline_prefix() -> Vec<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        vec!["unshare", "--net", "--"]
    } else {
        vec!["unshare", "--net", "--map-root-user", "--", "setpriv", "--pdeathsig", "KILL", "--"]
    }
}

/// Whether this machine can give a process a network namespace of its own (probed once).
pub fn offline_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let p = offline_prefix();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn sh(c: &Confine, script: &str, dir: &Path) -> Ran {
        let mut cmd = c.command("/bin/sh");
        cmd.args(["-c", script]).current_dir(dir);
        run("sh", cmd, None, Duration::from_secs(60)).unwrap()
    }

    #[test]
    fn limits_apply_and_the_environment_is_cleared() {
        let s = Scratch::new("doc2ci-sandbox-test-").unwrap();
        let c = Confine::new().env(&["LANG"], &[("HOME", s.0.as_os_str())]).memory(1 << 30).cpu(8);
        let r = sh(&c, "ulimit -t; ulimit -d; echo $HOME; echo ${CARGO_MANIFEST_DIR:-none}", &s.0);
        assert_eq!(r.stdout, format!("8\n{}\n{}\nnone\n", (1u64 << 30) / 1024, s.0.display()));
        // Without `env`, the parent's environment.
        let r = sh(&Confine::new(), "echo ${CARGO_MANIFEST_DIR:-none}", &s.0);
        assert_eq!(r.stdout.trim(), env!("CARGO_MANIFEST_DIR"));
    }

    #[test]
    fn offline_means_no_network_at_all() {
        assert!(offline_available(), "this machine gives network namespaces");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let s = Scratch::new("doc2ci-sandbox-test-").unwrap();
        let probe = format!(
            "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\n\
             except OSError:\n    print('unreachable')"
        );
        let reach = |c: Confine| {
            let mut cmd = c.command("python3");
            cmd.args(["-c", &probe]).current_dir(&s.0);
            run("python3", cmd, None, Duration::from_secs(60)).unwrap().stdout
        };
        assert_eq!(reach(Confine::new()).trim(), "connected");
        assert_eq!(reach(Confine::new().offline()).trim(), "unreachable");
    }
}
