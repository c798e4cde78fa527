//! A motion as operators look at it: per joint, position, velocity and acceleration panels on one
//! time axis, the commanded curve and the measured (or simulated) one, the limits always drawn,
//! the source samples when they are sparse enough to see, and the places where the proof refused.
//! SVG or PNG, chosen by the file name.
//!
//! Every curve is reduced to the lowest and highest value of each pixel column (in the order they
//! occur) before it is drawn: the picture is the same as drawing every tick, and a 14 s motion of
//! 29 joints stays about a megabyte, which renders in seconds.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use motiond::motion::seq::{Motion, Timing};
use motiond::robot::{JointKind, Limits, World};
use motiond::rt::TraceRow;
use motiond::session::Robot;
use motiond::trajectory::{
    self, BuildError, ColumnMap, CommandedDof, Cursor, DofLimits, JointSet, Options, ProofReport,
    Quantity, Setpoint, Trajectory,
};

/// What a DOF's position is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Revolute and the rotations of other joints: rad, rad/s, rad/s².
    Radian,
    /// Prismatic and the translations of planar/free joints: m, m/s, m/s².
    Metre,
}

impl Unit {
    /// The unit of the position, velocity or acceleration.
    pub fn of(self, quantity: Quantity) -> &'static str {
        match (self, quantity) {
            // Where a quick stop ends is a position.
            (Unit::Radian, Quantity::Position | Quantity::QuickStop) => "rad",
            (Unit::Radian, Quantity::Velocity) => "rad/s",
            (Unit::Radian, Quantity::Acceleration) => "rad/s²",
            (Unit::Metre, Quantity::Position | Quantity::QuickStop) => "m",
            (Unit::Metre, Quantity::Velocity) => "m/s",
            (Unit::Metre, Quantity::Acceleration) => "m/s²",
            (_, Quantity::Effort) => "N·m",
        }
    }

    /// A commanded DOF's unit, from its joint in `world`.
    pub fn for_dof(world: &World, dof: &CommandedDof) -> Unit {
        let Some(skeleton) = world.skeletons.get(dof.skeleton) else {
            return Unit::Radian;
        };
        let Some(d) = skeleton.dofs.get(dof.dof) else {
            return Unit::Radian;
        };
        let Some(joint) = skeleton.joints.get(d.joint) else {
            return Unit::Radian;
        };
        let first = joint.dofs.start;
        let translation = match joint.kind {
            JointKind::Prismatic | JointKind::Translational => true,
            // DART orders a planar joint's DOFs translation, translation, rotation and a free
            // joint's rotation ×3, translation ×3.
            JointKind::Planar(_) => d_index(dof.dof, first) < 2,
            JointKind::Free => d_index(dof.dof, first) >= 3,
            _ => false,
        };
        if translation {
            Unit::Metre
        } else {
            Unit::Radian
        }
    }
}

fn d_index(dof: usize, first: usize) -> usize {
    dof.saturating_sub(first)
}

/// A limit the proof found crossed, to be marked on its panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub quantity: Quantity,
    /// When the limit is first crossed, and the worst value and when.
    pub first_s: f64,
    pub time_s: f64,
    pub value: f64,
}

/// One joint: three panels.
#[derive(Debug, Clone)]
pub struct JointPlot {
    pub name: String,
    pub unit: Unit,
    pub limits: DofLimits,
    /// The commanded setpoint at each time (one per tick).
    pub commanded: Vec<(f64, Setpoint)>,
    /// The measured (or simulated) position at each time; empty when there is none.
    pub measured: Vec<(f64, f64)>,
    /// The motion's own samples (time as played, position); empty when not shown.
    pub source: Vec<(f64, f64)>,
    pub violations: Vec<Mark>,
}

/// The whole picture.
#[derive(Debug, Clone)]
pub struct Figure {
    /// First header line: what motion, on what robot, how resampled.
    pub title: String,
    /// Second header line: the verdict (proved, refused and why, played, faulted).
    pub verdict: String,
    /// The verdict is bad news (drawn in red).
    pub refused: bool,
    /// Name of the second curve in the legend (`measured` or `simulated`); `None` when no joint
    /// has one.
    pub measured_label: Option<String>,
    pub joints: Vec<JointPlot>,
    /// What happened during a run (stops, pauses, faults, E-stops), marked on every panel.
    pub events: Vec<EventMark>,
}

