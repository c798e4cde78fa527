//! The kernel: its preemption model, the clock the loop reads, and RT throttling.

use super::{Finding, Host, Level};

const RT_KERNEL: &str = "Debian: apt install linux-image-rt-amd64 (PREEMPT_RT), then boot it";

/// PREEMPT_RT, full, voluntary or none: how soon the kernel lets the loop run once it is due.
pub fn preemption(host: &dyn Host) -> Finding {
    const CHECK: &str = "preemption";
    let version = host.text("/proc/version").unwrap_or_default();
    if host.text("/sys/kernel/realtime").as_deref() == Some("1") || version.contains("PREEMPT_RT") {
        return Finding::new(CHECK, Level::Ok, "PREEMPT_RT (/sys/kernel/realtime is 1)");
    }
    // A PREEMPT_DYNAMIC kernel names its mode in debugfs (in parentheses), else takes it from
    // `preempt=` on the command line, else from its build.
    let dynamic = host
        .text("/sys/kernel/debug/sched/preempt")
        .and_then(|modes| {
            let start = modes.find('(')?;
            let end = modes[start..].find(')')?;
            Some((
                super::host::printable(&modes[start + 1..start + end]),
                "/sys/kernel/debug/sched/preempt",
            ))
        })
        .or_else(|| {
            let cmdline = host.text("/proc/cmdline").unwrap_or_default();
            cmdline
                .split_whitespace()
                .find_map(|w| w.strip_prefix("preempt="))
                .map(|m| (super::host::printable(m), "preempt= on /proc/cmdline"))
        });
    let (mode, from) = match dynamic {
        Some(found) => found,
        None if version.contains("PREEMPT_DYNAMIC") => {
            return Finding::new(
                CHECK,
                Level::Warn,
                "PREEMPT_DYNAMIC, mode not readable (debugfs not mounted, no preempt= on the \
                 command line): the build's default, voluntary on Debian's kernels",
            )
            .todo(format!(
                "boot with preempt=full, or for the lowest latency PREEMPT_RT ({RT_KERNEL}); \
                 mount debugfs to see the mode"
            ));
        }
        None if version.contains(" PREEMPT ") || version.contains(" PREEMPT\n") => {
            ("full".to_string(), "/proc/version")
        }
        None => ("voluntary or none".to_string(), "/proc/version"),
    };
    match mode.as_str() {
        "full" | "lazy" => Finding::new(
            CHECK,
            Level::Note,
            format!(
                "{mode} preemption ({from}): the loop preempts other tasks at once, but not \
                     the kernel's non-preemptible sections and interrupt handlers"
            ),
        )
        .todo(format!(
            "for the lowest worst case, PREEMPT_RT: {RT_KERNEL}"
        )),
        _ => Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "{mode} preemption ({from}): a due loop waits until the kernel reaches a \
                     preemption point, milliseconds under load"
            ),
        )
        .todo(format!(
            "boot with preempt=full, or PREEMPT_RT: {RT_KERNEL}"
        )),
    }
}

/// The clocksource the loop's clock_gettime and timers use.
pub fn clocksource(host: &dyn Host) -> Finding {
    const CHECK: &str = "clocksource";
    const PATH: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    match host.value(PATH).as_deref() {
        None => Finding::new(CHECK, Level::Note, format!("{PATH} not readable")),
        Some(c @ ("tsc" | "arch_sys_counter" | "riscv_clocksource")) => Finding::new(
            CHECK,
            Level::Ok,
            format!("{c}: read in user space, tens of nanoseconds"),
        ),
        Some(c @ "kvm-clock") => Finding::new(
            CHECK,
            Level::Note,
            format!("{c}: a virtual machine's clock; on a robot computer expect tsc"),
        ),
        Some(c @ ("hpet" | "acpi_pm")) => Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "{c}: each clock read is a slow device access (microseconds); the kernel \
                     rejected the TSC"
            ),
        )
        .todo(
            "see why in the kernel log (dmesg | grep -i tsc); firmware settings or \
               tsc=reliable on the kernel command line when the TSC is known good",
        ),
        Some(c) => Finding::new(CHECK, Level::Note, format!("{c} ({PATH})")),
    }
}

/// RT throttling: the share of each period SCHED_FIFO tasks may use.
pub fn rt_throttling(host: &dyn Host) -> Finding {
    const CHECK: &str = "rt throttling";
    let runtime = host
        .text("/proc/sys/kernel/sched_rt_runtime_us")
        .and_then(|t| t.parse::<i64>().ok());
    let period = host
        .text("/proc/sys/kernel/sched_rt_period_us")
        .and_then(|t| t.parse::<i64>().ok())
        .unwrap_or(1_000_000);
    match runtime {
        None => Finding::new(
            CHECK,
            Level::Note,
            "/proc/sys/kernel/sched_rt_runtime_us not readable",
        ),
        Some(-1) => Finding::new(
            CHECK,
            Level::Ok,
            "off (sched_rt_runtime_us -1): nothing caps real-time tasks",
        ),
        Some(r) if r * 2 >= period => Finding::new(
            CHECK,
            Level::Ok,
            format!(
                "real-time tasks may use {r} of every {period} µs ({:.0}%): a loop that sleeps \
                 each tick stays far below, and a runaway one cannot lock the machine up",
                r as f64 * 100.0 / period as f64
            ),
        ),
        Some(r) => Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "real-time tasks may use only {r} of every {period} µs: a busy loop is \
                     stopped for the rest"
            ),
        )
        .todo("sysctl -w kernel.sched_rt_runtime_us=950000 (the kernel's default)"),
    }
}
