//! Sampling a link's pose (`LinkPosition`) between frames: straight lines for the position,
//! slerp for the orientation; and a point (`ZMP`) on straight lines.

use crate::diag::Num;
use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion, Vector3};

use crate::motion::seq::{MultiSe3Seq, Vector3Seq};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PoseError {
    #[error("the LinkPosition component has {num_parts} parts; part {part} does not exist")]
    NoPart { part: usize, num_parts: usize },
    #[error("the LinkPosition component has no frames")]
    Empty,
    #[error("the playback speed must be a positive number, not {}", Num(*.0))]
    Speed(f64),
}

/// One link's poses over time.
#[derive(Debug, Clone)]
pub struct PoseTrack {
    /// Seconds from the first frame, as played.
    times: Vec<f64>,
    poses: Vec<Isometry3<f64>>,
}

impl PoseTrack {
    /// Part `part` (0 is the root link) of a LinkPosition component, played at `speed`.
    pub fn new(seq: &MultiSe3Seq, part: usize, speed: f64) -> Result<PoseTrack, PoseError> {
        if !(speed > 0.0 && speed.is_finite()) {
            return Err(PoseError::Speed(speed));
        }
        if part >= seq.num_parts {
            return Err(PoseError::NoPart {
                part,
                num_parts: seq.num_parts,
            });
        }
        let rows = seq.rows();
        if rows == 0 {
            return Err(PoseError::Empty);
        }
        let first = seq.timing.time(0);
        let times = (0..rows)
            .map(|i| (seq.timing.time(i) - first) / speed)
            .collect();
        let poses = (0..rows)
            .filter_map(|i| seq.poses.get(i * seq.num_parts + part).copied())
            .collect();
        Ok(PoseTrack { times, poses })
    }

    pub fn duration_s(&self) -> f64 {
        self.times.last().copied().unwrap_or(0.0)
    }

    /// The pose at `t` seconds (held before the first and after the last frame).
    pub fn pose_at(&self, t: f64) -> Isometry3<f64> {
        let n = self.poses.len().min(self.times.len());
        let i = self.times[..n].partition_point(|&s| s <= t);
        if i == 0 || n < 2 {
            return self
                .poses
                .first()
                .copied()
                .unwrap_or_else(Isometry3::identity);
        }
        if i >= n {
            return self.poses[n - 1];
        }
        let (t0, t1) = (self.times[i - 1], self.times[i]);
        let f = (t - t0) / (t1 - t0);
        let (a, b) = (&self.poses[i - 1], &self.poses[i]);
        let position = a.translation.vector.lerp(&b.translation.vector, f);
        Isometry3::from_parts(
            Translation3::from(position),
            slerp(&a.rotation, &b.rotation, f),
        )
    }
}

/// A point's positions over time (a `ZMP` component), straight lines between frames.
#[derive(Debug, Clone)]
pub struct PointTrack {
    /// Seconds from the first frame, as played.
    times: Vec<f64>,
    points: Vec<Vector3<f64>>,
}

impl PointTrack {
    /// A Vector3Seq played at `speed`.
    pub fn new(seq: &Vector3Seq, speed: f64) -> Result<PointTrack, PoseError> {
        if !(speed > 0.0 && speed.is_finite()) {
            return Err(PoseError::Speed(speed));
        }
        if seq.values.is_empty() {
            return Err(PoseError::Empty);
        }
        let first = seq.timing.time(0);
        let times = (0..seq.values.len())
            .map(|i| (seq.timing.time(i) - first) / speed)
            .collect();
        Ok(PointTrack {
            times,
            points: seq.values.clone(),
        })
    }

    /// The point at `t` seconds (held before the first and after the last frame).
    pub fn point_at(&self, t: f64) -> Vector3<f64> {
        let n = self.points.len().min(self.times.len());
        let i = self.times[..n].partition_point(|&s| s <= t);
        if i == 0 || n < 2 {
            return self.points.first().copied().unwrap_or_else(Vector3::zeros);
        }
        if i >= n {
            return self.points[n - 1];
        }
        let (t0, t1) = (self.times[i - 1], self.times[i]);
        self.points[i - 1].lerp(&self.points[i], (t - t0) / (t1 - t0))
    }
}

/// Shortest-path spherical interpolation; normalised lerp where the two are nearly equal (slerp's
/// division by sin θ loses precision there).
pub fn slerp(a: &UnitQuaternion<f64>, b: &UnitQuaternion<f64>, f: f64) -> UnitQuaternion<f64> {
    let (qa, mut qb) = (a.into_inner(), b.into_inner());
    let mut dot = qa.dot(&qb);
    // q and -q are the same rotation: take the nearer one.
    if dot < 0.0 {
        qb = -qb;
        dot = -dot;
    }
    if dot > 0.9995 {
        return UnitQuaternion::from_quaternion(qa.lerp(&qb, f));
    }
    let theta = dot.min(1.0).acos();
    let s = theta.sin();
    let wa = ((1.0 - f) * theta).sin() / s;
    let wb = (f * theta).sin() / s;
    UnitQuaternion::from_quaternion(Quaternion::from(qa.coords * wa + qb.coords * wb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::motion::seq::{Se3Format, Timing};
    use nalgebra::Vector3;

    #[test]
    fn interpolates_position_linearly_and_rotation_by_slerp() {
        let a = Isometry3::identity();
        let b = Isometry3::new(Vector3::new(1.0, 0.0, 0.0), Vector3::new(0.0, 0.0, 2.0));
        let seq = MultiSe3Seq {
            num_parts: 1,
            timing: Timing::Fixed { frame_rate: 1.0 },
            format: Se3Format::XyzQwQxQyQz,
            poses: vec![a, b],
        };
        let track = PoseTrack::new(&seq, 0, 1.0).unwrap();
        let mid = track.pose_at(0.25);
        assert!((mid.translation.vector.x - 0.25).abs() < 1e-12);
        assert!((mid.rotation.angle() - 0.5).abs() < 1e-12);
        assert_eq!(track.pose_at(5.0), b);
        assert_eq!(track.pose_at(-1.0), a);
        assert!(PoseTrack::new(&seq, 1, 1.0).is_err());
    }

    #[test]
    fn points_move_on_straight_lines_at_the_played_speed() {
        let seq = Vector3Seq {
            timing: Timing::Timed {
                times: vec![1.0, 2.0, 4.0],
                frame_rate: None,
            },
            root_relative: false,
            values: vec![Vector3::zeros(), Vector3::new(1.0, 2.0, 0.0), Vector3::x()],
        };
        let track = PointTrack::new(&seq, 2.0).unwrap();
        assert_eq!(track.point_at(0.25), Vector3::new(0.5, 1.0, 0.0));
        assert_eq!(track.point_at(1.0), Vector3::new(1.0, 1.0, 0.0));
        assert_eq!(track.point_at(-1.0), Vector3::zeros());
        assert_eq!(track.point_at(9.0), Vector3::x());
        assert!(PointTrack::new(&seq, 0.0).is_err());
    }

    #[test]
    fn slerp_takes_the_short_way_round() {
        let a = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), 3.0);
        let b = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), -3.0);
        // 3 rad and -3 rad are 0.283 rad apart through ±π.
        let mid = slerp(&a, &b, 0.5);
        assert!((mid.angle() - std::f64::consts::PI).abs() < 1e-9);
    }
}
