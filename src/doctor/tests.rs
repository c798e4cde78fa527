//! Every finding from fake `/sys` and `/proc` trees, and the wake-up verdicts from fake
//! measurements.

use super::*;
use crate::rt::{Obtained, Summary};

const CPUS: &str = "/sys/devices/system/cpu";

/// A machine ready for a loop on CPU 1: PREEMPT_RT, CPU 1 isolated and tickless with no
/// sibling and no interrupt, idle states held off by the PM QoS request, performance governor,
/// capabilities, the request writable by this process and group motiond.
fn ready_machine() -> (tempfile::TempDir, Tree) {
    let dir = tempfile::tempdir().unwrap();
    let tree = Tree::new(dir.path());
    tree.put("/sys/kernel/realtime", "1\n")
        .put(
            "/proc/version",
            "Linux version 6.1.0-rt-amd64 #1 SMP PREEMPT_RT Debian\n",
        )
        .put("/proc/cmdline", "root=/dev/sda1 isolcpus=1 nohz_full=1\n")
        .put(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            "tsc\n",
        )
        .put("/proc/sys/kernel/sched_rt_runtime_us", "950000\n")
        .put("/proc/sys/kernel/sched_rt_period_us", "1000000\n")
        .put(&format!("{CPUS}/online"), "0-3\n")
        .put(&format!("{CPUS}/isolated"), "1\n")
        .put(&format!("{CPUS}/nohz_full"), "1\n")
        .put(&format!("{CPUS}/cpu1/topology/thread_siblings_list"), "1\n")
        .put(
            "/proc/interrupts",
            "           CPU0       CPU1       CPU2       CPU3\n  \
             24:       1200          0          0          0  PCI-MSI 49152-edge      eth0\n  \
             NMI:          0          0          0          0   Non-maskable interrupts\n",
        )
        .put("/proc/irq/24/effective_affinity_list", "0\n")
        .put("/proc/irq/24/smp_affinity_list", "0,2-3\n")
        .put(&format!("{CPUS}/cpuidle/current_driver"), "intel_idle\n")
        .put(&format!("{CPUS}/cpu1/cpuidle/state0/name"), "POLL\n")
        .put(&format!("{CPUS}/cpu1/cpuidle/state0/latency"), "0\n")
        .put(&format!("{CPUS}/cpu1/cpuidle/state1/name"), "C6\n")
        .put(&format!("{CPUS}/cpu1/cpuidle/state1/latency"), "133\n")
        .put(&format!("{CPUS}/cpu1/cpuidle/state1/disable"), "0\n")
        .put(
            &format!("{CPUS}/cpu1/cpufreq/scaling_governor"),
            "performance\n",
        )
        .put(
            "/proc/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units     \n\
             Max locked memory         8388608              8388608              bytes     \n\
             Max realtime priority     0                    0                              \n",
        )
        .put(
            "/proc/self/status",
            "Name:\tmotiond\nUid:\t998\t998\t998\t998\nCapEff:\t0000000000804000\n",
        )
        .put(
            &format!("{CPUS}/cpu1/power/pm_qos_resume_latency_us"),
            "0\n",
        )
        .put("/dev/cpu_dma_latency", 2_000_000_000i32.to_ne_bytes())
        .put("/etc/group", "root:x:0:\nmotiond:x:998:\n");
    let tree = tree
        .owned(
            &format!("{CPUS}/cpu1/power/pm_qos_resume_latency_us"),
            0o100664,
            998,
        )
        .owned("/dev/cpu_dma_latency", 0o20660, 998);
    (dir, tree)
}

fn loop_on_cpu1() -> Settings {
    Settings {
        rate_hz: 1000.0,
        cpu: Some(1),
        priority: Some(80),
        lock_memory: true,
        cpu_wakeup_latency_us: Some(0),
        ..Settings::default()
    }
}

fn summary(p50: f64, p99: f64, max: f64) -> Summary {
    Summary {
        count: 3000,
        min: 1.0,
        mean: p50,
        p50,
        p99,
        p999: max,
        max,
    }
}

/// A wake-up test that "measured" these numbers.
struct Measured(Result<Wakeups, String>);

impl Measure for Measured {
    fn wakeups(&self, _: &Settings, _: f64) -> Result<Wakeups, String> {
        self.0.clone()
    }
}

