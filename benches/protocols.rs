//! Per-tick cost of encoding and writing 12 joints' commands, per protocol: unit conversion,
//! encoding into preallocated frames or buffers, and the write into an in-memory sink (a CAN
//! frame sink, or `io::sink()` for the serial byte streams). `cargo bench --bench protocols`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

use std::hint::black_box;
use std::io::Write;

use criterion::{Criterion, criterion_group, criterion_main};
use motiond::backend::BackendError;
use motiond::backend::bus::settings::Units;
use motiond::backend::frame::CanFrame;
use motiond::backend::transport::FrameIo;
use motiond::backend::transport::slcan::codec as slcan;
use motiond::backend::{cia402, dynamixel as dxl, mit, odrive};
use motiond::trajectory::Setpoint;

const JOINTS: usize = 12;

/// Counts frames, as a transport that never blocks.
struct Sink(u64);

impl FrameIo for Sink {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        self.0 += u64::from(black_box(frame).id);
        Ok(())
    }
    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        Ok(None)
    }
}

/// SLCAN lines into a byte sink.
struct SlcanSink(std::io::Sink);

impl FrameIo for SlcanSink {
    fn send(&mut self, frame: &CanFrame) -> Result<(), BackendError> {
        let mut line = [0u8; slcan::MAX_LINE];
        let n = slcan::encode(frame, &mut line);
        let _ = self.0.write(&line[..n]);
        Ok(())
    }
    fn recv(&mut self) -> Result<Option<CanFrame>, BackendError> {
        Ok(None)
    }
}

fn setpoints(tick: u64) -> [Setpoint; JOINTS] {
    std::array::from_fn(|j| Setpoint {
        position: 0.001 * tick as f64 + j as f64 * 0.1,
        velocity: 0.5,
        acceleration: 1.0,
    })
}

const COUNTS: Units = Units {
    scale: 4096.0 / std::f64::consts::TAU,
    offset: 2048.0,
};

fn cia402_tick(io: &mut dyn FrameIo, sps: &[Setpoint]) {
    for (j, sp) in sps.iter().enumerate() {
        let target = COUNTS.to_drive(sp.position).round() as i32;
        let _ = io.send(&cia402::rpdo1(
            j as u8 + 1,
            cia402::CW_ENABLE_OPERATION,
            target,
        ));
    }
    let _ = io.send(&cia402::sync());
}

fn odrive_tick(io: &mut dyn FrameIo, sps: &[Setpoint]) {
    let turns = Units {
        scale: 1.0 / std::f64::consts::TAU,
        offset: 0.0,
    };
    for (j, sp) in sps.iter().enumerate() {
        let f = odrive::set_input_pos(
            j as u8 + 1,
            turns.to_drive(sp.position) as f32,
            turns.rate_to_drive(sp.velocity),
            0.0,
        );
        let _ = io.send(&f);
    }
}

fn mit_tick(io: &mut dyn FrameIo, sps: &[Setpoint]) {
    let r = mit::Ranges::MINI_CHEETAH;
    for (j, sp) in sps.iter().enumerate() {
        let c = mit::Command {
            p: sp.position as f32,
            v: sp.velocity as f32,
            kp: 50.0,
            kd: 1.0,
            t: 0.0,
        };
        let _ = io.send(&CanFrame::new(j as u32 + 1, &mit::pack(&c, &r)));
    }
}

fn protocols(c: &mut Criterion) {
    let mut g = c.benchmark_group("tick_12_joints");
    let mut tick = 0u64;
    let mut sink = Sink(0);
    g.bench_function("cia402_rpdo_sync", |b| {
        b.iter(|| {
            tick += 1;
            cia402_tick(&mut sink, &setpoints(tick))
        })
    });
    g.bench_function("odrive_set_input_pos", |b| {
        b.iter(|| {
            tick += 1;
            odrive_tick(&mut sink, &setpoints(tick))
        })
    });
    g.bench_function("mit_command", |b| {
        b.iter(|| {
            tick += 1;
            mit_tick(&mut sink, &setpoints(tick))
        })
    });
    let mut slcan = SlcanSink(std::io::sink());
    g.bench_function("cia402_over_slcan_lines", |b| {
        b.iter(|| {
            tick += 1;
            cia402_tick(&mut slcan, &setpoints(tick))
        })
    });
    let mut buf = vec![0u8; 2 * dxl::sync_write_len(JOINTS, 4) + 64];
    let ids: [u8; JOINTS] = std::array::from_fn(|j| j as u8 + 1);
    let mut out = std::io::sink();
    g.bench_function("dynamixel_sync_write_and_sync_read", |b| {
        b.iter(|| {
            tick += 1;
            let sps = setpoints(tick);
            let mut p = dxl::sync_write_begin(&mut buf, dxl::ADDR_GOAL_POSITION, 4);
            for (id, sp) in ids.iter().zip(&sps) {
                p.push(*id);
                p.push_u32(COUNTS.to_drive(sp.position).round() as i32 as u32);
            }
            let n = p.finish().map_or(0, |s| s.len());
            let _ = out.write(black_box(&buf[..n]));
            let r = dxl::sync_read(&mut buf, dxl::ADDR_PRESENT_POSITION, 4, &ids)
                .map_or(0, |s| s.len());
            let _ = out.write(black_box(&buf[..r]));
        })
    });
    g.finish();
    black_box(sink.0);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = protocols
}
criterion_main!(benches);
