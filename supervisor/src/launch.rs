//! How a slot starts its crawler child: the seam between the slot's
//! supervision (`child.rs`: configure, feed, watch, stop, restart) and what
//! a child *is*.
//!
//! The binary starts each child as a process ([`Processes`]): a crash, a
//! hang or a leak in code that parses the open web's pages takes only that
//! child down, and the kernel kills it with its supervisor. A test can
//! start children as tasks of its own process instead (any [`Launch`] that
//! hands back a pipe pair), so that a whole cluster runs in one test
//! process and a change in one role is checked without building and
//! spawning release binaries (`tests/src/in_process.rs`). Everything the
//! slot does with its child goes through [`Launched`], so both are
//! supervised alike.

use std::fmt;
use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Starts a child for a slot.
pub trait Launch: Send + Sync + 'static {
    /// Starts one child with `how`; the slot configures it, feeds it and
    /// watches it through what comes back.
    fn launch(&self, how: &ChildCommand<'_>) -> std::io::Result<Launched>;
}

/// What a child is started with: the program, its arguments and its
/// environment (secrets travel there, never in the arguments).
#[derive(Debug, Clone, Copy)]
pub struct ChildCommand<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: &'a [(&'static str, String)],
}

/// A started child: the pipe the slot writes `ToChild` frames to, the one
/// it reads `FromChild` frames from, and the child itself.
pub struct Launched {
    pub input: Box<dyn AsyncWrite + Send + Unpin>,
    pub output: Box<dyn AsyncRead + Send + Unpin>,
    pub running: Running,
}

/// A running child, as the slot kills and waits for it. Dropping it ends
/// the child, whichever kind it is: a process is started with
/// `kill_on_drop`, and a task is aborted (`Drop` below), so a slot that
/// goes away (a supervisor's run ending on an error, a test's cluster
/// dropped) leaves no child crawling unsupervised.
pub enum Running {
    Process(Child),
    /// A child as a task of this process; it ends with its run's outcome.
    Task(JoinHandle<anyhow::Result<()>>),
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Task(task) = self {
            task.abort();
        }
    }
}

/// How a child ended.
#[derive(Debug)]
pub enum Exit {
    Process(std::process::ExitStatus),
    /// A task's run returned (`Ok`) or failed, panicked or was aborted.
    Task(Result<(), String>),
}

impl Exit {
    pub fn success(&self) -> bool {
        match self {
            Exit::Process(status) => status.success(),
            Exit::Task(outcome) => outcome.is_ok(),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Process(status) => write!(f, "{status}"),
            Exit::Task(Ok(())) => f.write_str("task ended"),
            Exit::Task(Err(e)) => write!(f, "task failed: {e}"),
        }
    }
}

impl Running {
    /// Asks for the child's end without waiting for it: SIGKILL for a
    /// process, an abort for a task.
    pub fn start_kill(&mut self) {
        match self {
            Running::Process(child) => {
                let _ = child.start_kill();
            }
            Running::Task(task) => task.abort(),
        }
    }

    /// Waits for the child to end (callers bound the wait).
    pub async fn wait(&mut self) -> std::io::Result<Exit> {
        match self {
            Running::Process(child) => child.wait().await.map(Exit::Process),
            Running::Task(task) => Ok(Exit::Task(match task.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("{e:#}")),
                Err(e) => Err(e.to_string()),
            })),
        }
    }
}

/// Children as processes, what the binary runs.
pub struct Processes;

impl Launch for Processes {
    fn launch(&self, how: &ChildCommand<'_>) -> std::io::Result<Launched> {
        let mut cmd = Command::new(how.program);
        cmd.args(how.args)
            .envs(how.env.iter().map(|(k, v)| (k, v)))
            // A child parses pages from the open web; it never needs the
            // cluster secret, nor where it is (main() already removed both;
            // this keeps it so).
            .env_remove(link::cluster_auth::SECRET_ENV)
            .env_remove(link::cluster_auth::SECRET_FILE_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        die_with_parent(&mut cmd);
        let mut child = cmd.spawn()?;
        let input = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let output = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Launched {
            input: Box::new(input),
            output: Box::new(output),
            running: Running::Process(child),
        })
    }
}

/// Has the kernel kill the child when this supervisor dies (even by
/// SIGKILL, which runs no cleanup). An orphaned child would crawl on,
/// unpaced by anyone, while the dispatcher hands its domains to another
/// supervisor: two crawlers on one site. Its pages are stored as they
/// come, so killing it loses nothing.
fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls (prctl, getppid) between
        // fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("supervisor died while starting a child"));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task child is killed by an abort and says so; one that returned
    /// is a success.
    #[tokio::test]
    async fn a_task_child_is_aborted_by_a_kill_and_reports_its_end() {
        let mut forever = Running::Task(tokio::spawn(async {
            std::future::pending::<()>().await;
            Ok(())
        }));
        forever.start_kill();
        let exit = forever.wait().await.expect("joined");
        assert!(!exit.success(), "{exit}");
        let mut done = Running::Task(tokio::spawn(async { Ok(()) }));
        assert!(done.wait().await.expect("joined").success());
        let mut failed = Running::Task(tokio::spawn(async { anyhow::bail!("no store") }));
        let exit = failed.wait().await.expect("joined");
        assert_eq!(exit.to_string(), "task failed: no store");
    }

    /// A task child dropped with its slot ends, as a process child
    /// (`kill_on_drop`) does: what it holds is dropped with it.
    #[tokio::test]
    async fn a_task_child_ends_when_it_is_dropped() {
        let (held, released) = tokio::sync::oneshot::channel::<()>();
        let running = Running::Task(tokio::spawn(async move {
            let _held = held;
            std::future::pending::<()>().await;
            Ok(())
        }));
        drop(running);
        // The task's end drops `held`, which closes the channel.
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), released).await;
        assert!(
            matches!(ended, Ok(Err(_))),
            "the task still runs after its Running was dropped"
        );
    }

    /// A process child is started with its pipes, and its exit status is
    /// seen.
    #[tokio::test]
    async fn a_process_child_has_its_pipes_and_its_status() {
        let launched = Processes
            .launch(&ChildCommand {
                program: Path::new("/bin/sh"),
                args: &["-c".into(), "exit 3".into()],
                env: &[],
            })
            .expect("sh starts");
        let mut running = launched.running;
        let exit = running.wait().await.expect("waited");
        assert!(!exit.success());
        assert!(exit.to_string().contains('3'), "{exit}");
    }
}
