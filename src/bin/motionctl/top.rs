//! `motionctl top`: a live view of the daemon, refreshed from `status`, with keys for stop, quick
//! stop and pause/resume.

use std::time::{Duration, Instant};

use motiond::daemon::protocol::Request;
use motiond::daemon::reply::{DoneReply, StatusReply};
use motiond::recorder::EventKind;
use motiond::rt::State;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Gauge, Paragraph, Row, Table};
use ratatui::{DefaultTerminal, Frame};

use crate::{Client, Failure, bus_lines, describe_fault, estop_line, group_lines};

/// What the view shows and what the last key did.
struct View {
    status: StatusReply,
    /// `stop: ok`, `pause: refused: …`
    last_action: Option<String>,
}

pub fn run(client: &mut Client, refresh: Duration) -> Result<(), Failure> {
    // The first status before the screen changes: an unreachable daemon is reported plainly.
    let status: StatusReply = client.call(&Request::Status, false)?;
    let mut terminal = ratatui::init();
    let result = live(&mut terminal, client, refresh, status);
    ratatui::restore();
    result
}

fn live(
    terminal: &mut DefaultTerminal,
    client: &mut Client,
    refresh: Duration,
    status: StatusReply,
) -> Result<(), Failure> {
    let mut view = View {
        status,
        last_action: None,
    };
    let mut next = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next {
            view.status = client.call(&Request::Status, false)?;
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
            KeyCode::Char('p') => match view.status.state {
                State::Paused => Request::Resume { group: None },
                _ => Request::Pause { group: None },
            },
            _ => continue,
        };
        let name = command_name(&request);
        let (_, reply) = client.request::<DoneReply>(&request)?;
        view.last_action = Some(match reply.map_err(crate::refusal) {
            Ok(_) => format!("{name}: ok"),
            Err(Failure::Refused(m) | Failure::Invalid(m) | Failure::Fault(m)) => {
                format!("{name}: {m}")
            }
            Err(failure @ (Failure::Unreachable(_) | Failure::NoAnswer(_))) => return Err(failure),
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
    let joints = s.positions.len() as u16;
    let estop = estop_line(s.estop.as_ref());
    let faults = s.faults.len() as u16 + u16::from(estop.is_some());
    let events = recent_events(s);
    let faults = faults.max(1) + events.len() as u16;
    let groups = group_lines(&s.groups);
    let buses = bus_lines(s.buses.as_deref().unwrap_or_default());
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

fn state_color(state: State) -> Color {
    match state {
        State::Fault | State::EStop => Color::Red,
        State::Playing | State::Approaching | State::Streaming => Color::Green,
        State::Paused | State::Stopping | State::Starved => Color::Yellow,
        _ => Color::Cyan,
    }
}

fn header(frame: &mut Frame, area: Rect, s: &StatusReply) {
    let state = s.state;
    let line = Line::from(vec![
        Span::raw("state "),
        Span::styled(
            state.as_str(),
            Style::new()
                .fg(state_color(state))
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "   backend {} at {} Hz   tick {}",
            s.backend.as_str(),
            s.rate_hz,
            s.tick
        )),
    ]);
    frame.render_widget(
        Paragraph::new(line).block(Block::bordered().title(" motiond ")),
        area,
    );
}

/// The robot's motion as a gauge, then one line per joint group.
fn progress(frame: &mut Frame, area: Rect, s: &StatusReply, groups: &[String]) {
    let [area, group_area] =
        Layout::vertical([Constraint::Length(3), Constraint::Min(0)]).areas(area);
    if !groups.is_empty() {
        let lines: Vec<Line> = groups.iter().map(|g| Line::from(g.as_str())).collect();
        frame.render_widget(Paragraph::new(lines), group_area);
    }
    let block = Block::bordered().title(" motion ");
    let p = &s.playback;
    let Some(motion) = &p.motion else {
        let text = match &s.last_outcome {
            Some(last) => format!(
                "no motion (last: {} {})",
                last.motion,
                last.outcome.as_str()
            ),
            None => "no motion".to_string(),
        };
        frame.render_widget(Paragraph::new(text).block(block), area);
        return;
    };
    let ratio = p.progress.unwrap_or(0.0).clamp(0.0, 1.0);
    let time = p.time_s.unwrap_or(0.0);
    let duration = p.duration_s.map_or(String::new(), |d| format!(" / {d:.2}"));
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

fn joint_table(frame: &mut Frame, area: Rect, s: &StatusReply) {
    let name_width = s
        .positions
        .keys()
        .map(|j| j.chars().count())
        .max()
        .unwrap_or(5)
        .max(5) as u16
        + 1;
    let bar = bar_width(area.width, name_width);
    let rows: Vec<Row> = s
        .positions
        .iter()
        .map(|(joint, &p)| {
            let c = s.commanded.get(joint).copied().unwrap_or(p);
            let e = s.following_error.get(joint).copied().unwrap_or(0.0);
            let [lower, upper] = s.position_limits.get(joint).copied().unwrap_or_default();
            let limits = (lower, upper);
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

fn latency(frame: &mut Frame, area: Rect, s: &StatusReply) {
    let l = &s.latency_us;
    let text = format!(
        "wake-up latency µs: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}    overruns {}    limit violations {}",
        l.p50, l.p99, l.p999, l.max, s.overruns, s.limit_violations
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
fn recent_events(s: &StatusReply) -> Vec<(String, bool)> {
    const SHOWN: usize = 2;
    let events = s.events.as_deref().unwrap_or_default();
    events
        .iter()
        .skip(events.len().saturating_sub(SHOWN))
        .map(|e| {
            let alarm = matches!(
                e.kind,
                EventKind::Fault | EventKind::EStop | EventKind::Guard
            );
            (format!("{:>6.1} s ago  {}", e.ago_s, e.text), alarm)
        })
        .collect()
}

/// The faults, and the E-stop first when one is watched; then the newest events.
fn fault_list(
    frame: &mut Frame,
    area: Rect,
    s: &StatusReply,
    estop: Option<(String, bool)>,
    events: Vec<(String, bool)>,
) {
    let faults = &s.faults;
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
