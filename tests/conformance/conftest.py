"""Fixtures of the conformance suite, and its closing count of scenarios per protocol."""

import collections
import os
import pathlib
import shutil

import pytest

import harness
from harness import DECODED, MOTIOND, STOP_SHARES, Link, Play

PROTOCOLS = (
    "cia402", "odrive", "mit", "dynamixel", "slcan", "damiao", "robstride", "moteus", "feetech"
)
_results = collections.defaultdict(collections.Counter)


def pytest_configure(config):
    # A drive answers in its own time, not when a loaded test machine gets round to a Python
    # thread: the peers (every thread this process starts from here on inherits it) and socat run
    # SCHED_FIFO below motiond's loop where that is permitted, as tests/bus_peer's do, so a busy
    # machine cannot make them fall behind the stream. They block in reads and sleeps, so they
    # starve nothing. motiond itself starts with normal scheduling (harness.motiond_command).
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(harness.PEER_PRIORITY))
        harness.PEERS_REAL_TIME = True
    except PermissionError:
        pass
    if not pathlib.Path(MOTIOND).exists():
        raise pytest.UsageError(f"{MOTIOND} not found: build it first (cargo build --bin motiond)")
    if shutil.which("socat") is None:
        raise pytest.UsageError("socat not found (Debian package socat)")


@pytest.fixture(autouse=True)
def reap_plays():
    yield
    Play.reap()


@pytest.fixture
def link(tmp_path):
    link = Link(tmp_path)
    yield link
    link.close()


def _protocol(nodeid: str) -> str:
    name = os.path.basename(nodeid.split("::")[0])
    for p in PROTOCOLS:
        if name == f"test_{p}.py" or nodeid.endswith(f"[{p}]"):
            return p
    return "other"


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _results[_protocol(report.nodeid)][report.outcome] += 1


def pytest_terminal_summary(terminalreporter):
    parts = []
    for p in PROTOCOLS + ("other",):
        c = _results.get(p)
        if c:
            parts.append(f"{p} {c['passed']}/{sum(c.values())}")
    terminalreporter.write_line(
        "conformance frames decoded by the peers: "
        + ", ".join(f"{p} {n}" for p, n in sorted(DECODED.items()))
    )
    terminalreporter.write_line("conformance scenarios passed per protocol: " + ", ".join(parts))
    if STOP_SHARES:
        table = stop_table()
        for line in table:
            terminalreporter.write_line(line)
        out = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", harness.ROOT / "target")) / "conformance-stops.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(table) + "\n")
        terminalreporter.write_line(f"(written to {out})")


# The limits the stop scenarios check, and the measures of each (a position's finite differences
# and a velocity field both count against the velocity limit; their differences against the
# acceleration limit).
LIMITS = {
    "position": ("position",),
    "velocity": ("velocity", "velocity field"),
    "acceleration": ("acceleration", "velocity step"),
}


def stop_table() -> list:
    """The stop scenarios' worst share of each limit per protocol (less what the protocol's
    quantisation can add / as decoded, and that allowance: a share is known no closer), with the
    scenario and measure it came from."""
    lines = [
        "conformance stops (tests/conformance/test_stops.py): worst share of each limit per protocol,"
        " less quantisation / as decoded [quantisation's allowance] (scenario, measure)",
        "",
        "| protocol | " + " | ".join(LIMITS) + " |",
        "|---|" + "---|" * len(LIMITS),
    ]
    for p, worst in sorted(STOP_SHARES.items()):
        cells = []
        for measures in LIMITS.values():
            found = [(worst[m], m) for m in measures if m in worst]
            if not found:
                cells.append("–")
                continue
            (share, raw, allowance, scenario), measure = max(found, key=lambda f: f[0][0])
            cells.append(f"{share:.3f} / {raw:.3f} [{allowance:.3f}] ({scenario}, {measure})")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return lines
