use super::*;
use crate::backend::FaultKind;
use crate::robot::Limits;

const MINIMAL: &str = "robot:\n  skel: arm.skel\n";

fn parse(text: &str) -> Result<Config, Error> {
    Config::parse(text, Path::new("/etc/motiond/motiond.yaml"))
}

/// The diagnostics of an invalid text, one `FILE:LINE:COL: message` string each.
fn problems(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(Error::Invalid(d)) => d.iter().map(ToString::to_string).collect(),
        Err(other) => panic!("unexpected error {other}"),
    }
}

fn one_problem(text: &str) -> String {
    let found = problems(text);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap_or_default()
}

#[test]
fn defaults_fill_everything_but_the_skeleton() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.robot.model, Path::new("/etc/motiond/arm.skel"));
    assert_eq!(c.robot.joints, None);
    assert!(c.robot.limits.is_empty());
    assert_eq!(c.motion.library, Path::new("/etc/motiond/motions"));
    assert_eq!(c.motion.interpolation, Interpolation::Pchip);
    assert_eq!(c.motion.limit_policy, LimitPolicy::Reject);
    assert_eq!(c.control.rate_hz, 1000.0);
    assert_eq!(c.control.period, Duration::from_millis(1));
    assert_eq!(
        c.rt,
        RtSettings {
            cpu: None,
            priority: 80,
            lock_memory: true,
            strict: false,
            max_consecutive_overruns: 10,
            max_late: None,
            enable_timeout: Duration::from_secs(2),
            cpu_wakeup_latency_us: Some(0),
        }
    );
    assert!(matches!(c.backend, BackendConfig::Sim));
    assert_eq!(c.sim, SimConfig::default());
    assert_eq!(c.sim.latency_ticks, 1);
    assert_eq!(c.daemon.socket, Path::new("/run/motiond/control.sock"));
    assert_eq!(c.daemon.socket_group, None);
    assert_eq!(c.daemon.shutdown_timeout, Duration::from_secs(5));
    assert_eq!(c.daemon.safe_state, SafeState::Hold);
    assert!(c.daemon.watchdog);
}

#[test]
fn empty_sections_take_their_defaults() {
    let c = parse("robot:\n  skel: a.skel\nrt:\nsim:\nbuses:\ndaemon:\n").unwrap();
    assert_eq!(c.rt.priority, 80);
    assert!(matches!(c.backend, BackendConfig::Sim));
}

#[test]
fn the_cpu_wakeup_latency_request_is_microseconds_or_off() {
    let rt =
        |v: &str| parse(&format!("{MINIMAL}rt: {{cpu_wakeup_latency_us: {v}}}\n")).map(|c| c.rt);
    assert_eq!(rt("off").unwrap().cpu_wakeup_latency_us, None);
    assert_eq!(rt("false").unwrap().cpu_wakeup_latency_us, None);
    assert_eq!(rt("75").unwrap().cpu_wakeup_latency_us, Some(75));
    let problem = |v: &str| one_problem(&format!("{MINIMAL}rt: {{cpu_wakeup_latency_us: {v}}}\n"));
    assert!(
        problem("-1").ends_with(
            "rt.cpu_wakeup_latency_us: -1 is outside 0..=2147483646 microseconds (or `off`)"
        ),
        "{}",
        problem("-1")
    );
    assert!(
        problem("sometimes").contains("rt.cpu_wakeup_latency_us: \"sometimes\""),
        "{}",
        problem("sometimes")
    );
}

#[test]
fn missing_skeleton_is_reported() {
    assert_eq!(
        one_problem(""),
        "/etc/motiond/motiond.yaml:1:1: robot.model: missing: name the robot's model file, \
         .skel, .urdf, .sdf or .xode (relative to this file)"
    );
    assert_eq!(
        one_problem("control:\n  rate_hz: 500\nrobot:\n  joints: [a]\n"),
        "/etc/motiond/motiond.yaml:3:1: robot.model: missing: name the robot's model file, \
         .skel, .urdf, .sdf or .xode (relative to this file)"
    );
}

#[test]
fn every_value_is_read() {
    let text = "\
robot:
  skel: ../robots/arm.skel
  joints: [a, b]
  limits:
    b: {position: [-1, 1.5], velocity: 2, acceleration: [-3.5, 4], effort: 9}
motion: {library: /srv/motions, interpolation: cubic, limit_policy: retime}
control: {rate_hz: 4000}
rt: {cpu: 3, priority: 90, lock_memory: false, strict: true, max_consecutive_overruns: 3, cpu_wakeup_latency_us: 20, enable_timeout_s: 30}
sim:
  latency_ticks: 4
  bandwidth_hz: 12.5
  damping: 0.7
  fault: {kind: no_feedback, at_tick: 250, dof: b}
daemon:
  socket: run/ctl.sock
  socket_group: robots
  shutdown_timeout_s: 2.5
  safe_state: disable
  watchdog: false
";
    let c = Config::parse(text, Path::new("cfg/m.yaml")).unwrap();
    assert_eq!(c.robot.model, Path::new("cfg/../robots/arm.skel"));
    assert_eq!(c.robot.joints, Some(vec!["a".to_owned(), "b".to_owned()]));
    assert_eq!(
        c.robot.limits,
        vec![DofLimitOverride {
            dof: "b".to_owned(),
            position: Some(Limits {
                lower: -1.0,
                upper: 1.5
            }),
            velocity: Some(Limits {
                lower: -2.0,
                upper: 2.0
            }),
            acceleration: Some(Limits {
                lower: -3.5,
                upper: 4.0
            }),
            effort: Some(Limits {
                lower: -9.0,
                upper: 9.0
            }),
            following_error: None,
            quick_stop_deceleration: None,
        }]
    );
    assert_eq!(c.robot.limits[0].dof, "b");
    assert_eq!(c.motion.library, Path::new("/srv/motions"));
    assert_eq!(c.motion.interpolation, Interpolation::Cubic);
    assert_eq!(c.motion.limit_policy, LimitPolicy::Retime);
    assert_eq!(c.control.period, Duration::from_micros(250));
    assert_eq!(
        c.rt,
        RtSettings {
            cpu: Some(3),
            priority: 90,
            lock_memory: false,
            strict: true,
            max_consecutive_overruns: 3,
            max_late: None,
            enable_timeout: Duration::from_secs(30),
            cpu_wakeup_latency_us: Some(20),
        }
    );
    assert_eq!(
        c.sim,
        SimConfig {
            latency_ticks: 4,
            bandwidth_hz: 12.5,
            damping: 0.7,
            fault: Some(SimConfigFault {
                kind: SimFaultKind::NoFeedback,
                at_tick: 250,
                dof: Some("b".to_owned())
            })
        }
    );
    assert_eq!(c.daemon.socket, Path::new("cfg/run/ctl.sock"));
    assert_eq!(c.daemon.socket_group.as_deref(), Some("robots"));
    assert_eq!(c.daemon.shutdown_timeout, Duration::from_millis(2500));
    assert_eq!(c.daemon.safe_state, SafeState::Disable);
    assert!(!c.daemon.watchdog);
}

