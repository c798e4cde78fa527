#!/usr/bin/env bash
# Installs a built .deb into a scratch root with dpkg and checks that every file lands where the
# systemd unit expects it, that the configuration's robot and motions are installed, that the
# motiond user and group are created (in the scratch root's /etc/passwd), and that removing the
# package keeps the edited configuration (a conffile) until purge.
#
#   bash packaging/test-deb.sh target/debian/motiond_*.deb
set -euo pipefail
deb="$1"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

# A root holding just what dpkg and the maintainer scripts need.
mkdir -p "$root"/var/lib/dpkg/{info,updates,triggers} "$root/etc" "$root/usr/sbin"
: >"$root/var/lib/dpkg/status"
: >"$root/var/lib/dpkg/available"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\ndialout:x:20:\n' >"$root/etc/group"
printf 'root:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
printf 'root:*::\ndialout:*::\n' >"$root/etc/gshadow"
chmod 640 "$root/etc/shadow" "$root/etc/gshadow"

dpkg_root() {
    # The scripts run outside the scratch root (it has no shell); they honour DPKG_ROOT. The
    # scratch root has no libc6 or passwd packages: their absence is expected, not reported.
    if ! dpkg --root="$root" --force-script-chrootless --force-depends --log=/dev/null "$@" \
        >"$root/dpkg.out" 2>&1; then
        cat "$root/dpkg.out" >&2
        fail "dpkg $*"
    fi
}
fail() {
    echo "test-deb: $*" >&2
    exit 1
}
dpkg_root -i "$deb"
unit="$root/usr/lib/systemd/system/motiond.service"
[ -f "$unit" ] || fail "no unit at /usr/lib/systemd/system/motiond.service"
# Every motiond binary the unit runs must be installed where it says (system tools such as
# /bin/kill come from the system).
for cmd in $(sed -n 's/^Exec[A-Za-z]*=\([^ ]*\).*/\1/p' "$unit"); do
    case "$(basename "$cmd")" in
        motiond | motionctl) [ -x "$root$cmd" ] || fail "the unit runs $cmd, which the package does not install" ;;
    esac
done
grep -q '^ExecStart=/usr/bin/motiond ' "$unit" || fail "the unit does not start /usr/bin/motiond"
config=$(sed -n 's/^ExecStart=.*--config \([^ ]*\).*/\1/p' "$unit")
[ -f "$root$config" ] || fail "the unit reads $config, which the package does not install"
grep -q "^/etc/motiond/motiond.yaml$" "$root/var/lib/dpkg/info/motiond.conffiles" ||
    fail "/etc/motiond/motiond.yaml is not a conffile"