/// An event of the loop's record at its time, drawn as a labelled vertical line.
#[derive(Debug, Clone, PartialEq)]
pub struct EventMark {
    pub time_s: f64,
    pub label: String,
    /// A fault or an E-stop (drawn in red), else grey.
    pub alarm: bool,
}

/// The events of a trace worth marking on a plot: stops, pauses, faults, E-stops and guard
/// interventions (the flight recorder's events), at their time from the first row.
pub fn trace_events(rows: &[TraceRow], joints: &JointSet, rate_hz: f64) -> Vec<EventMark> {
    use motiond::recorder::EventKind;
    use motiond::rt::State;
    let t0 = rows.first().map_or(0, |r| r.tick);
    motiond::recorder::events::from_rows(rows, joints)
        .into_iter()
        .filter_map(|e| {
            let label = match (e.kind, e.state) {
                (EventKind::State, Some(State::Stopping)) => "stop",
                (EventKind::State, Some(State::Paused)) => "pause",
                (EventKind::Fault, _) => "fault",
                (EventKind::EStop, _) => "E-stop",
                (EventKind::Guard, _) => "guard",
                _ => return None,
            };
            Some(EventMark {
                time_s: e.tick.saturating_sub(t0) as f64 / rate_hz,
                label: label.into(),
                alarm: matches!(
                    e.kind,
                    EventKind::Fault | EventKind::EStop | EventKind::Guard
                ),
            })
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
#[error("{}: could not draw the plot: {message}", path.display())]
pub struct PlotError {
    pub path: PathBuf,
    pub message: String,
}

/// Image formats, by file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// `.svg` or `.png` (any case); anything else is not a plot file.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "svg" => Some(Format::Svg),
            "png" => Some(Format::Png),
            _ => None,
        }
    }
}

/// Checks a `--plot` argument before any work is done.
pub fn check_path(path: &Path) -> Result<Format, String> {
    Format::of(path).ok_or_else(|| {
        format!(
            "--plot {}: expected a file name ending in .svg or .png",
            path.display()
        )
    })
}

/// One panel set per commanded DOF, empty curves, limits and units from the robot (radians
/// without a `world`).
pub fn joints_of(world: Option<&World>, joints: &JointSet) -> Vec<JointPlot> {
    joints
        .dofs
        .iter()
        .map(|d| JointPlot {
            name: d.name.clone(),
            unit: world.map_or(Unit::Radian, |w| Unit::for_dof(w, d)),
            limits: d.limits,
            commanded: Vec::new(),
            measured: Vec::new(),
            source: Vec::new(),
            violations: Vec::new(),
        })
        .collect()
}

/// Fills `plots` (from [`joints_of`]) with every tick of `trajectory`, the motion's own samples
/// at the times they are played, and the limits `report` found crossed.
pub fn add_trajectory(
    plots: &mut [JointPlot],
    trajectory: &Trajectory,
    motion: &Motion,
    map: &ColumnMap,
    report: &ProofReport,
) {
    let mut cursor = Cursor::default();
    let mut row = vec![Setpoint::default(); trajectory.dofs()];
    for k in 0..trajectory.ticks() {
        trajectory.sample(&mut cursor, k, &mut row);
        let t = k as f64 / trajectory.rate_hz();
        for (p, s) in plots.iter_mut().zip(&row) {
            p.commanded.push((t, *s));
        }
    }
    if let Some(seq) = motion.joint_displacement() {
        let rows = seq.rows();
        let first = if rows > 0 { seq.timing.time(0) } else { 0.0 };
        // Source times as played: divided by the speed, stretched by a retime.
        let speed = report.speed / report.retimed.unwrap_or(1.0);
        for (c, &dof) in map.columns().iter().enumerate() {
            if let Some(p) = plots.get_mut(dof) {
                p.source = (0..rows)
                    .filter_map(|r| {
                        let v = *seq.values.get(r * seq.num_parts + c)?;
                        Some(((seq.timing.time(r) - first) / speed, v))
                    })
                    .collect();
            }
        }
    }
    for v in &report.violations {
        if let Some(p) = plots.iter_mut().find(|p| p.name == v.dof) {
            p.violations.push(Mark {
                quantity: v.quantity,
                first_s: v.first_s,
                time_s: v.time_s,
                value: v.value,
            });
        }
    }
}

