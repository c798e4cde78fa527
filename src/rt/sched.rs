//! Real-time settings of the loop thread, applied once before its first tick, and the PM QoS
//! request that keeps the loop's CPU out of deep idle states while the loop runs.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Error, Settings};

/// The kernel's global CPU wake-up latency request: held while the file is open.
pub const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// One CPU's resume latency request (sysfs; stays until written again).
pub fn cpu_resume_latency_path(cpu: usize) -> String {
    format!("/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// What to do when the PM QoS request is not permitted, for every message that reports it.
pub const WAKEUP_REMEDY: &str = "install the udev rule 60-motiond.rules (the .deb does) so group \
    motiond may write them and run as a member of motiond (the unit does), or run as root; \
    `rt.cpu_wakeup_latency_us: off` asks for nothing";

/// What the loop thread obtained.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Obtained {
    /// The CPU the thread is pinned to, if pinning succeeded.
    pub cpu: Option<usize>,
    /// `fifo` or `other`.
    pub policy: &'static str,
    /// SCHED_FIFO priority (0 under `other`).
    pub priority: i32,
    pub memory_locked: bool,
    pub stack_prefaulted: bool,
    /// The PM QoS wake-up latency request held while the loop runs, if one was asked and
    /// obtained.
    pub cpu_wakeup_latency: Option<WakeupObtained>,
    /// One line per setting that was asked for and not obtained.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Obtained {
    /// Nothing asked, nothing obtained (a loop stepped without its thread).
    pub fn none() -> Self {
        Self {
            cpu: None,
            policy: "other",
            priority: 0,
            memory_locked: false,
            stack_prefaulted: false,
            cpu_wakeup_latency: None,
            warnings: Vec::new(),
        }
    }
}

/// A PM QoS request the loop holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WakeupObtained {
    /// The latency asked for, µs (0: the CPU never enters an idle state slower to leave than
    /// polling).
    pub latency_us: u32,
    /// The file holding it: the loop CPU's `pm_qos_resume_latency_us` or `/dev/cpu_dma_latency`
    /// (every CPU).
    pub path: String,
}

/// The PM QoS request in words, for reports and status lines.
pub fn describe_wakeup(obtained: Option<&WakeupObtained>) -> String {
    match obtained {
        Some(w) => format!("CPU held awake ({} µs, {})", w.latency_us, w.path),
        None => "CPU not held awake (no PM QoS request)".to_string(),
    }
}

/// What [`apply`] hands back: what was obtained, and the PM QoS request, released when dropped.
pub(crate) struct Applied {
    pub obtained: Obtained,
    pub wakeup_request: Option<WakeupRequest>,
}

