//! A motion as operators look at it before running it: per joint, the source samples, the
//! resampled curve and the position limit bands, as an SVG.

use std::path::Path;

use plotters::prelude::*;

use crate::skel::Limits;

/// One joint's panel.
pub struct Series<'a> {
    pub name: &'a str,
    /// Source samples: (time, value).
    pub source: Vec<(f64, f64)>,
    /// The resampled curve: (time, value) per control tick.
    pub curve: Vec<(f64, f64)>,
    pub limits: Limits,
}

#[derive(Debug, thiserror::Error)]
#[error("{}: could not draw the plot: {message}", path.display())]
pub struct PlotError {
    pub path: std::path::PathBuf,
    pub message: String,
}

const PANEL_W: u32 = 460;
const PANEL_H: u32 = 200;
const COLUMNS: usize = 3;
/// Points drawn per series at most: beyond this an SVG gets slow to open and shows nothing more.
const MAX_POINTS: usize = 4000;

/// Draws `series` as a grid of panels into an SVG file at `path`.
pub fn write_svg(path: &Path, title: &str, series: &[Series]) -> Result<(), PlotError> {
    draw(path, title, series).map_err(|e| PlotError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn draw(path: &Path, title: &str, series: &[Series]) -> Result<(), Box<dyn std::error::Error>> {
    let n = series.len().max(1);
    let cols = COLUMNS.min(n);
    let rows = n.div_ceil(cols);
    let size = (PANEL_W * cols as u32, PANEL_H * rows as u32 + 40);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(40);
    head.titled(title, ("sans-serif", 18))?;
    let panels = body.split_evenly((rows, cols));
    for (s, area) in series.iter().zip(panels.iter()) {
        panel(area, s)?;
    }
    root.present()?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    s: &Series,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let points = s.source.iter().chain(&s.curve);
    let (mut t0, mut t1, mut lo, mut hi) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for &(t, v) in points {
        t0 = t0.min(t);
        t1 = t1.max(t);
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !(t0 <= t1 && lo <= hi) {
        (t0, t1, lo, hi) = (0.0, 1.0, -1.0, 1.0);
    }
    if t1 - t0 <= 0.0 {
        t1 = t0 + 1.0;
    }
    // The data's range, padded, and stretched to show a limit when one is close.
    let span = (hi - lo).max(1e-6);
    let (mut y0, mut y1) = (lo - 0.15 * span, hi + 0.15 * span);
    if s.limits.lower.is_finite() && s.limits.lower > lo - 0.5 * span {
        y0 = y0.min(s.limits.lower - 0.05 * span);
    }
    if s.limits.upper.is_finite() && s.limits.upper < hi + 0.5 * span {
        y1 = y1.max(s.limits.upper + 0.05 * span);
    }
    let caption = format!(
        "{}  limits [{}, {}]",
        s.name,
        bound(s.limits.lower),
        bound(s.limits.upper)
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 13))
        .margin(6)
        .x_label_area_size(22)
        .y_label_area_size(48)
        .build_cartesian_2d(t0..t1, y0..y1)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(5)
        .label_style(("sans-serif", 10))
        .draw()?;
    let band = RED.mix(0.15).filled();
    if s.limits.upper < y1 {
        chart.draw_series([Rectangle::new(
            [(t0, s.limits.upper.max(y0)), (t1, y1)],
            band,
        )])?;
    }
    if s.limits.lower > y0 {
        chart.draw_series([Rectangle::new(
            [(t0, y0), (t1, s.limits.lower.min(y1))],
            band,
        )])?;
    }
    chart.draw_series(LineSeries::new(thin(&s.curve), BLUE.stroke_width(1)))?;
    chart.draw_series(thin(&s.source).map(|p| Circle::new(p, 2, BLACK.mix(0.6).filled())))?;
    Ok(())
}

fn bound(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else if x > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

/// Every k-th point, so at most about [`MAX_POINTS`] are drawn (the last one always).
fn thin(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    let last = points.len().saturating_sub(1);
    points
        .iter()
        .enumerate()
        .filter(move |(i, _)| i % step == 0 || *i == last)
        .map(|(_, &p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_source_curve_and_limit_band() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.svg");
        let source: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64 * 0.1, (i as f64).sin()))
            .collect();
        let curve: Vec<(f64, f64)> = (0..91)
            .map(|i| (i as f64 * 0.01, (i as f64 * 0.1).sin()))
            .collect();
        let series = [
            Series {
                name: "elbow_pitch",
                source: source.clone(),
                curve: curve.clone(),
                limits: Limits {
                    lower: -0.9,
                    upper: 0.9,
                },
            },
            Series {
                name: "wrist_roll",
                source,
                curve,
                limits: Limits::UNBOUNDED,
            },
        ];
        write_svg(&path, "test motion", &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("elbow_pitch"));
        assert!(svg.contains("<circle"));
        assert!(svg.contains("<polyline"));
    }

    #[test]
    fn thins_long_series_keeping_the_ends() {
        let points: Vec<(f64, f64)> = (0..10_001).map(|i| (i as f64, 0.0)).collect();
        let kept: Vec<_> = thin(&points).collect();
        assert!(kept.len() <= MAX_POINTS + 1);
        assert_eq!(kept.first(), Some(&(0.0, 0.0)));
        assert_eq!(kept.last(), Some(&(10_000.0, 0.0)));
    }
}
