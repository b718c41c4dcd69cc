//! The debug server's bearer token, when the operator gave none.
//!
//! `/control/*` steers the crawl and `/debug/pprof` costs CPU: they always
//! need a token, also on loopback, where every user of the machine is. A
//! token given (`--debug-token`, `CRAWLER_DEBUG_TOKEN`) guards every route,
//! as before. Without one, each process reads the run's token from a file
//! (`--debug-token-file`, `CRAWLER_DEBUG_TOKEN_FILE`, by default
//! `debug_token` in the directory the crawl runs in), and the first process
//! of a run to start writes a fresh one there, readable by its user only
//! (0600): the processes of a run share it, and `crawlctl` and
//! `cluster-profile` read it from there. Such a token guards every route
//! but the read-only `/metrics`, `/healthz` and `/debug/cluster`, which
//! stay open on loopback, as scrapers and tests expect.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The environment variable naming the token file.
pub const TOKEN_FILE_ENV: &str = "CRAWLER_DEBUG_TOKEN_FILE";
/// The environment variable holding a token given by the operator.
pub const TOKEN_ENV: &str = "CRAWLER_DEBUG_TOKEN";
/// The token file's name when none is given (in the current directory).
pub const DEFAULT_FILE: &str = "debug_token";

/// A process's debug token, and what it guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebugToken {
    /// Given by the operator: guards every route.
    Given(String),
    /// The run's own (see the module's documentation): guards control and
    /// profiles.
    Run(String),
}

impl DebugToken {
    /// `given` when there is one (not empty); else the run's token from
    /// `file`, written there first when the file does not exist. A file
    /// that cannot be written leaves a token of this process alone (its
    /// control and profiles then answer no one; say so).
    pub fn resolve(given: Option<&str>, file: &Path) -> DebugToken {
        if let Some(t) = given.filter(|t| !t.is_empty()) {
            return DebugToken::Given(t.to_string());
        }
        match read_or_create(file) {
            Ok(t) => DebugToken::Run(t),
            Err(e) => {
                tracing::warn!(
                    "{e:#}; control and profiles of this process take a token no one knows (give --debug-token or --debug-token-file)"
                );
                DebugToken::Run(fresh())
            }
        }
    }
}

/// The token for a client (`crawlctl`, `cluster-profile`): `given`, else
/// `$CRAWLER_DEBUG_TOKEN`, else the file of `$CRAWLER_DEBUG_TOKEN_FILE` or
/// [`DEFAULT_FILE`], if it exists.
pub fn for_client(given: Option<String>) -> Option<String> {
    given
        .or_else(|| std::env::var(TOKEN_ENV).ok())
        .filter(|t| !t.is_empty())
        .or_else(|| {
            let file = std::env::var_os(TOKEN_FILE_ENV)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_FILE));
            read(&file).ok()
        })
}

fn fresh() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read(file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading the debug token file {}", file.display()))?;
    let token = text.trim();
    anyhow::ensure!(
        !token.is_empty(),
        "the debug token file {} is empty",
        file.display()
    );
    Ok(token.to_string())
}

/// Reads `file`, or writes a fresh token there. Written whole under
/// another name first and then linked into place, so the processes of a
/// run starting together never read a half-written file, and only one
/// token wins.
fn read_or_create(file: &Path) -> anyhow::Result<String> {
    if file.exists() {
        return read(file);
    }
    let token = fresh();
    let tmp = file.with_extension(format!("tmp.{}.{}", std::process::id(), &token[..16]));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing the debug token file {}", tmp.display()))?;
    let written = f
        .write_all(format!("{token}\n").as_bytes())
        .and_then(|()| f.sync_all());
    drop(f);
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, file));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(token),
        // Another process of the run was first: its token.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(file),
        Err(e) => Err(e).with_context(|| format!("writing the debug token file {}", file.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_first_process_writes_the_token_and_the_others_read_it() {
        let dir = std::env::temp_dir().join(format!("debug-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("debug_token");
        let DebugToken::Run(first) = DebugToken::resolve(None, &file) else {
            panic!("no token given: the run's");
        };
        assert_eq!(first.len(), 64);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            DebugToken::resolve(Some(""), &file),
            DebugToken::Run(first.clone())
        );
        // Given: that one, the file untouched.
        assert_eq!(
            DebugToken::resolve(Some("mine"), &file),
            DebugToken::Given("mine".into())
        );
        assert_eq!(read(&file).unwrap(), first);
        // Many at once: one token.
        let racing = dir.join("racing");
        let tokens: Vec<DebugToken> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| DebugToken::resolve(None, &racing)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(tokens.windows(2).all(|w| w[0] == w[1]), "{tokens:?}");
        // No leftovers.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
