//! Real-time settings of the loop thread, applied once before its first tick.

use super::{Error, Settings};

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
            warnings: Vec::new(),
        }
    }
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Applies `settings` to the calling thread and touches `stack_bytes` of its stack so the first
/// ticks take no page faults there.
pub(crate) fn apply(settings: &Settings, stack_bytes: usize) -> Result<Obtained, Error> {
    let mut got = Obtained::none();
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
    prefault_stack(stack_bytes);
    got.stack_prefaulted = true;
    if settings.strict && !got.warnings.is_empty() {
        return Err(Error::NotPermitted(got.warnings.join("; ")));
    }
    Ok(got)
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

    #[test]
    fn nothing_asked_is_nothing_obtained_and_no_warning() {
        let got = apply(&Settings::default(), 64 * 1024).unwrap();
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
        let got = apply(&settings, 16 * 1024).unwrap();
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
}
