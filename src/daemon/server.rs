//! Serves the control socket on its own thread: one task per client, so a slow or stuck client
//! only ever waits for itself.
//!
//! Cheap requests are answered on the server thread; requests that build trajectories (`play`,
//! `reload`, `recover`) run on tokio's blocking pool so they never hold up other clients. Nothing
//! here touches the loop except through the [`Handler`], which talks to the loop without blocking
//! it.
//!
//! No client can lock the others out of `stop`: every connection has an idle and a read timeout,
//! each uid holds at most [`Limits::max_clients_per_uid`] of the [`Limits::max_clients`] slots,
//! and a connection that finds no slot still has its one request read in a small reserved pool,
//! where `stop`, `quick_stop` and `status` are answered and everything else gets `busy`. When the
//! reserved pool is full too, its oldest connection makes room for the new one, so a fresh
//! `motionctl stop` always gets its turn.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::framing::{Frame, Framer};
use super::protocol::{ErrorCode, Reply, Request, RequestError, parse_request};
use super::socket::ControlSocket;

/// Who is at the other end of a connection, as the kernel saw it connect (SO_PEERCRED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    /// Absent when the peer lives in another PID namespace.
    pub pid: Option<i32>,
    /// The connection's number, counted from 1 as the server accepts them: what a stream's
    /// owner is (one process may hold several connections, and a pid can be reused).
    pub connection: u64,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uid {} gid {}", self.uid, self.gid)?;
        if let Some(pid) = self.pid {
            write!(f, " pid {pid}")?;
        }
        write!(f, ", connection {}", self.connection)
    }
}

/// Answers parsed requests. Called from several threads at once.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, peer: &Peer, request: Request) -> Reply;

    /// `peer`'s connection has closed (or the server stops): it sends nothing more, so what it
    /// held (a stream) is let go. Called once per connection that held a slot, after its last
    /// request was answered.
    fn disconnected(&self, _peer: &Peer) {}
}

/// How many connections the server keeps and how long it waits for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub max_clients: usize,
    /// Of those, at most this many per uid, so one user cannot take them all.
    pub max_clients_per_uid: usize,
    /// Connections beyond the caps that still get one `stop`, `quick_stop` or `status` answered.
    pub reserved: usize,
    /// A connection that starts no request for this long is closed.
    pub idle_timeout: Duration,
    /// A request whose first byte arrived must end with its newline within this time.
    pub read_timeout: Duration,
    /// A connection in the reserved pool must send its request within this time.
    pub reserved_timeout: Duration,
    /// A client that does not take its reply within this time is disconnected.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_clients: 256,
            max_clients_per_uid: 64,
            reserved: 32,
            idle_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(5),
            reserved_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// The running server. Dropping it (or [`Server::stop`]) stops accepting, closes the connections
/// and removes the socket file.
#[derive(Debug)]
pub struct Server {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts serving `socket` on a new thread with the default [`Limits`].
    pub fn start(socket: ControlSocket, handler: Arc<dyn Handler>) -> io::Result<Self> {
        Self::start_with(socket, handler, Limits::default())
    }

