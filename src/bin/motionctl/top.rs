//! `motionctl top`: a live view of the daemon, refreshed from `status`, with keys for stop, quick
//! stop and pause/resume.

use std::time::{Duration, Instant};

use motiond::daemon::protocol::Request;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Gauge, Paragraph, Row, Table};
use ratatui::{DefaultTerminal, Frame};
use serde_json::Value;

use crate::{Client, Failure, bus_lines, describe_fault, estop_line, group_lines};

/// What the view shows and what the last key did.
struct View {
    status: Value,
    /// `stop: ok`, `pause: refused: …`
    last_action: Option<String>,
}

pub fn run(client: &mut Client, refresh: Duration) -> Result<(), Failure> {
    // The first status before the screen changes: an unreachable daemon is reported plainly.
    let (_, status) = client.request(&Request::Status)?;
    crate::check(&status)?;
    let mut terminal = ratatui::init();
    let result = live(&mut terminal, client, refresh, status);
    ratatui::restore();
    result
}

fn live(
    terminal: &mut DefaultTerminal,
    client: &mut Client,
    refresh: Duration,
    status: Value,
) -> Result<(), Failure> {
    let mut view = View {
        status,
        last_action: None,
    };
    let mut next = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next {
            let (_, status) = client.request(&Request::Status)?;
            view.status = status;
            next = now + refresh;
            terminal
                .draw(|frame| draw(frame, &view))
                .map_err(|e| Failure::Unreachable(format!("terminal: {e}")))?;
        }
        let wait = next.saturating_duration_since(Instant::now());
        let ready =
            event::poll(wait).map_err(|e| Failure::Unreachable(format!("terminal: {e}")))?;
        if !ready {
            continue;
        }
        let Ok(Event::Key(key)) = event::read() else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        let request = match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
            KeyCode::Char('s') => Request::Stop { group: None },
            KeyCode::Char(' ') => Request::QuickStop { group: None },
            KeyCode::Char('p') => match view.status["state"].as_str() {
                Some("paused") => Request::Resume { group: None },
                _ => Request::Pause { group: None },
            },
            _ => continue,
        };
        let name = command_name(&request);
        let (_, reply) = client.request(&request)?;
        view.last_action = Some(match crate::check(&reply) {
            Ok(()) => format!("{name}: ok"),
            Err(Failure::Refused(m) | Failure::Invalid(m) | Failure::Fault(m)) => {
                format!("{name}: {m}")
            }
            Err(Failure::Unreachable(m)) => return Err(Failure::Unreachable(m)),
        });
        // Show the effect at once.
        next = Instant::now();
    }
}

fn command_name(request: &Request) -> &'static str {
    match request {
        Request::Stop { .. } => "stop",
        Request::QuickStop { .. } => "quick stop",
        Request::Pause { .. } => "pause",
        Request::Resume { .. } => "resume",
        _ => "request",
    }
}

fn draw(frame: &mut Frame, view: &View) {
    let s = &view.status;
    let joints = s["positions"].as_object().map_or(0, |m| m.len()) as u16;
    let estop = estop_line(s);
    let faults = s["faults"].as_array().map_or(0, Vec::len) as u16 + u16::from(estop.is_some());
    let events = recent_events(s);
    let faults = faults.max(1) + events.len() as u16;
    let groups = group_lines(s);
    let buses = bus_lines(s);
    // Without buses (simulated backend) the block is left out.
    let bus_height = if buses.is_empty() {
        0
    } else {
        buses.len() as u16 + 2
    };
    let [head, motion, table, lat, bus_area, fault_area, keys] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(3 + groups.len() as u16),
        Constraint::Length(joints + 3),
        Constraint::Length(3),
        Constraint::Length(bus_height),
        Constraint::Length(faults + 2),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    header(frame, head, s);
    progress(frame, motion, s, &groups);
    joint_table(frame, table, s);
    latency(frame, lat, s);
    if !buses.is_empty() {
        bus_list(frame, bus_area, buses);
    }
    fault_list(frame, fault_area, s, estop, events);
    let mut spans = vec![
        key("s"),
        Span::raw(" stop  "),
        key("space"),
        Span::raw(" quick stop  "),
        key("p"),
        Span::raw(" pause/resume  "),
        key("q"),
        Span::raw(" quit"),
    ];
    if let Some(a) = &view.last_action {
        spans.push(Span::raw("   last: "));
        spans.push(Span::styled(
            a.clone(),
            Style::new().add_modifier(Modifier::BOLD),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), keys);
}

fn key(k: &str) -> Span<'_> {
    Span::styled(k, Style::new().fg(Color::Black).bg(Color::Gray))
}

