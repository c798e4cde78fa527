//! The PM QoS request the loop holds while it runs (`rt.cpu_wakeup_latency_us`): which file, and
//! whether this process and the unit's user may write it.

use super::{Finding, Host, Level, Target};
use crate::rt::{CPU_DMA_LATENCY, WAKEUP_REMEDY, cpu_resume_latency_path};

/// The group the unit runs as, which the udev rule lets write the PM QoS files.
const GROUP: &str = "motiond";

fn gid_of(host: &dyn Host, group: &str) -> Option<u32> {
    host.text("/etc/group")?.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == group).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// Whether group `motiond` (when it exists) may write `path`; `None` without such a group.
fn group_may_write(host: &dyn Host, path: &str) -> Option<bool> {
    let gid = gid_of(host, GROUP)?;
    Some(
        host.owner(path)
            .is_some_and(|(mode, g)| g == gid && mode & 0o020 != 0),
    )
}

/// What a CPU's sysfs request holds now, in words.
fn cpu_now(text: &str) -> String {
    match text {
        "0" => "no request".into(),
        "n/a" => "0 µs".into(),
        us => format!("{us} µs"),
    }
}

pub fn request(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "pm qos";
    let Some(us) = target.cpu_wakeup_latency_us else {
        return Finding::new(
            CHECK,
            Level::Warn,
            "rt.cpu_wakeup_latency_us is off: the loop's CPU may enter idle states slower to \
             leave between ticks",
        )
        .todo("remove `rt.cpu_wakeup_latency_us: off` (default 0)");
    };
    let global_now = host
        .read(CPU_DMA_LATENCY)
        .ok()
        .and_then(|b| <[u8; 4]>::try_from(b.as_slice()).ok())
        .map(i32::from_ne_bytes)
        .map_or(String::new(), |v| format!(" (now {v} µs)"));
    let mut tried = Vec::new();
    if let Some(cpu) = target.cpu {
        let path = cpu_resume_latency_path(cpu);
        match host.value(&path) {
            Some(now) if host.writable(&path) => {
                let mut finding = Finding::new(
                    CHECK,
                    Level::Ok,
                    format!(
                        "while the loop runs it holds CPU {cpu} at {us} µs through {path} \
                             (now: {})",
                        cpu_now(&now)
                    ),
                );
                if group_may_write(host, &path) == Some(false) {
                    finding.level = Level::Warn;
                    finding.finding.push_str(&format!(
                        "; this process may write it, the unit's group {GROUP} may not"
                    ));
                    finding = finding.todo(WAKEUP_REMEDY);
                }
                return finding;
            }
            Some(_) => tried.push(format!("{path} is not writable by this process")),
            None => tried.push(format!("{path} is missing")),
        }
    }
    if host.writable(CPU_DMA_LATENCY) {
        let scope = if tried.is_empty() {
            String::new()
        } else {
            format!(" ({}; this holds every CPU awake)", tried.join("; "))
        };
        let mut finding = Finding::new(
            CHECK,
            if tried.is_empty() {
                Level::Ok
            } else {
                Level::Note
            },
            format!("while the loop runs it holds {CPU_DMA_LATENCY}{global_now} at {us} µs{scope}"),
        );
        if group_may_write(host, CPU_DMA_LATENCY) == Some(false) {
            finding.level = Level::Warn;
            finding.finding.push_str(&format!(
                "; this process may write it, the unit's group {GROUP} may not"
            ));
            finding = finding.todo(WAKEUP_REMEDY);
        } else if !tried.is_empty() {
            finding = finding.todo(WAKEUP_REMEDY);
        }
        return finding;
    }
    tried.push(format!("{CPU_DMA_LATENCY} is not writable by this process"));
    Finding::new(
        CHECK,
        target.not_obtainable(),
        format!(
            "the loop could not hold its CPU awake at {us} µs: {}",
            tried.join("; ")
        ),
    )
    .todo(WAKEUP_REMEDY)
}
