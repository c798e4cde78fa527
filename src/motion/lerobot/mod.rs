//! LeRobot datasets in: one episode's `action` or `observation.state` column as joint positions
//! for a robot, timed by the dataset's `timestamp` — what `motiond import lerobot` writes as .seq.
//!
//! Format v3.0 (LeRobot 0.4 and later; `lerobot/datasets/utils.py`, `dataset_metadata.py`):
//! `meta/info.json` gives `fps`, the `data_path` template and each feature's element `names`
//! (`shoulder_pan.pos`, …); `meta/episodes/chunk-*/file-*.parquet` gives each episode's data file
//! (`data/chunk_index`, `data/file_index`) and rows (`dataset_from_index`..`dataset_to_index`);
//! the data files hold many episodes, told apart by `episode_index`. Formats v2.0 and v2.1 keep one
//! data file an episode and list the episodes in `meta/episodes.jsonl`.
//!
//! Units are LeRobot's normalised ones: a `NAME.pos` element is in degrees (LeRobot's `DEGREES`
//! mode, the SO arms' default since 0.2), except the joints recorded as `RANGE_0_100` (grippers),
//! 0 to 100 over the joint's position range. Bad input is an [`Error`] naming the file, the column
//! and the row.

mod info;
mod table;
mod units;

use std::io;
use std::path::{Path, PathBuf};

pub use info::Layout;
pub use units::{Frames, Imported, Joint, convert};

use crate::diag::Num;
use info::Info;
use table::Table;

/// Why a dataset, or one of its episodes, cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {error}{}", path.display(), io_hint(error))]
    Io { path: PathBuf, error: io::Error },
    #[error("{}:{line}:{col}: {message}", path.display())]
    Info {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{}: not a parquet file motiond can read: {message}", path.display())]
    Parquet { path: PathBuf, message: String },
    #[error("{}: no feature `{column}`; the dataset has {}", path.display(), list(features))]
    NoFeature {
        path: PathBuf,
        column: String,
        features: Vec<String>,
    },
    #[error("{}: feature `{column}` {message}", path.display())]
    Feature {
        path: PathBuf,
        column: String,
        message: String,
    },
    #[error("{}: no column `{column}`; the file has {}", path.display(), list(present))]
    MissingColumn {
        path: PathBuf,
        column: String,
        present: Vec<String>,
    },
    #[error("{}: column `{column}` {message}", path.display())]
    Column {
        path: PathBuf,
        column: String,
        message: String,
    },
    #[error("{}: column `{column}`, row {row}{}: {message}", path.display(), frame_note(*frame))]
    Value {
        path: PathBuf,
        column: String,
        /// The row in the file, from 0 (as pyarrow and pandas count).
        row: usize,
        /// The row's `frame_index`, when the file has one.
        frame: Option<i64>,
        message: String,
    },
    #[error("{}: episode {episode} is not in the dataset ({}); choose one with --episode", path.display(), describe(*count, *last))]
    NoEpisode {
        path: PathBuf,
        episode: u64,
        count: usize,
        last: Option<i64>,
    },
    #[error("{}: episode {episode}: {message}", path.display())]
    Episode {
        path: PathBuf,
        episode: u64,
        message: String,
    },
    #[error(
        "{}: feature `{column}` element {element} `{name}` is not a joint of the robot; the robot's joints are {}",
        path.display(), list(joints)
    )]
    UnknownJoint {
        path: PathBuf,
        column: String,
        element: usize,
        name: String,
        joints: Vec<String>,
    },
    #[error(
        "{}: feature `{column}` has no element for the robot's joint `{joint}` (its elements are {}); import for a robot whose joints it names",
        path.display(), list(names)
    )]
    MissingJoint {
        path: PathBuf,
        column: String,
        joint: String,
        names: Vec<String>,
    },
    #[error("joint `{joint}`: {message}")]
    Joint { joint: String, message: String },
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        return "none".into();
    }
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn frame_note(frame: Option<i64>) -> String {
    frame.map_or(String::new(), |f| format!(" (frame_index {f})"))
}

fn describe(count: usize, last: Option<i64>) -> String {
    match (count, last) {
        (0, _) => "it lists no episodes".into(),
        (n, Some(last)) => format!("it lists {n} episodes, the last is {last}"),
        (n, None) => format!("it lists {n} episodes"),
    }
}

fn io_hint(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::NotFound => {
            " (is the dataset whole? `huggingface-cli download --repo-type dataset REPO \
             --local-dir DIR` fetches all of it)"
        }
        _ => "",
    }
}

/// A LeRobot dataset on disk.
#[derive(Debug, Clone)]
pub struct Dataset {
    root: PathBuf,
    info: Info,
}

