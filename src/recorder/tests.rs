use super::*;
use crate::backend::{BackendError, FaultKind, Feedback};
use crate::robot::Limits;
use crate::rt::{EStop, RowHead, State};
use crate::trajectory::{DofLimits, Setpoint};

fn joints() -> JointSet {
    JointSet::uniform(
        2,
        DofLimits {
            position: Limits::symmetric(2.0),
            velocity: Limits::symmetric(2.0),
            acceleration: Limits::symmetric(20.0),
            effort: Limits::symmetric(100.0),
        },
    )
}

/// A ring of `ticks` rows: playing, then a stall on c1 at tick `fault_at`.
fn ring(ticks: u64, fault_at: u64) -> Arc<Trace> {
    let trace = Arc::new(Trace::new(2, 64));
    for k in 0..ticks {
        let p = k as f64 * 1e-3;
        let fault = (k >= fault_at).then_some(BackendError {
            kind: FaultKind::Stall,
            dof: Some(1),
            code: 0,
        });
        let head = RowHead {
            tick: 100 + k,
            state: if fault.is_some() {
                State::Fault
            } else {
                State::Playing
            },
            late_ns: 1500,
            exec_ns: 800,
            guard: 0,
            fault,
            estop: EStop::default(),
        };
        let sp = Setpoint {
            position: p,
            velocity: 1.0,
            acceleration: 0.0,
        };
        let fb = Feedback {
            position: p,
            velocity: 0.5,
            effort: 0.25,
            status: 1,
            error: 0,
            valid: true,
        };
        trace.record(&head, &[sp, sp], &[p - 1e-4, p], &[fb, fb]);
    }
    trace
}

/// Copies `rows` into `trace` as the loop records them.
fn replay(trace: &Trace, rows: &[TraceRow]) {
    for r in rows {
        let head = RowHead {
            tick: r.tick,
            state: r.state,
            late_ns: r.late_ns,
            exec_ns: r.exec_ns,
            guard: r.guard,
            fault: r.fault,
            estop: r.estop,
        };
        trace.record(&head, &r.commanded, &r.measured, &r.feedback);
    }
}