/// The picture of a proof (`check`, `resample`): every tick of `drawn` (the proved trajectory, or
/// for a refused motion the [`unproved`] one), the source samples, and the crossings `report`
/// found, under a title naming the motion, the robot and the resampling.
pub fn proof_figure(
    file: &Path,
    robot: Option<&Robot>,
    joints: &JointSet,
    drawn: &Trajectory,
    motion: &Motion,
    map: &ColumnMap,
    report: &ProofReport,
) -> Figure {
    let mut plots = joints_of(robot.map(|r| &r.world), joints);
    add_trajectory(&mut plots, drawn, motion, map, report);
    let source = match motion.joint_displacement().map(|s| &s.timing) {
        Some(Timing::Fixed { frame_rate }) => format!("{frame_rate} Hz source"),
        _ => "timed source".to_string(),
    };
    let robot = robot.map_or_else(|| "no robot".to_string(), Robot::name);
    let title = format!(
        "{} on {robot}: {source} → {} Hz, {}, {}, speed {}",
        file.display(),
        report.rate_hz,
        report.interpolation.as_str(),
        report.policy.as_str(),
        motiond::trajectory::speed_text(report.speed)
    );
    let verdict = if report.passed() {
        format!(
            "proved: every tick within the position, velocity and acceleration limits ({})",
            report.summary()
        )
    } else {
        format!("refused: {}", report.summary())
    };
    Figure {
        title,
        verdict,
        refused: !report.passed(),
        measured_label: None,
        joints: plots,
        events: Vec::new(),
    }
}

/// The trajectory a refused motion would have followed: the same resampling with every limit
/// lifted, so the plot can show where the real limits are crossed.
pub fn unproved(
    joints: &JointSet,
    motion: &Motion,
    map: &ColumnMap,
    options: &Options,
) -> Result<Trajectory, BuildError> {
    let mut free = joints.clone();
    for d in &mut free.dofs {
        d.limits = DofLimits {
            position: Limits::UNBOUNDED,
            velocity: Limits::UNBOUNDED,
            acceleration: Limits::UNBOUNDED,
            effort: Limits::UNBOUNDED,
        };
    }
    let options = Options {
        policy: trajectory::LimitPolicy::Reject,
        ..*options
    };
    trajectory::build(&free, motion, map, &options).map(|p| p.trajectory)
}

/// Fills `plots` (from [`joints_of`]) with the loop's trace: what it commanded and what the drives
/// reported, from the first traced tick.
pub fn add_trace(plots: &mut [JointPlot], rows: &[TraceRow], rate_hz: f64) {
    let t0 = rows.first().map_or(0, |r| r.tick);
    for r in rows {
        let t = (r.tick - t0) as f64 / rate_hz;
        for (j, p) in plots.iter_mut().enumerate() {
            if let Some(s) = r.commanded.get(j) {
                p.commanded.push((t, *s));
            }
            if let Some(m) = r.measured.get(j) {
                p.measured.push((t, *m));
            }
        }
    }
}

const FONT: &str = "sans-serif";
const JOINT_W: u32 = 540;
const PANEL_H: u32 = 150;
const CAPTION_H: u32 = 24;
const JOINT_H: u32 = CAPTION_H + 3 * PANEL_H + 10;
const HEADER_H: u32 = 92;
const Y_LABEL_W: u32 = 78;
const X_LABEL_H: u32 = 34;
/// Width of a panel's plotting area in pixels (the panel less its labels and margins): the number
/// of columns a curve is reduced to.
const PLOT_W: usize = (JOINT_W - Y_LABEL_W - 16) as usize;

