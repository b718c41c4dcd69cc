//! A set of 64-bit hashes kept in about 6.4 bytes each: the dispatcher's
//! seen-set (`dispatcher/src/seen.rs`), which holds a hash of every URL
//! the crawl has admitted and is the one part of its memory that grows
//! with the crawl.
//!
//! Why not `HashSet<u64>`: hashbrown spends 9 bytes a slot at a load of
//! at most 7/8 and doubles its table when full; with the tables freed as
//! it grew still held by the allocator, `seenbench` measured the process
//! growing by 48.2, 31.9 and 24.4 bytes a hash at 1, 10 and 100 million
//! (2.4 GB at 100 million). This set: 10.5, 11.1 and 7.6 (peak 8.0).
//!
//! Here a hash's top 16 bits pick one of 65,536 partitions, and each
//! partition is a sorted vector of the low 48 bits (6 bytes, big-endian,
//! so that byte order is numeric order). The partition's index is the top
//! bits, so every hash is kept whole and the set answers exactly as a set
//! of `u64` would: no more collisions than the 64-bit hash itself has. A
//! partition grows by an eighth at a time, and only one is reallocated at
//! once, so there is no moment with two copies of the set. (At small
//! sizes the allocator's rounding of the many small partitions adds about
//! 4 bytes a hash to the 6.4.)
//!
//! The price is time: a look-up searches one partition around the place
//! its value predicts, and an insert also moves the half of the partition
//! behind it (at 100 million hashes, about 1,500 entries of 6 bytes).
//! `seenbench` measured an insert at 199, 295 and 823 ns and a look-up
//! at 132, 202 and 577 ns at 1, 10 and 100 million, against 43, 130 and
//! 193 and 47, 84 and 212 for `HashSet<u64>`: at 100 million URLs and a
//! million links a second, about half a core more, for 1.7 GB less.

use std::mem::size_of;

const PARTITION_BITS: u32 = 16;
const PARTITIONS: usize = 1 << PARTITION_BITS;

/// A hash's low 48 bits, most significant byte first.
type Low = [u8; 6];

/// The set; see the module documentation.
pub struct HashSet48 {
    parts: Box<[Vec<Low>]>,
    len: usize,
    /// Entries the partitions have room for, summed (kept as they grow, so
    /// that [`HashSet48::bytes`] costs nothing).
    slots: usize,
}

impl Default for HashSet48 {
    fn default() -> Self {
        HashSet48::new()
    }
}

/// The partition of `hash` and what it keeps of it.
fn split(hash: u64) -> (usize, Low) {
    let [_, _, a, b, c, d, e, f] = hash.to_be_bytes();
    // The top 16 bits: always below PARTITIONS.
    ((hash >> (64 - PARTITION_BITS)) as usize, [a, b, c, d, e, f])
}

fn value(low: &Low) -> u64 {
    let [a, b, c, d, e, f] = *low;
    u64::from_be_bytes([0, 0, a, b, c, d, e, f])
}

/// Where `low` is in the sorted `part` (`Ok`), or where it would go
/// (`Err`), as `binary_search` answers. Hashes are spread evenly, so its
/// place is first guessed from its value, and a bracket around the guess,
/// doubled until it holds `low`, is then searched: about two cache lines
/// read where a binary search of the whole partition reads eight (at 10
/// million hashes, 540 ns a look-up became about 100). Uneven values are
/// still found, only with more doublings.
fn find(part: &[Low], low: &Low) -> Result<usize, usize> {
    let len = part.len();
    let want = value(low);
    // The guess is below `len`: `want` is below 2^48.
    let guess = ((u128::from(want) * len as u128) >> 48) as usize;
    let Some(at) = part.get(guess) else {
        return part.binary_search(low);
    };
    let (mut lo, mut hi) = (0, len);
    let mut step = 1;
    if value(at) < want {
        // After the guess: `lo` is past every entry known to be smaller.
        lo = guess + 1;
        while let Some(probe) = part.get(guess + step) {
            if value(probe) >= want {
                hi = guess + step + 1;
                break;
            }
            lo = guess + step + 1;
            step *= 2;
        }
    } else {
        // At or before the guess: `hi` is past the first entry known to be
        // at least as large.
        hi = guess + 1;
        while let Some(i) = guess.checked_sub(step) {
            if part.get(i).is_some_and(|probe| value(probe) < want) {
                lo = i + 1;
                break;
            }
            hi = i + 1;
            step *= 2;
        }
    }
    match part.get(lo..hi) {
        Some(bracket) => match bracket.binary_search(low) {
            Ok(i) => Ok(lo + i),
            Err(i) => Err(lo + i),
        },
        None => part.binary_search(low),
    }
}

impl HashSet48 {
    pub fn new() -> HashSet48 {
        HashSet48 {
            parts: (0..PARTITIONS).map(|_| Vec::new()).collect(),
            len: 0,
            slots: 0,
        }
    }

