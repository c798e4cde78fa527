//! `motiond import lerobot` on LeRobot datasets written by pyarrow in LeRobot's layouts
//! (`tests/lerobot/write_dataset.py`: v3.0 with several episodes a file and one row group an
//! episode, v2.1 with a file an episode): the values equal the dataset's after unit conversion
//! (computed by the script, in Python), frames keep the dataset's timing, and every kind of bad
//! input is refused naming the file, the column and the row.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use motiond::motion::lerobot::{self, Dataset, Error, Frames, Imported, Joint};
use serde_json::{Value, json};

const MOTIOND: &str = env!("CARGO_BIN_EXE_motiond");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `$MOTIOND_PYTHON` (default `python3`) if it can import pyarrow; `None` to skip outside CI.
fn python() -> Option<String> {
    let python = std::env::var("MOTIOND_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import pyarrow"])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(python);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{python} cannot import pyarrow (CI=true): .ci/run installs it");
    }
    eprintln!("skipping: {python} cannot import pyarrow");
    None
}

/// A dataset written by the script from `spec`, and what it says the import must give.
struct Written {
    dir: tempfile::TempDir,
    expected: Value,
}

impl Written {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn floats(&self, episode: u64, key: &str) -> Vec<Vec<f64>> {
        self.expected[episode.to_string()][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().parse().unwrap())
                    .collect()
            })
            .collect()
    }

    fn times(&self, episode: u64) -> Vec<f64> {
        self.expected[episode.to_string()]["times"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().parse().unwrap())
            .collect()
    }
}

fn write(spec: Value) -> Option<Written> {
    let python = python()?;
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(root().join("tests/lerobot/write_dataset.py"))
        .arg(dir.path())
        .arg(spec.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "write_dataset.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("expected.json")).unwrap())
            .unwrap();
    Some(Written { dir, expected })
}

/// The SO-101's joints as `so101_new_calib.urdf` limits them, in LeRobot's motor order.
fn so101() -> Vec<Joint> {
    [
        ("shoulder_pan", -1.91986, 1.91986),
        ("shoulder_lift", -1.74533, 1.74533),
        ("elbow_flex", -1.69, 1.69),
        ("wrist_flex", -1.65806, 1.65806),
        ("wrist_roll", -2.74385, 2.84121),
        ("gripper", -0.174533, 1.74533),
    ]
    .into_iter()
    .map(|(name, lower, upper)| Joint {
        name: name.into(),
        lower,
        upper,
    })
    .collect()
}

fn import(dir: &Path, episode: u64, column: &str, joints: &[Joint]) -> Result<Imported, Error> {
    let dataset = Dataset::open(dir)?;
    let read = dataset.read(episode, column)?;
    lerobot::convert(
        dataset.info_path(),
        &read,
        dataset.fps(),
        joints,
        &["gripper".to_string()],
    )
}

fn rows(imported: &Imported) -> Vec<Vec<f64>> {
    imported
        .rows
        .chunks(imported.joint_names.len())
        .map(<[f64]>::to_vec)
        .collect()
}

#[test]
fn v3_episodes_import_with_the_values_converted_exactly() {
    let Some(data) = write(json!({})) else { return };
    let dataset = Dataset::open(data.path()).unwrap();
    assert_eq!((dataset.version(), dataset.fps()), ("v3.0", 30.0));
    // Episodes 0 and 1 share file-000 (one row group each), episode 2 is in file-001.
    for episode in 0..3 {
        for column in ["action", "observation.state"] {
            let read = dataset.read(episode, column).unwrap();
            assert_eq!(
                read.values
                    .chunks(6)
                    .map(<[f64]>::to_vec)
                    .collect::<Vec<_>>(),
                data.floats(episode, column)
            );
            assert_eq!(read.times, data.times(episode));
            let imported = import(data.path(), episode, column, &so101()).unwrap();
            assert_eq!(
                rows(&imported),
                data.floats(episode, &format!("{column}:rad")),
                "episode {episode} {column}"
            );
            assert_eq!(imported.frames, Frames::Fixed { fps: 30.0 });
            assert_eq!(
                imported.joint_names,
                [
                    "shoulder_pan",
                    "shoulder_lift",
                    "elbow_flex",
                    "wrist_flex",
                    "wrist_roll",
                    "gripper"
                ]
            );
        }
    }
    assert_eq!(
        dataset.read(1, "action").unwrap().file,
        data.path().join("data/chunk-000/file-000.parquet")
    );
    assert_eq!(
        dataset.read(2, "action").unwrap().file,
        data.path().join("data/chunk-000/file-001.parquet")
    );
}

#[test]
fn columns_follow_the_robots_order_not_the_datasets() {
    let Some(data) = write(json!({"episodes": [12]})) else {
        return;
    };
    let mut joints = so101();
    joints.reverse();
    let imported = import(data.path(), 0, "action", &joints).unwrap();
    let expected: Vec<Vec<f64>> = data
        .floats(0, "action:rad")
        .into_iter()
        .map(|mut r| {
            r.reverse();
            r
        })
        .collect();
    assert_eq!(rows(&imported), expected);
    assert_eq!(imported.joint_names[0], "gripper");
}

#[test]
fn dropped_frames_make_a_variable_interval_motion() {
    let spec = json!({"episodes": [30, 20], "drop_frames": {"1": [4, 5, 11]}});
    let Some(data) = write(spec) else { return };
    let imported = import(data.path(), 1, "action", &so101()).unwrap();
    assert_eq!(imported.frame_count(), 17);
    assert_eq!(
        imported.frames,
        Frames::Timed {
            fps: 30.0,
            times: data.times(1)
        }
    );
    assert_eq!(rows(&imported), data.floats(1, "action:rad"));
    // Episode 0 kept every frame.
    let whole = import(data.path(), 0, "action", &so101()).unwrap();
    assert_eq!(whole.frames, Frames::Fixed { fps: 30.0 });
}

#[test]
fn float64_values_and_time_stamps_are_read_too() {
    let spec = json!({"dtype": "float64", "timestamp_dtype": "float64", "episodes": [15, 15]});
    let Some(data) = write(spec) else { return };
    let imported = import(data.path(), 1, "observation.state", &so101()).unwrap();
    assert_eq!(rows(&imported), data.floats(1, "observation.state:rad"));
    assert_eq!(imported.frames, Frames::Fixed { fps: 30.0 });
}

#[test]
fn v2_1_datasets_import_the_same() {
    let Some(data) = write(json!({"version": "v2.1", "episodes": [20, 35]})) else {
        return;
    };
    let dataset = Dataset::open(data.path()).unwrap();
    assert_eq!(dataset.version(), "v2.1");
    for episode in 0..2 {
        let imported = import(data.path(), episode, "action", &so101()).unwrap();
        assert_eq!(rows(&imported), data.floats(episode, "action:rad"));
        assert_eq!(imported.frames, Frames::Fixed { fps: 30.0 });
    }
    assert_eq!(
        dataset.read(1, "action").unwrap().file,
        data.path().join("data/chunk-000/episode_000001.parquet")
    );
    let err = import(data.path(), 2, "action", &so101()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NoEpisode {
                episode: 2,
                count: 2,
                ..
            }
        ),
        "{err}"
    );
}

