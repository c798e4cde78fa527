//! What operators are told when something is off, from the outside tester's findings
//! (tests/outside/README.md): a daemon that never answers, numbers far out of range echoed in
//! full, output files into folders that do not exist. Each case runs the shipped binaries.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where an invariant breaks"
)]

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MOTIOND: &str = env!("CARGO_BIN_EXE_motiond");
const MOTIONCTL: &str = env!("CARGO_BIN_EXE_motionctl");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(program: &str, args: &[&str]) -> (i32, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(program).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&stdout).into_owned() + &String::from_utf8_lossy(&stderr);
    (status.code().unwrap_or(-1), text)
}

/// A run of 20 or more digits: a number written out in full.
fn long_number(text: &str) -> Option<&str> {
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_ascii_digit(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) if i - s >= 20 => return Some(&text[s..i]),
            (false, Some(_)) => start = None,
            _ => {}
        }
    }
    start.filter(|s| text.len() - s >= 20).map(|s| &text[s..])
}

fn short_numbers(text: &str) {
    assert!(long_number(text).is_none(), "a number in full: {text}");
}

/// A "daemon" that takes connections and never answers: the listen backlog holds them.
fn silent_socket(dir: &Path) -> (UnixListener, PathBuf) {
    let path = dir.join("silent.sock");
    (UnixListener::bind(&path).unwrap(), path)
}

#[test]
fn a_daemon_that_never_answers_is_named_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let (_listener, socket) = silent_socket(dir.path());
    let socket = socket.to_str().unwrap();
    // A short --timeout: the test waits a fifth of a second, not the 5 s default.
    let (code, text) = run(
        MOTIONCTL,
        &["--socket", socket, "--timeout", "0.2", "status"],
    );
    assert_eq!(code, 5, "{text}");
    assert!(
        text.contains(&format!(
            "the daemon at {socket} did not answer `status` within 0.2 s; is it hung or \
             overloaded? Check `systemctl status motiond` and `journalctl -u motiond -e`; a slow \
             request can be given more time with --timeout SECONDS"
        )),
        "{text}"
    );
    assert!(!text.contains("os error"), "{text}");
    // A stop says the robot may still be moving, and no more time is offered.
    let (code, text) = run(MOTIONCTL, &["--socket", socket, "--timeout", "0.2", "stop"]);
    assert_eq!(code, 5, "{text}");
    assert!(
        text.contains(
            "did not answer `stop` within 0.2 s (the robot may still be moving: use the E-stop)"
        ),
        "{text}"
    );
    assert!(!text.contains("--timeout"), "{text}");
    // The option is checked like every other.
    let (code, text) = run(
        MOTIONCTL,
        &["--socket", socket, "--timeout", "1e308", "stop"],
    );
    assert_eq!(code, 2, "{text}");
}

