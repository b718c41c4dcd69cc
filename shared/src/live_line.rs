//! One progress line kept in place at the bottom of a terminal.
//!
//! A crawl prints its progress every few seconds; on a terminal that is a
//! wall that scrolls away what matters (warnings, the monitor's lines).
//! When stderr is a terminal, [`progress`] redraws one line in place and
//! every other line this process writes to stderr ([`line`], and the log
//! lines of [`crate::logging`]) is printed above it. When stderr is a file
//! or a pipe (a log, CI, the tests, which read these lines) every progress
//! line is written in full, as it always was.
//!
//! The line is drawn with the cursor left at its start, so a line another
//! process writes to the same terminal (a supervisor started beside the
//! dispatcher) overwrites it rather than running on after it.

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, OnceLock};

/// Clears the terminal's current line and puts the cursor at its start.
const CLEAR: &[u8] = b"\r\x1b[2K";
/// Columns assumed when the terminal does not say.
const DEFAULT_WIDTH: usize = 100;

/// The line on screen, when stderr is a terminal (`None` otherwise).
fn live() -> Option<&'static Mutex<String>> {
    static LIVE: OnceLock<Option<Mutex<String>>> = OnceLock::new();
    LIVE.get_or_init(|| std::io::stderr().is_terminal().then(|| Mutex::new(String::new())))
        .as_ref()
}

/// The terminal's width in columns (of stderr).
fn width() -> usize {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes a `winsize` into the pointer it is given,
    // which is valid for the call.
    let rc = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) };
    if rc == 0 && size.ws_col > 0 {
        usize::from(size.ws_col)
    } else {
        DEFAULT_WIDTH
    }
}

/// `line` cut to fit `width` columns less one (a line that fills the last
/// column would wrap on some terminals), on a character boundary.
fn fit(line: &str, width: usize) -> &str {
    let max = width.saturating_sub(1);
    match line.char_indices().nth(max) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

/// What to write to show `line` as the live line.
fn draw(out: &mut impl Write, line: &str, width: usize) -> std::io::Result<()> {
    out.write_all(CLEAR)?;
    out.write_all(fit(line, width).as_bytes())?;
    out.write_all(b"\r")
}

/// What to write to print `text` (whole lines) above the live line `live`.
fn above(out: &mut impl Write, text: &[u8], live: &str, width: usize) -> std::io::Result<()> {
    if live.is_empty() {
        return out.write_all(text);
    }
    out.write_all(CLEAR)?;
    out.write_all(text)?;
    if text.ends_with(b"\n") {
        draw(out, live, width)?;
    }
    Ok(())
}

/// Shows `line` as the crawl's progress: in place on a terminal, as a
/// line of its own otherwise.
pub fn progress(line: &str) {
    let Some(live) = live() else {
        eprintln!("{line}");
        return;
    };
    let Ok(mut current) = live.lock() else {
        return;
    };
    let mut err = std::io::stderr().lock();
    let _ = draw(&mut err, line, width()).and_then(|()| err.flush());
    current.clear();
    current.push_str(line);
}

/// Prints `line` in full, above the progress line when there is one.
pub fn line(line: &str) {
    write_above(format!("{line}\n").as_bytes());
}

/// Writes `text` to stderr above the progress line (the log's writer).
pub fn write_above(text: &[u8]) {
    let mut err = std::io::stderr().lock();
    match live().and_then(|l| l.lock().ok()) {
        Some(current) => {
            let _ = above(&mut err, text, &current, width());
        }
        None => {
            let _ = err.write_all(text);
        }
    }
    let _ = err.flush();
}

/// Ends the progress line, leaving it on screen with the cursor below it,
/// so what follows (the summary) starts on a line of its own.
pub fn finish() {
    let Some(mut current) = live().and_then(|l| l.lock().ok()) else {
        return;
    };
    if !current.is_empty() {
        let mut err = std::io::stderr().lock();
        let _ = above(&mut err, b"", &current, width())
            .and_then(|()| err.write_all(fit(&current, width()).as_bytes()))
            .and_then(|()| err.write_all(b"\n"));
        current.clear();
    }
}

/// The log's writer: stderr, with each log line printed above the
/// progress line.
#[derive(Debug, Clone, Copy, Default)]
pub struct AboveLive;

impl Write for AboveLive {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_above(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for AboveLive {
    type Writer = AboveLive;

    fn make_writer(&'w self) -> AboveLive {
        *self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_line_is_cut_to_the_terminal_and_leaves_the_cursor_at_its_start() {
        let mut out = Vec::new();
        draw(&mut out, "pages 120 of 900, 45/s", 12).unwrap();
        assert_eq!(out, b"\r\x1b[2Kpages 120 o\r");
        // Cut on a character, not a byte.
        assert_eq!(fit("ééé", 3), "éé");
        assert_eq!(fit("short", 100), "short");
    }

    #[test]
    fn another_line_clears_the_live_line_and_draws_it_again_below() {
        let mut out = Vec::new();
        above(&mut out, b"WARN something\n", "progress", 80).unwrap();
        assert_eq!(out, b"\r\x1b[2KWARN something\n\r\x1b[2Kprogress\r");
        // No live line: the text alone.
        let mut out = Vec::new();
        above(&mut out, b"line\n", "", 80).unwrap();
        assert_eq!(out, b"line\n");
    }
}
