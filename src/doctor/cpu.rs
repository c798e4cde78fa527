//! The loop's CPU: isolated from other work, its SMT sibling, the interrupts it takes, its idle
//! states and its clock speed.

use super::host::cpu_list;
use super::{Finding, Host, Level, Target};

const CPUS: &str = "/sys/devices/system/cpu";

fn listed(host: &dyn Host, path: &str) -> Vec<usize> {
    host.text(path)
        .and_then(|t| cpu_list(&t))
        .unwrap_or_default()
}

/// The CPUs kept from ordinary tasks: `isolcpus=` and isolated cpuset partitions.
fn isolated(host: &dyn Host) -> Vec<usize> {
    let mut cpus = listed(host, &format!("{CPUS}/isolated"));
    cpus.extend(listed(host, "/sys/fs/cgroup/cpuset.cpus.isolated"));
    cpus
}

/// The CPU the per-CPU checks look at: the loop's, else CPU 0 as a sample.
fn cpu_of(target: &Target) -> usize {
    target.cpu.unwrap_or(0)
}

pub fn isolation(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "isolation";
    let Some(cpu) = target.cpu else {
        return Finding::new(
            CHECK,
            Level::Warn,
            "the loop is not pinned (rt.cpu unset): it shares every CPU with everything else",
        )
        .todo("set rt.cpu to a CPU you isolate (below)");
    };
    let online = host.text(&format!("{CPUS}/online"));
    if let Some(online) = online.as_deref().and_then(cpu_list)
        && !online.contains(&cpu)
    {
        return Finding::new(
            CHECK,
            target.not_obtainable(),
            format!(
                "CPU {cpu} is not online ({CPUS}/online: {}): the loop cannot be pinned \
                     there",
                online_text(&online)
            ),
        )
        .todo("set rt.cpu to an online CPU");
    }
    let nohz = listed(host, &format!("{CPUS}/nohz_full")).contains(&cpu);
    let boot = format!(
        "isolcpus={cpu} nohz_full={cpu} rcu_nocbs={cpu} irqaffinity=<the other CPUs> on the \
         kernel command line (or an isolated cpuset partition)"
    );
    if isolated(host).contains(&cpu) {
        if nohz {
            Finding::new(
                CHECK,
                Level::Ok,
                format!("CPU {cpu} is isolated and tickless (nohz_full)"),
            )
        } else {
            Finding::new(
                CHECK,
                Level::Note,
                format!(
                    "CPU {cpu} is isolated; the scheduler tick still interrupts it \
                         (not in nohz_full)"
                ),
            )
            .todo(format!(
                "add nohz_full={cpu} rcu_nocbs={cpu} to the kernel command line"
            ))
        }
    } else {
        Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "CPU {cpu} is not isolated ({CPUS}/isolated): other tasks, kernel threads \
                     and timers run there and delay the loop's wake-ups"
            ),
        )
        .todo(format!("boot with {boot}"))
    }
}

