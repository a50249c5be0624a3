//! The web console of `switchyard serve`: one HTML page, a stylesheet and a script, embedded in
//! the binary (no CDN, no build step; works offline). The page talks to the same HTTP API as any
//! other client: it asks with `POST /v1/queries`, follows `GET /v1/queries/{id}/events` as
//! server-sent events and draws the query as a timeline, lists `GET /v1/queries` and shows
//! `GET /v1/manifest/routes`.

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;

const INDEX_HTML: &str = include_str!("console/index.html");
const CONSOLE_JS: &str = include_str!("console/console.js");
const CONSOLE_CSS: &str = include_str!("console/console.css");

/// Only the page's own files; nothing from elsewhere, no inline script.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The console's response for `method path`, or `None` when the path is not one of its files.
pub fn asset(method: &Method, path: &str) -> Option<Response> {
    let (body, content_type) = match path {
        "/" | "/index.html" => (INDEX_HTML, "text/html; charset=utf-8"),
        "/console.js" => (CONSOLE_JS, "text/javascript; charset=utf-8"),
        "/console.css" => (CONSOLE_CSS, "text/css; charset=utf-8"),
        _ => return None,
    };
    let mut r = if *method == Method::GET || *method == Method::HEAD {
        Response::new(Body::from(if *method == Method::HEAD { "" } else { body }))
    } else {
        let mut r = Response::new(Body::from("method not allowed\n"));
        *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        r.headers_mut().insert("allow", HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    };
    let headers = r.headers_mut();
    headers.insert("content-type", HeaderValue::from_static(content_type));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    headers.insert("content-security-policy", HeaderValue::from_static(CSP));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_only_its_own_script_and_stylesheet() {
        assert!(INDEX_HTML.contains(r#"<script src="/console.js">"#));
        assert!(INDEX_HTML.contains(r#"href="/console.css""#));
        for file in [INDEX_HTML, CONSOLE_JS, CONSOLE_CSS] {
            assert!(
                !file.contains("http://") && !file.contains("https://"),
                "the console loads nothing from elsewhere"
            );
        }
    }

    #[test]
    fn each_file_is_served_with_its_type_and_other_paths_are_not_the_consoles() {
        for (path, ty) in [("/", "text/html"), ("/console.js", "text/javascript"), ("/console.css", "text/css")] {
            let r = asset(&Method::GET, path).expect("served");
            assert_eq!(r.status(), StatusCode::OK);
            let got = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
            assert!(got.starts_with(ty), "{path}: {got}");
        }
        assert!(asset(&Method::GET, "/v1/queries").is_none());
        assert!(asset(&Method::GET, "/console.js.map").is_none());
        assert_eq!(asset(&Method::POST, "/").map(|r| r.status()), Some(StatusCode::METHOD_NOT_ALLOWED));
    }
}
