//! Command-line settings every process shares (clap `Args` to flatten).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::cluster_auth::{ClusterKey, SECRET_ENV};
use crate::timing::TimingConfig;

/// Where the two stores live.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Primary MongoDB: seeds, frontier, pages.
    /// A URI with a password belongs in the environment, not on the
    /// command line, where `ps` shows it to every user of the machine.
    #[arg(
        long,
        env = "CRAWLER_MONGO_URI",
        default_value = "mongodb://127.0.0.1:27017",
        hide_env_values = true
    )]
    pub mongo_uri: String,
    /// Database name in the primary store.
    #[arg(long, env = "CRAWLER_DB", default_value = "crawler")]
    pub db: String,
    /// Second store (robots.txt, per-domain last-crawled times); defaults to
    /// the primary server.
    #[arg(long, env = "CRAWLER_ROBOTS_URI", hide_env_values = true)]
    pub robots_uri: Option<String>,
    /// Database name in the second store.
    #[arg(long, env = "CRAWLER_ROBOTS_DB", default_value = "crawler_robots")]
    pub robots_db: String,
}

impl StoreArgs {
    /// The arguments that reproduce these settings in a child process,
    /// and the environment that carries its secrets: the URIs (which may
    /// hold passwords) go through the environment, never on its command
    /// line.
    pub fn to_child(&self) -> ChildSettings {
        let mut env = vec![("CRAWLER_MONGO_URI", self.mongo_uri.clone())];
        if let Some(uri) = &self.robots_uri {
            env.push(("CRAWLER_ROBOTS_URI", uri.clone()));
        }
        ChildSettings {
            args: vec![
                "--db".into(),
                self.db.clone(),
                "--robots-db".into(),
                self.robots_db.clone(),
            ],
            env,
        }
    }
}

/// How a child process gets a setting: arguments for what may be seen,
/// environment variables for secrets.
#[derive(Debug, Default, PartialEq)]
pub struct ChildSettings {
    pub args: Vec<String>,
    pub env: Vec<(&'static str, String)>,
}

impl ChildSettings {
    pub fn extend(&mut self, other: ChildSettings) {
        self.args.extend(other.args);
        self.env.extend(other.env);
    }
}

/// The cluster secret that dispatcher and supervisors prove to each other
/// (see [`crate::cluster_auth`]). There is deliberately no flag that takes
/// the secret itself: a command line is visible to every user of the
/// machine (`ps`), so it comes from a file or from `CRAWLER_CLUSTER_SECRET`.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// File holding the cluster secret (at least 16 bytes; surrounding
    /// whitespace ignored; `openssl rand -hex 32 > FILE; chmod 600 FILE`).
    /// Or put the secret in the environment variable CRAWLER_CLUSTER_SECRET.
    /// The dispatcher and every supervisor need the same one.
    #[arg(long, env = "CRAWLER_CLUSTER_SECRET_FILE", value_name = "PATH")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Run without a cluster secret: anyone who can reach the dispatcher's
    /// port can then join, take work and report results. Only for a
    /// machine whose ports nobody else can reach. Both sides must say it.
    #[arg(long)]
    pub insecure_cluster: bool,
}

impl ClusterArgs {
    /// The key, from the file or the environment (`env`: the value of
    /// `CRAWLER_CLUSTER_SECRET`). No secret and no `--insecure-cluster` is
    /// an error: a cluster that anyone could join must be asked for.
    /// Errors never quote the secret.
    pub fn key(&self, env: Option<std::ffi::OsString>) -> anyhow::Result<ClusterKey> {
        let from_env = env.filter(|v| !v.is_empty());
        match (&self.cluster_secret_file, from_env, self.insecure_cluster) {
            (Some(_), Some(_), _) => anyhow::bail!(
                "both --cluster-secret-file and {SECRET_ENV} are set; give the cluster secret one way"
            ),
            (Some(_), None, true) | (None, Some(_), true) => {
                anyhow::bail!("--insecure-cluster and a cluster secret both given; pick one")
            }
            (Some(path), None, false) => {
                warn_if_readable_by_others(path);
                let raw = std::fs::read(path)
                    .with_context(|| format!("reading the cluster secret file {}", path.display()))?;
                ClusterKey::from_secret(&raw)
                    .with_context(|| format!("cluster secret file {}", path.display()))
            }
            (None, Some(value), false) => {
                use std::os::unix::ffi::OsStrExt;
                ClusterKey::from_secret(value.as_bytes()).context(SECRET_ENV)
            }
            (None, None, true) => Ok(ClusterKey::insecure()),
            (None, None, false) => anyhow::bail!(
                "no cluster secret: give --cluster-secret-file PATH or set {SECRET_ENV} \
                 (the same on the dispatcher and every supervisor; e.g. `openssl rand -hex 32`), \
                 or pass --insecure-cluster to let anyone who reaches the port join"
            ),
        }
    }
}

/// A secret file others can read is no longer only ours: say so (as ssh
/// does for keys), but go on, since the operator may know why.
fn warn_if_readable_by_others(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                file = %path.display(),
                mode = format!("{:o}", mode & 0o777),
                "the cluster secret file should be readable by its owner only (chmod 600)"
            );
        }
    }
}

