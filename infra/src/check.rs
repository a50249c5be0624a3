//! Checking: every way a template (committed, or edited by hand with short or long
//! intrinsic forms) disagrees with what the manifest needs.

use super::*;
use serde_yaml::{Mapping, Value};
use std::collections::BTreeSet;
use switchyard_engine::handlers::HTTP_ROUTES;
use switchyard_engine::jwt::{ENV_JWT_AUDIENCE, ENV_JWT_ISSUER, ENV_JWT_JWKS};
use switchyard_model::limits::{LAMBDA_MAX_TIMEOUT_S, MAX_ATTEMPT_TIMEOUT_MS, WORKER_MARGIN_S};
use switchyard_model::manifest::{Manifest, TierTimeout};
use switchyard_model::topology::{QueueSpec, Topology, ENV_ENCODER, ENV_TABLE, ENV_TIER, VISIBILITY_FACTOR};

// ---- checking ------------------------------------------------------------------------------

/// Every way `template_text` disagrees with the deployment `manifest` needs; empty when none.
///
/// Each message starts with the logical id of the resource at fault (or `routing.yaml` for a
/// problem of the manifest itself) and says what the manifest requires.
pub fn check(template_text: &str, manifest: &Manifest) -> Vec<String> {
    let mut problems = manifest_problems(manifest);
    let doc: Value = match serde_yaml::from_str(template_text) {
        Ok(doc) => doc,
        Err(e) => {
            problems.push(format!("the template is not YAML: {e}"));
            return problems;
        }
    };
    let empty = Mapping::new();
    let resources = doc.get("Resources").and_then(Value::as_mapping).unwrap_or(&empty);
    if resources.is_empty() {
        problems.push("the template has no Resources".to_string());
        return problems;
    }
    let template = Template { resources, globals: doc.get("Globals").and_then(|g| g.get("Function")) };
    let topology = Topology::for_manifest(manifest);
    let functions = functions(manifest, &topology);

    check_table(&template, &topology, &mut problems);
    check_api(&template, &mut problems);
    for q in &topology.queues {
        check_queue(&template, q, &mut problems);
    }
    for f in &functions {
        check_function(&template, &topology, f, &mut problems);
    }
    check_encoder_layer(&template, manifest, &mut problems);
    check_strays(&template, &topology, &functions, &mut problems);
    check_outputs(&doc, &topology, &mut problems);
    problems
}

/// Problems of the manifest itself that no template can fix.
pub(crate) fn manifest_problems(manifest: &Manifest) -> Vec<String> {
    let mut problems = Vec::new();
    let max_s = MAX_ATTEMPT_TIMEOUT_MS / 1_000;
    let too_long = |ms: u64| ms > MAX_ATTEMPT_TIMEOUT_MS;
    for tier in &manifest.tiers {
        if let TierTimeout::Fixed(d) = tier.timeout {
            if too_long(d.as_millis()) {
                problems.push(format!(
                    "routing.yaml: tier {} timeout {} s is longer than an attempt can run in one worker invocation ({max_s} s: Lambda's {LAMBDA_MAX_TIMEOUT_S} s less a {WORKER_MARGIN_S} s margin); the AgentWorkerTier{}Function timeout is capped at {LAMBDA_MAX_TIMEOUT_S} s and its attempts would be cut short",
                    tier.tier,
                    d.as_millis().div_ceil(1_000),
                    tier.tier
                ));
            }
        }
    }
    for agent in &manifest.agents {
        if let Some(d) = agent.timeout {
            if too_long(d.as_millis()) {
                problems.push(format!(
                    "routing.yaml: agent `{}` timeout {} s is longer than an attempt can run in one tier-{} worker invocation ({max_s} s)",
                    agent.id,
                    d.as_millis().div_ceil(1_000),
                    agent.tier
                ));
            }
        }
    }
    let mut tiers: Vec<_> = manifest.tiers.iter().filter_map(|t| Some((t.tier, t.reserved_concurrency?))).collect();
    tiers.sort_unstable();
    for pair in tiers.windows(2) {
        let ((lower, lower_c), (higher, higher_c)) = (pair[0], pair[1]);
        if higher_c > lower_c {
            problems.push(format!(
                "routing.yaml: tier {higher} reserves {higher_c} concurrent executions, more than tier {lower}'s {lower_c}; a lower tier has priority and must reserve at least as many"
            ));
        }
    }
    problems
}