#[test]
fn library_files_are_capped_at_256_mib_unless_configured() {
    let c = Config::parse(MINIMAL, Path::new("motiond.yaml")).unwrap();
    assert_eq!(c.motion.max_file_bytes, 256 << 20);
    let c = Config::parse(
        "robot: {skel: a.skel}\nmotion: {max_file_mib: 0.5}",
        Path::new("motiond.yaml"),
    )
    .unwrap();
    assert_eq!(c.motion.max_file_bytes, 512 << 10);
}

#[test]
fn relative_paths_resolve_against_the_config_directory() {
    let c = Config::parse(MINIMAL, Path::new("motiond.yaml")).unwrap();
    assert_eq!(c.robot.model, Path::new("arm.skel"));
    assert_eq!(c.motion.library, Path::new("motions"));
    let c = Config::parse(MINIMAL, Path::new("/a/b/c.yaml")).unwrap();
    assert_eq!(c.robot.model, Path::new("/a/b/arm.skel"));
    let c = Config::parse("robot: {skel: /abs/arm.skel}", Path::new("/a/c.yaml")).unwrap();
    assert_eq!(c.robot.model, Path::new("/abs/arm.skel"));
}

#[test]
fn a_misspelt_bus_key_gets_a_did_you_mean() {
    let p = one_problem(
        "robot: {model: a.skel, joints: [a]}\nbackend: buses\nbuses:\n  - name: arm\n    \
         transport: can\n    interface: can0\n    joints:\n      a: {protocol: cia402, id: 1, \
         counts_per_unit: 651.9, gear_ration: 2}\n",
    );
    assert!(
        p.contains("buses[0].joints.a.gear_ration: unknown key;")
            && p.ends_with("did you mean `gear_ratio`?"),
        "{p}"
    );
}

#[test]
fn unknown_keys_are_refused_with_their_line() {
    assert_eq!(
        one_problem("robot:\n  skel: a.skel\n  skell: b.skel\n"),
        "/etc/motiond/motiond.yaml:3:3: robot.skell: unknown key; expected one of `model`, \
         `skel`, `fixed_base`, `joints`, `limits`, `allow_unlimited`; did you mean `skel`?"
    );
    assert_eq!(
        one_problem("robot: {skel: a.skel}\ncontorl:\n  rate_hz: 5\n"),
        "/etc/motiond/motiond.yaml:2:1: contorl: unknown section (expected one of: robot, \
         motion, control, rt, backend, sim, buses, daemon, groups, estop, recorder); did you \
         mean `control`?"
    );
    assert_eq!(
        one_problem("robot:\n  skel: a.skel\n  limits:\n    b: {velocty: 2}\n"),
        "/etc/motiond/motiond.yaml:4:9: robot.limits.b.velocty: unknown key; expected one of \
         `position`, `velocity`, `acceleration`, `effort`, `following_error`, \
         `quick_stop_deceleration`; did you mean `velocity`?"
    );
    let p =
        one_problem("robot: {skel: a.skel}\nsim:\n  fault: {kind: stall, at_tick: 1, when: 2}\n");
    assert!(
        p.starts_with("/etc/motiond/motiond.yaml:3:36: sim.fault.when: unknown key"),
        "{p}"
    );
}

