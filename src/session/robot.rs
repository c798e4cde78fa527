//! The robot a session drives, from a configuration or from a robot model file with an optional
//! joint map: its model, the DOFs it commands, how motion columns map onto them and the
//! trajectory settings — and turning a .seq file into a proved [`Prepared`] motion for it.

use std::path::{Path, PathBuf};

use crate::backend::bus::check;
use crate::backend::lerobot_calibration;
use crate::config::joint_map::JointMap;
use crate::config::{BackendConfig, Config};
use crate::diag::{Diagnostic, Diagnostics, FileError};
use crate::motion::seq::{self, Motion, PartLabels};
use crate::robot;
use crate::robot::World;
use crate::trajectory::{
    self, BuildError, ColumnMap, Interpolation, JointSet, JointSetError, LimitPolicy, MappingError,
    Options, ProofReport, Trajectory,
};

/// The position range of DOF `name` in `world`, before the configuration tightens it.
fn model_range(world: &World, joints: &JointSet, name: &str) -> Option<(f64, f64)> {
    let dof = joints.dofs.iter().find(|d| d.name == name)?;
    let limits = world
        .skeletons
        .get(dof.skeleton)?
        .dofs
        .get(dof.dof)?
        .position;
    Some((limits.lower, limits.upper))
}

/// Where the robot comes from: a configuration, a robot model (replacing the configuration's),
/// a joint map (with a model only).
#[derive(Debug, Clone, Default)]
pub struct RobotSpec {
    pub config: Option<PathBuf>,
    pub model: Option<PathBuf>,
    pub joint_map: Option<PathBuf>,
}

/// Where the column names come from.
#[derive(Debug, Clone)]
enum Columns {
    Config(Vec<String>),
    Map(JointMap),
    DofOrder,
}

/// A robot ready to take motions.
#[derive(Debug, Clone)]
pub struct Robot {
    pub world: World,
    pub joints: JointSet,
    pub config: Option<Config>,
    columns: Columns,
}

/// Trajectory settings given by the caller (command line, request); unset ones come from the
/// configuration, else the defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    pub rate_hz: Option<f64>,
    pub interpolation: Option<Interpolation>,
    pub policy: Option<LimitPolicy>,
}

/// Why a motion file could not become a playable motion.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The file, or the mapping of its columns, is invalid (positioned diagnostics).
    #[error(transparent)]
    File(#[from] FileError),
    /// The motion crosses a limit (after clamping or retiming when the policy asked for it).
    #[error("{}: refused: {}", path.display(), report.summary())]
    Refused {
        path: PathBuf,
        report: Box<ProofReport>,
    },
}

/// A motion loaded, mapped onto the robot and proved at speed 1; kept as loaded so that other
/// speeds can be proved again.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub path: PathBuf,
    pub motion: Motion,
    pub map: ColumnMap,
    pub options: Options,
    pub trajectory: Trajectory,
    /// What the proof found and changed (clamped samples, retime factor).
    pub report: ProofReport,
}

impl Robot {
    /// The robot of `spec`, or `None` when it names neither a configuration nor a model.
    pub fn load(spec: &RobotSpec) -> Result<Option<Robot>, FileError> {
        let config = spec.config.as_deref().map(Config::load).transpose()?;
        let model_path = match (&spec.model, &config) {
            (Some(p), _) => p.clone(),
            (None, Some(c)) => c.robot.model.clone(),
            (None, None) => return Ok(None),
        };
        let options = robot::Options {
            fixed_base: config.as_ref().is_some_and(|c| c.robot.fixed_base),
            // Judged below, once the configuration's limits are in.
            limits_judged_by_caller: true,
        };
        let world = robot::load(&model_path, &options).map_err(|e| match (e, &config) {
            // A model file the configuration names but that cannot be read: at its key.
            (FileError::Io { path, source }, Some(c)) if spec.model.is_none() => {
                let todo = match source.kind() {
                    std::io::ErrorKind::NotFound => format!(
                        "correct {}, or put the robot's model file (.skel, .urdf, .sdf or .xode) \
                         there",
                        c.robot.model_key
                    ),
                    std::io::ErrorKind::PermissionDenied => {
                        "let the daemon's user read it (the motiond unit runs as user motiond)"
                            .into()
                    }
                    _ => format!("name the robot's model file with {}", c.robot.model_key),
                };
                FileError::Invalid(Diagnostics(vec![c.path_diagnostic(
                    c.robot.model_key,
                    &path,
                    &source,
                    &todo,
                )]))
            }
            (e, _) => e,
        })?;
        let overrides = config.as_ref().map_or(&[][..], |c| &c.robot.limits[..]);
        let joints = JointSet::from_world(&world, overrides).map_err(|e| {
            FileError::Invalid(joint_set_diagnostics(
                e,
                &world,
                &model_path,
                config.as_ref(),
            ))
        })?;
        let columns = match (&spec.joint_map, &config) {
            (Some(path), _) => Columns::Map(JointMap::load(path)?),
            (None, Some(c)) => match &c.robot.joints {
                Some(names) => Columns::Config(names.clone()),
                None => Columns::DofOrder,
            },
            (None, None) => Columns::DofOrder,
        };
        let mut robot = Robot {
            world,
            joints,
            config,
            columns,
        };
        robot.prepare_buses()?;
        if let Some(text) = robot.unlimited_text() {
            tracing::warn!(
                "{}: {text}; give them with robot.limits.<dof> in the configuration",
                model_path.display()
            );
        }
        Ok(Some(robot))
    }