pub(crate) struct Template<'a> {
    resources: &'a Mapping,
    globals: Option<&'a Value>,
}

impl<'a> Template<'a> {
    fn resource(&self, id: &str) -> Option<&'a Value> {
        self.resources.get(id)
    }

    /// The properties of resource `id` when it exists with type `ty`; otherwise a problem.
    fn typed(&self, id: &str, ty: &str, what: &str) -> Result<&'a Value, String> {
        let resource = self.resource(id).ok_or_else(|| format!("{id}: the {what} is missing"))?;
        let actual = resource.get("Type").and_then(Value::as_str).unwrap_or("");
        if actual != ty {
            return Err(format!("{id}: the {what} must be of type {ty}, not `{actual}`"));
        }
        Ok(resource.get("Properties").unwrap_or(&Value::Null))
    }

    /// A function property, falling back to `Globals.Function` as SAM does.
    fn function_property(&self, props: &'a Value, key: &str) -> Option<&'a Value> {
        props.get(key).or_else(|| self.globals.and_then(|g| g.get(key)))
    }

    /// A function's environment variables: `Globals` merged with its own, as SAM does.
    fn environment(&self, props: &'a Value) -> Vec<(String, &'a Value)> {
        let mut vars: Vec<(String, &'a Value)> = Vec::new();
        let sources = [self.globals, Some(props)];
        for source in sources.into_iter().flatten() {
            let Some(m) = source.get("Environment").and_then(|e| e.get("Variables")).and_then(Value::as_mapping) else {
                continue;
            };
            for (k, v) in m {
                let Some(k) = k.as_str() else { continue };
                vars.retain(|(existing, _)| existing != k);
                vars.push((k.to_string(), v));
            }
        }
        vars
    }
}

/// An intrinsic function call in either spelling: (`Ref` / `Fn::GetAtt` / …, its argument).
pub(crate) fn intrinsic(v: &Value) -> Option<(String, &Value)> {
    match v {
        Value::Tagged(t) => {
            let tag = t.tag.to_string();
            let name = tag.trim_start_matches('!');
            let name = if name == "Ref" { name.to_string() } else { format!("Fn::{name}") };
            Some((name, &t.value))
        }
        Value::Mapping(m) if m.len() == 1 => {
            let (k, arg) = m.iter().next()?;
            let k = k.as_str()?;
            (k == "Ref" || k.starts_with("Fn::")).then(|| (k.to_string(), arg))
        }
        _ => None,
    }
}

/// `!Ref X` / `{Ref: X}` -> `X`.
pub(crate) fn ref_target(v: &Value) -> Option<String> {
    let (name, arg) = intrinsic(v)?;
    (name == "Ref").then(|| arg.as_str().map(str::to_string)).flatten()
}

/// `!GetAtt X.Arn` / `{Fn::GetAtt: [X, Arn]}` -> `(X, Arn)`.
pub(crate) fn get_att_target(v: &Value) -> Option<(String, String)> {
    let (name, arg) = intrinsic(v)?;
    if name != "Fn::GetAtt" {
        return None;
    }
    match arg {
        Value::String(text) => {
            let (id, attribute) = text.split_once('.')?;
            Some((id.to_string(), attribute.to_string()))
        }
        Value::Sequence(items) if items.len() == 2 => {
            Some((items[0].as_str()?.to_string(), items[1].as_str()?.to_string()))
        }
        _ => None,
    }
}

/// A number written as a YAML number or a string (CloudFormation accepts both).
pub(crate) fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

pub(crate) fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(t) => Some(t.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A value that may be a single item or a list of them.
pub(crate) fn items(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Sequence(list)) => list.iter().collect(),
        Some(other) => vec![other],
        None => Vec::new(),
    }
}

