//! Paths that are traps: too many segments, or segments that repeat.
//!
//! A relative link that a server answers under any path (`href="a/b/"` on
//! a page that every path serves) stacks a segment on every hop:
//! `/a/b/`, `/a/b/a/b/`, `/a/b/a/b/a/b/` … Heritrix refuses such URLs
//! before they are queued (`PathologicalPathDecideRule`: a run of segments
//! repeated more than twice in a row; `TooManyPathSegmentsDecideRule`:
//! more than 20 segments), and so do we, with the same defaults. We also
//! refuse one segment met more than `max_repeats + 1` times anywhere in
//! the path: two relative links that take turns (`a/b/`, then `c/`) make
//! paths such as `/a/b/c/a/b/c/a/…`, which no run repeats in a row
//! often enough to catch, but which an ordinary site does not serve.
//!
//! Pure string work on the normalised path: no allocation but the
//! segment list of the (rare) paths of more than a few segments.

/// Why a path is a trap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathTrap {
    /// More segments than [`PathTraps::max_segments`].
    TooManySegments,
    /// A run of segments repeated, or one segment met, too often.
    RepeatedSegments,
}

/// The path rules' limits (0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PathTraps {
    pub(crate) max_segments: usize,
    /// A run of segments may follow itself this many times in all
    /// (`/a/b/a/b/` is two), and one segment may occur once more than
    /// this anywhere in the path.
    pub(crate) max_repeats: usize,
}

impl PathTraps {
    /// Heritrix's defaults: 20 segments, a run twice.
    pub(crate) const DEFAULT: PathTraps = PathTraps {
        max_segments: 20,
        max_repeats: 2,
    };

    /// Whether `path` (a URL's path, without its query) is a trap.
    pub(crate) fn check(&self, path: &str) -> Option<PathTrap> {
        // The empty segment after a final `/` is the directory itself.
        let path = path.strip_prefix('/').unwrap_or(path);
        let path = path.strip_suffix('/').unwrap_or(path);
        if path.is_empty() {
            return None;
        }
        let count = path.bytes().filter(|&b| b == b'/').count() + 1;
        if self.max_segments > 0 && count > self.max_segments {
            return Some(PathTrap::TooManySegments);
        }
        if self.max_repeats == 0 || count <= self.max_repeats {
            return None;
        }
        let segments: Vec<&str> = path.split('/').collect();
        if repeated_run(&segments, self.max_repeats) || frequent_segment(&segments, self.max_repeats + 1) {
            return Some(PathTrap::RepeatedSegments);
        }
        None
    }
}

/// Whether some run of segments follows itself more than `max` times in all.
fn repeated_run(segments: &[&str], max: usize) -> bool {
    let n = segments.len();
    // A run of `len` segments repeated `max + 1` times needs that many.
    for len in 1..=n / (max + 1) {
        let need = len * (max + 1);
        for start in 0..=n - need {
            let run = &segments[start..start + len];
            if (1..=max).all(|k| &segments[start + k * len..start + (k + 1) * len] == run) {
                return true;
            }
        }
    }
    false
}

/// Whether one segment occurs more than `max` times.
fn frequent_segment(segments: &[&str], max: usize) -> bool {
    segments
        .iter()
        .enumerate()
        .any(|(i, s)| segments[i..].iter().filter(|t| *t == s).count() > max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: PathTraps = PathTraps::DEFAULT;

    #[test]
    fn ordinary_paths_pass() {
        for p in [
            "/",
            "",
            "/p/7",
            "/p/",
            "/2024/01/01/post.html",
            "/a/b/a/b/",
            "/docs/v1/api/v1/users",
            "/1/1/",
            "/a/a/b/",
        ] {
            assert_eq!(T.check(p), None, "{p}");
        }
    }

    #[test]
    fn a_run_repeated_three_times_is_a_trap() {
        assert_eq!(T.check("/a/b/a/b/a/b/"), Some(PathTrap::RepeatedSegments));
        assert_eq!(T.check("/x/a/a/a"), Some(PathTrap::RepeatedSegments));
        assert_eq!(
            T.check("/x/a/b/c/a/b/c/a/b/c/y"),
            Some(PathTrap::RepeatedSegments)
        );
    }

    #[test]
    fn a_segment_met_four_times_is_a_trap() {
        // No run repeats three times in a row, but `a` is everywhere.
        assert_eq!(T.check("/a/c/a/b/a/c/a/"), Some(PathTrap::RepeatedSegments));
        assert_eq!(T.check("/a/c/a/b/a/c/"), None);
    }

    #[test]
    fn too_many_segments() {
        let deep: String = (0..21).map(|i| format!("/s{i}")).collect();
        assert_eq!(T.check(&deep), Some(PathTrap::TooManySegments));
        let ok: String = (0..20).map(|i| format!("/s{i}")).collect();
        assert_eq!(T.check(&ok), None);
        assert_eq!(T.check(&format!("{ok}/")), None);
    }

    #[test]
    fn limits_are_configurable_and_zero_is_none() {
        let loose = PathTraps {
            max_segments: 0,
            max_repeats: 0,
        };
        let deep: String = (0..100).map(|_| "/a").collect();
        assert_eq!(loose.check(&deep), None);
        let strict = PathTraps {
            max_segments: 3,
            max_repeats: 1,
        };
        assert_eq!(strict.check("/a/a"), Some(PathTrap::RepeatedSegments));
        assert_eq!(strict.check("/a/b/c/d"), Some(PathTrap::TooManySegments));
        assert_eq!(strict.check("/a/b/c"), None);
    }
}