/// One episode's column: `times.len()` frames of `names.len()` values each, in the dataset's
/// units, every one finite; times strictly increasing.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    pub index: u64,
    /// The feature read (`action`, `observation.state`).
    pub column: String,
    pub names: Vec<String>,
    /// Seconds, from the `timestamp` column.
    pub times: Vec<f64>,
    /// `frames × names` values, row-major.
    pub values: Vec<f64>,
    /// The data file the rows came from.
    pub file: PathBuf,
}

impl Dataset {
    /// Opens the dataset at `root` (the folder holding `meta/` and `data/`).
    pub fn open(root: &Path) -> Result<Dataset, Error> {
        let info = Info::load(&root.join("meta").join("info.json"))?;
        Ok(Dataset {
            root: root.to_path_buf(),
            info,
        })
    }

    pub fn fps(&self) -> f64 {
        self.info.fps
    }

    /// `codebase_version` (`v3.0`, `v2.1`).
    pub fn version(&self) -> &str {
        &self.info.version
    }

    /// `meta/info.json`.
    pub fn info_path(&self) -> &Path {
        &self.info.path
    }

    /// The element names of vector feature `column`.
    pub fn names(&self, column: &str) -> Result<Vec<String>, Error> {
        self.info.names(column)
    }

    /// Episode `episode`'s `column`, with its time stamps.
    pub fn read(&self, episode: u64, column: &str) -> Result<Episode, Error> {
        let names = self.info.names(column)?;
        let (file, rows) = match self.info.layout {
            Layout::V3 => self.locate_v3(episode)?,
            Layout::V2 => self.locate_v2(episode)?,
        };
        let path = self.root.join(file);
        let mut out = Episode {
            index: episode,
            column: column.to_string(),
            names,
            times: Vec::new(),
            values: Vec::new(),
            file: path.clone(),
        };
        read_rows(&Table::open(&path)?, &mut out)?;
        let found = out.times.len();
        if found == 0 {
            return Err(Error::Episode {
                path,
                episode,
                message: "the data file holds no row of it".into(),
            });
        }
        if let Some(expected) = rows
            && expected != found as u64
        {
            return Err(Error::Episode {
                path,
                episode,
                message: format!(
                    "the data file holds {found} rows of it; the episode metadata says {expected}"
                ),
            });
        }
        Ok(out)
    }

    /// v3.0: the data file and row count of `episode`, from `meta/episodes/`.
    fn locate_v3(&self, episode: u64) -> Result<(String, Option<u64>), Error> {
        let dir = self.root.join("meta").join("episodes");
        let files = chunk_files(&dir)?;
        let (mut count, mut last) = (0usize, None::<i64>);
        for path in &files {
            let table = Table::open(path)?;
            let leaf = table.leaf("episode_index")?;
            for g in 0..table.row_groups() {
                let episodes = table.ints(g, leaf, "episode_index")?;
                count += episodes.len();
                last = episodes.iter().flatten().copied().max().max(last);
                let Some(r) = episodes.iter().position(|&e| e == Some(episode as i64)) else {
                    continue;
                };
                let get = |name: &str| -> Result<u64, Error> {
                    let leaf = table.leaf(name)?;
                    let value = table.ints(g, leaf, name)?[r];
                    value
                        .and_then(|v| u64::try_from(v).ok())
                        .ok_or_else(|| Error::Value {
                            path: path.clone(),
                            column: name.into(),
                            row: table.start(g) + r,
                            frame: None,
                            message: format!(
                                "{} for episode {episode}; expected a whole number ≥ 0",
                                value.map_or("null".into(), |v| v.to_string())
                            ),
                        })
                };
                let chunk = get("data/chunk_index")?;
                let file = get("data/file_index")?;
                let (from, to) = (get("dataset_from_index")?, get("dataset_to_index")?);
                let rows = to.checked_sub(from).ok_or_else(|| Error::Episode {
                    path: path.clone(),
                    episode,
                    message: format!("dataset_to_index {to} is before dataset_from_index {from}"),
                })?;
                let data = self
                    .info
                    .data_file(&[("chunk_index", chunk), ("file_index", file)])?;
                return Ok((data, Some(rows)));
            }
        }
        Err(Error::NoEpisode {
            path: dir,
            episode,
            count,
            last,
        })
    }

