//! Waiting for a confined process: a timeout of wall time, after which its whole process group is
//! killed, and output bounded per stream. Untrusted text reaches it as a file or on stdin, never
//! through a shell or an argument.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
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

/// Output kept per stream.
pub const MAX_OUTPUT: usize = 16 << 20;

/// Runs `cmd` (made by [`super::Confine::command`] with `own_group`, its arguments and folder set)
/// with `stdin`, for at most `timeout` of wall time. `program` names it in errors (the command's
/// own program may be the namespace's `unshare`).
pub fn run(program: &str, mut cmd: Command, stdin: Option<Vec<u8>>, timeout: Duration) -> Result<Ran> {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("starting {program}"))?;
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
    let (o, to) = out.join().map_err(|_| anyhow!("reading {program}'s output"))?;
    let (e, te) = err.join().map_err(|_| anyhow!("reading {program}'s errors"))?;
    Ok(Ran {
        status,
        stdout: String::from_utf8_lossy(&o).into_owned(),
        stderr: String::from_utf8_lossy(&e).into_owned(),
        truncated: to || te,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Confine, Scratch};
    use super::*;

    fn sh(script: &str, stdin: Option<Vec<u8>>, timeout: Duration) -> Ran {
        let s = Scratch::new("doc2ci-run-test-").unwrap();
        let mut cmd = Confine::new().own_group().command("/bin/sh");
        cmd.args(["-c", script]).current_dir(&s.0);
        run("sh", cmd, stdin, timeout).unwrap()
    }

    #[test]
    fn a_process_past_its_timeout_is_killed_with_its_children() {
        let r = sh("sleep 30 & sleep 30", None, Duration::from_millis(300));
        assert!(r.status.is_none());
    }

    #[test]
    fn output_is_bounded_and_stdin_arrives() {
        let r = sh("cat", Some(b"hello".to_vec()), Duration::from_secs(60));
        assert!(r.success());
        assert_eq!(r.stdout, "hello");
        let big = sh("head -c 40000000 /dev/zero", None, Duration::from_secs(60));
        assert!(big.truncated && big.stdout.len() == MAX_OUTPUT);
    }
}
