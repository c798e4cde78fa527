//! The `inspect skel` JSON of ../shared/docs/inspect-json.md.

use serde_json::{Value, json};

use crate::robot::world::{Limits, World};

/// An unbounded side is `null`.
fn bound(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

fn limits(l: Limits) -> Value {
    json!([bound(l.lower), bound(l.upper)])
}

pub(super) fn inspect(world: &World) -> Value {
    let skeletons: Vec<Value> = world
        .skeletons
        .iter()
        .map(|s| {
            let joints: Vec<Value> = s
                .joints
                .iter()
                .map(|j| {
                    let mut v = json!({
                        "name": j.name,
                        "type": j.kind.as_str(),
                        "actuator": j.actuator.as_str(),
                        "parent": j.parent,
                        "child": j.child,
                        "dofs": j.dofs.clone().collect::<Vec<usize>>(),
                    });
                    // Only formats that have them (URDF) add these, so SKEL output is unchanged.
                    if let Some(m) = &j.mimic {
                        v["mimic"] = json!({
                            "joint": m.joint,
                            "multiplier": m.multiplier,
                            "offset": m.offset,
                        });
                    }
                    if let Some(c) = j.command {
                        v["command_interface"] = json!(c.as_str());
                    }
                    v
                })
                .collect();
            let dofs: Vec<Value> = s
                .dofs
                .iter()
                .enumerate()
                .map(|(index, d)| {
                    json!({
                        "index": index,
                        "name": d.name,
                        "joint": s.joints.get(d.joint).map(|j| j.name.as_str()),
                        "position": limits(d.position),
                        "velocity": limits(d.velocity),
                        "acceleration": limits(d.acceleration),
                        "effort": limits(d.effort),
                        "initial_position": d.initial_position,
                        "initial_velocity": d.initial_velocity,
                    })
                })
                .collect();
            json!({ "name": s.name, "joints": joints, "dofs": dofs })
        })
        .collect();
    json!({ "skeletons": skeletons })
}