/// The error of importing `episode`'s `column` from a dataset written from `spec`, as text.
fn refusal(spec: Value, episode: u64, column: &str) -> Option<(Written, String)> {
    let data = write(spec)?;
    let err = import(data.path(), episode, column, &so101())
        .expect_err("the import should be refused")
        .to_string();
    Some((data, err))
}

fn has(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "{n:?} not in: {text}");
    }
}

#[test]
fn a_missing_column_is_named_with_the_file() {
    let spec = json!({"drop_columns": ["observation.state"]});
    let Some((data, err)) = refusal(spec, 1, "observation.state") else {
        return;
    };
    let file = data.path().join("data/chunk-000/file-000.parquet");
    has(
        &err,
        &[
            &format!("{}: no column `observation.state`", file.display()),
            "`action`",
        ],
    );
    let spec = json!({"drop_columns": ["timestamp"]});
    let Some((_, err)) = refusal(spec, 0, "action") else {
        return;
    };
    has(&err, &["no column `timestamp`"]);
    // A feature info.json does not list.
    let spec = json!({"features": {"observation.state": null}});
    let Some((data, err)) = refusal(spec, 0, "observation.state") else {
        return;
    };
    let info = data.path().join("meta/info.json");
    has(
        &err,
        &[&format!(
            "{}: no feature `observation.state`",
            info.display()
        )],
    );
}

#[test]
fn unknown_and_missing_joints_are_refused() {
    let mut names: Vec<&str> = vec![
        "shoulder_pan.pos",
        "shoulder_lift.pos",
        "elbow.pos",
        "wrist_flex.pos",
        "wrist_roll.pos",
        "gripper.pos",
    ];
    let Some((data, err)) = refusal(json!({"names": names}), 0, "action") else {
        return;
    };
    let info = data.path().join("meta/info.json");
    has(
        &err,
        &[
            &format!(
                "{}: feature `action` element 2 `elbow.pos` is not a joint of the robot",
                info.display()
            ),
            "`elbow_flex`",
        ],
    );
    names.truncate(5);
    names[2] = "elbow_flex.pos";
    let Some((_, err)) = refusal(json!({"names": names}), 0, "action") else {
        return;
    };
    has(&err, &["has no element for the robot's joint `gripper`"]);
    // The same joint twice.
    let twice = [
        "shoulder_pan.pos",
        "shoulder_pan.pos",
        "elbow_flex.pos",
        "wrist_flex.pos",
        "wrist_roll.pos",
        "gripper.pos",
    ];
    let Some((_, err)) = refusal(json!({"names": twice}), 0, "action") else {
        return;
    };
    has(&err, &["element 1 `shoulder_pan.pos` is not a joint"]);
}

