//! Which robot a command works on, from `--config` or `--skel [--joint-map]`: the model, the DOFs
//! it commands, how motion columns map onto them, and the trajectory settings. Shared by
//! `resample`, `check`, `play` and `serve`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use motiond::config::Config;
use motiond::config::joint_map::JointMap;
use motiond::diag::{Diagnostic, FileError};
use motiond::model;
use motiond::seq::{self, Motion};
use motiond::skel::World;
use motiond::trajectory::{
    ColumnMap, Interpolation, JointSet, JointSetError, LimitPolicy, MappingError, Options,
};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct RobotArgs {
    /// Configuration file: robot.model, robot.joints, robot.limits, motion.interpolation,
    /// motion.limit_policy and control.rate_hz.
    #[arg(long, value_name = "FILE", conflicts_with = "joint_map")]
    pub config: Option<PathBuf>,
    /// Robot model: .skel, .urdf, .sdf or .xode (replaces the configuration's robot.model).
    #[arg(long, visible_alias = "skel", value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// YAML file with a `joints:` list naming the DOF of each .seq column.
    #[arg(long, value_name = "FILE", requires = "model")]
    pub joint_map: Option<PathBuf>,
}

/// Trajectory settings given on the command line; unset ones come from the configuration.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TrajectoryArgs {
    /// Interpolation: hold, linear, pchip (default) or cubic.
    #[arg(long = "interp", value_name = "MODE", value_parser = parse_interpolation)]
    pub interpolation: Option<Interpolation>,
    /// What to do with a motion that crosses a limit: reject (default), clamp or retime.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub policy: Option<LimitPolicy>,
    /// Playback speed: 0.5 plays at half speed, 2 at double speed (the proof covers the result).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub speed: f64,
}

/// How a command fails: a bad input file or argument (exit 2, one `FILE:LINE:COL: message` per
/// line), or anything else (exit 1).
pub enum Failure {
    Invalid(Vec<String>),
    Runtime(anyhow::Error),
}

impl Failure {
    pub fn diagnostics(d: impl IntoIterator<Item = Diagnostic>) -> Failure {
        Failure::Invalid(d.into_iter().map(|d| d.to_string()).collect())
    }

    /// Reports the failure the way `motiond` exits with it.
    pub fn exit(self) -> anyhow::Result<ExitCode> {
        match self {
            Failure::Invalid(lines) => {
                for l in lines {
                    eprintln!("{l}");
                }
                Ok(ExitCode::from(2))
            }
            Failure::Runtime(err) => Err(err),
        }
    }
}

/// Every input file (SKEL, .seq, configuration, joint map) fails the same way.
impl From<FileError> for Failure {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Invalid(d) => Failure::diagnostics(d.0),
            io => Failure::Invalid(vec![io.to_string()]),
        }
    }
}

/// Places a mapping problem in the file that listed the names.
type Place<'a> = Box<dyn Fn(&MappingError) -> Diagnostic + 'a>;

/// Where the column names come from.
enum Columns {
    Config(Vec<String>),
    Map(JointMap),
    DofOrder,
}

/// A robot ready to take motions.
pub struct Robot {
    pub world: World,
    pub joints: JointSet,
    pub config: Option<Config>,
    columns: Columns,
}

/// The robot named by `args`, or `None` when neither `--config` nor `--skel` is given.
pub fn load(args: &RobotArgs) -> Result<Option<Robot>, Failure> {
    let config = args.config.as_deref().map(Config::load).transpose()?;
    let (skel_path, options) = match (&args.model, &config) {
        (Some(p), c) => (p.clone(), model_options(c.as_ref())),
        (None, Some(c)) => (c.robot.model.clone(), model_options(Some(c))),
        (None, None) => return Ok(None),
    };
    let world = model::load(&skel_path, &options)?;
    let overrides = config.as_ref().map_or(&[][..], |c| &c.robot.limits[..]);
    let joints = JointSet::from_world(&world, overrides)
        .map_err(|e| joint_set_failure(e, &world, &skel_path, config.as_ref()))?;
    let columns = match (&args.joint_map, &config) {
        (Some(path), _) => Columns::Map(JointMap::load(path)?),
        (None, Some(c)) => match &c.robot.joints {
            Some(names) => Columns::Config(names.clone()),
            None => Columns::DofOrder,
        },
        (None, None) => Columns::DofOrder,
    };
    Ok(Some(Robot {
        world,
        joints,
        config,
        columns,
    }))
}

fn model_options(config: Option<&Config>) -> model::Options {
    model::Options {
        fixed_base: config.is_some_and(|c| c.robot.fixed_base),
    }
}

