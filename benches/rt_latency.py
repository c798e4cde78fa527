#!/usr/bin/env python3
"""motiond's wake-up latency against the kernel's floor: `motiond play --report json` and Debian's
cyclictest take turns on the same CPU at the same priority and period, PAIRS times; prints each
pair's p99s and their ratio, then the median p99 ratio (motiond / cyclictest; goal <= 1.0).

Taking turns, not one after the other in two blocks, spreads whatever else the machine does over
both; who goes first alternates from pair to pair, so neither always starts on the other's exit. Both p99s are compared at cyclictest's resolution: its histogram counts [N, N+1) us as N, so
its percentile is the bucket's upper edge N + 1; motiond's (the upper edge of a 0.1 us bucket) is
rounded up to the whole us likewise. Besides the median, a 95 % bootstrap interval of it over the
pairs says how much the machine's noise leaves of the comparison. cyclictest runs with its defaults but for the CPU, priority, period, loop count, memory
locking and a histogram: among them it holds /dev/cpu_dma_latency at 0 while it runs, as motiond
holds its CPU's PM QoS request (rt.cpu_wakeup_latency_us, default 0). motiond plays on the
simulated backend from a configuration made of SKEL and JOINTMAP that counts late ticks instead
of faulting on them (see config()).

usage: rt_latency.py BIN SEQ SKEL JOINTMAP [--pairs N] [--rate HZ] [--cpu N] [--priority P]
                     [--stress]
--stress runs `stress-ng --cpu 2 --vm 1` for the whole measurement.
Exit 0 iff the median p99 ratio is at most 1.0."""
import argparse, json, math, os, random, shutil, statistics, subprocess, sys, tempfile


def cyclictest(cpu, priority, rate, loops):
    p = subprocess.run(["cyclictest", "-m", "-p", str(priority), "-a", str(cpu), "-t", "1",
                        "-i", str(int(1e6 / rate)), "-l", str(loops), "-q", "-h", "20000"],
                       capture_output=True, text=True, timeout=loops / rate * 3 + 60)
    if p.returncode != 0:
        sys.exit("cyclictest failed: exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
    hist, mx = [], None
    for line in p.stdout.splitlines():
        if line.startswith("#"):
            if "Max Latencies" in line:
                mx = int(line.split(":")[1].split()[0])
            continue
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            hist.append((int(parts[0]), int(parts[1])))
    total = sum(c for _, c in hist)

    def pct(q):
        acc = 0
        for us, c in hist:
            acc += c
            if acc >= q * total:
                return us + 1
        return None

    return {"p50": pct(0.5), "p99": pct(0.99), "max": mx, "count": total}


def config(skel, jmap, cpu, priority, rate):
    """The loop as `--skel --joint-map --cpu --priority` plays it (PM QoS held: the default), but
    counting late ticks rather than faulting on them: a machine that stalls for milliseconds (a
    loaded VM) would otherwise end the run that measures it."""
    joints = []
    with open(jmap) as f:
        for line in f:
            line = line.strip()
            if line.startswith("- "):
                joints.append(line[2:].strip().strip("'\""))
    fd, path = tempfile.mkstemp(prefix="rt-latency-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write("robot:\n  model: %s\n  joints: [%s]\ncontrol:\n  rate_hz: %d\n"
                "rt:\n  cpu: %d\n  priority: %d\n  max_consecutive_overruns: 1000000\n"
                "  max_late_ms: 1000\nbackend: sim\n"
                % (os.path.abspath(skel), ", ".join(joints), rate, cpu, priority))
    return path


def motiond(binary, seq, cfg):
    p = subprocess.run([binary, "play", seq, "--config", cfg, "--report", "json"],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("motiond play failed: exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
    r = json.loads(p.stdout)
    if r["rt"]["policy"] != "fifo":
        sys.exit("motiond did not get SCHED_FIFO (run as root): %s" % r["rt"])
    return r


def bootstrap_interval(ratios, rounds=10000):
    """The 2.5th and 97.5th percentiles of the median of pairs drawn with replacement (fixed seed:
    the same pairs give the same interval)."""
    rng = random.Random(22)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("seq")
    ap.add_argument("skel")
    ap.add_argument("joint_map")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--priority", type=int, default=80)
    ap.add_argument("--stress", action="store_true")
    a = ap.parse_args()
    stress = None
    if a.stress:
        if not shutil.which("stress-ng"):
            sys.exit("stress-ng not found: apt-get install -y stress-ng")
        stress = subprocess.Popen(["stress-ng", "--cpu", "2", "--vm", "1", "--quiet"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ratios = []
    cfg = config(a.skel, a.joint_map, a.cpu, a.priority, a.rate)
    try:
        ticks = None
        for i in range(a.pairs):
            # Who goes first alternates: what one run leaves behind as it exits (freed locked
            # memory, the kernel's work after it) lands on the other run of its pair.
            if i % 2 == 1 and ticks:
                c = cyclictest(a.cpu, a.priority, a.rate, ticks)
                m = motiond(a.binary, a.seq, cfg)
            else:
                m = motiond(a.binary, a.seq, cfg)
                c = cyclictest(a.cpu, a.priority, a.rate, int(m["ticks"]))
            ticks = int(m["ticks"])
            ml = m["latency_us"]
            ratio = math.ceil(ml["p99"]) / max(c["p99"], 1)
            ratios.append(ratio)
            held = m["rt"].get("cpu_wakeup_latency") or {}
            print("pair %d at %d Hz, %d ticks: motiond p50 %.1f p99 %.1f max %.1f us (overruns %d, "
                  "PM QoS %s) | cyclictest p50 %s p99 %s max %s us | p99 ratio %.2f" % (
                      i + 1, a.rate, m["ticks"], ml["p50"], ml["p99"], ml["max"], m["overruns"],
                      held.get("path", "not held"), c["p50"], c["p99"], c["max"], ratio),
                  flush=True)
    finally:
        os.unlink(cfg)
        if stress:
            stress.terminate()
            stress.wait()
    median = statistics.median(ratios)
    low, high = bootstrap_interval(ratios)
    print("median p99 ratio (motiond / cyclictest) over %d pairs%s: %.2f (95 %% bootstrap "
          "interval %.2f-%.2f)" % (a.pairs, " under stress-ng --cpu 2 --vm 1" if a.stress else "",
                                   median, low, high))
    sys.exit(0 if median <= 1.0 else 1)


if __name__ == "__main__":
    main()
