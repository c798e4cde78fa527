//! LeRobot calibration files in: per motor `{id, drive_mode, homing_offset, range_min,
//! range_max}` (what `lerobot-calibrate` saves under
//! `$HF_LEROBOT_HOME/calibration/robots/<robot>/<id>.json`), out: the affine map between a
//! servo's position counts and the joint's position that LeRobot's normalisation implies.
//!
//! LeRobot (`lerobot/motors/motors_bus.py`, `MotorsBus._normalize`, 0.6.2) normalises a raw
//! position `raw` (what the servo reports, its `Homing_Offset` already applied by the servo) of a
//! motor calibrated to `[range_min, range_max]` by its mode:
//! - `DEGREES`: `(raw − mid) · 360 / (resolution − 1)`, `mid = (range_min + range_max) / 2`;
//!   not clamped, and `drive_mode` is not applied in this mode;
//! - `RANGE_0_100`: `(clamp(raw) − range_min) / (range_max − range_min) · 100`, then `100 − x`
//!   when the bus applies drive modes (Feetech does; Dynamixel reverses in the servo instead,
//!   through its Drive_Mode register) and `drive_mode` is 1;
//! - `RANGE_M100_100`: the same over −100..100, negated under `drive_mode`.
//!
//! motiond's joint positions are radians: a `DEGREES` motor's joint is its degrees in radians
//! (the joint's zero is the middle of the calibrated range, as in `so101_new_calib.urdf`), and a
//! range motor's 0..100 (−100..100) spans the joint's position range `[lower, upper]` — both
//! affine in `raw`, so they become [`Units`] (`counts = scale · joint + offset`) that every
//! count-based drive applies. Unlike LeRobot, feedback beyond a range motor's calibrated range is
//! not clamped (the joint position reported is where the servo is); commands stay inside it
//! because the joint's limits map inside `[range_min, range_max]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::bus::settings::{
    BusSettings, DriveSettings, Param, ParamKind, Problem, Problems, ServoCounts, Units,
};
pub use super::servo_registers::{Mismatch, Register, ServoRegisters};
use crate::trajectory::JointSet;

/// The bus key naming a calibration file (relative to the configuration file's folder).
pub const KEY: &str = "lerobot_calibration";
/// The drive key naming its motor in the file (default: the joint's name).
pub const MOTOR_KEY: &str = "lerobot_motor";
/// The drive key giving its motor's normalisation ([`NormMode::parse`]; default: `range_0_100`
/// for a motor named `gripper`, as LeRobot's SO and Koch arms record it, `degrees` otherwise).
pub const MODE_KEY: &str = "lerobot_mode";

/// The bus key, for the families whose servos take a calibration.
pub const BUS_PARAM: Param = Param::same(KEY, ParamKind::Text);
/// The drive keys, likewise.
pub const MOTOR_PARAM: Param = Param::same(MOTOR_KEY, ParamKind::Text);
pub const MODE_PARAM: Param = Param::same(MODE_KEY, ParamKind::Text);

/// One motor of a calibration file, as LeRobot's `MotorCalibration` holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Motor {
    pub id: i64,
    pub drive_mode: i64,
    pub homing_offset: i64,
    pub range_min: i64,
    pub range_max: i64,
}

/// A calibration file: motors by name (LeRobot's motor names, such as `shoulder_pan`).
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub path: PathBuf,
    pub motors: BTreeMap<String, Motor>,
}

/// How LeRobot normalises a motor's position (`MotorNormMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormMode {
    Degrees,
    Range0To100,
    RangeM100To100,
}

impl NormMode {
    /// By LeRobot's value names: `degrees`, `range_0_100`, `range_m100_100`.
    pub fn parse(name: &str) -> Option<NormMode> {
        match name {
            "degrees" => Some(NormMode::Degrees),
            "range_0_100" => Some(NormMode::Range0To100),
            "range_m100_100" => Some(NormMode::RangeM100To100),
            _ => None,
        }
    }

    pub const NAMES: &'static str = "degrees, range_0_100, range_m100_100";
}

