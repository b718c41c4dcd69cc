//! What a child runs with, from its command line (the supervisor writes
//! it: `shared::cli::ObsArgs::to_child`, `NetArgs::to_child`, the store's
//! flags). Parsed here, in the library, so that a bad flag is an error a
//! caller gets (the binary prints it as clap does; a test running a child
//! in its own process sees it) rather than an exit.

use std::ffi::OsString;

use clap::Parser;
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
}
