//! events-stream: the streamed routes (`switchyard_engine::live`) as a Lambda function with
//! response streaming, behind a Function URL with `InvokeMode: RESPONSE_STREAM`.
//!
//! A Function URL has no JWT authorizer, so the caller's token is verified here
//! ([`switchyard_engine::jwt::JwtVerifier`], keys from configuration); ownership is checked as on every
//! other route. The reply's status and headers go in the stream's metadata prelude, then the
//! body's chunks as they are produced: the live log of a query until its `final` event.

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use aws_lambda_events::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use lambda_runtime::streaming::Response;
use lambda_runtime::{Error, LambdaEvent, MetadataPrelude};
use std::convert::Infallible;
use switchyard_engine::jwt::JwtVerifier;
use switchyard_engine::live::{handle_stream, Identity, StreamReply};
use switchyard_engine::Deps;

/// The streamed response the runtime sends: a metadata prelude, then the chunks.
pub type Streamed = Response<BoxStream<'static, Result<Bytes, Infallible>>>;

/// Handle one Function URL (payload format 2.0) request.
pub async fn handle(
    deps: &Deps,
    verifier: &JwtVerifier,
    event: LambdaEvent<ApiGatewayV2httpRequest>,
) -> Result<Streamed, Error> {
    let reply = handle_stream(deps, Identity::Jwt(verifier), &event.payload).await;
    Ok(to_lambda(reply))
}

/// Serve invocations from the Lambda Runtime API (`AWS_LAMBDA_RUNTIME_API`) until the process
/// ends: what `main` runs once its dependencies are built.
pub async fn run(deps: &Deps, verifier: &JwtVerifier) -> Result<(), Error> {
    lambda_runtime::run(lambda_runtime::service_fn(|event: LambdaEvent<ApiGatewayV2httpRequest>| {
        handle(deps, verifier, event)
    }))
    .await
}

/// A [`StreamReply`] in the runtime's streaming shape.
pub fn to_lambda(reply: StreamReply) -> Streamed {
    let mut headers = HeaderMap::new();
    for (k, v) in reply.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
            headers.insert(name, value);
        }
    }
    let mut metadata_prelude = MetadataPrelude::default();
    metadata_prelude.status_code = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    metadata_prelude.headers = headers;
    Response { metadata_prelude, stream: reply.body.map(Ok).boxed() }
}
