//! The CAN drives of a motiond configuration, emulated on a SocketCAN interface, and a checker of
//! what went over the bus — for the system tests (tests/system), where motiond plays on a real
//! kernel's vcan or slcan interface against these peers while `candump -L` records the bus.
//!
//! ```sh
//! can_peer drives --config motiond.yaml --start MOTION.seq [--interface IF]   # until SIGTERM
//! can_peer check --config motiond.yaml --motion MOTION.seq --log candump.log --report report.json
//! ```
//!
//! `drives` starts every drive of the configuration's CAN and SLCAN buses at the motion's first
//! pose (CiA 402 from tests/bus_peer, ODrive, MIT, Robstride and moteus beside it), prints `ready`, and on SIGTERM
//! prints what each drive received. `check` reads a `candump -L` log and proves, per drive, the
//! protocol's set-up frames, that every streamed target is a sample of the trajectory motiond
//! builds from the same files, one per tick with none skipped or repeated (a late tick delays the
//! path), and the end of play (the drive disabled at the last sample).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test peer fails loudly where its setup breaks"
)]

#[path = "../tests/bus_peer/mod.rs"]
mod bus_peer;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bus_peer::{
    Cia402Drive, MitMotor, MoteusServo, OdriveAxis, RobstrideMotor, mit_command, mit_special,
    moteus_writes,
};
use clap::Parser;
use motiond::backend::BackendError;
use motiond::backend::bus::settings::{
    BusSettings as Bus, DriveSettings as BusJoint, Problems, Transport,
};
use motiond::backend::frame::CanFrame;
use motiond::backend::transport::FrameIo;
use motiond::backend::transport::socketcan::SocketCanIo;
use motiond::backend::{cia402, mit, odrive, robstride};
use motiond::config::{BackendConfig, Config};
use motiond::trajectory::{self, ColumnMap, Cursor, JointSet, Options, Setpoint};

#[derive(Parser)]
enum Cli {
    /// Emulate the configuration's CAN drives until SIGTERM.
    Drives {
        #[arg(long)]
        config: PathBuf,
        /// The drives start at this motion's first pose.
        #[arg(long)]
        start: PathBuf,
        /// SocketCAN interface for every bus (default: each CAN bus's own; needed for SLCAN).
        #[arg(long)]
        interface: Option<String>,
    },
    /// Check a `candump -L` log of one `motiond play` of MOTION.
    Check {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        motion: PathBuf,
        #[arg(long)]
        log: PathBuf,
        /// The `motiond play --report json` output of that play (for its overrun count).
        #[arg(long)]
        report: PathBuf,
        /// Interface named in the log (default: each CAN bus's own; needed for SLCAN).
        #[arg(long)]
        interface: Option<String>,
    },
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse() {
        Cli::Drives {
            config,
            start,
            interface,
        } => drives(&config, &start, interface.as_deref()),
        Cli::Check {
            config,
            motion,
            log,
            report,
            interface,
        } => check(&config, &motion, &log, &report, interface.as_deref()),
    }
}

/// A drive's family, with the settings its peer needs.
#[derive(Clone, Copy, PartialEq)]
enum Protocol {
    Cia402,
    Odrive(odrive::settings::Settings),
    Mit(mit::settings::Settings),
    Moteus,
    Robstride(robstride::settings::Settings),
    /// Not spoken on CAN (or not emulated here).
    Dynamixel,
}

fn protocol(j: &BusJoint) -> Protocol {
    let mut scratch = Problems::default();
    match j.family.name() {
        "cia402" => Protocol::Cia402,
        "odrive" => Protocol::Odrive(odrive::settings::settings(&j.keys, "", &mut scratch)),
        "mit" => match mit::settings::settings(&j.keys, "", &mut scratch) {
            Some(s) => Protocol::Mit(s),
            None => Protocol::Dynamixel,
        },
        "moteus" => Protocol::Moteus,
        "robstride" => match robstride::settings::settings(&j.keys, "", j.id, &mut scratch) {
            Some(s) => Protocol::Robstride(s),
            None => Protocol::Dynamixel,
        },
        _ => Protocol::Dynamixel,
    }
}