    /// Starts serving `socket` on a new thread.
    pub fn start_with(
        socket: ControlSocket,
        handler: Arc<dyn Handler>,
        limits: Limits,
    ) -> io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        socket.listener().set_nonblocking(true)?;
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                let accept = accept_loop(&socket, handler, limits, stopped);
                if let Err(err) = runtime.block_on(accept) {
                    tracing::error!("control socket {}: {err}", socket.path().display());
                }
                // Blocking tasks still building a trajectory are left to finish on their own.
                runtime.shutdown_timeout(Duration::from_millis(100));
                drop(socket);
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Connections holding a slot, in all and per uid.
#[derive(Debug)]
struct Slots {
    limits: Limits,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_uid: HashMap<u32, usize>,
}

/// One connection's slot, given back when dropped.
#[derive(Debug)]
struct Slot {
    slots: Arc<Slots>,
    uid: u32,
}

impl Slots {
    /// A slot for a connection of `uid`, or why there is none (for the `busy` reply).
    fn take(self: &Arc<Self>, uid: u32) -> Result<Slot, String> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let limits = &self.limits;
        if held.total >= limits.max_clients {
            return Err(format!("{} clients are connected", limits.max_clients));
        }
        let mine = held.by_uid.entry(uid).or_default();
        if *mine >= limits.max_clients_per_uid {
            return Err(format!(
                "uid {uid} has {} connections open, the most one user may",
                limits.max_clients_per_uid
            ));
        }
        *mine += 1;
        held.total += 1;
        Ok(Slot {
            slots: self.clone(),
            uid,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self
            .slots
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        held.total -= 1;
        if let Some(mine) = held.by_uid.get_mut(&self.uid) {
            *mine -= 1;
            if *mine == 0 {
                held.by_uid.remove(&self.uid);
            }
        }
    }
}

/// The connections that found no slot, oldest first, each with the means to close it early.
#[derive(Debug, Default)]
struct Reserved {
    next_id: u64,
    waiting: VecDeque<(u64, oneshot::Sender<()>)>,
}

impl Reserved {
    /// Admits a connection, closing the oldest when all `capacity` places are taken; returns its
    /// id and what tells it that it was closed.
    fn enter(&mut self, capacity: usize) -> (u64, oneshot::Receiver<()>) {
        while self.waiting.len() >= capacity.max(1) {
            if let Some((_, evict)) = self.waiting.pop_front() {
                let _ = evict.send(());
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let (evict, evicted) = oneshot::channel();
        self.waiting.push_back((id, evict));
        (id, evicted)
    }

    fn leave(&mut self, id: u64) {
        self.waiting.retain(|(waiting, _)| *waiting != id);
    }
}

async fn accept_loop(
    socket: &ControlSocket,
    handler: Arc<dyn Handler>,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) -> io::Result<()> {
    let listener = tokio::net::UnixListener::from_std(socket.listener().try_clone()?)?;
    let slots = Arc::new(Slots {
        limits,
        held: Mutex::default(),
    });
    let reserved = Arc::new(Mutex::new(Reserved::default()));
    let mut connections: u64 = 0;
    loop {
        let stream = tokio::select! {
            _ = stopped.changed() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    // Out of file descriptors and the like: keep serving the clients we have.
                    tracing::warn!("control socket: accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        connections += 1;
        let peer = match stream.peer_cred() {
            Ok(cred) => Peer {
                uid: cred.uid(),
                gid: cred.gid(),
                pid: cred.pid(),
                connection: connections,
            },
            Err(err) => {
                tracing::warn!("control socket: cannot tell who connected: {err}");
                continue;
            }
        };
        let handler = handler.clone();
        let mut stopped = stopped.clone();
        match slots.take(peer.uid) {
            Ok(slot) => {
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stopped.changed() => {}
                        _ = serve_client(stream, peer, handler.clone(), limits) => {}
                    }
                    handler.disconnected(&peer);
                    drop(slot);
                });
            }
            Err(why) => {
                let (id, evicted) = {
                    let mut reserved = reserved.lock().unwrap_or_else(PoisonError::into_inner);
                    if reserved.waiting.is_empty() {
                        tracing::warn!(
                            "control socket saturated ({why}, last {peer}): new connections get \
                             only stop, quick_stop and status answered"
                        );
                    }
                    reserved.enter(limits.reserved)
                };
                let reserved = reserved.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stopped.changed() => {}
                        _ = serve_reserved(stream, peer, handler, limits, why, evicted) => {}
                    }
                    reserved
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .leave(id);
                });
            }
        }
    }
}

