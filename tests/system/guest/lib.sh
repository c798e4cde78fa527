# Sourced by every test (bash, root, inside the VM; the current directory is the test's own
# scratch folder). A test proves one thing and ends with exit 0; `fail` gives the reason the
# runner reports. Processes started with `spawn` end with the test.
set -Eeuo pipefail
# The runner traces every test (bash -x); each command with the time it started.
PS4='+ $EPOCHREALTIME '
robot="$GUEST/robot"
declare -a spawned=() simulated=() restored=()

fail() {
    echo "why: $*" >&2
    exit 1
}
trap 'echo "why: line $LINENO: \`$BASH_COMMAND\` failed (exit $?)" >&2' ERR

cleanup() {
    local pid
    for pid in "${spawned[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${spawned[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    local chip
    for chip in "${simulated[@]}"; do
        gpio_sim_remove "$chip" || true
    done
    local setting
    for setting in "${restored[@]}"; do
        sysctl -q -w "$setting" || true
    done
}

# set_sysctl KEY VALUE: a kernel setting for this test only (the old value is back when it ends).
set_sysctl() {
    restored+=("$1=$(sysctl -n "$1")")
    sysctl -q -w "$1=$2"
}
trap cleanup EXIT

# spawn LOG CMD...: runs CMD in the background with its output in LOG; its pid is in $!.
spawn() {
    local log="$1"
    shift
    "$@" >"$log" 2>&1 &
    spawned+=($!)
}

# wait_for SECONDS WHAT CMD...: polls CMD every 0.1 s until it succeeds.
wait_for() {
    local limit="$1" what="$2"
    shift 2
    local end=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || fail "timed out after ${limit} s waiting for $what"
        sleep 0.1
    done
}

# library_loaded [MOTIONCTL OPTIONS...]: the daemon has read its motion library (`list` says
# nothing is loading). It reads the library once its socket answers, so a play sent right after
# the start can find its motion still loading on a slow machine.
library_loaded() {
    motionctl --json "$@" list | jq -e '.loading == 0' >/dev/null
}

# vcan0 up and empty of other users; `vcan_up fd`: a CAN-FD vcan0 (mtu 72).
vcan_up() {
    ip link del vcan0 2>/dev/null || true
    ip link add dev vcan0 type vcan
    if [ "${1:-}" = fd ]; then
        ip link set vcan0 mtu 72
    fi
    ip link set up vcan0
}