const COMMANDED: RGBColor = RGBColor(31, 90, 200);
const MEASURED: RGBColor = RGBColor(235, 120, 0);
const LIMIT: RGBColor = RGBColor(200, 30, 30);
const SOURCE: RGBColor = RGBColor(40, 40, 40);
const EVENT: RGBColor = RGBColor(110, 110, 110);

fn register_font() {
    static FONT_ONCE: Once = Once::new();
    FONT_ONCE.call_once(|| {
        // The font is compiled in, so a robot computer without fonts draws the same picture.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// Draws `figure` into `path`, as SVG or PNG by its extension.
pub fn write(path: &Path, figure: &Figure) -> Result<(), PlotError> {
    let fail = |message: String| PlotError {
        path: path.to_path_buf(),
        message,
    };
    let format = check_path(path).map_err(fail)?;
    register_font();
    let size = size(figure.joints.len());
    let result = match format {
        Format::Svg => draw(SVGBackend::new(path, size).into_drawing_area(), figure),
        Format::Png => draw(BitMapBackend::new(path, size).into_drawing_area(), figure),
    };
    result.map_err(fail)
}

fn columns(joints: usize) -> usize {
    match joints {
        0 | 1 => 1,
        2..=4 => 2,
        _ => 3,
    }
}

fn size(joints: usize) -> (u32, u32) {
    let cols = columns(joints);
    let rows = joints.max(1).div_ceil(cols);
    (JOINT_W * cols as u32, HEADER_H + JOINT_H * rows as u32)
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, figure: &Figure) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (head, body) = root.split_vertically(HEADER_H);
    header(&head, figure).map_err(e)?;
    let cols = columns(figure.joints.len());
    let rows = figure.joints.len().max(1).div_ceil(cols);
    let blocks = body.split_evenly((rows, cols));
    for (joint, area) in figure.joints.iter().zip(&blocks) {
        joint_block(area, joint, &figure.events).map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

fn header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    figure: &Figure,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let title = (FONT, 17).into_font().style(FontStyle::Bold);
    area.draw(&Text::new(figure.title.clone(), (10, 8), title))?;
    let verdict_color = if figure.refused {
        LIMIT
    } else {
        RGBColor(20, 120, 40)
    };
    area.draw(&Text::new(
        figure.verdict.clone(),
        (10, 34),
        (FONT, 14).into_font().color(&verdict_color),
    ))?;
    // The legend: one sample of each mark, left to right.
    let y = 70;
    let text = (FONT, 13).into_font();
    let mut x = 10;
    let item = |x: &mut i32, label: &str, sample: &dyn Fn(i32) -> Vec<PathElement<(i32, i32)>>| {
        for el in sample(*x) {
            area.draw(&el)?;
        }
        area.draw(&Text::new(
            label.to_string(),
            (*x + 30, y - 7),
            text.clone(),
        ))?;
        *x += 40 + 8 * label.chars().count() as i32;
        Ok::<(), DrawingAreaErrorKind<DB::ErrorType>>(())
    };
    item(&mut x, "commanded", &|x| {
        vec![PathElement::new(
            vec![(x, y), (x + 24, y)],
            COMMANDED.stroke_width(2),
        )]
    })?;
    if let Some(label) = &figure.measured_label {
        item(&mut x, label, &|x| {
            vec![PathElement::new(
                vec![(x, y), (x + 24, y)],
                MEASURED.stroke_width(2),
            )]
        })?;
    }
    if figure.joints.iter().any(shows_source) {
        item(&mut x, "source samples", &|x| cross(x + 12, y, 3, SOURCE))?;
    }
    item(&mut x, "limit (shaded: outside)", &|x| {
        vec![PathElement::new(
            vec![(x, y), (x + 24, y)],
            LIMIT.stroke_width(1),
        )]
    })?;
    if figure.joints.iter().any(|j| !j.violations.is_empty()) {
        item(
            &mut x,
            "limit crossed: worst value (line: first crossing)",
            &|x| cross(x + 12, y, 5, LIMIT),
        )?;
    }
    Ok(())
}

fn cross(x: i32, y: i32, r: i32, color: RGBColor) -> Vec<PathElement<(i32, i32)>> {
    vec![
        PathElement::new(vec![(x - r, y - r), (x + r, y + r)], color.stroke_width(2)),
        PathElement::new(vec![(x - r, y + r), (x + r, y - r)], color.stroke_width(2)),
    ]
}

fn joint_block<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    joint: &JointPlot,
    events: &[EventMark],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (caption, panels) = area.split_vertically(CAPTION_H);
    let style = (FONT, 15).into_font().style(FontStyle::Bold);
    caption.draw(&Text::new(joint.name.clone(), (Y_LABEL_W as i32, 6), style))?;
    let (t0, t1) = time_range(joint);
    let panels = panels.split_evenly((3, 1));
    let quantities = [
        Quantity::Position,
        Quantity::Velocity,
        Quantity::Acceleration,
    ];
    for (i, (q, panel_area)) in quantities.iter().zip(&panels).enumerate() {
        panel(panel_area, joint, *q, (t0, t1), i == 2, events)?;
    }
    Ok(())
}

fn time_range(joint: &JointPlot) -> (f64, f64) {
    let times = joint
        .commanded
        .iter()
        .map(|(t, _)| *t)
        .chain(joint.measured.iter().map(|(t, _)| *t))
        .chain(joint.source.iter().map(|(t, _)| *t))
        .filter(|t| t.is_finite());
    let (mut t0, mut t1) = (f64::INFINITY, f64::NEG_INFINITY);
    for t in times {
        t0 = t0.min(t);
        t1 = t1.max(t);
    }
    if t0 > t1 {
        return (0.0, 1.0);
    }
    if t1 - t0 <= 0.0 {
        t1 = t0 + 1.0;
    }
    (t0, t1)
}

fn limits_of(limits: &DofLimits, q: Quantity) -> Limits {
    match q {
        Quantity::Position | Quantity::QuickStop => limits.position,
        Quantity::Velocity => limits.velocity,
        Quantity::Acceleration => limits.acceleration,
        Quantity::Effort => limits.effort,
    }
}

fn commanded_value(s: &Setpoint, q: Quantity) -> f64 {
    match q {
        Quantity::Position | Quantity::QuickStop => s.position,
        Quantity::Velocity => s.velocity,
        Quantity::Acceleration | Quantity::Effort => s.acceleration,
    }
}

/// Source samples are marked when there is room for them (at least three pixels apart on average).
fn shows_source(joint: &JointPlot) -> bool {
    !joint.source.is_empty() && joint.source.len() <= PLOT_W / 3
}

/// The y range: the data padded, widened to show a limit that is near enough to matter (a far
/// one is named in the panel instead, so a small motion is not flattened into a line).
fn y_range(data: (f64, f64), limits: Limits) -> (f64, f64, bool, bool) {
    let (mut lo, mut hi) = data;
    if lo > hi {
        (lo, hi) = (0.0, 0.0);
    }
    let mut span = hi - lo;
    if span <= 1e-9 * lo.abs().max(hi.abs()).max(1e-6) {
        // A DOF at rest: scale to its limits when it has both, else to a unit around the value.
        let width = limits.upper - limits.lower;
        span = if width.is_finite() && width > 0.0 {
            width / 4.0
        } else {
            lo.abs().max(1.0)
        };
        (lo, hi) = (lo - span / 2.0, hi + span / 2.0);
    }
    let reach = 4.0 * span;
    let show_lower = limits.lower.is_finite() && limits.lower >= lo - reach;
    let show_upper = limits.upper.is_finite() && limits.upper <= hi + reach;
    if show_lower {
        lo = lo.min(limits.lower);
    }
    if show_upper {
        hi = hi.max(limits.upper);
    }
    let pad = 0.08 * (hi - lo).max(span);
    (lo - pad, hi + pad, show_lower, show_upper)
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    joint: &JointPlot,
    q: Quantity,
    (t0, t1): (f64, f64),
    bottom: bool,
    events: &[EventMark],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let commanded = envelope(
        joint
            .commanded
            .iter()
            .map(|(t, s)| (*t, commanded_value(s, q))),
        t0,
        t1,
    );
    let measured = if q == Quantity::Position {
        envelope(joint.measured.iter().copied(), t0, t1)
    } else {
        Vec::new()
    };
    let source = if q == Quantity::Position && shows_source(joint) {
        joint.source.as_slice()
    } else {
        &[]
    };
    let marks: Vec<&Mark> = joint
        .violations
        .iter()
        .filter(|m| m.quantity == q)
        .collect();
    let mut data = (f64::INFINITY, f64::NEG_INFINITY);
    let values = commanded
        .iter()
        .chain(&measured)
        .chain(source)
        .map(|p| p.1)
        .chain(marks.iter().map(|m| m.value));
    for v in values.filter(|v| v.is_finite()) {
        data = (data.0.min(v), data.1.max(v));
    }
    let limits = limits_of(&joint.limits, q);
    let (y0, y1, show_lower, show_upper) = y_range(data, limits);
    let unit = joint.unit.of(q);
    let mut chart = ChartBuilder::on(area)
        .margin_left(4)
        .margin_right(12)
        .margin_top(4)
        .x_label_area_size(if bottom { X_LABEL_H } else { 16 })
        .y_label_area_size(Y_LABEL_W)
        .build_cartesian_2d(t0..t1, y0..y1)?;
    let x_fmt = formatter(t0, t1, 8);
    let y_fmt = formatter(y0, y1, 5);
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(8)
        .y_labels(5)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .y_desc(format!("{} ({unit})", q.as_str()))
        .label_style((FONT, 11))
        .axis_desc_style((FONT, 12))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215));
    if bottom {
        mesh.x_desc("time (s)");
    }
    mesh.draw()?;

    // Limits: the line, and the forbidden side shaded.
    let band = LIMIT.mix(0.10).filled();
    let line = LIMIT.stroke_width(1);
    if show_upper {
        chart.draw_series([Rectangle::new([(t0, limits.upper), (t1, y1)], band)])?;
        chart.draw_series([PathElement::new(
            vec![(t0, limits.upper), (t1, limits.upper)],
            line,
        )])?;
    }
    if show_lower {
        chart.draw_series([Rectangle::new([(t0, y0), (t1, limits.lower)], band)])?;
        chart.draw_series([PathElement::new(
            vec![(t0, limits.lower), (t1, limits.lower)],
            line,
        )])?;
    }
    let note = limit_note(limits, show_lower, show_upper, unit);
    if !note.is_empty() {
        let plot = chart.plotting_area().strip_coord_spec();
        let (w, _) = plot.dim_in_pixel();
        let font = (FONT, 11).into_font().color(&LIMIT);
        let width = 6 * note.chars().count() as i32;
        plot.draw(&Text::new(note, (w as i32 - width - 4, 3), font))?;
    }

    if !measured.is_empty() {
        chart.draw_series(LineSeries::new(measured, MEASURED.stroke_width(2)))?;
    }
    chart.draw_series(LineSeries::new(commanded, COMMANDED.stroke_width(1)))?;
    chart.draw_series(
        source
            .iter()
            .map(|&(t, v)| Cross::new((t, v), 3, SOURCE.stroke_width(1))),
    )?;
    for e in events {
        let color = if e.alarm { LIMIT } else { EVENT };
        chart.draw_series([PathElement::new(
            vec![(e.time_s, y0), (e.time_s, y1)],
            color.stroke_width(1),
        )])?;
        if q == Quantity::Position {
            let font = (FONT, 11).into_font().color(&color);
            chart.draw_series([Text::new(e.label.clone(), (e.time_s, y1), font)])?;
        }
    }
    for m in marks {
        chart.draw_series([PathElement::new(
            vec![(m.first_s, y0), (m.first_s, y1)],
            LIMIT.mix(0.5).stroke_width(1),
        )])?;
        chart.draw_series([Cross::new((m.time_s, m.value), 6, LIMIT.stroke_width(2))])?;
    }
    Ok(())
}