#[test]
fn an_episode_that_does_not_exist_is_refused() {
    let Some((data, err)) = refusal(json!({}), 7, "action") else {
        return;
    };
    let dir = data.path().join("meta/episodes");
    has(
        &err,
        &[
            &format!(
                "{}: episode 7 is not in the dataset (it lists 3 episodes, the last is 2)",
                dir.display()
            ),
            "--episode",
        ],
    );
    // Listed in meta/episodes but with no rows in its data file.
    let spec = json!({"episode_faults": [{"row": 1, "key": "data/file_index", "value": 1}]});
    let Some((data, err)) = refusal(spec, 1, "action") else {
        return;
    };
    let file = data.path().join("data/chunk-000/file-001.parquet");
    has(
        &err,
        &[&format!(
            "{}: episode 1: the data file holds no row of it",
            file.display()
        )],
    );
    // Its row count disagrees with the metadata.
    let spec = json!({"episode_faults": [{"row": 1, "key": "dataset_to_index", "value": 60}]});
    let Some((_, err)) = refusal(spec, 1, "action") else {
        return;
    };
    has(
        &err,
        &["episode 1: the data file holds 25 rows of it; the episode metadata says 20"],
    );
    // A data file that was not downloaded.
    let data = write(json!({}));
    let Some(data) = data else { return };
    std::fs::remove_file(data.path().join("data/chunk-000/file-001.parquet")).unwrap();
    let err = import(data.path(), 2, "action", &so101())
        .unwrap_err()
        .to_string();
    has(
        &err,
        &[
            "file-001.parquet",
            "huggingface-cli download --repo-type dataset",
        ],
    );
}

#[test]
fn non_finite_and_null_values_name_the_file_column_and_row() {
    for (value, shown) in [("nan", "NaN"), ("inf", "inf"), ("-inf", "-inf")] {
        let spec = json!({"faults": [{"kind": "value", "episode": 1, "frame": 3,
                                      "column": "action", "element": 2, "value": value}]});
        let Some((data, err)) = refusal(spec, 1, "action") else {
            return;
        };
        let file = data.path().join("data/chunk-000/file-000.parquet");
        // Episode 0 has 40 rows before it in the file.
        has(
            &err,
            &[&format!(
                "{}: column `action`, row 43 (frame_index 3): element 2 `elbow_flex.pos` is {shown}",
                file.display()
            )],
        );
    }
    let spec = json!({"faults": [{"kind": "null", "episode": 2, "frame": 5, "column": "observation.state"}]});
    let Some((data, err)) = refusal(spec, 2, "observation.state") else {
        return;
    };
    let file = data.path().join("data/chunk-000/file-001.parquet");
    has(
        &err,
        &[&format!(
            "{}: column `observation.state`, row 5 (frame_index 5): null",
            file.display()
        )],
    );
    // The other column of that file still imports.
    import(data.path(), 2, "action", &so101()).unwrap();
    let spec = json!({"faults": [{"kind": "time", "episode": 0, "frame": 9, "value": "nan"}]});
    let Some((_, err)) = refusal(spec, 0, "action") else {
        return;
    };
    has(
        &err,
        &["column `timestamp`, row 9 (frame_index 9): NaN is not a finite time"],
    );
    let spec = json!({"faults": [{"kind": "time", "episode": 0, "frame": 9, "value": 0.1}]});
    let Some((_, err)) = refusal(spec, 0, "action") else {
        return;
    };
    has(
        &err,
        &[
            "column `timestamp`, row 9 (frame_index 9): 0.10000000149011612 s is not after the previous frame's",
        ],
    );
}

