//! Parquet columns in: the scalar and fixed-length vector columns LeRobot writes (pyarrow,
//! snappy, one row group per episode), read column by column with the `parquet` crate's column
//! reader — no Arrow, nothing but the columns an import asks for.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::basic::Type as Physical;
use parquet::column::reader::ColumnReader;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;

use super::Error;
use crate::diag::Num;

/// One parquet file.
pub(super) struct Table {
    path: PathBuf,
    reader: SerializedFileReader<File>,
    /// The first row of each row group, counted from the file's first row.
    starts: Vec<usize>,
}

/// A column's place in the file: its leaf and the top-level field it belongs to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Leaf {
    index: usize,
    repeated: bool,
}

/// A column's values in one row group, one entry per row (`None`: null).
pub(super) type Scalars<T> = Vec<Option<T>>;

impl Table {
    pub fn open(path: &Path) -> Result<Table, Error> {
        let io = |error| Error::Io {
            path: path.to_path_buf(),
            error,
        };
        // Opening a FIFO blocks until a writer comes (the import hung); a device is no dataset.
        if !std::fs::metadata(path).map_err(io)?.is_file() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file (a folder, FIFO or device); expected a parquet file",
            )));
        }
        let file = File::open(path).map_err(io)?;
        let reader = SerializedFileReader::new(file).map_err(|e| parquet_error(path, e))?;
        let mut starts = Vec::with_capacity(reader.num_row_groups());
        let mut row = 0usize;
        for g in reader.metadata().row_groups() {
            starts.push(row);
            row += usize::try_from(g.num_rows()).unwrap_or(0);
        }
        Ok(Table {
            path: path.to_path_buf(),
            reader,
            starts,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The top-level fields, in file order (for messages).
    pub fn fields(&self) -> Vec<String> {
        self.reader
            .metadata()
            .file_metadata()
            .schema()
            .get_fields()
            .iter()
            .map(|f| f.name().to_string())
            .collect()
    }

    /// The leaf of top-level field `name`: a scalar column or a list of scalars. A field that is
    /// missing, or a struct of several leaves, is an error naming the file and the column.
    pub fn leaf(&self, name: &str) -> Result<Leaf, Error> {
        let schema = self.reader.metadata().file_metadata().schema_descr();
        let leaves: Vec<usize> = (0..schema.num_columns())
            .filter(|&i| schema.column(i).path().parts().first().map(String::as_str) == Some(name))
            .collect();
        match leaves[..] {
            [index] => Ok(Leaf {
                index,
                repeated: schema.column(index).max_rep_level() > 0,
            }),
            [] => Err(Error::MissingColumn {
                path: self.path.clone(),
                column: name.to_string(),
                present: self.fields(),
            }),
            _ => Err(self.column_error(name, "is a struct; expected numbers or a list of numbers")),
        }
    }

    pub fn row_groups(&self) -> usize {
        self.starts.len()
    }

    /// The file row of the first row of group `g`.
    pub fn start(&self, g: usize) -> usize {
        self.starts[g]
    }

    /// The smallest and largest value of an integer column in group `g`, when the file says.
    pub fn int_bounds(&self, g: usize, leaf: Leaf) -> Option<(i64, i64)> {
        match self
            .reader
            .metadata()
            .row_group(g)
            .column(leaf.index)
            .statistics()?
        {
            Statistics::Int64(s) => Some((*s.min_opt()?, *s.max_opt()?)),
            Statistics::Int32(s) => Some((i64::from(*s.min_opt()?), i64::from(*s.max_opt()?))),
            _ => None,
        }
    }

    /// An integer column of group `g`.
    pub fn ints(&self, g: usize, leaf: Leaf, name: &str) -> Result<Scalars<i64>, Error> {
        self.scalar_leaf(leaf, name)?;
        let reader = self.column_reader(g, leaf)?;
        let rows = self.group_rows(g);
        let values = match reader {
            ColumnReader::Int64ColumnReader(mut r) => {
                let (levels, values) = read_all(&mut |d, v| r.read_records(rows, d, None, v))
                    .map_err(|e| self.column_error(name, &e.to_string()))?;
                spread(&levels, values, self.max_def(leaf))
            }
            ColumnReader::Int32ColumnReader(mut r) => {
                let (levels, values) = read_all(&mut |d, v| r.read_records(rows, d, None, v))
                    .map_err(|e| self.column_error(name, &e.to_string()))?;
                let values = values.into_iter().map(i64::from).collect();
                spread(&levels, values, self.max_def(leaf))
            }
            _ => return Err(self.column_error(name, &self.type_problem(leaf, "integers"))),
        };
        if let Some((lo, hi)) = self.int_bounds(g, leaf) {
            let outside = |v: &Option<i64>| v.is_some_and(|v| v < lo || v > hi);
            if let Some(r) = values.iter().position(outside) {
                let v = values[r].unwrap_or_default();
                // i64 → f64 for the message only: exact up to 2^53, the exponent form beyond.
                let bounds = (lo as f64, hi as f64);
                return Err(self.damaged(g, r, name, &v.to_string(), bounds));
            }
        }
        Ok(values)
    }

    /// A floating-point column (float32 or float64) of group `g`.
    pub fn floats(&self, g: usize, leaf: Leaf, name: &str) -> Result<Scalars<f64>, Error> {
        self.scalar_leaf(leaf, name)?;
        let reader = self.column_reader(g, leaf)?;
        let rows = self.group_rows(g);
        let (levels, values) = match reader {
            ColumnReader::FloatColumnReader(mut r) => {
                let (levels, values) = read_all(&mut |d, v| r.read_records(rows, d, None, v))
                    .map_err(|e| self.column_error(name, &e.to_string()))?;
                (levels, values.into_iter().map(f64::from).collect())
            }
            ColumnReader::DoubleColumnReader(mut r) => {
                read_all(&mut |d, v| r.read_records(rows, d, None, v))
                    .map_err(|e| self.column_error(name, &e.to_string()))?
            }
            _ => return Err(self.column_error(name, &self.type_problem(leaf, "numbers"))),
        };
        let values = spread(&levels, values, self.max_def(leaf));
        if let Some(bounds) = self.float_bounds(g, leaf)
            && let Some(r) = values
                .iter()
                .position(|v| v.is_some_and(|v| outside(v, bounds)))
        {
            let v = Num(values[r].unwrap_or_default()).to_string();
            return Err(self.damaged(g, r, name, &v, bounds));
        }
        Ok(values)
    }

    /// A column of lists of floats in group `g`, one list per row: `Some(values)` or `None`
    /// for a null list. Null elements are NaN (the caller refuses non-finite values).
    pub fn vectors(
        &self,
        g: usize,
        leaf: Leaf,
        name: &str,
    ) -> Result<Vec<Option<Vec<f64>>>, Error> {
        if !leaf.repeated {
            return Err(self.column_error(name, "holds one number a row; expected a list"));
        }
        let reader = self.column_reader(g, leaf)?;
        let rows = self.group_rows(g);
        let mut reps = Vec::new();
        let (defs, values): (Vec<i16>, Vec<f64>) = match reader {
            ColumnReader::FloatColumnReader(mut r) => {
                let (d, v) = read_all(&mut |d, v| r.read_records(rows, d, Some(&mut reps), v))
                    .map_err(|e| self.column_error(name, &e.to_string()))?;
                (d, v.into_iter().map(f64::from).collect())
            }
            ColumnReader::DoubleColumnReader(mut r) => {
                read_all(&mut |d, v| r.read_records(rows, d, Some(&mut reps), v))
                    .map_err(|e| self.column_error(name, &e.to_string()))?
            }
            _ => return Err(self.column_error(name, &self.type_problem(leaf, "lists of numbers"))),
        };
        let max = self.max_def(leaf);
        // The definition level one below the element's marks a null element, two below an empty
        // list, lower still a null list (the 3-level LIST layout pyarrow writes).
        let mut out: Vec<Option<Vec<f64>>> = Vec::with_capacity(rows);
        let mut next = values.into_iter();
        for (i, &def) in defs.iter().enumerate() {
            if reps.get(i).copied().unwrap_or(0) == 0 {
                out.push(if def >= max - 2 {
                    Some(Vec::new())
                } else {
                    None
                });
            }
            let Some(Some(list)) = out.last_mut() else {
                continue;
            };
            if def == max {
                list.push(next.next().unwrap_or(f64::NAN));
            } else if def == max - 1 {
                list.push(f64::NAN);
            }
        }
        if let Some(bounds) = self.float_bounds(g, leaf) {
            let damaged = out.iter().enumerate().find_map(|(r, list)| {
                let list = list.as_ref()?;
                let i = list.iter().position(|&v| outside(v, bounds))?;
                Some((r, i, list[i]))
            });
            if let Some((r, i, v)) = damaged {
                let what = format!("element {i}, {}", Num(v));
                return Err(self.damaged(g, r, name, &what, bounds));
            }
        }
        Ok(out)
    }

    /// The smallest and largest value of a float column in group `g`, as its writer recorded
    /// them in the column chunk's statistics (pyarrow does by default), when it did in the typed
    /// fields (the deprecated ones had no defined order).
    fn float_bounds(&self, g: usize, leaf: Leaf) -> Option<(f64, f64)> {
        let stats = self
            .reader
            .metadata()
            .row_group(g)
            .column(leaf.index)
            .statistics()?;
        if stats.is_min_max_deprecated() {
            return None;
        }
        match stats {
            Statistics::Float(s) => Some((f64::from(*s.min_opt()?), f64::from(*s.max_opt()?))),
            Statistics::Double(s) => Some((*s.min_opt()?, *s.max_opt()?)),
            _ => None,
        }
    }

    /// A decoded value outside the range the writer recorded for its column chunk: the page it
    /// came from changed after it was written. LeRobot's files carry no page checksums (pyarrow
    /// writes none by default), so this is how a damaged page shows.
    fn damaged(
        &self,
        g: usize,
        r: usize,
        column: &str,
        value: &str,
        (lo, hi): (f64, f64),
    ) -> Error {
        Error::Value {
            path: self.path.clone(),
            column: column.to_string(),
            row: self.start(g) + r,
            frame: None,
            message: format!(
                "{value} is outside [{}, {}], the range the file's writer recorded for this \
                 column in row group {g}: the file is damaged (changed after it was written); \
                 download the dataset again or restore it from a copy",
                Num(lo),
                Num(hi)
            ),
        }
    }

    fn group_rows(&self, g: usize) -> usize {
        usize::try_from(self.reader.metadata().row_group(g).num_rows()).unwrap_or(0)
    }

    fn max_def(&self, leaf: Leaf) -> i16 {
        self.reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .column(leaf.index)
            .max_def_level()
    }

    fn scalar_leaf(&self, leaf: Leaf, name: &str) -> Result<(), Error> {
        if leaf.repeated {
            return Err(self.column_error(name, "holds lists; expected one number a row"));
        }
        Ok(())
    }

    fn type_problem(&self, leaf: Leaf, expected: &str) -> String {
        let ty: Physical = self
            .reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .column(leaf.index)
            .physical_type();
        format!("holds {ty} values; expected {expected}")
    }

    fn column_reader(&self, g: usize, leaf: Leaf) -> Result<ColumnReader, Error> {
        self.reader
            .get_row_group(g)
            .and_then(|group| group.get_column_reader(leaf.index))
            .map_err(|e| parquet_error(&self.path, e))
    }

    fn column_error(&self, column: &str, message: &str) -> Error {
        Error::Column {
            path: self.path.clone(),
            column: column.to_string(),
            message: message.to_string(),
        }
    }
}

/// Whether `v` lies outside the writer's `[min, max]`: NaN is left to the caller, which refuses
/// every non-finite value by its row.
fn outside(v: f64, (lo, hi): (f64, f64)) -> bool {
    v < lo || v > hi
}

/// One `read_records` call: definition levels and values in, (records, values, levels) out.
type ReadRecords<'a, T> = dyn FnMut(Option<&mut Vec<i16>>, &mut Vec<T>) -> parquet::errors::Result<(usize, usize, usize)>
    + 'a;

/// Reads a whole column chunk: its definition levels and non-null values.
fn read_all<T>(read: &mut ReadRecords<'_, T>) -> parquet::errors::Result<(Vec<i16>, Vec<T>)> {
    let mut defs = Vec::new();
    let mut values = Vec::new();
    read(Some(&mut defs), &mut values)?;
    Ok((defs, values))
}

/// One entry per row from definition levels and the non-null values (a required column has no
/// levels: every row has a value).
fn spread<T>(defs: &[i16], values: Vec<T>, max_def: i16) -> Vec<Option<T>> {
    if max_def == 0 {
        return values.into_iter().map(Some).collect();
    }
    let mut next = values.into_iter();
    defs.iter()
        .map(|&d| if d == max_def { next.next() } else { None })
        .collect()
}

fn parquet_error(path: &Path, e: parquet::errors::ParquetError) -> Error {
    let message = match &e {
        parquet::errors::ParquetError::General(m) if m.contains("Disabled feature") => format!(
            "{m}: LeRobot writes snappy-compressed parquet; rewrite the file with \
             compression=\"snappy\" (pyarrow.parquet.write_table(..., compression=\"snappy\"))"
        ),
        _ => e.to_string(),
    };
    Error::Parquet {
        path: path.to_path_buf(),
        message,
    }
}