fn online_text(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Busy share of `cpu` between two `/proc/stat` readings.
fn busy(stats: (&str, &str), cpu: usize) -> Option<f64> {
    let times = |text: &str| -> Option<(u64, u64)> {
        let name = format!("cpu{cpu}");
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        Some((total, idle))
    };
    let (t0, i0) = times(stats.0)?;
    let (t1, i1) = times(stats.1)?;
    let total = t1.checked_sub(t0)?;
    (total > 0).then(|| 1.0 - (i1.saturating_sub(i0)) as f64 / total as f64)
}

/// The loop CPU's SMT sibling shares its core: work there slows the loop's.
/// `stats` are `/proc/stat` before and after the wake-up test.
pub fn smt_sibling(host: &dyn Host, target: &Target, stats: Option<(&str, &str)>) -> Finding {
    const CHECK: &str = "smt sibling";
    let Some(cpu) = target.cpu else {
        return Finding::new(CHECK, Level::Note, "the loop is not pinned");
    };
    let path = format!("{CPUS}/cpu{cpu}/topology/thread_siblings_list");
    let siblings: Vec<usize> = listed(host, &path)
        .into_iter()
        .filter(|&c| c != cpu)
        .collect();
    if siblings.is_empty() {
        return Finding::new(
            CHECK,
            Level::Ok,
            format!("CPU {cpu} has its core to itself"),
        );
    }
    let isolated = isolated(host);
    let busy: Vec<String> = siblings
        .iter()
        .map(|&s| {
            let share = stats.and_then(|st| busy(st, s)).map_or(String::new(), |b| {
                format!(", busy {:.0}% during the wake-up test", b * 100.0)
            });
            format!("CPU {s}{share}")
        })
        .collect();
    if siblings.iter().all(|s| isolated.contains(s)) {
        Finding::new(
            CHECK,
            Level::Ok,
            format!(
                "CPU {cpu}'s SMT sibling is isolated too ({})",
                busy.join("; ")
            ),
        )
    } else {
        Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "CPU {cpu} shares its core with {} ({path}), which runs other work: it \
                     slows the loop's ticks and wake-ups",
                busy.join("; ")
            ),
        )
        .todo(format!(
            "isolate the sibling as well (isolcpus={cpu},{}), or turn SMT off (nosmt on the \
             kernel command line, or echo off > {CPUS}/smt/control)",
            online_text(&siblings)
        ))
    }
}

/// One line of `/proc/interrupts`: the IRQ, its count on `cpu` and its name.
fn interrupt_line(line: &str, columns: usize, cpu: usize) -> Option<(String, u64, String)> {
    let (irq, rest) = line.trim_start().split_once(':')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let count = fields.get(cpu)?.parse().ok()?;
    let name = fields
        .get(columns..)
        .unwrap_or_default()
        .last()
        .copied()
        .unwrap_or("");
    Some((irq.to_string(), count, super::host::printable(name)))
}

/// Device interrupts the kernel may deliver to the loop's CPU.
pub fn irqs(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "irqs";
    let Some(cpu) = target.cpu else {
        return Finding::new(CHECK, Level::Note, "the loop is not pinned");
    };
    let table = host.text("/proc/interrupts").unwrap_or_default();
    let mut lines = table.lines();
    let columns = lines.next().map_or(0, |h| h.split_whitespace().count());
    let names: Vec<(String, u64, String)> = lines
        .filter_map(|l| interrupt_line(l, columns, cpu))
        .collect();
    let Ok(dirs) = host.list("/proc/irq") else {
        return Finding::new(CHECK, Level::Note, "/proc/irq not readable");
    };
    let mut routed = Vec::new();
    for irq in dirs.iter().filter(|d| d.parse::<u32>().is_ok()) {
        let affinity = host
            .text(&format!("/proc/irq/{irq}/effective_affinity_list"))
            .filter(|t| !t.is_empty())
            .or_else(|| host.text(&format!("/proc/irq/{irq}/smp_affinity_list")));
        if affinity
            .and_then(|a| cpu_list(&a))
            .is_some_and(|c| c.contains(&cpu))
        {
            let (count, name) = names
                .iter()
                .find(|(n, _, _)| n == irq)
                .map_or((0, String::new()), |(_, c, n)| (*c, n.clone()));
            routed.push((irq.clone(), count, name));
        }
    }
    if routed.is_empty() {
        return Finding::new(
            CHECK,
            Level::Ok,
            format!("no device interrupt is routed to CPU {cpu}"),
        );
    }
    let shown: Vec<String> = routed
        .iter()
        .take(8)
        .map(|(irq, count, name)| {
            let name = if name.is_empty() {
                String::new()
            } else {
                format!(" {name}")
            };
            format!("{irq}{name} ({count} on CPU {cpu})")
        })
        .collect();
    let more = if routed.len() > 8 {
        format!(" and {} more", routed.len() - 8)
    } else {
        String::new()
    };
    Finding::new(
        CHECK,
        Level::Warn,
        format!(
            "{} interrupt(s) may run on CPU {cpu} (/proc/irq/N/effective_affinity_list): {}{more}",
            routed.len(),
            shown.join(", ")
        ),
    )
    .todo(format!(
        "route them elsewhere: irqaffinity=<the other CPUs> on the kernel command line, or echo \
         <the other CPUs> > /proc/irq/N/smp_affinity_list (with irqbalance, \
         IRQBALANCE_BANNED_CPULIST={cpu}); per-queue interrupts the kernel manages stay"
    ))
}

