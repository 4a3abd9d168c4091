//! The browser's network (issue 31). Chromium runs in a network namespace of its own, where only
//! loopback is up and the one way out is a SOCKS5 gate that this process serves and that connects
//! to the crawled origin and refuses everything else. An in-scope page's scripts thus reach
//! neither this machine's other services (its loopback is not theirs) nor the network behind it,
//! not even blindly, and names are resolved by the gate, for the origin only. chromedriver stays
//! outside and speaks to Chromium over a pipe (`--remote-debugging-pipe`), not a port.

use anyhow::{anyhow, bail, Context, Result};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A namespace held open by a `sleep` child (the namespace's first process), and the gate that
/// listens inside it.
pub struct Netns {
    holder: Child,
    port: u16,
    gate: tokio::task::JoinHandle<()>,
    userns: bool,
    nsenter: String,
}

impl Netns {
    /// A fresh namespace whose only way out reaches `allowed` (host as `Url::host_str` spells it,
    /// port). Fails when the machine gives no namespace (no `unshare` right, no `nsenter`).
    pub fn start(allowed: Vec<(String, u16)>) -> Result<Netns> {
        let nsenter = crate::assets::which("nsenter").ok_or_else(|| anyhow!("`nsenter` not found"))?;
        let sleep = crate::assets::which("sleep").ok_or_else(|| anyhow!("`sleep` not found"))?;
        // SAFETY: these calls have no preconditions.
        let (root, uid, gid) = unsafe { (libc::geteuid() == 0, libc::getuid(), libc::getgid()) };
        // As root a network namespace needs no user namespace; otherwise one maps our own ids
        // (not root: Chromium would then refuse its own sandbox).
        let maps = (!root).then(|| (format!("{uid} {uid} 1"), format!("{gid} {gid} 1")));
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors socketpair writes.
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0
        {
            bail!("socketpair: {}", std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let chan = theirs.as_raw_fd();
        let mut cmd = Command::new(sleep);
        cmd.arg("infinity").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: `enter` makes only async-signal-safe system calls on memory prepared before fork.
        unsafe {
            cmd.pre_exec(move || enter(chan, maps.as_ref().map(|(u, g)| (u.as_bytes(), g.as_bytes()))));
        }
        let holder = cmd.spawn().context("a network namespace for the browser")?;
        drop(theirs);
        // spawn() returns once the child has exec'd, so the listener is already in the socket.
        let fd = recv_fd(ours.as_raw_fd()).context("the browser namespace's listener")?;
        // SAFETY: the descriptor was received just now and is owned by nobody else.
        let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let gate = tokio::spawn(gate(listener, allowed.into()));
        Ok(Netns { holder, port, gate, userns: !root, nsenter: nsenter.display().to_string() })
    }

    /// The command prefix that runs a program inside the namespace.
    pub fn enter(&self) -> Vec<String> {
        let pid = self.holder.id();
        let mut v = vec![self.nsenter.clone()];
        if self.userns {
            v.push(format!("--user=/proc/{pid}/ns/user"));
            v.push("--preserve-credentials".into());
        }
        v.push(format!("--net=/proc/{pid}/ns/net"));
        v.push("--".into());
        v
    }

    /// Chromium's flags: every connection through the gate (loopback included, which Chromium
    /// would otherwise bypass), and DevTools over a pipe, as chromedriver is outside.
    pub fn chromium_args(&self) -> Vec<String> {
        vec![
            format!("--proxy-server=socks5://127.0.0.1:{}", self.port),
            "--proxy-bypass-list=<-loopback>".into(),
            "--remote-debugging-pipe".into(),
        ]
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.gate.abort();
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// In the child between fork and exec: die with the parent, enter a new network namespace, bring
/// its loopback up, and hand a listener bound in it to the parent over `chan`.
fn enter(chan: RawFd, maps: Option<(&[u8], &[u8])>) -> std::io::Result<()> {
    let err = std::io::Error::last_os_error;
    // SAFETY: plain system calls on descriptors and buffers owned by this function.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(err());
        }
        let flags = if maps.is_some() { libc::CLONE_NEWUSER | libc::CLONE_NEWNET } else { libc::CLONE_NEWNET };
        if libc::unshare(flags) != 0 {
            return Err(err());
        }
        if let Some((uid, gid)) = maps {
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", uid)?;
            write_proc(c"/proc/self/gid_map", gid)?;
        }
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(err());
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        ifr.ifr_name[0] = b'l' as libc::c_char;
        ifr.ifr_name[1] = b'o' as libc::c_char;
        if libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr) != 0 {
            return Err(err());
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr) != 0 {
            return Err(err());
        }
        libc::close(s);
        let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if l < 0 {
            return Err(err());
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes([127, 0, 0, 1]) },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(l, &addr as *const libc::sockaddr_in as *const libc::sockaddr, len) != 0
            || libc::listen(l, 128) != 0
        {
            return Err(err());
        }
        send_fd(chan, l)?;
        libc::close(l);
    }
    Ok(())
}

/// SAFETY: async-signal-safe (open, write, close on a NUL-terminated path).
unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = libc::write(fd, data.as_ptr() as *const libc::c_void, data.len());
    libc::close(fd);
    if n != data.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Room for one descriptor's control message, aligned as `cmsghdr` requires.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// SAFETY: async-signal-safe (sendmsg with buffers on the stack).
unsafe fn send_fd(chan: RawFd, fd: RawFd) -> std::io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
    let mut ctl = Control([0; 64]);
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.0.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
    let c = libc::CMSG_FIRSTHDR(&msg);
    (*c).cmsg_level = libc::SOL_SOCKET;
    (*c).cmsg_type = libc::SCM_RIGHTS;
    (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, fd);
    if libc::sendmsg(chan, &msg, 0) != 1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn recv_fd(chan: RawFd) -> Result<RawFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
    let mut ctl = Control([0; 64]);
    // SAFETY: msghdr is plain data; the buffers it points to outlive the call.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.0.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = ctl.0.len() as _;
        if libc::recvmsg(chan, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) != 1 {
            bail!("no listener from the namespace: {}", std::io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS {
            bail!("no listener from the namespace");
        }
        Ok(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const RawFd))
    }
}

async fn gate(listener: tokio::net::TcpListener, allowed: Arc<[(String, u16)]>) {
    loop {
        match listener.accept().await {
            Ok((c, _)) => {
                let allowed = allowed.clone();
                tokio::spawn(async move {
                    let _ = socks(c, &allowed).await;
                });
            }
            // Out of descriptors, say: a moment, then on.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// SOCKS5 replies (RFC 1928 §6): success, not allowed by the ruleset, refused, command and
/// address type not supported.
const OK: u8 = 0;
const NOT_ALLOWED: u8 = 2;
const REFUSED: u8 = 5;
const NO_COMMAND: u8 = 7;
const NO_ADDRESS: u8 = 8;

fn reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

/// One connection: the browser names where it goes; only the origin is connected.
async fn socks(mut c: TcpStream, allowed: &[(String, u16)]) -> std::io::Result<()> {
    let asked = tokio::time::timeout(Duration::from_secs(10), request(&mut c))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let Some((host, port)) = asked else { return Ok(()) };
    if !allowed.iter().any(|(h, p)| *h == host && *p == port) {
        return c.write_all(&reply(NOT_ALLOWED)).await;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let mut up = match tokio::time::timeout(Duration::from_secs(30), TcpStream::connect((bare, port))).await {
        Ok(Ok(s)) => s,
        _ => return c.write_all(&reply(REFUSED)).await,
    };
    c.write_all(&reply(OK)).await?;
    tokio::io::copy_bidirectional(&mut c, &mut up).await?;
    Ok(())
}

/// The greeting and the request; None when the browser asked for something other than CONNECT
/// without authentication (it has been answered).
async fn request(c: &mut TcpStream) -> std::io::Result<Option<(String, u16)>> {
    let mut h = [0u8; 2];
    c.read_exact(&mut h).await?;
    let mut methods = vec![0u8; h[1] as usize];
    c.read_exact(&mut methods).await?;
    if h[0] != 5 || !methods.contains(&0) {
        c.write_all(&[5, 0xff]).await?;
        return Ok(None);
    }
    c.write_all(&[5, 0]).await?;
    let mut r = [0u8; 4];
    c.read_exact(&mut r).await?;
    if r[0] != 5 || r[1] != 1 {
        c.write_all(&reply(NO_COMMAND)).await?;
        return Ok(None);
    }
    let host = match r[3] {
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a).await?;
            Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut n = [0u8; 1];
            c.read_exact(&mut n).await?;
            let mut name = vec![0u8; n[0] as usize];
            c.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).to_ascii_lowercase()
        }
        4 => {
            let mut a = [0u8; 16];
            c.read_exact(&mut a).await?;
            format!("[{}]", Ipv6Addr::from(a))
        }
        _ => {
            c.write_all(&reply(NO_ADDRESS)).await?;
            return Ok(None);
        }
    };
    let mut p = [0u8; 2];
    c.read_exact(&mut p).await?;
    Ok(Some((host, u16::from_be_bytes(p))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inside the namespace the machine's loopback is out of reach; through the gate only the
    /// allowed origin is (a SOCKS5 client in Python, run in the namespace).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_origin_is_reached_through_the_gate() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (po, px) = (open.local_addr().unwrap().port(), other.local_addr().unwrap().port());
        std::thread::spawn(move || {
            for mut s in open.incoming().flatten() {
                use std::io::Write;
                let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            for _ in other.incoming() {
                h.fetch_add(1, Ordering::SeqCst);
            }
        });
        let ns = Netns::start(vec![("127.0.0.1".into(), po)]).expect("this machine gives namespaces");
        let (enter, gate) = (ns.enter(), ns.port);
        let script = format!(
            r#"import socket
def direct(port):
    try:
        socket.create_connection(('127.0.0.1', port), timeout=3)
        return 'connected'
    except OSError:
        return 'unreachable'
def via(port):
    s = socket.create_connection(('127.0.0.1', {gate}), timeout=5)
    s.sendall(b'\x05\x01\x00'); s.recv(2)
    s.sendall(b'\x05\x01\x00\x01' + socket.inet_aton('127.0.0.1') + port.to_bytes(2, 'big'))
    r = s.recv(10)
    if r[1] != 0:
        return 'reply %d' % r[1]
    s.sendall(b'GET / HTTP/1.0\r\n\r\n')
    return s.recv(100).decode().split('\r\n\r\n')[-1]
print(direct({po}), via({po}), via({px}))"#
        );
        let out = tokio::task::spawn_blocking(move || {
            Command::new(&enter[0]).args(&enter[1..]).arg("python3").arg("-c").arg(script).output().unwrap()
        })
        .await
        .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(said.trim(), "unreachable ok reply 2", "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(hits.load(Ordering::SeqCst), 0, "the other service was reached");
        drop(ns);
    }
}
