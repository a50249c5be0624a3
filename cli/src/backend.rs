//! What `switchyard ask`, `serve` and the benchmarks share: the backend the pipeline runs on
//! and the API Gateway events that reach its intake handler.

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use std::sync::Arc;
use switchyard_engine::{pollers::PollerConfig, Embedded, EngineSettings};

/// Where the queues and the state live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// In memory, in this process (no setup).
    Memory,
    /// SQS and DynamoDB named by the environment, as the Lambda functions read them
    /// (`SWITCHYARD_TABLE`, `SWITCHYARD_QUEUE_*`; `AWS_ENDPOINT_URL` for a local endpoint).
    Aws,
}

/// Start the four functions' pollers on the chosen backend; returns their dependencies.
pub async fn start_backend(
    backend: Backend,
    manifest: Arc<switchyard_model::manifest::Manifest>,
    settings: EngineSettings,
) -> anyhow::Result<(Arc<switchyard_engine::Deps>, switchyard_engine::pollers::Pollers)> {
    match backend {
        Backend::Memory => {
            let agents = switchyard_agents::Agents::new(&manifest);
            // A retriever without its index cannot answer anything: fail now, as a function's
            // init does, naming the path.
            let unusable = agents.retrievers().problems();
            if !unusable.is_empty() {
                anyhow::bail!("{}", unusable.join("\n"));
            }
            for problem in agents.problems() {
                eprintln!("switchyard: warning: {problem}");
            }
            let system = Embedded::with_agents(manifest, settings, Arc::new(agents));
            let pollers = system.start(PollerConfig::default());
            Ok((system.deps, pollers))
        }
        Backend::Aws => {
            let system = switchyard_aws::AwsSystem::with_manifest(manifest, settings).await?;
            for problem in system.agents.problems() {
                eprintln!("switchyard: warning: {problem}");
            }
            let pollers =
                switchyard_engine::pollers::start(system.deps.clone(), &system.topology, PollerConfig::default());
            Ok((system.deps, pollers))
        }
    }
}

/// An API Gateway HTTP API (v2) event for a request, as API Gateway would deliver it; `claims`
/// stand for the JWT authorizer's. Built field by field, the way the event's own deserializer
/// would read the same JSON (query values split at commas, the last of a repeated query key
/// or header kept, header names lower-cased); the test below holds it equal to that reading.
/// (Going through a `json!` value and `from_value` cost the bench client about 32,000
/// instructions per query, a tenth of the pipeline's.)
pub fn api_event(
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    body: Option<String>,
    claims: Option<(&str, &str)>,
) -> anyhow::Result<ApiGatewayV2httpRequest> {
    use aws_lambda_events::apigw::{
        ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription, ApiGatewayV2httpRequestContext,
        ApiGatewayV2httpRequestContextHttpDescription,
    };
    use aws_lambda_events::http::{HeaderMap, HeaderName, HeaderValue, Method};
    let mut params: std::collections::HashMap<String, Vec<String>> = std::collections::HashMap::new();
    for (k, v) in query.split('&').map(|kv| kv.split_once('=').unwrap_or((kv, ""))) {
        if !k.is_empty() {
            params.insert(k.to_string(), v.split(',').map(str::to_string).collect());
        }
    }
    let mut header_map = HeaderMap::with_capacity(headers.len());
    for (k, v) in headers {
        // `from_bytes` lower-cases the name itself, as the deserializer's parse does.
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| anyhow::anyhow!("header name {k:?} is not a valid HTTP header name"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| anyhow::anyhow!("header {k:?} has a value that is not a valid HTTP header value"))?;
        header_map.insert(name, value);
    }
    let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
    http.method =
        Method::from_bytes(method.as_bytes()).map_err(|_| anyhow::anyhow!("invalid HTTP method {method:?}"))?;
    http.path = Some(path.to_string());
    http.protocol = Some("HTTP/1.1".to_string());
    http.source_ip = Some("127.0.0.1".to_string());
    http.user_agent = Some("switchyard-cli".to_string());
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.http = http;
    context.request_id = Some(uuid::Uuid::new_v4().to_string());
    context.authorizer = claims.map(|(sub, roles)| {
        let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
        jwt.claims = [("sub".to_string(), sub.to_string()), ("roles".to_string(), roles.to_string())].into();
        let mut authorizer = ApiGatewayRequestAuthorizer::default();
        authorizer.jwt = Some(jwt);
        authorizer
    });
    let mut event = ApiGatewayV2httpRequest::default();
    event.version = Some("2.0".to_string());
    event.route_key = Some("$default".to_string());
    event.raw_path = Some(path.to_string());
    event.raw_query_string = Some(query.to_string());
    event.headers = header_map;
    event.query_string_parameters = params.into();
    event.request_context = context;
    event.body = body;
    Ok(event)
}

