//! `motiond inspect model|urdf|sdf|xode` and `--model` as an operator runs them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::process::Command;

fn motiond(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_motiond"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("motiond runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn inspect_model_and_its_aliases_print_the_same_json() {
    let (code, model, err) = motiond(&["inspect", "model", "config/demo-arm.urdf"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("URDF has no acceleration limits"), "{err}");
    for alias in ["urdf", "sdf", "xode"] {
        let (code, json, _) = motiond(&["inspect", alias, "config/demo-arm.urdf"]);
        assert_eq!((code, &json), (0, &model), "inspect {alias}");
    }
    let v: serde_json::Value = serde_json::from_str(&model).expect("JSON");
    assert_eq!(
        v["skeletons"][0]["joints"][1]["command_interface"],
        "position"
    );
    let (code, skel, _) = motiond(&["inspect", "model", "config/demo-arm.skel"]);
    let (_, direct, _) = motiond(&["inspect", "skel", "config/demo-arm.skel"]);
    assert_eq!((code, skel), (0, direct));
}

#[test]
fn fixed_base_welds_the_urdf_root() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("r.urdf");
    std::fs::write(&path, "<robot name='r'><link name='base'/></robot>").expect("write");
    let path = path.to_str().expect("UTF-8 path");
    let (_, floating, _) = motiond(&["inspect", "model", path]);
    let (_, fixed, _) = motiond(&["inspect", "model", "--fixed-base", path]);
    let kind = |s: &str| {
        serde_json::from_str::<serde_json::Value>(s).expect("JSON")["skeletons"][0]["joints"][0]["type"].clone()
    };
    assert_eq!(kind(&floating), "free");
    assert_eq!(kind(&fixed), "weld");
}

#[test]
fn a_refused_model_exits_2_with_positions_and_no_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("broken.urdf");
    std::fs::write(
        &path,
        "<robot name='r'><link name='a'/><link name='b'/>\n<joint name='j' type='revolute'><parent link='a'/><child link='b'/><limit effort='1' velocity='2rad'/></joint></robot>\n",
    )
    .expect("write");
    let (code, out, err) = motiond(&["inspect", "urdf", path.to_str().expect("UTF-8 path")]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    let line = format!(
        "{}:2:96: joint 'j': <limit> velocity: expected a number, found '2rad'",
        path.display()
    );
    assert!(err.starts_with(&line), "{err}");
}

#[test]
fn check_takes_any_model_with_model_or_skel() {
    let (code, _, err) = motiond(&[
        "check",
        "config/motions/wave.seq",
        "--config",
        "config/demo-arm-urdf.yaml",
    ]);
    assert_eq!(code, 0, "{err}");
    for flag in ["--model", "--skel"] {
        // Without a joint list the driven DOFs in DOF order are the columns; URDF states no
        // acceleration limits, so the motion is checked against position and velocity only.
        let (code, _, err) = motiond(&[
            "check",
            "config/motions/wave.seq",
            flag,
            "config/demo-arm.urdf",
        ]);
        assert_eq!(code, 0, "{flag}: {err}");
    }
}
