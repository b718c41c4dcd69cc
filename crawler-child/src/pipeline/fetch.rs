//! One request of a URL's step: the domain's connections and turn, the
//! server's turn, a fetch slot, then the request itself, each wait giving
//! way to a recall or the stop while the URL has not started.

use super::*;

/// Takes the domain's connections (all of them when it has a delay, see
/// [`SharedDomain`]), waits for its turn (holding its lock, so its tasks
/// start one by one), then fetches without the lock. Each wait gives way
/// to a recall or the stop while the URL is `unstarted`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn fetch(
    ctx: &Ctx,
    st: &SharedDomain,
    url: &Url,
    delay: Duration,
    server: Option<&Paced>,
    conditions: &reqwest::header::HeaderMap,
    unstarted: Option<Ticket>,
) -> Result<Fetched, http::FetchError> {
    let permits = if delay.is_zero() { 1 } else { st.max_connections };
    let asked = Instant::now();
    let _connections = unless_recalled(ctx, st, unstarted, st.connections.acquire_many(permits))
        .await?
        .ok();
    let domain = {
        // Waiting for the lock is waiting for the domain too: another of
        // its tasks holds it through its politeness wait.
        let mut s = unless_recalled(ctx, st, unstarted, st.state.lock()).await?;
        let domain = s.domain.clone();
        record_wait(ctx, Op::DomainWait, asked, &domain);
        fenced(ctx)?;
        unless_recalled(ctx, st, unstarted, async {
            s.pace(ctx).await.wait(delay, &ctx.timing, &domain).await
        })
        .await?;
        domain
    };
    // The server's turn, after the domain's (so a domain's wait never
    // holds its server) and before a fetch slot (so a server's wait never
    // holds a slot).
    let turn = unless_recalled(ctx, st, unstarted, server_turn(ctx, server, &domain)).await?;
    let asked = Instant::now();
    let permit = unless_recalled(ctx, st, unstarted, ctx.fetch_slots.acquire()).await?;
    record_wait(ctx, Op::SlotWait, asked, &domain);
    fenced(ctx)?;
    let start = Instant::now();
    let res = ctx.http.get(url, conditions).await;
    drop(permit);
    drop(turn);
    st.state.lock().await.pace(ctx).await.request_done(delay);
    ctx.times.touch(&domain, delay);
    let outcome = match &res {
        Ok(_) => "ok",
        Err(e) => e.kind().as_str(),
    };
    ctx.timing.record(
        Op::Fetch,
        start.elapsed(),
        outcome,
        Some(&domain),
        Some(url.as_str()),
    );
    if let Ok(r) = &res {
        metric::PAGES.at([status_class(r.status)]).increment(1);
        metric::FETCHED_BYTES.get().increment(r.body.len() as u64);
    }
    res
}

/// Records a wait that began at `since`, if there was one: most
/// acquisitions are immediate, and a line for each would only cost.
pub(crate) fn record_wait(ctx: &Ctx, op: Op, since: Instant, domain: &str) {
    let waited = since.elapsed();
    if waited >= MIN_RECORDED_WAIT {
        ctx.timing.record(op, waited, "waited", Some(domain), None);
    }
}

/// Shorter waits than this are not recorded (they are scheduling noise).
const MIN_RECORDED_WAIT: Duration = Duration::from_micros(50);

pub(super) fn status_class(status: u16) -> &'static str {
    match status {
        200 => "200",
        201..=299 => "2xx",
        301 | 302 | 303 | 307 | 308 => "3xx",
        404 => "404",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}