fn measured(configured: Summary, floor: Option<Summary>) -> Measured {
    Measured(Ok(Wakeups {
        seconds: 3.0,
        configured,
        obtained: Obtained {
            cpu: Some(1),
            policy: "fifo",
            priority: 80,
            ..Obtained::none()
        },
        floor,
        floor_missing: None,
    }))
}

fn good() -> Measured {
    measured(summary(3.0, 6.0, 12.0), Some(summary(3.0, 5.0, 11.0)))
}

fn find<'a>(report: &'a Report, check: &str) -> &'a Finding {
    report
        .findings
        .iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no {check} finding in {:#?}", report.findings))
}

fn check(tree: &Tree, settings: &Settings, name: &str) -> Finding {
    find(&examine(tree, settings, &good(), 3.0), name).clone()
}

#[test]
fn a_ready_machine_is_ready_every_finding_ok() {
    let (_dir, tree) = ready_machine();
    let report = examine(&tree, &loop_on_cpu1(), &good(), 3.0);
    for f in &report.findings {
        assert_eq!(f.level, Level::Ok, "{f:?}");
        assert_eq!(f.todo, None, "{f:?}");
    }
    let names: Vec<&str> = report.findings.iter().map(|f| f.check).collect();
    assert_eq!(
        names,
        [
            "preemption",
            "clocksource",
            "rt throttling",
            "isolation",
            "smt sibling",
            "irqs",
            "idle states",
            "frequency",
            "rtprio",
            "memlock",
            "pm qos",
            "wake-up test"
        ]
    );
    assert_eq!((report.verdict, report.exit), ("ready", 0));
    assert_eq!(report.target.max_late_us, 2000.0);
}

#[test]
fn preemption_models() {
    let (_dir, tree) = ready_machine();
    let s = loop_on_cpu1();
    tree.put("/sys/kernel/realtime", "0").put(
        "/proc/version",
        "Linux version 6.1.0-31-amd64 #1 SMP PREEMPT_DYNAMIC Debian",
    );
    let f = check(&tree, &s, "preemption");
    assert_eq!(f.level, Level::Warn);
    assert!(f.finding.contains("mode not readable"), "{f:?}");
    assert!(f.todo.unwrap().contains("linux-image-rt-amd64"));

    tree.put("/proc/cmdline", "root=/dev/sda1 preempt=full");
    let f = check(&tree, &s, "preemption");
    assert_eq!(f.level, Level::Note, "{f:?}");
    assert!(
        f.finding
            .starts_with("full preemption (preempt= on /proc/cmdline)"),
        "{f:?}"
    );

    // debugfs, when mounted, is the kernel's own word.
    tree.put(
        "/sys/kernel/debug/sched/preempt",
        "none (voluntary) full lazy\n",
    );
    let f = check(&tree, &s, "preemption");
    assert_eq!(f.level, Level::Warn, "{f:?}");
    assert!(
        f.finding
            .starts_with("voluntary preemption (/sys/kernel/debug/sched/preempt)")
    );
    assert!(f.todo.unwrap().starts_with("boot with preempt=full"));

    tree.put(
        "/sys/kernel/debug/sched/preempt",
        "none voluntary (full) lazy\n",
    );
    assert_eq!(check(&tree, &s, "preemption").level, Level::Note);

    std::fs::remove_file(_dir.path().join("sys/kernel/debug/sched/preempt")).unwrap();
    tree.put("/proc/cmdline", "root=/dev/sda1")
        .put("/proc/version", "Linux version 5.10.0 #1 SMP Debian");
    let f = check(&tree, &s, "preemption");
    assert_eq!(f.level, Level::Warn);
    assert!(
        f.finding
            .starts_with("voluntary or none preemption (/proc/version)"),
        "{f:?}"
    );
}

#[test]
fn clocksources() {
    let (_dir, tree) = ready_machine();
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    let s = loop_on_cpu1();
    tree.put(path, "hpet\n");
    let f = check(&tree, &s, "clocksource");
    assert_eq!(f.level, Level::Warn);
    assert!(f.todo.unwrap().contains("tsc=reliable"));
    tree.put(path, "kvm-clock\n");
    assert_eq!(check(&tree, &s, "clocksource").level, Level::Note);
    tree.put(path, "arch_sys_counter\n");
    assert_eq!(check(&tree, &s, "clocksource").level, Level::Ok);
}

