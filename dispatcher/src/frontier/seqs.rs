//! A short list of `seq`s that nearly every domain leaves empty.
//!
//! A domain's adopted and unconfirmed `seq`s (`DomainQ::taken`,
//! `DomainQ::unverified`) are empty but for a few domains around a restart
//! or a hash collision. As two `Vec`s they cost 48 bytes of every
//! domain's record; boxed, 16, and the list is allocated only when used.

// The box is the point: 8 bytes in every domain's record where a `Vec`
// takes 24, for a list that is empty nearly everywhere.
#[allow(clippy::box_collection)]
#[derive(Debug, Default)]
pub(super) struct Seqs(Option<Box<Vec<i64>>>);

impl Seqs {
    pub(super) fn push(&mut self, seq: i64) {
        self.0.get_or_insert_with(Box::default).push(seq);
    }

    pub(super) fn contains(&self, seq: i64) -> bool {
        self.0.as_ref().is_some_and(|v| v.contains(&seq))
    }

    /// Removes `seq`; whether it was there.
    pub(super) fn remove(&mut self, seq: i64) -> bool {
        let Some(v) = self.0.as_mut() else {
            return false;
        };
        let Some(i) = v.iter().position(|s| *s == seq) else {
            return false;
        };
        v.swap_remove(i);
        if v.is_empty() {
            self.0 = None;
        }
        true
    }

    /// Keeps the `seq`s above `cursor`.
    pub(super) fn keep_above(&mut self, cursor: i64) {
        if let Some(v) = self.0.as_mut() {
            v.retain(|s| *s > cursor);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(super) fn min(&self) -> Option<i64> {
        self.0.as_ref().and_then(|v| v.iter().copied().min())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_nothing_once_emptied() {
        let mut s = Seqs::default();
        assert!(s.is_empty() && !s.contains(3) && !s.remove(3));
        for seq in [5, 3, 9] {
            s.push(seq);
        }
        assert!(s.contains(3) && s.remove(3) && !s.remove(3));
        assert!(!s.contains(3) && s.contains(5) && s.contains(9));
        s.keep_above(5);
        assert!(!s.contains(5) && s.contains(9) && !s.is_empty());
        assert!(s.remove(9));
        assert!(s.is_empty() && s.0.is_none());
        s.push(1);
        s.keep_above(1);
        assert!(s.0.is_none());
    }
}
