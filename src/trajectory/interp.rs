//! Knot slopes for the cubic Hermite form, and the cubic of one segment.
//!
//! Values are row-major (`rows × cols`), so every pass walks memory in order whatever the number of
//! columns. Both pchip and the natural spline are stored as knot values plus knot slopes: a cubic
//! is fully determined by its end values and end slopes, and this keeps a trajectory at three
//! numbers per source sample (value, slope, shared time) instead of four coefficients.

/// SciPy's `PchipInterpolator` slopes (Fritsch–Carlson with the weighted harmonic mean and SciPy's
/// three-point end conditions): the interpolant never leaves the range of a segment's end values.
pub fn pchip_slopes(times: &[f64], values: &[f64], cols: usize) -> Vec<f64> {
    let rows = times.len();
    let mut slopes = vec![0.0; values.len()];
    if rows < 2 || cols == 0 {
        return slopes;
    }
    if rows == 2 {
        let h = times[1] - times[0];
        for c in 0..cols {
            let d = (values[cols + c] - values[c]) / h;
            slopes[c] = d;
            slopes[cols + c] = d;
        }
        return slopes;
    }
    for k in 1..rows - 1 {
        let h0 = times[k] - times[k - 1];
        let h1 = times[k + 1] - times[k];
        let (inv0, inv1) = (1.0 / h0, 1.0 / h1);
        let w1 = 2.0 * h1 + h0;
        let w2 = h1 + 2.0 * h0;
        let (prev, rest) = values[(k - 1) * cols..].split_at(cols);
        let (here, next) = rest.split_at(cols);
        let out = &mut slopes[k * cols..(k + 1) * cols];
        for (((o, &p), &x), &n) in out.iter_mut().zip(prev).zip(here).zip(next) {
            let d0 = (x - p) * inv0;
            let d1 = (n - x) * inv1;
            // (w1 + w2) / (w1 / d0 + w2 / d1), with one division instead of three.
            *o = if d0 * d1 > 0.0 {
                (w1 + w2) * d0 * d1 / (w1 * d1 + w2 * d0)
            } else {
                0.0
            };
        }
    }
    let last = rows - 1;
    for c in 0..cols {
        let at = |r: usize| values[r * cols + c];
        slopes[c] = pchip_end(
            times[1] - times[0],
            times[2] - times[1],
            (at(1) - at(0)) / (times[1] - times[0]),
            (at(2) - at(1)) / (times[2] - times[1]),
        );
        slopes[last * cols + c] = pchip_end(
            times[last] - times[last - 1],
            times[last - 1] - times[last - 2],
            (at(last) - at(last - 1)) / (times[last] - times[last - 1]),
            (at(last - 1) - at(last - 2)) / (times[last - 1] - times[last - 2]),
        );
    }
    slopes
}

/// SciPy's `_edge_case`: a one-sided three-point estimate, kept monotone.
fn pchip_end(h0: f64, h1: f64, d0: f64, d1: f64) -> f64 {
    let d = ((2.0 * h0 + h1) * d0 - h0 * d1) / (h0 + h1);
    if sign(d) != sign(d0) {
        0.0
    } else if sign(d0) != sign(d1) && d.abs() > 3.0 * d0.abs() {
        3.0 * d0
    } else {
        d
    }
}

/// NumPy's `sign`: zero for zero (Rust's `signum` gives ±1 there).
fn sign(x: f64) -> f64 {
    if x == 0.0 { 0.0 } else { x.signum() }
}

/// Knot slopes of the C2 natural cubic spline (zero second derivative at both ends).
pub fn natural_spline_slopes(times: &[f64], values: &[f64], cols: usize) -> Vec<f64> {
    let rows = times.len();
    if rows < 3 || cols == 0 {
        // Two knots: the natural spline is the straight line through them.
        return linear_slopes(times, values, cols);
    }
    // Second derivatives M from the tridiagonal system
    // h[i-1] M[i-1] + 2 (h[i-1] + h[i]) M[i] + h[i] M[i+1] = 6 (d[i] - d[i-1]), M[0] = M[n-1] = 0,
    // solved by the Thomas algorithm. The matrix depends on the times only, so its factors are
    // shared by all columns.
    let mut m = vec![0.0; values.len()];
    let mut upper = vec![0.0; rows];
    for i in 1..rows - 1 {
        let h0 = times[i] - times[i - 1];
        let h1 = times[i + 1] - times[i];
        let denom = 2.0 * (h0 + h1) - h0 * upper[i - 1];
        upper[i] = h1 / denom;
        for c in 0..cols {
            let d0 = (values[i * cols + c] - values[(i - 1) * cols + c]) / h0;
            let d1 = (values[(i + 1) * cols + c] - values[i * cols + c]) / h1;
            let rhs = 6.0 * (d1 - d0) - h0 * m[(i - 1) * cols + c];
            m[i * cols + c] = rhs / denom;
        }
    }
    for i in (1..rows - 1).rev() {
        for c in 0..cols {
            m[i * cols + c] -= upper[i] * m[(i + 1) * cols + c];
        }
    }
    let mut slopes = vec![0.0; values.len()];
    for i in 0..rows - 1 {
        let h = times[i + 1] - times[i];
        for c in 0..cols {
            let d = (values[(i + 1) * cols + c] - values[i * cols + c]) / h;
            slopes[i * cols + c] = d - h * (2.0 * m[i * cols + c] + m[(i + 1) * cols + c]) / 6.0;
        }
    }
    let last = rows - 1;
    let h = times[last] - times[last - 1];
    for c in 0..cols {
        let d = (values[last * cols + c] - values[(last - 1) * cols + c]) / h;
        slopes[last * cols + c] =
            d + h * (m[(last - 1) * cols + c] + 2.0 * m[last * cols + c]) / 6.0;
    }
    slopes
}

