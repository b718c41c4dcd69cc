//! The cluster secret's command-line settings.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::cluster_auth::{ClusterKey, SECRET_ENV, SECRET_FILE_ENV};

/// The cluster secret that dispatcher and supervisors prove to each other
/// (see [`crate::cluster_auth`]). There is deliberately no flag that takes
/// the secret itself: a command line is visible to every user of the
/// machine (`ps`), so it comes from a file or from `CRAWLER_CLUSTER_SECRET`.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// File holding the cluster secret (at least 32 random bytes; surrounding
    /// whitespace ignored; `openssl rand -hex 32 > FILE; chmod 600 FILE`).
    /// Or put the secret in the environment variable CRAWLER_CLUSTER_SECRET.
    /// The dispatcher and every supervisor need the same one.
    #[arg(long, env = SECRET_FILE_ENV, value_name = "PATH")]
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cluster: ClusterArgs,
    }

    #[test]
    fn the_cluster_secret_comes_from_a_file_or_the_environment_never_argv() {
        use clap::CommandFactory;
        let dir = tempfile_dir();
        let file = dir.join("secret");
        std::fs::write(
            &file,
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
        )
        .unwrap();
        let with_file = Cli::parse_from(["x", "--cluster-secret-file", file.to_str().unwrap()]);
        assert!(!with_file.cluster.key(None).unwrap().is_insecure());
        // From the environment.
        let none = Cli::parse_from(["x"]);
        assert!(none
            .cluster
            .key(Some(
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into()
            ))
            .is_ok());
        // Nothing given: refused, unless asked for an insecure cluster.
        let err = none.cluster.key(None).unwrap_err().to_string();
        assert!(err.contains("--insecure-cluster"), "{err}");
        let insecure = Cli::parse_from(["x", "--insecure-cluster"]);
        assert!(insecure.cluster.key(None).unwrap().is_insecure());
        // Two sources, or a secret and --insecure-cluster: ambiguous, refused.
        assert!(with_file
            .cluster
            .key(Some(
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into()
            ))
            .is_err());
        assert!(insecure
            .cluster
            .key(Some(
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into()
            ))
            .is_err());
        // A short secret is refused without being quoted.
        let err = format!("{:#}", none.cluster.key(Some("hunter2".into())).unwrap_err());
        assert!(err.contains("7 bytes") && !err.contains("hunter2"), "{err}");
        // There is no flag that takes the secret itself.
        assert!(Cli::try_parse_from([
            "x",
            "--cluster-secret",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        ])
        .is_err());
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
}
