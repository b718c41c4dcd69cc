//! Command-line settings every process shares (clap `Args` to flatten).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::timing::TimingConfig;

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

/// Observability: debug endpoint and timing log.
#[derive(Debug, Clone, Args)]
pub struct ObsArgs {
    /// Node name in logs and metrics (defaults to the host name).
    #[arg(long, env = "CRAWLER_NODE")]
    pub node: Option<String>,
    /// Address of /debug/pprof and /metrics (port 0 = any free port).
    #[arg(long, env = "CRAWLER_DEBUG_ADDR", default_value = "127.0.0.1:0")]
    pub debug_addr: SocketAddr,
    /// Bearer token for the debug endpoint (every route); required off
    /// loopback. Without it, control and profiles take the run's token
    /// from --debug-token-file (`crate::debug_token`).
    #[arg(long, env = "CRAWLER_DEBUG_TOKEN", hide_env_values = true)]
    pub debug_token: Option<String>,
    /// Where the run's debug token is (written, 0600, by the first process
    /// of the run when it does not exist) when --debug-token is not given;
    /// crawlctl and cluster-profile read it from there.
    #[arg(long, env = "CRAWLER_DEBUG_TOKEN_FILE", default_value = crate::debug_token::DEFAULT_FILE)]
    pub debug_token_file: PathBuf,
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
    /// This process's debug token (see `crate::debug_token`).
    pub fn debug_token(&self) -> crate::debug_token::DebugToken {
        crate::debug_token::DebugToken::resolve(self.debug_token.as_deref(), &self.debug_token_file)
    }

    pub fn node_name(&self) -> String {
        self.node.clone().unwrap_or_else(hostname)
    }

    pub fn timing_config(&self, role: &str) -> TimingConfig {
        let path = self.timing_log.as_ref().map(|p| {
            if names_a_dir(p) {
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
        // The run's token file, wherever the child runs from.
        let file =
            std::path::absolute(&self.debug_token_file).unwrap_or_else(|_| self.debug_token_file.clone());
        v.extend(["--debug-token-file".into(), file.to_string_lossy().into_owned()]);
        if let Some(p) = &self.timing_log {
            // Children share the directory; each writes its own file.
            let dir = if names_a_dir(p) {
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

/// Where a node's children connect, and whom they trust: names the
/// operator maps, the nameserver, extra certificate authorities. Given to
/// the supervisor, which passes them on to every child it starts.
#[derive(Debug, Clone, Default, Args)]
pub struct NetArgs {
    /// Host override HOST:PORT:ADDR (like curl --resolve); `*.suffix` allowed.
    #[arg(long)]
    pub resolve: Vec<String>,
    /// Hosts file (`ADDR NAME...` lines) with more overrides.
    #[arg(long)]
    pub hosts_file: Vec<PathBuf>,
    /// Resolve names through this nameserver (ADDR or ADDR:PORT, port 53
    /// by default; e.g. a local caching resolver) instead of the system's
    /// resolver. Overrides (--resolve, --hosts-file) still come first;
    /// /etc/hosts is not read then.
    #[arg(long, value_parser = dns_server)]
    pub dns_server: Option<SocketAddr>,
    /// PEM file of certificate authorities to trust besides the system's
    /// (an intranet's private CA, a test web's): HTTPS servers whose
    /// certificates chain to one of them are accepted too.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
}

impl NetArgs {
    /// The same settings for a child (files by absolute path: a child
    /// may run from elsewhere).
    pub fn to_child(&self) -> ChildSettings {
        let abs = |p: &PathBuf| {
            std::path::absolute(p)
                .unwrap_or_else(|_| p.clone())
                .to_string_lossy()
                .into_owned()
        };
        let mut args = Vec::new();
        for r in &self.resolve {
            args.extend(["--resolve".into(), r.clone()]);
        }
        for h in &self.hosts_file {
            args.extend(["--hosts-file".into(), abs(h)]);
        }
        if let Some(server) = self.dns_server {
            args.extend(["--dns-server".into(), server.to_string()]);
        }
        if let Some(ca) = &self.ca_file {
            args.extend(["--ca-file".into(), abs(ca)]);
        }
        ChildSettings {
            args,
            env: Vec::new(),
        }
    }

    /// The certificate authorities of --ca-file (none without it); an
    /// unreadable file, or one without a certificate, is an error that
    /// names the file.
    pub fn extra_roots(&self) -> anyhow::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
        let Some(path) = &self.ca_file else {
            return Ok(Vec::new());
        };
        crate::http_client::roots_from_pem_file(path)
    }
}

/// Whether `--timing-log` names a directory: one that exists, or a path
/// ending in `/`, which the first process to open its log creates (so a
/// process must not judge by what exists when it starts).
fn names_a_dir(p: &std::path::Path) -> bool {
    p.is_dir() || p.as_os_str().to_string_lossy().ends_with('/')
}

/// `--dns-server`'s value: an address, with a port or without one (53,
/// DNS's). IPv6 with a port in brackets (`[::1]:5353`).
pub fn dns_server(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let bare = s.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("{s:?}: expected ADDR or ADDR:PORT (e.g. 127.0.0.53, 10.0.0.2:5353, [::1]:53)"))
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

/// A role's parsed command line, for its `main`: the config, or the usage,
/// `--help` or `--version` text printed as clap prints it and the process
/// ended with clap's exit code (0 or 2); any other error is returned. The
/// roles parse in their libraries (`from_args`), so that a test running a
/// role in its own process gets a bad flag as an error; only `main` exits.
pub fn or_usage<C>(parsed: anyhow::Result<C>) -> anyhow::Result<C> {
    match parsed {
        Ok(config) => Ok(config),
        Err(e) => match e.downcast::<clap::Error>() {
            Ok(usage) => usage.exit(),
            Err(e) => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_server_takes_an_address_with_or_without_a_port() {
        assert_eq!(dns_server("127.0.0.53"), Ok("127.0.0.53:53".parse().unwrap()));
        assert_eq!(dns_server("10.0.0.2:5353"), Ok("10.0.0.2:5353".parse().unwrap()));
        assert_eq!(dns_server("::1"), Ok("[::1]:53".parse().unwrap()));
        assert_eq!(dns_server("[::1]:5353"), Ok("[::1]:5353".parse().unwrap()));
        assert!(dns_server("resolver.example").is_err());
        assert!(dns_server("127.0.0.1:99999").is_err());
    }
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        obs: ObsArgs,
    }

    #[test]
    fn children_log_into_the_directory_even_before_it_exists() {
        let dir = std::env::temp_dir().join(format!("timing-not-yet-{}/", std::process::id()));
        let cli = Cli::parse_from(["x", "--timing-log", dir.to_str().expect("utf-8")]);
        let args = cli.obs.to_child().args;
        let at = args
            .iter()
            .position(|a| a == "--timing-log")
            .expect("--timing-log passed on");
        assert_eq!(args.get(at + 1).map(String::as_str), dir.to_str());
        let own = cli.obs.timing_config("supervisor").path.expect("a path");
        assert!(own.starts_with(&dir), "{own:?} not in {dir:?}");
    }
}
