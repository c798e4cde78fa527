"""Writes a LeRobot dataset the way LeRobot lays one out, with pyarrow, for motiond's import tests.

    python3 write_dataset.py OUT_DIR SPEC_JSON

Format v3.0 (LeRobot's `dataset_writer.py` and `dataset_metadata.py`): `meta/info.json`;
`data/chunk-000/file-NNN.parquet` holding several episodes, one row group per episode, snappy,
dictionary encoding, the vectors as `fixed_size_list<float32>` (what `datasets.Sequence(length=n)`
becomes); `meta/episodes/chunk-000/file-000.parquet` with each episode's `data/chunk_index`,
`data/file_index`, `dataset_from_index`, `dataset_to_index`, `length`, `tasks` and a stats column;
`meta/tasks.parquet`. Format v2.1: one `data/chunk-000/episode_NNNNNN.parquet` per episode and
`meta/episodes.jsonl`.

Values are a smooth function of time per joint, at rest at both ends of an episode, in LeRobot's
units (degrees; the gripper 0-100).
The spec (JSON) can break the dataset the ways the tests need. Writes `OUT_DIR/expected.json`:
per episode the frames' time stamps and values as float64 of the stored float32 (what a reader
must see), and the values in radians as motiond must import them, computed here (degrees with
`math.radians`; a RANGE_0_100 joint as `lo + v / 100 * (hi - lo)` over its range in `ranges`).
"""

import json
import math
import struct
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos",
         "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]