#[test]
fn rt_throttling() {
    let (_dir, tree) = ready_machine();
    let s = loop_on_cpu1();
    tree.put("/proc/sys/kernel/sched_rt_runtime_us", "-1\n");
    let f = check(&tree, &s, "rt throttling");
    assert_eq!(f.level, Level::Ok);
    assert!(f.finding.starts_with("off"), "{f:?}");
    tree.put("/proc/sys/kernel/sched_rt_runtime_us", "100000\n");
    let f = check(&tree, &s, "rt throttling");
    assert_eq!(f.level, Level::Warn);
    assert!(
        f.todo
            .unwrap()
            .contains("kernel.sched_rt_runtime_us=950000")
    );
}

#[test]
fn isolation() {
    let (_dir, tree) = ready_machine();
    let mut s = loop_on_cpu1();
    tree.put(&format!("{CPUS}/nohz_full"), "");
    let f = check(&tree, &s, "isolation");
    assert_eq!(f.level, Level::Note, "{f:?}");
    assert!(f.todo.unwrap().contains("nohz_full=1"));

    tree.put(&format!("{CPUS}/isolated"), "");
    let f = check(&tree, &s, "isolation");
    assert_eq!(f.level, Level::Warn);
    assert!(f.finding.starts_with("CPU 1 is not isolated"), "{f:?}");
    assert!(
        f.todo
            .unwrap()
            .contains("isolcpus=1 nohz_full=1 rcu_nocbs=1")
    );

    // An isolated cpuset partition counts as isolation.
    tree.put("/sys/fs/cgroup/cpuset.cpus.isolated", "1-2\n");
    assert_eq!(check(&tree, &s, "isolation").level, Level::Note);

    s.cpu = Some(7);
    let f = check(&tree, &s, "isolation");
    assert_eq!(f.level, Level::Warn);
    assert!(f.finding.contains("CPU 7 is not online"), "{f:?}");
    s.strict = true;
    let report = examine(&tree, &s, &good(), 3.0);
    assert_eq!(find(&report, "isolation").level, Level::Fail);
    assert_eq!(report.exit, 2);

    s.cpu = None;
    let f = check(&tree, &s, "isolation");
    assert_eq!(f.level, Level::Warn);
    assert!(f.finding.contains("not pinned"), "{f:?}");
}

#[test]
fn smt_sibling_busy_during_the_test() {
    let (_dir, tree) = ready_machine();
    let s = loop_on_cpu1();
    tree.put(
        &format!("{CPUS}/cpu1/topology/thread_siblings_list"),
        "1,3\n",
    );
    let target = Target::of(&s);
    let before = "cpu  1 2 3 4\ncpu3 100 0 100 700 100 0 0 0 0 0\n";
    let after = "cpu  1 2 3 4\ncpu3 250 0 150 800 100 0 0 0 0 0\n";
    let f = cpu::smt_sibling(&tree, &target, Some((before, after)));
    assert_eq!(f.level, Level::Warn);
    assert!(
        f.finding
            .contains("shares its core with CPU 3, busy 67% during the wake-up test"),
        "{f:?}"
    );
    assert!(f.todo.unwrap().contains("isolcpus=1,3"));
    tree.put(&format!("{CPUS}/isolated"), "1,3\n");
    assert_eq!(cpu::smt_sibling(&tree, &target, None).level, Level::Ok);
}

#[test]
fn interrupts_routed_to_the_loop_cpu() {
    let (_dir, tree) = ready_machine();
    let s = loop_on_cpu1();
    tree.put(
        "/proc/interrupts",
        "           CPU0       CPU1\n  \
         24:       1200          0  PCI-MSI 49152-edge      eth0\n  \
         30:          5        812  IO-APIC  30-fasteoi   can0\n  \
         LOC:      100        200   Local timer interrupts\n",
    )
    .put("/proc/irq/30/smp_affinity_list", "0-1\n")
    .put("/proc/irq/default_smp_affinity", "3\n");
    let f = check(&tree, &s, "irqs");
    assert_eq!(f.level, Level::Warn);
    assert_eq!(
        f.finding,
        "1 interrupt(s) may run on CPU 1 (/proc/irq/N/effective_affinity_list): 30 can0 (812 on CPU 1)"
    );
    assert!(f.todo.unwrap().contains("irqaffinity="));
    // Where the kernel says where it delivers (effective affinity), that is what counts.
    tree.put("/proc/irq/30/effective_affinity_list", "0\n");
    assert_eq!(check(&tree, &s, "irqs").level, Level::Ok);
}