/// Why a calibration file or motor cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("{}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("{}:{line}:{col}: {message}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{message}")]
    Motor { message: String },
}

impl Calibration {
    pub fn load(path: &Path) -> Result<Calibration, Error> {
        let io = |message: String| Error::Io {
            path: path.to_path_buf(),
            message,
        };
        // A FIFO or a device would block the read (and the daemon's start) forever.
        let meta = std::fs::metadata(path).map_err(|e| io(e.to_string()))?;
        if !meta.is_file() {
            return Err(io("not a regular file".into()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| io(e.to_string()))?;
        Calibration::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Calibration, Error> {
        let motors: BTreeMap<String, Motor> =
            serde_json::from_str(text).map_err(|e| Error::Invalid {
                path: path.to_path_buf(),
                line: e.line(),
                col: e.column(),
                message: format!(
                    "{}; a LeRobot calibration maps each motor name to {{\"id\", \
                     \"drive_mode\", \"homing_offset\", \"range_min\", \"range_max\"}}",
                    e.to_string().split(" at line ").next().unwrap_or("")
                ),
            })?;
        Ok(Calibration {
            path: path.to_path_buf(),
            motors,
        })
    }
}

/// The motor of `drive` named in the file (its `lerobot_motor`, else the joint's name).
fn motor_name(drive: &DriveSettings) -> &str {
    drive.keys.text(MOTOR_KEY).unwrap_or(&drive.dof)
}

/// How the motor of `drive` is normalised: its `lerobot_mode`, else LeRobot's default for its
/// name. `None`: a mode LeRobot does not have (refused by [`check_drive`]).
fn norm_mode(drive: &DriveSettings) -> Option<NormMode> {
    match drive.keys.text(MODE_KEY) {
        Some(mode) => NormMode::parse(mode),
        None if motor_name(drive) == "gripper" => Some(NormMode::Range0To100),
        None => Some(NormMode::Degrees),
    }
}

/// Checks the LeRobot keys of one drive of `bus` (at `bus_key`): a known mode, and no motor
/// keys on a bus without a calibration file.
pub fn check_drive(drive: &DriveSettings, bus: &BusSettings, bus_key: &str, p: &mut Problems) {
    let key = format!("{bus_key}.joints.{}", drive.dof);
    if let Some(mode) = drive.keys.text(MODE_KEY)
        && NormMode::parse(mode).is_none()
    {
        p.add(
            format!("{key}.{MODE_KEY}"),
            format!("expected one of {}, got `{mode}`", NormMode::NAMES),
        );
    }
    if bus.keys.get(KEY).is_none() {
        for own in [MOTOR_KEY, MODE_KEY] {
            if drive.keys.get(own).is_some() {
                p.add(
                    format!("{key}.{own}"),
                    format!(
                        "applies with a calibration file only: give the bus `{KEY}: FILE` \
                         (LeRobot's calibration of the arm)"
                    ),
                );
            }
        }
    }
}

/// Gives every drive of each bus that names a calibration file (`lerobot_calibration`, relative
/// to `config`'s folder) its units from its motor there, refusing what does not agree: a motor
/// the file lacks, ids that differ, units also given by hand (`counts_per_unit`, `zero_offset`,
/// `gear_ratio`, `direction`), joint limits (`joints`, as the configuration tightens them) that
/// map outside the motor's calibrated range — the servo's own position limits, which LeRobot
/// writes to it. `model_range` is a joint's position range in the robot model (what a range
/// motor's 0..100 spans, as `motiond import lerobot` maps it). Each problem is at its key
/// (`buses[i].…`), the file's own place (FILE:LINE:COL) in its message.
pub fn apply(
    buses: &mut [BusSettings],
    config: &Path,
    joints: &JointSet,
    model_range: &dyn Fn(&str) -> Option<(f64, f64)>,
) -> Vec<Problem> {
    let mut p = Problems::default();
    for (b, bus) in buses.iter_mut().enumerate() {
        let Some(name) = bus.keys.text(KEY) else {
            continue;
        };
        let bus_key = format!("buses[{b}]");
        let path = match config.parent() {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        };
        let calibration = match Calibration::load(&path) {
            Ok(c) => c,
            Err(e) => {
                let what = match e {
                    Error::Io { .. } => {
                        "; calibrate the arm with `lerobot-calibrate` and name the file it \
                         saves (under ~/.cache/huggingface/lerobot/calibration/robots/), \
                         relative to this configuration's folder"
                    }
                    _ => "",
                };
                p.add(format!("{bus_key}.{KEY}"), format!("{e}{what}"));
                continue;
            }
        };
        for drive in &mut bus.joints {
            let key = format!("{bus_key}.joints.{}", drive.dof);
            if let Some(units) = drive_units(drive, &calibration, joints, model_range, &key, &mut p)
            {
                drive.units = units;
                drive.lerobot = calibration
                    .motors
                    .get(motor_name(drive))
                    .map(|m| ServoRegisters {
                        homing_offset: m.homing_offset,
                        range_min: m.range_min,
                        range_max: m.range_max,
                        drive_mode: m.drive_mode,
                    });
            }
        }
    }
    p.0
}

/// The units of `drive` from its motor in `calibration`, or the problems found (added to `p`).
fn drive_units(
    drive: &DriveSettings,
    calibration: &Calibration,
    joints: &JointSet,
    model_range: &dyn Fn(&str) -> Option<(f64, f64)>,
    key: &str,
    p: &mut Problems,
) -> Option<Units> {
    let before = p.len();
    let file = calibration.path.display();
    let family = drive.family;
    let Some(counts) = family.lerobot_counts() else {
        p.add(
            key,
            format!("{} drives take no LeRobot calibration", family.name()),
        );
        return None;
    };
    let name = motor_name(drive);
    let Some(motor) = calibration.motors.get(name) else {
        let names: Vec<&str> = calibration.motors.keys().map(String::as_str).collect();
        p.add(
            key,
            format!(
                "{file} has no motor `{name}` (it has {}); name this joint's motor with \
                 `{MOTOR_KEY}`",
                names.join(", ")
            ),
        );
        return None;
    };
    if motor.id != i64::from(drive.id) {
        p.add(
            format!("{key}.id"),
            format!(
                "{file}: motor `{name}` has id {}, but this drive's id is {}; the ids must \
                 agree (set the servo's id with `lerobot-setup-motors`, or calibrate again)",
                motor.id, drive.id
            ),
        );
    }
    check_registers(motor, counts, &format!("{file}: motor `{name}`"), key, p);
    let defaults = family.units();
    let by_hand = drive.gear_ratio != 1.0
        || drive.direction != 1.0
        || Some(drive.units.scale) != defaults.default_per_unit
        || drive.units.offset != defaults.default_zero_offset;
    if by_hand {
        p.add(
            key,
            format!(
                "the calibration file gives this drive's units: remove {}, zero_offset, \
                 gear_ratio and direction",
                defaults.per_unit.unwrap_or("counts_per_unit")
            ),
        );
    }
    let mode = norm_mode(drive)?;
    let range = model_range(&drive.dof).unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
    let units = match motor.units(mode, counts.resolution, counts.applies_drive_mode, range) {
        Ok(u) => u,
        Err(e) => {
            p.add(key, format!("{file}: motor `{name}`: {e}"));
            return None;
        }
    };
    if let Some(dof) = joints.index_of(&drive.dof).and_then(|i| joints.dofs.get(i)) {
        let pos = dof.limits.position;
        let (a, b) = (units.to_drive(pos.lower), units.to_drive(pos.upper));
        let (lo, hi) = (a.min(b), a.max(b));
        let (min, max) = (motor.range_min as f64, motor.range_max as f64);
        // Half a count of slack: LeRobot's ranges are whole counts.
        if !(lo >= min - 0.5 && hi <= max + 0.5) {
            // Rounded inwards, so that the advice is inside the range.
            let (jl, ju) = (units.to_joint(min), units.to_joint(max));
            let (jl, ju) = (jl.min(ju), jl.max(ju));
            let (jl, ju) = ((jl * 1e4).ceil() / 1e4, (ju * 1e4).floor() / 1e4);
            p.add(
                key,
                format!(
                    "the position limits [{}, {}] of `{}` map to counts [{lo:.1}, {hi:.1}], \
                     outside motor `{name}`'s calibrated range [{min}, {max}] in {file} (the \
                     servo's own position limits); tighten robot.limits.{}.position to \
                     [{jl}, {ju}] or calibrate the arm again",
                    pos.lower, pos.upper, drive.dof, drive.dof,
                ),
            );
        }
    }
    (p.len() == before).then_some(units)
}

/// A motor's values against what its servo's registers hold (`counts`): a value beyond would
/// never read back the same (the enable would refuse it), so the file is refused now, at the
/// motor's drive (`key`; `motor_words` names the file and the motor).
fn check_registers(
    motor: &Motor,
    counts: ServoCounts,
    motor_words: &str,
    key: &str,
    p: &mut Problems,
) {
    let registers = [
        ("drive_mode", motor.drive_mode, 0, 1),
        (
            "homing_offset",
            motor.homing_offset,
            -counts.homing_offset_max,
            counts.homing_offset_max,
        ),
        (
            "range_min",
            motor.range_min,
            0,
            i64::from(counts.resolution) - 1,
        ),
        (
            "range_max",
            motor.range_max,
            0,
            i64::from(counts.resolution) - 1,
        ),
    ];
    for (field, value, lo, hi) in registers {
        if !(lo..=hi).contains(&value) {
            p.add(
                key,
                format!(
                    "{motor_words}: {field} {value} is outside what the servo holds \
                     ({lo}..={hi}); calibrate the arm again with `lerobot-calibrate`"
                ),
            );
        }
    }
}

impl Motor {
    fn drive_mode_flips(&self, bus_applies_drive_mode: bool) -> bool {
        bus_applies_drive_mode && self.drive_mode != 0
    }

    /// Counts ↔ joint position for this motor: a `DEGREES` motor's joint in radians, a range
    /// motor's calibrated range over the joint's `[lower, upper]`. `resolution` is the servo's
    /// counts a turn (STS 4096, SCS 1024, DYNAMIXEL X 4096); `applies_drive_mode` whether the
    /// bus applies `drive_mode` in software (LeRobot's Feetech bus does, its Dynamixel bus not).
    pub fn units(
        &self,
        mode: NormMode,
        resolution: u32,
        applies_drive_mode: bool,
        joint_range: (f64, f64),
    ) -> Result<Units, Error> {
        let bad = |message: String| Err(Error::Motor { message });
        if self.range_min >= self.range_max {
            return bad(format!(
                "range_min {} is not below range_max {}; calibrate the motor again",
                self.range_min, self.range_max
            ));
        }
        if resolution < 2 {
            return bad(format!("a resolution of {resolution} counts a turn"));
        }
        let (min, max) = (self.range_min as f64, self.range_max as f64);
        match mode {
            NormMode::Degrees => Ok(Units {
                // degrees = (raw − mid)·360/(res − 1); joint = degrees·π/180.
                scale: f64::from(resolution - 1) / (2.0 * std::f64::consts::PI),
                offset: (min + max) / 2.0,
            }),
            NormMode::Range0To100 | NormMode::RangeM100To100 => {
                let (lower, upper) = joint_range;
                if !(lower.is_finite() && upper.is_finite() && lower < upper) {
                    return bad(format!(
                        "a {} motor spans the joint's position range, but the joint's range is \
                         [{lower}, {upper}]; give the joint finite limits in the model",
                        if mode == NormMode::Range0To100 {
                            "range_0_100"
                        } else {
                            "range_m100_100"
                        }
                    ));
                }
                // The fraction f = (raw − min)/(max − min) is the joint's fraction of its range
                // (1 − f under drive_mode): 0..100 and −100..100 are f scaled.
                let per_unit = (max - min) / (upper - lower);
                Ok(if self.drive_mode_flips(applies_drive_mode) {
                    Units {
                        scale: -per_unit,
                        offset: max + lower * per_unit,
                    }
                } else {
                    Units {
                        scale: per_unit,
                        offset: min - lower * per_unit,
                    }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SO101: &str = r#"{
    "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1019, "range_min": 751, "range_max": 3393},
    "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 1106, "range_min": 2031, "range_max": 3514}
}"#;

    fn motor(name: &str) -> Motor {
        Calibration::parse(SO101, Path::new("so101.json"))
            .unwrap()
            .motors[name]
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    /// Hand-computed from LeRobot's DEGREES formula: mid = (751 + 3393)/2 = 2072;
    /// raw 3072 → (3072 − 2072)·360/4095 = 87.912087912…°.
    #[test]
    fn degrees_match_lerobots_formula() {
        let m = motor("shoulder_pan");
        let u = m.units(NormMode::Degrees, 4096, true, (-1.9, 1.9)).unwrap();
        close(u.to_joint(2072.0), 0.0);
        close(u.to_joint(3072.0), 87.912_087_912_087_91_f64.to_radians());
        close(u.to_drive(87.912_087_912_087_91_f64.to_radians()), 3072.0);
        // SCS: 1024 counts a turn → 360/1023 degrees a count.
        let scs = m.units(NormMode::Degrees, 1024, true, (-1.9, 1.9)).unwrap();
        close(scs.to_joint(2073.0), (360.0_f64 / 1023.0).to_radians());
        // drive_mode has no say in degrees.
        let flipped = Motor { drive_mode: 1, ..m };
        assert_eq!(
            flipped
                .units(NormMode::Degrees, 4096, true, (-1.9, 1.9))
                .unwrap(),
            u
        );
    }

    /// RANGE_0_100: (raw − 2031)/(3514 − 2031)·100 over [−0.174533, 1.74533] rad; raw 2772.5 is
    /// 50 % → 0.7853985 rad.
    #[test]
    fn a_range_motor_spans_the_joints_range() {
        let m = motor("gripper");
        let range = (-0.174533, 1.74533);
        let u = m.units(NormMode::Range0To100, 4096, true, range).unwrap();
        close(u.to_joint(2031.0), range.0);
        close(u.to_joint(3514.0), range.1);
        close(u.to_joint(2772.5), 0.7853985);
        // drive_mode 1 on a bus that applies it: 100 at range_min.
        let f = Motor { drive_mode: 1, ..m };
        let uf = f.units(NormMode::Range0To100, 4096, true, range).unwrap();
        close(uf.to_joint(2031.0), range.1);
        close(uf.to_joint(3514.0), range.0);
        // ... and on one that does not (DYNAMIXEL: the servo reverses itself).
        assert_eq!(
            f.units(NormMode::Range0To100, 4096, false, range).unwrap(),
            u
        );
        // −100..100 spans the same range.
        assert_eq!(
            m.units(NormMode::RangeM100To100, 4096, true, range)
                .unwrap(),
            u
        );
    }

    #[test]
    fn bad_files_and_motors_are_refused() {
        let err = Calibration::parse(r#"{"a": {"id": 1, "drive_mode": 0}}"#, Path::new("c.json"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.json:1:"), "{err}");
        assert!(err.contains("missing field `homing_offset`"), "{err}");
        let extra = r#"{"a": {"id": 1, "drive_mode": 0, "homing_offset": 0, "range_min": 0,
                              "range_max": 9, "extra": 1}}"#;
        let err = Calibration::parse(extra, Path::new("c.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `extra`"), "{err}");
        let m = Motor {
            range_min: 100,
            range_max: 100,
            ..motor("gripper")
        };
        let err = m
            .units(NormMode::Degrees, 4096, true, (0.0, 1.0))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("range_min 100 is not below range_max 100")
        );
        let err = motor("gripper")
            .units(NormMode::Range0To100, 4096, true, (0.0, f64::INFINITY))
            .unwrap_err();
        assert!(err.to_string().contains("finite limits"), "{err}");
    }
}
