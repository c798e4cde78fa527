//! Test peers: on the far end of a pseudo-terminal a chain of DYNAMIXEL servos, and an SLCAN
//! adapter with MIT-mode motors behind it; on any CAN transport a CiA 402 drive, an ODrive axis,
//! an MIT motor, a Damiao and a Robstride motor (`families.rs`); Feetech servos on a line in
//! memory (`feetech.rs`). They check what they receive
//! byte by byte (CRCs, packet and line syntax), answer like the devices, log every command, and
//! can vanish mid-run. `examples/can_peer.rs`
//! runs the CAN ones on SocketCAN for the system tests (tests/system).

#![allow(dead_code)]

mod families;
mod feetech;
pub mod rig;
#[allow(unused_imports)] // each test binary uses the peers it needs
pub use families::{DamiaoMotor, RobstrideMotor};
#[allow(unused_imports)]
pub use feetech::{FeetechServo, FeetechServos, HostPort, Line, feetech_line, feetech_packets};

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use motiond::backend::frame::CanFrame;
use motiond::backend::transport::FrameIo;
use motiond::backend::transport::slcan::codec as slcan;
use motiond::backend::{cia402, dynamixel as dxl, mit, odrive};
use motiond::robot::{Actuator, Limits};
use motiond::rt::Clock;
use motiond::trajectory::{CommandedDof, DofLimits, JointSet};

/// Commanded DOFs with the given actuators, limits ±2 rad, ±2 rad/s, ±8 rad/s², ±40 N·m.
pub fn joint_set(dofs: &[(&str, Actuator)]) -> JointSet {
    JointSet {
        dofs: dofs
            .iter()
            .enumerate()
            .map(|(i, &(name, actuator))| CommandedDof {
                name: name.to_string(),
                skeleton: 0,
                dof: i,
                actuator,
                limits: DofLimits {
                    position: Limits::symmetric(2.0),
                    velocity: Limits::symmetric(2.0),
                    acceleration: Limits::symmetric(8.0),
                    effort: Limits::symmetric(40.0),
                },
                initial_position: 0.0,
                mimic: None,
                quick_stop_deceleration: None,
            })
            .collect(),
    }
}

/// Servo DOFs with these names.
pub fn servos(names: &[&str]) -> JointSet {
    let dofs: Vec<(&str, Actuator)> = names.iter().map(|&n| (n, Actuator::Servo)).collect();
    joint_set(&dofs)
}

/// A pseudo-terminal pair: the master end for the peer, the slave's path for the device under
/// test. The slave fd stays open so the master never sees a hang-up before the device opens.
pub struct Pty {
    pub master: File,
    pub slave_path: PathBuf,
    _slave: OwnedFd,
}

pub fn openpty() -> Pty {
    let (mut master, mut slave) = (0, 0);
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: openpty writes two fds and a NUL-terminated name into the buffers given.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            name.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: name is NUL-terminated by openpty.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    // Raw mode on the master's line discipline too, so nothing is translated on the peer side.
    // Close-on-exec, so a device under test in a child process never holds the master open.
    // SAFETY: both fds were just returned by openpty and are owned here.
    unsafe {
        libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(slave, libc::F_SETFD, libc::FD_CLOEXEC);
        let mut t: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave, &mut t);
        libc::cfmakeraw(&mut t);
        libc::tcsetattr(slave, libc::TCSANOW, &t);
        Pty {
            master: File::from_raw_fd(master),
            slave_path: PathBuf::from(path),
            _slave: OwnedFd::from_raw_fd(slave),
        }
    }
}

/// Waits up to 50 ms for the master to become readable.
fn readable(f: &impl AsRawFd) -> bool {
    let mut p = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, 50) > 0 }
}

/// When a peer stops answering and closes its end.
#[derive(Clone, Copy, Debug)]
pub enum Vanish {
    Never,
    /// After this many goal commands (Sync Writes of Goal Position, or MIT commands).
    AfterCommands(usize),
    /// After this many goal commands counted from the first that moves a servo or motor away from
    /// where its first command held it: mid-motion however long the loop idled before the motion.
    AfterMoving(usize),
}

/// Counts a peer's goal commands towards its vanishing.
#[derive(Debug)]
struct VanishCount {
    vanish: Vanish,
    /// Commands counted (all of them, or since the first that moved).
    counted: usize,
    /// The first command's position per id (counts or radians).
    first: BTreeMap<u8, f64>,
    moving: bool,
}

impl VanishCount {
    fn new(vanish: Vanish) -> Self {
        Self {
            vanish,
            counted: 0,
            first: BTreeMap::new(),
            moving: false,
        }
    }