#[test]
fn idle_states_and_the_request_that_holds_them_off() {
    let (_dir, tree) = ready_machine();
    let mut s = loop_on_cpu1();
    let f = check(&tree, &s, "idle states");
    assert!(f.finding.contains("POLL 0 µs, C6 133 µs"), "{f:?}");
    assert!(
        f.finding.contains("keeps out every state slower to leave"),
        "{f:?}"
    );
    s.cpu_wakeup_latency_us = None;
    let f = check(&tree, &s, "idle states");
    assert_eq!(f.level, Level::Warn);
    assert!(f.todo.unwrap().contains("rt.cpu_wakeup_latency_us"));
    // A state switched off is not a state the CPU enters.
    tree.put(&format!("{CPUS}/cpu1/cpuidle/state1/disable"), "1\n");
    assert_eq!(check(&tree, &s, "idle states").level, Level::Ok);
    tree.put(&format!("{CPUS}/cpuidle/current_driver"), "haltpoll\n");
    let f = check(&tree, &s, "idle states");
    assert_eq!(
        f.level,
        Level::Warn,
        "a VM's halt is slow whatever its table says"
    );
    assert!(f.finding.contains("host wake-up"), "{f:?}");
}

#[test]
fn frequency_governor() {
    let (dir, tree) = ready_machine();
    let s = loop_on_cpu1();
    tree.put(
        &format!("{CPUS}/cpu1/cpufreq/scaling_governor"),
        "powersave\n",
    );
    let f = check(&tree, &s, "frequency");
    assert_eq!(f.level, Level::Warn);
    assert!(
        f.todo
            .unwrap()
            .contains("cpupower frequency-set -g performance")
    );
    std::fs::remove_dir_all(dir.path().join("sys/devices/system/cpu/cpu1/cpufreq")).unwrap();
    let f = check(&tree, &s, "frequency");
    assert_eq!(f.level, Level::Ok);
    assert!(f.finding.starts_with("no frequency scaling"), "{f:?}");
}

#[test]
fn rtprio_and_memlock_limits() {
    let (_dir, tree) = ready_machine();
    let mut s = loop_on_cpu1();
    tree.put(
        "/proc/self/status",
        "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n",
    );
    let f = check(&tree, &s, "rtprio");
    assert_eq!(f.level, Level::Warn);
    assert!(
        f.finding
            .contains("uid 1000) may not use SCHED_FIFO 80: RLIMIT_RTPRIO 0"),
        "{f:?}"
    );
    assert!(f.todo.unwrap().contains("LimitRTPRIO=99"));
    let f = check(&tree, &s, "memlock");
    assert_eq!(f.level, Level::Warn);
    assert!(f.finding.contains("RLIMIT_MEMLOCK 8192 KiB"), "{f:?}");
    s.strict = true;
    assert_eq!(check(&tree, &s, "rtprio").level, Level::Fail);
    tree.put(
        "/proc/self/limits",
        "Max locked memory         unlimited            unlimited            bytes\n\
         Max realtime priority     99                   99\n",
    );
    assert_eq!(check(&tree, &s, "rtprio").level, Level::Ok);
    assert_eq!(check(&tree, &s, "memlock").level, Level::Ok);
    s.lock_memory = false;
    assert_eq!(check(&tree, &s, "memlock").level, Level::Warn);
}

#[test]
fn the_pm_qos_request() {
    let (_dir, tree) = ready_machine();
    let mut s = loop_on_cpu1();
    let cpu1 = format!("{CPUS}/cpu1/power/pm_qos_resume_latency_us");
    tree.put(&cpu1, "n/a\n");
    let f = check(&tree, &s, "pm qos");
    assert_eq!(f.level, Level::Ok);
    assert!(
        f.finding
            .contains(&format!("holds CPU 1 at 0 µs through {cpu1} (now: 0 µs)")),
        "{f:?}"
    );

    // Not writable: the global request stands in, for every CPU.
    let fallback = tree.clone().read_only(&cpu1);
    let f = check(&fallback, &s, "pm qos");
    assert_eq!(f.level, Level::Note);
    assert!(
        f.finding
            .contains("holds /dev/cpu_dma_latency (now 2000000000 µs) at 0 µs"),
        "{f:?}"
    );
    assert!(f.finding.contains("not writable by this process"), "{f:?}");

    let neither = fallback.clone().read_only("/dev/cpu_dma_latency");
    let f = check(&neither, &s, "pm qos");
    assert_eq!(f.level, Level::Warn);
    assert!(
        f.finding
            .starts_with("the loop could not hold its CPU awake at 0 µs"),
        "{f:?}"
    );
    assert!(f.todo.unwrap().contains("60-motiond.rules"));
    s.strict = true;
    assert_eq!(check(&neither, &s, "pm qos").level, Level::Fail);
    s.strict = false;

    // Root may write anything; the unit's group may not without the udev rule.
    let root_only = tree.clone().owned(&cpu1, 0o100644, 0);
    let f = check(&root_only, &s, "pm qos");
    assert_eq!(f.level, Level::Warn);
    assert!(
        f.finding.ends_with("the unit's group motiond may not"),
        "{f:?}"
    );

    s.cpu_wakeup_latency_us = None;
    let f = check(&tree, &s, "pm qos");
    assert_eq!(f.level, Level::Warn);
    assert!(f.finding.contains("is off"), "{f:?}");
}