#[test]
fn all_unknown_keys_of_a_section_are_reported_and_the_rest_still_checked() {
    let found = problems(
        "\
robot:
  skel: a.skel
  skell: b.skel
  limits:
    a: {velocty: 2, acceleration: -1}
  joint: [a]
sim:
  fault: {kind: stall, at_tick: 1, when: 2}
  latency: 3
buses:
  - name: arm
    transport: serial
    device: /dev/ttyUSB0
    baud: 4000000
    protocol: dynamixel
    speed: 1
    joints: {a: {id: 1, gear: 2}}
",
    );
    let expected = [
        ":3:3: robot.skell: unknown key; expected one of `model`, `skel`, `fixed_base`, `joints`, `limits`, `allow_unlimited`; did you mean `skel`?",
        ":5:9: robot.limits.a.velocty: unknown key",
        ":5:35: robot.limits.a.acceleration: -1 is not a positive finite magnitude",
        ":6:3: robot.joint: unknown key",
        ":8:36: sim.fault.when: unknown key",
        ":9:3: sim.latency: unknown key",
        ":16:5: buses[0].speed: unknown key",
        ":17:25: buses[0].joints.a.gear: unknown key",
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for (got, want) in found.iter().zip(expected) {
        assert!(
            got.contains(want),
            "{got}\n  does not contain\n{want}\nall: {found:#?}"
        );
    }
}

#[test]
fn wrong_types_name_the_key_and_the_value() {
    assert_eq!(
        one_problem("robot: {skel: a.skel}\ncontrol:\n  rate_hz: fast\n"),
        "/etc/motiond/motiond.yaml:3:12: control.rate_hz: \"fast\" is not a number (Hz)"
    );
    assert_eq!(
        one_problem("robot: {skel: a.skel}\nmotion: {interpolation: sine}\n"),
        "/etc/motiond/motiond.yaml:2:25: motion.interpolation: \"sine\" is not one of hold, \
         linear, pchip, cubic"
    );
    assert_eq!(
        one_problem("robot: {skel: a.skel}\nrt: {cpu: -1}\n"),
        "/etc/motiond/motiond.yaml:2:11: rt.cpu: -1 is not a whole number ≥ 0"
    );
    let p = one_problem("robot:\n  skel: a.skel\n  joints: [a, [b]]\n");
    assert!(
        p.starts_with("/etc/motiond/motiond.yaml:3:15: robot.joints[1]: a list is not text"),
        "{p}"
    );
    let p = one_problem("robot: {skel: a.skel, limits: {a: {velocity: [1, 2, 3]}}}\n");
    assert!(
        p.contains("robot.limits.a.velocity: invalid length 3, expected a number"),
        "{p}"
    );
    let p = one_problem("robot: {skel: a.skel, limits: {a: {velocity: fast}}}\n");
    assert!(
        p.contains("robot.limits.a.velocity: \"fast\" is not a number"),
        "{p}"
    );
    let p = one_problem("- robot\n");
    assert!(p.ends_with("expected a mapping of sections (robot, motion, control, rt, backend, sim, buses, daemon, groups, estop, recorder), found a list"), "{p}");
}

#[test]
fn every_wrong_value_is_reported_in_one_pass_in_peoples_words() {
    let found = problems(
        "robot: {skel: a.skel}\nmotion: {interpolation: pchipp}\ncontrol: {rate_hz: fast}\n\
         rt: {priority: 120, lock_memory: maybe, cpu: -1}\nsim: {fault: {kind: melt, at_tick: 1}}\n",
    );
    let file = "/etc/motiond/motiond.yaml";
    assert_eq!(
        found,
        [
            format!(
                "{file}:2:25: motion.interpolation: \"pchipp\" is not one of hold, linear, \
                 pchip, cubic; did you mean pchip?"
            ),
            format!("{file}:3:20: control.rate_hz: \"fast\" is not a number (Hz)"),
            format!("{file}:4:16: rt.priority: 120 is outside the SCHED_FIFO priorities 1..=99"),
            format!("{file}:4:34: rt.lock_memory: \"maybe\" is not true or false"),
            format!("{file}:4:46: rt.cpu: -1 is not a whole number ≥ 0"),
            format!(
                "{file}:5:21: sim.fault.kind: \"melt\" is not one of error, stall, no_feedback, estop"
            ),
        ]
    );
}

#[test]
fn one_wrong_type_per_section_all_sections_reported_together() {
    let found = problems(
        "robot: {skel: a.skel}\ncontrol: {rate_hz: x}\nrt: {priority: high}\ndaemon: {watchdog: 3}\n",
    );
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].contains(":2:") && found[0].contains("control.rate_hz"));
    assert!(found[1].contains(":3:") && found[1].contains("rt.priority"));
    assert!(found[2].contains(":4:") && found[2].contains("daemon.watchdog"));
}

