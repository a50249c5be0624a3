//! `bench cold-start`: each function binary's init time and peak RSS next to a bare
//! `lambda_runtime` binary, started round by round.

use super::*;

/// One row of the cold-start table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InitRow {
    /// Binary name.
    pub function: String,
    /// Process starts measured.
    pub starts: usize,
    /// Median spawn → first `/invocation/next`, ms.
    pub init_p50_ms: f64,
    /// Slowest of the starts, ms.
    pub init_max_ms: f64,
    /// Median peak RSS (VmHWM) at that moment, MB.
    pub peak_rss_mb: f64,
    /// Size of the release binary, MB.
    pub binary_mb: f64,
    /// Size of `target/lambda/<bin>/bootstrap` (arm64, cargo lambda) if built, MB.
    pub bootstrap_mb: Option<f64>,
    /// `init_p50_ms` over the bare `lambda_runtime` binary's, started in the same run.
    pub vs_bare: f64,
}

/// The baseline binary (`bench/hello`): a bare `lambda_runtime` echo function.
pub const BARE_LAMBDA: &str = "bare-lambda";

/// The environment a function gets from the SAM template, with dummy values: init reads it but
/// makes no AWS call. With `manifest`, the function loads that file (`SWITCHYARD_MANIFEST`, its
/// router artifact beside it) instead of the embedded one.
pub(crate) fn function_env(bin: &str, api: &str, manifest: Option<&Path>) -> anyhow::Result<Vec<(String, String)>> {
    let loaded = match manifest {
        Some(path) => Manifest::load(path),
        None => Manifest::embedded(),
    };
    let manifest_file = manifest.map(std::path::absolute).transpose()?;
    let manifest = loaded.map_err(|e| anyhow::anyhow!("{e}"))?;
    let topology = Topology::for_manifest(&manifest);
    let mut env: Vec<(String, String)> = vec![
        ("AWS_LAMBDA_RUNTIME_API".into(), api.into()),
        ("AWS_LAMBDA_FUNCTION_NAME".into(), bin.into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), "256".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION".into(), "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME".into(), format!("/aws/lambda/{bin}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME".into(), "bench".into()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_DEFAULT_REGION".into(), "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID".into(), "bench".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "bench".into()),
        ("AWS_SESSION_TOKEN".into(), "bench".into()),
        ("SWITCHYARD_TABLE".into(), "switchyard-bench".into()),
        ("RUST_LOG".into(), "warn".into()),
    ];
    if let Some(file) = manifest_file {
        env.push((switchyard_model::topology::ENV_MANIFEST.into(), file.display().to_string()));
    }
    if let Some(tier) = manifest.tiers.first() {
        env.push(("SWITCHYARD_TIER".into(), tier.tier.to_string()));
    }
    env.push((
        switchyard_engine::jwt::ENV_JWT_ISSUER.into(),
        "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_bench".into(),
    ));
    env.push((switchyard_engine::jwt::ENV_JWT_AUDIENCE.into(), "bench-client".into()));
    env.push((switchyard_engine::jwt::ENV_JWT_JWKS.into(), BENCH_JWKS.into()));
    for spec in &topology.queues {
        for id in [spec.id, spec.id.dlq()] {
            env.push((queue_url_env(id), format!("https://sqs.us-east-1.amazonaws.com/000000000000/{}", id.name())));
        }
    }
    Ok(env)
}

/// Start `binary` once; (spawn → first `GET /2018-06-01/runtime/invocation/next`, VmHWM kB).
pub(crate) fn start_once(binary: &Path, bin: &str, manifest: Option<&Path>) -> anyhow::Result<(Duration, u64)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let api = listener.local_addr()?.to_string();
    let env = function_env(bin, &api, manifest)?;
    let started = Instant::now();
    let mut child = std::process::Command::new(binary)
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let outcome = (|| -> anyhow::Result<(Duration, u64)> {
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Some(status) = child.try_wait()? {
                        let mut err = String::new();
                        if let Some(mut e) = child.stderr.take() {
                            let _ = e.read_to_string(&mut err);
                        }
                        anyhow::bail!("{bin} exited with {status} before asking for an event: {err}");
                    }
                    anyhow::ensure!(
                        started.elapsed() < Duration::from_secs(10),
                        "{bin} did not ask for an event within 10 s"
                    );
                    std::thread::sleep(Duration::from_micros(20));
                }
                Err(e) => return Err(e.into()),
            }
        };
        let init = started.elapsed();
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        anyhow::ensure!(
            line.starts_with("GET /2018-06-01/runtime/invocation/next"),
            "{bin}: unexpected first request {line:?}"
        );
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let hwm = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        Ok((init, hwm))
    })();
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