#[test]
fn out_of_range_numbers_are_echoed_as_given() {
    let dir = tempfile::tempdir().unwrap();
    // Over the control protocol (a rehearsal answers as the daemon does).
    let script = dir.path().join("huge.yaml");
    std::fs::write(
        &script,
        "steps:\n\
         - {at: 0.1, request: {cmd: play, motion: wave, speed: 1e308}}\n\
         - {at: 0.2, request: {cmd: play, motion: wave, at: 1e300}}\n\
         - {at: 0.3, request: {cmd: record, motion: x, rate_hz: 1e308}}\n\
         - {at: 0.4, request: {cmd: stream_open, horizon_s: 1e308}}\n\
         - {at: 0.5, request: {cmd: stream_chunk, seq: 1, positions: [[0]], dt: 1e308}}\n",
    )
    .unwrap();
    let config = repo().join("config/motiond.yaml");
    let (_, text) = run(
        MOTIOND,
        &[
            "rehearse",
            script.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    for needle in [
        r#"play: \"speed\" must be in (0, 10], got 1e308"#,
        r#"\"at\": 1e300 is 1e300 s ahead"#,
        "request play wave --at 1e300 from",
        r#"record: \"rate_hz\" must be 0.1 to 8000 frames per second, got 1e308"#,
        r#"\"horizon_s\" must be in [0, 10] s, got 1e308"#,
        r#"\"dt\" must be in [0.0001, 1] s, got 1e308"#,
    ] {
        assert!(text.contains(needle), "{needle} not in: {text}");
    }
    short_numbers(&text);
    // In a rehearsal script.
    std::fs::write(&script, "steps:\n- {at: 1e308, request: {cmd: status}}\n").unwrap();
    let (code, text) = run(MOTIOND, &["rehearse", script.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("steps[0].at: 1e308 is outside 0 ..= 86400"),
        "{text}"
    );
    // In the configuration: a float where a whole number belongs, and limits.
    let yaml = std::fs::read_to_string(&config).unwrap();
    let broken = dir.path().join("motiond.yaml");
    for (from, to, needle) in [
        ("  cpu: 1 ", "  cpu: 1e308 ", "rt.cpu: 1e308 is not"),
        (
            "{velocity: 2.0,",
            "{velocity: 1e308,",
            "may only be tightened: [-1e308, 1e308]",
        ),
    ] {
        assert!(yaml.contains(from), "{from}");
        let text = yaml
            .replace(from, to)
            .replace(
                "model: demo-arm.skel",
                &format!("model: {}/config/demo-arm.skel", repo().display()),
            )
            .replace(
                "library: motions",
                &format!("library: {}/config/motions", repo().display()),
            );
        std::fs::write(&broken, text).unwrap();
        let wave = repo().join("config/motions/wave.seq");
        let (code, text) = run(
            MOTIOND,
            &[
                "check",
                "--config",
                broken.to_str().unwrap(),
                wave.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 2, "{text}");
        assert!(text.contains(needle), "{needle} not in: {text}");
        short_numbers(&text);
    }
    // In a motion: the proof's table of ranges and limits.
    let wave = std::fs::read_to_string(repo().join("config/motions/wave.seq")).unwrap();
    let row = wave
        .lines()
        .find(|l| l.trim_start().starts_with("- ["))
        .unwrap();
    // The row's first value becomes 1e30.
    let open = row.find('[').unwrap();
    let comma = open + row[open..].find(',').unwrap();
    let huge = format!("{}1e30{}", &row[..=open], &row[comma..]);
    let seq = dir.path().join("huge.seq");
    std::fs::write(&seq, wave.replacen(row, &huge, 1)).unwrap();
    let (code, text) = run(
        MOTIOND,
        &[
            "check",
            "--config",
            config.to_str().unwrap(),
            seq.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("1e30"), "{text}");
    short_numbers(&text);
}

#[test]
fn output_files_into_missing_folders_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such");
    let file = |name: &str| missing.join(name).to_str().unwrap().to_string();
    let wave = repo().join("config/motions/wave.seq");
    let wave = wave.to_str().unwrap();
    let rehearsal = repo().join("config/rehearse/play-and-stop.yaml");
    let rehearsal = rehearsal.to_str().unwrap();
    let dataset = dir.path().to_str().unwrap();
    let folder = missing.to_str().unwrap();
    for (program, args, option) in [
        (
            MOTIOND,
            vec!["play", wave, "--dry-run", "--trace", &file("t.csv")],
            "play: --trace",
        ),
        (
            MOTIOND,
            vec!["play", wave, "--dry-run", "--plot", &file("t.svg")],
            "play: --plot",
        ),
        (
            MOTIOND,
            vec!["check", wave, "--plot", &file("t.svg")],
            "check: --plot",
        ),
        (
            MOTIOND,
            vec!["rehearse", rehearsal, "--trace", &file("t.mcap")],
            "rehearse: --trace",
        ),
        (
            MOTIOND,
            vec!["resample", wave, "-o", &file("t.seq")],
            "resample: --output",
        ),
        (
            MOTIOND,
            vec![
                "import",
                "lerobot",
                dataset,
                "--episode",
                "0",
                "-o",
                &file("t.seq"),
            ],
            "import: --output",
        ),
        (MOTIOND, vec!["man", "--dir", folder], "man --dir"),
        (MOTIONCTL, vec!["man", "--dir", folder], "man --dir"),
    ] {
        let (code, text) = run(program, &args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            text.contains(&format!(
                "{option} {}: the folder {folder} does not exist; create it (`mkdir -p {folder}`) \
                 or choose another",
                if option.contains("--dir") {
                    folder.to_string()
                } else {
                    args.last().unwrap().to_string()
                }
            )),
            "{args:?}: {text}"
        );
    }
    // A folder where a file belongs.
    let (code, text) = run(MOTIOND, &["play", wave, "--dry-run", "--trace", dataset]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains(&format!(
            "--trace {dataset}: is a folder; give a file name inside it"
        )),
        "{text}"
    );
}

/// A robot model the configuration names but that is not there was reported as "PATH: No such
/// file or directory" with no FILE:LINE:COL of the key nor what to do.
#[test]
fn a_missing_model_file_is_placed_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = std::fs::read_to_string(repo().join("config/motiond.yaml"))
        .unwrap()
        .replace("model: demo-arm.skel", "model: nothere.urdf");
    let (line, col) = yaml
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("nothere.urdf").map(|c| (i + 1, c + 1)))
        .unwrap();
    let config = dir.path().join("motiond.yaml");
    std::fs::write(&config, yaml).unwrap();
    let wave = repo().join("config/motions/wave.seq");
    let (code, text) = run(
        MOTIOND,
        &[
            "check",
            wave.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{text}");
    let expected = format!(
        "{}:{line}:{col}: robot.model: {} (relative paths are resolved against {}, the folder of \
         {}): No such file or directory (os error 2); correct robot.model, or put the robot's \
         model file (.skel, .urdf, .sdf or .xode) there",
        config.display(),
        dir.path().join("nothere.urdf").display(),
        dir.path().display(),
        config.display()
    );
    assert!(text.contains(&expected), "{text}");
}

/// Takes could be named `-x`, ` x` or `x ` (an option on every command line later, unreadable in
/// listings). Both the socket and motionctl refuse them, naming the rule.
#[test]
fn motion_names_follow_one_rule() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("names.yaml");
    std::fs::write(
        &script,
        "steps:\n\
         - {at: 0.1, request: {cmd: record, motion: '-x'}}\n\
         - {at: 0.2, request: {cmd: record, motion: ' x'}}\n\
         - {at: 0.3, request: {cmd: record, motion: 'x '}}\n\
         - {at: 0.4, request: {cmd: record, motion: \"a\\tb\"}}\n",
    )
    .unwrap();
    let config = repo().join("config/motiond.yaml");
    let (_, text) = run(
        MOTIOND,
        &[
            "rehearse",
            script.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let rule = "a motion name starts with a letter or a digit and holds only letters, digits, `_`, \
                `-` and `.`";
    for needle in [
        r#"\"-x\" does not start with a letter or a digit"#,
        r#"\" x\" does not start with a letter or a digit"#,
        r#"\"x \" contains a space"#,
        r#"\"a\\tb\" contains"#,
    ] {
        assert!(text.contains(needle), "{needle} not in: {text}");
    }
    assert_eq!(text.matches(rule).count(), 4, "{text}");
    assert!(!text.contains("\"ok\":true"), "{text}");
    // motionctl refuses before it connects.
    for name in ["-x", " x", "x "] {
        let (code, text) = run(
            MOTIONCTL,
            &["--socket", "/nonexistent.sock", "record", "--", name],
        );
        assert_eq!(code, 2, "{text}");
        assert!(text.contains(rule), "{text}");
    }
}
