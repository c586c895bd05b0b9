//! A test-only TCP proxy between a client and the server that can cut a
//! connection after forwarding a chosen request and before its reply, and
//! counts the client's requests (RESP commands), i.e. round trips.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, Notify};

#[derive(Default)]
struct State {
    /// Added to every chunk in each direction (a simulated network).
    delay: Duration,
    /// Cut the connection that sees a request containing this pattern:
    /// after forwarding it (`false`), or instead of forwarding it (`true`).
    trigger: Mutex<Option<(Vec<u8>, bool)>>,
    cuts: AtomicU64,
    commands: AtomicU64,
    cut_done: Notify,
    /// While set, new client connections are closed at once (a server
    /// that cannot be reached, for the connections being made).
    refusing: AtomicBool,
    /// Every client request seen, upper-cased, for `saw` (bounded).
    seen: std::sync::Mutex<Vec<u8>>,
}

/// The proxy; stops accepting when dropped.
pub struct FaultProxy {
    port: u16,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port forwarding to `upstream` (`host:port`).
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub async fn start(upstream: String) -> Self {
        Self::start_with_delay(upstream, Duration::ZERO).await
    }

    /// Like [`FaultProxy::start`], delaying every chunk by `delay` in each
    /// direction, in order (a simulated network, precise to tens of
    /// microseconds: each delayed connection runs on threads of its own).
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub async fn start_with_delay(upstream: String, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(State { delay, ..State::default() });
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if st.refusing.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                let st = st.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        // No Nagle: a proxy must not add its own batching delays.
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        pump(client, server, st).await;
                    }
                });
            }
        });
        FaultProxy { port, state, task }
    }

    /// `redis://127.0.0.1:{port}/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Arms a one-shot cut: the next client request containing `pattern`
    /// (ASCII case-insensitive) is
    /// forwarded to the server, its reply is swallowed and the connection closed.
    pub async fn cut_after_request_containing(&self, pattern: &[u8]) {
        *self.state.trigger.lock().await = Some((pattern.to_vec(), false));
    }

    /// Arms a one-shot cut before the server sees the request: the next
    /// client request containing `pattern` (ASCII case-insensitive) is not
    /// forwarded, and the connection is closed (a request lost on the way).
    pub async fn cut_before_request_containing(&self, pattern: &[u8]) {
        *self.state.trigger.lock().await = Some((pattern.to_vec(), true));
    }

    /// Waits until an armed cut happened.
    pub async fn wait_cut(&self) {
        let notified = self.state.cut_done.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.state.cuts.load(Ordering::SeqCst) == 0 {
            notified.await;
        }
    }

    /// While `refuse` is true, new connections are closed as soon as they
    /// are accepted; connections already open are left alone.
    pub fn refuse_new_connections(&self, refuse: bool) {
        self.state.refusing.store(refuse, Ordering::SeqCst);
    }

    /// Cuts done so far.
    pub fn cuts(&self) -> u64 {
        self.state.cuts.load(Ordering::SeqCst)
    }

    /// Whether any client request so far contained `pattern` (ASCII case-insensitive).
    pub fn saw(&self, pattern: &[u8]) -> bool {
        let p: Vec<u8> = pattern.iter().map(u8::to_ascii_uppercase).collect();
        let seen = self.state.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.windows(p.len()).any(|w| w == p.as_slice())
    }

    /// Client requests (RESP commands) forwarded so far.
    pub fn commands(&self) -> u64 {
        self.state.commands.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts top-level RESP arrays (`*N\r\n` then N bulk strings) in a byte
/// stream that may arrive in pieces.
#[derive(Default)]
struct RespCounter {
    buf: Vec<u8>,
}

impl RespCounter {
    fn feed(&mut self, data: &[u8]) -> u64 {
        self.buf.extend_from_slice(data);
        let mut n = 0;
        loop {
            match parse_command(&self.buf) {
                Some(used) => {
                    self.buf.drain(..used);
                    n += 1;
                }
                None => return n,
            }
        }
    }
}

fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(at..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..end], at + end + 2))
}

fn parse_command(buf: &[u8]) -> Option<usize> {
    let (head, mut at) = line(buf, 0)?;
    if head.first() != Some(&b'*') {
        // Inline command.
        return Some(at);
    }
    let n: usize = std::str::from_utf8(&head[1..]).ok()?.parse().ok()?;
    for _ in 0..n {
        let (h, next) = line(buf, at)?;
        let len: usize = std::str::from_utf8(h.get(1..)?).ok()?.parse().ok()?;
        at = next + len + 2;
        if at > buf.len() {
            return None;
        }
    }
    Some(at)
}