    /// The configuration's buses against the robot model, before any device is opened (so that
    /// `check` refuses what `play` would): each bus's LeRobot calibration file gives its drives'
    /// units, then every drive is checked against the DOF it drives
    /// ([`check_joints`](crate::backend::bus::check::check_joints), as the backend's open does).
    /// Problems are placed in the configuration file.
    fn prepare_buses(&mut self) -> Result<(), FileError> {
        let Some(config) = self.config.as_mut() else {
            return Ok(());
        };
        let BackendConfig::Buses(buses) = &mut config.backend else {
            return Ok(());
        };
        let (world, joints) = (&self.world, &self.joints);
        let model_range = |name: &str| model_range(world, joints, name);
        let mut problems = lerobot_calibration::apply(buses, &config.path, joints, &model_range);
        if problems.is_empty() {
            problems = check::check_joints(buses, joints);
        }
        if problems.is_empty() {
            return Ok(());
        }
        let found = problems
            .into_iter()
            .map(|p| config.diagnostic(&p.key, p.message))
            .collect();
        Err(FileError::Invalid(Diagnostics(found).sorted()))
    }

    /// The commanded DOFs without a velocity or acceleration limit once the configuration's
    /// `robot.limits` are in (the proof cannot bound how fast they move), each with what it
    /// lacks.
    pub fn unlimited(&self) -> Vec<(String, Vec<&'static str>)> {
        self.joints
            .dofs
            .iter()
            .filter_map(|d| {
                let lacks: Vec<&'static str> = [
                    ("velocity", d.limits.velocity),
                    ("acceleration", d.limits.acceleration),
                ]
                .into_iter()
                .filter(|(_, l)| !(l.lower.is_finite() && l.upper.is_finite()))
                .map(|(what, _)| what)
                .collect();
                (!lacks.is_empty()).then(|| (d.name.clone(), lacks))
            })
            .collect()
    }

    /// [`Robot::unlimited`] in words, `None` when every commanded DOF is limited.
    pub fn unlimited_text(&self) -> Option<String> {
        const SHOWN: usize = 6;
        let unlimited = self.unlimited();
        if unlimited.is_empty() {
            return None;
        }
        let mut named: Vec<String> = unlimited
            .iter()
            .take(SHOWN)
            .map(|(dof, lacks)| format!("{dof}: {}", lacks.join(", ")))
            .collect();
        if unlimited.len() > SHOWN {
            named.push(format!("… {} more", unlimited.len() - SHOWN));
        }
        Some(format!(
            "{} of {} commanded DOFs have no velocity or acceleration limit ({}): the proof \
             cannot bound how fast they move",
            unlimited.len(),
            self.joints.len(),
            named.join("; ")
        ))
    }

    /// Whether real drives may be commanded on this robot: every commanded DOF limited, or the
    /// configuration says `robot.allow_unlimited: true`; else why not, for the operator.
    pub fn drivable(&self) -> Result<(), String> {
        if self
            .config
            .as_ref()
            .is_some_and(|c| c.robot.allow_unlimited)
        {
            return Ok(());
        }
        match self.unlimited_text() {
            None => Ok(()),
            Some(text) => Err(format!(
                "refusing to drive real motors: {text}; give robot.limits.<dof>.velocity and \
                 .acceleration in the configuration (the drives' datasheet), or \
                 `robot.allow_unlimited: true` to drive them anyway; `--dry-run` rehearses \
                 without motors"
            )),
        }
    }

    /// The skeletons' names, for reports.
    pub fn name(&self) -> String {
        let names: Vec<&str> = self
            .world
            .skeletons
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        names.join("+")
    }

    /// Trajectory options: `overrides`, else the configuration's, else the defaults; speed 1.
    pub fn options(&self, overrides: Overrides) -> Options {
        options(self.config.as_ref(), overrides)
    }

    /// The DOF names a motion's columns are read as, in column order: the configuration's
    /// `robot.joints`, the joint map's, else the driven DOFs in DOF order.
    pub fn column_names(&self) -> Vec<String> {
        match &self.columns {
            Columns::Config(names) => names.clone(),
            Columns::Map(map) => map.joints.clone(),
            Columns::DofOrder => self.joints.driven().map(|(_, d)| d.name.clone()).collect(),
        }
    }

    /// The position range of DOF `name` in the robot model, before the configuration tightens
    /// it (what the joint's full travel is).
    pub fn model_range(&self, name: &str) -> Option<(f64, f64)> {
        model_range(&self.world, &self.joints, name)
    }

    /// How the columns of `motion` (read from `motion_path`) map onto the commanded DOFs.
    /// Without a joint list, the driven DOFs in DOF order, with a warning.
    pub fn map(&self, motion: &Motion, motion_path: &Path) -> Result<ColumnMap, FileError> {
        let invalid = |d: Vec<Diagnostic>| FileError::Invalid(Diagnostics(d));
        let Some(jd) = motion.joint_displacement() else {
            return Err(invalid(vec![Diagnostic::new(
                motion_path,
                1,
                1,
                "the motion has no JointDisplacement component to play",
            )]));
        };
        let (line, col) = motion
            .components
            .iter()
            .find(|c| c.content == seq::JOINT_DISPLACEMENT)
            .map_or((1, 1), |c| (c.line, c.col));
        let num_parts = jd.num_parts;
        let labels = motion.joint_labels();
        let names: &[String] = match &self.columns {
            // The file names its columns with this robot's DOFs: those names are the mapping,
            // where the DOF order would only be a guess.
            Columns::DofOrder
                if let Some(labels) = labels
                    && labels
                        .names
                        .iter()
                        .any(|n| self.joints.index_of(n).is_some()) =>
            {
                return ColumnMap::by_name(&self.joints, &labels.names, num_parts).map_err(
                    |errors| {
                        invalid(
                            errors
                                .0
                                .iter()
                                .map(|e| {
                                    let (l, c) = e
                                        .column()
                                        .and_then(|c| labels.at.get(c).copied())
                                        .unwrap_or((line, col));
                                    Diagnostic::new(
                                        motion_path,
                                        l,
                                        c,
                                        format!(
                                            "partLabels: {e}; the file's partLabels name its columns: \
                                             correct them, or name the column of each DOF with \
                                             robot.joints or --joint-map"
                                        ),
                                    )
                                })
                                .collect(),
                        )
                    },
                );
            }
            Columns::DofOrder => {
                let map = ColumnMap::in_dof_order(&self.joints, num_parts).map_err(|_| {
                    invalid(vec![Diagnostic::new(
                        motion_path,
                        line,
                        col,
                        format!(
                            "the motion has {num_parts} columns but the robot drives {} DOFs; name the column of each with robot.joints or --joint-map",
                            self.joints.driven().count()
                        ),
                    )])
                })?;
                tracing::warn!(
                    "no joint list given: {}'s columns are taken as the robot's driven DOFs in DOF order ({})",
                    motion_path.display(),
                    map.names(&self.joints).collect::<Vec<_>>().join(", ")
                );
                return Ok(map);
            }
            Columns::Config(names) => names,
            Columns::Map(map) => &map.joints,
        };
        let map = ColumnMap::by_name(&self.joints, names, num_parts).map_err(|errors| {
            invalid(
                errors
                    .0
                    .iter()
                    .map(|e| {
                        let mut d = self.place_mapping_error(e);
                        if matches!(e, MappingError::Count { .. }) {
                            d.message = format!("{} in {}", d.message, motion_path.display());
                        }
                        d
                    })
                    .collect(),
            )
        })?;
        match labels {
            Some(labels) => self
                .contradicted_labels(names, labels, motion_path)
                .map_or(Ok(map), |d| Err(invalid(d))),
            None => Ok(map),
        }
    }

    /// Columns whose `partLabels` name a DOF of this robot other than the one the joint list
    /// maps them to: a motion written for another joint order (a take recorded under another
    /// configuration) would play its columns on the wrong joints. Labels that name no DOF of
    /// this robot are another tool's names; the joint list translates them.
    fn contradicted_labels(
        &self,
        names: &[String],
        labels: &PartLabels,
        motion_path: &Path,
    ) -> Option<Vec<Diagnostic>> {
        let wrong: Vec<Diagnostic> = names
            .iter()
            .zip(&labels.names)
            .zip(&labels.at)
            .enumerate()
            .filter(|(_, ((name, label), _))| {
                name != label && self.joints.index_of(label).is_some()
            })
            .map(|(column, ((name, label), &(line, col)))| {
                Diagnostic::new(
                    motion_path,
                    line,
                    col,
                    format!(
                        "column {column} is labelled `{label}` here, but {} maps it to `{name}`: \
                         the motion was written for another joint order; list the DOFs in the \
                         file's column order (its partLabels) or correct the labels",
                        self.joint_entry(column)
                    ),
                )
            })
            .collect();
        (!wrong.is_empty()).then_some(wrong)
    }

    /// Where the joint list names column `column`, as `FILE:LINE:COL (key)`.
    fn joint_entry(&self, column: usize) -> String {
        let (d, key) = match (&self.columns, &self.config) {
            (Columns::Map(map), _) => (map.diagnostic(column, ""), "joints"),
            (_, Some(config)) => (
                config.diagnostic(&format!("robot.joints[{column}]"), ""),
                "robot.joints",
            ),
            (_, None) => return "robot.joints".to_owned(),
        };
        format!("{key} at {}:{}:{}", d.path.display(), d.line, d.col)
    }

    /// A mapping problem, placed in the file that listed the names.
    fn place_mapping_error(&self, e: &MappingError) -> Diagnostic {
        match (&self.columns, &self.config) {
            (Columns::Map(map), _) => match e.column() {
                Some(c) => map.diagnostic(c, e),
                None => map.diagnostic_at("joints", e),
            },
            (_, Some(config)) => match e.column() {
                Some(c) => config.diagnostic(&format!("robot.joints[{c}]"), e),
                None => config.diagnostic("robot.joints", e),
            },
            (_, None) => Diagnostic::new("robot.joints", 1, 1, e.to_string()),
        }
    }

    /// Loads, maps, resamples and proves one .seq file at speed 1.
    pub fn prepare(&self, path: &Path, options: &Options) -> Result<Prepared, PrepareError> {
        self.prepare_motion(path, load_motion(path)?, options)
    }

    /// [`Robot::prepare`] for a motion already loaded from `path`.
    pub fn prepare_motion(
        &self,
        path: &Path,
        motion: Motion,
        options: &Options,
    ) -> Result<Prepared, PrepareError> {
        let map = self.map(&motion, path)?;
        let options = Options {
            speed: 1.0,
            ..*options
        };
        let proved = build(&self.joints, &motion, &map, &options, path)?;
        Ok(Prepared {
            path: path.to_path_buf(),
            motion,
            map,
            options,
            trajectory: proved.trajectory,
            report: proved.report,
        })
    }
}