/// The configuration, its joint set and the motion's trajectory sampled at every tick.
fn load(config: &Path, motion: &Path) -> anyhow::Result<(Config, JointSet, Vec<Vec<Setpoint>>)> {
    let config = Config::load(config)?;
    let options = motiond::robot::Options {
        fixed_base: config.robot.fixed_base,
        ..Default::default()
    };
    let world = motiond::robot::load(&config.robot.model, &options)?;
    let joints = JointSet::from_world(&world, &config.robot.limits)?;
    let seq = motiond::motion::seq::load(motion)?;
    let parts = seq
        .joint_displacement()
        .context("the motion has no JointDisplacement")?
        .num_parts;
    let map = match &config.robot.joints {
        Some(names) => ColumnMap::by_name(&joints, names, parts),
        None => ColumnMap::in_dof_order(&joints, parts),
    }
    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let options = Options {
        rate_hz: config.control.rate_hz,
        interpolation: config.motion.interpolation,
        policy: config.motion.limit_policy,
        ..Options::default()
    };
    let t = trajectory::build(&joints, &seq, &map, &options)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .trajectory;
    let mut cursor = Cursor::default();
    let samples = (0..t.ticks())
        .map(|k| {
            let mut out = vec![Setpoint::default(); joints.len()];
            t.sample(&mut cursor, k, &mut out);
            out
        })
        .collect();
    Ok((config, joints, samples))
}

fn buses(config: &Config) -> anyhow::Result<&[Bus]> {
    match &config.backend {
        BackendConfig::Buses(b) => Ok(b),
        BackendConfig::Sim => bail!("the configuration has no buses (backend: sim)"),
    }
}

/// The SocketCAN interface a bus is seen on.
fn interface_of(bus: &Bus, given: Option<&str>) -> anyhow::Result<String> {
    match (given, &bus.transport) {
        (Some(i), _) => Ok(i.to_string()),
        (None, Transport::Can { interface, .. }) => Ok(interface.clone()),
        (None, _) => bail!("bus `{}` is not SocketCAN: name the interface", bus.name),
    }
}

/// A peer's socket: a send the kernel refuses (interface down, queue full) is dropped as a real
/// drive's would be, so the peer outlives the faults the tests inject; the drops are counted
/// (a reply that never left explains a motiond that saw no feedback).
struct Lossy {
    io: SocketCanIo,
    /// Refused sends by the OS error (errno) the kernel gave.
    refused: BTreeMap<u32, u64>,
}

impl FrameIo for Lossy {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        if let Err(e) = self.io.send(frame) {
            *self.refused.entry(e.code).or_default() += 1;
        }
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        self.io.recv()
    }
}

enum Peer {
    Cia402(Cia402Drive),
    Odrive(OdriveAxis),
    Mit(MitMotor),
    Moteus(MoteusServo),
    Robstride(RobstrideMotor),
}

struct Emulated {
    dof: String,
    peer: Peer,
}

/// Cyclic ODrive messages every 10 ms, as the firmware's default encoder rate.
const ODRIVE_CYCLE: Duration = Duration::from_millis(10);