pub(crate) fn request(
    method: &str,
    path: &str,
    body: Option<String>,
    user: &str,
    roles: &str,
) -> anyhow::Result<ApiGatewayV2httpRequest> {
    let headers = [("content-type".to_string(), "application/json".to_string())];
    api_event(method, path, "", &headers, body, Some((user, roles)))
}

pub(crate) fn body_text(r: &aws_lambda_events::apigw::ApiGatewayV2httpResponse) -> String {
    match &r.body {
        Some(aws_lambda_events::encodings::Body::Text(t)) => t.clone(),
        Some(aws_lambda_events::encodings::Body::Binary(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same request as JSON, read by the event's own deserializer: what API Gateway's
    /// payload turns into in a Lambda function, and what `api_event` built before.
    fn through_json(
        method: &str,
        path: &str,
        query: &str,
        headers: &[(String, String)],
        body: Option<String>,
        claims: Option<(&str, &str)>,
        request_id: &str,
    ) -> anyhow::Result<ApiGatewayV2httpRequest> {
        let params: serde_json::Map<String, serde_json::Value> = query
            .split('&')
            .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
            .filter(|(k, _)| !k.is_empty())
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect();
        let headers: serde_json::Map<String, serde_json::Value> =
            headers.iter().map(|(k, v)| (k.to_lowercase(), serde_json::Value::String(v.clone()))).collect();
        let authorizer = claims.map(
            |(sub, roles)| serde_json::json!({ "jwt": { "claims": { "sub": sub, "roles": roles }, "scopes": null } }),
        );
        Ok(serde_json::from_value(serde_json::json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": query,
            "headers": headers,
            "queryStringParameters": params,
            "requestContext": {
                "http": { "method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "switchyard-cli" },
                "requestId": request_id,
                "authorizer": authorizer,
                "timeEpoch": 0
            },
            "body": body,
            "isBase64Encoded": false
        }))?)
    }

    #[test]
    fn api_event_equals_the_deserialized_json_event() {
        let h = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let cases: Vec<(&str, &str, &str, Vec<(String, String)>, Option<String>, Option<(&str, &str)>)> = vec![
            (
                "POST",
                "/v1/queries",
                "",
                h(&[("content-type", "application/json")]),
                Some("{\"query\":\"hi\"}".into()),
                Some(("bench-user", "")),
            ),
            (
                "GET",
                "/v1/queries/q-1/events",
                "after=3&wait=1",
                h(&[("X-Caller", "alice"), ("Accept", "text/event-stream")]),
                None,
                None,
            ),
            (
                "GET",
                "/v1/sessions",
                "a=1,2&a=3&b&=x&&c=",
                h(&[("Content-Type", "a"), ("content-type", "b")]),
                None,
                Some(("bob", "admin,ml_engineer")),
            ),
            ("DELETE", "/", "", vec![], Some(String::new()), None),
        ];
        for (method, path, query, headers, body, claims) in cases {
            let direct = api_event(method, path, query, &headers, body.clone(), claims).unwrap();
            let id = direct.request_context.request_id.clone().unwrap();
            let json = through_json(method, path, query, &headers, body, claims, &id).unwrap();
            assert_eq!(direct, json, "{method} {path}?{query}");
        }
        // What the deserializer refuses, the direct build refuses too.
        let bad = h(&[("x-bad", "line\nbreak")]);
        assert!(through_json("GET", "/", "", &bad, None, None, "r").is_err());
        let err = api_event("GET", "/", "", &bad, None, None).unwrap_err().to_string();
        assert!(err.contains("x-bad") && err.contains("header value"), "{err}");
        let bad = h(&[("bad header", "v")]);
        assert!(through_json("GET", "/", "", &bad, None, None, "r").is_err());
        assert!(api_event("GET", "/", "", &bad, None, None).unwrap_err().to_string().contains("header name"));
    }
}
