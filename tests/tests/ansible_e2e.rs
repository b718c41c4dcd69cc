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
    let path = std::env::join_paths(std::iter::once(bin.parent().unwrap().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
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

/// `ExecStart=` split into words, and the unit's text.
fn read_exec(path: &Path) -> (Vec<String>, String) {
    let unit = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap_or_else(|| panic!("{} has no ExecStart=", path.display()))
        .split_whitespace()
        .map(String::from)
        .collect();
    (exec, unit)
}

/// The variables of an environment file.
fn read_env(path: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `ExecStart=` split into words, and the `EnvironmentFile=` variables.
fn read_unit(path: &Path) -> (Vec<String>, HashMap<String, String>) {
    let (exec, unit) = read_exec(path);
    let env_file = unit
        .lines()
        .find_map(|l| l.strip_prefix("EnvironmentFile="))
        .unwrap_or_else(|| panic!("{} has no EnvironmentFile=", path.display()));
    (exec, read_env(Path::new(env_file)))
}

fn assert_mode_600(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", path.display());
}

/// A secret site.yml made: 32 random bytes in hex, mode 0600.
fn read_secret(path: &Path) -> String {
    assert_mode_600(path);
    let s = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string();
    assert!(
        s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "{}: not 64 hex digits: {s:?}",
        path.display()
    );
    assert_ne!(s, "change-me");
    s
}

/// The ports of a rule's `tcp dport { ... }`.
fn dports(rule: &str) -> Option<Vec<String>> {
    let set = rule.split_once("tcp dport {")?.1.split_once('}')?.0;
    Some(set.split(',').map(|p| p.trim().to_string()).collect())
}

/// crawler.nft: its own table (nothing else flushed) whose input chain
/// accepts new connections to `ports` only from `sources` (and loopback,
/// and replies to the node's own connections) and then drops them.
fn check_firewall(nft: &str, sources: &[&str], ports: &[String]) {
    assert!(!nft.contains("flush ruleset"), "{nft}");
    let tables: Vec<&str> = nft
        .lines()
        .filter(|l| l.trim_start().starts_with("table "))
        .collect();
    assert!(
        tables
            .iter()
            .all(|t| t.trim_start().starts_with("table inet crawler")),
        "{nft}"
    );
    let element_set = |name: &str| -> Vec<String> {
        let body = nft
            .split_once(&format!("set {name} {{"))
            .unwrap_or_else(|| panic!("no set {name}:\n{nft}"))
            .1
            .split_once('}')
            .unwrap()
            .0;
        match body.split_once("elements = {") {
            Some((_, e)) => e.split(',').map(|a| a.trim().to_string()).collect(),
            None => vec![],
        }
    };
    let mut v4 = element_set("cluster_v4");
    v4.sort();
    let mut want: Vec<String> = sources.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(v4, want, "{nft}");
    assert!(element_set("cluster_v6").is_empty(), "{nft}");
    let chain = nft.split_once("chain input {").expect("no input chain").1;
    let rules: Vec<&str> = chain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && *l != "}")
        .collect();
    assert!(
        rules[0].contains("hook input") && rules[0].contains("policy accept"),
        "{nft}"
    );
    let mut want_ports = ports.to_vec();
    want_ports.sort();
    let mut seen_drop = false;
    let mut seen_accept = false;
    for rule in &rules[1..] {
        let verdict = rule.split_whitespace().last().unwrap();
        match (dports(rule), verdict) {
            (None, "accept") => assert!(
                *rule == "ct state established,related accept" || *rule == "iif \"lo\" accept",
                "an accept rule for more than the cluster: {rule}"
            ),
            (Some(mut p), "accept") => {
                p.sort();
                assert_eq!(p, want_ports, "{rule}");
                assert!(!seen_drop, "accept after the drop: {rule}");
                assert!(
                    rule.contains("ip saddr @cluster_v4") || rule.contains("ip6 saddr @cluster_v6"),
                    "an accept from anyone: {rule}"
                );
                seen_accept = true;
            }
            (Some(mut p), "drop") => {
                p.sort();
                assert_eq!(p, want_ports, "{rule}");
                assert!(!rule.contains("saddr"), "a drop for some sources only: {rule}");
                seen_drop = true;
            }
            _ => panic!("unexpected rule: {rule}"),
        }
    }
    assert!(seen_accept && seen_drop, "{nft}");
}

/// A rendered unit runs as `user`, hardened (`service-hardening.j2`), and,
/// where `systemd-analyze` is installed, systemd's own score of its
/// exposure (`systemd-analyze security --offline`) is 2.0 or better.
fn check_hardened(unit: &Path, user: &str) {
    let text = std::fs::read_to_string(unit).unwrap_or_else(|e| panic!("{}: {e}", unit.display()));
    for want in [
        format!("User={user}"),
        "NoNewPrivileges=yes".into(),
        "CapabilityBoundingSet=\n".into(),
        "ProtectSystem=strict".into(),
        "PrivateTmp=yes".into(),
        "ProtectHome=yes".into(),
        "SystemCallFilter=@system-service".into(),
    ] {
        assert!(text.contains(&want), "{} lacks {want:?}:\n{text}", unit.display());
    }
    let Ok(analyze) = which("systemd-analyze") else {
        eprintln!("systemd-analyze not installed: {} not scored", unit.display());
        return;
    };
    let out = std::process::Command::new(analyze)
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
        .arg(unit)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let overall = report
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| {
            panic!(
                "no score for {}: {report}{}",
                unit.display(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
    eprintln!("{overall}");
    assert!(
        out.status.success(),
        "{} is rated worse than 2.0: {overall}\n{report}",
        unit.display()
    );
}

/// The path of `program` on PATH.
fn which(program: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

/// `nft -c -f` (parse and check against the kernel, change nothing) passes
/// on the rendered rules, where nft is installed and may talk to the
/// kernel (root).
fn nft_checks(path: &Path) {
    let Ok(nft) = which("nft") else {
        eprintln!("nft not installed: {} not checked", path.display());
        return;
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: nft -c cannot check {}", path.display());
        return;
    }
    let out = std::process::Command::new(nft)
        .arg("-c")
        .arg("-f")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nft -c -f {} failed: {}{}",
        path.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
    // The store's private address as the inventory names it: mongod's bind
    // address, the crawler's URIs and the firewall's allowed source.
    let private_ip = "10.11.12.13";
    let host = format!(
        "localhost ansible_connection=local ansible_python_interpreter={python} crawler_private_ip={private_ip}"
    );
    let inventory = write_lines(
        dir.path(),
        "inventory.ini",
        &[
            "[stores]".into(),
            host.clone(),
            "[dispatcher]".into(),
            host.clone(),
            "[supervisors]".into(),
            host,
        ],
    )
    .unwrap();
    let hosts_file = spec.hosts_file.clone().unwrap();
    let dispatcher_port = free_port();
    let secrets = dir.path().join("secrets");
    // No debug token, cluster secret or store password given: site.yml
    // makes them. No store URI either, at first: the one derived from the
    // inventory (with the crawler user's password) is checked, then the
    // playbook runs again with the test's store (no users: nx-27017).
    let mut vars = serde_json::json!({
        "crawler_service_manager": "none",
        "crawler_build": false,
        "crawler_bin_src": bin_dir(),
        "crawler_prefix": prefix,
        "crawler_seeds_file": spec.seeds_file,
        "crawl_id": "ansible-test",
        "dispatcher_port": dispatcher_port,
        "debug_port": debug_port,
        "crawler_secrets_dir": secrets,
        "store_dbpath": dir.path().join("store-data"),
        "crawler_min_delay_ms": 20,
        "supervisor_children": 2,
        "dispatcher_extra_args": ["--max-depth", "100"],
        "supervisor_extra_args": ["--hosts-file", hosts_file],
    });
    let vars_file = dir.path().join("vars.json");
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    let inv = inventory.to_string_lossy().into_owned();
    let extra = format!("@{}", vars_file.display());

    for book in ["stop.yml", "collect.yml", "prometheus.yml"] {
        let out = playbook(dir.path(), &["-i", &inv, "--syntax-check", book]).await;
        assert!(
            out.status.success(),
            "{book}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (dir_path, inv_ref, extra_ref) = (dir.path(), inv.as_str(), extra.as_str());
    let run_site = move || async move {
        let out = playbook(dir_path, &["-i", inv_ref, "-e", extra_ref, "site.yml"]).await;
        assert!(
            out.status.success(),
            "site.yml failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first_log = run_site().await;
    for bin in ["dispatcher", "supervisor", "crawler-child", "cluster-profile"] {
        assert!(prefix.join("bin").join(bin).exists(), "{bin} not installed");
    }
    let etc = prefix.join("etc");

    // The secrets: made once on the control machine, random, readable by
    // their owner only.
    let secret_names = [
        "cluster_secret",
        "debug_token",
        "store_admin_password",
        "store_crawler_password",
    ];
    let made: Vec<String> = secret_names
        .iter()
        .map(|n| read_secret(&secrets.join(n)))
        .collect();
    for (i, a) in made.iter().enumerate() {
        assert!(made[i + 1..].iter().all(|b| a != b), "two secrets are the same");
        assert!(
            !first_log.contains(a.as_str()),
            "{} is in the playbook's output",
            secret_names[i]
        );
    }
    let [secret, token, admin_password, crawler_password] = made.clone().try_into().unwrap();
    // Installed on the node: the cluster secret in its own file, the rest in
    // crawler.env; both readable by their owner only.
    let installed = etc.join("cluster_secret");
    assert_eq!(std::fs::read_to_string(&installed).unwrap().trim(), secret);
    assert_mode_600(&installed);
    assert_mode_600(&etc.join("crawler.env"));
    let env = read_env(&etc.join("crawler.env"));
    assert_eq!(env["CRAWLER_DEBUG_TOKEN"], token);
    assert_eq!(env["CRAWLER_CLUSTER_SECRET_FILE"], installed.to_string_lossy());
    assert_eq!(
        env["CRAWLER_MONGO_URI"],
        format!("mongodb://crawler:{crawler_password}@{private_ip}:27017/?authSource=admin")
    );
    let env_text = std::fs::read_to_string(etc.join("crawler.env")).unwrap();
    assert!(
        !env_text.contains(&admin_password),
        "the admin password is in crawler.env"
    );

    // mongod: its settings bind the private address and loopback, not every
    // interface, and require authentication; the user script holds no
    // password (mongosh gets them through its environment).
    let conf = std::fs::read_to_string(etc.join("mongod.conf")).unwrap();
    assert!(
        conf.contains(&format!("bindIp: \"{private_ip},127.0.0.1\"")),
        "mongod.conf:\n{conf}"
    );
    assert!(conf.contains("authorization: enabled"), "mongod.conf:\n{conf}");
    assert!(
        !conf.contains("0.0.0.0") && !conf.contains("bindIpAll"),
        "mongod.conf:\n{conf}"
    );
    let (store_exec, _) = read_exec(&etc.join("crawler-store.service"));
    assert_eq!(
        store_exec[1..],
        [
            "--config".to_string(),
            etc.join("mongod.conf").to_string_lossy().into_owned()
        ],
        "{store_exec:?}"
    );
    let users_js = std::fs::read_to_string(etc.join("store-users.js")).unwrap();
    assert!(
        users_js.contains("process.env.STORE_CRAWLER_PASSWORD"),
        "{users_js}"
    );
    for (name, s) in secret_names.iter().zip(&made) {
        assert!(!users_js.contains(s.as_str()), "{name} is in store-users.js");
        assert!(!conf.contains(s.as_str()), "{name} is in mongod.conf");
    }

    // No secret on any unit's command line.
    let units: Vec<PathBuf> = std::fs::read_dir(&etc)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "service"))
        .collect();
    assert_eq!(units.len(), 4, "{units:?}");
    for unit in &units {
        let text = std::fs::read_to_string(unit).unwrap();
        for line in text.lines().filter(|l| l.starts_with("Exec")) {
            for (name, s) in secret_names.iter().zip(&made) {
                assert!(
                    !line.contains(s.as_str()),
                    "{name} is in {}: {line}",
                    unit.display()
                );
            }
        }
    }

    // Every process runs hardened, the store as a user of its own.
    check_hardened(&etc.join("crawler-dispatcher.service"), "crawler");
    check_hardened(&etc.join("crawler-supervisor.service"), "crawler");
    check_hardened(&etc.join("crawler-store.service"), "crawler-mongodb");

    // The firewall: the cluster's ports accepted from the inventory's hosts
    // only, dropped from anywhere else; rules nft accepts.
    nft_checks(&etc.join("crawler.nft"));
    let nft = std::fs::read_to_string(etc.join("crawler.nft")).unwrap();
    check_firewall(
        &nft,
        &[private_ip],
        &[
            dispatcher_port.to_string(),
            "27017".into(),
            debug_port.to_string(),
            (debug_port + 1).to_string(),
            "32768-60999".into(),
        ],
    );

    // Again, now with the test's own store: every secret stays as it was.
    vars["store_uri"] = serde_json::json!(store.uri);
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    run_site().await;
    let again: Vec<String> = secret_names
        .iter()
        .map(|n| read_secret(&secrets.join(n)))
        .collect();
    assert_eq!(again, made, "a second run changed the secrets");
    let env = read_env(&etc.join("crawler.env"));
    assert_eq!(env["CRAWLER_DEBUG_TOKEN"], token);
    assert_eq!(env["CRAWLER_MONGO_URI"], store.uri);

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
    // The crawl id of the inventory names the crawl's collections.
    let crawl = store::CrawlId::parse("ansible-test").unwrap();
    verify::assert_pages_match(&verify::stored_statuses_of(&db, &crawl).await.unwrap(), &expected);
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

/// The optional sharded layout (`inventory.sharded.example.ini`): every
/// role on this machine under `crawler_service_manager=none`, so that the
/// files it writes can be read. It has not been run against a live cluster;
/// this checks what it would start: a config server replica set, a shard,
/// a query router the crawler's URI names, the key file (mode 0400, the
/// control machine's secret), and the firewall's ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharded_layout_writes_config_servers_shards_and_a_router() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("opt-crawler");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let private_ip = "10.11.12.14";
    let host = format!(
        "localhost ansible_connection=local ansible_python_interpreter={python} crawler_private_ip={private_ip} shard=shard1"
    );
    let groups = ["config_servers", "shards", "mongos", "dispatcher", "supervisors"];
    let mut lines = Vec::new();
    for g in groups {
        lines.push(format!("[{g}]"));
        lines.push(host.clone());
    }
    lines.extend(["[stores]".to_string(), "[robots_store]".to_string()]);
    let inventory = write_lines(dir.path(), "inventory.ini", &lines).unwrap();
    let seeds = write_lines(dir.path(), "seeds.txt", &["http://a.test/".to_string()]).unwrap();
    let secrets = dir.path().join("secrets");
    let vars = serde_json::json!({
        "crawler_service_manager": "none",
        "crawler_build": false,
        "crawler_bin_src": bin_dir(),
        "crawler_prefix": prefix,
        "crawler_seeds_file": seeds,
        "crawler_secrets_dir": secrets,
        "store_dbpath": dir.path().join("store-data"),
    });
    let vars_file = dir.path().join("vars.json");
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    let inv = inventory.to_string_lossy().into_owned();
    let extra = format!("@{}", vars_file.display());
    let out = playbook(dir.path(), &["-i", &inv, "-e", &extra, "site.yml"]).await;
    assert!(
        out.status.success(),
        "site.yml failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let etc = prefix.join("etc");
    let read = |name: &str| std::fs::read_to_string(etc.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));

    let keyfile = read_secret(&secrets.join("store_keyfile"));
    assert_eq!(read("store_keyfile").trim(), keyfile);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(etc.join("store_keyfile"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o400);

    let config = read("crawler-store-configsvr.conf");
    for want in [
        "clusterRole: configsvr",
        "replSetName: \"crawler-config\"",
        "port: 27019",
        "authorization: enabled",
    ] {
        assert!(
            config.contains(want),
            "config server settings lack {want:?}:\n{config}"
        );
    }
    let shard = read("crawler-store-shard.conf");
    for want in ["clusterRole: shardsvr", "replSetName: \"shard1\"", "port: 27018"] {
        assert!(shard.contains(want), "shard settings lack {want:?}:\n{shard}");
    }
    let mongos = read("crawler-mongos.conf");
    assert!(
        mongos.contains(&format!("configDB: \"crawler-config/{private_ip}:27019\"")),
        "{mongos}"
    );
    for conf in [&config, &shard, &mongos] {
        assert!(conf.contains(&format!("keyFile: \"{}\"", etc.join("store_keyfile").display())));
        assert!(
            conf.contains(&format!("bindIp: \"{private_ip},127.0.0.1\"")),
            "{conf}"
        );
    }
    let (exec, _) = read_exec(&etc.join("crawler-mongos.service"));
    assert_eq!(
        exec[1..],
        [
            "--config".to_string(),
            etc.join("crawler-mongos.conf").display().to_string()
        ]
    );
    assert!(read("crawler-store-configsvr-replset.js").contains(&format!("[\"{private_ip}:27019\"]")));
    let shards_js = read("store-shards.js");
    assert!(
        shards_js.contains(&format!("\"shard1\": [\"{private_ip}:27018\"]")),
        "{shards_js}"
    );

    // The crawler talks to the query router, as the crawler user.
    let env = read_env(&etc.join("crawler.env"));
    let password = read_secret(&secrets.join("store_crawler_password"));
    assert_eq!(
        env["CRAWLER_MONGO_URI"],
        format!("mongodb://crawler:{password}@{private_ip}:27017/?authSource=admin")
    );
    for unit in ["crawler-mongos", "crawler-store-configsvr", "crawler-store-shard"] {
        check_hardened(&etc.join(format!("{unit}.service")), "crawler-mongodb");
    }
    nft_checks(&etc.join("crawler.nft"));
    let nft = read("crawler.nft");
    for port in ["27017", "27018", "27019"] {
        assert!(
            nft.contains(port),
            "the firewall does not restrict {port}:\n{nft}"
        );
    }
}