/// Observability: debug endpoint and timing log.
#[derive(Debug, Clone, Args)]
pub struct ObsArgs {
    /// Node name in logs and metrics (defaults to the host name).
    #[arg(long, env = "CRAWLER_NODE")]
    pub node: Option<String>,
    /// Address of /debug/pprof and /metrics (port 0 = any free port).
    #[arg(long, env = "CRAWLER_DEBUG_ADDR", default_value = "127.0.0.1:0")]
    pub debug_addr: SocketAddr,
    /// Bearer token for the debug endpoint; required off loopback.
    #[arg(long, env = "CRAWLER_DEBUG_TOKEN", hide_env_values = true)]
    pub debug_token: Option<String>,
    /// JSON-lines timing log; a directory gets `<role>-<pid>.jsonl` inside it.
    #[arg(long, env = "CRAWLER_TIMING_LOG")]
    pub timing_log: Option<PathBuf>,
    /// Fraction of operations written to the timing log.
    #[arg(long, env = "CRAWLER_TIMING_SAMPLE", default_value_t = 1.0)]
    pub timing_sample: f64,
    /// Also write the URL on each timing line.
    #[arg(long, env = "CRAWLER_LOG_URLS")]
    pub log_urls: bool,
}

impl ObsArgs {
    pub fn node_name(&self) -> String {
        self.node.clone().unwrap_or_else(hostname)
    }

    pub fn timing_config(&self, role: &str) -> TimingConfig {
        let path = self.timing_log.as_ref().map(|p| {
            if p.is_dir() || p.as_os_str().to_string_lossy().ends_with('/') {
                p.join(format!("{role}-{}.jsonl", std::process::id()))
            } else {
                p.clone()
            }
        });
        TimingConfig {
            path,
            node: self.node_name(),
            role: role.to_string(),
            sample_rate: self.timing_sample,
            log_urls: self.log_urls,
        }
    }

    /// Settings for a child process: same node, token and log directory,
    /// but its own free debug port. The token goes in the environment.
    pub fn to_child(&self) -> ChildSettings {
        let mut v = vec!["--node".into(), self.node_name()];
        let ip = self.debug_addr.ip();
        v.extend(["--debug-addr".into(), SocketAddr::new(ip, 0).to_string()]);
        let env = self
            .debug_token
            .iter()
            .map(|t| ("CRAWLER_DEBUG_TOKEN", t.clone()))
            .collect();
        if let Some(p) = &self.timing_log {
            // Children share the directory; each writes its own file.
            let dir = if p.is_dir() {
                p.clone()
            } else {
                p.parent().map(PathBuf::from).unwrap_or_default()
            };
            let mut s = dir.to_string_lossy().into_owned();
            if !s.ends_with('/') {
                s.push('/');
            }
            v.extend(["--timing-log".into(), s]);
        }
        v.extend(["--timing-sample".into(), self.timing_sample.to_string()]);
        if self.log_urls {
            v.push("--log-urls".into());
        }
        ChildSettings { args: v, env }
    }
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        obs: ObsArgs,
        #[command(flatten)]
        cluster: ClusterArgs,
    }

    #[test]
    fn the_cluster_secret_comes_from_a_file_or_the_environment_never_argv() {
        use clap::CommandFactory;
        let dir = tempfile_dir();
        let file = dir.join("secret");
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        let with_file = Cli::parse_from(["x", "--cluster-secret-file", file.to_str().unwrap()]);
        assert!(!with_file.cluster.key(None).unwrap().is_insecure());
        // From the environment.
        let none = Cli::parse_from(["x"]);
        assert!(none.cluster.key(Some("0123456789abcdef0123".into())).is_ok());
        // Nothing given: refused, unless asked for an insecure cluster.
        let err = none.cluster.key(None).unwrap_err().to_string();
        assert!(err.contains("--insecure-cluster"), "{err}");
        let insecure = Cli::parse_from(["x", "--insecure-cluster"]);
        assert!(insecure.cluster.key(None).unwrap().is_insecure());
        // Two sources, or a secret and --insecure-cluster: ambiguous, refused.
        assert!(with_file
            .cluster
            .key(Some("0123456789abcdef0123".into()))
            .is_err());
        assert!(insecure.cluster.key(Some("0123456789abcdef0123".into())).is_err());
        // A short secret is refused without being quoted.
        let err = format!("{:#}", none.cluster.key(Some("hunter2".into())).unwrap_err());
        assert!(err.contains("7 bytes") && !err.contains("hunter2"), "{err}");
        // There is no flag that takes the secret itself.
        assert!(Cli::try_parse_from(["x", "--cluster-secret", "0123456789abcdef0123"]).is_err());
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains("--cluster-secret-file") && help.contains("CRAWLER_CLUSTER_SECRET"),
            "{help}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cluster-secret-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn secrets_go_to_children_in_the_environment_not_in_their_arguments() {
        let cli = Cli::parse_from([
            "x",
            "--mongo-uri",
            "mongodb://u:pw1@db/",
            "--robots-uri",
            "mongodb://u:pw2@db2/",
            "--debug-token",
            "tok3",
        ]);
        let mut child = cli.store.to_child();
        child.extend(cli.obs.to_child());
        let args = child.args.join(" ");
        for secret in ["pw1", "pw2", "tok3"] {
            assert!(!args.contains(secret), "{secret} in {args}");
        }
        assert_eq!(
            child.env,
            [
                ("CRAWLER_MONGO_URI", "mongodb://u:pw1@db/".to_string()),
                ("CRAWLER_ROBOTS_URI", "mongodb://u:pw2@db2/".to_string()),
                ("CRAWLER_DEBUG_TOKEN", "tok3".to_string()),
            ]
        );
        // The child reads them back from there.
        let back = Cli::try_parse_from(std::iter::once("x".to_string()).chain(child.args.iter().cloned()));
        assert!(back.is_ok());
    }
}