pub(crate) fn check_table(template: &Template<'_>, topology: &Topology, problems: &mut Vec<String>) {
    let props = match template.typed(TABLE_ID, "AWS::DynamoDB::Table", "DynamoDB table") {
        Ok(props) => props,
        Err(problem) => return problems.push(problem),
    };
    let t = &topology.table;
    let keys = |schema: Option<&Value>| -> Vec<(String, String)> {
        items(schema)
            .into_iter()
            .filter_map(|k| Some((text(k.get("AttributeName"))?, text(k.get("KeyType"))?)))
            .collect()
    };
    let want = |pk: &str, sk: &str| vec![(pk.to_string(), "HASH".to_string()), (sk.to_string(), "RANGE".to_string())];
    if keys(props.get("KeySchema")) != want(t.partition_key, t.sort_key) {
        problems.push(format!(
            "{TABLE_ID}: the key schema must be `{}` (HASH) and `{}` (RANGE)",
            t.partition_key, t.sort_key
        ));
    }
    if text(props.get("BillingMode")).as_deref() != Some("PAY_PER_REQUEST") {
        problems.push(format!("{TABLE_ID}: BillingMode must be PAY_PER_REQUEST"));
    }
    let ttl = props.get("TimeToLiveSpecification");
    let ttl_on = ttl.and_then(|t| t.get("Enabled")).and_then(Value::as_bool) == Some(true);
    if !ttl_on || text(ttl.and_then(|t| t.get("AttributeName"))).as_deref() != Some(t.ttl_attribute) {
        problems.push(format!("{TABLE_ID}: TTL must be enabled on `{}`", t.ttl_attribute));
    }
    let pitr = props.get("PointInTimeRecoverySpecification").and_then(|p| p.get("PointInTimeRecoveryEnabled"));
    if pitr.and_then(Value::as_bool) != Some(true) {
        problems.push(format!("{TABLE_ID}: point-in-time recovery must be enabled"));
    }
    for index in &t.indexes {
        let found = items(props.get("GlobalSecondaryIndexes"))
            .into_iter()
            .find(|i| text(i.get("IndexName")).as_deref() == Some(index.name));
        match found {
            None => problems.push(format!("{TABLE_ID}: the global secondary index `{}` is missing", index.name)),
            Some(i) if keys(i.get("KeySchema")) != want(index.partition_key, index.sort_key) => problems.push(format!(
                "{TABLE_ID}: index `{}` must be keyed on `{}` (HASH) and `{}` (RANGE)",
                index.name, index.partition_key, index.sort_key
            )),
            Some(_) => {}
        }
    }
}

pub(crate) fn check_api(template: &Template<'_>, problems: &mut Vec<String>) {
    let props = match template.typed(API_ID, "AWS::Serverless::HttpApi", "HTTP API") {
        Ok(props) => props,
        Err(problem) => return problems.push(problem),
    };
    let auth = props.get("Auth");
    let default = text(auth.and_then(|a| a.get("DefaultAuthorizer")));
    let jwt = default
        .as_deref()
        .and_then(|name| auth.and_then(|a| a.get("Authorizers")).and_then(|a| a.get(name)))
        .and_then(|a| a.get("JwtConfiguration"));
    if jwt.is_none() {
        problems.push(format!("{API_ID}: the default authorizer must be a JWT authorizer (Auth.DefaultAuthorizer naming one with JwtConfiguration)"));
    }
}

pub(crate) fn check_queue(template: &Template<'_>, q: &QueueSpec, problems: &mut Vec<String>) {
    let id = queue_id(q.id);
    let dlq = queue_id(q.id.dlq());
    match template.typed(&id, "AWS::SQS::Queue", &format!("{} queue", q.name)) {
        Err(problem) => problems.push(problem),
        Ok(props) => {
            let redrive = props.get("RedrivePolicy");
            let target = redrive.and_then(|r| r.get("deadLetterTargetArn")).and_then(get_att_target);
            if target != Some((dlq.clone(), "Arn".to_string())) {
                problems.push(format!("{id}: RedrivePolicy.deadLetterTargetArn must be !GetAtt {dlq}.Arn"));
            }
            match number(redrive.and_then(|r| r.get("maxReceiveCount"))) {
                Some(count) if count >= u64::from(q.max_receive_count) => {}
                Some(count) => problems.push(format!(
                    "{id}: maxReceiveCount {count} is below {}: a message must get {} receives before it is dead-lettered",
                    q.max_receive_count, q.max_receive_count
                )),
                None => problems.push(format!("{id}: RedrivePolicy.maxReceiveCount is missing (want {})", q.max_receive_count)),
            }
            // The function timeout that matters is the larger of the template's and the topology's.
            let function_timeout = template
                .resource(&function_id(&q.consumer))
                .and_then(|f| f.get("Properties"))
                .and_then(|p| number(template.function_property(p, "Timeout")))
                .unwrap_or(0)
                .max(q.function_timeout_s);
            let visibility = number(props.get("VisibilityTimeout")).unwrap_or(30);
            if visibility < VISIBILITY_FACTOR * function_timeout {
                problems.push(format!(
                    "{id}: VisibilityTimeout {visibility} s is less than {VISIBILITY_FACTOR} × the {} timeout ({VISIBILITY_FACTOR} × {function_timeout} s = {} s)",
                    function_id(&q.consumer),
                    VISIBILITY_FACTOR * function_timeout
                ));
            }
        }
    }
    if let Err(problem) = template.typed(&dlq, "AWS::SQS::Queue", &format!("{} dead-letter queue", q.name)) {
        problems.push(problem);
    }
    let stem = pascal_case(&q.name);
    let alarms = [
        (format!("{stem}DeadLetterAlarm"), "ApproximateNumberOfMessagesVisible", dlq.as_str()),
        (format!("{stem}AgeAlarm"), "ApproximateAgeOfOldestMessage", id.as_str()),
    ];
    for (alarm, metric, watched) in alarms {
        let Ok(props) = template.typed(&alarm, "AWS::CloudWatch::Alarm", &format!("{metric} alarm on {watched}"))
        else {
            problems.push(format!("{alarm}: the {metric} alarm on {watched} is missing"));
            continue;
        };
        let watches = items(props.get("Dimensions"))
            .into_iter()
            .filter_map(|d| get_att_target(d.get("Value")?))
            .any(|(target, _)| target == watched);
        if text(props.get("MetricName")).as_deref() != Some(metric) || !watches {
            problems.push(format!("{alarm}: must alarm on {metric} of {watched}"));
        }
    }
}

