//! Every key of the configuration file, with its default and meaning: the reference the manual
//! page motiond.yaml(5) is generated from and the book's Configuration page shows
//! (docs/src/configuration.md; tests/config_keys.rs holds both, and the parser, to this table).
//! Bus keys are listed per protocol in the book's Motor buses page.

/// One key: its dotted path (`<dof>`, `<name>` stand for a DOF's or group's name), its default
/// and what it means, in Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub path: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// In the order the documentation lists them.
pub const KEYS: &[Key] = &[
    Key {
        path: "robot.model",
        default: "(required)",
        meaning: "the robot's model file — `.skel`, `.urdf`, `.sdf` or `.xode`, told apart by the root element: joints, DOF order, limits, actuators (see [Robot models](models.md))",
    },
    Key {
        path: "robot.skel",
        default: "—",
        meaning: "the older name of `robot.model` (give one of them)",
    },
    Key {
        path: "robot.fixed_base",
        default: "`false`",
        meaning: "URDF: weld the root link to the world (`rootJoint` becomes a weld) instead of DART's floating base; a URDF whose root link is `world` needs no option",
    },
    Key {
        path: "robot.joints",
        default: "driven DOFs in DOF order",
        meaning: "DOF names of the .seq columns, in column order (required with `buses`)",
    },
    Key {
        path: "robot.limits.<dof>.position",
        default: "the model's",
        meaning: "`[lo, hi]` (rad or m): a tightening of the model's position limits (limits may only tighten)",
    },
    Key {
        path: "robot.limits.<dof>.velocity",
        default: "the model's",
        meaning: "a magnitude (±) or `[lo, hi]` containing 0 (rad/s or m/s); only tightens",
    },
    Key {
        path: "robot.limits.<dof>.acceleration",
        default: "the model's",
        meaning: "a magnitude (±) or `[lo, hi]` containing 0 (rad/s² or m/s²); only tightens, and unbounded → bounded is tightening (URDF states none: give them here)",
    },
    Key {
        path: "robot.limits.<dof>.effort",
        default: "the model's",
        meaning: "a magnitude (±) or `[lo, hi]` containing 0 (N·m or N); only tightens",
    },
    Key {
        path: "robot.limits.<dof>.following_error",
        default: "unchecked",
        meaning: "largest \\|commanded − measured\\| (rad or m) while moving; beyond it the loop faults (quick stop, hold)",
    },
    Key {
        path: "robot.limits.<dof>.quick_stop_deceleration",
        default: "the acceleration limit",
        meaning: "how hard a quick stop brakes (`hold`, a second signal, every fault and the E-stop), rad/s² or m/s²; gentler than the acceleration limit is allowed (every motion, approach and blend is then proved stoppable at it), harder is refused at its line",
    },
    Key {
        path: "robot.allow_unlimited",
        default: "`false`",
        meaning: "a commanded DOF with no velocity or acceleration limit (the model gives none and `robot.limits` neither) is warned about by `check`, `play` and `serve`, and with `backend: buses` refused: `serve` and `play` exit 2 (`refusing to drive real motors: …`) before opening a bus, unless this is `true`; `--dry-run` rehearses such a robot anyway",
    },
    Key {
        path: "motion.library",
        default: "`motions`",
        meaning: "folder of .seq files the daemon serves",
    },
    Key {
        path: "motion.max_file_mib",
        default: "`256`",
        meaning: "library files larger than this many MiB are refused before they are read",
    },
    Key {
        path: "motion.takes",
        default: "`.takes` in the library folder",
        meaning: "folder teach-in takes are written to as they are recorded, and kept in when they cannot be saved into the library (see [Teach-in](teach-in.md))",
    },
    Key {
        path: "motion.max_take_s",
        default: "`3600`",
        meaning: "the longest teach-in take, in seconds (at most 86400); later frames are not recorded and the journal says so",
    },
    Key {
        path: "motion.interpolation",
        default: "`pchip`",
        meaning: "`hold`, `linear`, `pchip` or `cubic`",
    },
    Key {
        path: "motion.limit_policy",
        default: "`reject`",
        meaning: "`reject`, `clamp` or `retime`",
    },
    Key {
        path: "motion.goal_tolerance",
        default: "unchecked",
        meaning: "after a motion ends, every DOF must come within this (rad or m) of its final position …",
    },
    Key {
        path: "motion.goal_time_s",
        default: "`1`",
        meaning: "… within this many seconds, else the loop faults",
    },
    Key {
        path: "control.rate_hz",
        default: "`1000`",
        meaning: "control rate, 1 to 8000 Hz",
    },
    Key {
        path: "rt.cpu",
        default: "not pinned",
        meaning: "CPU the loop thread is pinned to (below 1024)",
    },
    Key {
        path: "rt.priority",
        default: "`80`",
        meaning: "SCHED_FIFO priority, 1 to 99",
    },
    Key {
        path: "rt.lock_memory",
        default: "`true`",
        meaning: "`mlockall` before the first tick",
    },
    Key {
        path: "rt.strict",
        default: "`false`",
        meaning: "an RT setting not obtained is fatal instead of a warning",
    },
    Key {
        path: "rt.max_consecutive_overruns",
        default: "`10`",
        meaning: "this many late ticks in a row stop the motion with a fault",
    },
    Key {
        path: "rt.cpu_wakeup_latency_us",
        default: "`0`",
        meaning: "while the loop runs, its CPU is held to this wake-up latency (µs) by a PM QoS request, so it never sleeps in an idle state slower to leave; `off` asks for nothing (see [Preparing a robot computer](robot-computer.md))",
    },
    Key {
        path: "rt.enable_timeout_s",
        default: "`2`",
        meaning: "enabling the drives (a bus's whole set-up, then power) that takes longer than this stops with the fault `enable_timeout`, in (0, 600] s; a robot's drives need far less: give more only to drives that answer slowly (the test rigs' Python and emulated drives)",
    },
    Key {
        path: "rt.max_late_ms",
        default: "two control periods",
        meaning: "a wake-up (or a tick's end) later than this stops the motion quickly with a fault (the demo configuration, simulated, allows 250 ms so it plays on a busy desktop; keep the default on a robot)",
    },
    Key {
        path: "backend",
        default: "`sim`",
        meaning: "`sim` or `buses`",
    },
    Key {
        path: "sim.latency_ticks",
        default: "`1`",
        meaning: "simulated command latency (at most one second of ticks)",
    },
    Key {
        path: "sim.bandwidth_hz",
        default: "`20`",
        meaning: "natural frequency of the simulated motors (second order)",
    },
    Key {
        path: "sim.damping",
        default: "`1.0`",
        meaning: "damping ratio of the simulated motors, in (0, 100]",
    },
    Key {
        path: "sim.fault",
        default: "none",
        meaning: "`{kind: error\\|stall\\|no_feedback\\|estop, at_tick: N, dof: NAME}`: inject a fault (tests, rehearsals); `estop`: the drive reports its own E-stop",
    },
    Key {
        path: "buses",
        default: "`[]`",
        meaning: "CAN and serial buses with per-joint drive settings (see [Motor buses](buses.md))",
    },
    Key {
        path: "daemon.socket",
        default: "`/run/motiond/control.sock`",
        meaning: "control socket path (at most 107 bytes)",
    },
    Key {
        path: "daemon.socket_group",
        default: "the daemon's group",
        meaning: "group given the socket (mode 0660)",
    },
    Key {
        path: "daemon.shutdown_timeout_s",
        default: "`5`",
        meaning: "longest controlled stop at SIGTERM, in (0, 600] s",
    },
    Key {
        path: "daemon.safe_state",
        default: "`hold`",
        meaning: "`hold` or `disable`: what drives do after a fault or at shutdown",
    },
    Key {
        path: "daemon.watchdog",
        default: "`true`",
        meaning: "ping the systemd watchdog while the loop ticks",
    },
    Key {
        path: "groups.<name>",
        default: "none",
        meaning: "a joint group: the DOF names it moves (`groups: {arm: [shoulder_pitch, elbow_pitch], wrist: [wrist_pitch, wrist_roll]}`); groups are disjoint, at most 8, each a list of commanded DOFs; a mimic follower (URDF `<mimic>`) is not listed: it moves with the group that holds its leader (listing it is refused at FILE:LINE:COL). Each group plays its own motion beside the others (see [Joint groups](groups.md))",
    },
    Key {
        path: "estop.gpio",
        default: "none",
        meaning: "`{chip: /dev/gpiochip0, line: N, active: low\\|high}`: an E-stop input on a line of a Linux GPIO character device, asserted at the `active` level as wired (see [The E-stop](estop.md))",
    },
    Key {
        path: "estop.debounce_ms",
        default: "`10`",
        meaning: "a level of the E-stop input counts once it has held this long, 0 to 100 ms (asking the kernel to debounce, else counted in loop ticks)",
    },
    Key {
        path: "estop.drive",
        default: "`false`",
        meaning: "a drive's report of its own E-stop (CiA 402 quick stop active, ODrive `ESTOP_REQUESTED`) is the loop's E-stop rather than the fault `drive_estop`",
    },
    Key {
        path: "recorder.seconds",
        default: "`10`",
        meaning: "the flight recorder: seconds of loop ticks the loop keeps in its ring, and so in each dump (0 to 600; 0 turns it off). The ring is allocated and locked whole: 56 + 72 × DOFs bytes a tick (10 s at 1 kHz: 4.9 MB for the demo arm's 6 DOFs, 21 MB for SR1's 29); the recorder's thread keeps a copy as long — see [The flight recorder](flight-recorder.md)",
    },
    Key {
        path: "recorder.dir",
        default: "the state directory's `flight`",
        meaning: "where dumps go: `$STATE_DIRECTORY/flight` under systemd (the unit's `StateDirectory=motiond`: `/var/lib/motiond/flight`), else `/var/lib/motiond/flight`",
    },
    Key {
        path: "recorder.max_files",
        default: "`20`",
        meaning: "dumps kept in `recorder.dir`; the oldest are removed first",
    },
    Key {
        path: "recorder.max_mib",
        default: "`512`",
        meaning: "… and at most this many MiB of them together",
    },
];