/// Secant slopes, for a cubic Hermite with straight segments (used for two-knot splines).
fn linear_slopes(times: &[f64], values: &[f64], cols: usize) -> Vec<f64> {
    let mut slopes = vec![0.0; values.len()];
    if times.len() == 2 {
        let h = times[1] - times[0];
        for c in 0..cols {
            let d = (values[cols + c] - values[c]) / h;
            slopes[c] = d;
            slopes[cols + c] = d;
        }
    }
    slopes
}

/// One segment's cubic in powers of the time since its start:
/// `p(t) = c0 + c1 t + c2 t² + c3 t³`.
#[derive(Debug, Clone, Copy)]
pub struct Cubic {
    pub c0: f64,
    pub c1: f64,
    pub c2: f64,
    pub c3: f64,
}

impl Cubic {
    /// The Hermite cubic with values `y0`, `y1` and slopes `m0`, `m1` over a segment of length
    /// `h`, given `inv = 1 / h` (one division shared by every column of a segment).
    #[inline(always)]
    pub fn hermite(y0: f64, y1: f64, m0: f64, m1: f64, inv: f64) -> Cubic {
        let d = (y1 - y0) * inv;
        Cubic {
            c0: y0,
            c1: m0,
            c2: (3.0 * d - 2.0 * m0 - m1) * inv,
            c3: (m0 + m1 - 2.0 * d) * inv * inv,
        }
    }

    #[inline(always)]
    pub fn position(&self, t: f64) -> f64 {
        self.c0 + t * (self.c1 + t * (self.c2 + t * self.c3))
    }

    #[inline(always)]
    pub fn velocity(&self, t: f64) -> f64 {
        self.c1 + t * (2.0 * self.c2 + 3.0 * t * self.c3)
    }

    #[inline(always)]
    pub fn acceleration(&self, t: f64) -> f64 {
        2.0 * self.c2 + 6.0 * self.c3 * t
    }

    /// Position, velocity and acceleration ranges over `[0, h]`. Where the velocity keeps one
    /// sign (every pchip segment, most others) the position's extremes are its end values, and
    /// no roots need finding.
    #[inline]
    pub fn ranges(&self, h: f64) -> [Extremes; 3] {
        let velocity = self.velocity_range(h);
        let position = if velocity.min >= 0.0 || velocity.max <= 0.0 {
            let mut e = Extremes::at(0.0, self.c0);
            e.include(h, self.position(h));
            e
        } else {
            self.position_range(h)
        };
        [position, velocity, self.acceleration_range(h)]
    }

    /// Smallest and largest position over `[0, h]`, with the times they occur: at the ends or
    /// where the velocity (a quadratic) vanishes inside.
    pub fn position_range(&self, h: f64) -> Extremes {
        let mut e = Extremes::at(0.0, self.position(0.0));
        e.include(h, self.position(h));
        // Roots of c1 + 2 c2 t + 3 c3 t².
        let (a, b, c) = (3.0 * self.c3, 2.0 * self.c2, self.c1);
        if a.abs() > f64::EPSILON * (b.abs() + c.abs()) {
            let disc = b * b - 4.0 * a * c;
            if disc >= 0.0 {
                let sq = disc.sqrt();
                // Numerically stable pair of roots.
                let q = -0.5 * (b + b.signum() * sq);
                for t in [q / a, if q != 0.0 { c / q } else { f64::NAN }] {
                    if t > 0.0 && t < h {
                        e.include(t, self.position(t));
                    }
                }
            }
        } else if b != 0.0 {
            let t = -c / b;
            if t > 0.0 && t < h {
                e.include(t, self.position(t));
            }
        }
        e
    }

