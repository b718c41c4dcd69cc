//! The supervisors the dispatcher knows, and the process list served at
//! `/debug/cluster` (every live process with its role, node, pid and debug
//! address, so one command can profile the whole cluster).

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

/// The `/debug/cluster` route.
pub(crate) fn route(view: SharedView) -> profiling::axum::Router {
    use profiling::axum::{http::header, routing::get, Router};
    Router::new().route(
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
}