#[test]
fn semantic_problems_are_all_reported_together_in_file_order() {
    let found = problems(
        "\
robot:
  skel: a.skel
  joints: [a, b, a, '']
  limits:
    a: {position: [1, -1], velocity: -2, acceleration: [1, 2]}
    b: {position: 3}
    c: {}
control: {rate_hz: 0}
rt: {priority: 120, max_consecutive_overruns: 0, cpu: 5000}
sim: {bandwidth_hz: .nan, damping: 0, latency_ticks: 99999999999}
daemon: {shutdown_timeout_s: -1, socket_group: 'bad group', socket: ''}
motion: {library: '', max_file_mib: 0}
",
    );
    let expected = [
        ":3:18: robot.joints[2]: \"a\" is listed twice (first as robot.joints[0])",
        ":3:21: robot.joints[3]: empty DOF name \"\"",
        ":5:19: robot.limits.a.position: [1, -1]: the lower bound must be below the upper",
        ":5:38: robot.limits.a.velocity: -2 is not a positive finite magnitude",
        ":5:56: robot.limits.a.acceleration: [1, 2] does not contain 0",
        ":6:19: robot.limits.b.position: expected a [lower, upper] pair, found 3",
        ":7:5: robot.limits.c: sets no limit",
        ":8:20: control.rate_hz: 0 Hz is outside 1..=8000 Hz",
        ":9:16: rt.priority: 120 is outside the SCHED_FIFO priorities 1..=99",
        ":9:47: rt.max_consecutive_overruns: 0 is outside 1..=4294967295",
        ":9:55: rt.cpu: 5000 is not below CPU_SETSIZE (1024)",
        ":10:21: sim.bandwidth_hz: NaN Hz is not a positive finite",
        ":10:36: sim.damping: 0 is outside (0, 100]",
        ":10:54: sim.latency_ticks: 99999999999 ticks is more than one second",
        ":11:30: daemon.shutdown_timeout_s: -1 s is outside (0, 600] s",
        ":11:48: daemon.socket_group: \"bad group\" is not a group name",
        ":11:69: daemon.socket: empty path",
        ":12:19: motion.library: empty path",
        ":12:37: motion.max_file_mib: 0 is not a positive number of MiB",
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for (got, want) in found.iter().zip(expected) {
        assert!(
            got.contains(want),
            "{got}\n  does not contain\n{want}\nall: {found:#?}"
        );
    }
}

#[test]
fn nan_and_infinity_are_refused_everywhere() {
    for text in [
        "control: {rate_hz: .nan}",
        "control: {rate_hz: .inf}",
        "control: {rate_hz: -.inf}",
        "sim: {bandwidth_hz: .inf}",
        "sim: {damping: .nan}",
        "daemon: {shutdown_timeout_s: .nan}",
        "daemon: {shutdown_timeout_s: .inf}",
        "robot: {limits: {a: {velocity: .nan}}}",
        "robot: {limits: {a: {position: [-.inf, 1]}}}",
        "robot: {limits: {a: {position: [0, .nan]}}}",
        "robot: {limits: {a: {acceleration: .inf}}}",
    ] {
        // Merge the problem section with a valid robot section by writing it inline.
        let text = if text.starts_with("robot:") {
            text.replace("robot: {", "robot: {skel: a.skel, ")
        } else {
            format!("robot: {{skel: a.skel}}\n{text}")
        };
        let found = problems(&text);
        assert_eq!(found.len(), 1, "{text}: {found:#?}");
        assert!(
            found[0].contains("nan") || found[0].contains("NaN") || found[0].contains("inf"),
            "{text}: {found:#?}"
        );
    }
}

#[test]
fn control_rate_bounds_are_inclusive_and_convert_to_a_period() {
    let c = parse("robot: {skel: a.skel}\ncontrol: {rate_hz: 8000}").unwrap();
    assert_eq!(c.control.period, Duration::from_micros(125));
    let c = parse("robot: {skel: a.skel}\ncontrol: {rate_hz: 1}").unwrap();
    assert_eq!(c.control.period, Duration::from_secs(1));
    assert!(one_problem("robot: {skel: a.skel}\ncontrol: {rate_hz: 8000.5}").contains("8000.5 Hz"));
    assert!(one_problem("robot: {skel: a.skel}\ncontrol: {rate_hz: 0.5}").contains("0.5 Hz"));
}

#[test]
fn sim_latency_is_at_most_a_second() {
    let p = one_problem("robot: {skel: a.skel}\nsim: {bandwidth_hz: 0}");
    assert!(
        p.contains("sim.bandwidth_hz: 0 Hz is not a positive"),
        "{p}"
    );
    let p =
        one_problem("robot: {skel: a.skel}\ncontrol: {rate_hz: 100}\nsim: {latency_ticks: 101}");
    assert!(p.contains("sim.latency_ticks: 101 ticks"), "{p}");
    parse("robot: {skel: a.skel}\ncontrol: {rate_hz: 100}\nsim: {latency_ticks: 100}").unwrap();
}

#[test]
fn sim_fault_kinds_and_dof() {
    for (kind, want) in [
        ("error", FaultKind::DriveFault),
        ("stall", FaultKind::Stall),
        ("no_feedback", FaultKind::FeedbackMissing),
        ("estop", FaultKind::DriveEStop),
    ] {
        let c = parse(&format!(
            "robot: {{skel: a.skel}}\nsim: {{fault: {{kind: {kind}, at_tick: 7}}}}"
        ))
        .unwrap();
        let fault = c.sim.fault.unwrap();
        assert_eq!(fault.kind.fault_kind(), want);
        assert_eq!((fault.at_tick, fault.dof), (7, None));
    }
    let p = one_problem(
        "robot: {skel: a.skel, joints: [a]}\nsim: {fault: {kind: stall, at_tick: 1, dof: z}}",
    );
    assert!(
        p.contains("sim.fault.dof: \"z\" is not one of robot.joints"),
        "{p}"
    );
    let p = one_problem("robot: {skel: a.skel}\nsim: {fault: {kind: stall}}");
    assert!(p.contains("sim.fault: missing field `at_tick`"), "{p}");
    let p = one_problem("robot: {skel: a.skel}\nsim: {fault: {kind: melt, at_tick: 1}}");
    assert!(
        p.contains("sim.fault.kind: \"melt\" is not one of error, stall, no_feedback, estop"),
        "{p}"
    );
}

#[test]
fn empty_lists_and_paths_are_refused() {
    assert!(one_problem("robot: {skel: a.skel, joints: []}").contains("robot.joints: empty list"));
    assert!(one_problem("robot: {skel: ''}").contains("robot.skel: empty path"));
}

#[test]
fn socket_path_must_fit_sun_path() {
    let long = format!("/run/{}/c.sock", "x".repeat(100));
    let p = one_problem(&format!(
        "robot: {{skel: a.skel}}\ndaemon: {{socket: {long}}}"
    ));
    assert!(
        p.contains("daemon.socket: ") && p.contains("at most 107"),
        "{p}"
    );
    let ok = format!("/{}", "x".repeat(106));
    parse(&format!(
        "robot: {{skel: a.skel}}\ndaemon: {{socket: {ok}}}"
    ))
    .unwrap();
}

#[test]
fn buses_backend_needs_buses_and_dry_run_replaces_them() {
    let p = one_problem("robot: {skel: a.skel}\nbackend: buses\n");
    assert!(
        p.starts_with("/etc/motiond/motiond.yaml:2:10: backend: `buses` needs"),
        "{p}"
    );
    let p = one_problem("robot: {skel: a.skel}\nbackend: can\n");
    assert!(
        p.contains("backend: \"can\" is not one of sim, buses"),
        "{p}"
    );

    let text = "\
robot: {skel: a.skel, joints: [a]}
control: {rate_hz: 2000}
backend: buses
buses:
  - {name: arm, transport: serial, device: /dev/ttyUSB0, baud: 4000000, protocol: dynamixel,
     joints: {a: {id: 1}}}
";
    let c = parse(text).unwrap();
    let BackendConfig::Buses(buses) = &c.backend else {
        panic!("expected buses");
    };
    assert_eq!(buses.len(), 1);
    let dry = c.clone().dry_run();
    assert!(matches!(dry.backend, BackendConfig::Sim));
    assert_eq!(dry.robot, c.robot);
    assert_eq!(dry.control, c.control);
    assert_eq!(dry.motion, c.motion);
    assert_eq!(dry.rt, c.rt);
    assert_eq!(dry.daemon, c.daemon);
}

#[test]
fn bus_problems_are_placed_at_their_key() {
    let text = "\
robot: {skel: a.skel, joints: [a]}
buses:
  - name: arm
    transport: serial
    device: /dev/ttyUSB0
    baud: 4000000
    protocol: dynamixel
    joints:
      a: {id: 1}
      b: {id: 2}
";
    let p = one_problem(text);
    assert!(
        p.starts_with(
            "/etc/motiond/motiond.yaml:10:7: buses[0].joints.b: `b` is not a commanded DOF"
        ),
        "{p}"
    );
    let p = one_problem(
        "robot: {skel: a.skel}\nbuses:\n  - {name: x, transport: can, interface: can0}\n",
    );
    assert!(
        p.starts_with(
            "/etc/motiond/motiond.yaml:1:1: robot.joints: required when buses are configured"
        ),
        "{p}"
    );
}

#[test]
fn syntax_errors_carry_their_position() {
    let p = one_problem("robot:\n  skel: a.skel\n joints: [a\n");
    assert!(p.starts_with("/etc/motiond/motiond.yaml:3:"), "{p}");
    assert!(!p.contains(" at line "), "{p}");
    assert!(
        p.contains(": YAML syntax error: did not find expected key"),
        "{p}"
    );
    assert!(p.contains("check this line's indentation"), "{p}");
    let p = one_problem("robot:\n  model: a.skel\n\tjoints: [a]\n");
    assert!(p.contains("replace the tab with spaces"), "{p}");
    let p = one_problem("control:\n  rate_hz: 100\n    rt: 3\n");
    assert!(p.starts_with("/etc/motiond/motiond.yaml:3:"), "{p}");
    assert!(p.contains("quote a value that holds"), "{p}");
    let p = one_problem("robot: {skel: a.skel}\nrobot: {skel: b.skel}\n");
    assert!(p.contains("duplicate"), "{p}");
}

#[test]
fn odd_yaml_is_refused_not_crashed() {
    for text in [
        "robot: {skel: a.skel}\n? [x]\n: 1\n",
        "robot: {skel: a.skel}\n7: 1\n",
        "robot: {skel: a.skel}\n<<: {rt: {}}\n",
        "robot: {skel: a.skel}\n---\nrobot: {skel: b.skel}\n",
        "\"robot\"",
    ] {
        assert!(parse(text).is_err(), "{text}");
    }
}

#[test]
fn anchors_and_aliases_work() {
    let c = parse("robot: {skel: a.skel, limits: {a: &l {velocity: 1}, b: *l}}").unwrap();
    assert_eq!(c.robot.limits.len(), 2);
}

#[test]
fn callers_place_their_own_diagnostics() {
    let text = "robot:\n  skel: a.skel\n  limits:\n    b: {velocity: 9}\n";
    let c = Config::parse(text, Path::new("m.yaml")).unwrap();
    let key = format!("robot.limits.{}.velocity", c.robot.limits[0].dof);
    assert_eq!(
        c.diagnostic(&key, "9 loosens the skeleton's 2").to_string(),
        "m.yaml:4:19: robot.limits.b.velocity: 9 loosens the skeleton's 2"
    );
    assert_eq!(
        c.diagnostic("robot.joints[4]", "x").to_string(),
        "m.yaml:1:1: robot.joints[4]: x"
    );
}

#[test]
fn load_reports_io_errors_with_the_path() {
    let err = Config::load("/nonexistent/motiond.yaml").unwrap_err();
    assert!(matches!(err, Error::Io { .. }));
    assert!(
        err.to_string().starts_with("/nonexistent/motiond.yaml: "),
        "{err}"
    );
}

/// The refusals of the book's Configuration page (docs/src/configuration.md).
#[test]
fn readme_example_diagnostics() {
    let text = "\
robot:
  skel: arm.skel
  skell: old.skel
motion:
  library: motions
control:
  rate_hz: 0
rt:
  priority: 120
";
    let Err(Error::Invalid(d)) = Config::parse(text, Path::new("motiond.yaml")) else {
        panic!("accepted");
    };
    assert_eq!(
        d.to_string(),
        "motiond.yaml:3:3: robot.skell: unknown key; expected one of `model`, `skel`, `fixed_base`, `joints`, `limits`, `allow_unlimited`; did you mean `skel`?\n\
         motiond.yaml:7:12: control.rate_hz: 0 Hz is outside 1..=8000 Hz\n\
         motiond.yaml:9:13: rt.priority: 120 is outside the SCHED_FIFO priorities 1..=99"
    );
}

#[test]
fn joint_set_errors_are_placed_at_their_override() {
    use crate::trajectory::Quantity;
    let text = "robot:\n  skel: a.skel\n  limits:\n    elbow: {velocity: 9}\n    wrist: {position: [-1, 1]}\n";
    let c = Config::parse(text, Path::new("m.yaml")).unwrap();
    let loosens = JointSetError::Loosens {
        index: 0,
        name: "elbow".to_owned(),
        quantity: Quantity::Velocity,
        wanted: Limits {
            lower: -9.0,
            upper: 9.0,
        },
        skeleton: Limits {
            lower: -2.0,
            upper: 2.0,
        },
    };
    let d = c.joint_set_diagnostic(&loosens).to_string();
    assert!(d.starts_with("m.yaml:4:23: robot.limits.elbow.velocity: velocity limits of `elbow` may only be tightened"), "{d}");
    let unknown = JointSetError::UnknownDof {
        index: 1,
        name: "wrist".to_owned(),
    };
    let d = c.joint_set_diagnostic(&unknown).to_string();
    assert!(
        d.starts_with("m.yaml:5:5: robot.limits.wrist: limits given for `wrist`"),
        "{d}"
    );
    let quick = JointSetError::QuickStop {
        index: 0,
        name: "elbow".to_owned(),
        value: 50.0,
        acceleration: Limits::symmetric(8.0),
    };
    let text = "robot:\n  skel: a.skel\n  limits:\n    elbow: {quick_stop_deceleration: 50}\n";
    let c2 = Config::parse(text, Path::new("m.yaml")).unwrap();
    let d = c2.joint_set_diagnostic(&quick).to_string();
    assert!(
        d.starts_with("m.yaml:4:38: robot.limits.elbow.quick_stop_deceleration: quick_stop_deceleration 50 of `elbow` is not within (0, 8]"),
        "{d}"
    );
    let ambiguous = JointSetError::AmbiguousName {
        name: "j".to_owned(),
    };
    assert!(
        c.joint_set_diagnostic(&ambiguous)
            .to_string()
            .starts_with("m.yaml:2:9: robot.skel: ")
    );
}

#[test]
fn groups_are_named_disjoint_and_among_the_joints() {
    let c = parse(
        "robot:\n  skel: arm.skel\n  joints: [a, b, c]\ngroups:\n  left: [a]\n  right: [b, c]\n",
    )
    .unwrap();
    assert_eq!(
        c.groups,
        vec![
            JointGroup {
                name: "left".into(),
                dofs: vec!["a".into()]
            },
            JointGroup {
                name: "right".into(),
                dofs: vec!["b".into(), "c".into()]
            },
        ]
    );
    let found = problems(
        "robot:\n  skel: arm.skel\n  joints: [a, b, c]\ngroups:\n  left: [a, z]\n  right: [a]\n  none: []\n",
    );
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found.iter().any(|p| p.contains(":5:")
            && p.contains("groups.left[1]")
            && p.contains("not one of robot.joints")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("groups.right[0]") && p.contains("already in groups.left")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.contains("groups.none") && p.contains("lists no DOFs")),
        "{found:#?}"
    );
}