/// Forwards `from` to `to`, each chunk `delay` after it was read, in
/// order, on threads of its own: a thread's sleep is precise to tens of
/// microseconds, where the runtime's timer wakes once a millisecond at best
/// (which added 1 to 2 ms each way and made a 0.5 ms link a 2 ms one). A
/// writer sends every chunk due by the time it wakes in one write. Ends
/// when either side closes, closing both.
fn delayed(mut from: std::net::TcpStream, mut to: std::net::TcpStream, delay: Duration) {
    use std::io::{Read, Write};
    let (tx, rx) = std::sync::mpsc::channel::<(std::time::Instant, Vec<u8>)>();
    let mut to_reader = to.try_clone().ok();
    let writer = std::thread::spawn(move || {
        let mut queue: std::collections::VecDeque<(std::time::Instant, Vec<u8>)> = Default::default();
        loop {
            if queue.is_empty() {
                match rx.recv() {
                    Ok(chunk) => queue.push_back(chunk),
                    Err(_) => break,
                }
            }
            let at = queue.front().map(|(at, _)| *at).expect("not empty");
            let now = std::time::Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            while let Ok(chunk) = rx.try_recv() {
                queue.push_back(chunk);
            }
            let now = std::time::Instant::now();
            let mut out = Vec::new();
            while queue.front().is_some_and(|(at, _)| *at <= now) {
                out.extend(queue.pop_front().expect("checked").1);
            }
            if !out.is_empty() && to.write_all(&out).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send((std::time::Instant::now() + delay, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = from.shutdown(std::net::Shutdown::Both);
    if let Some(t) = to_reader.take() {
        let _ = t.shutdown(std::net::Shutdown::Read);
    }
    let _ = writer.join();
}

/// Both directions of a delayed connection, each on its own threads.
async fn delayed_both(client: TcpStream, server: TcpStream, delay: Duration) {
    let blocking = |s: TcpStream| -> std::io::Result<(std::net::TcpStream, std::net::TcpStream)> {
        let s = s.into_std()?;
        s.set_nonblocking(false)?;
        let other = s.try_clone()?;
        Ok((s, other))
    };
    let (Ok((c_read, c_write)), Ok((s_read, s_write))) = (blocking(client), blocking(server)) else { return };
    let up = tokio::task::spawn_blocking(move || delayed(c_read, s_write, delay));
    let down = tokio::task::spawn_blocking(move || delayed(s_read, c_write, delay));
    let _ = tokio::join!(up, down);
}

async fn pump(client: TcpStream, server: TcpStream, st: Arc<State>) {
    if !st.delay.is_zero() {
        delayed_both(client, server, st.delay).await;
        return;
    }
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let cut = Arc::new(AtomicBool::new(false));
    let cut2 = cut.clone();
    let cut3 = cut.clone();
    let st2 = st.clone();
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut counter = RespCounter::default();
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            st2.commands.fetch_add(counter.feed(&buf[..n]), Ordering::SeqCst);
            {
                let mut seen = st2.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if seen.len() < 64 * 1024 * 1024 {
                    seen.extend(buf[..n].iter().map(u8::to_ascii_uppercase));
                }
            }
            let mut trigger = st2.trigger.lock().await;
            let hit =
                trigger.as_ref().is_some_and(|(p, _)| buf[..n].windows(p.len()).any(|w| w.eq_ignore_ascii_case(p)));
            let before = hit && trigger.as_ref().is_some_and(|(_, before)| *before);
            if hit {
                *trigger = None;
                cut2.store(true, Ordering::SeqCst);
            }
            drop(trigger);
            if before {
                // Nothing of this chunk reaches the server.
                break;
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
            if hit {
                // Let the server execute it, then drop both sides unanswered.
                tokio::time::sleep(Duration::from_millis(50)).await;
                break;
            }
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if cut.load(Ordering::SeqCst) {
                // Swallow the reply; `up` closes both sides.
                continue;
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
    if cut3.load(Ordering::SeqCst) {
        st.cuts.fetch_add(1, Ordering::SeqCst);
        st.cut_done.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_commands_across_pieces() {
        let mut c = RespCounter::default();
        let cmd = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(c.feed(&cmd[..5]), 0);
        assert_eq!(c.feed(&cmd[5..]), 1);
        let two = [cmd.as_slice(), cmd.as_slice()].concat();
        assert_eq!(c.feed(&two), 2);
    }
}
