//! End-to-end: only holders of the cluster secret join the crawl.
//!
//! A real dispatcher and a real supervisor crawl the synthetic web with a
//! secret. Meanwhile the test speaks ZeroMQ to the dispatcher itself:
//!
//! - rogues without the secret (a wrong one, the public insecure key, a
//!   Join with no Hello) are refused, and their forged results, heartbeats
//!   and child announcements (in-scope and out-of-scope URLs, a debug
//!   address) are dropped and answered with nothing but refusals;
//! - member A, with the secret, takes part: it is leased URLs, reports one
//!   of its own leases as a retryable failure under a forged URL (the
//!   dispatcher must retry the leased URL, not the forged one), then
//!   leaves, so its URLs go to the real supervisor;
//! - member B, with the secret, reports results for A's leases (a member
//!   cannot finish, or forge links from, another member's work) and for a
//!   lease never issued.
//!
//! What must hold is checked where it matters: the store has exactly the
//! pages of a correct crawl (a forged "done" would leave a page missing, a
//! forged link would add one or a request), the frontier has no forged
//! URL, the web server saw no forged request, `/debug/cluster` lists no
//! rogue, and `/metrics` counts each refusal.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crawl_tests::harness::{args, free_port, random_secret, spawn_crawl, ClusterSpec, StoreServer};
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};
use link::cluster_auth::{fresh_nonce, ClusterKey, Introduction, Proof, Refusal, Session};
use link::dispatcher_link::Heard;
use link::envelope::{self, FrameToDispatcher, FrameToSupervisor, Sealed};
use link::protocol::{
    self, CrawlResult, FailureKind, Intro, Outcome, ProcessInfo, ToDispatcher, ToSupervisor, WorkItem,
    PROTOCOL_VERSION,
};
use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// A peer of the test's own on the dispatcher's ROUTER.
struct Peer {
    socket: DealerSocket,
    /// Everything the dispatcher sent this peer (sealed ones opened).
    heard: Vec<Heard>,
    /// This connection's keys, once welcomed.
    session: Option<Session>,
    /// The proof of the last Welcome heard.
    welcome_proof: Option<Proof>,
    /// The last frame sent, to replay.
    last_sent: Vec<u8>,
}