pub(crate) fn check_function(
    template: &Template<'_>,
    topology: &Topology,
    f: &FunctionSpec,
    problems: &mut Vec<String>,
) {
    let id = function_id(&f.name);
    let what = match f.tier {
        Some(t) => format!("tier-{t} agent-worker function"),
        None => format!("{} function", f.name),
    };
    let props = match template.typed(&id, "AWS::Serverless::Function", &what) {
        Ok(props) => props,
        Err(problem) => return problems.push(problem),
    };
    let prop = |key: &str| template.function_property(props, key);

    match number(prop("Timeout")) {
        None => problems.push(format!("{id}: Timeout is missing (Lambda's default is 3 s; the {what} needs {} s)", f.timeout_s)),
        Some(t) if t < f.timeout_s => problems.push(match f.tier {
            Some(tier) => format!(
                "{id}: Timeout {t} s is shorter than tier {tier} needs ({} s: its longest attempt plus a {WORKER_MARGIN_S} s margin)",
                f.timeout_s
            ),
            None => format!("{id}: Timeout {t} s is shorter than the {} s the {what} needs", f.timeout_s),
        }),
        Some(t) if t > LAMBDA_MAX_TIMEOUT_S => {
            problems.push(format!("{id}: Timeout {t} s is over Lambda's maximum of {LAMBDA_MAX_TIMEOUT_S} s"))
        }
        Some(_) => {}
    }
    if text(prop("Runtime")).as_deref() != Some(RUNTIME) {
        problems.push(format!("{id}: Runtime must be {RUNTIME}"));
    }
    if text(prop("Handler")).as_deref() != Some(HANDLER) {
        problems.push(format!("{id}: Handler must be {HANDLER}"));
    }
    let archs: Vec<String> = items(prop("Architectures")).into_iter().filter_map(|a| text(Some(a))).collect();
    if archs != [ARCHITECTURE] {
        problems.push(format!("{id}: Architectures must be [{ARCHITECTURE}]"));
    }
    if text(prop("Tracing")).as_deref() != Some("Active") {
        problems.push(format!("{id}: Tracing must be Active"));
    }
    let logging = prop("LoggingConfig").and_then(|l| l.get("LogFormat"));
    if text(logging).as_deref() != Some("JSON") {
        problems.push(format!("{id}: LoggingConfig.LogFormat must be JSON"));
    }
    let metadata = template.resource(&id).and_then(|r| r.get("Metadata"));
    let build_method = text(metadata.and_then(|m| m.get("BuildMethod")));
    let binary = text(metadata.and_then(|m| m.get("BuildProperties")).and_then(|b| b.get("Binary")));
    if build_method.as_deref() != Some(BUILD_METHOD) || binary.as_deref() != Some(f.binary) {
        problems.push(format!(
            "{id}: Metadata must be BuildMethod {BUILD_METHOD} with BuildProperties.Binary `{}`",
            f.binary
        ));
    }

    match (f.reserved_concurrency, number(prop("ReservedConcurrentExecutions"))) {
        (Some(want), Some(got)) if got != u64::from(want) => problems.push(format!(
            "{id}: ReservedConcurrentExecutions {got} differs from routing.yaml's reserved_concurrency {want}"
        )),
        (Some(want), None) => {
            problems.push(format!("{id}: ReservedConcurrentExecutions is missing (routing.yaml reserves {want})"))
        }
        (None, Some(got)) => problems.push(format!("{id}: ReservedConcurrentExecutions {got} is not in routing.yaml")),
        _ => {}
    }

    check_environment(template, topology, f, &id, props, problems);
    let has_layer = items(props.get("Layers")).into_iter().any(|l| ref_target(l).as_deref() == Some(ENCODER_LAYER_ID));
    if f.encoder && !has_layer {
        problems.push(format!(
            "{id}: Layers must hold !Ref {ENCODER_LAYER_ID} (routing.yaml names classifier.encoder; the function reads it at start)"
        ));
    }
    if !f.encoder && has_layer {
        problems.push(format!("{id}: Layers holds {ENCODER_LAYER_ID}, but this function reads no encoder"));
    }
    check_events(f, &id, props, problems);
    check_permissions(template, f, &id, props, problems);
}

