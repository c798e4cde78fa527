//! `meta/info.json` in: the format version, the frame rate, where the data files are and what the
//! vector columns' elements are called.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::Error;
use crate::diag::Num;

/// The most frames a second a dataset may claim: the fastest control loop (`rt.rate_hz`) plays no
/// more, and beyond it the frame grid's arithmetic (time × fps) leaves what an f64 counts exactly.
const MAX_FPS: f64 = 100_000.0;

/// The dataset layouts read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// v3.0: many episodes a data file; `meta/episodes/` says where each one is.
    V3,
    /// v2.0 and v2.1: one data file an episode; `meta/episodes.jsonl` lists them.
    V2,
}

#[derive(Debug, Deserialize)]
struct Raw {
    codebase_version: String,
    fps: f64,
    #[serde(default)]
    chunks_size: Option<u64>,
    data_path: String,
    features: serde_json::Map<String, Value>,
}

/// What an import needs from `meta/info.json`.
#[derive(Debug, Clone)]
pub struct Info {
    pub path: PathBuf,
    pub version: String,
    pub layout: Layout,
    pub fps: f64,
    pub chunks_size: u64,
    pub data_path: String,
    features: serde_json::Map<String, Value>,
}

impl Info {
    pub fn load(path: &Path) -> Result<Info, Error> {
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let raw: Raw = serde_json::from_str(&text).map_err(|e| Error::Info {
            path: path.to_path_buf(),
            line: e.line(),
            col: e.column(),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or("")
                .to_string(),
        })?;
        let invalid = |message: String| Error::Info {
            path: path.to_path_buf(),
            line: 1,
            col: 1,
            message,
        };
        let layout = match raw.codebase_version.as_str() {
            "v3.0" => Layout::V3,
            "v2.0" | "v2.1" => Layout::V2,
            v => {
                return Err(invalid(format!(
                    "codebase_version {v:?} is not a LeRobot dataset format motiond reads \
                     (v3.0, v2.1, v2.0); convert it with LeRobot's \
                     lerobot.scripts.convert_dataset_v21_to_v30"
                )));
            }
        };
        if !(raw.fps.is_finite() && raw.fps > 0.0 && raw.fps <= MAX_FPS) {
            return Err(invalid(format!(
                "fps is {}; expected a positive number of frames per second, at most {MAX_FPS} \
                 (the fastest control loop)",
                Num(raw.fps)
            )));
        }
        let chunks_size = raw.chunks_size.unwrap_or(1000);
        if chunks_size == 0 {
            return Err(invalid(
                "chunks_size is 0; expected a positive count".into(),
            ));
        }
        Ok(Info {
            path: path.to_path_buf(),
            version: raw.codebase_version,
            layout,
            fps: raw.fps,
            chunks_size,
            data_path: raw.data_path,
            features: raw.features,
        })
    }

    /// The element names of vector feature `column` (`names` is a list, or LeRobot v2.0's
    /// mapping holding one list such as `{"motors": [...]}`), checked against its `shape`.
    pub fn names(&self, column: &str) -> Result<Vec<String>, Error> {
        let feature = self.features.get(column).ok_or_else(|| Error::NoFeature {
            path: self.path.clone(),
            column: column.to_string(),
            features: self.features.keys().cloned().collect(),
        })?;
        let bad = |message: String| Error::Feature {
            path: self.path.clone(),
            column: column.to_string(),
            message,
        };
        let list = match feature.get("names") {
            Some(Value::Array(list)) => list,
            Some(Value::Object(map)) if map.len() == 1 => match map.values().next() {
                Some(Value::Array(list)) => list,
                _ => return Err(bad("`names` holds no list of names".into())),
            },
            _ => {
                return Err(bad(
                    "has no `names` list; motiond maps a column's elements to joints by name"
                        .into(),
                ));
            }
        };
        let names: Vec<String> = list
            .iter()
            .map(|n| n.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("`names` holds something other than strings".into()))?;
        let shape: Option<Vec<u64>> = feature
            .get("shape")
            .and_then(Value::as_array)
            .and_then(|s| s.iter().map(Value::as_u64).collect());
        match shape.as_deref() {
            Some([n]) if *n as usize == names.len() => Ok(names),
            Some(shape) => Err(bad(format!(
                "shape {shape:?} does not hold its {} names; expected [{}]",
                names.len(),
                names.len()
            ))),
            None => Err(bad("has no `shape` of whole numbers".into())),
        }
    }

    /// The data file path of `template` (`data_path`) filled in with `values`, as Python's
    /// `str.format` would: `{name}` and `{name:03d}`.
    pub fn data_file(&self, values: &[(&str, u64)]) -> Result<String, Error> {
        let bad = |message: String| Error::Info {
            path: self.path.clone(),
            line: 1,
            col: 1,
            message: format!("data_path {:?}: {message}", self.data_path),
        };
        let mut out = String::new();
        let mut rest = self.data_path.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .ok_or_else(|| bad("a `{` without its `}`".into()))?;
            let field = &rest[open + 1..close];
            let (name, spec) = field.split_once(':').unwrap_or((field, ""));
            let value = values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| bad(format!("unknown field {{{name}}}")))?;
            let width = match spec {
                "" | "d" => 0,
                s => s
                    .strip_suffix('d')
                    .and_then(|w| w.strip_prefix('0'))
                    .and_then(|w| w.parse::<usize>().ok())
                    // A u64 has at most 20 digits; a wider field (`{chunk_index:0999999999d}`)
                    // is no dataset's and overflowed the formatter (a panic).
                    .filter(|&w| w <= 20)
                    .ok_or_else(|| {
                        bad(format!(
                            "format {{{field}}} is not {{name:0Nd}} with N at most 20"
                        ))
                    })?,
            };
            out.push_str(&format!("{value:0width$}"));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}
