//! `motionctl`: the control-socket client (issue 6).

fn main() -> std::process::ExitCode {
    eprintln!("motionctl: not yet available");
    std::process::ExitCode::from(2)
}
