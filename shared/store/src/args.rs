//! Where the two stores live: the command-line settings of every process
//! that opens them.

use clap::Args;
use shared::cli::ChildSettings;

/// Where the two stores live. Global: a tool with subcommands (`pages`)
/// takes them after its verb too, as its users type them.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Primary MongoDB: seeds, frontier, pages.
    /// A URI with a password belongs in the environment, not on the
    /// command line, where `ps` shows it to every user of the machine.
    #[arg(
        long,
        global = true,
        env = "CRAWLER_MONGO_URI",
        default_value = "mongodb://127.0.0.1:27017",
        hide_env_values = true
    )]
    pub mongo_uri: String,
    /// Database name in the primary store.
    #[arg(long, global = true, env = "CRAWLER_DB", default_value = "crawler")]
    pub db: String,
    /// Second store (robots.txt, per-domain last-crawled times); defaults to
    /// the primary server.
    #[arg(long, global = true, env = "CRAWLER_ROBOTS_URI", hide_env_values = true)]
    pub robots_uri: Option<String>,
    /// Database name in the second store.
    #[arg(
        long,
        global = true,
        env = "CRAWLER_ROBOTS_DB",
        default_value = "crawler_robots"
    )]
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use shared::cli::ObsArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        obs: ObsArgs,
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