impl Prepared {
    /// The motion at `speed`, proved again (a faster motion may cross a limit the original
    /// respects; under retime the speed actually played may be lower).
    pub fn at_speed(
        &self,
        joints: &JointSet,
        speed: f64,
    ) -> Result<(Trajectory, ProofReport), PrepareError> {
        if speed == 1.0 {
            return Ok((self.trajectory.clone(), self.report.clone()));
        }
        let options = Options {
            speed,
            ..self.options
        };
        let proved = build(joints, &self.motion, &self.map, &options, &self.path)?;
        Ok((proved.trajectory, proved.report))
    }

    /// The motion's columns for a joint group — `group` holds some of the DOFs of `whole`, the
    /// joint set the motion was prepared for — at `speed`, proved for the group's joints alone.
    /// The other columns are left out; every DOF of the group must have a column.
    pub fn for_group(
        &self,
        whole: &JointSet,
        group: &JointSet,
        speed: f64,
    ) -> Result<(Trajectory, ProofReport), PrepareError> {
        let picked: Vec<(usize, &str)> = self
            .map
            .columns()
            .iter()
            .enumerate()
            .filter_map(|(c, &i)| {
                let name = whole.dofs.get(i)?.name.as_str();
                group.index_of(name).map(|_| (c, name))
            })
            .collect();
        // Followers take no column: they are derived from their leader.
        let missing: Vec<&str> = group
            .dofs
            .iter()
            .filter(|d| d.mimic.is_none())
            .map(|d| d.name.as_str())
            .filter(|&n| !picked.iter().any(|&(_, p)| p == n))
            .collect();
        let at = |message: String| -> PrepareError {
            FileError::Invalid(Diagnostics(vec![Diagnostic::new(
                &self.path, 1, 1, message,
            )]))
            .into()
        };
        if !missing.is_empty() {
            return Err(at(format!(
                "the motion has no column for {} of the joint group; a group motion needs a \
                 column for each of the group's DOFs",
                missing.join(", ")
            )));
        }
        let Some(seq) = self.motion.joint_displacement() else {
            return Err(at(BuildError::NoJointData.to_string()));
        };
        let values = (0..seq.rows())
            .flat_map(|r| picked.iter().map(move |&(c, _)| seq.row(r)[c]))
            .collect();
        let columns = seq::MultiValueSeq {
            num_parts: picked.len(),
            timing: seq.timing.clone(),
            values,
        };
        let names: Vec<&str> = picked.iter().map(|&(_, n)| n).collect();
        let map = ColumnMap::by_name(group, &names, names.len())
            .map_err(|errors| at(errors.to_string()))?;
        let options = Options {
            speed,
            ..self.options
        };
        let built = trajectory::build_values(group, &columns, &map, &options);
        let proved = built.map_err(|e| match e {
            BuildError::Refused(report) => PrepareError::Refused {
                path: self.path.clone(),
                report,
            },
            other => at(other.to_string()),
        })?;
        Ok((proved.trajectory, proved.report))
    }

