//! A web of a test's own shape: one server on 127.0.0.1 answering for any
//! host name (the tests map their names to it with a hosts file), with a
//! function from what was asked to the page.

use std::future::Future;

use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;

/// What a request asked for.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The Host header's name, without the port.
    pub host: String,
    /// The Host header's port (the server's own), for absolute links.
    pub port: String,
    pub path: String,
}

/// Serves `page(asked)`, a status and an HTML body, for every host and path
/// on an ephemeral port of 127.0.0.1, and returns the port. robots.txt is
/// 404 everywhere (everything allowed) without asking `page`.
pub async fn serve<F, Fut>(page: F) -> std::io::Result<u16>
where
    F: Fn(Asked) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = (StatusCode, String)> + Send + 'static,
{
    let app = axum::Router::new().fallback(move |headers: HeaderMap, uri: Uri| {
        let page = page.clone();
        async move {
            let html = [(header::CONTENT_TYPE, "text/html")];
            if uri.path() == "/robots.txt" {
                return (StatusCode::NOT_FOUND, html, String::new()).into_response();
            }
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            let (name, port) = host.split_once(':').unwrap_or((host, ""));
            let asked = Asked {
                host: name.to_string(),
                port: port.to_string(),
                path: uri.path().to_string(),
            };
            let (status, body) = page(asked).await;
            (status, html, body).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(port)
}
