//! Statistics over repeated runs: median, mean and standard deviation, a bootstrap
//! confidence interval of the median, the Mann-Whitney U test and geometric means. Resampling
//! uses a fixed seed so a report of the same results file is the same every time.

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

/// The outcome of a two-sided Mann-Whitney U test of two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample: how many (a, b) pairs have a > b, ties counting one half.
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether `p` is exact (small samples without ties) or the normal approximation.
    pub exact: bool,
}

/// Largest combined sample size for which the exact distribution of U is computed.
pub const MANN_WHITNEY_EXACT_MAX: usize = 40;

/// The two-sided Mann-Whitney U test of `a` against `b`: exact for small samples without ties,
/// otherwise the normal approximation with tie correction and continuity correction.
/// `None` if either sample is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    // Mid-ranks, and the tie term sum(t^3 - t) for the variance.
    let mut rank_sum_a = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && all[j].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i) as f64;
        let mid = (i + j + 1) as f64 / 2.0;
        rank_sum_a += mid * all[i..j].iter().filter(|x| x.1).count() as f64;
        ties += t * t * t - t;
        i = j;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u = rank_sum_a - f1 * (f1 + 1.0) / 2.0;
    let mu = f1 * f2 / 2.0;
    if ties == 0.0 && n <= MANN_WHITNEY_EXACT_MAX {
        let counts = u_distribution(n1, n2);
        let total: f64 = counts.iter().sum();
        let low = u.min(f1 * f2 - u).round() as usize;
        let tail: f64 = counts[..=low].iter().sum::<f64>() / total;
        return Some(MannWhitney {
            u,
            p: (2.0 * tail).min(1.0),
            exact: true,
        });
    }
    let nf = n as f64;
    let var = f1 * f2 / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)));
    let p = if var <= 0.0 {
        1.0
    } else {
        let z = ((u - mu).abs() - 0.5).max(0.0) / var.sqrt();
        erfc(z / std::f64::consts::SQRT_2).min(1.0)
    };
    Some(MannWhitney { u, p, exact: false })
}

/// How many arrangements of `m` and `n` untied values give each U = 0..=m·n.
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // f[j][u] for the current i: counts with i values of the first sample and j of the second.
    // f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u).
    let mut prev: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1.0]);
        for j in 1..=n {
            let mut v = vec![0.0; i * j + 1];
            for (u, c) in prev[j].iter().enumerate() {
                v[u + j] += c;
            }
            for (u, c) in cur[j - 1].iter().enumerate() {
                v[u] += c;
            }
            cur.push(v);
        }
        prev = cur;
    }
    prev.swap_remove(n)
}