pub(crate) fn check_environment(
    template: &Template<'_>,
    topology: &Topology,
    f: &FunctionSpec,
    id: &str,
    props: &Value,
    problems: &mut Vec<String>,
) {
    let vars = template.environment(props);
    let get = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let mut expected: Vec<(String, String)> = vec![(ENV_TABLE.to_string(), TABLE_ID.to_string())];
    for q in &topology.queues {
        expected.push((q.url_env.clone(), queue_id(q.id)));
    }
    if f.streaming {
        expected.push((ENV_JWT_ISSUER.to_string(), "JwtIssuer".to_string()));
        expected.push((ENV_JWT_JWKS.to_string(), "JwtJwks".to_string()));
        if get(ENV_JWT_AUDIENCE).is_none() {
            problems.push(format!("{id}: environment variable {ENV_JWT_AUDIENCE} is missing (want the JwtAudience list joined with commas)"));
        }
    }
    for (name, target) in &expected {
        match get(name) {
            None => problems.push(format!("{id}: environment variable {name} is missing (want !Ref {target})")),
            Some(v) if ref_target(v).as_deref() != Some(target) => {
                problems.push(format!("{id}: environment variable {name} must be !Ref {target}"))
            }
            Some(_) => {}
        }
    }
    match (f.tier, text(get(ENV_TIER))) {
        (Some(t), Some(got)) if got != t.to_string() => {
            problems.push(format!("{id}: environment variable {ENV_TIER} is `{got}`, want `{t}`"))
        }
        (Some(t), None) => problems.push(format!("{id}: environment variable {ENV_TIER} is missing (want `{t}`)")),
        (None, Some(_)) => problems
            .push(format!("{id}: environment variable {ENV_TIER} is set on a function that is not an agent-worker")),
        _ => {}
    }
    match (f.encoder, text(get(ENV_ENCODER))) {
        (true, Some(got)) if got != LAYER_MOUNT => problems.push(format!(
            "{id}: environment variable {ENV_ENCODER} is `{got}`, want `{LAYER_MOUNT}` (where Lambda unpacks the encoder layer)"
        )),
        (true, None) => problems.push(format!(
            "{id}: environment variable {ENV_ENCODER} is missing (want `{LAYER_MOUNT}`: routing.yaml names classifier.encoder)"
        )),
        (false, Some(_)) => problems.push(format!(
            "{id}: environment variable {ENV_ENCODER} is set, but routing.yaml names no classifier.encoder for this function to read"
        )),
        _ => {}
    }
    for (name, _) in &vars {
        let known = name == ENV_TIER
            || name == ENV_ENCODER
            || (f.streaming && name == ENV_JWT_AUDIENCE)
            || expected.iter().any(|(e, _)| e == name);
        if name.starts_with("SWITCHYARD_") && !known {
            problems.push(format!(
                "{id}: environment variable {name} names nothing in routing.yaml's topology (a tier removed without re-rendering?)"
            ));
        }
    }
}