fn joint_set_failure(
    e: JointSetError,
    world: &World,
    skel_path: &Path,
    config: Option<&Config>,
) -> Failure {
    if let Some(config) = config
        && !matches!(e, JointSetError::AmbiguousName { .. })
    {
        return Failure::diagnostics([config.joint_set_diagnostic(&e)]);
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
    Failure::diagnostics([Diagnostic::new(skel_path, line, col, e.to_string())])
}

impl Robot {
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

    /// Trajectory options: the command line's, else the configuration's, else the defaults.
    pub fn options(&self, rate_hz: Option<f64>, t: &TrajectoryArgs) -> Options {
        options(self.config.as_ref(), rate_hz, t)
    }

    /// How the columns of `motion` (read from `motion_path`) map onto the commanded DOFs.
    /// Without a joint list, the driven DOFs in DOF order, with a warning on stderr.
    pub fn map(&self, motion: &Motion, motion_path: &Path) -> Result<ColumnMap, Failure> {
        let Some(jd) = motion.joint_displacement() else {
            return Err(Failure::Invalid(vec![format!(
                "{}:1:1: the motion has no JointDisplacement component to play",
                motion_path.display()
            )]));
        };
        let (line, col) = motion
            .components
            .iter()
            .find(|c| c.content == seq::JOINT_DISPLACEMENT)
            .map_or((1, 1), |c| (c.line, c.col));
        let at_motion = |message: String| Diagnostic::new(motion_path, line, col, message);
        let num_parts = jd.num_parts;
        let (names, place): (&[String], Place<'_>) = match &self.columns {
            Columns::DofOrder => {
                let map = ColumnMap::in_dof_order(&self.joints, num_parts).map_err(|_| {
                        Failure::diagnostics([at_motion(format!(
                            "the motion has {num_parts} columns but the robot drives {} DOFs; name the column of each with robot.joints or --joint-map",
                            self.joints.driven().count()
                        ))])
                    })?;
                tracing::warn!(
                    "no joint list given: {}'s columns are taken as the robot's driven DOFs in DOF order ({})",
                    motion_path.display(),
                    map.names(&self.joints).collect::<Vec<_>>().join(", ")
                );
                return Ok(map);
            }
            Columns::Config(names) => {
                let Some(config) = &self.config else {
                    return Err(Failure::Runtime(anyhow::anyhow!(
                        "joint list without a configuration"
                    )));
                };
                (
                    names,
                    Box::new(move |e: &MappingError| match e.column() {
                        Some(c) => config.diagnostic(&format!("robot.joints[{c}]"), e),
                        None => config.diagnostic("robot.joints", e),
                    }),
                )
            }
            Columns::Map(map) => (
                &map.joints,
                Box::new(move |e: &MappingError| match e.column() {
                    Some(c) => map.diagnostic(c, e),
                    None => map.diagnostic_at("joints", e),
                }),
            ),
        };
        ColumnMap::by_name(&self.joints, names, num_parts).map_err(|errors| {
            Failure::diagnostics(errors.0.iter().map(|e| match e {
                MappingError::Count { .. } => {
                    let mut d = place(e);
                    d.message = format!("{} in {}", d.message, motion_path.display());
                    d
                }
                _ => place(e),
            }))
        })
    }
}

/// Trajectory options from the command line, the configuration (if any) and the defaults.
pub fn options(config: Option<&Config>, rate_hz: Option<f64>, t: &TrajectoryArgs) -> Options {
    let defaults = Options::default();
    Options {
        rate_hz: rate_hz
            .or(config.map(|c| c.control.rate_hz))
            .unwrap_or(defaults.rate_hz),
        interpolation: t
            .interpolation
            .or(config.map(|c| c.motion.interpolation))
            .unwrap_or(defaults.interpolation),
        policy: t
            .policy
            .or(config.map(|c| c.motion.limit_policy))
            .unwrap_or(defaults.policy),
        speed: t.speed,
    }
}

/// Loads a .seq motion, printing its skipped components as warnings.
pub fn load_motion(path: &Path) -> Result<Motion, Failure> {
    let motion = seq::load(path)?;
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
    Ok(motion)
}

fn parse_interpolation(s: &str) -> Result<Interpolation, String> {
    [
        Interpolation::Hold,
        Interpolation::Linear,
        Interpolation::Pchip,
        Interpolation::Cubic,
    ]
    .into_iter()
    .find(|i| i.as_str() == s)
    .ok_or_else(|| format!("expected hold, linear, pchip or cubic, found `{s}`"))
}

fn parse_policy(s: &str) -> Result<LimitPolicy, String> {
    [LimitPolicy::Reject, LimitPolicy::Clamp, LimitPolicy::Retime]
        .into_iter()
        .find(|p| p.as_str() == s)
        .ok_or_else(|| format!("expected reject, clamp or retime, found `{s}`"))
}