/// The complementary error function (Numerical Recipes' Chebyshev fit, |error| < 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The geometric mean of positive values; `None` if empty or any value is not positive.
pub fn geometric_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan() || *x <= 0.0) {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
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

    #[test]
    fn mann_whitney_exact_known_values() {
        // Complete separation of 5 and 5: two of the C(10,5) = 252 arrangements are as extreme.
        let r = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert_eq!(r.u, 0.0);
        assert!(r.exact);
        assert!((r.p - 2.0 / 252.0).abs() < 1e-12, "{r:?}");
        // SciPy's documented example (males vs females): U = 17, exact p = 0.1111.
        let males = [19.0, 22.0, 16.0, 29.0, 24.0];
        let females = [20.0, 11.0, 17.0, 12.0];
        let r = mann_whitney(&males, &females).unwrap();
        assert_eq!(r.u, 17.0);
        assert!((r.p - 0.111_111).abs() < 1e-5, "{r:?}");
        // Identical samples are as unremarkable as can be.
        let r = mann_whitney(&[1.0, 2.0], &[1.0, 2.0]).unwrap();
        assert!((r.p - 1.0).abs() < 1e-12, "{r:?}");
        assert!(mann_whitney(&[], &[1.0]).is_none());
    }

    #[test]
    fn mann_whitney_normal_approximation_and_ties() {
        // Past the exact limit, untied: 25 vs 25 completely separated gives U = 0,
        // mean 312.5, var = 625/12 · 51 = 2656.25, z = 312/51.539 = 6.0536, p = 1.42e-9.
        let lo: Vec<f64> = (0..25).map(f64::from).collect();
        let hi: Vec<f64> = (25..50).map(f64::from).collect();
        let r = mann_whitney(&lo, &hi).unwrap();
        assert!(!r.exact && r.u == 0.0, "{r:?}");
        assert!((r.p / 1.42e-9 - 1.0).abs() < 0.05, "{r:?}");
        // With ties: a = [1, 2, 2, 3], b = [2, 3, 4, 4, 5]. Mid-ranks give R1 = 1 + 3 + 3 + 5.5
        // = 12.5, U = 2.5; ties (2 ×3, 3 ×2, 4 ×2) make sum(t³ - t) = 24 + 6 + 6 = 36, so
        // var = 20/12 · (10 - 36/72) = 15.8333, z = (10 - 2.5 - 0.5)/3.9791 = 1.7592 and
        // p = erfc(1.7592/√2) = 0.07854 (SciPy, method="asymptotic": 0.0785).
        let r = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 4.0, 4.0, 5.0]).unwrap();
        assert_eq!(r.u, 2.5);
        assert!(!r.exact);
        assert!((r.p - 0.07854).abs() < 2e-4, "{r:?}");
        // All values tied: nothing to tell apart.
        assert_eq!(mann_whitney(&[1.0, 1.0], &[1.0, 1.0]).unwrap().p, 1.0);
    }

    #[test]
    fn erfc_and_geometric_mean() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_2).abs() < 1e-6);
        assert!((erfc(-1.0) - 1.842_700_8).abs() < 1e-6);
        assert!((geometric_mean(&[1.0, 4.0]).unwrap() - 2.0).abs() < 1e-12);
        assert!(geometric_mean(&[1.0, 0.0]).is_none());
        assert!(geometric_mean(&[]).is_none());
    }

    #[test]
    fn summary_of_a_known_sample() {
        // The CI was computed independently (a Python copy of the xorshift64* resampler, same
        // seed, 2000 resamples, the 50th and 1950th of the sorted medians).
        let s = summarize(&[10.0, 12.0, 11.0, 14.0, 13.0, 9.0]).unwrap();
        assert_eq!(s.n, 6);
        assert_eq!(s.median, 11.5);
        assert_eq!(s.ci95, (9.5, 13.5));
        assert_eq!((s.min, s.max), (9.0, 14.0));
        assert_eq!(s.mean, 11.5);
        assert!((s.sd - 3.5f64.sqrt()).abs() < 1e-12, "{s:?}");
        // A fixed seed: the same sample gives the same interval in a later call.
        assert_eq!(
            bootstrap_median_ci95(&[10.0, 12.0, 11.0, 14.0, 13.0, 9.0]),
            Some((9.5, 13.5))
        );
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn median_mean_and_sd_at_small_counts() {
        // One value, two values (the mean of both), an odd count past three.
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[2.0, 1.0]), Some(1.5));
        assert_eq!(median(&[5.0, 1.0, 4.0, 2.0, 3.0]), Some(3.0));
        assert_eq!(median(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0]), Some(3.5));
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 3.0, 4.0]), Some(2.5));
        assert_eq!(std_dev(&[]), None);
        assert_eq!(std_dev(&[5.0]), Some(0.0));
        // Two values: (1 - 2)² + (3 - 2)² = 2 over n - 1 = 1.
        assert_eq!(std_dev(&[1.0, 3.0]), Some(2f64.sqrt()));
        assert_eq!(std_dev(&[1.0, 2.0, 3.0]), Some(1.0));
    }

    #[test]
    fn rng_is_xorshift64_star() {
        // The first outputs from the bootstrap's seed, from an independent Python copy.
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        assert_eq!(r.next_u64(), 973_819_730_272_012_410);
        assert_eq!(r.next_u64(), 6_108_091_081_255_984_487);
        assert_eq!(r.next_u64(), 12_125_365_036_566_318_712);
        let mut r = Rng(0x9E37_79B9_7F4A_7C15);
        assert_eq!(r.below(10), 973_819_730_272_012_410 % 10);
    }

    #[test]
    fn bootstrap_ci_is_the_50th_and_1949th_of_2000_medians() {
        // With 2000 sorted medians the ends are at round(1999 · 0.025) = 50 and
        // round(1999 · 0.975) = 1949; these samples (squares 1..=n) have neighbours there that
        // differ (Python copy of the resampler: n = 40 has 677 at 1949 but 680 at 1951, n = 80
        // has 2402 at 1949 but 2450.5 at 1950).
        let squares = |n: u32| (1..=n).map(|i| f64::from(i * i)).collect::<Vec<_>>();
        assert_eq!(bootstrap_median_ci95(&squares(40)), Some((225.0, 677.0)));
        assert_eq!(bootstrap_median_ci95(&squares(80)), Some((1024.0, 2402.0)));
        assert_eq!(bootstrap_median_ci95(&[]), None);
    }

    #[test]
    fn u_distribution_counts_arrangements() {
        // m = n = 2: the C(4,2) = 6 orders give U = 0, 1, 2, 2, 3, 4.
        assert_eq!(u_distribution(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        // m = 3, n = 2: C(5,2) = 10 orders over U = 0..=6.
        assert_eq!(
            u_distribution(3, 2),
            vec![1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]
        );
        assert_eq!(u_distribution(1, 3), vec![1.0; 4]);
    }

    #[test]
    fn mann_whitney_exact_up_to_forty_values() {
        // 20 and 20 untied (n = 40) is still exact: completely separated, p = 2 / C(40,20).
        let lo: Vec<f64> = (0..20).map(f64::from).collect();
        let hi: Vec<f64> = (20..40).map(f64::from).collect();
        let r = mann_whitney(&lo, &hi).unwrap();
        assert!(r.exact && r.u == 0.0, "{r:?}");
        assert!(
            (r.p / (2.0 / 137_846_528_820.0) - 1.0).abs() < 1e-9,
            "{r:?}"
        );
        // The other way round U is n1·n2 and p the same.
        let r = mann_whitney(&hi, &lo).unwrap();
        assert!(r.exact && r.u == 400.0, "{r:?}");
        assert!(
            (r.p / (2.0 / 137_846_528_820.0) - 1.0).abs() < 1e-9,
            "{r:?}"
        );
        // One more value (n = 41) takes the normal approximation.
        let hi: Vec<f64> = (20..41).map(f64::from).collect();
        assert!(!mann_whitney(&lo, &hi).unwrap().exact);
        assert!(mann_whitney(&[1.0], &[]).is_none());
        assert!(mann_whitney(&[], &[]).is_none());
    }

    #[test]
    fn mann_whitney_ranks_a_nan_last_and_ends() {
        // NaN is not equal to itself, so the tie scan must step past it on its own (a scan
        // starting at j = i would never move); total_cmp sorts it above 1 and 2: rank 3, U = 2
        // = n1·n2, and the exact p is 2 · 1/3 (U = 0, 1, 2 once each among 3 orders).
        let r = mann_whitney(&[f64::NAN], &[1.0, 2.0]).unwrap();
        assert!(r.exact && r.u == 2.0, "{r:?}");
        assert!((r.p - 2.0 / 3.0).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn geometric_mean_rejects_negative_and_nan() {
        assert!(geometric_mean(&[1.0, -2.0]).is_none());
        assert!(geometric_mean(&[f64::NAN, 2.0]).is_none());
        assert!((geometric_mean(&[2.0, 8.0, 4.0]).unwrap() - 4.0).abs() < 1e-12);
        assert!((erfc(0.5) - 0.479_500_1).abs() < 1e-6);
        assert!((erfc(2.0) - 0.004_677_7).abs() < 1e-6);
        assert!((erfc(-2.0) - 1.995_322_3).abs() < 1e-6);
    }

    proptest! {
        #[test]
        fn ci_brackets_median_within_range(xs in proptest::collection::vec(0.001f64..100.0, 2..30)) {
            let s = summarize(&xs).unwrap();
            prop_assert!(s.min <= s.ci95.0 && s.ci95.0 <= s.ci95.1 && s.ci95.1 <= s.max);
            prop_assert!(s.min <= s.median && s.median <= s.max);
        }
    }
}