    /// Smallest and largest velocity over `[0, h]`: at the ends or at the vertex of the parabola.
    pub fn velocity_range(&self, h: f64) -> Extremes {
        let mut e = Extremes::at(0.0, self.velocity(0.0));
        e.include(h, self.velocity(h));
        // The vertex -c2 / (3 c3), tested for lying inside (0, h) before dividing: most
        // segments have none.
        let (num, den) = (-self.c2, 3.0 * self.c3);
        if num * den > 0.0 && num.abs() < h * den.abs() {
            let t = num / den;
            e.include(t, self.velocity(t));
        }
        e
    }

    /// Smallest and largest acceleration over `[0, h]` (linear: at the ends).
    pub fn acceleration_range(&self, h: f64) -> Extremes {
        let mut e = Extremes::at(0.0, self.acceleration(0.0));
        e.include(h, self.acceleration(h));
        e
    }
}

/// The smallest and largest value of a quantity over an interval, and where they occur
/// (time since the interval's start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extremes {
    pub min: f64,
    pub min_at: f64,
    pub max: f64,
    pub max_at: f64,
}

impl Extremes {
    pub fn at(t: f64, v: f64) -> Extremes {
        Extremes {
            min: v,
            min_at: t,
            max: v,
            max_at: t,
        }
    }

    pub fn include(&mut self, t: f64, v: f64) {
        if v < self.min {
            self.min = v;
            self.min_at = t;
        }
        if v > self.max {
            self.max = v;
            self.max_at = t;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pchip_matches_scipy_on_a_small_example() {
        // scipy.interpolate.PchipInterpolator([0, 1, 3, 4], [0, 1, 1, 3]).derivative()(x) at x.
        let times = [0.0, 1.0, 3.0, 4.0];
        let values = [0.0, 1.0, 1.0, 3.0];
        let s = pchip_slopes(&times, &values, 1);
        // Interior: a flat secant on either side gives 0; ends by the three-point rule.
        assert_eq!(s[1], 0.0);
        assert_eq!(s[2], 0.0);
        // ((2*1 + 2)*1 - 1*0) / 3 = 4/3, same sign as d0, not > 3*d0.
        assert!((s[0] - 4.0 / 3.0).abs() < 1e-15);
        // h0 = 1, h1 = 2, d0 = 2, d1 = 0: ((2 + 2)*2 - 0)/3 = 8/3.
        assert!((s[3] - 8.0 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn pchip_interior_is_the_weighted_harmonic_mean() {
        let times = [0.0, 1.0, 3.0];
        let values = [0.0, 1.0, 5.0];
        let s = pchip_slopes(&times, &values, 1);
        let (h0, h1, d0, d1) = (1.0, 2.0, 1.0, 2.0);
        let (w1, w2) = (2.0 * h1 + h0, h1 + 2.0 * h0);
        assert!((s[1] - (w1 + w2) / (w1 / d0 + w2 / d1)).abs() < 1e-15);
    }

    #[test]
    fn natural_spline_reproduces_a_cubic_interior_and_has_zero_end_curvature() {
        let times = [0.0, 0.5, 1.5, 2.0, 3.0];
        let values: Vec<f64> = times.iter().map(|t: &f64| t.sin()).collect();
        let s = natural_spline_slopes(&times, &values, 1);
        for i in 0..times.len() - 1 {
            let h = times[i + 1] - times[i];
            let c = Cubic::hermite(values[i], values[i + 1], s[i], s[i + 1], 1.0 / h);
            if i == 0 {
                assert!(c.acceleration(0.0).abs() < 1e-12);
            }
            if i == times.len() - 2 {
                assert!(c.acceleration(h).abs() < 1e-12);
            } else {
                // C2 at the next knot.
                let hn = times[i + 2] - times[i + 1];
                let n = Cubic::hermite(values[i + 1], values[i + 2], s[i + 1], s[i + 2], 1.0 / hn);
                assert!((c.acceleration(h) - n.acceleration(0.0)).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn extremes_find_the_interior_peak() {
        // p(t) = t - t³ on [0, 1]: max at 1/sqrt(3).
        let c = Cubic {
            c0: 0.0,
            c1: 1.0,
            c2: 0.0,
            c3: -1.0,
        };
        let e = c.position_range(1.0);
        let t = 1.0 / 3f64.sqrt();
        assert!((e.max_at - t).abs() < 1e-12);
        assert!((e.max - (t - t * t * t)).abs() < 1e-12);
        assert_eq!(e.min, 0.0);
        let v = c.velocity_range(1.0);
        assert_eq!((v.min, v.max), (-2.0, 1.0));
        assert_eq!(c.ranges(1.0)[0], e);
        // Monotone on [0, 0.5]: the ends are the extremes.
        let [p, _, a] = c.ranges(0.5);
        assert_eq!((p.min, p.max), (0.0, 0.375));
        assert_eq!((a.min, a.max), (-3.0, 0.0));
    }
}