/// Deep flow nesting is refused before serde_yaml sees it (libyaml would take time quadratic in
/// the depth); brackets in quoted scalars and comments do not count.
#[test]
fn deeply_nested_collections_are_refused_at_once() {
    let deep = format!("robot: {}1{}\n", "{a: ".repeat(20_000), "}".repeat(20_000));
    let found = one_problem(&deep);
    assert!(
        found.starts_with("/etc/motiond/motiond.yaml:1:264: collections nested deeper than 64"),
        "{found}"
    );
    let brackets = "[".repeat(100);
    let quoted = format!(
        "{MINIMAL}  joints: ['{brackets}', \"{brackets}\\\"\", 'it''s {brackets}']  # {brackets}\n"
    );
    assert!(parse(&quoted).is_ok(), "{quoted}");
}

/// A URDF with a `<ros2_control>` block and a configuration using it, both in a fresh folder;
/// `Config::load` reads the model's params.
fn load_with_model(urdf: &str, yaml: &str) -> (tempfile::TempDir, Result<Config, Error>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("arm.urdf"), urdf).unwrap();
    let path = dir.path().join("motiond.yaml");
    std::fs::write(&path, yaml).unwrap();
    let config = Config::load(&path);
    (dir, config)
}

/// A two-joint URDF whose `<ros2_control>` block holds `hardware` and per-joint `params`.
fn arm_urdf(block: &str, hardware: &str, a: &str, b: &str) -> String {
    format!(
        r#"<robot name="arm">
  <link name="world"/><link name="l1"/><link name="l2"/>
  <joint name="a" type="revolute"><parent link="world"/><child link="l1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="b" type="revolute"><parent link="l1"/><child link="l2"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <ros2_control name="{block}" type="system">
    <hardware>
{hardware}
    </hardware>
    <joint name="a"><command_interface name="position"/>
{a}
    </joint>
    <joint name="b"><command_interface name="position"/>
{b}
    </joint>
  </ros2_control>
</robot>
"#
    )
}