/// The cpuidle driver and the exit latencies of the loop CPU's idle states.
pub fn idle_states(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "idle states";
    let cpu = cpu_of(target);
    let driver = host
        .value(&format!("{CPUS}/cpuidle/current_driver"))
        .unwrap_or_else(|| "none".into());
    let dir = format!("{CPUS}/cpu{cpu}/cpuidle");
    let mut states = Vec::new();
    for state in host.list(&dir).unwrap_or_default() {
        let read = |f: &str| host.value(&format!("{dir}/{state}/{f}"));
        let (Some(name), Some(latency)) = (
            read("name"),
            read("latency").and_then(|l| l.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if read("disable").as_deref() != Some("1") {
            states.push((name, latency));
        }
    }
    if states.is_empty() {
        return Finding::new(
            CHECK,
            Level::Note,
            format!(
                "cpuidle driver {driver}, no idle states listed for CPU {cpu}: the CPU \
                     idles in the architecture's default (x86: HLT)"
            ),
        );
    }
    let deepest = states.iter().map(|(_, l)| *l).max().unwrap_or(0);
    let listed = states
        .iter()
        .map(|(n, l)| format!("{n} {l} µs"))
        .collect::<Vec<_>>()
        .join(", ");
    // A VM's halt hands the CPU back to the host: waking costs a host wake-up, whatever the
    // table says.
    let vm = if driver == "haltpoll" {
        " (haltpoll: a virtual machine's halt, which really costs a host wake-up of tens of µs)"
    } else {
        ""
    };
    let found = format!(
        "cpuidle driver {driver}{vm}; CPU {cpu}'s enabled states and exit \
                         latencies: {listed}"
    );
    match target.cpu_wakeup_latency_us {
        Some(us) => Finding::new(
            CHECK,
            Level::Ok,
            format!(
                "{found}; while the loop runs, its PM QoS request ({us} µs) keeps out every \
                     state slower to leave"
            ),
        ),
        None if deepest == 0 && driver != "haltpoll" => Finding::new(CHECK, Level::Ok, found),
        None => Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "{found}; rt.cpu_wakeup_latency_us is off, so an idle loop CPU may sleep \
                     in them and wake late"
            ),
        )
        .todo(
            "remove `rt.cpu_wakeup_latency_us: off` (the default, 0, keeps the CPU awake while \
               the loop runs)",
        ),
    }
}

/// The loop CPU's frequency governor.
pub fn governor(host: &dyn Host, target: &Target) -> Finding {
    const CHECK: &str = "frequency";
    let cpu = cpu_of(target);
    let path = format!("{CPUS}/cpu{cpu}/cpufreq/scaling_governor");
    match host.value(&path) {
        None => Finding::new(
            CHECK,
            Level::Ok,
            format!("no frequency scaling on CPU {cpu} (no {path})"),
        ),
        Some(g) if g == "performance" => Finding::new(
            CHECK,
            Level::Ok,
            format!("governor performance on CPU {cpu}"),
        ),
        Some(g) => Finding::new(
            CHECK,
            Level::Warn,
            format!(
                "governor {g} on CPU {cpu} ({path}): a mostly idle loop CPU runs slow, and \
                     each tick is slower until the clock ramps up"
            ),
        )
        .todo(format!(
            "cpupower frequency-set -g performance (Debian: linux-cpupower), or echo \
             performance > {path}"
        )),
    }
}
