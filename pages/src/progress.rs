//! What an export tells the person waiting for it: a progress bar on a
//! terminal (pages done of pages to go, rate, time left), and a plain line
//! every few seconds when stderr is a log file, where a bar would only
//! write escape codes.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often the plain line is written when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
    done: u64,
    /// The file the bar names.
    file: PathBuf,
}

impl Progress {
    /// `done` pages were exported before (a resumed export); `total` is
    /// how many the export holds in all, when the store could say.
    pub(crate) fn new(done: u64, total: Option<u64>) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(t) => ProgressBar::new(t.max(done)).with_style(
                    ProgressStyle::with_template("{bar:40} {pos}/{len} pages  {per_sec}  {eta} left  {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("{spinner} {pos} pages  {per_sec}  {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                ),
            };
            bar.set_position(done);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            started: now,
            last_line: now,
            done,
            file: PathBuf::new(),
        }
    }

    /// One more page written to `file`.
    pub(crate) fn page(&mut self, file: &Path) {
        self.done = self.done.saturating_add(1);
        match &self.bar {
            Some(bar) => {
                bar.set_position(self.done);
                if self.file != file {
                    self.file = file.to_path_buf();
                    bar.set_message(file.display().to_string());
                }
            }
            None if self.last_line.elapsed() >= LINE_EVERY => {
                self.last_line = Instant::now();
                eprintln!(
                    "pages: {} pages exported ({:.0}/s), {}",
                    self.done,
                    self.done as f64 / self.started.elapsed().as_secs_f64(),
                    file.display()
                );
            }
            None => {}
        }
    }

    /// Takes the bar off the terminal; returns the time since the start.
    pub(crate) fn finish(self) -> Duration {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        self.started.elapsed()
    }
}
