//! Diagnostics of every process: `tracing` events (`error!`, `warn!`,
//! `info!`, `debug!`) written to stderr, one line each, by [`init`].
//!
//! A text line is
//!
//! ```text
//! 2025-06-01T12:00:00.123456Z  WARN supervisor[4242] supervisor::link: dispatcher silent; reconnecting silence=6s
//! ```
//!
//! the time (RFC 3339, UTC), the level, the role and pid of the process,
//! the module that logged it (its `target`, what `RUST_LOG` filters on),
//! the message and its fields. `RUST_LOG` picks what is shown (an
//! `EnvFilter`: `RUST_LOG=debug`, `RUST_LOG=warn,dispatcher=debug`);
//! without it, `info` and above. `CRAWLER_LOG_FORMAT=json` writes the same
//! as JSON lines (`{"timestamp":..,"level":..,"role":..,"pid":..,
//! "target":..,"message":..,<fields>}`).
//!
//! What a process prints as its output (the dispatcher's progress and
//! `monitor` lines and summary, `pages` results) does not go through here.
//! The crawler children inherit the supervisor's stderr, so their lines
//! (role `crawler-child`) appear among the supervisor's.

use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The environment variable that picks the line format: `text` (the
/// default) or `json`.
pub const FORMAT_ENV: &str = "CRAWLER_LOG_FORMAT";

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `<time> <LEVEL> <role>[<pid>] <target>: <message> <key=value...>`
    Text,
    /// One JSON object per line.
    Json,
}

impl Format {
    /// `text` or `json` (any case); `None` for anything else.
    pub fn parse(s: &str) -> Option<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" | "" => Some(Format::Text),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// Sends this process's `tracing` events to stderr, filtered by `RUST_LOG`
/// (default `info`), formatted as [`FORMAT_ENV`] says. `role` names the
/// process on every line (`dispatcher`, `supervisor`, `crawler-child`, ...).
/// Call it first in `main` (after the allocator is tuned); a second call
/// does nothing.
pub fn init(role: &str) {
    let wanted = std::env::var(FORMAT_ENV).ok();
    let format = wanted.as_deref().map_or(Some(Format::Text), Format::parse);
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env_lossy();
    let lines = format.unwrap_or(Format::Text);
    // On a terminal, log lines go above the live progress line (see
    // `live_line`); elsewhere straight to stderr.
    let installed = if std::io::stderr().is_terminal() {
        tracing::subscriber::set_global_default(subscriber(role, lines, filter, crate::live_line::AboveLive))
    } else {
        tracing::subscriber::set_global_default(subscriber(role, lines, filter, std::io::stderr))
    };
    if installed.is_err() {
        return;
    }
    if format.is_none() {
        tracing::warn!(
            value = wanted.as_deref().unwrap_or_default(),
            "{FORMAT_ENV} is neither text nor json; writing text"
        );
    }
}

/// The subscriber [`init`] installs, writing to `writer` (tests give a buffer).
pub fn subscriber<W>(
    role: &str,
    format: Format,
    filter: EnvFilter,
    writer: W,
) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_env_filter(filter)
        .event_format(Lines {
            role: role.to_string(),
            pid: std::process::id(),
            format,
        })
        .finish()
}

/// Formats one event as a line of [`Format`].
struct Lines {
    role: String,
    pid: u32,
    format: Format,
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        match self.format {
            Format::Text => {
                SystemTime.format_time(&mut w)?;
                write!(
                    w,
                    " {:>5} {}[{}] {}: ",
                    meta.level(),
                    self.role,
                    self.pid,
                    meta.target()
                )?;
                ctx.field_format().format_fields(w.by_ref(), event)?;
                writeln!(w)
            }
            Format::Json => {
                let mut time = String::new();
                SystemTime.format_time(&mut Writer::new(&mut time))?;
                let mut fields = JsonFields::default();
                event.record(&mut fields);
                let mut line = String::with_capacity(256);
                line.push('{');
                let fixed = [
                    ("timestamp", serde_json::Value::from(time)),
                    ("level", meta.level().as_str().into()),
                    ("role", self.role.as_str().into()),
                    ("pid", self.pid.into()),
                    ("target", meta.target().into()),
                ];
                let message = fields.message.take().map(|m| ("message", m.into()));
                for (i, (key, value)) in fixed.into_iter().chain(message).enumerate() {
                    if i > 0 {
                        line.push(',');
                    }
                    push_member(&mut line, key, &value);
                }
                for (key, value) in &fields.others {
                    line.push(',');
                    // A field named like one of ours keeps its value, renamed.
                    if JSON_KEYS.contains(key) {
                        push_member(&mut line, &format!("field.{key}"), value);
                    } else {
                        push_member(&mut line, key, value);
                    }
                }
                line.push('}');
                writeln!(w, "{line}")
            }
        }
    }
}