    /// The speed a proof report's motion plays at: the requested speed, slowed by retiming.
    pub fn effective_speed(report: &ProofReport) -> f64 {
        report.speed / report.retimed.unwrap_or(1.0)
    }
}

fn build(
    joints: &JointSet,
    motion: &Motion,
    map: &ColumnMap,
    options: &Options,
    path: &Path,
) -> Result<trajectory::Proved, PrepareError> {
    trajectory::build(joints, motion, map, options).map_err(|e| match e {
        BuildError::Refused(report) => PrepareError::Refused {
            path: path.to_path_buf(),
            report,
        },
        other => {
            let (line, col) = motion
                .components
                .iter()
                .find(|c| c.content == seq::JOINT_DISPLACEMENT)
                .map_or((1, 1), |c| (c.line, c.col));
            FileError::Invalid(Diagnostics(vec![Diagnostic::new(
                path,
                line,
                col,
                other.to_string(),
            )]))
            .into()
        }
    })
}

/// Trajectory options from `overrides`, the configuration (if any) and the defaults; speed 1.
pub fn options(config: Option<&Config>, overrides: Overrides) -> Options {
    let defaults = Options::default();
    Options {
        rate_hz: overrides
            .rate_hz
            .or(config.map(|c| c.control.rate_hz))
            .unwrap_or(defaults.rate_hz),
        interpolation: overrides
            .interpolation
            .or(config.map(|c| c.motion.interpolation))
            .unwrap_or(defaults.interpolation),
        policy: overrides
            .policy
            .or(config.map(|c| c.motion.limit_policy))
            .unwrap_or(defaults.policy),
        speed: 1.0,
    }
}

