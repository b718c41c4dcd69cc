//! A DNS server for tests: answers a synthetic web's names over UDP on
//! loopback, each name the way the test says (addresses with a TTL, a CNAME
//! chain, NXDOMAIN, SERVFAIL, or silence), after a latency of its own, and
//! counts the queries it got per name so a test can assert on them.
//!
//! Messages are read and written with `hickory-proto`. Only what a stub
//! resolver asks is answered: one question, class IN, types A and AAAA
//! (anything else gets an empty answer). Names it was not told about are
//! NXDOMAIN. It never answers over TCP: its answers are small enough for
//! one UDP datagram, so a client has no reason to switch.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// How long "no such name" may be kept: the SOA minimum of every negative
/// answer (RFC 2308).
pub const NEGATIVE_TTL: u32 = 60;
/// Longest CNAME chain followed (a loop is cut there).
const MAX_CHAIN: usize = 8;

/// What a name answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Behaviour {
    /// These addresses (A for IPv4, AAAA for IPv6), each with `ttl`.
    Answer {
        addrs: Vec<IpAddr>,
        ttl: u32,
    },
    /// An alias: the CNAME record with `ttl`, then whatever `target` answers.
    Cname {
        target: String,
        ttl: u32,
    },
    NxDomain,
    ServFail,
    /// Never answers (the client times out).
    Silent,
}

#[derive(Clone, Debug)]
struct Rule {
    behaviour: Behaviour,
    latency: Duration,
}

/// How a name not set answers, decided by the caller (its behaviour and
/// latency), or `None`: NXDOMAIN at once.
type PatternFn = dyn Fn(&str) -> Option<(Behaviour, Duration)> + Send + Sync;

#[derive(Clone)]
struct Pattern(Arc<PatternFn>);

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pattern(..)")
    }
}

/// The names the server knows and how each answers.
#[derive(Clone, Debug, Default)]
pub struct Zone {
    names: HashMap<String, Rule>,
    pattern: Option<Pattern>,
}

fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl Zone {
    /// `name` answers `behaviour` at once.
    pub fn set(&mut self, name: &str, behaviour: Behaviour) -> &mut Self {
        self.names.insert(
            key(name),
            Rule {
                behaviour,
                latency: Duration::ZERO,
            },
        );
        self
    }

    /// `name` answers after `latency` (a name not set yet: NXDOMAIN).
    pub fn latency(&mut self, name: &str, latency: Duration) -> &mut Self {
        self.names
            .entry(key(name))
            .or_insert(Rule {
                behaviour: Behaviour::NxDomain,
                latency,
            })
            .latency = latency;
        self
    }

    /// Names not set answer as `f` says (given the name, lower-case,
    /// without the final dot): a web of 10^5 names needs no table.
    pub fn pattern(
        &mut self,
        f: impl Fn(&str) -> Option<(Behaviour, Duration)> + Send + Sync + 'static,
    ) -> &mut Self {
        self.pattern = Some(Pattern(Arc::new(f)));
        self
    }

    fn rule(&self, name: &str) -> Option<Rule> {
        if let Some(rule) = self.names.get(name) {
            return Some(rule.clone());
        }
        let (behaviour, latency) = (self.pattern.as_ref()?.0)(name)?;
        Some(Rule { behaviour, latency })
    }
}

/// A running server; stops when dropped.
pub struct DnsServer {
    addr: SocketAddr,
    seen: Arc<Mutex<HashMap<String, Seen>>>,
    task: JoinHandle<()>,
}

/// What a name was sent.
#[derive(Default)]
struct Seen {
    /// (message id, type) of each query.
    queries: HashSet<(u16, u16)>,
    datagrams: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl DnsServer {
    /// Serves `zone` on `bind` (UDP; port 0 = any). Boxed: see the crate's doc.
    pub fn start(zone: Zone, bind: SocketAddr) -> BoxFuture<'static, anyhow::Result<DnsServer>> {
        Box::pin(Self::bind_and_answer(zone, bind))
    }

