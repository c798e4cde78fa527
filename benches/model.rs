//! Robot model reading speed: a generated 100-DOF URDF (as many DOFs as tiago_dual: four
//! branches of 25 joints; visuals, collisions and inertials on every
//! link, a ros2_control block), iCubGenova04 from the corpus (213 joints, 168 KB), and a
//! generated 100-joint XODE document. The XML parse alone is measured beside each, so the model
//! building reads as a ratio within one run. Reads the corpus from `$MOTIOND_CORPUS` or
//! ../shared/corpus.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly where its setup breaks"
)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use motiond::robot::{self, Options};

fn corpus() -> PathBuf {
    std::env::var_os("MOTIOND_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"))
}

/// A chain-and-branch robot with `dofs` revolute joints and a fixed joint after every fourth.
fn urdf(dofs: usize) -> String {
    let mut s = String::from("<?xml version=\"1.0\"?>\n<robot name=\"big\">\n");
    s.push_str("  <material name=\"grey\"><color rgba=\"0.5 0.5 0.5 1\"/></material>\n");
    let link = |s: &mut String, name: &str| {
        s.push_str(&format!(
            "  <link name=\"{name}\">\n    <inertial><origin xyz=\"0 0 0.05\" rpy=\"0 0 0\"/>\
             <mass value=\"1.2\"/><inertia ixx=\"0.01\" ixy=\"0\" ixz=\"0\" iyy=\"0.01\" \
             iyz=\"0\" izz=\"0.005\"/></inertial>\n    <visual><origin xyz=\"0 0 0.05\" \
             rpy=\"0 0 0\"/><geometry><mesh filename=\"package://big/meshes/{name}.stl\" \
             scale=\"1 1 1\"/></geometry><material name=\"grey\"/></visual>\n    <collision>\
             <origin xyz=\"0 0 0.05\" rpy=\"0 0 0\"/><geometry><cylinder radius=\"0.04\" \
             length=\"0.1\"/></geometry></collision>\n  </link>\n"
        ))
    };
    link(&mut s, "base_link");
    let mut control = String::from("  <ros2_control name=\"big\" type=\"system\">\n");
    let mut parent = "base_link".to_string();
    let mut fixed = 0;
    for i in 0..dofs {
        // Four branches from the base, like two arms, a torso and a head.
        if i % 25 == 0 {
            parent = "base_link".to_string();
        }
        let child = format!("link_{i}");
        link(&mut s, &child);
        s.push_str(&format!(
            "  <joint name=\"joint_{i}\" type=\"revolute\">\n    <parent link=\"{parent}\"/>\
             <child link=\"{child}\"/>\n    <origin xyz=\"0 0 0.1\" rpy=\"0 0 1.5708\"/>\
             <axis xyz=\"0 0 1\"/>\n    <limit lower=\"-2.5\" upper=\"2.5\" effort=\"40\" \
             velocity=\"2\"/>\n    <dynamics damping=\"0.1\" friction=\"0.05\"/>\n  </joint>\n"
        ));
        control.push_str(&format!(
            "    <joint name=\"joint_{i}\"><command_interface name=\"position\"/>\
             <state_interface name=\"position\"/><state_interface name=\"velocity\"/></joint>\n"
        ));
        parent = child;
        if i % 4 == 3 {
            let frame = format!("frame_{fixed}");
            link(&mut s, &frame);
            s.push_str(&format!(
                "  <joint name=\"fixed_{fixed}\" type=\"fixed\"><parent link=\"{parent}\"/>\
                 <child link=\"{frame}\"/><origin xyz=\"0 0 0.02\" rpy=\"0 0 0\"/></joint>\n"
            ));
            fixed += 1;
        }
    }
    control.push_str("  </ros2_control>\n");
    s.push_str(&control);
    s.push_str("</robot>\n");
    s
}

fn xode(joints: usize) -> String {
    let mut s = String::from("<xode version=\"1.0r23\"><world name=\"w\"><space>\n");
    for i in 0..=joints {
        s.push_str(&format!(
            "<body name=\"b{i}\"><transform><position x=\"0\" y=\"0\" z=\"{i}\"/></transform>\
             <mass><mass_shape density=\"1\"><sphere radius=\"0.1\"/></mass_shape></mass></body>\n"
        ));
    }
    for i in 0..joints {
        s.push_str(&format!(
            "<joint name=\"j{i}\"><link1 body=\"b{i}\"/><link2 body=\"b{}\"/><hinge>\
             <anchor x=\"0\" y=\"0\" z=\"{i}\"/><axis x=\"1\" y=\"0\" z=\"0\" LoStop=\"-1\" \
             HiStop=\"1\"/></hinge></joint>\n",
            i + 1
        ));
    }
    s.push_str("</space></world></xode>\n");
    s
}

fn read(c: &mut Criterion) {
    let icub = corpus().join("urdf/files/icub-models/iCub/robots/iCubGenova04/model.urdf");
    let icub_text = std::fs::read_to_string(&icub)
        .unwrap_or_else(|e| panic!("{}: {e} (set MOTIOND_CORPUS)", icub.display()));
    let cases = [
        ("urdf_100dof", urdf(100), Path::new("big.urdf")),
        ("icub_urdf", icub_text, icub.as_path()),
        ("xode_100", xode(100), Path::new("big.xode")),
    ];
    let mut group = c.benchmark_group("model_read");
    for (name, text, path) in &cases {
        let world = robot::parse(text, path, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(world.skeletons[0].dofs.len() >= 38, "{name}");
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(*name, |b| {
            b.iter(|| {
                robot::parse(black_box(text), path, &Options::default())
                    .map(|w| w.skeletons[0].dofs.len())
            })
        });
        group.bench_function(format!("{name}_xml_only"), |b| {
            b.iter(|| roxmltree::Document::parse(black_box(text)).map(|d| d.descendants().count()))
        });
    }
    group.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
