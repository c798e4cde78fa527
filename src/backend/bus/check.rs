//! What depends on the robot model, checked when the backend opens: every commanded DOF is on a
//! bus, each drive's family can follow its actuator, and the joint limits fit the drive's units
//! and ranges.

use crate::backend::bus::check_mode;
use crate::backend::bus::settings::{BusSettings, Problem, Problems};
use crate::trajectory::JointSet;

/// Every problem of `buses` against `joints`, each at its key (`buses[i].joints.<dof>`).
pub fn check_joints(buses: &[BusSettings], joints: &JointSet) -> Vec<Problem> {
    let mut p = Problems::default();
    let mut driven = vec![false; joints.len()];
    for (b, bus) in buses.iter().enumerate() {
        for j in &bus.joints {
            let key = format!("buses[{b}].joints.{}", j.dof);
            let Some(index) = joints.index_of(&j.dof) else {
                p.add(key, format!("`{}` is not a commanded DOF", j.dof));
                continue;
            };
            driven[index] = true;
            let Some(dof) = joints.dofs.get(index) else {
                continue;
            };
            check_mode(j.family, j, dof, &key, &mut p);
            let pos = dof.limits.position;
            let (a, b2) = (j.units.to_drive(pos.lower), j.units.to_drive(pos.upper));
            let (lo, hi) = (a.min(b2), a.max(b2));
            let (min, max) = j.family.position_range(j, dof.actuator);
            if !(lo.is_finite() && hi.is_finite() && lo >= min && hi <= max) {
                p.add(
                    key.clone(),
                    format!(
                        "the position limits [{}, {}] of `{}` map to drive positions [{lo:.1}, \
                         {hi:.1}], outside what the {} drive accepts; check counts_per_unit, \
                         gear_ratio and zero_offset",
                        pos.lower,
                        pos.upper,
                        j.dof,
                        j.family.name()
                    ),
                );
            }
            j.family.check_range(j, dof, &key, &mut p);
            j.family
                .check_commanded(j, bus, dof, (&format!("buses[{b}]"), &key), &mut p);
        }
    }
    for (dof, driven) in joints.dofs.iter().zip(&driven) {
        if !driven {
            p.add(
                "buses",
                format!("commanded DOF `{}` is on no bus", dof.name),
            );
        }
    }
    p.0
}