/// The one fault dump the recorder's thread writes into `dir`, once it is there (the thread runs
/// when a loaded machine lets it: a liveness bound, not a speed check).
fn fault_dump(dir: &Path) -> PathBuf {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let fault: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with("-fault.mcap"))
            .collect();
        if let [one] = fault.as_slice() {
            return one.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no fault dump in {} after 30 s: {fault:?}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn messages(path: &Path) -> Vec<(String, u64, serde_json::Value)> {
    let bytes = std::fs::read(path).unwrap();
    ::mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(|m| {
            let m = m.unwrap();
            (
                m.channel.topic.clone(),
                m.log_time,
                serde_json::from_slice(&m.data).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_fault_dump_holds_every_tick_up_to_the_fault_and_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let trace = ring(40, 30);
    let settings = Settings {
        seconds: 1.0,
        dir: dir.path().to_path_buf(),
        max_files: 5,
        max_bytes: 1 << 30,
    };
    let recorder = FlightRecorder::start(trace.clone(), joints(), 1000.0, settings).unwrap();
    recorder.request(1000, "play wave".into());
    // The ring was written before the recorder started looking: only a dump writes it.
    let dumped = recorder.dump(Duration::from_secs(10)).unwrap();
    assert_eq!((dumped.reason, dumped.ticks), ("dump", 40));
    let all = messages(&dumped.path);
    let ticks: Vec<u64> = all
        .iter()
        .filter(|(t, ..)| t == mcap::TOPIC_JOINTS)
        .map(|(_, _, v)| v["tick"].as_u64().unwrap())
        .collect();
    assert_eq!(ticks, (100..140).collect::<Vec<_>>());
    let (_, time, joint) = &all[3 * 30 + 1 + 1];
    assert_eq!(joint["tick"], 130);
    let p = 30.0 * 1e-3;
    assert_eq!(joint["c0"]["measured"], p - 1e-4);
    assert_eq!(joint["c0"]["following_error"], p - (p - 1e-4));
    // Tick times are the deadlines, one period apart.
    let first_time = all[1].1;
    assert_eq!(time - first_time, 30_000_000);

    // The same rows cut at the fault, as the recorder does on its own.
    let rows: Vec<TraceRow> = trace.latest(64).into_iter().take(31).collect();
    let events = events::from_rows(&rows, &joints());
    let path = dir.path().join("cut.mcap");
    let meta = mcap::Meta {
        joints: &joints(),
        rate_hz: 1000.0,
        epoch_ns: 1_800_000_000_000_000_000,
        reason: "fault",
    };
    write_file(&path, &meta, &rows, &events).unwrap();
    let all = messages(&path);
    let (topic, time, last) = all.last().unwrap();
    assert_eq!(topic, mcap::TOPIC_EVENTS);
    assert_eq!(last["kind"], "fault");
    assert_eq!(last["message"], "fault: stall on c1");
    assert_eq!(last["level"], 4);
    assert_eq!(*time, 1_800_000_000_000_000_000 + 130 * 1_000_000);
    let states: Vec<&str> = all
        .iter()
        .filter(|(t, _, v)| t == mcap::TOPIC_EVENTS && v["kind"] == "state")
        .map(|(_, _, v)| v["message"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["state playing", "state playing → fault"]);
}

#[test]
fn the_recorder_dumps_on_a_fault_by_itself_and_keeps_only_so_many_files() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..4 {
        std::fs::write(
            dir.path().join(format!(
                "motiond-2000-01-0{}T00-00-00.000Z-dump.mcap",
                i + 1
            )),
            [0u8; 10],
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("notes.txt"), "kept").unwrap();
    let trace = Arc::new(Trace::new(2, 64));
    let settings = Settings {
        seconds: 0.064,
        dir: dir.path().to_path_buf(),
        max_files: 3,
        max_bytes: 1 << 30,
    };
    let recorder = FlightRecorder::start(trace.clone(), joints(), 1000.0, settings).unwrap();
    // Rows arrive while it watches; the fault at the 30th.
    replay(&trace, &ring(40, 30).latest(64));
    let found = fault_dump(dir.path());
    let all = messages(&found);
    let last_tick = all
        .iter()
        .filter(|(t, ..)| t == mcap::TOPIC_LOOP)
        .map(|(_, _, v)| v["tick"].as_u64().unwrap())
        .max();
    assert_eq!(last_tick, Some(130));
    assert_eq!(all.last().unwrap().2["kind"], "fault");
    // The oldest dumps go once the new one is in place: waited for, not raced (the thread prunes
    // after the rename that makes the dump visible).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let left = loop {
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        if left.len() <= 4 {
            break left;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never pruned: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(left.len(), 4, "{left:?}");
    assert_eq!(left[0], "motiond-2000-01-03T00-00-00.000Z-dump.mcap");
    assert_eq!(left[3], "notes.txt");
    drop(recorder);
}

#[test]
fn a_fault_dump_keeps_the_ticks_before_the_fault_that_the_loop_overwrote_since() {
    let dir = tempfile::tempdir().unwrap();
    let trace = Arc::new(Trace::new(2, 32));
    let settings = Settings {
        seconds: 0.032,
        dir: dir.path().to_path_buf(),
        max_files: 10,
        max_bytes: 1 << 30,
    };
    let recorder = FlightRecorder::start(trace.clone(), joints(), 1000.0, settings).unwrap();
    // Ticks 100..=129 playing, seen by the recorder (a dump waits until it has caught up).
    let source = ring(51, 30);
    let rows = source.latest(64);
    replay(&trace, &rows[..30]);
    assert_eq!(recorder.dump(Duration::from_secs(30)).unwrap().ticks, 30);
    // The fault at 130, and the loop goes on: 20 more ticks overwrite 100..=118 in the ring
    // whenever the recorder comes by (a loaded machine may let it come after all of them).
    replay(&trace, &rows[30..]);
    let found = fault_dump(dir.path());
    drop(recorder);
    let ticks: Vec<u64> = messages(&found)
        .iter()
        .filter(|(t, ..)| t == mcap::TOPIC_LOOP)
        .map(|(_, _, v)| v["tick"].as_u64().unwrap())
        .collect();
    assert_eq!(ticks, (100..=130).collect::<Vec<_>>());
}
