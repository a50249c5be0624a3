//! bare-lambda: the smallest `lambda_runtime` function (echo the event back), built with the
//! same release profile as the four functions. `switchyard bench cold-start` starts it beside
//! them and prints each function's init as a multiple of this one's, measured in the same run.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    run(service_fn(|event: LambdaEvent<Value>| async move { Ok::<Value, Error>(event.payload) })).await
}