/// A function's median init as a multiple of the bare binary's (0 when the baseline took no
/// measurable time, which only a broken clock would give).
pub fn init_ratio(function_ms: f64, bare_ms: f64) -> f64 {
    if bare_ms > 0.0 {
        function_ms / bare_ms
    } else {
        0.0
    }
}

pub(crate) fn cold_start(options: &BenchOptions) -> anyhow::Result<u8> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or_else(|| anyhow::anyhow!("no directory for {}", exe.display()))?;
    let lambda_dir = dir.parent().map(|t| t.join("lambda"));
    let repeat = options.repeat.max(1);
    let bins: Vec<&str> = std::iter::once(BARE_LAMBDA).chain(COLD_START_FUNCTIONS.iter().copied()).collect();
    let mut binaries = Vec::with_capacity(bins.len());
    for bin in &bins {
        let binary = dir.join(bin);
        if !binary.is_file() {
            eprintln!(
                "cold-start: {} is missing; build the workspace (cargo build --release --workspace) first",
                binary.display()
            );
            return Ok(1);
        }
        start_once(&binary, bin, options.manifest.as_deref())?; // page cache warm, as on a Lambda host that has the code
        binaries.push(binary);
    }
    // Round by round, every binary once per round (the bare one first): a change in the
    // machine's speed during the run (this shared machine's wall times move by up to 3×) falls
    // on every binary alike instead of on whichever was being started then, so the ratios to
    // the bare binary compare starts made under the same conditions.
    let mut inits: Vec<Vec<f64>> = (0..bins.len()).map(|_| Vec::with_capacity(repeat)).collect();
    let mut hwms: Vec<Vec<f64>> = (0..bins.len()).map(|_| Vec::with_capacity(repeat)).collect();
    for _ in 0..repeat {
        for (i, (bin, binary)) in bins.iter().zip(&binaries).enumerate() {
            let (init, hwm) = start_once(binary, bin, options.manifest.as_deref())?;
            inits[i].push(init.as_secs_f64() * 1e3);
            hwms[i].push(hwm as f64 / 1024.0);
        }
    }
    let mut rows: Vec<InitRow> = Vec::new();
    for (i, bin) in bins.iter().enumerate() {
        let (inits, hwms) = (&mut inits[i], &mut hwms[i]);
        inits.sort_by(f64::total_cmp);
        hwms.sort_by(f64::total_cmp);
        let size = |p: &Path| std::fs::metadata(p).ok().map(|m| m.len() as f64 / 1e6);
        let init_p50_ms = quantile(inits, 0.5);
        // The bare binary is the first row: every function's row carries its ratio to it.
        let bare_ms = rows.first().map_or(init_p50_ms, |bare| bare.init_p50_ms);
        let row = InitRow {
            function: bin.to_string(),
            starts: repeat,
            init_p50_ms,
            init_max_ms: inits.last().copied().unwrap_or(0.0),
            peak_rss_mb: quantile(hwms, 0.5),
            binary_mb: size(&binaries[i]).unwrap_or(0.0),
            bootstrap_mb: lambda_dir.as_ref().and_then(|d| size(&d.join(bin).join("bootstrap"))),
            vs_bare: init_ratio(init_p50_ms, bare_ms),
        };
        if options.json {
            println!("{}", serde_json::to_string(&row)?);
        }
        rows.push(row);
    }
    if !options.json {
        println!(
            "function init through a local Lambda Runtime API ({} starts each, one of each binary per round; spawn → first GET …/invocation/next; binaries in {}; manifest {})",
            repeat,
            dir.display(),
            options.manifest.as_ref().map_or("embedded".to_string(), |p| p.display().to_string())
        );
        println!(
            "{:<13} {:>10} {:>10} {:>8} {:>14} {:>11} {:>15}",
            "function", "init p50", "init max", "vs bare", "peak RSS", "binary", "arm64 bootstrap"
        );
        for r in &rows {
            let boot = r.bootstrap_mb.map_or("not built".to_string(), |b| format!("{b:.2} MB"));
            println!(
                "{:<13} {:>7.2} ms {:>7.2} ms {:>7.2}x {:>11.1} MB {:>8.2} MB {:>15}",
                r.function, r.init_p50_ms, r.init_max_ms, r.vs_bare, r.peak_rss_mb, r.binary_mb, boot
            );
        }
    }
    Ok(0)
}