# record_bus INTERFACE: candump -L records INTERFACE into candump.out from now on (its pid in
# $recorder), from before the test's first frame: a marker frame (7FF, no drive's id) is sent
# until candump has logged it.
record_bus() {
    local interface="$1"
    # A large receive buffer, and -d to report drops: the log must hold every frame. candump
    # stays off the loop's CPU (rt.cpu 1), where a busy SCHED_FIFO loop would starve it.
    spawn candump.out taskset -c 0 stdbuf -oL candump -L -d -r 8388608 "$interface"
    recorder=$!
    started() { cansend "$interface" 7FF#5354415254 && sleep 0.2 && grep -q ' 7FF#5354415254$' candump.out; }
    wait_for 60 "candump to record the bus" started
}

# mark INTERFACE HEX: a marker frame 7FF#HEX on the bus, once candump has logged it (candump may
# lag behind: every frame sent before the marker is then in the log).
mark() {
    cansend "$1" "7FF#$2" || fail "cansend of the marker 7FF#$2 failed"
    wait_for 120 "candump to log the marker 7FF#$2" grep -q " 7FF#$2\$" candump.out
}

# play_checked CONFIG INTERFACE: `motiond play` of the bump motion with CONFIG while the drives
# (can_peer) answer on the SocketCAN INTERFACE and candump -L records it into bus.log; then
# checks the log frame by frame (can_peer check).
play_checked() {
    local config="$1" interface="$2" motion="$robot/bump.seq"
    # The peers stay off the loop's CPU (rt.cpu 1), where a busy SCHED_FIFO loop would starve
    # them and the softirq work that delivers their frames; the drives answer in real time.
    record_bus "$interface"
    spawn peer.out taskset -c 0 chrt -f 70 \
        can_peer drives --config "$config" --start "$motion" --interface "$interface"
    local peer=$!
    wait_for 30 "the drives (can_peer) to be ready" grep -qx ready peer.out
    local rc=0
    motiond play --config "$config" --report json "$motion" >report.json 2>play.err || rc=$?
    # The interface's counters and queue, for whoever looks into a lost frame.
    { ip -details -statistics link show "$interface"; tc -statistics qdisc show dev "$interface"; } \
        >link.txt 2>&1 || true
    if [ "$rc" != 0 ]; then
        # What the drives could not send (the peer prints it as it ends) tells a lost reply.
        kill "$peer" && wait "$peer" 2>/dev/null || true
        fail "motiond play exited $rc: $(tail -1 play.err) ($(grep 'refused to send' peer.out))"
    fi
    mark "$interface" 454E44
    kill "$peer" "$recorder"
    wait "$peer" "$recorder" 2>/dev/null || true
    ! grep -q DROPCOUNT candump.out || fail "candump dropped frames: $(grep DROPCOUNT candump.out | tail -1)"
    cp candump.out bus.log
    can_peer check --config "$config" --motion "$motion" --log bus.log --report report.json \
        --interface "$interface" >check.out 2>&1 ||
        fail "$(sed -n 's/^why: //p' check.out | head -1)"
    cat check.out
}

# play_on_vcan PROTOCOL: play_checked with PROTOCOL's drives on vcan0.
play_on_vcan() {
    vcan_up
    play_checked "$robot/$1.yaml" vcan0
}

# motiond.service installed as the book's "Installing as a systemd service" (docs/src/install.md) says (the runner has put
# the binaries into /usr/local/bin), with the demo configuration; the VM's CPUs may be emulated,
# so the loop runs at 250 Hz, late ticks (up to 2 s) are counted, not faults, and the watchdog is 15 s.
install_service() {
    local src=/mnt/host
    id -u motiond >/dev/null 2>&1 ||
        useradd --system --user-group --no-create-home --shell /usr/sbin/nologin motiond
    usermod -aG dialout motiond
    install -d -m 0755 /etc/motiond
    install -m 0644 "$src/config/motiond.yaml" /etc/motiond/motiond.yaml
    cp -r "$src/config/demo-arm.skel" "$src/config/motions" /etc/motiond/
    # An emulated VM on a busy host can stall for seconds: a longer watchdog than the unit's 2 s,
    # so only a stall the tests make (systemd-watchdog-restart) restarts the daemon.
    install -d /etc/systemd/system/motiond.service.d
    printf '[Service]\nWatchdogSec=15s\n' >vm.conf
    # systemd reads the unit again only when it changed (a daemon-reload takes seconds here).
    local reload=false
    if ! cmp -s "$src/systemd/motiond.service" /etc/systemd/system/motiond.service ||
        ! cmp -s vm.conf /etc/systemd/system/motiond.service.d/vm.conf; then
        install -m 0644 "$src/systemd/motiond.service" /etc/systemd/system/
        install -m 0644 vm.conf /etc/systemd/system/motiond.service.d/vm.conf
        reload=true
    fi
    rm vm.conf
    grant_pm_qos
    sed -i -e 's/^\(  rate_hz:\) 1000 /\1 250  /' \
        -e 's/^\(  max_consecutive_overruns:\) 10 /\1 1000 /' \
        -e 's/^\(  max_late_ms:\) 250$/\1 2000/' /etc/motiond/motiond.yaml
    grep -q '^  rate_hz: 250 ' /etc/motiond/motiond.yaml || fail "config/motiond.yaml: rate_hz not found"
    grep -q '^  max_consecutive_overruns: 1000 ' /etc/motiond/motiond.yaml ||
        fail "config/motiond.yaml: max_consecutive_overruns not found"
    grep -q '^  max_late_ms: 2000$' /etc/motiond/motiond.yaml || fail "config/motiond.yaml: max_late_ms not found"
    if $reload; then
        systemctl daemon-reload
    fi
}

# What systemd/60-motiond.rules does where udev runs (the VM has none): group motiond may write
# /dev/cpu_dma_latency and each CPU's pm_qos_resume_latency_us, the PM QoS requests that hold the
# loop's CPU awake.
grant_pm_qos() {
    local rules=/mnt/host/systemd/60-motiond.rules f
    grep -q '^KERNEL=="cpu_dma_latency", SUBSYSTEM=="misc", GROUP="motiond", MODE="0660"$' "$rules" ||
        fail "60-motiond.rules no longer gives /dev/cpu_dma_latency to motiond as this does"
    grep -q 'RUN+="/bin/chgrp motiond /sys%p/power/pm_qos_resume_latency_us", RUN+="/bin/chmod g+w /sys%p/power/pm_qos_resume_latency_us"$' "$rules" ||
        fail "60-motiond.rules no longer gives the CPUs' requests to motiond as this does"
    chgrp motiond /dev/cpu_dma_latency
    chmod 0660 /dev/cpu_dma_latency
    for f in /sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us; do
        chgrp motiond "$f"
        chmod g+w "$f"
    done
}

# A property of motiond.service.
prop() {
    systemctl show -p "$1" --value motiond.service
}

# What motiond and systemd logged about one run of the unit (an InvocationID), or, without one,
# everything logged about the unit since boot.
journal() {
    if [ $# -gt 0 ]; then
        journalctl --no-pager -o cat "_SYSTEMD_INVOCATION_ID=$1" + "INVOCATION_ID=$1"
    else
        journalctl --no-pager -o cat -u motiond.service
    fi
}

# motionctl as USER (its groups from /etc/group).
as_user() {
    local user="$1"
    shift
    setpriv --reuid="$user" --regid="$user" --init-groups "$@"
}

# gpio_sim_chip NAME LINES: a simulated GPIO chip NAME (gpio-sim, set up through configfs) with
# LINES input lines, each pulled down; prints its character device (/dev/gpiochipN). It is
# removed when the test ends.
gpio_sim_chip() {
    local name="$1" lines="$2" dir="/sys/kernel/config/gpio-sim/$1"
    mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
    mkdir "$dir" "$dir/bank0"
    simulated+=("$name")
    echo "$lines" >"$dir/bank0/num_lines"
    echo "$name" >"$dir/bank0/label"
    echo 1 >"$dir/live"
    echo "/dev/$(cat "$dir/bank0/chip_name")"
}

# gpio_sim_pull NAME LINE up|down: pulls input LINE of chip NAME up or down, as a switch wired to
# it would (an edge for whoever watches the line).
gpio_sim_pull() {
    local dir="/sys/kernel/config/gpio-sim/$1"
    echo "pull-$3" >"/sys/devices/platform/$(cat "$dir/dev_name")/$(cat "$dir/bank0/chip_name")/sim_gpio$2/pull"
}

gpio_sim_remove() {
    local dir="/sys/kernel/config/gpio-sim/$1"
    [ -d "$dir" ] || return 0
    echo 0 >"$dir/live"
    rmdir "$dir/bank0" "$dir"
}