/// A held PM QoS request: dropping it releases it.
#[derive(Debug)]
pub(crate) enum WakeupRequest {
    /// `/dev/cpu_dma_latency`, open: the kernel drops the request when it is closed.
    Global(#[allow(dead_code)] File),
    /// A CPU's sysfs request, written back to what it was when dropped.
    Cpu { path: PathBuf, previous: String },
}

impl Drop for WakeupRequest {
    fn drop(&mut self) {
        if let WakeupRequest::Cpu { path, previous } = self {
            // Nothing to report to: the loop has ended. A failure leaves the CPU held awake.
            let _ = std::fs::write(path, previous.as_bytes());
        }
    }
}

/// Asks that `cpu` (or, unpinned or when that is not permitted, every CPU) wake within
/// `latency_us`, with every path under `root` (`/`; a fake tree in tests). The error names each
/// file tried and why it failed.
pub(crate) fn request_wakeup(
    root: &Path,
    cpu: Option<usize>,
    latency_us: u32,
) -> Result<(WakeupRequest, WakeupObtained), String> {
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let mut why = Vec::new();
    if let Some(cpu) = cpu {
        let shown = cpu_resume_latency_path(cpu);
        let path = under(&shown);
        // sysfs spells "0 µs" `n/a`; a written 0 means "no constraint".
        let value = if latency_us == 0 {
            "n/a".to_string()
        } else {
            latency_us.to_string()
        };
        let held = std::fs::read_to_string(&path).and_then(|previous| {
            let previous = previous.trim().to_string();
            OpenOptions::new()
                .write(true)
                .open(&path)?
                .write_all(value.as_bytes())?;
            Ok(previous)
        });
        match held {
            Ok(previous) => {
                return Ok((
                    WakeupRequest::Cpu { path, previous },
                    WakeupObtained {
                        latency_us,
                        path: shown,
                    },
                ));
            }
            Err(e) => why.push(format!("{shown}: {e}")),
        }
    }
    // The kernel takes the value as a binary s32 (4 bytes) and holds it while the file is open.
    let held = OpenOptions::new()
        .read(true)
        .write(true)
        .open(under(CPU_DMA_LATENCY))
        .and_then(|mut f| {
            f.write_all(&(latency_us as i32).to_ne_bytes())?;
            Ok(f)
        });
    match held {
        Ok(f) => Ok((
            WakeupRequest::Global(f),
            WakeupObtained {
                latency_us,
                path: CPU_DMA_LATENCY.to_string(),
            },
        )),
        Err(e) => {
            why.push(format!("{CPU_DMA_LATENCY}: {e}"));
            Err(why.join("; "))
        }
    }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Applies `settings` to the calling thread and touches `stack_bytes` of its stack so the first
/// ticks take no page faults there.
pub(crate) fn apply(settings: &Settings, stack_bytes: usize) -> Result<Applied, Error> {
    apply_under(Path::new("/"), settings, stack_bytes)
}

/// [`apply`] with the PM QoS files under `root`.
fn apply_under(root: &Path, settings: &Settings, stack_bytes: usize) -> Result<Applied, Error> {
    let mut got = Obtained::none();
    let mut wakeup_request = None;
    if let Some(cpu) = settings.cpu {
        // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks against its size.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if cpu < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
            } else {
                -1
            }
        };
        if rc == 0 {
            got.cpu = Some(cpu);
        } else {
            got.warnings
                .push(format!("cannot pin to CPU {cpu}: {}", errno()));
        }
    }
    if let Some(priority) = settings.priority {
        let param = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: pthread_self is always valid for the calling thread; param outlives the call.
        let rc =
            unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
        if rc == 0 {
            got.policy = "fifo";
            got.priority = priority;
        } else {
            got.warnings.push(format!(
                "cannot use SCHED_FIFO priority {priority}: {} (needs CAP_SYS_NICE or LimitRTPRIO)",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
    }
    if settings.lock_memory {
        // SAFETY: mlockall takes flags only.
        let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
        if rc == 0 {
            got.memory_locked = true;
        } else {
            got.warnings.push(format!(
                "cannot lock memory: {} (needs CAP_IPC_LOCK or LimitMEMLOCK)",
                errno()
            ));
        }
    }
    if let Some(latency_us) = settings.cpu_wakeup_latency_us {
        match request_wakeup(root, got.cpu, latency_us) {
            Ok((request, obtained)) => {
                wakeup_request = Some(request);
                got.cpu_wakeup_latency = Some(obtained);
            }
            Err(why) => got.warnings.push(format!(
                "cannot hold the loop's CPU awake (PM QoS wake-up latency {latency_us} µs, \
                 rt.cpu_wakeup_latency_us): {why}; idle states slower to leave then delay its \
                 wake-ups: {WAKEUP_REMEDY}"
            )),
        }
    }
    prefault_stack(stack_bytes);
    got.stack_prefaulted = true;
    if settings.strict && !got.warnings.is_empty() {
        return Err(Error::NotPermitted(got.warnings.join("; ")));
    }
    Ok(Applied {
        obtained: got,
        wakeup_request,
    })
}

#[inline(never)]
fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 16 * 1024;
    fn touch(left: usize) {
        let mut buf = [0u8; CHUNK];
        // Volatile writes keep the compiler from eliding the untouched frame.
        for i in (0..CHUNK).step_by(4096) {
            // SAFETY: i < CHUNK, inside `buf`.
            unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 1) };
        }
        std::hint::black_box(&buf);
        if left > CHUNK {
            touch(left - CHUNK);
        }
    }
    touch(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn nothing_asked_is_nothing_obtained_and_no_warning() {
        let got = apply(&Settings::default(), 64 * 1024).unwrap().obtained;
        assert_eq!(got.cpu_wakeup_latency, None);
        assert_eq!(got.policy, "other");
        assert!(got.warnings.is_empty());
        assert!(got.stack_prefaulted);
    }

    #[test]
    fn an_impossible_cpu_warns_and_is_fatal_under_strict() {
        let settings = Settings {
            cpu: Some(100_000),
            ..Settings::default()
        };
        let got = apply(&settings, 16 * 1024).unwrap().obtained;
        assert_eq!(got.cpu, None);
        assert_eq!(got.warnings.len(), 1);
        let strict = Settings {
            strict: true,
            ..settings
        };
        assert!(matches!(
            apply(&strict, 16 * 1024),
            Err(Error::NotPermitted(_))
        ));
    }

    /// The value a CPU's sysfs request holds, as its file spells it (`0`: none; `n/a`: 0 µs).
    fn read_cpu_request(root: &Path, cpu: usize) -> std::io::Result<String> {
        let mut text = String::new();
        File::open(root.join(cpu_resume_latency_path(cpu).trim_start_matches('/')))?
            .read_to_string(&mut text)?;
        Ok(text.trim().to_string())
    }

    /// A fake tree with CPU 1's sysfs request (holding `previous`) and/or a stand-in for
    /// /dev/cpu_dma_latency.
    fn tree(previous: Option<&str>, dev: bool) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        if let Some(previous) = previous {
            let path = root
                .path()
                .join(cpu_resume_latency_path(1).trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("{previous}\n")).unwrap();
        }
        if dev {
            std::fs::create_dir_all(root.path().join("dev")).unwrap();
            std::fs::write(root.path().join("dev/cpu_dma_latency"), b"").unwrap();
        }
        root
    }

