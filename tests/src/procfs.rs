//! A process's line of `/proc/<pid>/stat`, as the tests read it: its state,
//! its parent and when it started. One parse for every test that watches
//! processes it started (the command name may hold spaces and parentheses,
//! so the fields are counted from its last `)`).

use std::path::Path;

/// The fields of one `/proc/<pid>/stat` (or `/proc/<pid>/task/<tid>/stat`)
/// the tests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `T` (stopped), `Z` (zombie), `X` (dead), ...
    pub state: char,
    pub ppid: u32,
    /// Clock ticks after boot: tells a reused pid apart.
    pub start_ticks: u64,
}

impl Stat {
    /// Exited: a zombie not reaped yet, or dead.
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// `/proc/<pid>/stat`; `None` once the process is gone.
pub fn stat(pid: u32) -> Option<Stat> {
    stat_at(format!("/proc/{pid}/stat"))
}

/// The stat file at `path` (a process's or a thread's).
pub fn stat_at(path: impl AsRef<Path>) -> Option<Stat> {
    parse(&std::fs::read_to_string(path).ok()?)
}

fn parse(text: &str) -> Option<Stat> {
    // `pid (comm) state ppid ...`: field N (1-based, as proc(5) numbers
    // them) is the (N - 3)th after the command name.
    let mut fields = text.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let start_ticks = fields.nth(22 - 5)?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        start_ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_from_the_last_parenthesis() {
        let line = "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 3 0 12345 1000 50";
        let stat = parse(line).unwrap();
        assert_eq!(
            stat,
            Stat {
                state: 'S',
                ppid: 7,
                start_ticks: 12345
            }
        );
        assert!(!stat.exited());
        assert!(parse("42 (x) Z 1").is_none());
    }

    #[test]
    fn this_process_is_running() {
        let me = stat(std::process::id()).unwrap();
        assert_eq!(me.ppid, std::os::unix::process::parent_id());
        assert!(!me.exited());
    }
}
