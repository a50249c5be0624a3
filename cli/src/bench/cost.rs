//! The pricing model: us-east-1 prices, the latency model of a query, and the cost per
//! million queries next to Step Functions.

/// Public us-east-1 prices, USD.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    /// Lambda on arm64, per GB-second (first tier).
    pub lambda_gb_second: f64,
    /// Lambda, per million requests (invocations).
    pub lambda_per_million_requests: f64,
    /// SQS standard queues, per million requests (each 64 KB chunk of a payload is a request).
    pub sqs_per_million_requests: f64,
    /// DynamoDB on-demand, per million write request units (1 KB; transactional: 2 per KB).
    pub dynamodb_per_million_wru: f64,
    /// DynamoDB on-demand, per million read request units (strongly consistent 4 KB read).
    pub dynamodb_per_million_rru: f64,
    /// Step Functions Standard, per million state transitions.
    pub step_functions_per_million_transitions: f64,
    /// Step Functions Express, per million requests (executions started).
    pub express_per_million_requests: f64,
    /// Step Functions Express, per GB-second of duration (first tier).
    pub express_gb_second: f64,
}

/// The prices used, as published for us-east-1 (docs/performance.md#requests-per-query-and-cost).
pub const US_EAST_1: Prices = Prices {
    lambda_gb_second: 0.000_013_333_4,
    lambda_per_million_requests: 0.20,
    sqs_per_million_requests: 0.40,
    dynamodb_per_million_wru: 0.625,
    dynamodb_per_million_rru: 0.125,
    step_functions_per_million_transitions: 25.0,
    express_per_million_requests: 1.00,
    express_gb_second: 0.000_016_67,
};

/// Step Functions Express bills duration in 64 MB steps, at least one: its memory floor.
pub const EXPRESS_MEMORY_MB: f64 = 64.0;
/// Step Functions Express rounds each execution's duration up to 100 ms.
pub const EXPRESS_BILLING_STEP_MS: f64 = 100.0;

/// How long a function waits on each AWS call, in ms: the latency model that turns counted
/// requests into Lambda duration. These are typical in-region figures for small items and
/// messages (DynamoDB answers single-item requests in single-digit milliseconds; a transaction
/// coordinates several items and takes about twice as long; an SQS send is a few ms), chosen
/// on the high side and stated here rather than measured: the local endpoint's own latency
/// says nothing about AWS. Receives and deletes are made by Lambda's SQS pollers, outside the
/// function's billed time.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct LatencyModel {
    /// `GetItem`, `Query` (one page).
    pub ddb_read_ms: f64,
    /// `PutItem`, `UpdateItem`.
    pub ddb_write_ms: f64,
    /// `TransactWriteItems`.
    pub ddb_transact_ms: f64,
    /// `SendMessage`, `SendMessageBatch`.
    pub sqs_send_ms: f64,
    /// The handler's own work per invocation (parsing, planning, JSON), at 256 MB.
    pub compute_ms: f64,
    /// Lambda rounds each invocation up to the next millisecond: half a millisecond on average.
    pub rounding_ms: f64,
}

/// The latency model of the cost table.
pub const LATENCY: LatencyModel = LatencyModel {
    ddb_read_ms: 5.0,
    ddb_write_ms: 7.0,
    ddb_transact_ms: 15.0,
    sqs_send_ms: 8.0,
    compute_ms: 2.0,
    rounding_ms: 0.5,
};

/// Requests one query's function invocations made, per kind (averages).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CallCounts {
    /// Function invocations.
    pub invocations: f64,
    /// DynamoDB reads (`GetItem`, `Query` pages).
    pub ddb_reads: f64,
    /// DynamoDB single-item writes.
    pub ddb_writes: f64,
    /// DynamoDB transactions.
    pub ddb_transacts: f64,
    /// SQS send requests.
    pub sqs_sends: f64,
}

impl LatencyModel {
    /// Modeled function time of one query, ms (every invocation's waits and work, summed).
    pub fn function_ms(&self, c: &CallCounts) -> f64 {
        c.ddb_reads * self.ddb_read_ms
            + c.ddb_writes * self.ddb_write_ms
            + c.ddb_transacts * self.ddb_transact_ms
            + c.sqs_sends * self.sqs_send_ms
            + c.invocations * (self.compute_ms + self.rounding_ms)
    }
}

/// When the prices were taken.
pub const PRICES_TAKEN: &str = "2026-11-22";

/// Memory of every function in the SAM template, MB.
pub const FUNCTION_MEMORY_MB: f64 = 256.0;

/// State transitions of the Step Functions Standard state machine doing the same flow for k
/// agents when nothing fails: `Route` (Task: classify and plan) → `Agents` (Parallel, k
/// branches) → k × `Agent_i` (Task with Retry and Catch; the Catch's Pass state is entered only
/// on failure, a retry would add one transition) → `Synthesize` (Task) → `Band` (Choice on the
/// confidence) → `Answer` (Succeed): k + 5. The deadline is the execution's `TimeoutSeconds`,
/// free; the Lambda invocations behind the Tasks are not counted (in Switchyard's favour: SFN
/// would still pay them).
pub fn step_functions_transitions(k: u64) -> u64 {
    k + 5
}

/// What one query uses, averaged over the measured queries.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Usage {
    /// Lambda invocations (intake, router, workers, synthesizer, the deadline's synthesizer run).
    pub invocations: f64,
    /// Billed GB-seconds (each invocation rounded up to 1 ms, at [`FUNCTION_MEMORY_MB`]).
    pub gb_seconds: f64,
    /// Billed SQS requests: sends + receives that returned a message + deletes.
    pub sqs_requests: f64,
    /// DynamoDB write request units.
    pub wru: f64,
    /// DynamoDB read request units.
    pub rru: f64,
    /// Wall time of the query as modeled (for Step Functions Express's duration), ms.
    pub wall_ms: f64,
}

/// Cost per million queries, USD.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Cost {
    /// Lambda requests and duration.
    pub lambda: f64,
    /// SQS requests.
    pub sqs: f64,
    /// DynamoDB request units.
    pub dynamodb: f64,
    /// Sum of the three.
    pub total: f64,
    /// Step Functions Standard transitions for the same flow.
    pub step_functions: f64,
    /// Step Functions Express for the same flow: one request plus its duration (the same wall
    /// time, rounded up to 100 ms) at its 64 MB floor.
    pub step_functions_express: f64,
}

/// Cost per million queries of `usage`, and of Step Functions Standard for k agents.
pub fn cost_per_million(usage: &Usage, k: u64, prices: &Prices) -> Cost {
    let lambda =
        usage.invocations * prices.lambda_per_million_requests + usage.gb_seconds * 1e6 * prices.lambda_gb_second;
    let sqs = usage.sqs_requests * prices.sqs_per_million_requests;
    let dynamodb = usage.wru * prices.dynamodb_per_million_wru + usage.rru * prices.dynamodb_per_million_rru;
    let step_functions = step_functions_transitions(k) as f64 * prices.step_functions_per_million_transitions;
    let billed_s = (usage.wall_ms / EXPRESS_BILLING_STEP_MS).ceil().max(1.0) * EXPRESS_BILLING_STEP_MS / 1e3;
    let step_functions_express =
        prices.express_per_million_requests + billed_s * EXPRESS_MEMORY_MB / 1024.0 * prices.express_gb_second * 1e6;
    Cost { lambda, sqs, dynamodb, total: lambda + sqs + dynamodb, step_functions, step_functions_express }
}