    async fn bind_and_answer(zone: Zone, bind: SocketAddr) -> anyhow::Result<DnsServer> {
        let socket = Arc::new(UdpSocket::bind(bind).await?);
        let addr = socket.local_addr()?;
        let seen: Arc<Mutex<HashMap<String, Seen>>> = Arc::default();
        let zone = Arc::new(zone);
        let counts = seen.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let Some(q) = query.queries.first() else {
                    continue;
                };
                let name = key(&q.name().to_ascii());
                {
                    let mut counts = lock(&counts);
                    let seen = counts.entry(name.clone()).or_default();
                    seen.datagrams += 1;
                    seen.queries
                        .insert((query.metadata.id, u16::from(q.query_type())));
                }
                let (zone, socket) = (zone.clone(), socket.clone());
                tokio::spawn(async move {
                    let latency = zone.rule(&name).map_or(Duration::ZERO, |r| r.latency);
                    tokio::time::sleep(latency).await;
                    if let Some(reply) = answer(&zone, &query) {
                        if let Ok(bytes) = reply.to_vec() {
                            let _ = socket.send_to(&bytes, from).await;
                        }
                    }
                });
            }
        });
        Ok(DnsServer { addr, seen, task })
    }

    /// On a free port of 127.0.0.1.
    pub async fn local(zone: Zone) -> anyhow::Result<DnsServer> {
        Self::start(zone, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queries got for `name` (any type; a query sent again counts once).
    pub fn queries(&self, name: &str) -> u64 {
        lock(&self.seen)
            .get(&key(name))
            .map_or(0, |s| s.queries.len() as u64)
    }

    /// Datagrams got for `name`: its queries and their repeats.
    pub fn datagrams(&self, name: &str) -> u64 {
        lock(&self.seen).get(&key(name)).map_or(0, |s| s.datagrams)
    }

    /// (queries, datagrams) got, per name.
    pub fn query_counts(&self) -> HashMap<String, (u64, u64)> {
        lock(&self.seen)
            .iter()
            .map(|(name, s)| (name.clone(), (s.queries.len() as u64, s.datagrams)))
            .collect()
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The reply to `query`, or `None` to stay silent.
fn answer(zone: &Zone, query: &Message) -> Option<Message> {
    let q = query.queries.first()?;
    let mut reply = Message::new(query.metadata.id, MessageType::Response, OpCode::Query);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.add_query(q.clone());
    let rtype = q.query_type();
    let mut owner = q.name().clone();
    for _ in 0..MAX_CHAIN {
        let behaviour = zone
            .rule(&key(&owner.to_ascii()))
            .map_or(Behaviour::NxDomain, |r| r.behaviour);
        match &behaviour {
            Behaviour::Silent => return None,
            Behaviour::ServFail => {
                reply.metadata.response_code = ResponseCode::ServFail;
                return Some(reply);
            }
            Behaviour::NxDomain => {
                reply.metadata.response_code = ResponseCode::NXDomain;
                reply.add_authority(soa());
                return Some(reply);
            }
            Behaviour::Answer { addrs, ttl } => {
                reply.metadata.authoritative = true;
                for ip in addrs {
                    let data = match (ip, rtype) {
                        (IpAddr::V4(v4), RecordType::A) => RData::A(A(*v4)),
                        (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(*v6)),
                        _ => continue,
                    };
                    reply.add_answer(Record::from_rdata(owner.clone(), *ttl, data));
                }
                if reply.answers.iter().all(|r| r.record_type() == RecordType::CNAME) {
                    // NODATA: the name is there, without this type.
                    reply.add_authority(soa());
                }
                return Some(reply);
            }
            Behaviour::Cname { target, ttl } => {
                let target = Name::from_ascii(format!("{}.", key(target))).ok()?;
                reply.add_answer(Record::from_rdata(
                    owner.clone(),
                    *ttl,
                    RData::CNAME(CNAME(target.clone())),
                ));
                owner = target;
            }
        }
    }
    reply.metadata.response_code = ResponseCode::ServFail;
    Some(reply)
}

/// The zone's SOA, whose minimum is the negative TTL.
fn soa() -> Record {
    let origin = Name::from_ascii("test.").unwrap_or_default();
    let data = SOA::new(origin.clone(), origin.clone(), 1, 3600, 600, 86_400, NEGATIVE_TTL);
    Record::from_rdata(origin, NEGATIVE_TTL, RData::SOA(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;

    async fn ask(server: &DnsServer, name: &str, rtype: RecordType) -> Option<Message> {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut m = Message::query();
        m.metadata.id = 7;
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
        socket.send_to(&m.to_vec().unwrap(), server.addr()).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let got = tokio::time::timeout(Duration::from_millis(500), socket.recv_from(&mut buf)).await;
        let (n, _) = got.ok()?.unwrap();
        Some(Message::from_vec(&buf[..n]).unwrap())
    }

    fn ips(m: &Message) -> Vec<IpAddr> {
        m.answers.iter().filter_map(|r| r.data.ip_addr()).collect()
    }

    #[tokio::test]
    async fn answers_each_name_as_told_and_counts_queries() {
        let mut zone = Zone::default();
        let two: Vec<IpAddr> = vec!["127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()];
        zone.set(
            "multi.test",
            Behaviour::Answer {
                addrs: two.clone(),
                ttl: 300,
            },
        )
        .set(
            "alias.test",
            Behaviour::Cname {
                target: "mid.test".into(),
                ttl: 100,
            },
        )
        .set(
            "mid.test",
            Behaviour::Cname {
                target: "multi.test".into(),
                ttl: 100,
            },
        )
        .set("broken.test", Behaviour::ServFail)
        .set("quiet.test", Behaviour::Silent);
        let server = DnsServer::local(zone).await.unwrap();

        let m = ask(&server, "MULTI.test.", RecordType::A).await.unwrap();
        assert_eq!(
            (m.metadata.id, m.metadata.response_code),
            (7, ResponseCode::NoError)
        );
        assert_eq!(ips(&m), two);
        assert_eq!(m.answers[0].ttl, 300);
        // An A-only name has no AAAA: NODATA with the SOA.
        let m = ask(&server, "multi.test.", RecordType::AAAA).await.unwrap();
        assert!(m.answers.is_empty() && m.authorities.len() == 1);

        let m = ask(&server, "alias.test.", RecordType::A).await.unwrap();
        assert_eq!(m.answers.len(), 4, "two CNAMEs and two addresses");
        assert_eq!(ips(&m), two);

        let m = ask(&server, "nowhere.test.", RecordType::A).await.unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
        let m = ask(&server, "broken.test.", RecordType::A).await.unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert!(ask(&server, "quiet.test.", RecordType::A).await.is_none());

        assert_eq!(server.queries("multi.test"), 2);
        assert_eq!(server.queries("alias.test"), 1);
        assert_eq!(server.queries("mid.test"), 0, "a chain is answered whole");
        assert_eq!(server.queries("quiet.test"), 1);
        assert_eq!(server.datagrams("multi.test"), 2);
    }
}
