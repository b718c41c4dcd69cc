//! The Ansible playbooks: `site.yml` runs on this machine (connection
//! local, `crawler_service_manager=none`, so it installs the binaries,
//! settings and systemd units into a temporary prefix without starting
//! them); then the test runs exactly the commands and environment the
//! rendered units hold, and checks the crawl they make.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crawl_tests::harness::{
    bin_dir, free_port, free_port_pair, repo_root, write_lines, ClusterSpec, StoreServer,
};
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};
use tokio::process::Command;

fn ansible_playbook() -> PathBuf {
    let p = std::env::var_os("ANSIBLE_PLAYBOOK")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv-ansible/bin/ansible-playbook"));
    assert!(
        p.exists(),
        "{} not found: run scripts/ansible.sh install (scripts/test.sh does)",
        p.display()
    );
    p
}

/// `ansible-lint` (installed next to `ansible-playbook` by
/// `scripts/ansible.sh install`) with the settings of `ansible/.ansible-lint`.
#[test]
fn the_playbooks_pass_ansible_lint_on_the_production_profile() {
    let bin = ansible_playbook().with_file_name("ansible-lint");
    assert!(
        bin.exists(),
        "{} not found: run scripts/ansible.sh install (scripts/test.sh does)",
        bin.display()
    );
    let home = tempfile::tempdir().unwrap();
    // ansible-lint wants its own venv's bin/ on PATH (it runs ansible-* from there).
    let path = std::env::join_paths(
        std::iter::once(bin.parent().unwrap().to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let out = std::process::Command::new(&bin)
        .current_dir(repo_root().join("ansible"))
        .args(["--profile", "production"])
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("ANSIBLE_HOME", home.path().join("ansible-home"))
        .env("ANSIBLE_LOCAL_TEMP", home.path().join("ansible-tmp"))
        .output()
        .expect("running ansible-lint");
    assert!(
        out.status.success(),
        "ansible-lint --profile production failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn playbook(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(ansible_playbook())
        .current_dir(repo_root().join("ansible"))
        .args(args)
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCALHOST_WARNING", "false")
        .env("ANSIBLE_HOME", dir.join("ansible-home"))
        .env("ANSIBLE_LOCAL_TEMP", dir.join("ansible-tmp"))
        .env("ANSIBLE_REMOTE_TEMP", dir.join("ansible-tmp"))
        .output()
        .await
        .expect("running ansible-playbook")
}

/// `ExecStart=` split into words, and the `EnvironmentFile=` variables.
fn read_unit(path: &Path) -> (Vec<String>, HashMap<String, String>) {
    let unit = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("{} has no {key}", path.display()))
            .to_string()
    };
    let exec: Vec<String> = value("ExecStart=").split_whitespace().map(String::from).collect();
    let env_file = std::fs::read_to_string(value("EnvironmentFile=")).unwrap();
    let env = env_file
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (exec, env)
}

fn spawn_unit(path: &Path) -> tokio::process::Child {
    let (exec, env) = read_unit(path);
    Command::new(&exec[0])
        .args(&exec[1..])
        .envs(env)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", exec[0]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playbook_installs_a_crawl_that_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let server = WebServer::start(
        WebSpec {
            seed: 31,
            hosts: 4,
            pages_per_host: 25,
            ..WebSpec::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let expected = server.web().expected_crawl();
    let spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    let prefix = dir.path().join("opt-crawler");
    // The supervisor's debug port is the dispatcher's + 1: both reserved,
    // so no other port of this test can be one of them.
    let debug_port = free_port_pair();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let inventory = write_lines(
        dir.path(),
        "inventory.ini",
        &[
            "[dispatcher]".into(),
            format!("localhost ansible_connection=local ansible_python_interpreter={python}"),
            "[supervisors]".into(),
            format!("localhost ansible_connection=local ansible_python_interpreter={python}"),
        ],
    )
    .unwrap();
    let hosts_file = spec.hosts_file.clone().unwrap();
    let vars = serde_json::json!({
        "crawler_service_manager": "none",
        "crawler_build": false,
        "crawler_bin_src": bin_dir(),
        "crawler_prefix": prefix,
        "crawler_seeds_file": spec.seeds_file,
        "store_uri": store.uri,
        "crawl_id": "ansible-test",
        "dispatcher_port": free_port(),
        "debug_port": debug_port,
        "debug_token": "test-token",
        "cluster_secret_src": dir.path().join("secrets/cluster_secret"),
        "crawler_min_delay_ms": 20,
        "supervisor_children": 2,
        "dispatcher_extra_args": ["--max-depth", "100"],
        "supervisor_extra_args": ["--hosts-file", hosts_file],
    });
    let vars_file = dir.path().join("vars.json");
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    let inv = inventory.to_string_lossy().into_owned();
    let extra = format!("@{}", vars_file.display());

    for book in ["stop.yml", "collect.yml"] {
        let out = playbook(dir.path(), &["-i", &inv, "--syntax-check", book]).await;
        assert!(
            out.status.success(),
            "{book}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = playbook(dir.path(), &["-i", &inv, "-e", &extra, "site.yml"]).await;
    assert!(
        out.status.success(),
        "site.yml failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for bin in ["dispatcher", "supervisor", "crawler-child", "cluster-profile"] {
        assert!(prefix.join("bin").join(bin).exists(), "{bin} not installed");
    }
    // The cluster secret: made once on the control machine, installed on
    // the node, both readable by their owner only, named in crawler.env by
    // its path and never written into a unit's command line.
    use std::os::unix::fs::PermissionsExt;
    let made = dir.path().join("secrets/cluster_secret");
    let installed = prefix.join("etc/cluster_secret");
    let secret = std::fs::read_to_string(&made).unwrap();
    assert_eq!(secret.trim().len(), 64, "a 32-byte hex secret");
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), secret);
    for f in [&made, &installed] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    let env = std::fs::read_to_string(prefix.join("etc/crawler.env")).unwrap();
    assert!(env.contains("CRAWLER_CLUSTER_SECRET_FILE="), "{env}");
    for unit in ["crawler-dispatcher.service", "crawler-supervisor.service"] {
        let text = std::fs::read_to_string(prefix.join("etc").join(unit)).unwrap();
        assert!(!text.contains(secret.trim()), "the secret is in {unit}");
    }

    // Run what the units say, as systemd would.
    let mut dispatcher = spawn_unit(&prefix.join("etc/crawler-dispatcher.service"));
    let mut supervisor = spawn_unit(&prefix.join("etc/crawler-supervisor.service"));
    let status = tokio::time::timeout(Duration::from_secs(120), dispatcher.wait())
        .await
        .expect("the crawl did not finish in 120 s")
        .unwrap();
    assert!(status.success(), "dispatcher: {status:?}");
    let sup = tokio::time::timeout(Duration::from_secs(30), supervisor.wait())
        .await
        .expect("the supervisor did not stop")
        .unwrap();
    assert!(sup.success(), "supervisor: {sup:?}");

    let db = store.client().await.unwrap().database("crawler");
    verify::assert_pages_match(&verify::stored_statuses(&db).await.unwrap(), &expected);
    let logs = prefix.join("logs");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(logs.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["crawl_id"], "ansible-test");
    let timing_logs: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    for role in ["dispatcher-", "crawler-child-"] {
        assert!(
            timing_logs.iter().any(|n| n.starts_with(role)),
            "no {role}* timing log in {}: {timing_logs:?}",
            logs.display()
        );
    }
    server.stop(Duration::from_secs(5)).await;
}