impl Peer {
    /// Connects, retrying while the dispatcher is still loading (it binds late).
    async fn connect(endpoint: &str) -> Peer {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut socket = DealerSocket::new();
            match tokio::time::timeout(Duration::from_secs(2), socket.connect(endpoint)).await {
                Ok(Ok(())) => {
                    return Peer {
                        socket,
                        heard: Vec::new(),
                        session: None,
                        welcome_proof: None,
                        last_sent: Vec::new(),
                    }
                }
                _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(200)).await,
                other => panic!("cannot reach the dispatcher at {endpoint}: {other:?}"),
            }
        }
    }

    /// Sends `msg` sealed as a supervisor does once welcomed; before, with
    /// a seal it makes up (all a peer without the keys can do).
    async fn send(&mut self, msg: &ToDispatcher) {
        let bytes = match &mut self.session {
            Some(session) => envelope::seal_to_dispatcher(session, msg).1,
            None => protocol::encode(&FrameToDispatcher::Sealed(Sealed {
                counter: 0,
                tag: fresh_nonce(),
                payload: &protocol::encode(msg),
            })),
        };
        self.send_bytes(bytes).await;
    }

    /// Sends one frame as it is (the handshake's).
    async fn send_frame(&mut self, frame: &FrameToDispatcher<'_>) {
        self.send_bytes(protocol::encode(frame)).await;
    }

    async fn send_bytes(&mut self, bytes: Vec<u8>) {
        self.last_sent = bytes.clone();
        tokio::time::timeout(Duration::from_secs(5), self.socket.send(ZmqMessage::from(bytes)))
            .await
            .expect("send timed out")
            .expect("send failed");
    }

    /// The next message, or None after `within`.
    async fn recv(&mut self, within: Duration) -> Option<Heard> {
        let msg = tokio::time::timeout(within, self.socket.recv())
            .await
            .ok()?
            .ok()?;
        let frame = msg.iter().last()?;
        let heard = match protocol::decode::<FrameToSupervisor>(frame).ok()? {
            FrameToSupervisor::Sealed(sealed) => {
                let session = self
                    .session
                    .as_mut()
                    .expect("a sealed message before the Welcome");
                Heard::Message(envelope::open(session, &sealed).expect("the dispatcher's seal holds"))
            }
            FrameToSupervisor::Welcome { policy, proof } => {
                self.welcome_proof = Some(proof);
                Heard::Welcome(policy)
            }
            FrameToSupervisor::Challenge { nonce } => Heard::Challenge(nonce),
            FrameToSupervisor::Refused(why) => Heard::Refused(why),
            FrameToSupervisor::Reintroduce => Heard::Reintroduce,
            FrameToSupervisor::OtherVersion => Heard::OtherVersion,
        };
        self.heard.push(heard.clone());
        Some(heard)
    }

    /// The next message that is not a heartbeat.
    async fn next(&mut self, within: Duration) -> Option<Heard> {
        self.next_but(within, |_| false).await
    }

    /// The next message that is neither a heartbeat, an acknowledgement
    /// nor one `skip` takes.
    async fn next_but(&mut self, within: Duration, skip: impl Fn(&Heard) -> bool) -> Option<Heard> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left).await? {
                Heard::Message(ToSupervisor::Heartbeat | ToSupervisor::Ack { .. }) => continue,
                m if skip(&m) => continue,
                m => return Some(m),
            }
        }
    }

    /// Runs an introduction proving `key`; returns the dispatcher's last
    /// word (Welcome or Refused), after checking a Welcome's own proof.
    async fn introduce(&mut self, key: &ClusterKey, intro: &Intro) -> Heard {
        let mut me = Introduction::new(PROTOCOL_VERSION);
        self.send_frame(&FrameToDispatcher::Hello {
            version: PROTOCOL_VERSION,
            nonce: me.nonce(),
        })
        .await;
        let Some(Heard::Challenge(nonce)) = self.next(Duration::from_secs(10)).await else {
            panic!("no Challenge for a Hello; heard {:?}", self.heard);
        };
        let bytes = protocol::encode(intro);
        let proof = me.answer(key, nonce, &bytes);
        self.send_frame(&FrameToDispatcher::Join { proof, intro: &bytes })
            .await;
        let answer = self
            .next(Duration::from_secs(10))
            .await
            .expect("no answer to a Join");
        if let (Heard::Welcome(policy), Some(proof)) = (&answer, &self.welcome_proof) {
            me.check_welcome(key, proof, &protocol::encode(policy))
                .expect("the dispatcher's Welcome proves the secret");
            self.session = me.session(key);
            // The first message of a welcomed connection: what it holds.
            self.send(&ToDispatcher::Holding(Vec::new())).await;
        }
        answer
    }

    /// Waits for a Work message; returns its items.
    async fn work(&mut self, within: Duration) -> Vec<WorkItem> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left).await {
                Some(Heard::Message(ToSupervisor::Work(items))) => return items,
                Some(_) => continue,
                None => panic!("no Work within {within:?}; heard {:?}", self.heard),
            }
        }
    }
}

fn intro(id: &str, capacity: u32, debug_addr: &str) -> Intro {
    Intro {
        supervisor_id: id.into(),
        capacity,
        process: ProcessInfo {
            role: "supervisor".into(),
            node: "elsewhere".into(),
            pid: 4242,
            debug_addr: Some(debug_addr.into()),
        },
    }
}

fn fetched(lease: u64, url: &str, outlinks: Vec<String>) -> CrawlResult {
    CrawlResult {
        server: None,
        lease,
        url: url.into(),
        domain: url::Url::parse(url).unwrap().host_str().unwrap().into(),
        depth: 0,
        outcome: Outcome::Fetched {
            status: 200,
            final_url: None,
            content_type: Some("text/html".into()),
            bytes: 10,
        },
        outlinks,
        sent_ms: 0,
    }
}