    #[test]
    fn pinned_holds_its_cpus_request_spelled_as_sysfs_wants_and_puts_back_the_old_one() {
        let root = tree(Some("0"), true);
        let (request, got) = request_wakeup(root.path(), Some(1), 0).unwrap();
        assert_eq!(got.path, cpu_resume_latency_path(1));
        assert_eq!(got.latency_us, 0);
        // sysfs: "n/a" is 0 µs, "0" no constraint.
        assert_eq!(read_cpu_request(root.path(), 1).unwrap(), "n/a");
        drop(request);
        assert_eq!(read_cpu_request(root.path(), 1).unwrap(), "0");
        let (request, _) = request_wakeup(root.path(), Some(1), 25).unwrap();
        assert_eq!(read_cpu_request(root.path(), 1).unwrap(), "25");
        drop(request);
        // The global request was not touched.
        assert!(
            std::fs::read(root.path().join("dev/cpu_dma_latency"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn unpinned_or_without_the_cpus_file_the_global_request_is_held_as_a_binary_s32() {
        for cpu in [None, Some(1)] {
            let root = tree(None, true);
            let (request, got) = request_wakeup(root.path(), cpu, 30).unwrap();
            assert_eq!(got.path, CPU_DMA_LATENCY);
            assert!(matches!(request, WakeupRequest::Global(_)));
            assert_eq!(
                std::fs::read(root.path().join("dev/cpu_dma_latency")).unwrap(),
                30i32.to_ne_bytes()
            );
        }
    }

    #[test]
    fn a_request_not_obtained_warns_why_and_what_to_do_and_is_fatal_under_strict() {
        let root = tree(None, false);
        let settings = Settings {
            cpu_wakeup_latency_us: Some(0),
            ..Settings::default()
        };
        let got = apply_under(root.path(), &settings, 16 * 1024).unwrap();
        assert!(got.wakeup_request.is_none());
        assert_eq!(got.obtained.cpu_wakeup_latency, None);
        let [warning] = &got.obtained.warnings[..] else {
            panic!("{:?}", got.obtained.warnings)
        };
        assert!(
            warning.contains("/dev/cpu_dma_latency: No such file"),
            "{warning}"
        );
        assert!(warning.contains("60-motiond.rules"), "{warning}");
        let strict = Settings {
            strict: true,
            ..settings
        };
        assert!(matches!(
            apply_under(root.path(), &strict, 16 * 1024),
            Err(Error::NotPermitted(_))
        ));
        let held = tree(None, true);
        let got = apply_under(held.path(), &strict, 16 * 1024).unwrap();
        assert_eq!(
            got.obtained.cpu_wakeup_latency.unwrap().path,
            CPU_DMA_LATENCY
        );
    }

    #[test]
    fn not_obtained_names_every_file_tried_and_why() {
        let root = tree(None, false);
        let why = request_wakeup(root.path(), Some(1), 0).unwrap_err();
        assert!(why.starts_with(&cpu_resume_latency_path(1)), "{why}");
        assert!(
            why.contains("; /dev/cpu_dma_latency: No such file"),
            "{why}"
        );
    }
}
