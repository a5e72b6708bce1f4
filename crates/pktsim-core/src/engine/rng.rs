//! Random streams. Every component draws from its own stream, seeded from the scenario's
//! seed and the stream's name, so adding a component never shifts another one's numbers.

use std::convert::Infallible;
use std::sync::OnceLock;

use rand::{Rng, RngExt, SeedableRng, TryRng};
use rand_pcg::Pcg64Mcg;

/// One named random stream.
#[derive(Clone)]
pub struct Stream {
    rng: Pcg64Mcg,
    /// The exponential ziggurat's layer edges ([`exp_layers`]).
    layers: &'static [f64; 257],
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Stream").field(&self.rng).finish()
    }
}

/// The layer edges x_0 > x_1 > ... > x_255 > x_256 = 0 of `rand_distr`'s exponential
/// ziggurat (`Exp1`), read once from `Exp1` itself; or all zeros, which turns
/// [`Stream::unit_exponential`]'s fast path off, if `Exp1` does not answer as the ziggurat
/// it is (a `rand_distr` of another layout: draws stay right, only slower).
///
/// `Exp1` takes a 64-bit word's low 8 bits as the layer i and its top 52 bits as a
/// uniform u in (0, 1), and returns u x_i when that is below x_{i+1}. Given the word i
/// (u = 2^-53, the smallest), it returns x_i 2^-53 exactly (a power of two's product);
/// layer 255 (x_256 = 0) is accepted by its wedge test, for which the probe then yields
/// all ones.
fn exp_layers() -> &'static [f64; 257] {
    static LAYERS: OnceLock<[f64; 257]> = OnceLock::new();
    LAYERS.get_or_init(|| {
        let mut x = [0.0; 257];
        for (i, xi) in x.iter_mut().enumerate().take(256) {
            *xi = Exp1Probe::sample(i as u64) * (1u64 << 53) as f64;
        }
        if fast_path_agrees(&x) {
            x
        } else {
            [0.0; 257]
        }
    })
}

/// `Exp1` on a word given, then all ones.
struct Exp1Probe(Option<u64>);

impl Exp1Probe {
    fn sample(word: u64) -> f64 {
        rand_distr::Distribution::<f64>::sample(&rand_distr::Exp1, &mut Exp1Probe(Some(word)))
    }
}

impl TryRng for Exp1Probe {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.try_next_u64()? as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.0.take().unwrap_or(u64::MAX))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.fill(0xff);
        Ok(())
    }
}

/// The fast path's answer for a 64-bit word: the draw, when the word falls inside its
/// layer's rectangle (about 98% of words).
#[inline(always)]
fn exp_fast(layers: &[f64; 257], word: u64) -> Option<f64> {
    let i = (word & 0xff) as usize;
    // The top 52 bits as a float in [1, 2), less 1 - 2^-53: a uniform in (0, 1).
    let u = f64::from_bits((word >> 12) | 0x3ff0_0000_0000_0000) - (1.0 - f64::EPSILON / 2.0);
    let x = u * layers[i];
    (x < layers[i + 1]).then_some(x)
}

/// `Exp1`'s draw from a generator's state, and the state after it. By value, so that a
/// caller's generator can stay in registers around this rare call.
#[cold]
#[inline(never)]
fn exp1_from(mut rng: Pcg64Mcg) -> (f64, Pcg64Mcg) {
    (rand_distr::Distribution::<f64>::sample(&rand_distr::Exp1, &mut rng).min(64.0), rng)
}