#[test]
fn the_wake_up_test_verdicts() {
    let (_dir, tree) = ready_machine();
    let s = loop_on_cpu1();
    // Beyond rt.max_late_ms (two periods: 2000 µs) the loop would fault: exit 2.
    let late = measured(summary(3.0, 8.0, 2500.0), Some(summary(3.0, 5.0, 11.0)));
    let report = examine(&tree, &s, &late, 3.0);
    let f = find(&report, "wake-up test");
    assert_eq!(f.level, Level::Fail);
    assert!(
        f.finding.contains("p50 3.0  p99 8.0  max 2500.0 µs"),
        "{f:?}"
    );
    assert!(
        f.finding
            .contains("floor (SCHED_FIFO 99, PM QoS 0) p50 3.0  p99 5.0  max 11.0 µs")
    );
    assert_eq!((report.verdict, report.exit), ("not ready", 2));

    let above_floor = measured(summary(30.0, 60.0, 90.0), Some(summary(3.0, 5.0, 11.0)));
    let report = examine(&tree, &s, &above_floor, 3.0);
    assert_eq!(find(&report, "wake-up test").level, Level::Warn);
    assert_eq!(report.exit, 1);

    let half_period = measured(summary(30.0, 60.0, 700.0), None);
    let f = find(&examine(&tree, &s, &half_period, 3.0), "wake-up test").clone();
    assert_eq!(f.level, Level::Warn);
    assert!(f.finding.contains("floor not measured"), "{f:?}");

    let failed = Measured(Err("no thread".into()));
    assert_eq!(
        find(&examine(&tree, &s, &failed, 3.0), "wake-up test").level,
        Level::Warn
    );
    let skipped = examine(&tree, &s, &late, 0.0);
    assert_eq!(find(&skipped, "wake-up test").level, Level::Note);
    assert!(skipped.wakeups.is_none());
}

#[test]
fn a_machine_with_nothing_readable_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let report = examine(&Tree::new(dir.path()), &loop_on_cpu1(), &good(), 3.0);
    assert_eq!(report.findings.len(), 12);
    assert!(report.exit <= 2);
}

/// A damaged or fake /sys (binary, escape sequences, NULs, many lines) never reaches the
/// terminal raw: every finding is one line of printable characters, its kernel values escaped
/// and cut short.
#[test]
fn raw_kernel_bytes_are_printed_escaped_and_short() {
    let (_dir, tree) = ready_machine();
    let binary: Vec<u8> = (0u8..=255).cycle().take(100_000).collect();
    tree.put(&format!("{CPUS}/cpu1/cpufreq/scaling_governor"), &binary)
        .put(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            "tsc\u{1b}[31m\nhpet\0\n",
        )
        .put(
            &format!("{CPUS}/cpuidle/current_driver"),
            "intel\u{7}idle\n",
        )
        .put(&format!("{CPUS}/cpu1/cpuidle/state1/name"), "C6\r\nC7\n");
    let report = examine(&tree, &loop_on_cpu1(), &good(), 3.0);
    for f in &report.findings {
        for text in [Some(&f.finding), f.todo.as_ref()].into_iter().flatten() {
            assert!(!text.chars().any(char::is_control), "{f:?}");
            assert!(text.chars().count() < 600, "{f:?}");
        }
    }
    let clock = find(&report, "clocksource");
    assert!(
        clock.finding.starts_with(r"tsc\u{1b}[31m\nhpet\u{0}"),
        "{clock:?}"
    );
    let governor = find(&report, "frequency");
    assert!(governor.finding.contains('…'), "{governor:?}");
}