/// The encoder layer: there, of its type and with content, exactly when the manifest names an
/// encoder.
pub(crate) fn check_encoder_layer(template: &Template<'_>, manifest: &Manifest, problems: &mut Vec<String>) {
    const LAYER_TYPE: &str = "AWS::Serverless::LayerVersion";
    if manifest.classifier.encoder.is_none() {
        if template.resource(ENCODER_LAYER_ID).is_some() {
            problems.push(format!(
                "{ENCODER_LAYER_ID}: routing.yaml names no classifier.encoder (an encoder removed without re-rendering?)"
            ));
        }
        return;
    }
    match template.typed(ENCODER_LAYER_ID, LAYER_TYPE, "layer of the cascade's sentence encoder") {
        Err(problem) => problems.push(format!("{problem} (routing.yaml names classifier.encoder)")),
        Ok(props) => {
            // A folder (what render writes) or an S3 location ({Bucket, Key}) of its zip.
            let content = props.get("ContentUri");
            let named = match content {
                Some(Value::String(uri)) => !uri.trim().is_empty(),
                Some(Value::Mapping(location)) => !location.is_empty(),
                _ => false,
            };
            if !named {
                problems.push(format!(
                    "{ENCODER_LAYER_ID}: ContentUri must name the encoder's folder (or the S3 location of its zip)"
                ));
            }
        }
    }
}

pub(crate) fn check_events(f: &FunctionSpec, id: &str, props: &Value, problems: &mut Vec<String>) {
    let empty = Mapping::new();
    let events = props.get("Events").and_then(Value::as_mapping).unwrap_or(&empty);
    let of_type = |ty: &str| -> Vec<(String, &Value)> {
        events
            .iter()
            .filter(|(_, e)| text(e.get("Type")).as_deref() == Some(ty))
            .map(|(name, e)| (name.as_str().unwrap_or("?").to_string(), e.get("Properties").unwrap_or(&Value::Null)))
            .collect()
    };
    let consumed = of_type("SQS");
    if f.streaming {
        for (name, _) in events.iter() {
            problems.push(format!(
                "{id}: event {} on the events-stream function; it is reached through its Function URL only",
                name.as_str().unwrap_or("?")
            ));
        }
        let url = props.get("FunctionUrlConfig");
        if text(url.and_then(|u| u.get("InvokeMode"))).as_deref() != Some(STREAM_INVOKE_MODE) {
            problems.push(format!(
                "{id}: FunctionUrlConfig.InvokeMode must be {STREAM_INVOKE_MODE}; a buffered URL delivers the live events only when the query ends"
            ));
        }
        if text(url.and_then(|u| u.get("AuthType"))).as_deref() != Some("NONE") {
            problems.push(format!(
                "{id}: FunctionUrlConfig.AuthType must be NONE: callers present the JWT the HTTP API accepts, and the function verifies it"
            ));
        }
        return;
    }
    match f.consumes {
        None => {
            for (name, _) in &consumed {
                problems.push(format!("{id}: event {name} consumes a queue, but the {} reads none", f.name));
            }
            for (method, path) in HTTP_ROUTES {
                let method = method.to_lowercase();
                let served = of_type("HttpApi").iter().any(|(_, p)| {
                    text(p.get("Method")).map(|m| m.to_lowercase()) == Some(method.clone())
                        && text(p.get("Path")).as_deref() == Some(path)
                        && p.get("ApiId").and_then(ref_target).as_deref() == Some(API_ID)
                });
                if !served {
                    problems.push(format!("{id}: the route {} {path} on {API_ID} is missing", method.to_uppercase()));
                }
            }
        }
        Some(q) => {
            let queue = queue_id(q);
            for (name, event) in &consumed {
                let source = event.get("Queue").and_then(get_att_target);
                if source != Some((queue.clone(), "Arn".to_string())) {
                    problems.push(format!("{id}: event {name} must consume !GetAtt {queue}.Arn, and only that queue"));
                    continue;
                }
                let want = u64::from(f.batch_size.unwrap_or(10));
                let batch = number(event.get("BatchSize")).unwrap_or(10);
                if batch != want {
                    problems.push(format!("{id}: event {name} has BatchSize {batch}, want {want}"));
                }
                let types: Vec<String> =
                    items(event.get("FunctionResponseTypes")).into_iter().filter_map(|t| text(Some(t))).collect();
                if !types.iter().any(|t| t == REPORT_BATCH_ITEM_FAILURES) {
                    problems.push(format!(
                        "{id}: event {name} lacks FunctionResponseTypes: [{REPORT_BATCH_ITEM_FAILURES}]; one bad message would fail its whole batch"
                    ));
                }
            }
            if consumed.is_empty() {
                problems.push(format!("{id}: no SQS event source consumes {queue}"));
            }
        }
    }
}