/// `crawler_cluster_refusals_total{reason="..."}` in a /metrics text.
fn refusals(metrics: &str, reason: &str) -> f64 {
    let prefix = format!("crawler_cluster_refusals_total{{reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_holders_of_the_secret_join_and_only_their_own_leases_count() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let web_spec = WebSpec {
        seed: 43,
        hosts: 6,
        outside_hosts: 1,
        pages_per_host: 40,
        crawl_delay_every: 0,
        ..WebSpec::default()
    };
    let server = WebServer::start(web_spec.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let web = server.web();
    let expected = web.expected_crawl();
    let port = server.addr().port();
    let hosts = web.host_names();
    let in_scope: BTreeSet<String> = web.in_scope_host_names().into_iter().collect();
    let (inside, outside) = (&hosts[0], hosts.last().unwrap());
    assert!(in_scope.contains(inside) && !in_scope.contains(outside));
    let forged_inside = format!("http://{inside}:{port}/forged-by-rogue");
    let forged_outside = format!("http://{outside}:{port}/forged-out-of-scope");
    let seed = web.seed_urls()[0].clone();

    let mut spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    // One real supervisor; the dispatcher waits for a second member (A).
    spec.supervisors = 1;
    spec.min_supervisors = Some(2);
    let debug = format!("127.0.0.1:{}", free_port());
    spec.dispatcher_args = args(&[
        "--min-delay-ms",
        "20",
        "--max-depth",
        "100",
        "--debug-addr",
        &debug,
    ]);
    // The real supervisor reads the secret from a file, as the playbook's
    // units do (CRAWLER_CLUSTER_SECRET_FILE); the harness's variable is
    // emptied, which counts as unset.
    let secret_file = dir.path().join("cluster_secret");
    std::fs::write(&secret_file, &spec.cluster_secret).unwrap();
    std::fs::set_permissions(&secret_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    spec.env
        .push((link::cluster_auth::SECRET_ENV.into(), String::new()));
    spec.env.push((
        link::cluster_auth::SECRET_FILE_ENV.into(),
        secret_file.display().to_string(),
    ));
    let secret = ClusterKey::from_secret(spec.cluster_secret.as_bytes()).unwrap();
    let crawl = spawn_crawl(&spec).await.unwrap();
    let endpoint = crawl.endpoint().to_string();
    let http = shared::http_client::builder().no_proxy().build().unwrap();
    let base = format!("http://{debug}");

    // Rogues. A wrong secret, and the public key of --insecure-cluster.
    let mut rogue = Peer::connect(&endpoint).await;
    let wrong = ClusterKey::from_secret(random_secret().as_bytes()).unwrap();
    for key in [&wrong, &ClusterKey::insecure()] {
        let answer = rogue.introduce(key, &intro("rogue", 1000, "127.0.0.1:9")).await;
        assert_eq!(answer, Heard::Refused(Refusal::BadProof));
    }
    // A Join with no Hello before it (a replay, say) proves nothing.
    let mut replayer = Peer::connect(&endpoint).await;
    replayer
        .send_frame(&FrameToDispatcher::Join {
            proof: fresh_nonce(),
            intro: &protocol::encode(&intro("rogue", 1000, "127.0.0.1:9")),
        })
        .await;
    assert_eq!(
        replayer.next(Duration::from_secs(10)).await,
        Some(Heard::Refused(Refusal::NoChallenge))
    );
    // Forged results (a seed marked done, links in and out of scope, lease
    // ids it guesses), heartbeats and a child announcing a debug address,
    // each under a seal the rogue made up.
    let forged = [0, 1, u64::MAX / 4]
        .iter()
        .map(|&lease| fetched(lease, &seed, vec![forged_inside.clone(), forged_outside.clone()]))
        .chain([fetched(7, &forged_outside, vec![forged_inside.clone()])])
        .collect::<Vec<_>>();
    let rogue_msgs = [
        ToDispatcher::Results(forged),
        ToDispatcher::Bye,
        ToDispatcher::Heartbeat { holding: vec![0, 1] },
        ToDispatcher::Child {
            slot: 0,
            process: intro("rogue-child", 0, "127.0.0.1:9").process,
            alive: true,
        },
    ];
    // (On a connection of its own: the dispatcher answers a peer not
    // admitted at most four times in a burst, and the rogue's two
    // introductions took those.)
    let mut forger = Peer::connect(&endpoint).await;
    for m in &rogue_msgs {
        forger.send(m).await;
        assert_eq!(
            forger.next(Duration::from_secs(10)).await,
            Some(Heard::Reintroduce)
        );
    }

    // Member A: with the secret, it is welcomed and leased URLs.
    let mut a = Peer::connect(&endpoint).await;
    let welcome = a.introduce(&secret, &intro("member-a", 6, "127.0.0.1:9")).await;
    assert!(matches!(welcome, Heard::Welcome(_)), "{welcome:?}");
    let held = a.work(Duration::from_secs(60)).await;
    assert!(!held.is_empty());

    // Member B, with the secret too, reports on A's leases and on a lease
    // nobody holds, with forged links: all refused.
    let mut b = Peer::connect(&endpoint).await;
    let welcome = b.introduce(&secret, &intro("member-b", 0, "127.0.0.1:9")).await;
    assert!(matches!(welcome, Heard::Welcome(_)), "{welcome:?}");
    let mut on_a = held
        .iter()
        .map(|w| {
            fetched(
                w.lease,
                &w.url,
                vec![forged_inside.clone(), forged_outside.clone()],
            )
        })
        .collect::<Vec<_>>();
    on_a.push(fetched(u64::MAX / 3, &seed, vec![forged_inside.clone()]));
    b.send(&ToDispatcher::Results(on_a)).await;
    // B sends a heartbeat, then replays it; and a heartbeat without its
    // envelope on its admitted connection (no frame at all): the replay
    // and the bare one are refused, and answered with nothing.
    b.send(&ToDispatcher::Heartbeat { holding: Vec::new() }).await;
    let replay = b.last_sent.clone();
    b.send_bytes(replay).await;
    b.send_bytes(protocol::encode::<ToDispatcher>(&ToDispatcher::Heartbeat {
        holding: Vec::new(),
    }))
    .await;
    b.send(&ToDispatcher::Bye).await;
    assert_eq!(
        b.next(Duration::from_secs(10)).await,
        Some(Heard::Message(ToSupervisor::Farewell))
    );

    // A reports its first lease as a timeout (retried later) under a forged
    // URL: the dispatcher retries the URL it leased, not the forged one.
    // (Its links would count: a member is trusted with what it found on
    // the pages leased to it, not with which URL it was leased.)
    let mut own = fetched(held[0].lease, &forged_outside, Vec::new());
    own.domain = outside.clone();
    own.outcome = Outcome::failed(FailureKind::Timeout, "forged");
    a.send(&ToDispatcher::Results(vec![own])).await;

    // While A still holds the rest (so the crawl cannot end yet): the
    // refusals are counted, and /debug/cluster names no rogue.
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let text = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if refusals(&text, "foreign_lease") >= held.len() as f64 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(refusals(&metrics, "bad_proof") >= 2.0, "{metrics}");
    assert!(refusals(&metrics, "no_challenge") >= 1.0, "{metrics}");
    assert!(refusals(&metrics, "unauthenticated") >= 4.0, "{metrics}");
    assert_eq!(
        refusals(&metrics, "foreign_lease"),
        held.len() as f64,
        "{metrics}"
    );
    assert!(refusals(&metrics, "unknown_lease") >= 1.0, "{metrics}");
    assert_eq!(refusals(&metrics, "replayed"), 1.0, "{metrics}");
    assert!(refusals(&metrics, "undecodable") >= 1.0, "{metrics}");
    assert!(
        metrics.contains("# HELP crawler_cluster_refusals_total"),
        "{metrics}"
    );
    let cluster = http
        .get(format!("{base}/debug/cluster"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!cluster.contains("rogue"), "{cluster}");
    assert!(
        cluster.contains("member-a") && cluster.contains("sup0"),
        "{cluster}"
    );

    // The secret is on no command line, and no crawler child (which parses
    // the open web) has it in its environment: the supervisor removed it.
    // (The supervisor starts its children once it is welcomed: wait for them.
    // A child caught between fork and exec still shares the supervisor's
    // memory, whose environment block is the one the supervisor was started
    // with: wait until each one runs crawler-child.)
    let became_child = |pid: &u32| {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|exe| exe.file_name() == Some("crawler-child".as_ref()))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let children = loop {
        let children = crawl.child_pids(0);
        if (!children.is_empty() && children.iter().all(became_child)) || Instant::now() > deadline {
            break children;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!children.is_empty(), "the supervisor started no children");
    assert!(
        children.iter().all(became_child),
        "a child of the supervisor did not become crawler-child within 20 s"
    );
    let secret_bytes = spec.cluster_secret.as_bytes();
    let holds = |haystack: &[u8]| haystack.windows(secret_bytes.len()).any(|w| w == secret_bytes);
    let pids = children
        .iter()
        .copied()
        .chain(crawl.supervisor_pids())
        .chain(crawl.dispatcher_pid());
    for pid in pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(!holds(&cmdline), "the secret is on the command line of {pid}");
    }
    for pid in &children {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert!(!holds(&environ), "child {pid} has the secret in its environment");
        // Nor where to read it: the file's variable is gone too.
        let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
        assert!(
            !vars.iter().any(|v| v.starts_with(b"CRAWLER_CLUSTER_SECRET")),
            "child {pid} has a cluster secret variable in its environment"
        );
    }
    // The supervisor read its secret from the file, not the environment.
    for pid in crawl.supervisor_pids() {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        assert!(!holds(&environ), "the supervisor was given the secret itself");
    }

    // A leaves; what it held goes to the real supervisor. (Work leased to A
    // before its Bye arrived may come first: A's freed slot is refilled.)
    a.send(&ToDispatcher::Bye).await;
    assert_eq!(
        a.next_but(Duration::from_secs(10), |m| matches!(
            m,
            Heard::Message(ToSupervisor::Work(_))
        ))
        .await,
        Some(Heard::Message(ToSupervisor::Farewell))
    );

    let run = crawl.wait(Duration::from_secs(300)).await.unwrap();
    assert!(run.dispatcher.success(), "dispatcher: {:?}", run.dispatcher);
    assert!(run.supervisors.iter().all(|s| s.success()));
    assert_eq!(run.summary["frontier_left"], 0, "summary: {}", run.summary);

    // The rogues heard nothing but the handshake and refusals.
    for (who, p) in [("rogue", &rogue), ("replayer", &replayer), ("forger", &forger)] {
        for m in &p.heard {
            assert!(
                matches!(m, Heard::Challenge(_) | Heard::Refused(_) | Heard::Reintroduce),
                "{who} was told {m:?}"
            );
        }
    }

    // Exactly the pages of a correct crawl: nothing forged was marked done
    // (its page would be missing) or added (it would be extra).
    let db = store.client().await.unwrap().database("crawler");
    verify::assert_pages_match(&verify::stored_statuses(&db).await.unwrap(), &expected);
    verify::assert_frontier_finished(&db).await.unwrap();
    for u in verify::frontier_urls(&db, &Default::default()).await.unwrap() {
        let url = u.url.as_str();
        assert!(!url.contains("forged"), "forged URL in the frontier: {url}");
        let host = url::Url::parse(url).unwrap().host_str().unwrap().to_string();
        assert!(
            in_scope.contains(&host),
            "out-of-scope URL in the frontier: {url}"
        );
    }
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| !r.path.contains("forged")),
        "a forged URL was fetched"
    );
    verify::assert_nothing_forbidden_fetched(&requests, &expected, &in_scope, port);
    server.stop(Duration::from_secs(5)).await;
}
