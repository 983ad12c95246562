//! A small deterministic random generator: the attack's random restarts
//! draw from it, and tests and the soundness hunt seed their cases with it.

/// A tiny deterministic generator (SplitMix64), to avoid a dependency.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `[-a, a]`, rounded to f32 so both precisions hold it exactly.
    pub fn weight(&mut self, a: f64) -> f64 {
        ((self.unit() * 2.0 - 1.0) * a) as f32 as f64
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