/// The members every JSON line starts with.
const JSON_KEYS: [&str; 6] = ["timestamp", "level", "role", "pid", "target", "message"];

fn push_member(line: &mut String, key: &str, value: &serde_json::Value) {
    let _ = write!(line, "{}:{value}", serde_json::Value::from(key));
}

/// An event's fields as JSON values, in the order they were given.
#[derive(Default)]
struct JsonFields {
    message: Option<String>,
    others: Vec<(&'static str, serde_json::Value)>,
}

impl JsonFields {
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        match (field.name(), value) {
            ("message", serde_json::Value::String(m)) => self.message = Some(m),
            (name, value) => self.others.push((name, value)),
        }
    }
}

impl Visit for JsonFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and infinities have no JSON number.
        let v = serde_json::Number::from_f64(value).map_or_else(|| value.to_string().into(), Into::into);
        self.put(field, v);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A `MakeWriter` into a shared buffer.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    fn logged(format: Format, filter: &str, log: impl FnOnce()) -> String {
        let buf = Buf::default();
        let sub = subscriber("tester", format, EnvFilter::new(filter), buf.clone());
        tracing::subscriber::with_default(sub, log);
        let bytes = buf.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// `2025-06-01T12:00:00.123456Z`: RFC 3339 in UTC.
    fn is_rfc3339_utc(s: &str) -> bool {
        s.ends_with('Z') && bson::DateTime::parse_rfc3339_str(s).is_ok()
    }

    #[test]
    fn a_text_line_has_time_level_role_target_message_and_fields() {
        let url = "http://site.test/p/1";
        let out = logged(Format::Text, "info", || {
            tracing::warn!(url = %url, status = 503, "storing failed");
            tracing::debug!("not shown at info");
        });
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let (time, rest) = lines[0].split_once(' ').unwrap();
        assert!(is_rfc3339_utc(time), "{time}");
        let pid = std::process::id();
        assert_eq!(
            rest,
            format!(
                " WARN tester[{pid}] shared::logging::tests: storing failed url=http://site.test/p/1 status=503"
            )
        );
    }

    #[test]
    fn the_filter_decides_what_is_shown() {
        let out = logged(Format::Text, "warn,shared::logging=debug", || {
            tracing::debug!("shown");
            tracing::trace!("not shown");
        });
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(
            out.contains("DEBUG tester[") && out.ends_with(": shown\n"),
            "{out}"
        );
        let out = logged(Format::Text, "error", || tracing::warn!("not shown"));
        assert!(out.is_empty(), "{out}");
    }

    #[test]
    fn a_json_line_is_one_object_with_our_members_first() {
        let out = logged(Format::Json, "info", || {
            tracing::error!(n = 3u64, ok = false, share = 0.5, why = ?"x\"y", level = "mine", "it broke: {}", 42);
        });
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.starts_with("{\"timestamp\":\""), "{out}");
        let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert!(is_rfc3339_utc(v["timestamp"].as_str().unwrap()), "{v}");
        assert_eq!(v["level"], "ERROR");
        assert_eq!(v["role"], "tester");
        assert_eq!(v["pid"], std::process::id());
        assert_eq!(v["target"], "shared::logging::tests");
        assert_eq!(v["message"], "it broke: 42");
        assert_eq!(v["n"], 3);
        assert_eq!(v["ok"], false);
        assert_eq!(v["share"], 0.5);
        assert_eq!(v["why"], "\"x\\\"y\"");
        assert_eq!(v["field.level"], "mine");
    }

    #[test]
    fn formats_by_name() {
        assert_eq!(Format::parse("json"), Some(Format::Json));
        assert_eq!(Format::parse(" JSON "), Some(Format::Json));
        assert_eq!(Format::parse("text"), Some(Format::Text));
        assert_eq!(Format::parse("logfmt"), None);
    }
}