    /// v2.x: the data file of `episode` and its length, from `meta/episodes.jsonl`.
    fn locate_v2(&self, episode: u64) -> Result<(String, Option<u64>), Error> {
        let path = self.root.join("meta").join("episodes.jsonl");
        let text = std::fs::read_to_string(&path).map_err(|error| Error::Io {
            path: path.clone(),
            error,
        })?;
        let (mut count, mut last) = (0usize, None::<i64>);
        // Every line is read, the chosen episode's or not: a broken list is refused whole rather
        // than read as far as the episode happens to be.
        let mut found = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let entry: serde_json::Value = serde_json::from_str(line).map_err(|e| Error::Info {
                path: path.clone(),
                line: i + 1,
                col: e.column(),
                message: e.to_string().split(" at line ").next().unwrap_or("").into(),
            })?;
            let index = entry.get("episode_index").and_then(|v| v.as_i64());
            count += 1;
            last = index.max(last);
            if found.is_none() && index == Some(episode as i64) {
                found = Some(entry.get("length").and_then(|v| v.as_u64()));
            }
        }
        if let Some(length) = found {
            let data = self.info.data_file(&[
                ("episode_chunk", episode / self.info.chunks_size),
                ("episode_index", episode),
            ])?;
            return Ok((data, length));
        }
        Err(Error::NoEpisode {
            path,
            episode,
            count,
            last,
        })
    }
}

/// `DIR/chunk-*/file-*.parquet`, in order.
fn chunk_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let io = |path: &Path, error| Error::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut files = Vec::new();
    for chunk in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let chunk = chunk.map_err(|e| io(dir, e))?.path();
        if !chunk.is_dir() || !file_name(&chunk).starts_with("chunk-") {
            continue;
        }
        for file in std::fs::read_dir(&chunk).map_err(|e| io(&chunk, e))? {
            let file = file.map_err(|e| io(&chunk, e))?.path();
            let name = file_name(&file);
            if name.starts_with("file-") && name.ends_with(".parquet") {
                files.push(file);
            }
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(io(
            &dir.join("chunk-000/file-000.parquet"),
            io::ErrorKind::NotFound.into(),
        ));
    }
    Ok(files)
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// Appends the rows of `out.index` from `table` to `out`, refusing a null, a list of the wrong
/// length, a non-finite value and a time stamp not after the previous one.
fn read_rows(table: &Table, out: &mut Episode) -> Result<(), Error> {
    let episode = table.leaf("episode_index")?;
    let timestamp = table.leaf("timestamp")?;
    let column = table.leaf(&out.column)?;
    let frame_index = table.leaf("frame_index").ok();
    let width = out.names.len();
    let wanted = out.index as i64;
    for g in 0..table.row_groups() {
        if table
            .int_bounds(g, episode)
            .is_some_and(|(lo, hi)| wanted < lo || wanted > hi)
        {
            continue;
        }
        let episodes = table.ints(g, episode, "episode_index")?;
        if !episodes.contains(&Some(wanted)) {
            continue;
        }
        let times = table.floats(g, timestamp, "timestamp")?;
        let vectors = table.vectors(g, column, &out.column)?;
        let frames = match frame_index {
            Some(leaf) => table.ints(g, leaf, "frame_index")?,
            None => vec![None; episodes.len()],
        };
        for (r, e) in episodes.iter().enumerate() {
            if *e != Some(wanted) {
                continue;
            }
            let frame = frames.get(r).copied().flatten();
            let bad = |column: &str, message: String| Error::Value {
                path: table.path().to_path_buf(),
                column: column.to_string(),
                row: table.start(g) + r,
                frame,
                message,
            };
            let t = match times.get(r).copied().flatten() {
                Some(t) if t.is_finite() => t,
                Some(t) => {
                    return Err(bad("timestamp", format!("{} is not a finite time", Num(t))));
                }
                None => return Err(bad("timestamp", "null; every frame needs a time".into())),
            };
            if let Some(&before) = out.times.last()
                && t <= before
            {
                return Err(bad(
                    "timestamp",
                    format!(
                        "{} s is not after the previous frame's {} s; frames must be in \
                         time order",
                        Num(t),
                        Num(before)
                    ),
                ));
            }
            let Some(Some(values)) = vectors.get(r) else {
                return Err(bad(
                    &out.column,
                    "null; every frame needs its values".into(),
                ));
            };
            if values.len() != width {
                return Err(bad(
                    &out.column,
                    format!(
                        "{} values; meta/info.json names {width} ({})",
                        values.len(),
                        out.names.join(", ")
                    ),
                ));
            }
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(bad(
                    &out.column,
                    format!(
                        "element {i} `{}` is {}; every value must be a finite number",
                        out.names[i],
                        if values[i].is_nan() {
                            "NaN or null".to_string()
                        } else {
                            Num(values[i]).to_string()
                        }
                    ),
                ));
            }
            out.times.push(t);
            out.values.extend_from_slice(values);
        }
    }
    Ok(())
}