const BUS_YAML: &str = "robot:\n  model: arm.urdf\n  joints: [a, b]\nbackend: buses\nbuses:\n";

fn bus_of(c: &Config) -> &crate::backend::bus::settings::BusSettings {
    let BackendConfig::Buses(buses) = &c.backend else {
        panic!("not buses");
    };
    &buses[0]
}

#[test]
fn ros2_control_params_fill_the_bus_settings_the_configuration_leaves_out() {
    let urdf = arm_urdf(
        "arm",
        "      <plugin>odrive_ros2_control_plugin/ODriveHardwareInterface</plugin>\n      \
         <param name=\"can\">can1</param>\n      <param name=\"watchdog_ms\">15</param>",
        "      <param name=\"node_id\">1</param>\n      <param name=\"gear_ratio\">9</param>",
        "      <param name=\"node_id\">2</param>\n      <param name=\"firmware\">0.5</param>",
    );
    // The configuration names the bus and gives b's id itself: it wins over the model's.
    let yaml = format!("{BUS_YAML}  - name: arm\n    joints:\n      b: {{id: 7}}\n");
    let (_dir, c) = load_with_model(&urdf, &yaml);
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    let bus = bus_of(&c);
    assert_eq!(
        bus.transport,
        crate::backend::bus::settings::Transport::Can {
            interface: "can1".into(),
            bitrate: 1_000_000,
            data_bitrate: 5_000_000,
        }
    );
    assert_eq!(bus.watchdog_ms, 15.0);
    let a = &bus.joints[0];
    assert_eq!((a.dof.as_str(), a.id, a.gear_ratio), ("a", 1, 9.0));
    assert_eq!(a.family.name(), "odrive");
    let b = &bus.joints[1];
    assert_eq!((b.dof.as_str(), b.id), ("b", 7));
    assert_eq!(
        crate::backend::odrive::settings::settings(
            &b.keys,
            "",
            &mut crate::backend::bus::settings::Problems::default()
        ),
        crate::backend::odrive::settings::Settings {
            firmware: crate::backend::odrive::Firmware::V05,
            endpoints: None
        }
    );
    let filled: Vec<(&str, &str, u32)> = c
        .from_model
        .iter()
        .map(|f| (f.key.as_str(), f.value.as_str(), f.origin.line))
        .collect();
    assert_eq!(
        filled,
        [
            ("buses[0].transport", "can", 9),
            ("buses[0].interface", "can1", 10),
            ("buses[0].watchdog_ms", "15", 11),
            ("buses[0].joints.a.protocol", "odrive", 9),
            ("buses[0].joints.a.id", "1", 14),
            ("buses[0].joints.a.gear_ratio", "9", 15),
            ("buses[0].joints.b.protocol", "odrive", 9),
            ("buses[0].joints.b.firmware", "0.5", 19),
        ]
    );
    assert!(c.model_warnings.is_empty(), "{:?}", c.model_warnings);
    // Config::parse opens nothing: the same text lacks a's drive.
    assert!(Config::parse(&yaml, &c.path).is_err());
}

#[test]
fn ros2_control_params_of_mit_motors_and_dynamixel_servos() {
    let urdf = arm_urdf(
        "hand",
        "      <plugin>dynamixel_hardware/DynamixelHardware</plugin>\n      \
         <param name=\"usb_port\">/dev/ttyUSB1</param>\n      \
         <param name=\"baud_rate\">4000000</param>",
        "      <param name=\"id\">1</param>",
        "      <param name=\"id\">2</param>\n      <param name=\"zero_offset\">1000</param>",
    );
    let (_dir, c) = load_with_model(&urdf, &format!("{BUS_YAML}  - name: hand\n"));
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    let bus = bus_of(&c);
    assert_eq!(
        bus.transport,
        crate::backend::bus::settings::Transport::Serial {
            device: "/dev/ttyUSB1".into(),
            baud: 4_000_000,
            family: &crate::backend::dynamixel::Dynamixel,
        }
    );
    assert_eq!(
        bus.keys.bool("sync_read"),
        None,
        "sync_read is on by default"
    );
    assert_eq!(bus.joints[1].units.offset, 1000.0);

    // mit.kp from the configuration, mit.kd and the rest from the model.
    let urdf = arm_urdf(
        "legs",
        "      <param name=\"transport\">slcan</param>\n      \
         <param name=\"device\">/dev/ttyACM0</param>",
        "      <param name=\"protocol\">mit</param>\n      <param name=\"can_id\">3</param>\n      \
         <param name=\"mit.kp\">99</param>\n      <param name=\"mit.kd\">1.5</param>",
        "      <param name=\"protocol\">mit</param>\n      <param name=\"id\">4</param>\n      \
         <param name=\"mit.kp\">10</param>\n      <param name=\"mit.kd\">0.5</param>\n      \
         <param name=\"mit.v_max\">30</param>",
    );
    let yaml = format!("{BUS_YAML}  - name: legs\n    joints:\n      a: {{mit: {{kp: 40}}}}\n");
    let (_dir, c) = load_with_model(&urdf, &yaml);
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    let bus = bus_of(&c);
    let kinds: Vec<_> = bus
        .joints
        .iter()
        .map(|j| {
            let m = crate::backend::mit::settings::settings(
                &j.keys,
                "",
                &mut crate::backend::bus::settings::Problems::default(),
            )
            .expect("mit");
            (j.id, m.kp, m.kd, m.ranges.v_max)
        })
        .collect();
    assert_eq!(kinds, [(3, 40.0, 1.5, 65.0), (4, 10.0, 0.5, 30.0)]);
}

