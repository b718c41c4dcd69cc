//! What a child runs with, from its command line (the supervisor writes
//! it: `shared::cli::ObsArgs::to_child`, `NetArgs::to_child`, the store's
//! flags). Parsed here, in the library, so that a bad flag is an error a
//! caller gets (the binary prints it as clap does; a test running a child
//! in its own process sees it) rather than an exit.

use std::ffi::{OsStr, OsString};

use anyhow::Context;
use clap::{CommandFactory, Parser};
use shared::cli::{NetArgs, ObsArgs};
use store::StoreArgs;

use crate::resolve::HostOverrides;

/// What a child runs with: its stores, how it is observed, the host
/// names it dials somewhere else than DNS says, and the nameserver it asks
/// (`None`: the system's resolver). The crawl's own settings come from the
/// supervisor (`ToChild::Configure`), not from here.
#[derive(Debug)]
pub struct Config {
    pub store: StoreArgs,
    pub obs: ObsArgs,
    pub hosts: HostOverrides,
    pub dns_server: Option<std::net::SocketAddr>,
    /// Certificate authorities trusted besides the system's (`--ca-file`).
    pub extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
}

#[derive(Parser, Debug)]
#[command(
    name = "crawler-child",
    version,
    about = "Crawler child process: started by a supervisor, speaks on stdin/stdout"
)]
struct Args {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    obs: ObsArgs,
    #[command(flatten)]
    net: NetArgs,
}

impl Config {
    /// The config of the command line `argv` (its first item is the
    /// program's name). A bad flag, `--help` and `--version` are a
    /// `clap::Error` inside the error; a hosts file or CA file that cannot
    /// be read, an error saying which.
    pub fn from_args<I, T>(argv: I) -> anyhow::Result<Config>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args = Args::try_parse_from(argv)?;
        Ok(Config {
            hosts: HostOverrides::from_args(&args.net.resolve, &args.net.hosts_file)?,
            dns_server: args.net.dns_server,
            extra_roots: args.net.extra_roots()?,
            store: args.store,
            obs: args.obs,
        })
    }
}

impl Config {
    /// The config of a child started with `args` and `env` as a supervisor
    /// starts one (secrets in `env`), for a child that runs as a task of
    /// another process (`supervisor::launch`): there the environment is the
    /// host process's, so each `env` entry is given as the flag that reads
    /// that variable instead. Variables of the host's own environment that
    /// a flag reads still count where neither names that flag.
    pub fn from_command(args: &[String], env: &[(&str, String)]) -> anyhow::Result<Config> {
        let command = Args::command();
        let mut argv = vec![OsString::from("crawler-child")];
        for (name, value) in env {
            let flag = command
                .get_arguments()
                .find(|a| a.get_env() == Some(OsStr::new(name)))
                .and_then(|a| a.get_long())
                .with_context(|| format!("no flag of the child reads {name}"))?;
            argv.push(format!("--{flag}").into());
            argv.push(value.into());
        }
        argv.extend(args.iter().map(OsString::from));
        Config::from_args(argv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_flag_is_returned_and_a_good_line_is_a_config() {
        let err = Config::from_args(["crawler-child", "--no-such-flag"]).expect_err("refused");
        let usage = err.downcast_ref::<clap::Error>().expect("clap's error");
        assert_eq!(usage.kind(), clap::error::ErrorKind::UnknownArgument);
        // A malformed mapping is refused too, saying which (not clap's: the
        // flag parsed, its value did not).
        let err = Config::from_args(["crawler-child", "--resolve", "a.test=127.0.0.1"]).expect_err("refused");
        assert!(err.downcast_ref::<clap::Error>().is_none());
        assert!(format!("{err:#}").contains("HOST:PORT:ADDR"), "{err:#}");
        let config =
            Config::from_args(["crawler-child", "--resolve", "a.test:80:127.0.0.1"]).expect("parses");
        assert!(config.dns_server.is_none());
    }

    #[test]
    fn a_command_s_environment_becomes_the_flags_that_read_it() {
        let config = Config::from_command(
            &["--resolve".into(), "a.test:80:127.0.0.1".into()],
            &[("CRAWLER_MONGO_URI", "mongodb://u:pw@db:1/".into())],
        )
        .expect("parses");
        assert_eq!(config.store.mongo_uri, "mongodb://u:pw@db:1/");
        let err = Config::from_command(&[], &[("NOT_A_CHILD_VARIABLE", "x".into())]).expect_err("refused");
        assert!(format!("{err:#}").contains("NOT_A_CHILD_VARIABLE"), "{err:#}");
    }
}