/// Names the limits the panel does not show: unbounded, or too far away to draw.
fn limit_note(limits: Limits, show_lower: bool, show_upper: bool, unit: &str) -> String {
    match (limits.lower.is_finite(), limits.upper.is_finite()) {
        (false, false) => "no limit".into(),
        _ if show_lower && show_upper => String::new(),
        _ => {
            let side = |v: f64, shown: bool, name: &str| {
                if !v.is_finite() {
                    format!("{name}: none")
                } else if shown {
                    String::new()
                } else {
                    format!("{name} {} {unit} off scale", fmt_value(v, 4))
                }
            };
            let parts: Vec<String> = [
                side(limits.lower, show_lower, "lower"),
                side(limits.upper, show_upper, "upper"),
            ]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
            parts.join(", ")
        }
    }
}

fn fmt_value(v: f64, significant: usize) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (significant as i32 - 1 - magnitude).clamp(0, 9) as usize;
    format!("{v:.decimals$}")
}

/// Tick labels with as many decimals as the tick spacing needs, so neighbours always differ.
fn formatter(lo: f64, hi: f64, labels: usize) -> impl Fn(&f64) -> String {
    let step = ((hi - lo) / labels.max(1) as f64).abs();
    let decimals = if step > 0.0 && step.is_finite() {
        (-(step.log10().floor()) as i32).clamp(0, 9) as usize
    } else {
        2
    };
    move |v: &f64| {
        // Avoid "-0.00".
        let v = if v.abs() < 0.5 * 10f64.powi(-(decimals as i32)) {
            0.0
        } else {
            *v
        };
        format!("{v:.decimals$}")
    }
}