/// The logical ids of the queues a function's permissions let it send to, and any problems with
/// how they are granted.
pub(crate) fn send_targets(
    template: &Template<'_>,
    id: &str,
    props: &Value,
    problems: &mut Vec<String>,
) -> BTreeSet<String> {
    let mut targets = BTreeSet::new();
    // SAM policy templates on the function itself.
    for p in items(props.get("Policies")) {
        if let Some(queue) = p.get("SQSSendMessagePolicy").and_then(|t| t.get("QueueName")) {
            match get_att_target(queue) {
                Some((q, _)) => {
                    targets.insert(q);
                }
                None => problems
                    .push(format!("{id}: SQSSendMessagePolicy must name its queue with !GetAtt <Queue>.QueueName")),
            }
        }
    }
    let Some((role, _)) = props.get("Role").and_then(get_att_target) else {
        return targets;
    };
    let Some(role_props) = template.resource(&role).and_then(|r| r.get("Properties")) else {
        problems.push(format!("{id}: its Role {role} is missing"));
        return targets;
    };
    for p in items(role_props.get("Policies")) {
        for statement in items(p.get("PolicyDocument").and_then(|d| d.get("Statement"))) {
            let actions: Vec<String> =
                items(statement.get("Action")).into_iter().filter_map(|a| text(Some(a))).collect();
            for resource in items(statement.get("Resource")) {
                if text(Some(resource)).as_deref() == Some("*") {
                    problems.push(format!("{role}: grants {} on every resource; scope it", actions.join(", ")));
                }
            }
            if !actions.iter().any(|a| a == "sqs:SendMessage" || a == "sqs:*" || a == "*") {
                continue;
            }
            for resource in items(statement.get("Resource")) {
                match get_att_target(resource) {
                    Some((q, attribute)) if attribute == "Arn" => {
                        targets.insert(q);
                    }
                    _ => problems.push(format!("{role}: sqs:SendMessage must name each queue as !GetAtt <Queue>.Arn")),
                }
            }
        }
    }
    targets
}

pub(crate) fn check_permissions(
    template: &Template<'_>,
    f: &FunctionSpec,
    id: &str,
    props: &Value,
    problems: &mut Vec<String>,
) {
    let granted = send_targets(template, id, props, problems);
    let wanted: BTreeSet<String> = f.sends_to.iter().map(|q| queue_id(*q)).collect();
    for q in wanted.difference(&granted) {
        problems.push(format!("{id}: may not send to {q}, which the {} writes", f.name));
    }
    for q in granted.difference(&wanted) {
        problems.push(format!("{id}: may send to {q}, which the {} never writes (least privilege)", f.name));
    }
}

pub(crate) fn check_strays(
    template: &Template<'_>,
    topology: &Topology,
    functions: &[FunctionSpec],
    problems: &mut Vec<String>,
) {
    let mut known: BTreeSet<String> = BTreeSet::new();
    for q in &topology.queues {
        known.insert(queue_id(q.id));
        known.insert(queue_id(q.id.dlq()));
    }
    for f in functions {
        known.insert(function_id(&f.name));
    }
    for (id, resource) in template.resources {
        let (Some(id), Some(ty)) = (id.as_str(), resource.get("Type").and_then(Value::as_str)) else { continue };
        let counted = ty == "AWS::SQS::Queue" || ty == "AWS::Serverless::Function";
        if counted && !known.contains(id) {
            problems.push(format!(
                "{id}: a {ty} that routing.yaml's topology does not have (a tier removed without re-rendering?)"
            ));
        }
    }
}

pub(crate) fn check_outputs(doc: &Value, topology: &Topology, problems: &mut Vec<String>) {
    let outputs = doc.get("Outputs");
    let has = |key: &str| outputs.and_then(|o| o.get(key)).is_some();
    let mut wanted = vec!["ApiUrl".to_string(), STREAM_URL_OUTPUT.to_string(), "TableName".to_string()];
    wanted.extend(topology.queues.iter().map(|q| format!("{}Url", queue_id(q.id))));
    for key in wanted {
        if !has(&key) {
            problems.push(format!("Outputs: {key} is missing"));
        }
    }
}
