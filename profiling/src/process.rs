//! CPU, memory and file descriptors of this process and of the machine, read from Linux `/proc`.
//!
//! A crawler that slows down over hours shows why only in numbers taken over time: its CPU
//! seconds, resident memory and open sockets. These are what Prometheus client libraries in
//! other languages export as `process_*` (see [`crate::metrics`]), read the same way, and
//! what timing logs write once a second next to the machine's busy CPU, so one process's
//! share of the machine can be told from its own lines.
//!
//! Every read is fallible in quiet ways (another OS, a `/proc` without some field, a
//! container hiding `/proc/stat`), and none of it is worth a crash: each function gives
//! `None` rather than a guess, and parses with checked arithmetic. The parsers take the
//! file text, so the tests pin them on fixed strings.

/// This process's resources at one moment, in the units of Prometheus's `process_*` metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessSample {
    /// User plus system CPU time used so far, all threads (`utime + stime` of
    /// `/proc/self/stat`), in seconds, with the kernel's tick resolution (usually 10 ms).
    pub cpu_seconds: f64,
    /// Resident set size: pages in RAM, times the page size.
    pub resident_bytes: u64,
    /// Virtual memory size (address space mapped, most of it never touched).
    pub virtual_bytes: u64,
    /// Open file descriptors: entries of `/proc/self/fd`, counting, as Prometheus client
    /// libraries do, the one open to list that directory.
    pub open_fds: u64,
    /// The soft `RLIMIT_NOFILE`: where `open` and `accept` start failing with `EMFILE`.
    pub max_fds: u64,
    /// When the process started, in seconds since the Unix epoch (to the tick).
    pub start_time_seconds: f64,
}

/// The machine's CPU use since boot, all cores together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MachineCpu {
    /// CPU seconds spent on anything but idling and waiting for I/O, summed over all cores.
    /// The difference of two readings divided by the seconds between them is the number of
    /// cores kept busy.
    pub busy_seconds: f64,
    /// Online cores (the `cpuN` lines of `/proc/stat`).
    pub cores: u64,
}

