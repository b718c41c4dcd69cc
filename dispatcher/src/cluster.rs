//! The supervisors the dispatcher knows, and the process list served at
//! `/debug/cluster` (every live process with its role, node, pid and debug
//! address, so one command can profile the whole cluster) and, for
//! Prometheus, at `/debug/targets`: the same processes in the form of its
//! HTTP service discovery (`http_sd_configs`), each labelled with its role
//! and node, which the dashboard (`profiling/dashboards/crawler.json`)
//! groups by. Children take their debug ports from the kernel and change
//! them when they restart, so a static list of targets cannot name them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use link::protocol::ProcessInfo;
use serde::Serialize;

/// What `/debug/cluster` shows.
#[derive(Default, Serialize, Clone)]
pub(crate) struct ClusterView {
    pub dispatcher: Option<ProcessInfo>,
    /// supervisor id → its process and its children by slot.
    pub supervisors: BTreeMap<String, SupervisorView>,
}

#[derive(Default, Serialize, Clone)]
pub(crate) struct SupervisorView {
    pub process: Option<ProcessInfo>,
    pub live: bool,
    pub children: BTreeMap<u32, ProcessInfo>,
}

pub(crate) type SharedView = Arc<Mutex<ClusterView>>;

/// The `/debug/cluster` and `/debug/targets` routes.
pub(crate) fn route(view: SharedView) -> profiling::axum::Router {
    use profiling::axum::{http::header, routing::get, Router};
    let targets_view = view.clone();
    Router::new()
        .route(
            "/debug/cluster",
            get(move || {
                let view = view.clone();
                async move {
                    let body = match view.lock() {
                        Ok(v) => serde_json::to_string_pretty(&*v).unwrap_or_default(),
                        Err(_) => "{}".into(),
                    };
                    ([(header::CONTENT_TYPE, "application/json")], body)
                }
            }),
        )
        .route(
            "/debug/targets",
            get(move || {
                let view = targets_view.clone();
                async move {
                    let groups = match view.lock() {
                        Ok(v) => scrape_targets(&v),
                        Err(_) => Vec::new(),
                    };
                    let body = serde_json::to_string(&groups).unwrap_or_else(|_| "[]".into());
                    ([(header::CONTENT_TYPE, "application/json")], body)
                }
            }),
        )
}

/// One target group of Prometheus's HTTP service discovery.
#[derive(Serialize, Debug, PartialEq)]
struct TargetGroup {
    targets: [String; 1],
    labels: BTreeMap<&'static str, String>,
}

/// Every live process with a debug server, as Prometheus scrapes it: its
/// reachable address, its `role` and `node`.
fn scrape_targets(view: &ClusterView) -> Vec<TargetGroup> {
    let live = view
        .supervisors
        .values()
        .filter(|s| s.live)
        .flat_map(|s| s.process.iter().chain(s.children.values()));
    view.dispatcher
        .iter()
        .chain(live)
        .filter_map(|p| {
            let addr = p.debug_addr.as_deref().filter(|a| !a.is_empty())?;
            Some(TargetGroup {
                targets: [profiling::reachable_addr(addr, &p.node)],
                labels: BTreeMap::from([("role", p.role.clone()), ("node", p.node.clone())]),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(role: &str, node: &str, addr: Option<&str>) -> ProcessInfo {
        ProcessInfo {
            role: role.into(),
            node: node.into(),
            pid: 1,
            debug_addr: addr.map(str::to_string),
        }
    }

    #[test]
    fn targets_are_the_live_processes_with_a_debug_server_labelled_by_role_and_node() {
        let mut view = ClusterView {
            dispatcher: Some(process("dispatcher", "n1", Some("0.0.0.0:6060"))),
            ..ClusterView::default()
        };
        let mut live = SupervisorView {
            process: Some(process("supervisor", "n2", Some("0.0.0.0:6061"))),
            live: true,
            ..SupervisorView::default()
        };
        live.children
            .insert(0, process("crawler-child", "n2", Some("0.0.0.0:40001")));
        live.children.insert(1, process("crawler-child", "n2", None));
        view.supervisors.insert("n2".into(), live);
        let gone = SupervisorView {
            process: Some(process("supervisor", "n3", Some("0.0.0.0:6061"))),
            live: false,
            ..SupervisorView::default()
        };
        view.supervisors.insert("n3".into(), gone);
        let json = serde_json::to_value(scrape_targets(&view)).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"targets": ["n1:6060"], "labels": {"node": "n1", "role": "dispatcher"}},
                {"targets": ["n2:6061"], "labels": {"node": "n2", "role": "supervisor"}},
                {"targets": ["n2:40001"], "labels": {"node": "n2", "role": "crawler-child"}},
            ])
        );
    }
}
