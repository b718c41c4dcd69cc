//! A tiny deterministic PRNG (splitmix64).
//!
//! Every response is regenerated on the fly from `(seed, host, location)`, so
//! the generator needs a generator that is cheap to seed per request and whose
//! output never changes between releases of a crate (which is why we do not use
//! `rand`'s `StdRng` here).

/// splitmix64: one add and three multiply/xor-shift rounds per draw.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        finalize(self.0)
    }

    /// Uniform-ish value in `0..n` (`n` > 0), via a 128-bit multiply (no modulo bias worth caring about).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// True with probability `num / den`.
    pub(crate) fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }
}

/// The splitmix64 output function, also used to hash seeds together.
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Combines several words into one well-mixed seed.
pub(crate) fn mix(parts: &[u64]) -> u64 {
    parts.iter().fold(0x243F_6A88_85A3_08D3, |acc, &p| {
        finalize(acc ^ finalize(p.wrapping_add(0x9E37_79B9_7F4A_7C15)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = SplitMix::new(mix(&[1, 2, 3]));
        let mut b = SplitMix::new(mix(&[1, 2, 3]));
        for _ in 0..1000 {
            let x = a.below(7);
            assert_eq!(x, b.below(7));
            assert!(x < 7);
        }
        assert_ne!(mix(&[1, 2, 3]), mix(&[1, 3, 2]));
    }
}
