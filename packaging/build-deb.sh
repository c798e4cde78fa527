#!/usr/bin/env bash
# Builds the .deb: both binaries, the systemd unit, /etc/motiond/motiond.yaml (a conffile), the
# demo arm and its motions, manual pages and shell completions (generated from the binaries'
# own command lines), and the book (docs/, as HTML). Needs cargo-deb and mdbook
# (cargo install cargo-deb --version 3.8.0 --locked; mdbook as .ci/run installs it).
#
#   bash packaging/build-deb.sh                  # release build → target/debian/motiond_*.deb
#   bash packaging/build-deb.sh --profile dev    # from the debug binaries `cargo test` built (CI)
#   bash packaging/build-deb.sh --profile dev --prebuilt   # the binaries as they are, no cargo build
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
build=true
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile="$2"; args+=(--profile "$2"); shift 2 ;;
        # `cargo test` builds the binaries with the dev-dependencies' features; a plain `cargo
        # build` would rebuild them (and the dependencies those features touch) without.
        --prebuilt) build=false; shift ;;
        *) args+=("$1"); shift ;;
    esac
done
dir=release
[ "$profile" = dev ] && dir=debug
target="${CARGO_TARGET_DIR:-target}"
bin="$target/$dir"

if $build; then
    cargo build --profile "$profile" --bins
fi
for b in motiond motionctl; do
    [ -x "$bin/$b" ] || { echo "build-deb: $bin/$b is not built" >&2; exit 1; }
done
# Everything generated goes under the profile's folder: cargo-deb maps target/release/ there.
assets="$bin/deb-assets"
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
for b in motiond motionctl; do
    "$bin/$b" man --dir "$assets/man"
    "$bin/$b" completions bash >"$assets/completions/$b"
    "$bin/$b" completions zsh >"$assets/completions/_$b"
    "$bin/$b" completions fish >"$assets/completions/$b.fish"
done
gzip -9n "$assets"/man/*.1 "$assets"/man/*.5
# The book, for /usr/share/doc/motiond/book/.
mdbook build docs --dest-dir "$(cd "$assets" && pwd)/book"

# The unit of a checkout names /usr/local/bin (a hand install); the package installs to /usr/bin.
sed 's|/usr/local/bin/|/usr/bin/|g' systemd/motiond.service >"$assets/motiond.service"
grep -q '^ExecStart=/usr/bin/motiond serve --config /etc/motiond/motiond.yaml' "$assets/motiond.service"

# The installed configuration: the checkout's demo arm under /usr/share; the motion library and
# the teach-in takes in the unit's StateDirectory, which the service may write (the postinst
# puts the demo motions into the library on first install).
sed -e 's|^  model: demo-arm.skel|  model: /usr/share/motiond/demo-arm.skel|' \
    -e 's|^  library: motions |  library: /var/lib/motiond/motions |' \
    -e '/^  library: /a\  takes: /var/lib/motiond/takes   # teach-in takes as they are recorded' \
    config/motiond.yaml >"$assets/motiond.yaml"
grep -q '^  model: /usr/share/motiond/demo-arm.skel' "$assets/motiond.yaml"
grep -q '^  library: /var/lib/motiond/motions ' "$assets/motiond.yaml"
grep -q '^  takes: /var/lib/motiond/takes ' "$assets/motiond.yaml"

cargo deb --no-build "${args[@]}"