model=$(sed -n 's/^  model: \([^ ]*\).*/\1/p' "$root$config")
library=$(sed -n 's/^  library: \([^ ]*\).*/\1/p' "$root$config")
[ -f "$root$model" ] || fail "the configuration's robot.model $model is not installed"
ls "$root$library"/*.seq >/dev/null || fail "the configuration's motion.library $library is empty"
# Teach-in recordings go into the library and the takes folder: both in the unit's
# StateDirectory (writable under ProtectSystem=strict), owned by the service user.
takes=$(sed -n 's/^  takes: \([^ ]*\).*/\1/p' "$root$config")
grep -q '^StateDirectory=motiond$' "$unit" || fail "the unit has no StateDirectory=motiond"
for dir in "$library" "$takes"; do
    case "$dir" in
        /var/lib/motiond/*) ;;
        *) fail "$dir is outside the unit's StateDirectory /var/lib/motiond" ;;
    esac
done
uid=$(awk -F: '$1 == "motiond" { print $3 }' "$root/etc/passwd")
[ "$(stat -c %u "$root$library")" = "$uid" ] || fail "$library is not owned by the motiond user"
for f in /usr/bin/motionctl \
    /usr/share/man/man1/motiond.1.gz /usr/share/man/man1/motiond-serve.1.gz \
    /usr/share/man/man1/motionctl.1.gz /usr/share/man/man1/motionctl-play.1.gz \
    /usr/share/man/man5/motiond.yaml.5.gz \
    /usr/share/bash-completion/completions/motiond /usr/share/bash-completion/completions/motionctl \
    /usr/share/zsh/vendor-completions/_motiond /usr/share/fish/vendor_completions.d/motionctl.fish \
    /usr/share/doc/motiond/copyright /usr/share/doc/motiond/README.md \
    /usr/share/doc/motiond/book/index.html /usr/share/doc/motiond/book/configuration.html; do
    [ -f "$root$f" ] || fail "$f is not installed"
done
# The book keeps its folders (its style sheets are in css/).
ls "$root"/usr/share/doc/motiond/book/css/*.css >/dev/null 2>&1 ||
    fail "the book's css/ folder is not installed"
# The examples and the URDF demo arm, each loadable as installed (the installed motiond checks
# them, with the paths they name resolved under the scratch root's /usr/share/motiond).
for example in cia402 dynamixel mit odrive slcan; do
    [ -f "$root/usr/share/motiond/examples/$example.yaml" ] || fail "config/examples/$example.yaml is not installed"
done
[ -f "$root/usr/share/motiond/demo-arm.urdf" ] || fail "the URDF demo arm is not installed"
"$root/usr/bin/motiond" check "$root$library/wave.seq" --config "$root/usr/share/motiond/demo-arm-urdf.yaml" >/dev/null ||
    fail "/usr/share/motiond/demo-arm-urdf.yaml does not check as installed"
"$root/usr/bin/motiond" check "$root$library/wave.seq" --config "$root/usr/share/motiond/examples/mit.yaml" >/dev/null ||
    fail "/usr/share/motiond/examples/mit.yaml does not check as installed"
# The user the unit runs as, with the groups it needs.
user=$(sed -n 's/^User=//p' "$unit")
group=$(sed -n 's/^Group=//p' "$unit")
grep -q "^$user:x:[0-9]*:[0-9]*:.*:/nonexistent:/usr/sbin/nologin$" "$root/etc/passwd" ||
    fail "postinst did not create the system user $user"
grep -q "^$group:" "$root/etc/group" || fail "postinst did not create the group $group"
grep -q "^dialout:.*\b$user\b" "$root/etc/group" || fail "$user is not in dialout"
# The udev rule that lets the unit's group hold a CPU awake (PM QoS), for the unit's group.
rules="$root/usr/lib/udev/rules.d/60-motiond.rules"
[ -f "$rules" ] || fail "no udev rule at /usr/lib/udev/rules.d/60-motiond.rules"
grep -q "^KERNEL==\"cpu_dma_latency\", .*GROUP=\"$group\", MODE=\"0660\"" "$rules" ||
    fail "60-motiond.rules does not give /dev/cpu_dma_latency to group $group"
grep -q "chgrp $group /sys%p/power/pm_qos_resume_latency_us" "$rules" ||
    fail "60-motiond.rules does not give the CPUs' pm_qos_resume_latency_us to group $group"
grep -q '^DeviceAllow=/dev/cpu_dma_latency rw$' "$unit" || fail "the unit does not allow /dev/cpu_dma_latency"
# The installed binaries know the installed configuration by themselves.
"$root/usr/bin/motiond" --version >/dev/null

# An edited conffile survives removal; purge removes it.
echo "# edited" >>"$root$config"
dpkg_root -r motiond
[ -f "$root$config" ] || fail "remove deleted the edited configuration"
[ ! -e "$root/usr/bin/motiond" ] || fail "remove left /usr/bin/motiond"
dpkg_root -P motiond
[ ! -e "$root$config" ] || fail "purge left $config"
echo "test-deb: $(basename "$deb") installs into a scratch root as the unit expects"
