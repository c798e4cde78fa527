"""The flight recorder's MCAP files as a third party reads them: the PyPI `mcap` reader, each
message decoded as the JSON its channel says and validated against the channel's JSON Schema
(the `jsonschema` package) — the schema Foxglove and PlotJuggler read.

- `motiond play --trace X.mcap` holds every tick, with the values of the CSV trace of the same
  (deterministic, `--clock manual`) run, and ends with the fault the run ended in.
- A fault in the daemon leaves a file in `recorder.dir` whose last record is the fault;
  `dump` writes one on request.
"""

import csv
import json
import os
import pathlib
import subprocess
import time

import jsonschema
from mcap.reader import make_reader

from harness import ROOT, Serve, motiond_command

CONFIG = ROOT / "config" / "motiond.yaml"
WAVE = ROOT / "config" / "motions" / "wave.seq"
FAULT_AND_RECOVER = ROOT / "config" / "rehearse" / "fault-and-recover.yaml"
TOPICS = {"/motiond/loop", "/motiond/joints", "/motiond/drives", "/motiond/events"}


def read_mcap(path: pathlib.Path) -> list:
    """Every message in file order as (topic, log_time, decoded JSON), each validated against its
    channel's schema."""
    out = []
    validators = {}
    with open(path, "rb") as f:
        reader = make_reader(f)
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            assert channel.message_encoding == "json"
            assert schema.encoding == "jsonschema"
            if schema.id not in validators:
                validators[schema.id] = jsonschema.Draft202012Validator(json.loads(schema.data))
            value = json.loads(message.data)
            validators[schema.id].validate(value)
            out.append((channel.topic, message.log_time, value))
    return out


