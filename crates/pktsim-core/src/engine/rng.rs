//! Random streams. Every component draws from its own stream, seeded from the scenario's
//! seed and the stream's name, so adding a component never shifts another one's numbers.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// One named random stream.
#[derive(Debug, Clone)]
pub struct Stream(Pcg64Mcg);

/// FNV-1a of the name, mixed with the seed by SplitMix64.
fn derive(seed: u64, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = seed ^ h;
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Stream {
    pub fn new(seed: u64, name: &str) -> Self {
        Stream(Pcg64Mcg::seed_from_u64(derive(seed, name)))
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    /// Exponentially distributed with the given mean.
    #[inline]
    pub fn exponential(&mut self, mean: f64) -> f64 {
        self.unit_exponential() * mean
    }

    /// Exponentially distributed with mean 1 (`exponential(m)` is this times `m`, bit for
    /// bit): `rand_distr`'s ziggurat (`Exp1`), which draws one 64-bit word and compares it
    /// with a table almost always, where inverting the distribution takes a `log`.
    ///
    /// Bounded by 64: the ziggurat's tail takes the log of a uniform in [0, 1), infinite
    /// once in 2^53 tail draws; cutting at 64 means removes a probability of e^-64.
    #[inline]
    pub fn unit_exponential(&mut self) -> f64 {
        rand_distr::Distribution::<f64>::sample(&rand_distr::Exp1, &mut self.0).min(64.0)
    }

    /// Normally distributed (Box-Muller; one of the pair is used, so each draw costs two
    /// uniforms and the stream stays simple to reason about).
    #[inline]
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Uniform integer in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            0
        } else {
            self.0.random_range(0..n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<f64> = (0..4).map({
            let mut s = Stream::new(7, "traffic");
            move |_| s.uniform()
        }).collect();
        let b: Vec<f64> = (0..4).map({
            let mut s = Stream::new(7, "traffic");
            move |_| s.uniform()
        }).collect();
        let c: Vec<f64> = (0..4).map({
            let mut s = Stream::new(7, "service");
            move |_| s.uniform()
        }).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn normal_has_its_mean_and_sd() {
        let mut s = Stream::new(2, "n");
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| s.normal(5.0, 2.0)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.02 && (var.sqrt() - 2.0).abs() < 0.02, "{mean} {var}");
    }

    /// The unit exponential is Exp(1): the largest gap between its empirical distribution
    /// and 1 - e^-x over 200,000 draws is below Kolmogorov-Smirnov's 1% critical value
    /// (1.63 / sqrt(n)), and its tail beyond 10 means is there (e^-10 of the draws).
    #[test]
    fn unit_exponential_is_exp1() {
        let mut s = Stream::new(4, "ks");
        let n = 200_000;
        let mut xs: Vec<f64> = (0..n).map(|_| s.unit_exponential()).collect();
        xs.sort_by(|a, b| a.total_cmp(b));
        let d = xs.iter().enumerate().map(|(i, &x)| {
            let f = 1.0 - (-x).exp();
            (f - i as f64 / n as f64).abs().max(((i + 1) as f64 / n as f64 - f).abs())
        });
        let d = d.fold(0.0, f64::max);
        assert!(d < 1.63 / (n as f64).sqrt(), "KS distance {d}");
        let var = xs.iter().map(|x| (x - 1.0).powi(2)).sum::<f64>() / n as f64;
        assert!((var - 1.0).abs() < 0.02, "variance {var}");
        let tail = xs.iter().filter(|&&x| x > 10.0).count();
        assert!((1..=40).contains(&tail), "{tail} draws beyond 10 means, ~9 expected");
    }

    #[test]
    fn exponential_has_its_mean() {
        let mut s = Stream::new(1, "x");
        let n = 200_000;
        let mean: f64 = (0..n).map(|_| s.exponential(3.0)).sum::<f64>() / n as f64;
        assert!((mean - 3.0).abs() < 0.03, "{mean}");
    }
}
