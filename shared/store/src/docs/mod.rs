//! The documents of each collection, as serde structs: one per collection,
//! used by every writer and reader, so a field's name and type are written
//! down once. Collection names are in
//! [`crate`] (`PAGES`, `FRONTIER`, ...), which also hands out typed
//! collections.
//!
//! Optional fields are left out when empty rather than stored as null: a
//! store's work grows with a document's elements (see `exchange`).
//!
//! Queries and partial updates (`$set` of a few fields) still use `doc!`,
//! naming fields through the constants next to each struct.

mod body_dict;
mod capture;
mod control;
mod domain;
mod frontier;
mod outcome;
mod page;
mod progress;
mod robots;
mod robots_txt;
mod seed;
mod segment;
mod url;

pub use body_dict::BodyDictDoc;
pub use capture::{CaptureDoc, CaptureId, CaptureKind, RevisitState, MAX_VALIDATOR_BYTES};
pub use control::ControlDoc;
pub use domain::{DomainDoc, DomainHalt, DomainPace};
pub use frontier::{Deferral, FrontierDoc, UrlState};
pub use outcome::{Outcome, OutcomeDoc};
pub use page::{Head, PageDoc, RobotsDirectives, SitemapKind, Skipped};
pub use progress::ProgressDoc;
pub use robots::RobotsDoc;
pub use robots_txt::{RobotsTxtDoc, RobotsTxtId};
pub use seed::SeedDoc;
pub use segment::{SegmentBuilder, SegmentDoc, SegmentEntry, SegmentState, MAX_READ_URLS};
pub use url::UrlDoc;