def f32(x):
    """x rounded to float32 (to nearest, as numpy and pyarrow round), as float64: what a float32
    column holds."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def value(column, joint, name, t, duration):
    """At rest at both ends of the episode (a pick: out and back), as a recording that starts and
    ends with the arm still; the measured state lags a little behind the action."""
    shape = (1.0 - math.cos(2.0 * math.pi * t / duration)) / 2.0
    if column == "observation.state":
        shape *= 0.97
    if name.startswith("gripper"):
        return 10.0 + 80.0 * shape
    return (-1.0) ** joint * 50.0 * shape + 5.0 * joint


def main():
    out = Path(sys.argv[1])
    spec = json.loads(sys.argv[2])
    version = spec.get("version", "v3.0")
    fps = spec.get("fps", 30)
    names = spec.get("names", NAMES)
    lengths = spec.get("episodes", [40, 25, 60])
    per_file = spec.get("episodes_per_file", 2)
    dtype = pa.float64() if spec.get("dtype") == "float64" else pa.float32()
    ts_type = pa.float64() if spec.get("timestamp_dtype") == "float64" else pa.float32()
    drop_columns = set(spec.get("drop_columns", []))
    ranges = spec.get("ranges", {"gripper": [-0.174533, 1.74533]})
    compression = spec.get("compression", "snappy")
    # LeRobot's writer dictionary-encodes; plain encoding leaves each float32 in the file as it is
    # (the damaged-page test overwrites one).
    dictionary = spec.get("dictionary", True)
    width = len(names)
    columns = ["action", "observation.state"]

    episodes = []
    index = 0
    for ep, length in enumerate(lengths):
        frames = [f for f in range(length) if f not in spec.get("drop_frames", {}).get(str(ep), [])]
        duration = max(length - 1, 1) / fps
        rows = {c: [[f32(value(c, j, names[j], f / fps, duration)) for j in range(width)]
                    for f in frames]
                for c in columns}
        times = [f / fps for f in frames]
        for fault in spec.get("faults", []):
            if fault["episode"] != ep:
                continue
            if fault["kind"] == "value":
                rows[fault["column"]][fault["frame"]][fault["element"]] = float(fault["value"])
            elif fault["kind"] == "time":
                times[fault["frame"]] = float(fault["value"])
            elif fault["kind"] == "null":
                rows[fault["column"]][fault["frame"]] = None
        times = [t if isinstance(t, float) and math.isnan(t) else
                 (f32(t) if ts_type == pa.float32() else t) for t in times]
        episodes.append({"index": ep, "frames": frames, "rows": rows, "times": times,
                         "from": index, "to": index + len(frames)})
        index += len(frames)

    out.mkdir(parents=True, exist_ok=True)
    meta = out / "meta"
    meta.mkdir(exist_ok=True)
    vector = pa.list_(dtype, width)
    fields = [(c, vector) for c in columns] + [
        ("timestamp", ts_type), ("frame_index", pa.int64()), ("episode_index", pa.int64()),
        ("index", pa.int64()), ("task_index", pa.int64())]
    schema = pa.schema([f for f in fields if f[0] not in drop_columns])

    def table(ep):
        data = {c: ep["rows"][c] for c in columns}
        data.update(timestamp=ep["times"], frame_index=ep["frames"],
                    episode_index=[ep["index"]] * len(ep["frames"]),
                    index=list(range(ep["from"], ep["to"])), task_index=[0] * len(ep["frames"]))
        return pa.table({k: v for k, v in data.items() if k not in drop_columns}, schema=schema)

    features = {c: {"dtype": "float64" if dtype == pa.float64() else "float32",
                    "shape": [width], "names": names} for c in columns}
    features.update({
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    })
    for key, ft in spec.get("features", {}).items():
        if ft is None:
            features.pop(key, None)
        else:
            features[key] = ft
    info = {
        "codebase_version": version, "robot_type": "so101_follower",
        "total_episodes": len(episodes), "total_frames": index, "total_tasks": 1,
        "chunks_size": 1000, "fps": fps, "splits": {"train": f"0:{len(episodes)}"},
        "features": features,
    }
    if version == "v3.0":
        info.update(data_files_size_in_mb=100, video_files_size_in_mb=200,
                    data_path="data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
                    video_path=None)
        episode_rows = []
        for start in range(0, len(episodes), per_file):
            file_index = start // per_file
            path = out / "data" / "chunk-000" / f"file-{file_index:03d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            with pq.ParquetWriter(str(path), schema, compression=compression,
                                  use_dictionary=dictionary) as writer:
                for ep in episodes[start:start + per_file]:
                    writer.write_table(table(ep))
                    episode_rows.append({
                        "episode_index": ep["index"], "tasks": ["pick the cube"],
                        "length": len(ep["frames"]), "data/chunk_index": 0,
                        "data/file_index": file_index, "dataset_from_index": ep["from"],
                        "dataset_to_index": ep["to"],
                        "stats/action/min": [min(r[j] for r in ep["rows"]["action"] if r)
                                             for j in range(width)] if ep["frames"] else [],
                        "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        for fault in spec.get("episode_faults", []):
            episode_rows[fault["row"]][fault["key"]] = fault["value"]
        if spec.get("drop_episodes_meta"):
            episode_rows = [r for r in episode_rows
                            if r["episode_index"] not in spec["drop_episodes_meta"]]
        path = meta / "episodes" / "chunk-000" / "file-000.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(episode_rows, schema=pa.schema([
            ("episode_index", pa.int64()), ("tasks", pa.list_(pa.string())),
            ("length", pa.int64()), ("data/chunk_index", pa.int64()),
            ("data/file_index", pa.int64()), ("dataset_from_index", pa.int64()),
            ("dataset_to_index", pa.int64()), ("stats/action/min", pa.list_(pa.float64())),
            ("meta/episodes/chunk_index", pa.int64()), ("meta/episodes/file_index", pa.int64()),
        ])), str(path), compression=compression)
        pq.write_table(pa.table({"task_index": [0], "task": ["pick the cube"]}),
                       str(meta / "tasks.parquet"))
    else:
        info.update(total_chunks=1, total_videos=0,
                    data_path="data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
                    video_path=None)
        for ep in episodes:
            path = out / "data" / "chunk-000" / f"episode_{ep['index']:06d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table(ep), str(path), compression=compression)
        with open(meta / "episodes.jsonl", "w") as f:
            for ep in episodes:
                f.write(json.dumps({"episode_index": ep["index"], "tasks": ["pick the cube"],
                                    "length": len(ep["frames"])}) + "\n")
        with open(meta / "tasks.jsonl", "w") as f:
            f.write(json.dumps({"task_index": 0, "task": "pick the cube"}) + "\n")
    with open(meta / "info.json", "w") as f:
        json.dump(info, f, indent=4)

    def radians(name, v):
        joint = name.removesuffix(".pos")
        if joint in ranges:
            lo, hi = ranges[joint]
            return lo + v / 100.0 * (hi - lo)
        return math.radians(v)

    # Numbers as repr (shortest round trip) in strings: the comparison is exact, not at the mercy
    # of a JSON reader's float parsing.
    def text(rows):
        return [[repr(v) for v in r] if r else None for r in rows]

    expected = {}
    for ep in episodes:
        entry = {"times": [repr(t) for t in ep["times"]]}
        for c in columns:
            entry[c] = text(ep["rows"][c])
            entry[c + ":rad"] = text([[radians(names[j], v) for j, v in enumerate(r)] if r else None
                                      for r in ep["rows"][c]])
        expected[str(ep["index"])] = entry
    with open(out / "expected.json", "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main()