fn drives(config: &Path, start: &Path, interface: Option<&str>) -> anyhow::Result<ExitCode> {
    let (config, joints, samples) = load(config, start)?;
    let first = samples.first().context("the motion has no samples")?;
    let mut buses_open = Vec::new();
    for bus in buses(&config)? {
        let name = interface_of(bus, interface)?;
        let io = SocketCanIo::open(&name, bus.fd()).with_context(|| format!("opening {name}"))?;
        let peers: Vec<Emulated> = bus
            .joints
            .iter()
            .map(|j| {
                let index = joints
                    .index_of(&j.dof)
                    .with_context(|| format!("{} is not commanded", j.dof))?;
                let at = j.units.to_drive(first[index].position);
                let peer = match protocol(j) {
                    Protocol::Cia402 => Peer::Cia402(Cia402Drive::new(j.id, at.round() as i32)),
                    Protocol::Odrive(_) => Peer::Odrive(OdriveAxis::new(j.id, at as f32)),
                    Protocol::Mit(settings) => {
                        Peer::Mit(MitMotor::new(j.id, settings.ranges, at as f32))
                    }
                    Protocol::Moteus => Peer::Moteus(MoteusServo::new(j.id, at as f32)),
                    Protocol::Robstride(settings) => {
                        Peer::Robstride(RobstrideMotor::new(j.id, settings.ranges, at as f32))
                    }
                    Protocol::Dynamixel => bail!("{}: not a CAN drive emulated here", j.dof),
                };
                Ok(Emulated {
                    dof: j.dof.clone(),
                    peer,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let refused = BTreeMap::new();
        buses_open.push((name, Lossy { io, refused }, peers));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    println!("ready");
    let mut cyclic_due = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let cyclic = Instant::now() >= cyclic_due;
        if cyclic {
            cyclic_due += ODRIVE_CYCLE;
        }
        for (_, io, peers) in &mut buses_open {
            // Error frames and a downed interface are the tests' doing: keep listening.
            while let Ok(Some(f)) = io.recv() {
                for e in peers.iter_mut() {
                    match &mut e.peer {
                        Peer::Cia402(d) => d.on_frame(&f, io),
                        Peer::Odrive(a) => a.on_frame(&f),
                        Peer::Mit(m) => m.on_frame(&f, io),
                        Peer::Moteus(m) => m.on_frame(&f, io),
                        Peer::Robstride(m) => m.on_frame(&f, io),
                    }
                }
            }
            if cyclic {
                for e in peers.iter() {
                    if let Peer::Odrive(a) = &e.peer {
                        a.send_cyclic(io);
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    for (name, io, peers) in &buses_open {
        let by_errno: Vec<String> = io
            .refused
            .iter()
            .map(|(errno, n)| format!("{n} with errno {errno}"))
            .collect();
        println!(
            "{name}: {} frames the kernel refused to send{}",
            io.refused.values().sum::<u64>(),
            if by_errno.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_errno.join(", "))
            }
        );
        for e in peers {
            let (what, n) = match &e.peer {
                Peer::Cia402(d) => (format!("cia402 node {}", d.node), d.rpdos.len()),
                Peer::Odrive(a) => (format!("odrive node {}", a.node), a.commands.len()),
                Peer::Mit(m) => (format!("mit motor {}", m.id), m.commands.len()),
                Peer::Moteus(m) => (format!("moteus {}", m.id), m.commands.len()),
                Peer::Robstride(m) => (format!("robstride motor {}", m.id), m.commands.len()),
            };
            println!("{}: {what}: {n} commands", e.dof);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One frame of a `candump -L` log: `(seconds) interface ID#DATA`. Times are not checked: a
/// late tick delays the stream, only its order is fixed.
#[derive(Clone, Copy)]
struct Logged {
    frame: CanFrame,
}

fn parse_line(line: &str) -> Option<(String, Logged)> {
    let mut words = line.split_whitespace();
    words.next()?.strip_prefix('(')?.strip_suffix(')')?;
    let interface = words.next()?.to_string();
    let (id, data) = words.next()?.split_once('#')?;
    let raw = u32::from_str_radix(id, 16).ok()?;
    // CAN-FD: `ID##F…`, F the flags nibble (1: bit rate switch).
    let (fd, data) = match data.strip_prefix('#') {
        Some(rest) => (true, rest.get(1..)?),
        None => (false, data),
    };
    if data.starts_with('R') || data.len() % 2 != 0 {
        return None;
    }
    let bytes: Vec<u8> = (0..data.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&data[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let frame = if fd {
        CanFrame::new_fd(raw, id.len() > 3, &bytes)
    } else if id.len() > 3 {
        CanFrame::new_extended(raw, &bytes)
    } else {
        CanFrame::new(raw, &bytes)
    };
    Some((interface, Logged { frame }))
}

/// How many ticks of the play `motiond play --report json` counted as overruns.
fn overruns(report: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(report)?;
    let r: serde_json::Value = serde_json::from_str(&text)?;
    r["overruns"].as_u64().context("report: overruns")
}

fn check(
    config: &Path,
    motion: &Path,
    log: &Path,
    report: &Path,
    interface: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let (config, joints, samples) = load(config, motion)?;
    let overruns = overruns(report)?;
    let text =
        std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    let frames: Vec<(String, Logged)> = text.lines().filter_map(parse_line).collect();
    let mut problems = Vec::new();
    for bus in buses(&config)? {
        let name = interface_of(bus, interface)?;
        let on_bus: Vec<Logged> = frames
            .iter()
            .filter(|(i, _)| *i == name)
            .map(|(_, f)| *f)
            .collect();
        if on_bus.is_empty() {
            problems.push(format!("no frames on {name} in {}", log.display()));
            continue;
        }
        for j in &bus.joints {
            let index = joints.index_of(&j.dof).context("joint")?;
            let positions: Vec<f64> = samples.iter().map(|s| s[index].position).collect();
            let rate = config.control.rate_hz;
            match check_drive(j, bus, &on_bus, &positions, overruns, rate) {
                Ok(summary) => println!("{}: {summary}", j.dof),
                Err(why) => problems.push(format!(
                    "{} ({} id {}): {why}",
                    j.dof,
                    j.family.name(),
                    j.id
                )),
            }
        }
    }
    for p in &problems {
        eprintln!("why: {p}");
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A command's target in the drive's own wire units (counts, turns as f32, MIT's 16-bit code).
type Wire = f64;

/// A drive's frames split up by protocol: what its set-up was, the streamed targets with their
/// times, and how it ended.
struct Split {
    setup: String,
    stream: Vec<Wire>,
    end: String,
}

/// Checks one drive: its set-up frames, its stream against the samples, its end.
fn check_drive(
    j: &BusJoint,
    bus: &Bus,
    frames: &[Logged],
    positions: &[f64],
    overruns: u64,
    rate_hz: f64,
) -> Result<String, String> {
    let wire = |p: f64| -> Wire {
        let d = j.units.to_drive(p);
        match protocol(j) {
            Protocol::Cia402 => d.round(),
            Protocol::Odrive(_) => f64::from(d as f32),
            Protocol::Mit(settings) => f64::from(mit::float_to_uint(
                d as f32,
                settings.ranges.p_min,
                settings.ranges.p_max,
                16,
            )),
            Protocol::Moteus => f64::from(d as f32),
            Protocol::Robstride(settings) => {
                let p = settings.ranges.p_max;
                f64::from(mit::float_to_uint(d as f32, -p, p, 16))
            }
            Protocol::Dynamixel => d,
        }
    };
    let expected: Vec<Wire> = positions.iter().map(|&p| wire(p)).collect();
    let split = match protocol(j) {
        Protocol::Cia402 => cia402_split(j.id, bus, frames, rate_hz)?,
        Protocol::Odrive(settings) => odrive_split(j.id, settings.firmware, frames)?,
        Protocol::Mit(settings) => mit_split(j.id, &settings.ranges, frames)?,
        Protocol::Moteus => moteus_split(j.id, frames)?,
        Protocol::Robstride(settings) => robstride_split(j.id, &settings, bus, frames)?,
        Protocol::Dynamixel => return Err("not a CAN drive".into()),
    };
    // Before the motion the drive holds and approaches sample 0 from where it started, which
    // was sample 0 as the wire carries it: within one wire unit of it.
    let unit = match protocol(j) {
        Protocol::Odrive(_) | Protocol::Moteus => 1e-5,
        _ => 1.0,
    };
    let stream = &split.stream;
    let near_start = stream
        .iter()
        .take_while(|&&v| (v - expected[0]).abs() <= unit)
        .count();
    // The motion advances exactly one sample per tick the loop runs (a late tick delays the
    // path, it never skips along it): from the first sample that differs from sample 0 on the
    // wire, the targets are the samples one after another, none skipped and none repeated,
    // then the last sample held until the drive is disabled. That first sample may itself lie
    // within a unit of sample 0, so the motion starts at the earliest place it fits.
    let first = expected
        .iter()
        .position(|&e| e != expected[0])
        .unwrap_or(expected.len());
    let fits = |lead: usize| follows(&stream[lead..], &expected[first..]);
    let (lead, held) = match (0..=near_start).find_map(|lead| Some((lead, fits(lead).ok()?))) {
        Some(found) => found,
        None => {
            // The start that fits longest tells where the stream went wrong.
            let (lead, (_, why)) = (0..=near_start)
                .filter_map(|lead| Some((lead, fits(lead).err()?)))
                .max_by_key(|(_, (at, _))| *at)
                .unwrap_or_default();
            return Err(format!("after {lead} targets at sample 0, {why}"));
        }
    };
    Ok(format!(
        "set-up {}; {} targets: {lead} at sample 0, samples {first}..{} of the trajectory one \
         per tick, none skipped or repeated ({overruns} overruns), then the last held {held} \
         times; ended with {}",
        split.setup,
        stream.len(),
        expected.len() - 1,
        split.end
    ))
}

/// Whether `stream` is exactly `samples`, then the last sample held: how many times it was held,
/// or where (the target's index) and how it is not.
fn follows(stream: &[Wire], samples: &[Wire]) -> Result<usize, (usize, String)> {
    for (i, (&v, &e)) in stream.iter().zip(samples).enumerate() {
        if v != e {
            let next = |k: usize| stream.get(k).map_or("none".into(), |v| v.to_string());
            return Err((
                i,
                format!(
                    "target {i} of the motion is {v}, not its sample ({e}): a sample skipped or \
                     repeated (targets {i}.. are {v}, {}, {}; samples {})",
                    next(i + 1),
                    next(i + 2),
                    samples[i..]
                        .iter()
                        .take(3)
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if stream.len() < samples.len() {
        return Err((
            stream.len(),
            format!(
                "the stream stopped after {} of the motion's {} samples",
                stream.len(),
                samples.len()
            ),
        ));
    }
    let Some(&last) = samples.last() else {
        return Ok(stream.len());
    };
    let held = &stream[samples.len()..];
    match held.iter().position(|&v| v != last) {
        Some(i) => Err((
            samples.len() + i,
            format!(
                "target {} = {} after the last sample ({last}) was sent",
                samples.len() + i,
                held[i]
            ),
        )),
        None => Ok(held.len()),
    }
}

fn odrive_split(node: u8, firmware: odrive::Firmware, frames: &[Logged]) -> Result<Split, String> {
    let cyclic = [
        odrive::can_id(node, odrive::HEARTBEAT),
        odrive::can_id(node, odrive::GET_ENCODER_ESTIMATES),
    ];
    let mine: Vec<&Logged> = frames
        .iter()
        .filter(|l| {
            let f = &l.frame;
            !f.extended && odrive::split_id(f.id).0 == node && !cyclic.contains(&f.id)
        })
        .collect();
    let at = |i: usize| mine.get(i).map(|l| l.frame);
    if at(0) != Some(odrive::clear_errors(node, firmware)) {
        return Err(format!("first frame {:x?} is not Clear_Errors", at(0)));
    }
    let mode = odrive::set_controller_mode(
        node,
        odrive::CONTROL_MODE_POSITION,
        odrive::INPUT_MODE_PASSTHROUGH,
    );
    if at(1) != Some(mode) {
        return Err(format!(
            "second frame {:x?} is not Set_Controller_Mode(position, passthrough)",
            at(1)
        ));
    }
    let closed = odrive::set_axis_state(node, odrive::AXIS_STATE_CLOSED_LOOP_CONTROL);
    let request = mine
        .iter()
        .position(|l| l.frame == closed)
        .ok_or("closed loop never requested")?;
    let input_pos = odrive::can_id(node, odrive::SET_INPUT_POS);
    if request
        .checked_sub(1)
        .and_then(at)
        .is_none_or(|f| f.id != input_pos)
    {
        return Err("closed loop requested without a Set_Input_Pos before it".into());
    }
    let stream = mine
        .iter()
        .filter(|l| l.frame.id == input_pos)
        .map(|l| {
            let d = l.frame.data();
            f64::from(f32::from_le_bytes([d[0], d[1], d[2], d[3]]))
        })
        .collect();
    let idle = odrive::set_axis_state(node, odrive::AXIS_STATE_IDLE);
    let last = mine.last().map(|l| l.frame);
    if last != Some(idle) {
        return Err(format!(
            "the last frame {last:x?} is not Set_Axis_State(IDLE)"
        ));
    }
    Ok(Split {
        setup: "Clear_Errors, Set_Controller_Mode, Set_Input_Pos, Set_Axis_State(CLOSED_LOOP)"
            .into(),
        stream,
        end: "Set_Axis_State(IDLE)".into(),
    })
}

fn mit_split(id: u8, ranges: &mit::Ranges, frames: &[Logged]) -> Result<Split, String> {
    let mine: Vec<&Logged> = frames
        .iter()
        .filter(|l| !l.frame.extended && l.frame.id == u32::from(id) && l.frame.len() == 8)
        .collect();
    let special = |l: &&Logged| mit_special(l.frame.data());
    if mine.first().and_then(special) != Some(0xFC) {
        return Err("the first frame is not Enter Motor Mode".into());
    }
    let stream = mine
        .iter()
        .filter(|l| special(l).is_none())
        .map(|l| {
            let c = mit_command(l.frame.data(), ranges);
            let code = mit::float_to_uint(c.p, ranges.p_min, ranges.p_max, 16);
            f64::from(code)
        })
        .collect();
    if mine.last().and_then(special) != Some(0xFD) {
        return Err("the last frame is not Exit Motor Mode".into());
    }
    Ok(Split {
        setup: "Enter Motor Mode".into(),
        stream,
        end: "Exit Motor Mode".into(),
    })
}

/// moteus: stop first (mode 0, a fault cleared), then position-mode commands with the watchdog
/// (0x027) and the query in CAN-FD frames with the bit rate switch, and stop at the end.
fn moteus_split(id: u8, frames: &[Logged]) -> Result<Split, String> {
    let mine: Vec<&Logged> = frames
        .iter()
        .filter(|l| l.frame.fd && l.frame.extended && l.frame.id == 0x8000 | u32::from(id))
        .collect();
    let writes: Vec<_> = mine.iter().map(|l| moteus_writes(l.frame.data())).collect();
    if writes.first().map(|w| w.mode) != Some(Some(0)) {
        return Err("the first frame is not a stop (mode 0)".into());
    }
    let commands: Vec<_> = writes.iter().filter(|w| w.mode == Some(10)).collect();
    if commands
        .iter()
        .any(|w| w.watchdog.is_none_or(|t| !t.is_finite()) || !w.query)
    {
        return Err("a position command without its watchdog (0x027) or its query".into());
    }
    let stream = commands
        .iter()
        .map(|w| f64::from(w.position.unwrap_or(f32::NAN)))
        .collect();
    if writes.last().map(|w| w.mode) != Some(Some(0)) {
        return Err("the last frame is not a stop (mode 0)".into());
    }
    Ok(Split {
        setup: "stop (mode 0), then position mode (10) with the watchdog and the query".into(),
        stream,
        end: "stop (mode 0)".into(),
    })
}

/// Robstride: run_mode read, the CAN timeout written (when `watchdog_ms` is set), enable, every
/// frame with a 29-bit id; then motion frames; the stop last.
fn robstride_split(
    id: u8,
    s: &robstride::settings::Settings,
    bus: &Bus,
    frames: &[Logged],
) -> Result<Split, String> {
    use robstride::codec as rs;
    let mine: Vec<CanFrame> = frames
        .iter()
        .map(|l| l.frame)
        .filter(|f| f.extended && rs::split_id(f.id).2 == id)
        .collect();
    let host = s.host_id;
    let mut wanted = vec![rs::read_param(id, host, rs::PARAM_RUN_MODE)];
    if bus.watchdog_ms > 0.0 {
        let units = rs::can_timeout(bus.watchdog_ms).to_le_bytes();
        wanted.push(rs::write_param(id, host, rs::PARAM_CAN_TIMEOUT, units));
    }
    wanted.push(rs::enable(id, host));
    let mut setup: Vec<CanFrame> = mine
        .iter()
        .copied()
        .filter(|f| rs::split_id(f.id).0 != rs::MOTION)
        .collect();
    setup.dedup();
    let end = setup.pop();
    if setup != wanted {
        return Err(format!(
            "set-up {setup:x?}: expected the run_mode read, canTimeout, enable"
        ));
    }
    if end != Some(rs::stop(id, host, false)) {
        return Err(format!("the last frame {end:x?} is not a stop"));
    }
    let stream = mine
        .iter()
        .filter(|f| rs::split_id(f.id).0 == rs::MOTION)
        .map(|f| f64::from(u16::from_be_bytes([f.data()[0], f.data()[1]])))
        .collect();
    Ok(Split {
        setup: format!(
            "run_mode read (motion), canTimeout {} ms, enable, all with 29-bit ids",
            bus.watchdog_ms
        ),
        stream,
        end: "stop".into(),
    })
}

/// CiA 402: the SDO set-up (each acknowledged), NMT start, then RPDO targets; once enabled,
/// every node of the bus gets exactly one RPDO between two SYNCs (no burst cut short).
fn cia402_split(node: u8, bus: &Bus, frames: &[Logged], rate_hz: f64) -> Result<Split, String> {
    // The set-up motiond derives from the bus's settings (backend::cia402::drive).
    let cia402_bus = cia402::settings::bus_settings(&bus.keys, "", &mut Problems::default());
    let options = cia402::Options {
        period: cia402::interpolation_period(rate_hz).ok_or("no interpolation period")?,
        sync_period_us: (1e6 / rate_hz).round() as u32,
        heartbeat_ms: cia402_bus.heartbeat_ms,
        master_node: cia402_bus.master_id,
        consumer_ms: bus.watchdog_ms.ceil().clamp(0.0, 65535.0) as u16,
        on_connection_loss: cia402_bus.on_connection_loss,
    };
    let wanted: Vec<CanFrame> = cia402::setup(node, &options)
        .iter()
        .map(|step| step.request(node))
        .collect();
    let (request, response, rpdo) = (
        cia402::COB_SDO_REQUEST + u32::from(node),
        cia402::COB_SDO_RESPONSE + u32::from(node),
        cia402::COB_RPDO1 + u32::from(node),
    );
    let mut requests: Vec<CanFrame> = Vec::new();
    let mut acks = 0;
    let mut started = false;
    let mut rpdos: Vec<(u16, i32)> = Vec::new();
    for l in frames {
        let (f, d) = (&l.frame, l.frame.data());
        if f.id == request {
            if started {
                return Err("an SDO after NMT start".into());
            }
            if requests.last() != Some(f) {
                requests.push(*f);
            }
        } else if f.id == response {
            acks += 1;
        } else if *f == cia402::nmt(cia402::NMT_START, node) {
            started = true;
        } else if f.id == rpdo && d.len() >= 6 {
            if !started {
                return Err("an RPDO before NMT start".into());
            }
            rpdos.push((
                u16::from_le_bytes([d[0], d[1]]),
                i32::from_le_bytes([d[2], d[3], d[4], d[5]]),
            ));
        }
    }
    if requests != wanted {
        return Err(format!(
            "SDO set-up: {} distinct writes, expected the {} of the PDO/mode set-up in order",
            requests.len(),
            wanted.len()
        ));
    }
    if acks < wanted.len() {
        return Err(format!(
            "only {acks} of {} SDO writes acknowledged",
            wanted.len()
        ));
    }
    let mut cws: Vec<u16> = rpdos.iter().map(|r| r.0).collect();
    cws.dedup();
    let enable = [
        cia402::CW_SHUTDOWN,
        cia402::CW_SWITCH_ON,
        cia402::CW_ENABLE_OPERATION,
    ];
    if !cws.starts_with(&enable) {
        return Err(format!(
            "controlwords {cws:x?}: expected 0x06, 0x07, 0x0f first"
        ));
    }
    let nodes: BTreeSet<u32> = bus
        .joints
        .iter()
        .filter(|j| protocol(j) == Protocol::Cia402)
        .map(|j| cia402::COB_RPDO1 + u32::from(j.id))
        .collect();
    // From the first SYNC after every drive's first enable-operation command on: before that
    // a drive still in its SDO set-up gets no RPDO (the drives come up each at its own pace).
    let first_enable = |id: u32| {
        frames
            .iter()
            .position(|l| l.frame.id == id && l.frame.data().first() == Some(&0x0F))
    };
    first_enable(rpdo).ok_or("never enabled")?;
    let enabled = nodes
        .iter()
        .map(|&id| {
            first_enable(id).ok_or(format!("node {:#x} never enabled", id - cia402::COB_RPDO1))
        })
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .max()
        .unwrap_or(0);
    let first_sync = enabled
        + frames[enabled..]
            .iter()
            .position(|l| l.frame == cia402::sync())
            .ok_or("no SYNC after enabling")?;
    let mut in_tick: BTreeMap<u32, usize> = BTreeMap::new();
    let mut ticks = 0;
    for l in &frames[first_sync + 1..] {
        if l.frame == cia402::sync() {
            let complete = in_tick.len() == nodes.len() && in_tick.values().all(|&n| n == 1);
            if !complete {
                return Err(format!(
                    "tick {ticks}: RPDOs {in_tick:x?} between two SYNCs, expected one to each of {nodes:x?}"
                ));
            }
            in_tick.clear();
            ticks += 1;
        } else if nodes.contains(&l.frame.id) {
            *in_tick.entry(l.frame.id).or_default() += 1;
        }
    }
    let &(last_cw, last_target) = rpdos.last().ok_or("no RPDO")?;
    if last_cw != cia402::CW_SHUTDOWN {
        return Err(format!(
            "the last controlword is {last_cw:#x}, not 0x06 (shutdown)"
        ));
    }
    // The stream: every RPDO target but the final shutdown's.
    let stream = rpdos[..rpdos.len() - 1]
        .iter()
        .map(|&(_, target)| f64::from(target))
        .collect();
    Ok(Split {
        setup: format!(
            "{} SDO writes acknowledged, NMT start, controlwords 0x06 0x07 0x0f, one RPDO to \
             each node per SYNC over {ticks} ticks",
            wanted.len()
        ),
        stream,
        end: format!("controlword 0x06 (shutdown) at target {last_target}"),
    })
}