def play(tmp_path: pathlib.Path, trace: str) -> pathlib.Path:
    path = tmp_path / trace
    done = subprocess.run(
        motiond_command("play", str(WAVE), "--config", str(CONFIG), "--clock", "manual",
                        "--fault", "elbow_pitch:stall:2", "--trace", str(path)),
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1, done.stderr  # the fault ends the run
    assert "wrote the trace" in done.stderr and str(path) in done.stderr, done.stderr
    return path


def test_play_mcap_trace_holds_every_tick_of_the_csv_trace(tmp_path):
    rows = list(csv.DictReader(open(play(tmp_path, "wave.csv"))))
    messages = read_mcap(play(tmp_path, "wave.mcap"))
    assert {t for t, _, _ in messages} == TOPICS
    loop = [v for t, _, v in messages if t == "/motiond/loop"]
    joints = [v for t, _, v in messages if t == "/motiond/joints"]
    drives = [v for t, _, v in messages if t == "/motiond/drives"]
    assert len(loop) == len(joints) == len(drives) == len(rows)
    first = loop[0]["tick"]
    dofs = [c[: -len(".commanded")] for c in rows[0] if c.endswith(".commanded")]
    for row, lp, j in zip(rows, loop, joints):
        tick = int(row["tick"])
        assert lp["tick"] - first == tick and j["tick"] == lp["tick"]
        assert lp["state"] == row["state"]
        assert lp["time"] == float(row["time"])
        for d in dofs:
            assert j[d]["commanded"] == float(row[f"{d}.commanded"]), (tick, d)
            assert j[d]["velocity"] == float(row[f"{d}.velocity"]), (tick, d)
            assert j[d]["acceleration"] == float(row[f"{d}.acceleration"]), (tick, d)
            assert j[d]["measured"] == float(row[f"{d}.measured"]), (tick, d)
    # Every tick, one period apart, on the log time too.
    ticks = [v["tick"] for v in loop]
    assert ticks == list(range(first, first + len(rows)))
    times = [lt for t, lt, _ in messages if t == "/motiond/loop"]
    assert all(b - a == 1_000_000 for a, b in zip(times, times[1:]))
    events = [v for t, _, v in messages if t == "/motiond/events"]
    faults = [e for e in events if e["kind"] == "fault"]
    assert [e["message"] for e in faults] == ["fault: stall on elbow_pitch"]
    assert loop[-1]["fault"] == {"kind": "stall", "joint": "elbow_pitch", "code": 0}
    assert events[0]["message"].startswith("state ")


def rehearse(tmp_path: pathlib.Path, trace: str) -> pathlib.Path:
    path = tmp_path / trace
    done = subprocess.run(
        motiond_command("rehearse", str(FAULT_AND_RECOVER), "--config", str(CONFIG), "--trace", str(path)),
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return path


def test_rehearse_mcap_trace_holds_every_tick_of_its_csv_trace_with_the_loops_events(tmp_path):
    rows = list(csv.DictReader(open(rehearse(tmp_path, "session.csv"))))
    messages = read_mcap(rehearse(tmp_path, "session.mcap"))
    loop = [v for t, _, v in messages if t == "/motiond/loop"]
    joints = [v for t, _, v in messages if t == "/motiond/joints"]
    assert len(loop) == len(joints) == len(rows)
    dofs = [c[: -len(".commanded")] for c in rows[0] if c.endswith(".commanded")]
    first = loop[0]["tick"]
    for row, lp, j in zip(rows, loop, joints):
        assert lp["tick"] - first == int(row["tick"]) and lp["state"] == row["state"]
        for d in dofs:
            assert j[d]["commanded"] == float(row[f"{d}.commanded"]), (row["tick"], d)
            assert j[d]["measured"] == float(row[f"{d}.measured"]), (row["tick"], d)
    events = [v for t, _, v in messages if t == "/motiond/events"]
    assert events[0]["message"] == f"state {rows[0]['state']}"
    assert any("elbow_pitch" in e["message"] for e in events if e["kind"] == "fault"), events
    # Each state change in the CSV is an event at its tick.
    changes = [(first + int(b["tick"]), b["state"]) for a, b in zip(rows, rows[1:]) if a["state"] != b["state"]]
    assert [(e["tick"], e["state"]) for e in events[1:] if e["kind"] == "state"] == changes


def test_a_fault_in_the_daemon_leaves_a_file_whose_last_record_is_the_fault(tmp_path):
    flight = tmp_path / "flight"
    config = tmp_path / "motiond.yaml"
    config.write_text(
        f"robot:\n  model: {ROOT / 'config' / 'demo-arm.skel'}\n"
        f"motion:\n  library: {ROOT / 'config' / 'motions'}\n"
        "rt:\n  lock_memory: false\n  max_late_ms: 250\n"
        "sim:\n  fault: {kind: error, at_tick: 3000, dof: elbow_pitch}\n"
        f"recorder:\n  seconds: 2\n  dir: {flight}\n"
    )
    serve = Serve(config, tmp_path)
    # A request the loop refuses: it goes into the record with who sent it all the same.
    assert serve.request(cmd="resume")["error"]["code"] == "refused"
    dumped = serve.request(cmd="dump")
    assert dumped["ok"], dumped
    assert pathlib.Path(dumped["path"]).parent == flight and dumped["ticks"] > 0
    asked = read_mcap(pathlib.Path(dumped["path"]))
    requests = [v for t, _, v in asked if t == "/motiond/events" and v["kind"] == "request"]
    assert [r["message"].split(":")[0] for r in requests] == [f"request resume from uid {os.getuid()}"]
    assert requests[0]["uid"] == os.getuid()

    serve.wait_for(lambda s: s["state"] == "fault", what="faulted")
    deadline = time.monotonic() + 60
    while not list(flight.glob("*-fault.mcap")):
        assert time.monotonic() < deadline, f"no fault dump: {serve.log.read_text()}"
        time.sleep(0.05)
    [path] = flight.glob("*-fault.mcap")
    messages = read_mcap(path)
    topic, log_time, last = messages[-1]
    assert topic == "/motiond/events" and last["kind"] == "fault", last
    assert last["message"] == "fault: drive_fault on elbow_pitch (code 0x2310)"
    loop = [(lt, v) for t, lt, v in messages if t == "/motiond/loop"]
    assert loop[-1][1]["tick"] == last["tick"] and loop[-1][0] == log_time
    assert loop[-1][1]["state"] == "fault" and loop[-2][1]["state"] != "fault"
    ticks = [v["tick"] for _, v in loop]
    assert ticks == sorted(set(ticks))
    # Two seconds at 1 kHz, give or take what an overloaded machine skipped.
    assert 1000 < len(ticks) <= 2501
    assert str(path) in serve.log.read_text()