#[test]
fn ros2_control_params_that_fill_nothing_are_warnings_at_their_position() {
    let urdf = arm_urdf(
        "arm",
        "      <plugin>my_robot/Hardware</plugin>\n      <param name=\"transport\">can</param>\n      \
         <param name=\"interface\">can0</param>\n      <param name=\"loop_hz\">500</param>",
        "      <param name=\"protocol\">cia402</param>\n      <param name=\"node_id\">5</param>\n      \
         <param name=\"counts_per_unit\">1000</param>\n      <param name=\"kp\">3</param>",
        "      <param name=\"protocol\">cia402</param>\n      <param name=\"id\">6</param>\n      \
         <param name=\"counts_per_unit\">1000</param>",
    );
    let (dir, c) = load_with_model(&urdf, &format!("{BUS_YAML}  - name: arm\n"));
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    let at =
        |line: u32, col: u32| format!("{}:{line}:{col}: ", dir.path().join("arm.urdf").display());
    let warnings: Vec<String> = c.model_warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(&(at(12, 20) + "<ros2_control> 'arm' <hardware>: param 'loop_hz' is not a setting of a bus; expected one of transport,")),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].ends_with("; ignored"), "{}", warnings[0]);
    assert!(
        warnings[1].starts_with(&(at(18, 20) + "<ros2_control> 'arm' joint 'a': param 'kp' is not a setting of `cia402` drives; expected one of protocol, id,")),
        "{}",
        warnings[1]
    );
    assert_eq!(bus_of(&c).joints[0].id, 5);

    // A block no bus is named after, and a joint no bus drives.
    let urdf = arm_urdf(
        "other",
        "      <param name=\"bitrate\">500000</param>",
        "",
        "      <param name=\"id\">6</param>",
    );
    let yaml = "robot:\n  model: arm.urdf\n  joints: [a]\nbackend: buses\nbuses:\n  - {name: arm, transport: can, interface: can0, joints: {a: {protocol: odrive, id: 1}}}\n";
    let (dir, c) = load_with_model(&urdf, yaml);
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    let at =
        |line: u32, col: u32| format!("{}:{line}:{col}: ", dir.path().join("arm.urdf").display());
    let warnings: Vec<String> = c.model_warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(&(at(7, 23) + "<ros2_control> 'other': no bus in ")),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with(&(at(14, 18) + "<ros2_control> 'other' joint 'b': no bus in ")),
        "{}",
        warnings[1]
    );
    assert!(c.from_model.is_empty());
}

#[test]
fn invalid_ros2_control_params_are_errors_where_the_model_wrote_them() {
    let urdf = arm_urdf(
        "arm",
        "      <param name=\"transport\">can</param>\n      <param name=\"interface\">can0</param>\n      \
         <param name=\"max_load\">lots</param>",
        "      <param name=\"protocol\">odrive</param>\n      <param name=\"node_id\">1</param>\n      \
         <param name=\"gear_ratio\">9</param>\n      <param name=\"gear_ratio\">10</param>",
        "      <param name=\"protocol\">odrive</param>\n      <param name=\"id\">two</param>",
    );
    let (dir, c) = load_with_model(&urdf, &format!("{BUS_YAML}  - name: arm\n"));
    let model = dir.path().join("arm.urdf").display().to_string();
    let expected = [
        format!(
            "{model}:11:30: <param name=\"max_load\"> of <ros2_control> 'arm' <hardware>: expected a \
             finite number for the bus setting `max_load`, found 'lots'"
        ),
        format!(
            "{model}:17:32: <param name=\"gear_ratio\"> of <ros2_control> 'arm' joint 'a': \
             `buses[0].joints.a.gear_ratio` is already given at line 16; expected one value for \
             each setting"
        ),
        // The refused id is not reported a second time as missing.
        format!(
            "{model}:21:24: <param name=\"id\"> of <ros2_control> 'arm' joint 'b': expected a whole \
             number for the bus setting `id`, found 'two'"
        ),
    ];
    let Err(Error::Invalid(d)) = c else {
        panic!("accepted");
    };
    let found: Vec<String> = d.iter().map(ToString::to_string).collect();
    assert_eq!(found, expected);

    // A value of the right kind that the setting refuses: the bus validation's message, placed
    // at the param, naming where it came from.
    let urdf = urdf
        .replace(">1</param>", ">70</param>")
        .replace(">two<", ">2<");
    let urdf = urdf
        .replace(">lots<", ">0.5<")
        .replace("      <param name=\"gear_ratio\">10</param>\n", "");
    let (dir, c) = load_with_model(&urdf, &format!("{BUS_YAML}  - name: arm\n"));
    let Err(Error::Invalid(d)) = c else {
        panic!("accepted");
    };
    let found: Vec<String> = d.iter().map(ToString::to_string).collect();
    let model = dir.path().join("arm.urdf").display().to_string();
    assert_eq!(
        found,
        [format!(
            "{model}:15:29: buses[0].joints.a.id: odrive ids are 0..=63, got 70 (from <param \
             name=\"node_id\"> of <ros2_control> 'arm' joint 'a')"
        )]
    );
}