async fn serve_client(
    mut stream: UnixStream,
    peer: Peer,
    handler: Arc<dyn Handler>,
    limits: Limits,
) {
    let mut framer = Framer::default();
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 8192];
    // When the first byte of the request being read arrived; `None` between requests.
    let mut started: Option<Instant> = None;
    loop {
        let deadline = match started {
            None => Instant::now() + limits.idle_timeout,
            Some(at) => at + limits.read_timeout,
        };
        let n = match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) => return,
            Err(_) => {
                // Idle between requests: nothing to answer, just close.
                if started.is_some() {
                    let late = read_timed_out(limits.read_timeout);
                    let _ = write_reply(&mut stream, &Reply::error(&late), &limits).await;
                }
                return;
            }
        };
        let Some(bytes) = buf.get(..n) else { return };
        if n == 0 {
            frames.extend(framer.finish());
        } else {
            framer.push(bytes, &mut frames);
        }
        // A line left open after this read began in it unless the previous one is still open.
        started = match (framer.mid_line(), frames.is_empty()) {
            (false, _) => None,
            (true, true) => started.or_else(|| Some(Instant::now())),
            (true, false) => Some(Instant::now()),
        };
        for frame in frames.drain(..) {
            let reply = answer(frame, &peer, &handler).await;
            if write_reply(&mut stream, &reply, &limits).await.is_err() {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

/// A connection without a slot: one request, answered only if it is `stop`, `quick_stop` or
/// `status` (`why` says why there was no slot), then closed.
async fn serve_reserved(
    mut stream: UnixStream,
    peer: Peer,
    handler: Arc<dyn Handler>,
    limits: Limits,
    why: String,
    mut evicted: oneshot::Receiver<()>,
) {
    let mut framer = Framer::default();
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + limits.reserved_timeout;
    let busy = |detail: &str| {
        Reply::error(&RequestError::new(
            ErrorCode::Busy,
            format!("{why}; {detail}; try again when a client has disconnected"),
        ))
    };
    let frame = loop {
        tokio::select! {
            _ = &mut evicted => {
                let reply = busy("the reserved connections for stop and status were all taken");
                let _ = write_reply(&mut stream, &reply, &limits).await;
                return;
            }
            _ = tokio::time::sleep_until(deadline) => {
                let late = read_timed_out(limits.reserved_timeout);
                let _ = write_reply(&mut stream, &Reply::error(&late), &limits).await;
                return;
            }
            read = stream.read(&mut buf) => {
                let n = match read {
                    Ok(n) => n,
                    Err(_) => return,
                };
                if n == 0 {
                    frames.extend(framer.finish());
                } else if let Some(bytes) = buf.get(..n) {
                    framer.push(bytes, &mut frames);
                }
                if let Some(frame) = frames.drain(..).next() {
                    break frame;
                }
                if n == 0 {
                    return;
                }
            }
        }
    };
    let reply = match frame {
        Frame::Line(line) => match parse_request(&line) {
            Ok(request @ (Request::Stop { .. } | Request::QuickStop { .. } | Request::Status)) => {
                handler.handle(&peer, request)
            }
            Ok(_) => busy("only stop, quick_stop and status are answered now"),
            Err(err) => Reply::error(&err),
        },
        other => answer(other, &peer, &handler).await,
    };
    let _ = write_reply(&mut stream, &reply, &limits).await;
}

fn read_timed_out(limit: Duration) -> RequestError {
    RequestError::new(
        ErrorCode::Timeout,
        format!(
            "the request did not end with a newline within {} s; closing the connection",
            limit.as_secs_f64()
        ),
    )
}

/// The request a frame holds, or the error reply it gets (what every connection does first).
pub fn request_of(frame: Frame) -> Result<Request, RequestError> {
    match frame {
        Frame::Line(line) => parse_request(&line),
        Frame::TooLarge => Err(RequestError::new(
            ErrorCode::TooLarge,
            format!(
                "request longer than {} bytes",
                super::protocol::MAX_REQUEST_BYTES
            ),
        )),
        Frame::Incomplete => Err(RequestError::new(
            ErrorCode::Incomplete,
            "connection closed in the middle of a request (no newline)",
        )),
    }
}

async fn answer(frame: Frame, peer: &Peer, handler: &Arc<dyn Handler>) -> Reply {
    let request = match request_of(frame) {
        Ok(request) => request,
        Err(err) => return Reply::error(&err),
    };
    if matches!(
        request,
        Request::Play { .. } | Request::Reload | Request::Recover { .. } | Request::Dump
    ) {
        let handler = handler.clone();
        let peer = *peer;
        match tokio::task::spawn_blocking(move || handler.handle(&peer, request)).await {
            Ok(reply) => reply,
            Err(err) => Reply::error(&RequestError::new(
                ErrorCode::Unavailable,
                format!("request failed: {err}"),
            )),
        }
    } else {
        handler.handle(peer, request)
    }
}

async fn write_reply(stream: &mut UnixStream, reply: &Reply, limits: &Limits) -> io::Result<()> {
    let line = reply.to_line();
    match tokio::time::timeout(limits.write_timeout, stream.write_all(line.as_bytes())).await {
        Ok(result) => result,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::net::UnixStream as StdStream;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Replies with the command it saw (as a `recover` reply's `pose`: any reply type does),
    /// remembers who asked last and counts the requests.
    struct Echo(AtomicUsize, std::sync::Mutex<Option<Peer>>);

    impl Handler for Echo {
        fn handle(&self, peer: &Peer, request: Request) -> Reply {
            self.0.fetch_add(1, Ordering::Relaxed);
            *self.1.lock().unwrap() = Some(*peer);
            Reply::Ok(crate::daemon::protocol::Answer::Recover(
                crate::daemon::reply::RecoverReply {
                    pose: request.cmd().into(),
                    approach_s: 0.0,
                },
            ))
        }
    }

    /// The command the [`Echo`] saw.
    fn saw(reply: &serde_json::Value) -> &serde_json::Value {
        &reply["pose"]
    }

    /// Long enough never to fire in a test that does not wait for it.
    const HANG_GUARD: Duration = Duration::from_secs(30);

    fn start_with(limits: Limits) -> (tempfile::TempDir, std::path::PathBuf, Server, Arc<Echo>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (socket, _) = ControlSocket::bind(&path, None).unwrap();
        let echo = Arc::new(Echo(AtomicUsize::new(0), Default::default()));
        let server = Server::start_with(socket, echo.clone(), limits).unwrap();
        (dir, path, server, echo)
    }

    fn start() -> (tempfile::TempDir, std::path::PathBuf, Server, Arc<Echo>) {
        start_with(Limits::default())
    }

    fn connect(path: &std::path::Path) -> (BufReader<StdStream>, StdStream) {
        let stream = StdStream::connect(path).unwrap();
        stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
        (BufReader::new(stream.try_clone().unwrap()), stream)
    }

    fn reply(reader: &mut BufReader<StdStream>) -> serde_json::Value {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("{line:?}: {err}"))
    }

    /// Reads to the end: the server closed the connection (a hang-guard timeout panics). A
    /// connection closed with our bytes unread ends in a reset, after what was sent to us.
    fn closed(reader: &mut BufReader<StdStream>) -> String {
        let mut rest = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => rest.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(err) => panic!("{err}"),
            }
        }
        String::from_utf8(rest).unwrap()
    }

    #[test]
    fn bad_requests_get_errors_and_the_connection_stays_usable() {
        let (_dir, path, server, _) = start();
        let (mut reader, mut writer) = connect(&path);
        let huge = vec![b'x'; 200 * 1024];
        writer.write_all(b"garbage\n").unwrap();
        writer.write_all(&huge).unwrap();
        writer
            .write_all(b"\n{\"cmd\":\"fly\"}\n\n {\"cmd\":\"stop\",\"cmd\":\"play\"}\n{\"cmd\":\"status\"}\n")
            .unwrap();
        assert_eq!(reply(&mut reader)["error"]["code"], "invalid_json");
        assert_eq!(reply(&mut reader)["error"]["code"], "too_large");
        assert_eq!(reply(&mut reader)["error"]["code"], "unknown_command");
        // A blank line and a duplicate key are answered, not ignored or resolved.
        assert_eq!(reply(&mut reader)["error"]["code"], "bad_request");
        assert_eq!(reply(&mut reader)["error"]["code"], "bad_request");
        assert_eq!(saw(&reply(&mut reader)), "status");
        // Half a request, then the client stops writing: it still gets its answer.
        writer.write_all(b"{\"cmd\":\"sta").unwrap();
        writer.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reply(&mut reader)["error"]["code"], "incomplete");
        server.stop();
        assert!(!path.exists());
    }

    #[test]
    fn the_handler_learns_who_asked() {
        let (_dir, path, server, echo) = start();
        let (mut reader, mut writer) = connect(&path);
        writer.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        assert_eq!(saw(&reply(&mut reader)), "status");
        let peer = echo.1.lock().unwrap().unwrap();
        // SAFETY: getuid has no preconditions and cannot fail.
        assert_eq!(peer.uid, unsafe { libc::getuid() });
        assert_eq!(peer.pid, Some(std::process::id() as i32));
        server.stop();
    }

    #[test]
    fn a_stuck_client_does_not_delay_others() {
        let (_dir, path, server, echo) = start();
        // Sends requests and never reads the replies, and another that sent half a line.
        let mut stuck = StdStream::connect(&path).unwrap();
        stuck.set_nonblocking(true).unwrap();
        let flood = b"{\"cmd\":\"status\"}\n".repeat(20_000);
        // Fills both socket buffers; the rest is never sent.
        let _ = stuck.write(&flood);
        let mut half = StdStream::connect(&path).unwrap();
        half.write_all(b"{\"cmd\":").unwrap();
        let clients: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let (mut reader, mut writer) = connect(&path);
                    for _ in 0..50 {
                        writer.write_all(b"{\"cmd\":\"list\"}\n").unwrap();
                        assert_eq!(saw(&reply(&mut reader)), "list");
                    }
                })
            })
            .collect();
        for client in clients {
            client.join().unwrap();
        }
        assert!(echo.0.load(Ordering::Relaxed) >= 400);
        server.stop();
    }

    #[test]
    fn idle_and_half_written_connections_are_closed() {
        // The idle limit is far above the request limit: a half-written or trickling client is
        // never taken for an idle one, however late a loaded machine runs the test's threads.
        let limits = Limits {
            idle_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_millis(100),
            ..Limits::default()
        };
        let (_dir, path, server, _) = start_with(limits);
        let (mut idle, _idle_writer) = connect(&path);
        let (mut half, mut half_writer) = connect(&path);
        half_writer.write_all(b"{\"cmd\":\"st").unwrap();
        // A client that keeps a request open by trickling bytes is closed all the same.
        let (mut trickle, mut trickle_writer) = connect(&path);
        trickle_writer.write_all(b"{").unwrap();
        let trickler = std::thread::spawn(move || {
            while trickle_writer.write_all(b" ").is_ok() {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        assert_eq!(closed(&mut idle), "");
        let answer: serde_json::Value = serde_json::from_str(&closed(&mut half)).unwrap();
        assert_eq!(answer["error"]["code"], "timeout");
        assert!(closed(&mut trickle).contains("\"timeout\""));
        trickler.join().unwrap();
        // A client that asks in time is served as before.
        let (mut reader, mut writer) = connect(&path);
        writer.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        assert_eq!(saw(&reply(&mut reader)), "status");
        server.stop();
    }

    #[test]
    fn a_saturated_server_still_answers_stop_and_status() {
        let limits = Limits {
            max_clients: 8,
            max_clients_per_uid: 4,
            reserved: 3,
            // Nothing here waits for a timeout: only making room closes a connection.
            read_timeout: HANG_GUARD,
            reserved_timeout: HANG_GUARD,
            ..Limits::default()
        };
        let (_dir, path, server, _) = start_with(limits);
        // Idle and half-written connections take every slot of this uid and the reserved pool.
        let hogs: Vec<_> = (0..30)
            .map(|i| {
                let (reader, mut writer) = connect(&path);
                if i % 2 == 0 {
                    writer.write_all(b"{\"cmd\":").unwrap();
                }
                (reader, writer)
            })
            .collect();
        let mut hogs = hogs;
        // Each of these connects after the hogs, so it is the newest of the reserved pool.
        for (request, expected) in [
            ("stop", Some("stop")),
            ("quick_stop", Some("quick_stop")),
            ("hold", Some("quick_stop")),
            ("status", Some("status")),
            ("list", None),
            ("play\",\"motion\":\"wave", None),
        ] {
            let (mut reader, mut writer) = connect(&path);
            writeln!(writer, "{{\"cmd\":\"{request}\"}}").unwrap();
            let answer = reply(&mut reader);
            match expected {
                Some(cmd) => assert_eq!(saw(&answer), cmd, "{request}: {answer}"),
                None => {
                    assert_eq!(answer["error"]["code"], "busy", "{request}: {answer}");
                    let message = answer["error"]["message"].as_str().unwrap();
                    assert!(
                        message.contains("uid") && message.contains("stop"),
                        "{message}"
                    );
                }
            }
            assert_eq!(
                closed(&mut reader),
                "",
                "one request per reserved connection"
            );
        }
        // Latecomers push the last hogs out of the reserved pool: every hog beyond the slots was
        // closed with `busy` to make room.
        let _latecomers: Vec<_> = (0..3).map(|_| connect(&path)).collect();
        let mut made_room = 0;
        for (reader, _) in hogs.iter_mut().skip(4) {
            let rest = closed(reader);
            made_room += usize::from(rest.contains("\"busy\""));
        }
        assert_eq!(made_room, 26);
        // The four with slots are still served.
        for (reader, writer) in hogs.iter_mut().take(4) {
            writer
                .write_all(b"\"status\"}\n{\"cmd\":\"list\"}\n")
                .unwrap();
            let first = reply(reader);
            assert!(saw(&first) == "status" || first["error"]["code"] == "invalid_json");
            assert_eq!(saw(&reply(reader)), "list");
        }
        server.stop();
    }

    #[test]
    fn slots_are_capped_per_uid_below_the_total() {
        let slots = Arc::new(Slots {
            limits: Limits {
                max_clients: 5,
                max_clients_per_uid: 2,
                ..Limits::default()
            },
            held: Mutex::default(),
        });
        let a: Vec<_> = (0..2).map(|_| slots.take(1000).unwrap()).collect();
        assert!(slots.take(1000).unwrap_err().contains("uid 1000"));
        let b: Vec<_> = (0..2).map(|_| slots.take(1001).unwrap()).collect();
        let c = slots.take(1002).unwrap();
        assert!(slots.take(1003).unwrap_err().contains("5 clients"));
        drop(a);
        let again = slots.take(1000).unwrap();
        drop((b, c, again));
        assert_eq!(slots.held.lock().unwrap().total, 0);
        assert!(slots.held.lock().unwrap().by_uid.is_empty());
    }

    #[test]
    fn the_reserved_pool_closes_its_oldest_first() {
        let mut reserved = Reserved::default();
        let (first, mut first_evicted) = reserved.enter(2);
        let (_, mut second_evicted) = reserved.enter(2);
        reserved.leave(first);
        assert!(first_evicted.try_recv().is_err(), "left on its own");
        let (_, mut third_evicted) = reserved.enter(2);
        let (_, _fourth) = reserved.enter(2);
        assert_eq!(second_evicted.try_recv(), Ok(()));
        assert!(third_evicted.try_recv().is_err());
    }
}
