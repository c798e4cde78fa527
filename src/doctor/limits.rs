//! What this process may do: SCHED_FIFO at the configured priority and lock its memory.

use super::{Finding, Host, Level, Target};

const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_NICE: u32 = 23;
const UNIT: &str = "the unit grants both (AmbientCapabilities=CAP_SYS_NICE CAP_IPC_LOCK, \
                    LimitRTPRIO=99, LimitMEMLOCK=infinity); run by hand, use root or \
                    /etc/security/limits.d (@motiond - rtprio 99, @motiond - memlock unlimited)";

/// A soft limit of `/proc/self/limits` (`None`: unlimited or unreadable).
fn soft_limit(host: &dyn Host, name: &str) -> Option<Option<u64>> {
    let text = host.text("/proc/self/limits")?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    let soft = line[name.len()..].split_whitespace().next()?;
    Some(soft.parse().ok())
}

fn capable(host: &dyn Host, cap: u32) -> bool {
    host.text("/proc/self/status")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << cap) != 0)
}

fn uid(host: &dyn Host) -> String {
    host.text("/proc/self/status")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next().map(str::to_string))
        })
        .unwrap_or_else(|| "?".into())
}

pub fn rtprio(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "rtprio";
    let Some(priority) = target.priority else {
        return Finding::new(CHECK, Level::Note, "no SCHED_FIFO asked");
    };
    let limit = soft_limit(host, "Max realtime priority");
    let who = format!("this process (uid {})", uid(host));
    if capable(host, CAP_SYS_NICE) {
        return Finding::new(
            CHECK,
            Level::Ok,
            format!("{who} has CAP_SYS_NICE: SCHED_FIFO {priority} permitted"),
        );
    }
    match limit {
        Some(None) => Finding::new(CHECK, Level::Ok, format!("{who}: RLIMIT_RTPRIO unlimited")),
        Some(Some(l)) if l >= priority as u64 => Finding::new(
            CHECK,
            Level::Ok,
            format!("{who}: RLIMIT_RTPRIO {l} permits SCHED_FIFO {priority}"),
        ),
        other => Finding::new(
            CHECK,
            target.not_obtainable(),
            format!(
                "{who} may not use SCHED_FIFO {priority}: RLIMIT_RTPRIO {}, no CAP_SYS_NICE — \
                 the loop would run under the normal scheduler",
                match other {
                    Some(Some(l)) => l.to_string(),
                    _ => "unknown".into(),
                }
            ),
        )
        .todo(UNIT),
    }
}

pub fn memlock(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "memlock";
    if !target.lock_memory {
        return Finding::new(
            CHECK,
            Level::Warn,
            "rt.lock_memory is false: a page fault on the loop's path can stall it",
        )
        .todo("set rt.lock_memory: true (the default)");
    }
    let who = format!("this process (uid {})", uid(host));
    if capable(host, CAP_IPC_LOCK) {
        return Finding::new(
            CHECK,
            Level::Ok,
            format!("{who} has CAP_IPC_LOCK: mlockall permitted"),
        );
    }
    match soft_limit(host, "Max locked memory") {
        Some(None) => Finding::new(CHECK, Level::Ok, format!("{who}: RLIMIT_MEMLOCK unlimited")),
        limit => Finding::new(
            CHECK,
            target.not_obtainable(),
            format!(
                "{who}: RLIMIT_MEMLOCK {}, no CAP_IPC_LOCK: mlockall of the whole daemon fails, \
                 and page faults can stall the loop",
                match limit {
                    Some(Some(b)) => format!("{} KiB", b / 1024),
                    _ => "unknown".into(),
                }
            ),
        )
        .todo(UNIT),
    }
}