#[test]
fn the_estop_section_is_read() {
    let c = parse(
        "robot:\n  skel: a.skel\nestop:\n  gpio: {chip: /dev/gpiochip1, line: 17, active: low}\n  debounce_ms: 5\n  drive: true\n",
    )
    .unwrap();
    assert_eq!(
        c.estop,
        Some(EStopSettings {
            gpio: Some(GpioLine {
                chip: "/dev/gpiochip1".into(),
                line: 17,
                active: ActiveLevel::Low,
            }),
            debounce: Duration::from_millis(5),
            drive: true,
        })
    );
    assert_eq!(parse("robot:\n  skel: a.skel\n").unwrap().estop, None);
    let drive_only = parse("robot:\n  skel: a.skel\nestop:\n  drive: true\n").unwrap();
    let estop = drive_only.estop.unwrap();
    assert_eq!(
        (estop.gpio, estop.debounce),
        (None, Duration::from_millis(10))
    );
}

#[test]
fn every_estop_problem_is_reported() {
    let found = problems(
        "\
robot:
  skel: a.skel
estop:
  gpio: {line: 4294967296}
  debounce_ms: 500
",
    );
    assert_eq!(
        found,
        [
            "/etc/motiond/motiond.yaml:4:3: estop.gpio.chip: missing: name the GPIO character device, e.g. /dev/gpiochip0",
            "/etc/motiond/motiond.yaml:4:3: estop.gpio.active: missing: say at which level the E-stop is asserted, `low` or `high` (as wired)",
            "/etc/motiond/motiond.yaml:4:16: estop.gpio.line: 4294967296 is not a line offset (0..=4294967295)",
            "/etc/motiond/motiond.yaml:5:16: estop.debounce_ms: 500 ms is outside 0..=100 ms (a longer debounce delays the stop by as much)",
        ]
    );
    assert_eq!(
        one_problem("robot:\n  skel: a.skel\nestop:\n  debounce_ms: 5\n"),
        "/etc/motiond/motiond.yaml:3:1: estop: watches no input: give estop.gpio, or `drive: \
         true` to honour the drives' E-stop, or leave the section out"
    );
    assert_eq!(
        problems("robot:\n  skel: a.skel\nestop:\n  gpio: {chip: c, line: -1, active: middle}\n"),
        [
            "/etc/motiond/motiond.yaml:4:25: estop.gpio.line: -1 is not a whole number ≥ 0",
            "/etc/motiond/motiond.yaml:4:37: estop.gpio.active: \"middle\" is not one of low, high",
        ]
    );
}

/// A DYNAMIXEL bus offers only DYNAMIXEL's `servo:` keys (not Feetech's), at FILE:LINE:COL.
#[test]
fn a_dynamixel_bus_offers_only_its_own_servo_keys() {
    let p = one_problem(
        "robot: {model: a.skel, joints: [a]}\nbackend: buses\nbuses:\n  - name: arm\n    \
         transport: serial\n    device: /dev/ttyUSB0\n    baud: 1000000\n    protocol: \
         dynamixel\n    servo: {acceleration: 3}\n    joints:\n      a: {id: 1}\n",
    );
    assert_eq!(
        p,
        "/etc/motiond/motiond.yaml:9:13: buses[0].servo.acceleration: does not apply here (a \
         key of `feetech`); expected one of `return_delay_time`, `operating_mode`, \
         `position_p_gain`, `position_i_gain`, `position_d_gain`"
    );
}

/// The Feetech `servo:` keys (bus and joint): each problem at its FILE:LINE:COL.
#[test]
fn feetech_servo_settings_are_checked_at_their_keys() {
    let bus = |servo: &str, joint: &str| {
        format!(
            "robot: {{model: a.skel, joints: [a]}}\nbackend: buses\nbuses:\n  - name: arm\n    \
             transport: serial\n    device: /dev/ttyACM0\n    baud: 1000000\n    protocol: \
             feetech\n    servo: {servo}\n    joints:\n      a: {{id: 1, servo: {joint}}}\n"
        )
    };
    // Only Feetech's own keys are offered, in its order (DYNAMIXEL's are not).
    let p = one_problem(&bus("{return_delay: 0}", "{}"));
    assert!(
        p.starts_with("/etc/motiond/motiond.yaml:9:13: buses[0].servo.return_delay: unknown key")
            && p.contains("expected one of `return_delay_time`, `maximum_acceleration`")
            && p.contains("`overload_torque`")
            && !p.contains("position_p_gain"),
        "{p}"
    );
    // Another family's key is named as such, at its place.
    let p = one_problem(&bus("{}", "{position_p_gain: 3}"));
    assert!(
        p.starts_with(
            "/etc/motiond/motiond.yaml:11:26: buses[0].joints.a.servo.position_p_gain: does \
             not apply here (a key of `dynamixel`); expected one of `return_delay_time`"
        ) && !p.contains("position_d_gain"),
        "{p}"
    );
    let p = one_problem(&bus("{}", "{p_coefficient: soft}"));
    assert_eq!(
        p,
        "/etc/motiond/motiond.yaml:11:41: buses[0].joints.a.servo.p_coefficient: \"soft\" is \
         not a whole number or `keep`"
    );
    let p = one_problem(&bus("{}", "{max_torque_limit: 1500}"));
    assert_eq!(
        p,
        "/etc/motiond/motiond.yaml:11:44: buses[0].joints.a.servo.max_torque_limit: \
         Max_Torque_Limit must be within 0..=1000 or `keep`, got 1500"
    );
    let p = one_problem(&bus("{operating_mode: 1}", "{}"));
    assert!(
        p.starts_with("/etc/motiond/motiond.yaml:9:29: buses[0].servo.operating_mode: motiond commands positions only"),
        "{p}"
    );
    // SCS servos have no Overload_Torque.
    let scs = bus("{acceleration: 254}", "{overload_torque: 25}")
        .replace("protocol: feetech", "protocol: feetech_scs");
    let p = one_problem(&scs);
    assert!(
        p.contains(
            "buses[0].joints.a.servo.overload_torque: feetech_scs servos have no Overload_Torque"
        ),
        "{p}"
    );
    // `keep` and whole numbers in range are taken.
    parse(&bus(
        "{acceleration: keep, return_delay_time: 0}",
        "{p_coefficient: 20}",
    ))
    .unwrap();
}