/// Reads this process's CPU time, memory, descriptors and start time from `/proc`.
///
/// `None` off Linux, or when a file cannot be read or parsed. Costs a few small reads and
/// one directory listing: fine once a second or once per scrape.
pub fn process_sample() -> Option<ProcessSample> {
    #[cfg(target_os = "linux")]
    {
        linux::process_sample()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Reads the machine's busy CPU seconds and core count from `/proc/stat`.
///
/// `None` off Linux, or when `/proc/stat` cannot be read or parsed.
pub fn machine_cpu() -> Option<MachineCpu> {
    #[cfg(target_os = "linux")]
    {
        linux::machine_cpu()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// This process's CPU seconds and resident bytes, and with `machine` the
/// machine's busy CPU seconds and cores, named as the timing log's gauge
/// lines name them (one such line per process per second is what
/// `scripts/oprates.py bottleneck` reads CPU use from). Empty where `/proc`
/// cannot be read.
pub fn gauge_values(machine: bool) -> Vec<(&'static str, f64)> {
    let mut values = Vec::with_capacity(4);
    if let Some(p) = process_sample() {
        values.push(("cpu_seconds", p.cpu_seconds));
        values.push(("rss_bytes", p.resident_bytes as f64));
    }
    if let Some(m) = machine.then(machine_cpu).flatten() {
        values.push(("machine_busy_seconds", m.busy_seconds));
        values.push(("machine_cores", m.cores as f64));
    }
    values
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{MachineCpu, ProcessSample};

    pub(super) fn process_sample() -> Option<ProcessSample> {
        let ticks = clock_ticks()?;
        let stat = super::parse_self_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        let btime = super::parse_btime(&std::fs::read_to_string("/proc/stat").ok()?)?;
        Some(ProcessSample {
            cpu_seconds: stat.cpu_ticks as f64 / ticks,
            resident_bytes: stat.rss_pages.checked_mul(page_size()?)?,
            virtual_bytes: stat.vsize_bytes,
            open_fds: open_fds()?,
            max_fds: max_fds()?,
            start_time_seconds: btime as f64 + stat.start_ticks as f64 / ticks,
        })
    }

    pub(super) fn cpu_seconds_of(pid: u32) -> Option<f64> {
        let stat = super::parse_self_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
        Some(stat.cpu_ticks as f64 / clock_ticks()?)
    }

    pub(super) fn machine_cpu() -> Option<MachineCpu> {
        let ticks = clock_ticks()?;
        let (busy, cores) = super::parse_machine_stat(&std::fs::read_to_string("/proc/stat").ok()?)?;
        Some(MachineCpu {
            busy_seconds: busy as f64 / ticks,
            cores,
        })
    }

    /// Clock ticks per second (`USER_HZ`), the unit of every CPU time in `/proc`: 100 on
    /// every common Linux, but asked for rather than assumed.
    fn clock_ticks() -> Option<f64> {
        // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (ticks > 0).then_some(ticks as f64)
    }

    /// Bytes per page, the unit of the resident size in `/proc/self/stat`.
    fn page_size() -> Option<u64> {
        // SAFETY: as above.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(size).ok().filter(|s| *s > 0)
    }

    fn open_fds() -> Option<u64> {
        let mut n = 0u64;
        for entry in std::fs::read_dir("/proc/self/fd").ok()? {
            entry.ok()?;
            n = n.checked_add(1)?;
        }
        Some(n)
    }

    fn max_fds() -> Option<u64> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is a valid, writable rlimit for the call to fill in.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        (rc == 0).then_some(limit.rlim_cur)
    }
}

/// CPU seconds another process has used so far, all threads (`utime + stime` of
/// `/proc/PID/stat`), as [`ProcessSample::cpu_seconds`] is for this one. `None` off Linux
/// or once the process is gone: a test watching a process it started (whether it spins or
/// waits) needs no more.
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        linux::cpu_seconds_of(pid)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// The fields of `/proc/self/stat` we use, in the file's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SelfStat {
    /// `utime + stime`, in clock ticks.
    cpu_ticks: u64,
    /// `starttime`: clock ticks after boot.
    start_ticks: u64,
    vsize_bytes: u64,
    rss_pages: u64,
}

/// Parses `/proc/<pid>/stat` (proc(5)).
///
/// Field 2, the command name, is in parentheses and may itself hold spaces and `)`, so the
/// fields are counted from the *last* `)`; the next field is 3 (`state`).
fn parse_self_stat(text: &str) -> Option<SelfStat> {
    let (_, after_comm) = text.rsplit_once(')')?;
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Field N (1-based, as proc(5) numbers them) is fields[N - 3].
    let field = |n: usize| -> Option<u64> { fields.get(n.checked_sub(3)?)?.parse().ok() };
    Some(SelfStat {
        cpu_ticks: field(14)?.checked_add(field(15)?)?,
        start_ticks: field(22)?,
        vsize_bytes: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The boot time (`btime`, seconds since the Unix epoch) from `/proc/stat`.
fn parse_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The machine's busy clock ticks and its number of cores, from `/proc/stat`.
///
/// The `cpu` line (all cores) is `user nice system idle iowait irq softirq steal guest
/// guest_nice`. Busy is everything but `idle` and `iowait`; `guest` and `guest_nice` are
/// left out too, because the kernel already counts them in `user` and `nice` (proc(5)).
/// Older kernels print fewer columns, so missing trailing ones count as 0.
fn parse_machine_stat(text: &str) -> Option<(u64, u64)> {
    let mut busy = None;
    let mut cores = 0u64;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("cpu") => {
                let mut ticks = fields.take(8).map(|v| v.parse::<u64>().ok());
                let mut total = 0u64;
                for i in 0..8 {
                    let v = match ticks.next() {
                        Some(v) => v?,
                        None if i >= 4 => 0,
                        None => return None,
                    };
                    // 3 is idle and 4 is iowait.
                    if i != 3 && i != 4 {
                        total = total.checked_add(v)?;
                    }
                }
                busy = Some(total);
            }
            Some(name) if is_core(name) => cores = cores.checked_add(1)?,
            _ => {}
        }
    }
    Some((busy?, cores))
}

/// `cpu0`, `cpu1`, ...: one line per online core.
fn is_core(name: &str) -> bool {
    name.strip_prefix("cpu")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line, with a command name that tries to break the parser.
    const SELF_STAT: &str = "4242 (crawler (child) 1) S 1 4242 4242 0 -1 4194560 2183 0 0 0 \
        250 75 0 0 20 0 9 0 123456 1073741824 5120 18446744073709551615 1 1 0 0 0 0 0 \
        4096 17663 0 0 0 17 1 0 0 0 0 0\n";

    const PROC_STAT: &str = "cpu  1000 20 300 50000 400 5 6 7 80 9\n\
        cpu0 500 10 150 25000 200 3 3 4 40 5\n\
        cpu1 500 10 150 25000 200 2 3 3 40 4\n\
        intr 123456 0 0\n\
        ctxt 987654\n\
        btime 1700000000\n\
        processes 4321\n\
        procs_running 2\n";

    #[test]
    fn self_stat_fields_are_counted_from_the_last_parenthesis() {
        let s = parse_self_stat(SELF_STAT).unwrap();
        assert_eq!(
            s,
            SelfStat {
                cpu_ticks: 325,
                start_ticks: 123456,
                vsize_bytes: 1_073_741_824,
                rss_pages: 5120,
            }
        );
    }

    #[test]
    fn self_stat_rejects_garbage() {
        assert_eq!(parse_self_stat(""), None);
        assert_eq!(parse_self_stat("4242 (x) S 1 2 3"), None);
        assert_eq!(parse_self_stat(&SELF_STAT.replace(" 250 ", " -250 ")), None);
        // utime + stime overflowing u64 is refused, not wrapped.
        let overflow = SELF_STAT.replace(" 250 75 ", &format!(" {} 75 ", u64::MAX));
        assert_eq!(parse_self_stat(&overflow), None);
    }

    #[test]
    fn btime() {
        assert_eq!(parse_btime(PROC_STAT), Some(1_700_000_000));
        assert_eq!(parse_btime("cpu 1 2 3 4\n"), None);
        assert_eq!(parse_btime("btime soon\n"), None);
    }

    #[test]
    fn machine_busy_leaves_out_idle_iowait_and_guest() {
        // user + nice + system + irq + softirq + steal = 1000 + 20 + 300 + 5 + 6 + 7.
        assert_eq!(parse_machine_stat(PROC_STAT), Some((1338, 2)));
    }

    #[test]
    fn machine_stat_of_an_old_kernel_has_fewer_columns() {
        assert_eq!(
            parse_machine_stat("cpu 10 1 5 100 3\ncpu0 10 1 5 100 3\n"),
            Some((16, 1))
        );
    }

    #[test]
    fn machine_stat_rejects_garbage() {
        assert_eq!(parse_machine_stat(""), None);
        assert_eq!(parse_machine_stat("cpu0 1 2 3 4 5\n"), None);
        assert_eq!(parse_machine_stat("cpu 1 2 3\n"), None);
        assert_eq!(parse_machine_stat("cpu 1 x 3 4 5\n"), None);
        let max = u64::MAX;
        assert_eq!(parse_machine_stat(&format!("cpu {max} 1 0 0 0\n")), None);
    }

    #[test]
    fn core_names() {
        assert!(is_core("cpu0") && is_core("cpu17"));
        assert!(!is_core("cpu") && !is_core("cpux") && !is_core("cpu1a"));
    }

    /// Spins until `done` says so, for at most 30 s (the machine may be busy with builds, so
    /// a fixed spin could get too little CPU to show).
    fn burn_until(mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut x = 1u64;
        while !done() {
            assert!(std::time::Instant::now() < deadline, "no CPU time showed in 30 s");
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
        }
    }

    /// This process's user + system CPU seconds from getrusage, to check the tick conversion.
    #[cfg(target_os = "linux")]
    fn rusage_cpu_seconds() -> f64 {
        // SAFETY: all-zero is a valid rusage, and getrusage only writes into it.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `r` is valid and writable.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) }, 0);
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        secs(r.ru_utime) + secs(r.ru_stime)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn live_process_sample() {
        let before = process_sample().expect("a process sample on Linux");
        burn_until(|| process_sample().expect("a sample").cpu_seconds >= before.cpu_seconds + 0.2);

        // Seconds, not ticks: the same CPU time getrusage reports (which counts exactly;
        // /proc rounds down to the tick).
        let low = rusage_cpu_seconds();
        let after = process_sample().expect("a process sample on Linux");
        let high = rusage_cpu_seconds();
        assert!(
            after.cpu_seconds > low - 0.05 && after.cpu_seconds <= high + 0.01,
            "cpu_seconds {} not within getrusage's {low}..{high}",
            after.cpu_seconds
        );
        assert!(after.resident_bytes > 0 && after.virtual_bytes >= after.resident_bytes);
        // stdin, stdout, stderr and the directory being listed, at least.
        assert!(
            after.open_fds >= 3 && after.open_fds <= after.max_fds,
            "{after:?}"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            after.start_time_seconds <= now + 1.0 && after.start_time_seconds > now - 3600.0,
            "the test process started in the last hour: {} (now {now})",
            after.start_time_seconds
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn live_machine_cpu() {
        let before = machine_cpu().expect("machine CPU on Linux");
        assert!(before.cores >= 1, "{before:?}");
        burn_until(|| {
            let now = machine_cpu().expect("machine CPU on Linux");
            assert_eq!(now.cores, before.cores);
            now.busy_seconds >= before.busy_seconds + 0.2
        });
    }
}