#[test]
fn a_value_changed_inside_a_page_is_caught_by_the_writers_statistics() {
    // Plain encoding, no compression: each float32 lies in the file as written, so one can be
    // overwritten the way a damaged disk block or download would (no page checksum tells).
    let Some(data) = write(json!({"episodes": [20], "compression": "none", "dictionary": false}))
    else {
        return;
    };
    let file = data.path().join("data/chunk-000/file-000.parquet");
    let mut bytes = std::fs::read(&file).unwrap();
    // Frame 5's first action value (the first time it occurs: the episode is symmetric).
    let stored = (data.floats(0, "action")[5][0] as f32).to_le_bytes();
    let at = bytes.windows(4).position(|w| w == stored).unwrap();
    bytes[at..at + 4].copy_from_slice(&1e30f32.to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let err = import(data.path(), 0, "action", &so101())
        .expect_err("a damaged page must not import")
        .to_string();
    has(
        &err,
        &[
            &file.display().to_string(),
            // The float32 1e30, widened.
            "column `action`, row 5: element 0, 1.0000000150474662e30 is outside [",
            "the range the file's writer recorded for this column in row group 0: the file is damaged",
        ],
    );
}

#[test]
fn bad_metadata_is_refused_with_its_place() {
    let Some(data) = write(json!({"episodes": [5]})) else {
        return;
    };
    let info = data.path().join("meta/info.json");
    let text = std::fs::read_to_string(&info).unwrap();
    for (from, to, needle) in [
        (
            "\"v3.0\"",
            "\"v1.6\"",
            ":1:1: codebase_version \"v1.6\" is not a LeRobot dataset format",
        ),
        ("\"fps\": 30", "\"fps\": 0", ":1:1: fps is 0"),
        // Out of range and shown as typed, not as 309 digits (outside tester).
        (
            "\"fps\": 30",
            "\"fps\": 1e308",
            ":1:1: fps is 1e308; expected a positive number of frames per second, at most 100000",
        ),
        ("\"fps\": 30,", "\"fps\": 30", ":"),
        (
            "\"shape\": [\n                6\n            ]",
            "\"shape\": [\n                7\n            ]",
            "feature `action` shape [7] does not hold its 6 names",
        ),
        (
            "\"names\": [\n                \"shoulder_pan.pos\"",
            "\"nomen\": [\n                \"shoulder_pan.pos\"",
            "feature `action` has no `names` list",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        std::fs::write(&info, text.replacen(from, to, 1)).unwrap();
        let err = import(data.path(), 0, "action", &so101())
            .unwrap_err()
            .to_string();
        has(&err, &[&info.display().to_string(), needle]);
        std::fs::write(&info, &text).unwrap();
    }
    // Broken JSON: the position of the problem.
    std::fs::write(&info, text.replacen("\"fps\": 30,", "\"fps\": 30", 1)).unwrap();
    let err = import(data.path(), 0, "action", &so101())
        .unwrap_err()
        .to_string();
    assert!(err.starts_with(&format!("{}:", info.display())), "{err}");
    assert!(err.contains("expected `,` or `}`"), "{err}");
}

#[test]
fn a_compression_lerobot_does_not_write_is_named() {
    let Some((_, err)) = refusal(json!({"compression": "zstd"}), 0, "action") else {
        return;
    };
    has(&err, &["not a parquet file motiond can read", "snappy"]);
}

#[test]
fn a_gripper_without_a_finite_range_is_refused() {
    let Some(data) = write(json!({"episodes": [5]})) else {
        return;
    };
    let mut joints = so101();
    joints[5].upper = f64::INFINITY;
    let err = import(data.path(), 0, "action", &joints)
        .unwrap_err()
        .to_string();
    has(
        &err,
        &[
            "joint `gripper`: recorded 0–100 over its range, but its position range is [-0.174533, inf]",
        ],
    );
}

/// The command line end to end: the SO-101 model, the .seq it writes loads with the joints'
/// names and the same values; a refusal exits 2 with the message on stderr.
#[test]
fn the_command_writes_a_seq_for_the_robot() {
    let spec = json!({"episodes": [30, 20], "drop_frames": {"1": [7]}});
    let Some(data) = write(spec) else { return };
    let model = root().join("config/so101/so101_new_calib.urdf");
    let out_dir = tempfile::tempdir().unwrap();
    for (episode, timed) in [(0u64, false), (1, true)] {
        let out = out_dir.path().join(format!("episode{episode}.seq"));
        let run = Command::new(MOTIOND)
            .args(["import", "lerobot"])
            .arg(data.path())
            .args(["--episode", &episode.to_string(), "--model"])
            .arg(&model)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        assert!(
            stderr.contains(if timed {
                "variable interval"
            } else {
                "at 30 fps"
            }),
            "{stderr}"
        );
        let motion = motiond::motion::seq::load(&out).unwrap();
        let jd = motion.joint_displacement().unwrap();
        assert_eq!(jd.timing.is_timed(), timed);
        let got: Vec<Vec<f64>> = jd.values.chunks(6).map(<[f64]>::to_vec).collect();
        assert_eq!(got, data.floats(episode, "action:rad"));
        assert_eq!(
            motion.joint_names().unwrap(),
            [
                "shoulder_pan",
                "shoulder_lift",
                "elbow_flex",
                "wrist_flex",
                "wrist_roll",
                "gripper"
            ]
        );
    }
    let run = Command::new(MOTIOND)
        .args(["import", "lerobot"])
        .arg(data.path())
        .args(["--episode", "9", "--model"])
        .arg(&model)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("episode 9 is not in the dataset"),
        "{stderr}"
    );
    assert!(run.stdout.is_empty());
}