/// The layers read are strictly decreasing to 0, and the fast path gives `Exp1`'s draw
/// for every layer at 64 uniforms each, from either end of (0, 1) and between.
fn fast_path_agrees(x: &[f64; 257]) -> bool {
    if !(x[0].is_finite() && x.windows(2).all(|w| w[0] > w[1]) && x[256] == 0.0) {
        return false;
    }
    let mut z: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..256u64).all(|i| {
        (0..64u64).all(|k| {
            z = z.wrapping_mul(0x2545_f491_4f6c_dd1d).wrapping_add(k);
            let top = match k {
                0 => 0,
                1 => (1 << 52) - 1,
                _ => z >> 12,
            };
            let word = (top << 12) | (z & 0xf00) | i;
            exp_fast(x, word).is_none_or(|d| d.to_bits() == Exp1Probe::sample(word).to_bits())
        })
    })
}

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
        Stream { rng: Pcg64Mcg::seed_from_u64(derive(seed, name)), layers: exp_layers() }
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        self.rng.random::<f64>()
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
    /// The common case, a word inside its layer's rectangle, is computed here inline from
    /// `Exp1`'s own layer table, the same numbers in about half the instructions (`Exp1`'s
    /// rejection and tail code, inlined, costs registers and moves). Any other word is
    /// handed to `Exp1` from the state before it, which then draws it again: the stream
    /// is `Exp1`'s, bit for bit.
    ///
    /// Bounded by 64: the ziggurat's tail takes the log of a uniform in [0, 1), infinite
    /// once in 2^53 tail draws; cutting at 64 means removes a probability of e^-64 (the
    /// rectangles end below x_1 = 7.7).
    #[inline(always)]
    pub fn unit_exponential(&mut self) -> f64 {
        let before = self.rng.clone();
        match exp_fast(self.layers, self.rng.next_u64()) {
            Some(x) => x,
            None => {
                let (x, rng) = exp1_from(before);
                self.rng = rng;
                x
            }
        }
    }

    /// Normally distributed (Box-Muller; one of the pair is used, so each draw costs two
    /// uniforms and the stream stays simple to reason about).
    #[inline]
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Gamma distributed with this shape and scale (`rand_distr`'s Marsaglia-Tsang; mean
    /// shape x scale); the mean itself for parameters it refuses (not positive or finite).
    #[inline]
    pub fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        rand_distr::Gamma::new(shape, scale)
            .map(|g| rand_distr::Distribution::<f64>::sample(&g, &mut self.rng))
            .unwrap_or(shape * scale)
    }

    /// Uniform integer in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            0
        } else {
            self.rng.random_range(0..n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<f64> = (0..4)
            .map({
                let mut s = Stream::new(7, "traffic");
                move |_| s.uniform()
            })
            .collect();
        let b: Vec<f64> = (0..4)
            .map({
                let mut s = Stream::new(7, "traffic");
                move |_| s.uniform()
            })
            .collect();
        let c: Vec<f64> = (0..4)
            .map({
                let mut s = Stream::new(7, "service");
                move |_| s.uniform()
            })
            .collect();
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

    /// The inline fast path is on (the layers were read and agree with `Exp1`), and a
    /// stream's unit exponentials are `Exp1`'s on the same generator, bit for bit, over
    /// enough draws to take the wedges and the tail many times.
    #[test]
    fn unit_exponential_is_exp1_bit_for_bit() {
        let layers = exp_layers();
        assert!((layers[1] - 7.697_117_470_131_05).abs() < 1e-12, "fast path off: {:?}", &layers[..4]);
        assert_eq!(layers[256], 0.0);
        let mut s = Stream::new(11, "service");
        let mut rng = Pcg64Mcg::seed_from_u64(derive(11, "service"));
        let (mut slow, mut tail) = (0, 0);
        for _ in 0..2_000_000 {
            let word = rng.clone().next_u64();
            let want = rand_distr::Distribution::<f64>::sample(&rand_distr::Exp1, &mut rng).min(64.0);
            slow += usize::from(exp_fast(layers, word).is_none());
            tail += usize::from(word & 0xff == 0 && want > layers[1]);
            assert_eq!(s.unit_exponential().to_bits(), want.to_bits());
            assert_eq!(s.rng.clone().next_u64(), rng.clone().next_u64(), "the streams went apart");
        }
        // About 2.2% of words fall outside their layer's rectangle (measured: 44,404).
        assert!((30_000..60_000).contains(&slow), "{slow} words off the fast path");
        assert!(tail > 100, "{tail} tail draws");
    }

    /// A table that is not the ziggurat's is refused (and the fast path turned off).
    #[test]
    fn layers_that_disagree_with_exp1_are_refused() {
        let mut x = *exp_layers();
        assert!(fast_path_agrees(&x));
        x[17] *= 1.0 + 1e-15;
        assert!(!fast_path_agrees(&x));
        let mut y = *exp_layers();
        y[200] = y[199];
        assert!(!fast_path_agrees(&y));
    }

    #[test]
    fn exponential_has_its_mean() {
        let mut s = Stream::new(1, "x");
        let n = 200_000;
        let mean: f64 = (0..n).map(|_| s.exponential(3.0)).sum::<f64>() / n as f64;
        assert!((mean - 3.0).abs() < 0.03, "{mean}");
    }
}
