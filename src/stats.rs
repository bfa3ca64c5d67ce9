//! Statistics over repeated runs: median, mean and standard deviation, and a bootstrap
//! confidence interval of the median. Resampling uses a fixed seed so a report of the same
//! results file is the same every time.

/// The median of `xs` (the mean of the two middle values for an even count); `None` if empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The arithmetic mean; `None` if empty.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        None
    } else {
        Some(xs.iter().sum::<f64>() / xs.len() as f64)
    }
}

/// The sample standard deviation (n - 1); 0 for a single value, `None` if empty.
pub fn std_dev(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if xs.len() < 2 {
        return Some(0.0);
    }
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
    Some(var.sqrt())
}

/// A small deterministic generator (xorshift64*), enough for resampling.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// How many resamples the bootstrap draws.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The 95% percentile-bootstrap confidence interval of the median: `(lo, hi)`.
/// With one value the interval is that value; `None` if empty.
pub fn bootstrap_median_ci95(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    if xs.len() == 1 {
        return Some((xs[0], xs[0]));
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut sample = vec![0.0; xs.len()];
    let mut medians: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            for s in sample.iter_mut() {
                *s = xs[rng.below(xs.len())];
            }
            median(&sample).unwrap_or(f64::NAN)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[((medians.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

/// Summary of one sample of measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many values.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// 95% bootstrap CI of the median.
    pub ci95: (f64, f64),
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation.
    pub sd: f64,
}

/// Summarises a sample; `None` if empty.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    Some(Summary {
        n: xs.len(),
        median: median(xs)?,
        ci95: bootstrap_median_ci95(xs)?,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        mean: mean(xs)?,
        sd: std_dev(xs)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert!((std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap() - 2.138).abs() < 1e-3);
        assert_eq!(bootstrap_median_ci95(&[5.0]), Some((5.0, 5.0)));
    }

    proptest! {
        #[test]
        fn ci_brackets_median_within_range(xs in proptest::collection::vec(0.001f64..100.0, 2..30)) {
            let s = summarize(&xs).unwrap();
            prop_assert!(s.min <= s.ci95.0 && s.ci95.0 <= s.ci95.1 && s.ci95.1 <= s.max);
            prop_assert!(s.min <= s.median && s.median <= s.max);
            prop_assert_eq!(summarize(&xs), summarize(&xs));
        }
    }
}