fn state_color(state: &str) -> Color {
    match state {
        "fault" | "estop" => Color::Red,
        "playing" | "approaching" | "streaming" => Color::Green,
        "paused" | "stopping" | "starved" => Color::Yellow,
        _ => Color::Cyan,
    }
}

fn header(frame: &mut Frame, area: Rect, s: &Value) {
    let state = s["state"].as_str().unwrap_or("?");
    let line = Line::from(vec![
        Span::raw("state "),
        Span::styled(
            state.to_string(),
            Style::new()
                .fg(state_color(state))
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "   backend {} at {} Hz   tick {}",
            s["backend"].as_str().unwrap_or("?"),
            s["rate_hz"].as_f64().map_or("?".into(), |r| r.to_string()),
            s["tick"]
        )),
    ]);
    frame.render_widget(
        Paragraph::new(line).block(Block::bordered().title(" motiond ")),
        area,
    );
}

/// The robot's motion as a gauge, then one line per joint group.
fn progress(frame: &mut Frame, area: Rect, s: &Value, groups: &[String]) {
    let [area, group_area] =
        Layout::vertical([Constraint::Length(3), Constraint::Min(0)]).areas(area);
    if !groups.is_empty() {
        let lines: Vec<Line> = groups.iter().map(|g| Line::from(g.as_str())).collect();
        frame.render_widget(Paragraph::new(lines), group_area);
    }
    let block = Block::bordered().title(" motion ");
    let Some(motion) = s["motion"].as_str() else {
        let last = &s["last_outcome"];
        let text = match (last["motion"].as_str(), last["outcome"].as_str()) {
            (Some(m), Some(o)) => format!("no motion (last: {m} {o})"),
            _ => "no motion".to_string(),
        };
        frame.render_widget(Paragraph::new(text).block(block), area);
        return;
    };
    let ratio = s["progress"].as_f64().unwrap_or(0.0).clamp(0.0, 1.0);
    let time = s["time_s"].as_f64().unwrap_or(0.0);
    let duration = s["duration_s"]
        .as_f64()
        .map_or(String::new(), |d| format!(" / {d:.2}"));
    let gauge = Gauge::default()
        .block(block)
        .gauge_style(Style::new().fg(Color::Green).bg(Color::DarkGray))
        .ratio(ratio)
        .label(format!(
            "{motion}  {time:.2}{duration} s  {:.0}%",
            ratio * 100.0
        ));
    frame.render_widget(gauge, area);
}

/// `-1.90 ├──────●──│─────┤ 1.90`: the measured position (●) and the commanded one (│) inside
/// the position limits; an unbounded side is `∞`.
fn limit_bar(
    value: f64,
    commanded: f64,
    limits: (Option<f64>, Option<f64>),
    width: usize,
) -> String {
    let (Some(lo), Some(hi)) = limits else {
        return format!("{:^width$}", "no position limits");
    };
    let inner = width.saturating_sub(2).max(1);
    let at = |v: f64| {
        let x = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
        ((x * (inner - 1) as f64).round() as usize).min(inner - 1)
    };
    let mut cells = vec!['─'; inner];
    if let Some(c) = cells.get_mut(at(commanded)) {
        *c = '│';
    }
    if let Some(c) = cells.get_mut(at(value)) {
        *c = '●';
    }
    let mut bar = String::from("├");
    bar.extend(cells);
    bar.push('┤');
    bar
}

/// The limit bar's width: what the table's other columns, their gaps and the border leave of
/// `width`, between 8 and 32 cells — the bars shrink with the terminal instead of being cut.
fn bar_width(width: u16, name_width: u16) -> usize {
    // lower, upper, measured, commanded, max error; 7 gaps of one cell; the two borders.
    let others = name_width + 6 + 6 + 9 + 9 + 9 + 7 + 2;
    usize::from(width.saturating_sub(others)).clamp(8, 32)
}

