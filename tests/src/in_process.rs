//! A whole cluster in the test process: the dispatcher, the supervisors
//! and their children run as tasks of it ([`dispatcher::run`],
//! [`supervisor::run_with`], [`crawler_child::run_on`]) over real ZeroMQ
//! sockets on 127.0.0.1, a real store server and the test's web, from the
//! same [`ClusterSpec`] as [`crate::harness::spawn_crawl`] and the same
//! command lines, parsed by the roles' own `from_args`.
//!
//! What it leaves out is what only processes have: signals, kill -9, exit
//! codes, network namespaces, the environment (a spec with `env` or
//! `dispatcher_env` is refused: one process has one environment), the
//! children's fault hooks, and a log or timing file per process. Tests of
//! those spawn the binaries. What it gives: a change in any role is
//! checked end to end by `cargo test` alone, without the release binaries
//! (and a debugger or a profiler sees every role in one process).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::future::BoxFuture;
use shared::shutdown::{Shutdown, Trigger};
use supervisor::launch::{ChildCommand, Launch, Launched, Running};
use tokio::task::JoinHandle;

use crate::harness::{flag_value, free_port, ClusterSpec};

/// Bytes buffered in each direction between a supervisor and a task
/// child, as a pipe's.
const PIPE_BYTES: usize = 64 * 1024;

/// Starts each child as a task running [`crawler_child::run_on`] over a
/// pair of in-memory pipes, with the command line and environment the
/// supervisor would start its process with.
pub struct TaskChildren;

impl Launch for TaskChildren {
    fn launch(&self, how: &ChildCommand<'_>) -> std::io::Result<Launched> {
        let config = crawler_child::Config::from_command(how.args, how.env)
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let (to_child, from_supervisor) = tokio::io::duplex(PIPE_BYTES);
        let (to_supervisor, from_child) = tokio::io::duplex(PIPE_BYTES);
        // The child stops when its supervisor closes the pipe, as a
        // process does when its stdin closes; the trigger is never pulled.
        let (trigger, shutdown) = Shutdown::new();
        let task = tokio::spawn(async move {
            let outcome = crawler_child::run_on(config, shutdown, from_supervisor, to_supervisor).await;
            drop(trigger);
            outcome
        });
        Ok(Launched {
            input: Box::new(to_child),
            output: Box::new(from_child),
            running: Running::Task(task),
        })
    }
}

/// How each role's run ended (`crate::verify` checks it, as a process run).
#[derive(Debug)]
pub struct InProcessRun {
    pub dispatcher: Result<(), String>,
    pub supervisors: Vec<Result<(), String>>,
    /// The dispatcher's summary (its `--summary-file`; `Null` if it wrote
    /// none). Its `store_work` counts the store work of every role: the
    /// counters are the process's.
    pub summary: serde_json::Value,
    pub wall: Duration,
}

/// Runs the crawl `spec` describes with every role in this process, to its
/// end or `timeout` (then every role is asked to stop, and the run is an
/// error).
/// Boxed: see the crate's doc.
pub fn run_in_process(spec: &ClusterSpec, timeout: Duration) -> BoxFuture<'_, anyhow::Result<InProcessRun>> {
    Box::pin(run_roles(spec, timeout))
}

async fn run_roles(spec: &ClusterSpec, timeout: Duration) -> anyhow::Result<InProcessRun> {
    if !spec.env.is_empty() || !spec.dispatcher_env.is_empty() {
        bail!("an in-process cluster has one environment: spawn the binaries for a spec with env");
    }
    if spec.netns.is_some() || spec.late_supervisors > 0 {
        bail!("network namespaces and late supervisors need processes: spawn the binaries");
    }
    let started = Instant::now();
    let endpoint = format!("tcp://127.0.0.1:{}", free_port());
    let secret = || Some(spec.cluster_secret.clone().into());
    let token_file = spec.debug_token_file().to_string_lossy().into_owned();
    let mut triggers: Vec<Trigger> = Vec::new();

    let mut argv = vec!["dispatcher".to_string()];
    argv.extend(spec.dispatcher_argv(&endpoint));
    argv.extend(["--debug-token-file".to_string(), token_file.clone()]);
    // The summary a process prints on its stdout, from a file instead.
    let summary_file = match flag_value(&spec.dispatcher_args, "--summary-file") {
        Some(path) => PathBuf::from(path),
        None => {
            let path = spec.run_dir().join("summary-in-process.json");
            argv.extend(["--summary-file".to_string(), path.to_string_lossy().into_owned()]);
            path
        }
    };
    // A summary left by an earlier run must not pass for this one's.
    match std::fs::remove_file(&summary_file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", summary_file.display()));
        }
        _ => {}
    }
    let config = dispatcher::config::load(argv.into_iter().map(Into::into).collect(), secret())
        .context("the dispatcher's command line")?;
    let (trigger, shutdown) = Shutdown::new();
    triggers.push(trigger);
    let dispatcher: JoinHandle<anyhow::Result<()>> = tokio::spawn(dispatcher::run(config, shutdown));

    let launcher: Arc<dyn Launch> = Arc::new(TaskChildren);
    let mut supervisors = Vec::new();
    for i in 0..spec.supervisors {
        let mut argv = vec!["supervisor".to_string()];
        argv.extend(spec.supervisor_argv(&endpoint, i));
        argv.extend(["--debug-token-file".to_string(), token_file.clone()]);
        let config = supervisor::Config::from_args(argv, secret())
            .with_context(|| format!("supervisor {i}'s command line"))?;
        let (trigger, shutdown) = Shutdown::new();
        triggers.push(trigger);
        supervisors.push(tokio::spawn(supervisor::run_with(
            config,
            shutdown,
            launcher.clone(),
        )));
    }

    let deadline = tokio::time::Instant::now() + timeout;
    let dispatcher = match tokio::time::timeout_at(deadline, dispatcher).await {
        Ok(joined) => ended(joined),
        Err(_) => {
            triggers.iter().for_each(Trigger::stop);
            bail!("the crawl did not end within {timeout:?}; every role was asked to stop");
        }
    };
    // The supervisors end once the dispatcher has told them the crawl is
    // over; a supervisor still there is asked to stop.
    let mut ends = Vec::new();
    for (i, s) in supervisors.into_iter().enumerate() {
        let s = match tokio::time::timeout_at(deadline, s).await {
            Ok(joined) => ended(joined),
            Err(_) => {
                triggers.iter().for_each(Trigger::stop);
                bail!("supervisor {i} did not end within {timeout:?} of the start");
            }
        };
        ends.push(s);
    }
    let summary = match std::fs::read(&summary_file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("the dispatcher's summary {}", summary_file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Value::Null,
        Err(e) => return Err(e).with_context(|| format!("reading {}", summary_file.display())),
    };
    Ok(InProcessRun {
        dispatcher,
        supervisors: ends,
        summary,
        wall: started.elapsed(),
    })
}

fn ended(joined: Result<anyhow::Result<()>, tokio::task::JoinError>) -> Result<(), String> {
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(e) => Err(format!("the task failed: {e}")),
    }
}