/// The curve reduced to its lowest and highest value per pixel column of the plot, in the order
/// they occur (non-finite points dropped). What a line drawn through every point would cover,
/// with at most two points per pixel.
pub fn envelope(points: impl Iterator<Item = (f64, f64)>, t0: f64, t1: f64) -> Vec<(f64, f64)> {
    let scale = PLOT_W as f64 / (t1 - t0).max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(2 * PLOT_W + 2);
    // The current column: its index, and its lowest and highest point.
    type Point = (f64, f64);
    let mut column: Option<(i64, Point, Point)> = None;
    let flush = |out: &mut Vec<(f64, f64)>, lo: (f64, f64), hi: (f64, f64)| {
        let (a, b) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
        out.push(a);
        if b != a {
            out.push(b);
        }
    };
    for p in points.filter(|p| p.0.is_finite() && p.1.is_finite()) {
        let c = ((p.0 - t0) * scale).floor() as i64;
        match &mut column {
            Some((current, lo, hi)) if *current == c => {
                if p.1 < lo.1 {
                    *lo = p;
                }
                if p.1 > hi.1 {
                    *hi = p;
                }
            }
            _ => {
                if let Some((_, lo, hi)) = column {
                    flush(&mut out, lo, hi);
                }
                column = Some((c, p, p));
            }
        }
    }
    if let Some((_, lo, hi)) = column {
        flush(&mut out, lo, hi);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(p: f64, v: f64, a: f64) -> DofLimits {
        DofLimits {
            position: Limits::symmetric(p),
            velocity: Limits::symmetric(v),
            acceleration: Limits::symmetric(a),
            effort: Limits::UNBOUNDED,
        }
    }

    fn sine(ticks: usize, rate: f64) -> Vec<(f64, Setpoint)> {
        (0..ticks)
            .map(|k| {
                let t = k as f64 / rate;
                let setpoint = Setpoint {
                    position: t.sin(),
                    velocity: t.cos(),
                    acceleration: -t.sin(),
                };
                (t, setpoint)
            })
            .collect()
    }

    fn figure(ticks: usize, joints: usize) -> Figure {
        let commanded = sine(ticks, 1000.0);
        let measured: Vec<(f64, f64)> = commanded
            .iter()
            .map(|(t, s)| (*t, s.position * 0.98))
            .collect();
        Figure {
            title: "wave.seq on demo_arm".into(),
            verdict: "refused: elbow_pitch velocity 1.1 above 1".into(),
            refused: true,
            measured_label: Some("simulated".into()),
            events: vec![EventMark {
                time_s: 0.5,
                label: "fault".into(),
                alarm: true,
            }],
            joints: (0..joints)
                .map(|j| JointPlot {
                    name: format!("joint_{j}"),
                    unit: if j == 1 { Unit::Metre } else { Unit::Radian },
                    limits: limits(0.9, 1.0, 2.0),
                    commanded: commanded.clone(),
                    measured: if j == 2 { Vec::new() } else { measured.clone() },
                    source: (0..10).map(|i| (i as f64, (i as f64).sin())).collect(),
                    violations: vec![Mark {
                        quantity: Quantity::Position,
                        first_s: 1.12,
                        time_s: 1.57,
                        value: 1.0,
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn svg_has_three_labelled_panels_per_joint_a_legend_and_limits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.svg");
        write(&path, &figure(10_000, 2)).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "joint_0",
            "joint_1",
            "position (rad)",
            "velocity (rad/s)",
            "acceleration (rad/s²)",
            "position (m)",
            "velocity (m/s)",
            "time (s)",
            "commanded",
            "simulated",
            "source samples",
            "limit crossed",
            "refused: elbow_pitch",
        ] {
            assert!(svg.contains(text), "no {text:?} in the SVG");
        }
        // 2 joints × 3 panels of commanded lines, 2 measured.
        assert!(svg.matches("<polyline").count() >= 8);
    }

    #[test]
    fn long_motions_are_reduced_per_pixel() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.svg");
        let big = dir.path().join("big.svg");
        write(&small, &figure(1_000, 3)).unwrap();
        write(&big, &figure(1_000_000, 3)).unwrap();
        let small = std::fs::metadata(&small).unwrap().len();
        let big = std::fs::metadata(&big).unwrap().len();
        // 1000× the ticks, at most twice the points per pixel: about the same file.
        assert!(big < 2 * small + 200_000, "{small} → {big} bytes");
    }

    #[test]
    fn png_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.png");
        write(&path, &figure(2_000, 1)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }

    #[test]
    fn other_extensions_are_refused_before_drawing() {
        let err = check_path(Path::new("out.pdf")).unwrap_err();
        assert!(err.contains(".svg or .png"), "{err}");
        assert_eq!(check_path(Path::new("a/B.PNG")), Ok(Format::Png));
    }

    #[test]
    fn envelope_keeps_each_columns_extremes_in_order() {
        let points: Vec<(f64, f64)> = (0..100_000)
            .map(|i| (i as f64 / 100_000.0, ((i * 7919) % 1000) as f64))
            .collect();
        let kept = envelope(points.iter().copied(), 0.0, 1.0);
        assert!(kept.len() <= 2 * PLOT_W + 2, "{}", kept.len());
        let lo = kept.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = kept.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        assert_eq!((lo, hi), (0.0, 999.0));
        assert!(kept.windows(2).all(|w| w[0].0 <= w[1].0));
        // Few points pass through unchanged; NaN is dropped.
        let few = [(0.0, 1.0), (0.5, f64::NAN), (1.0, 2.0)];
        assert_eq!(
            envelope(few.iter().copied(), 0.0, 1.0),
            [(0.0, 1.0), (1.0, 2.0)]
        );
    }

    #[test]
    fn tick_labels_differ() {
        let f = formatter(0.0, 0.04, 5);
        let labels: Vec<String> = [0.0, 0.008, 0.016, 0.024].iter().map(&f).collect();
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(labels, unique);
        assert_eq!(formatter(-2.0, 2.0, 4)(&-0.0), "0");
        assert_eq!(formatter(0.0, 6.0, 8)(&1.5), "1.5");
    }

    #[test]
    fn far_limits_are_named_instead_of_drawn() {
        let l = Limits::symmetric(100.0);
        let (y0, y1, lower, upper) = y_range((-0.1, 0.1), l);
        assert!(!lower && !upper && y0 > -1.0 && y1 < 1.0);
        assert_eq!(
            limit_note(l, lower, upper, "rad"),
            "lower -100.0 rad off scale, upper 100.0 rad off scale"
        );
        let (_, _, lower, upper) = y_range((-0.5, 0.5), Limits::symmetric(1.0));
        assert!(lower && upper);
        assert_eq!(limit_note(Limits::UNBOUNDED, false, false, "m"), "no limit");
    }
}