    /// One command with these (id, position) pairs; `within` is what counts as the same place.
    /// Whether the peer vanishes now.
    fn command(&mut self, positions: impl IntoIterator<Item = (u8, f64)>, within: f64) -> bool {
        for (id, p) in positions {
            let first = *self.first.entry(id).or_insert(p);
            self.moving |= (p - first).abs() > within;
        }
        match self.vanish {
            Vanish::Never => false,
            Vanish::AfterCommands(n) => {
                self.counted += 1;
                self.counted >= n
            }
            Vanish::AfterMoving(n) => {
                self.counted += usize::from(self.moving);
                self.counted >= n
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct Log {
    /// Goal Position per Sync Write: (id, counts) in packet order.
    pub goals: Vec<Vec<(u8, i32)>>,
    /// Torque Enable writes: (id, value).
    pub torque: Vec<(u8, u8)>,
    /// MIT commands (motor id, decoded command) and special frames (id, last byte).
    pub mit: Vec<(u8, mit::Command)>,
    pub mit_special: Vec<(u8, u8)>,
    /// Operating Mode (EEPROM) writes: (id, mode).
    pub mode_writes: Vec<(u8, u8)>,
    /// Bus Watchdog writes: (id, units of 20 ms).
    pub watchdog: Vec<(u8, u8)>,
    /// Positions a hand moves servos to (id, counts), taken at the next Sync Read.
    pub hand: Vec<(u8, i32)>,
    /// Every Sync Read and Sync Write in order: (instruction, address).
    pub order: Vec<(u8, u16)>,
    pub crc_errors: usize,
    pub bad_lines: usize,
    /// The peer closed its end as scripted.
    pub vanished: bool,
}

pub struct Peer {
    pub log: Arc<Mutex<Log>>,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// What a peer has done on its end, published after it handled what it read (answers written).
#[derive(Debug, Default)]
struct Progress {
    /// Bytes it read and handled.
    rx: AtomicU64,
    /// Bytes it wrote.
    tx: AtomicU64,
    /// It closed its end.
    gone: AtomicBool,
}

/// The master end, counting the bytes through it.
struct Counted {
    file: File,
    rx: u64,
    tx: u64,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.rx += n as u64;
        Ok(n)
    }
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.tx += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl AsRawFd for Counted {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

impl Peer {
    /// Paces the thread that calls it against this peer on the line whose device end is at
    /// `slave_path` (see [`Pace`]).
    pub fn pace(&self, slave_path: &std::path::Path) -> Pace {
        Pace::new(
            self.progress.clone(),
            slave_path,
            Driver::ThisThread { proc_read: 0 },
        )
    }

    /// Holds process `pid` back while its thread `thread` is ahead of this peer on the line at
    /// `slave_path` (see [`Governor`]); until the governor is dropped.
    pub fn govern(&self, slave_path: &std::path::Path, pid: u32, thread: &'static str) -> Governor {
        let driver = Driver::Thread {
            pid,
            name: thread,
            io: None,
        };
        let mut pace = Pace::new(self.progress.clone(), slave_path, driver);
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let pid = libc::pid_t::try_from(pid).unwrap();
        let handle = std::thread::spawn(move || {
            answer_promptly();
            let mut held = false;
            let mut since = Instant::now();
            while !s.load(Ordering::SeqCst) {
                // A peer that never catches up (it failed) must not hang the test: the daemon
                // goes on, and the test sees what follows.
                if held && since.elapsed() > Pace::HANG {
                    // SAFETY: signals a child of this test; failure (it exited) changes nothing.
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                    return;
                }
                // Only what the daemon wrote: while it is held it reads nothing, and the
                // answers that pile up on its end are no risk to its writes. Counts that cannot
                // be read (the thread not started yet, or ended) change nothing.
                let signal = match (held, pace.behind()) {
                    (false, Some((b, _))) if b > Governor::BUDGET => Some(libc::SIGSTOP),
                    (true, Some((b, _))) if b <= Governor::RESUME => Some(libc::SIGCONT),
                    _ => None,
                };
                if let Some(signal) = signal {
                    // SAFETY: signals a child of this test; failure (it exited) changes nothing.
                    unsafe { libc::kill(pid, signal) };
                    held = signal == libc::SIGSTOP;
                    since = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if held {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            }
        });
        Governor {
            stop,
            handle: Some(handle),
        }
    }

    /// A clock for the real-time loop that stands still until this peer has taken each tick's
    /// bytes and its answers wait on the line at `slave_path` (see [`PacedClock`]).
    pub fn clock(&self, slave_path: &std::path::Path) -> PacedClock {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        PacedClock {
            pace: self.pace(slave_path),
            now: 0,
            epoch_ns: epoch.as_nanos() as i128,
        }
    }

    pub fn stop(mut self) -> Log {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

/// A real drive answers in its own time, not when a loaded test machine gets round to a test
/// thread: the peer thread runs SCHED_FIFO (below motiond's loop) where that is permitted, so a
/// busy machine cannot make it fall behind and fill the pseudo-terminal. Elsewhere it runs as it
/// is. It blocks in poll, so it never starves anything.
fn answer_promptly() {
    let param = libc::sched_param { sched_priority: 50 };
    // SAFETY: the calling thread, a valid parameter; failure (not permitted) changes nothing.
    unsafe {
        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param);
    }
}

fn spawn(
    mut run: impl FnMut(&mut Counted, &Mutex<Log>) -> bool + Send + 'static,
    master: File,
) -> Peer {
    let log = Arc::new(Mutex::new(Log::default()));
    let progress = Arc::new(Progress::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (l, p, s) = (log.clone(), progress.clone(), stop.clone());
    let handle = std::thread::spawn(move || {
        answer_promptly();
        let mut master = Counted {
            file: master,
            rx: 0,
            tx: 0,
        };
        while !s.load(Ordering::SeqCst) {
            let more = run(&mut master, &l);
            p.rx.store(master.rx, Ordering::SeqCst);
            p.tx.store(master.tx, Ordering::SeqCst);
            if !more {
                l.lock().unwrap().vanished = true;
                drop(master); // the device's end sees a hang-up
                p.gone.store(true, Ordering::SeqCst);
                return;
            }
        }
    });
    Peer {
        log,
        progress,
        stop,
        handle: Some(handle),
    }
}

/// Bytes a thread read and wrote through system calls so far, as the kernel counts them (its
/// /proc `io` file), and the length of the text read; `None` once the thread is gone.
fn thread_io(file: &std::path::Path) -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string(file).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("rchar:")?, field("wchar:")?, text.len() as u64))
}

/// Bytes waiting to be read on a terminal; none once it hung up (its peer is gone).
fn waiting(fd: &OwnedFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) };
    let e = std::io::Error::last_os_error();
    assert!(
        rc == 0 || e.raw_os_error() == Some(libc::EIO),
        "FIONREAD: {e}"
    );
    if rc == 0 { n as u64 } else { 0 }
}

/// Whose reads and writes a [`Pace`] counts.
enum Driver {
    /// The thread calling it: its reads of its own /proc file are taken out.
    ThisThread { proc_read: u64 },
    /// Another process's thread, by its /proc `io` file (found once it exists).
    Thread {
        pid: u32,
        name: &'static str,
        io: Option<PathBuf>,
    },
}

/// Keeps the thread that drives a device on a pseudo-terminal in step with the peer on its far
/// end, whatever the machine's load. [`Pace::behind`] is how many bytes the line holds that one
/// side has not handled yet: written by the thread and not yet handled by the peer, or answered by
/// the peer and neither waiting on the device's end nor read by the thread. Kept at zero each
/// tick ([`Pace::settle`], [`PacedClock`]) or under a budget ([`govern`]), the line never fills,
/// whenever the peer thread or the kernel worker that moves a pseudo-terminal's bytes across gets
/// a core, and the answers are there at the next read. The thread's bytes are the kernel's own
/// counts (/proc/…/io): it does no other I/O than the device's while paced.
pub struct Pace {
    progress: Arc<Progress>,
    /// The device's end of the line (another descriptor of it).
    slave: OwnedFd,
    driver: Driver,
    /// When the peer had last caught up; `None` before the first look.
    last: Option<Counts>,
}

#[derive(Clone, Copy, Debug)]
struct Counts {
    /// The thread's bytes read and written.
    read: u64,
    written: u64,
    /// The peer's.
    rx: u64,
    tx: u64,
    /// Waiting on the device's end.
    waiting: u64,
}

impl Pace {
    /// Only a hang: the peer took nothing for this long.
    const HANG: Duration = Duration::from_secs(60);
    /// Bytes counted that are no device's: the real-time loop writes 4 to /dev/cpu_dma_latency as
    /// it starts, which may fall after the first look.
    const SLACK: u64 = 16;

    fn new(progress: Arc<Progress>, slave_path: &std::path::Path, driver: Driver) -> Self {
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(slave_path)
            .unwrap();
        Self {
            progress,
            slave: slave.into(),
            driver,
            last: None,
        }
    }

    /// The driving thread's counts; `None` while it does not exist or after it ended.
    fn counts(&mut self) -> Option<Counts> {
        let (read, written) = match &mut self.driver {
            Driver::ThisThread { proc_read } => {
                let (rchar, wchar, text) = thread_io(std::path::Path::new("/proc/thread-self/io"))?;
                let read = rchar - *proc_read;
                *proc_read += text;
                (read, wchar)
            }
            Driver::Thread { pid, name, io } => {
                if io.is_none() {
                    *io = find_thread(*pid, name);
                }
                let (rchar, wchar, _) = thread_io(io.as_deref()?)?;
                (rchar, wchar)
            }
        };
        Some(Counts {
            read,
            written,
            rx: self.progress.rx.load(Ordering::SeqCst),
            tx: self.progress.tx.load(Ordering::SeqCst),
            waiting: waiting(&self.slave),
        })
    }

    /// Bytes on the line one side has not handled yet (see [`Pace`]), as (written by the thread
    /// and not handled by the peer, answered by the peer and neither waiting nor read); none once
    /// the peer is gone; `None` while the thread's counts cannot be read.
    pub fn behind(&mut self) -> Option<(u64, u64)> {
        let gone = self.progress.gone.load(Ordering::SeqCst);
        if gone {
            return Some((0, 0));
        }
        let now = self.counts()?;
        let Some(last) = self.last else {
            self.last = Some(now);
            return Some((0, 0));
        };
        let unhandled = (now.written - last.written).saturating_sub(now.rx - last.rx);
        let undelivered = (last.waiting + (now.tx - last.tx))
            .saturating_sub(now.waiting + (now.read - last.read));
        if unhandled + undelivered == 0 {
            self.last = Some(now);
        }
        Some((unhandled, undelivered))
    }

    /// Waits until the peer has caught up with this thread (see [`Pace`]); at once when it is gone.
    pub fn settle(&mut self) {
        let give_up = Instant::now() + Self::HANG;
        while {
            let (unhandled, undelivered) = self.behind().expect("this thread's /proc io");
            unhandled + undelivered > Self::SLACK
        } {
            assert!(
                Instant::now() < give_up,
                "the peer did not keep up for {:?}: {:?}",
                Self::HANG,
                self.last
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// The /proc `io` file of process `pid`'s thread called `name`.
fn find_thread(pid: u32, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .map(|task| task.path())
        .find(|task| {
            std::fs::read_to_string(task.join("comm")).is_ok_and(|comm| comm.trim_end() == name)
        })
        .map(|task| task.join("io"))
}

/// Holds process `pid` back (SIGSTOP, as a loaded machine would leave it without a core) while
/// its thread `name` has written more than [`Governor::BUDGET`] bytes this peer has not handled,
/// and lets it go on (SIGCONT) once the peer nearly caught up: for a daemon in a child
/// process, whose clock a test cannot step. Not a proof like [`PacedClock`]: the governor thread
/// runs SCHED_FIFO like the peer (where permitted) and polls every millisecond, and needs a core
/// within the ~140 ms the budget leaves before a pseudo-terminal's 20 KiB fill at 1 kHz.
pub struct Governor {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Governor {
    /// Held back beyond this many unhandled bytes (half of what a pseudo-terminal takes, so it
    /// acts only where the line would otherwise fill), let go at [`Governor::RESUME`] or fewer.
    /// A hold is not free: a request the daemon is handling meanwhile may time out.
    pub const BUDGET: u64 = 10 * 1024;
    pub const RESUME: u64 = 2 * 1024;
}

impl Drop for Governor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The real-time loop's clock in a test against a peer on a pseudo-terminal: time moves from
/// deadline to deadline as on a manual clock, each tick once the peer has caught up
/// ([`Pace::settle`]). The loop never runs late and never overruns, so it sends every sample of
/// a motion, and nothing about the run depends on the machine's load.
pub struct PacedClock {
    pace: Pace,
    now: u64,
    epoch_ns: i128,
}

impl Clock for PacedClock {
    fn now_ns(&self) -> u64 {
        self.now
    }

    fn sleep_until(&mut self, deadline_ns: u64) {
        self.pace.settle();
        // A tick's worth of rest for the other threads of a 2-core machine: the time the loop
        // sees does not move with it.
        std::thread::sleep(Duration::from_micros(50));
        self.now = self.now.max(deadline_ns);
    }

    fn realtime_ns(&self) -> i128 {
        self.epoch_ns + i128::from(self.now)
    }
}

/// DYNAMIXEL servos with these ids and present positions; they follow Goal Position at once.
pub fn dynamixel(master: File, positions: BTreeMap<u8, i32>, vanish: Vanish) -> Peer {
    dynamixel_with_eeprom(master, positions, BTreeMap::new(), vanish)
}

/// The same, servos with an EEPROM area (addresses 0..64) of their own answering Sync Reads
/// within it (the calibration registers; Operating Mode is the servo's as written).
pub fn dynamixel_with_eeprom(
    master: File,
    positions: BTreeMap<u8, i32>,
    eeprom: BTreeMap<u8, [u8; 64]>,
    vanish: Vanish,
) -> Peer {
    let mut modes: BTreeMap<u8, u8> = positions
        .keys()
        .map(|&id| (id, dxl::OPERATING_MODE_POSITION))
        .collect();
    let mut present = positions;
    let mut count = VanishCount::new(vanish);
    let mut buf: Vec<u8> = Vec::new();
    let mut params = [0u8; 512];
    let mut out = [0u8; 64];
    spawn(
        move |m, log| {
            if !readable(m) {
                return true;
            }
            let mut chunk = [0u8; 1024];
            match m.read(&mut chunk) {
                Ok(0) | Err(_) => return true,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            loop {
                match dxl::parse(&buf, &mut params) {
                    dxl::Parse::Incomplete { consumed } => {
                        buf.drain(..consumed);
                        return true;
                    }
                    dxl::Parse::Skip {
                        consumed,
                        crc_error,
                    } => {
                        log.lock().unwrap().crc_errors += usize::from(crc_error);
                        buf.drain(..consumed);
                    }
                    dxl::Parse::Packet { consumed, packet } => {
                        buf.drain(..consumed);
                        let p = &params[..packet.params];
                        match packet.instruction {
                            dxl::INST_SYNC_WRITE => {
                                let addr = u16::from_le_bytes([p[0], p[1]]);
                                let len = usize::from(u16::from_le_bytes([p[2], p[3]]));
                                let items: Vec<(u8, &[u8])> =
                                    p[4..].chunks(len + 1).map(|c| (c[0], &c[1..])).collect();
                                let mut l = log.lock().unwrap();
                                l.order.push((dxl::INST_SYNC_WRITE, addr));
                                match addr {
                                    dxl::ADDR_GOAL_POSITION => {
                                        let goals: Vec<(u8, i32)> = items
                                            .iter()
                                            .map(|(id, d)| {
                                                (*id, i32::from_le_bytes([d[0], d[1], d[2], d[3]]))
                                            })
                                            .collect();
                                        for (id, g) in &goals {
                                            present.insert(*id, *g);
                                        }
                                        let moves = goals.iter().map(|&(id, g)| (id, f64::from(g)));
                                        let gone = count.command(moves, 0.0);
                                        l.goals.push(goals);
                                        if gone {
                                            return false;
                                        }
                                    }
                                    dxl::ADDR_TORQUE_ENABLE => {
                                        l.torque.extend(items.iter().map(|(id, d)| (*id, d[0])))
                                    }
                                    dxl::ADDR_OPERATING_MODE => {
                                        for (id, d) in &items {
                                            modes.insert(*id, d[0]);
                                            l.mode_writes.push((*id, d[0]));
                                        }
                                    }
                                    dxl::ADDR_BUS_WATCHDOG => {
                                        l.watchdog.extend(items.iter().map(|(id, d)| (*id, d[0])))
                                    }
                                    _ => {}
                                }
                            }
                            dxl::INST_SYNC_READ => {
                                let addr = u16::from_le_bytes([p[0], p[1]]);
                                let len = usize::from(u16::from_le_bytes([p[2], p[3]]));
                                let in_eeprom = usize::from(addr) + len <= 64
                                    && addr != dxl::ADDR_OPERATING_MODE
                                    && !eeprom.is_empty();
                                assert!(
                                    in_eeprom
                                        || addr == dxl::ADDR_PRESENT_POSITION
                                        || addr == dxl::ADDR_OPERATING_MODE
                                );
                                {
                                    let mut l = log.lock().unwrap();
                                    l.order.push((dxl::INST_SYNC_READ, addr));
                                    present.extend(l.hand.drain(..));
                                }
                                for &id in &p[4..] {
                                    let Some(pos) = present.get(&id) else {
                                        continue;
                                    };
                                    let mut s = dxl::Packet::begin(&mut out, id, dxl::INST_STATUS);
                                    s.push(0);
                                    if in_eeprom {
                                        let table = eeprom.get(&id).copied().unwrap_or([0; 64]);
                                        let at = usize::from(addr);
                                        for &b in &table[at..at + len] {
                                            s.push(b);
                                        }
                                    } else if addr == dxl::ADDR_OPERATING_MODE {
                                        s.push(modes.get(&id).copied().unwrap_or(3));
                                    } else {
                                        s.push_u32(*pos as u32);
                                    }
                                    let status = s.finish().unwrap();
                                    if m.write_all(status).is_err() {
                                        return true;
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        },
        master,
    )
}

/// An SLCAN adapter with MIT motors behind it (Mini Cheetah ranges): every command frame is
/// answered with the motor's reply carrying the commanded position.
pub fn slcan_mit(master: File, positions: BTreeMap<u8, f32>, vanish: Vanish) -> Peer {
    let mut present = positions;
    let mut count = VanishCount::new(vanish);
    let mut reader = slcan::LineReader::default();
    let r = mit::Ranges::MINI_CHEETAH;
    spawn(
        move |m, log| {
            if !readable(m) {
                return true;
            }
            let mut chunk = [0u8; 1024];
            let n = match m.read(&mut chunk) {
                Ok(0) | Err(_) => return true,
                Ok(n) => n,
            };
            for &b in &chunk[..n] {
                let Some(event) = reader.push(b) else {
                    continue;
                };
                let f = match event {
                    slcan::Event::Frame(f) => f,
                    slcan::Event::Other => {
                        // Commands to the adapter itself (S8, O, C) are not frames.
                        continue;
                    }
                    _ => continue,
                };
                let Ok(id) = u8::try_from(f.id) else {
                    log.lock().unwrap().bad_lines += 1;
                    continue;
                };
                let d = f.data();
                let mut l = log.lock().unwrap();
                if d.len() != 8 {
                    l.bad_lines += 1;
                    continue;
                }
                if let Some(special) = mit_special(d) {
                    l.mit_special.push((id, special));
                } else {
                    let c = mit_command(d, &r);
                    present.insert(id, c.p);
                    l.mit.push((id, c));
                    // One step of the 16-bit position over ±12.5 rad is the same place.
                    if count.command([(id, f64::from(c.p))], 25.0 / 65535.0) {
                        return false;
                    }
                }
                drop(l);
                let reply = mit_reply(id, present.get(&id).copied().unwrap_or(0.0), &r);
                let mut line = [0u8; slcan::MAX_LINE];
                let k = slcan::encode(&reply, &mut line);
                if m.write_all(&line[..k]).is_err() {
                    return true;
                }
            }
            true
        },
        master,
    )
}

/// A CiA 402 drive in CSP: answers SDOs, follows NMT, applies the RPDO at SYNC, sends TPDO1.
pub struct Cia402Drive {
    pub node: u8,
    pub operational: bool,
    pub statusword: u16,
    pub position: i32,
    pub cw: u16,
    pub target: i32,
    pub prev_cw: u16,
    /// (controlword, target) of every RPDO received, in order.
    pub rpdos: Vec<(u16, i32)>,
    pub sdos: usize,
    pub silent: bool,
    pub syncs: u64,
    /// Counts the actual position trails the target by (a following error).
    pub lag: i32,
    /// The target applied at each SYNC while operation is enabled, in order.
    pub applied: Vec<i32>,
}

impl Cia402Drive {
    pub fn new(node: u8, position: i32) -> Self {
        Self {
            node,
            operational: false,
            statusword: 0x0250,
            position,
            cw: 0,
            target: 0,
            prev_cw: 0,
            rpdos: Vec::new(),
            sdos: 0,
            silent: false,
            syncs: 0,
            lag: 0,
            applied: Vec::new(),
        }
    }

    pub fn step(&mut self, io: &mut impl FrameIo) {
        while let Some(f) = io.recv().unwrap() {
            self.on_frame(&f, io);
        }
    }

    /// Handles one received frame; frames for other nodes are ignored.
    pub fn on_frame(&mut self, f: &CanFrame, io: &mut impl FrameIo) {
        let d = f.data();
        match f.id {
            0x000 if d == [cia402::NMT_START, self.node] => self.operational = true,
            0x000 if d == [cia402::NMT_PRE_OPERATIONAL, self.node] => self.operational = false,
            id if id == 0x600 + u32::from(self.node) => {
                self.sdos += 1;
                // Uploads (0x40) read back the mode display 0x6061 = 8; downloads are acked.
                let reply = if d[0] == 0x40 {
                    [0x4F, d[1], d[2], d[3], cia402::MODE_CSP, 0, 0, 0]
                } else {
                    [0x60, d[1], d[2], d[3], 0, 0, 0, 0]
                };
                io.send(&CanFrame::new(0x580 + u32::from(self.node), &reply))
                    .unwrap();
            }
            id if id == 0x200 + u32::from(self.node) => {
                self.cw = u16::from_le_bytes([d[0], d[1]]);
                self.target = i32::from_le_bytes([d[2], d[3], d[4], d[5]]);
                self.rpdos.push((self.cw, self.target));
            }
            0x080 if self.operational => self.on_sync(io),
            _ => {}
        }
    }

    fn on_sync(&mut self, io: &mut impl FrameIo) {
        use cia402::State as S;
        let rising_reset = self.cw & 0x80 != 0 && self.prev_cw & 0x80 == 0;
        self.prev_cw = self.cw;
        self.statusword = match (cia402::state(self.statusword), self.cw) {
            (S::Fault, _) if rising_reset => 0x0250,
            (S::Fault, _) => self.statusword,
            (S::SwitchOnDisabled, 0x06) => 0x0231,
            (S::ReadyToSwitchOn, 0x07) => 0x0233,
            (S::SwitchedOn, 0x0F) => 0x1237,
            // Disable operation: switched on, the power stage without torque.
            (S::OperationEnabled, 0x07) => 0x0233,
            (S::OperationEnabled, 0x0F) => {
                self.position = self.target - self.lag;
                self.applied.push(self.target);
                0x1237
            }
            (_, 0x06) => 0x0231,
            (_, 0x00) => 0x0250,
            (_, _) => self.statusword,
        };
        self.syncs += 1;
        // A heartbeat every tenth SYNC (every 10 ms at 1 kHz; motiond asks for 20 ms).
        if !self.silent && self.syncs.is_multiple_of(10) {
            io.send(&CanFrame::new(0x700 + u32::from(self.node), &[0x05]))
                .unwrap();
        }
        if !self.silent {
            let sw = self.statusword.to_le_bytes();
            let p = self.position.to_le_bytes();
            io.send(&CanFrame::new(
                0x180 + u32::from(self.node),
                &[sw[0], sw[1], p[0], p[1], p[2], p[3]],
            ))
            .unwrap();
        }
    }
}

/// The last byte of an MIT special frame (enter 0xFC, exit 0xFD, zero 0xFE), `None` for a command.
pub fn mit_special(d: &[u8]) -> Option<u8> {
    (d.len() == 8 && d[..7] == [0xFF; 7] && (0xFC..=0xFE).contains(&d[7])).then_some(d[7])
}

/// Unpacks an 8-byte MIT command frame (p 16 bits, v 12, kp 12, kd 12, t 12).
pub fn mit_command(d: &[u8], r: &mit::Ranges) -> mit::Command {
    let p = u16::from(d[0]) << 8 | u16::from(d[1]);
    let v = u16::from(d[2]) << 4 | u16::from(d[3] >> 4);
    let kp = u16::from(d[3] & 0xF) << 8 | u16::from(d[4]);
    let kd = u16::from(d[5]) << 4 | u16::from(d[6] >> 4);
    let t = u16::from(d[6] & 0xF) << 8 | u16::from(d[7]);
    mit::Command {
        p: mit::uint_to_float(p, r.p_min, r.p_max, 16),
        v: mit::uint_to_float(v, r.v_min, r.v_max, 12),
        kp: mit::uint_to_float(kp, 0.0, r.kp_max, 12),
        kd: mit::uint_to_float(kd, 0.0, r.kd_max, 12),
        t: mit::uint_to_float(t, r.t_min, r.t_max, 12),
    }
}

/// A motor's reply, sent from id 0 with the motor's id first: position `p`, velocity and torque 0.
pub fn mit_reply(id: u8, p: f32, r: &mit::Ranges) -> CanFrame {
    let packed = mit::pack(
        &mit::Command {
            p,
            ..Default::default()
        },
        r,
    );
    CanFrame::new(
        0,
        &[id, packed[0], packed[1], packed[2], packed[3] & 0xF0, 0x00],
    )
}

/// An MIT-mode motor on a CAN transport: follows position commands in motor mode at once and
/// answers every frame addressed to it with its position.
pub struct MitMotor {
    pub id: u8,
    pub ranges: mit::Ranges,
    pub position: f32,
    pub motor_mode: bool,
    /// Position of every command received, in order.
    pub commands: Vec<f32>,
    /// Special frames received (last byte), in order.
    pub specials: Vec<u8>,
}

impl MitMotor {
    pub fn new(id: u8, ranges: mit::Ranges, position: f32) -> Self {
        Self {
            id,
            ranges,
            position,
            motor_mode: false,
            commands: Vec::new(),
            specials: Vec::new(),
        }
    }

    /// Handles one received frame; frames for other ids are ignored.
    pub fn on_frame(&mut self, f: &CanFrame, io: &mut impl FrameIo) {
        let d = f.data();
        if f.extended || f.id != u32::from(self.id) || d.len() != 8 {
            return;
        }
        match mit_special(d) {
            Some(b) => {
                self.specials.push(b);
                self.motor_mode = match b {
                    0xFC => true,
                    0xFD => false,
                    _ => self.motor_mode,
                };
            }
            None => {
                let c = mit_command(d, &self.ranges);
                self.commands.push(c.p);
                if self.motor_mode {
                    self.position = c.p;
                }
            }
        }
        let _ = io.send(&mit_reply(self.id, self.position, &self.ranges));
    }
}

/// An ODrive axis speaking CAN Simple: clears errors, takes its controller mode and follows
/// Set_Input_Pos in closed loop at once; its heartbeat and encoder estimates go out when the
/// caller says (the firmware sends them on its own timers).
pub struct OdriveAxis {
    pub node: u8,
    pub state: u32,
    pub error: u32,
    pub position: f32,
    pub velocity: f32,
    pub control_mode: Option<(i32, i32)>,
    /// Set_Input_Pos positions received, in order.
    pub commands: Vec<f32>,
    /// Set_Axis_State requests received, in order.
    pub requests: Vec<u32>,
}

impl OdriveAxis {
    pub fn new(node: u8, position: f32) -> Self {
        Self {
            node,
            state: odrive::AXIS_STATE_IDLE,
            error: 0,
            position,
            velocity: 0.0,
            control_mode: None,
            commands: Vec::new(),
            requests: Vec::new(),
        }
    }

    /// Handles one received frame; frames for other nodes are ignored.
    pub fn on_frame(&mut self, f: &CanFrame) {
        let (node, cmd) = odrive::split_id(f.id);
        if f.extended || node != self.node {
            return;
        }
        let d = f.data();
        let word = |i: usize| {
            d.get(i..i + 4)
                .map(|b| [b[0], b[1], b[2], b[3]])
                .unwrap_or_default()
        };
        match cmd {
            odrive::CLEAR_ERRORS => self.error = 0,
            odrive::SET_CONTROLLER_MODE => {
                self.control_mode =
                    Some((i32::from_le_bytes(word(0)), i32::from_le_bytes(word(4))));
            }
            odrive::SET_AXIS_STATE => {
                let state = u32::from_le_bytes(word(0));
                self.requests.push(state);
                self.state = state;
            }
            odrive::SET_INPUT_POS => {
                let p = f32::from_le_bytes(word(0));
                self.commands.push(p);
                if self.state == odrive::AXIS_STATE_CLOSED_LOOP_CONTROL {
                    self.position = p;
                }
            }
            odrive::SET_INPUT_VEL => {
                self.velocity = f32::from_le_bytes(word(0));
            }
            _ => {}
        }
    }

    /// The cyclic messages: heartbeat (error, state) and encoder estimates.
    pub fn send_cyclic(&self, io: &mut impl FrameIo) {
        let e = self.error.to_le_bytes();
        let _ = io.send(&CanFrame::new(
            odrive::can_id(self.node, odrive::HEARTBEAT),
            &[e[0], e[1], e[2], e[3], self.state as u8, 0, 0, 0],
        ));
        let p = self.position.to_le_bytes();
        let v = self.velocity.to_le_bytes();
        let _ = io.send(&CanFrame::new(
            odrive::can_id(self.node, odrive::GET_ENCODER_ESTIMATES),
            &[p[0], p[1], p[2], p[3], v[0], v[1], v[2], v[3]],
        ));
    }
}

/// The registers a moteus command wrote, decoded with mjbots' `moteus-protocol` parser: mode
/// (0x000) and position-mode registers 0x020–0x027 as floats.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MoteusWrite {
    pub mode: Option<u8>,
    pub position: Option<f32>,
    pub velocity: Option<f32>,
    pub torque: Option<f32>,
    pub kp_scale: Option<f32>,
    pub kd_scale: Option<f32>,
    pub max_torque: Option<f32>,
    pub watchdog: Option<f32>,
    /// The frame asked for registers (a query).
    pub query: bool,
}

/// Decodes the subframes of a moteus command.
pub fn moteus_writes(data: &[u8]) -> MoteusWrite {
    use moteus_protocol::{Subframe, SubframeType, Value};
    let mut w = MoteusWrite::default();
    for s in moteus_protocol::parse_frame(data) {
        let Subframe::Register {
            subframe_type,
            register,
            value,
            ..
        } = s
        else {
            continue;
        };
        if subframe_type == SubframeType::Read {
            w.query = true;
            continue;
        }
        let v = match value {
            Some(Value::Float(f)) => f,
            Some(other) => other.to_i32() as f32,
            None => continue,
        };
        match register {
            0x000 => w.mode = Some(v as u8),
            0x020 => w.position = Some(v),
            0x021 => w.velocity = Some(v),
            0x022 => w.torque = Some(v),
            0x023 => w.kp_scale = Some(v),
            0x024 => w.kd_scale = Some(v),
            0x025 => w.max_torque = Some(v),
            0x027 => w.watchdog = Some(v),
            _ => {}
        }
    }
    w
}

/// A moteus reply (host 0 ← servo `id`): mode, position, velocity, torque (floats), fault, as
/// the firmware answers motiond's query, encoded with `moteus-protocol`'s writer.
pub fn moteus_reply(id: u8, mode: u8, position: f32, velocity: f32, fault: u8) -> CanFrame {
    use moteus_protocol::{CanFdFrame, Resolution, WriteCanData, WriteCombiner};
    let mut f = CanFdFrame::new();
    let mut w = WriteCanData::new(&mut f);
    let floats = [
        Resolution::Int8,
        Resolution::Float,
        Resolution::Float,
        Resolution::Float,
    ];
    let mut c = WriteCombiner::new(0x20, 0x000, &floats);
    if c.maybe_write(&mut w) {
        w.write_i8(mode as i8);
    }
    for v in [position, velocity, 0.0] {
        if c.maybe_write(&mut w) {
            w.write_f32(v);
        }
    }
    let mut c = WriteCombiner::new(0x20, 0x00F, &[Resolution::Int8]);
    if c.maybe_write(&mut w) {
        w.write_i8(fault as i8);
    }
    f.pad_to_dlc();
    CanFrame::new_fd(u32::from(id) << 8, true, f.payload())
}

/// A moteus controller on a CAN-FD transport: stop clears its fault, position mode follows the
/// commanded position at once (velocity control from where it is when the position is NaN), and
/// every command asking for a reply is answered.
pub struct MoteusServo {
    pub id: u8,
    pub mode: u8,
    pub position: f32,
    pub fault: u8,
    /// Position-mode commands received, in order.
    pub commands: Vec<MoteusWrite>,
    pub stops: usize,
    pub queries: usize,
    /// A fault code to enter mode fault with at the next position command.
    pub inject: Option<u8>,
}

impl MoteusServo {
    pub fn new(id: u8, position: f32) -> Self {
        Self {
            id,
            mode: 0,
            position,
            fault: 0,
            commands: Vec::new(),
            stops: 0,
            queries: 0,
            inject: None,
        }
    }

    /// Handles one received frame; frames for other servos are ignored.
    pub fn on_frame(&mut self, f: &CanFrame, io: &mut impl FrameIo) {
        if !f.extended || f.id != 0x8000 | u32::from(self.id) {
            return;
        }
        let w = moteus_writes(f.data());
        match w.mode {
            Some(0) => {
                self.stops += 1;
                (self.mode, self.fault) = (0, 0);
            }
            Some(10) => {
                self.commands.push(w);
                if let Some(code) = self.inject.take() {
                    (self.mode, self.fault) = (1, code);
                } else if self.mode != 1 {
                    self.mode = 10;
                    match w.position {
                        Some(p) if !p.is_nan() => self.position = p,
                        _ => self.position += w.velocity.unwrap_or(0.0) * 0.01,
                    }
                }
            }
            _ => self.queries += 1,
        }
        if w.query {
            let _ = io.send(&moteus_reply(
                self.id,
                self.mode,
                self.position,
                0.0,
                self.fault,
            ));
        }
    }
}
