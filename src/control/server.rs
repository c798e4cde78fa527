//! Serves the control socket on its own thread: one task per client, so a slow or stuck client
//! only ever waits for itself.
//!
//! Cheap requests are answered on the server thread; requests that build trajectories (`play`,
//! `reload`) run on tokio's blocking pool so they never hold up other clients. Nothing here
//! touches the loop except through the [`Handler`], which talks to the loop without blocking it.

use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{Semaphore, watch};

use super::framing::{Frame, Framer};
use super::protocol::{ErrorCode, Reply, Request, RequestError, parse_request};
use super::socket::ControlSocket;

/// Connections served at once; more are answered `busy` and closed.
pub const MAX_CLIENTS: usize = 256;

/// A client that does not take its reply within this time is disconnected.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers parsed requests. Called from several threads at once.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> Reply;
}

/// The running server. Dropping it (or [`Server::stop`]) stops accepting, closes the connections
/// and removes the socket file.
#[derive(Debug)]
pub struct Server {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts serving `socket` on a new thread.
    pub fn start(socket: ControlSocket, handler: Arc<dyn Handler>) -> io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        socket.listener().set_nonblocking(true)?;
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                let accept = accept_loop(&socket, handler, stopped);
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

async fn accept_loop(
    socket: &ControlSocket,
    handler: Arc<dyn Handler>,
    mut stopped: watch::Receiver<bool>,
) -> io::Result<()> {
    let listener = tokio::net::UnixListener::from_std(socket.listener().try_clone()?)?;
    let slots = Arc::new(Semaphore::new(MAX_CLIENTS));
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
        let handler = handler.clone();
        let mut stopped = stopped.clone();
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stopped.changed() => {}
                        _ = serve_client(stream, handler) => {}
                    }
                    drop(slot);
                });
            }
            Err(_) => {
                tokio::spawn(async move {
                    let busy = RequestError::new(
                        ErrorCode::Busy,
                        format!("{MAX_CLIENTS} clients are connected; try again later"),
                    );
                    let mut stream = stream;
                    let _ = write_reply(&mut stream, &Reply::error(&busy)).await;
                });
            }
        }
    }
}

async fn serve_client(mut stream: UnixStream, handler: Arc<dyn Handler>) {
    let mut framer = Framer::default();
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(n) => n,
            Err(_) => return,
        };
        let Some(bytes) = buf.get(..n) else { return };
        if n == 0 {
            frames.extend(framer.finish());
        } else {
            framer.push(bytes, &mut frames);
        }
        for frame in frames.drain(..) {
            let reply = answer(frame, &handler).await;
            if write_reply(&mut stream, &reply).await.is_err() {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

async fn answer(frame: Frame, handler: &Arc<dyn Handler>) -> Reply {
    let request = match frame {
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
    };
    let request = match request {
        Ok(request) => request,
        Err(err) => return Reply::error(&err),
    };
    if matches!(request, Request::Play { .. } | Request::Reload) {
        let handler = handler.clone();
        match tokio::task::spawn_blocking(move || handler.handle(request)).await {
            Ok(reply) => reply,
            Err(err) => Reply::error(&RequestError::new(
                ErrorCode::Unavailable,
                format!("request failed: {err}"),
            )),
        }
    } else {
        handler.handle(request)
    }
}

async fn write_reply(stream: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    let line = reply.to_line();
    match tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(line.as_bytes())).await {
        Ok(result) => result,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream as StdStream;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Replies with the command it saw and counts the requests.
    struct Echo(AtomicUsize);

    impl Handler for Echo {
        fn handle(&self, request: Request) -> Reply {
            self.0.fetch_add(1, Ordering::Relaxed);
            let cmd = serde_json::to_value(&request).unwrap()["cmd"].clone();
            let mut fields = serde_json::Map::new();
            fields.insert("saw".into(), cmd);
            Reply::ok_with(fields)
        }
    }

    fn start() -> (tempfile::TempDir, std::path::PathBuf, Server, Arc<Echo>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let (socket, _) = ControlSocket::bind(&path, None).unwrap();
        let echo = Arc::new(Echo(AtomicUsize::new(0)));
        let server = Server::start(socket, echo.clone()).unwrap();
        (dir, path, server, echo)
    }

    fn reply(reader: &mut BufReader<StdStream>) -> serde_json::Value {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    #[test]
    fn bad_requests_get_errors_and_the_connection_stays_usable() {
        let (_dir, path, server, _) = start();
        let stream = StdStream::connect(&path).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let huge = vec![b'x'; 200 * 1024];
        writer.write_all(b"garbage\n").unwrap();
        writer.write_all(&huge).unwrap();
        writer
            .write_all(b"\n{\"cmd\":\"fly\"}\n{\"cmd\":\"status\"}\n")
            .unwrap();
        assert_eq!(reply(&mut reader)["error"]["code"], "invalid_json");
        assert_eq!(reply(&mut reader)["error"]["code"], "too_large");
        assert_eq!(reply(&mut reader)["error"]["code"], "unknown_command");
        assert_eq!(reply(&mut reader)["saw"], "status");
        // Half a request, then the client stops writing: it still gets its answer.
        writer.write_all(b"{\"cmd\":\"sta").unwrap();
        writer.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reply(&mut reader)["error"]["code"], "incomplete");
        server.stop();
        assert!(!path.exists());
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
                    let stream = StdStream::connect(&path).unwrap();
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut writer = stream;
                    for _ in 0..50 {
                        writer.write_all(b"{\"cmd\":\"list\"}\n").unwrap();
                        assert_eq!(reply(&mut reader)["saw"], "list");
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
}