fn joint_table(frame: &mut Frame, area: Rect, s: &Value) {
    let empty = serde_json::Map::new();
    let positions = s["positions"].as_object().unwrap_or(&empty);
    let name_width = positions
        .keys()
        .map(|j| j.chars().count())
        .max()
        .unwrap_or(5)
        .max(5) as u16
        + 1;
    let bar = bar_width(area.width, name_width);
    let rows: Vec<Row> = positions
        .iter()
        .map(|(joint, p)| {
            let p = p.as_f64().unwrap_or(f64::NAN);
            let c = s["commanded"][joint].as_f64().unwrap_or(p);
            let e = s["following_error"][joint].as_f64().unwrap_or(0.0);
            let l = &s["position_limits"][joint];
            let limits = (l[0].as_f64(), l[1].as_f64());
            let side = |v: Option<f64>| v.map_or("∞".into(), |v| format!("{v:.2}"));
            Row::new(vec![
                joint.clone(),
                side(limits.0),
                limit_bar(p, c, limits, bar),
                side(limits.1),
                format!("{p:>9.4}"),
                format!("{c:>9.4}"),
                format!("{e:>9.5}"),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(name_width),
        Constraint::Length(6),
        Constraint::Length(bar as u16),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Fill(1),
    ];
    let table = Table::new(rows, widths)
        .header(
            Row::new(vec![
                "joint",
                "lower",
                if bar >= 22 {
                    "measured ● commanded │"
                } else {
                    "● meas. │ cmd."
                },
                "upper",
                "measured",
                "commanded",
                "max error",
            ])
            .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(Block::bordered().title(" joints (positions within their limits) "));
    frame.render_widget(table, area);
}

fn latency(frame: &mut Frame, area: Rect, s: &Value) {
    let l = &s["latency_us"];
    let us = |k: &str| l[k].as_f64().map_or("-".into(), |v| format!("{v:.1}"));
    let text = format!(
        "wake-up latency µs: p50 {}  p99 {}  p99.9 {}  max {}    overruns {}    limit violations {}",
        us("p50"),
        us("p99"),
        us("p999"),
        us("max"),
        s["overruns"],
        s["limit_violations"]
    );
    frame.render_widget(
        Paragraph::new(text).block(Block::bordered().title(" loop ")),
        area,
    );
}

fn bus_list(frame: &mut Frame, area: Rect, buses: Vec<(String, bool)>) {
    let lines: Vec<Line> = buses
        .into_iter()
        .map(|(text, fault)| match fault {
            true => Line::styled(text, Style::new().fg(Color::Red)),
            false => Line::from(text),
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" buses and drives ")),
        area,
    );
}

/// Events the flight recorder holds that `top` shows: the newest two, oldest first, with their
/// age (`3.2 s ago  fault: stall on elbow_pitch`), faults and E-stops in red.
fn recent_events(s: &Value) -> Vec<(String, bool)> {
    const SHOWN: usize = 2;
    let events = s["events"].as_array().map_or(&[][..], Vec::as_slice);
    events
        .iter()
        .skip(events.len().saturating_sub(SHOWN))
        .map(|e| {
            let alarm = matches!(e["kind"].as_str(), Some("fault" | "estop" | "guard"));
            let ago = e["ago_s"].as_f64().unwrap_or(0.0);
            (
                format!("{ago:>6.1} s ago  {}", e["text"].as_str().unwrap_or("?")),
                alarm,
            )
        })
        .collect()
}

/// The faults, and the E-stop first when one is watched; then the newest events.
fn fault_list(
    frame: &mut Frame,
    area: Rect,
    s: &Value,
    estop: Option<(String, bool)>,
    events: Vec<(String, bool)>,
) {
    let faults = s["faults"].as_array().map_or(&[][..], Vec::as_slice);
    let red = Style::new().fg(Color::Red);
    let mut lines: Vec<Line> = estop
        .into_iter()
        .map(|(text, held)| {
            let style = if held {
                red.add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
            Line::styled(text, style)
        })
        .collect();
    lines.extend(faults.iter().map(|f| Line::styled(describe_fault(f), red)));
    if faults.is_empty() {
        lines.push(Line::from("no faults"));
    }
    for (text, alarm) in events {
        let style = if alarm {
            red
        } else {
            Style::new().fg(Color::Gray)
        };
        lines.push(Line::styled(text, style));
    }
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" faults, E-stop and events ")),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fit_the_terminal() {
        // 80 columns, the demo arm's longest name (shoulder_pitch, 14) and its gap.
        assert_eq!(bar_width(80, 15), 17);
        assert_eq!(bar_width(140, 15), 32);
        assert_eq!(bar_width(40, 15), 8);
    }

    #[test]
    fn limit_bar_places_measured_and_commanded() {
        let bar = limit_bar(0.0, 1.0, (Some(-1.0), Some(1.0)), 12);
        assert_eq!(bar.chars().count(), 12);
        assert_eq!(bar, "├─────●───│┤");
        assert_eq!(
            limit_bar(0.0, 0.0, (None, Some(1.0)), 20).trim(),
            "no position limits"
        );
    }
}