/// Loads a .seq motion to be played, warning about the components it skipped.
pub fn load_motion(path: &Path) -> Result<Motion, FileError> {
    let text = crate::file::read_to_string(path).map_err(|source| FileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    motion_from_text(text, path)
}

/// [`load_motion`] for a file already read. A motion whose `numFrames` differs from the rows it
/// holds is refused: a file cut short at a line boundary must not play.
pub fn motion_from_text(text: String, path: &Path) -> Result<Motion, FileError> {
    let motion = seq::from_text(text, path)?;
    for s in &motion.skipped {
        tracing::warn!(
            "{}:{}:{}: skipped component of type {}: {}",
            path.display(),
            s.line,
            s.col,
            s.type_name,
            s.reason
        );
    }
    let mismatches = motion.frame_count_mismatches(path);
    if !mismatches.is_empty() {
        return Err(FileError::Invalid(Diagnostics(mismatches)));
    }
    Ok(motion)
}

fn joint_set_diagnostics(
    e: JointSetError,
    world: &World,
    model_path: &Path,
    config: Option<&Config>,
) -> Diagnostics {
    if let Some(config) = config
        && !matches!(e, JointSetError::AmbiguousName { .. })
    {
        return Diagnostics(vec![config.joint_set_diagnostic(&e)]);
    }
    // A DOF name two skeletons share: point at the second joint that carries it.
    let at = if let JointSetError::AmbiguousName { name } = &e {
        world
            .skeletons
            .iter()
            .flat_map(|s| {
                s.dofs
                    .iter()
                    .filter_map(|d| s.joints.get(d.joint).filter(|_| &d.name == name))
            })
            .nth(1)
            .map(|j| (j.line, j.col))
    } else {
        None
    };
    let (line, col) = at.unwrap_or((1, 1));
    Diagnostics(vec![Diagnostic::new(model_path, line, col, e.to_string())])
}