    /// Adds `hash`; whether it was not there before.
    pub fn insert(&mut self, hash: u64) -> bool {
        let (p, low) = split(hash);
        let Some(part) = self.parts.get_mut(p) else {
            return false;
        };
        let Err(at) = find(part, &low) else {
            return false;
        };
        if part.len() == part.capacity() {
            self.slots += grow(part, (part.len() / 8).max(4));
        }
        part.insert(at, low);
        self.len += 1;
        true
    }

    pub fn contains(&self, hash: u64) -> bool {
        let (p, low) = split(hash);
        self.parts.get(p).is_some_and(|part| find(part, &low).is_ok())
    }

    /// Makes room for about `more` hashes still to come (spread evenly, as
    /// hashes are), so that reading a known number of them in allocates
    /// each partition once.
    pub fn reserve(&mut self, more: usize) {
        let each = more / PARTITIONS;
        let each = each + each / 8;
        for part in self.parts.iter_mut() {
            self.slots += grow(part, each);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes the set holds (the allocator may round each partition up
    /// a little).
    pub fn bytes(&self) -> usize {
        PARTITIONS * size_of::<Vec<Low>>() + self.slots * size_of::<Low>()
    }
}

/// Makes room in `part` for `more` entries beyond its length, exactly
/// (a partition grows by an eighth, not by doubling); the slots it added,
/// for [`HashSet48::bytes`].
fn grow(part: &mut Vec<Low>, more: usize) -> usize {
    let before = part.capacity();
    part.reserve_exact(more);
    part.capacity() - before
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// xorshift64*: spread-out hashes without a dependency.
    fn hashes(n: usize, mut x: u64) -> Vec<u64> {
        (0..n)
            .map(|_| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                x.wrapping_mul(0x2545_f491_4f6c_dd1d)
            })
            .collect()
    }

    #[test]
    fn answers_as_a_set_of_u64_does() {
        let mut ours = HashSet48::new();
        let mut std = HashSet::new();
        // Random hashes, each twice, and the edges of the partitions and
        // of the 48 bits kept: hashes that differ only above bit 48 must
        // stay apart.
        let mut all = hashes(50_000, 7);
        all.extend(hashes(50_000, 7));
        all.extend([
            0,
            1,
            u64::MAX,
            u64::MAX - 1,
            1 << 48,
            (1 << 48) - 1,
            3 << 48,
            0xffff_0000_0000_0000,
        ]);
        all.extend([
            0x0001_0000_0000_0005,
            0x0002_0000_0000_0005,
            0x0000_0000_0000_0005,
        ]);
        for &h in &all {
            assert_eq!(ours.insert(h), std.insert(h), "{h:#x}");
            assert!(ours.contains(h));
        }
        assert_eq!(ours.len(), std.len());
        for h in hashes(50_000, 99) {
            assert_eq!(ours.contains(h), std.contains(&h), "{h:#x}");
        }
        // Every partition stays sorted, with nothing repeated.
        for part in ours.parts.iter() {
            assert!(part.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn finds_uneven_values_too() {
        // All in one partition, crowded at both ends and in the middle, so
        // that the guess from the value is far off.
        let mut ours = HashSet48::new();
        let mut std = HashSet::new();
        let top = 5u64 << 48;
        let mut all: Vec<u64> = (0..3_000).map(|i| top | i).collect();
        all.extend((0..3_000).map(|i| top | ((1 << 48) - 1 - i * 3)));
        all.extend((0..3_000).map(|i| top | (1 << 47) | (i * 5)));
        all.extend(hashes(3_000, 11).into_iter().map(|h| top | (h >> 16)));
        for (i, &h) in all.iter().enumerate() {
            assert_eq!(ours.insert(h), std.insert(h), "{h:#x}");
            // Everything inserted so far is still found, and nothing else.
            if i % 997 == 0 {
                for &g in &all {
                    assert_eq!(ours.contains(g), std.contains(&g), "{g:#x} after {i}");
                }
            }
        }
        for h in 0..20_000u64 {
            assert_eq!(ours.contains(top | (h * 7)), std.contains(&(top | (h * 7))));
        }
    }

    #[test]
    fn holds_about_six_and_a_half_bytes_a_hash() {
        let mut s = HashSet48::new();
        let n = 2_000_000;
        for h in hashes(n, 3) {
            s.insert(h);
        }
        let fixed = PARTITIONS * size_of::<Vec<Low>>();
        let per = (s.bytes() - fixed) as f64 / n as f64;
        assert!((6.0..=7.6).contains(&per), "{per} bytes a hash");
        // Reserving ahead allocates each partition about once.
        let mut r = HashSet48::new();
        r.reserve(n);
        let reserved = r.bytes();
        for h in hashes(n, 3) {
            r.insert(h);
        }
        assert!(r.bytes() <= reserved * 11 / 10, "{} then {}", reserved, r.bytes());
    }
}
