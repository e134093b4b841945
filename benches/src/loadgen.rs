//! `cocktail loadgen`: open-loop HTTP load against a running master.
//!
//! Requests leave at the trace's arrival times whether or not earlier ones have been
//! answered (open loop), each a real test image or sentence with one constraint type's
//! `latency_ms` and `accuracy` and its true label, which the master learns from (the
//! labels are fed back). The report has the figures `cocktail sim` gives, so the two can
//! be compared (`tests/tests/sim_vs_live.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use cocktail_common::auth::{self, Secret};
use cocktail_common::{Input, TestSet, Zoo};
use cocktail_policy::selection::{Constraint, Objective};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::process::png_base64;
use crate::sim::{ACCURACY_WINDOW, Percentiles, TypeResult};
use crate::traces::Arrivals;
use crate::workload::{self, ConstraintType, Mix};

#[derive(Debug, Clone)]
pub struct LoadgenConfig {
    /// The master's base URL.
    pub url: String,
    pub task: String,
    /// Requests per second, one per second of load.
    pub rates: Vec<f64>,
    pub mix: Mix,
    pub seed: u64,
    /// Added to the latency target to judge an SLO violation: 0 counts every answer
    /// after `latency_ms` (the SLO); the fault tests on a busy machine allow more.
    pub grace_ms: f64,
    /// Requests in flight at most; an arrival beyond it is counted as dropped.
    pub max_in_flight: usize,
    /// The per-request client timeout.
    pub timeout: Duration,
    /// Presented for `/v1/cost` (the admin API); without it the report has no cost.
    pub admin_token: Option<Secret>,
    /// Presented on every inference request, for a master with `--api-keys`.
    pub api_key: Option<Secret>,
    /// A drift schedule's requests instead of the mix's (`cocktail loadgen --drift`).
    pub drift: Option<Arc<DriftLoad>>,
    /// Whether a request refused with `Retry-After` (429 under overload, 503 before any
    /// worker) is sent again after that long, as a client honouring the header does,
    /// while the request's `timeout` allows; each retry counts in the report
    /// ([`LoadReport::retried`]). Off, a refusal is the request's answer.
    pub retry_refused: bool,
}

/// A drift schedule's requests (issue 34): request `k` of the run asks for item
/// `items[k]` of the inputs, under one constraint (the replay's,
/// `DriftWorld::constraint`, with a finite latency), and its label comes back when
/// `labelled[k]`: in the request when `delay` is zero (as the other modes send every
/// label), else to `/v1/feedback` `delay` after the answer. The run ends with the
/// items. Arrivals beyond `max_in_flight` wait for a slot instead of being dropped.
#[derive(Debug, Clone)]
pub struct DriftLoad {
    pub name: String,
    pub items: Vec<usize>,
    pub labelled: Vec<bool>,
    pub latency_ms: f64,
    pub accuracy: f64,
    pub objective: Objective,
    pub delay: Duration,
}

impl DriftLoad {
    /// Its one constraint type, for [`run`].
    pub fn types(&self) -> Vec<ConstraintType> {
        vec![ConstraintType {
            name: self.name.clone(),
            constraint: Constraint {
                latency_ms: self.latency_ms,
                accuracy: self.accuracy,
                objective: self.objective,
            },
            model: 0,
        }]
    }
}

/// How long the load generator keeps an idle connection for reuse.
const POOL_IDLE: Duration = Duration::from_secs(4);

/// What one answer said.
#[derive(Debug)]
struct Outcome {
    kind: usize,
    latency: Duration,
    status: u16,
    /// Why it failed: the client's error chain when no HTTP answer came (status 0), else
    /// the status and the answer's `error`.
    error: Option<String>,
    correct: bool,
    models: usize,
    degraded: bool,
    /// Where the answer's time went (none for an error).
    times: Option<AnswerTimes>,
    /// Refusals sent again before this answer.
    retried: u64,
}

/// Where one answer's latency went, as the master reports it.
#[derive(Debug, Clone)]
pub struct AnswerTimes {
    /// When the request was due to be sent, in seconds since the load began (its
    /// arrival, as the simulator's same-seeded arrivals place it).
    pub sent_s: f64,
    /// The wait for the member calls (the master's `wait_us`), in ms.
    pub wait_ms: f64,
    /// The rest: the latency less that wait (the client's hop to the master and back,
    /// the master's own work), in ms.
    pub outside_ms: f64,
    /// The models whose answers voted (the answer's `models`), whose inference the wait
    /// includes.
    pub models: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub url: String,
    pub task: String,
    pub mix: String,
    pub sent: u64,
    pub answered: u64,
    /// Non-2xx answers and transport errors, by status (0: no HTTP answer).
    pub errors: std::collections::BTreeMap<u16, u64>,
    /// Why the first failed request failed: its transport error, or its status and the
    /// answer's `error`.
    pub first_error: Option<String>,
    /// Arrivals not sent because `max_in_flight` requests were outstanding.
    pub dropped: u64,
    pub duration_s: f64,
    pub achieved_rate: f64,
    pub latency_ms: Percentiles,
    pub slo_violations: f64,
    pub accuracy: f64,
    pub accuracy_met: f64,
    pub models_per_request: f64,
    pub degraded: u64,
    /// The master's bill over the run (`GET /v1/cost`), when it manages instances.
    pub cost: Option<f64>,
    /// Delayed labels (`--drift` with a delay) that `/v1/feedback` did not take, or that
    /// could not be sent because their request failed.
    pub feedback_refused: u64,
    /// Refusals sent again after their `Retry-After` ([`LoadgenConfig::retry_refused`]).
    pub retried: u64,
    pub types: Vec<TypeResult>,
    /// Where each answer's time went, for the simulator's `live_answers`.
    #[serde(skip)]
    pub times: Vec<AnswerTimes>,
}

/// The test items as JSON inputs of the OIP infer body, and their labels.
pub fn inputs(zoo: &Zoo, task: &str) -> anyhow::Result<(Vec<Value>, Vec<usize>)> {
    let set = TestSet::load(zoo, task)?;
    let inputs = set
        .items
        .iter()
        .map(|item| {
            Ok(match item {
                Input::Image(image) => json!([{ "name": "image", "shape": [1], "datatype": "BYTES", "data": [png_base64(image)?] }]),
                Input::Text(text) => json!([{ "name": "text", "shape": [1], "datatype": "BYTES", "data": [text] }]),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((inputs, set.labels))
}

async fn cost(client: &reqwest::Client, url: &str, admin: Option<&Secret>) -> Option<f64> {
    let response = client
        .get(format!("{url}/v1/cost"))
        .bearer_auth(admin?.expose())
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json::<Value>().await.ok()?.get("total")?.as_f64()
}

/// One request's answer.
struct Answer {
    /// The HTTP status, 0 when no HTTP answer came.
    status: u16,
    value: Value,
    /// Why it failed: the client's error chain when no HTTP answer came, else the status
    /// and the answer's `error`.
    error: Option<String>,
    /// Refusals sent again before it.
    retried: u64,
}

/// Sends one inference request; with `retry_within`, a refusal carrying `Retry-After`
/// is sent again after that long while the request is younger than `retry_within`.
async fn infer(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    api_key: Option<&Secret>,
    retry_within: Option<Duration>,
) -> Answer {
    let start = Instant::now();
    let mut retried = 0;
    loop {
        let mut request = client.post(url).json(body);
        if let Some(key) = api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                return Answer {
                    status: 0,
                    value: Value::Null,
                    error: Some(cocktail_service::net::error_chain(&e)),
                    retried,
                };
            }
        };
        let status = response.status();
        let wait = retry_after(&response)
            .filter(|wait| retry_within.is_some_and(|within| start.elapsed() + *wait < within));
        if let Some(wait) = wait {
            retried += 1;
            tokio::time::sleep(wait).await;
            continue;
        }
        let value = response.json::<Value>().await.unwrap_or(Value::Null);
        let error = (!status.is_success())
            .then(|| format!("{status}: {}", value["error"].as_str().unwrap_or("")));
        return Answer {
            status: status.as_u16(),
            value,
            error,
            retried,
        };
    }
}

/// How long a refusal (429, 503) asks the client to wait (`Retry-After` in seconds).
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let refused = matches!(
        response.status(),
        reqwest::StatusCode::TOO_MANY_REQUESTS | reqwest::StatusCode::SERVICE_UNAVAILABLE
    );
    let seconds: u64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    refused.then(|| Duration::from_secs(seconds))
}

/// Sends the load and collects the answers. `types` are the constraint types (from the
/// master's own `/v2/models/{task}` view of the zoo or from [`workload::constraint_types`]).
pub async fn run(
    config: &LoadgenConfig,
    types: &[ConstraintType],
    inputs: Arc<Vec<Value>>,
    labels: Arc<Vec<usize>>,
    progress: Option<&indicatif::ProgressBar>,
) -> anyhow::Result<LoadReport> {
    use rand::SeedableRng;
    anyhow::ensure!(!types.is_empty(), "the task has no constraint types");
    anyhow::ensure!(!inputs.is_empty(), "the task has no test items");
    let client = reqwest::Client::builder()
        .timeout(config.timeout)
        .pool_max_idle_per_host(config.max_in_flight)
        // Shorter than the servers' keep-alive (actix-web's 5 s): a connection the server
        // closes for idleness just as a request is written on it would fail the request
        // with no HTTP answer, a client artefact rather than the server's failure.
        .pool_idle_timeout(POOL_IDLE)
        .build()?;
    let infer_url = format!("{}/v2/models/{}/infer", config.url, config.task);
    let cost_before = cost(&client, &config.url, config.admin_token.as_ref()).await;
    let mix = config.mix.cumulative(types.len());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(config.seed);
    let (sender, mut receiver) = mpsc::unbounded_channel::<Outcome>();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(config.max_in_flight.max(1)));
    let started = tokio::time::Instant::now();
    let mut sent = 0_u64;
    let mut dropped = 0_u64;

    let collector = {
        let types: Vec<(f64, f64)> = types
            .iter()
            .map(|t| (t.constraint.latency_ms, t.constraint.accuracy))
            .collect();
        let grace = config.grace_ms;
        tokio::spawn(async move {
            let mut tally = Tally::new(types.len());
            while let Some(outcome) = receiver.recv().await {
                if let Some(&(latency_ms, accuracy)) = types.get(outcome.kind) {
                    tally.add(&outcome, latency_ms + grace, accuracy);
                }
            }
            tally
        })
    };

    let scored = cocktail_policy::estimate::scored_items(inputs.len());
    let feedback_url = format!("{}/v1/feedback", config.url);
    // Feedback the master did not take; and a sender per feedback still to come, so
    // that the run ends only once all of it is sent.
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (pending, mut all_sent) = mpsc::channel::<()>(1);
    for (k, at) in Arrivals::new(&config.rates, config.seed).enumerate() {
        if config.drift.as_ref().is_some_and(|d| k >= d.items.len()) {
            break;
        }
        tokio::time::sleep_until(started + Duration::from_secs_f64(at)).await;
        if let Some(bar) = progress {
            bar.set_position(at as u64);
        }
        let permit = match Arc::clone(&in_flight).try_acquire_owned() {
            Ok(permit) => permit,
            // A drift schedule's requests are all sent, in order: an arrival waits for a
            // slot (with `max_in_flight` 1, one request at a time, as the replay serves
            // them).
            Err(_) if config.drift.is_some() => Arc::clone(&in_flight)
                .acquire_owned()
                .await
                .context("the load generator's slots closed")?,
            Err(_) => {
                dropped += 1;
                continue;
            }
        };
        // (constraint type, item, label in the request, label by feedback after).
        let (kind, item, label_now, label_later) = match &config.drift {
            Some(d) => {
                let labelled = d.labelled.get(k).copied().unwrap_or(false);
                let item = d.items.get(k).copied().unwrap_or(0);
                let later = (labelled && !d.delay.is_zero()).then_some(d.delay);
                (0, item, labelled && d.delay.is_zero(), later)
            }
            None => {
                let (kind, item) = workload::draw(&mut rng, &mix, scored.1);
                (kind, scored.0 + item, true, None)
            }
        };
        let (Some(t), Some(&label)) = (types.get(kind), labels.get(item)) else {
            continue;
        };
        let mut body = json!({
            "inputs": inputs.get(item),
            "parameters": {
                "latency_ms": t.constraint.latency_ms,
                "accuracy": t.constraint.accuracy,
                "objective": match t.constraint.objective {
                    Objective::Accuracy => "accuracy",
                    Objective::Latency => "latency",
                },
            },
        });
        if label_now {
            body["parameters"]["label"] = json!(label);
        }
        sent += 1;
        let (client, url, sender) = (client.clone(), infer_url.clone(), sender.clone());
        let api_key = config.api_key.clone();
        let (feedback_url, refused, pending) =
            (feedback_url.clone(), Arc::clone(&refused), pending.clone());
        let retry_within = config.retry_refused.then_some(config.timeout);
        tokio::spawn(async move {
            let start = Instant::now();
            let Answer {
                status,
                value,
                error,
                retried,
            } = infer(&client, &url, &body, api_key.as_ref(), retry_within).await;
            let latency = start.elapsed();
            // A label due later for an answer without an id (a failed request) cannot be
            // sent: it counts as refused.
            let id = value["id"].as_str();
            if label_later.is_some() && id.is_none() {
                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if let (Some(delay), Some(id)) = (label_later, id) {
                let body = json!({ "id": id, "label": label });
                let (client, api_key) = (client.clone(), api_key.clone());
                let refused = Arc::clone(&refused);
                let pending = pending.clone();
                tokio::spawn(async move {
                    let _pending = pending;
                    tokio::time::sleep(delay).await;
                    let mut request = client.post(&feedback_url).json(&body);
                    if let Some(key) = &api_key {
                        request = request.bearer_auth(key.expose());
                    }
                    if request
                        .send()
                        .await
                        .and_then(|r| r.error_for_status())
                        .is_err()
                    {
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            }
            let parameters = &value["parameters"];
            let class = value["outputs"][0]["data"][0].as_u64();
            let _ = sender.send(Outcome {
                kind,
                latency,
                times: times(at, latency, parameters),
                status,
                error,
                correct: class == Some(label as u64),
                models: parameters["models"].as_array().map_or(0, Vec::len),
                degraded: parameters["degraded"].as_bool().unwrap_or(false),
                retried,
            });
            drop(permit);
        });
    }
    drop(sender);
    let tally = collector.await?;
    drop(pending);
    // Closed once every feedback task has dropped its sender.
    let _ = all_sent.recv().await;
    let duration = started.elapsed().as_secs_f64();
    let cost_after = cost(&client, &config.url, config.admin_token.as_ref()).await;
    let mut report = tally.report(
        config,
        types,
        sent,
        dropped,
        duration,
        cost_before.zip(cost_after).map(|(a, b)| b - a),
    );
    report.feedback_refused = refused.load(std::sync::atomic::Ordering::Relaxed);
    Ok(report)
}

/// Accumulates outcomes in the order they complete.
#[derive(Debug)]
struct Tally {
    latencies: Vec<f32>,
    times: Vec<AnswerTimes>,
    errors: std::collections::BTreeMap<u16, u64>,
    first_error: Option<String>,
    answered: u64,
    violations: u64,
    correct: u64,
    met: u64,
    models: u64,
    degraded: u64,
    retried: u64,
    per_type: Vec<(u64, u64, u64, u64)>,
    windows: Vec<std::collections::VecDeque<bool>>,
}

impl Tally {
    fn new(types: usize) -> Self {
        Self {
            latencies: Vec::new(),
            times: Vec::new(),
            errors: Default::default(),
            first_error: None,
            answered: 0,
            violations: 0,
            correct: 0,
            met: 0,
            models: 0,
            degraded: 0,
            retried: 0,
            per_type: vec![(0, 0, 0, 0); types],
            windows: vec![Default::default(); types],
        }
    }

    fn add(&mut self, o: &Outcome, deadline_ms: f64, target: f64) {
        let ms = o.latency.as_secs_f64() * 1000.0;
        self.latencies.push(ms as f32);
        self.times.extend(o.times.clone());
        self.retried += o.retried;
        let ok = (200..300).contains(&o.status);
        if !ok {
            *self.errors.entry(o.status).or_default() += 1;
        }
        if self.first_error.is_none() {
            self.first_error.clone_from(&o.error);
        }
        if !ok || ms > deadline_ms {
            self.violations += 1;
        }
        let correct = ok && o.correct;
        let Some(window) = self.windows.get_mut(o.kind) else {
            return;
        };
        window.push_back(correct);
        if window.len() > ACCURACY_WINDOW {
            window.pop_front();
        }
        let met = window.iter().filter(|c| **c).count() as f64 / window.len() as f64 >= target;
        self.answered += u64::from(ok);
        self.correct += u64::from(correct);
        self.met += u64::from(met);
        self.models += o.models as u64;
        self.degraded += u64::from(o.degraded);
        if let Some(t) = self.per_type.get_mut(o.kind) {
            t.0 += 1;
            t.1 += o.models as u64;
            t.2 += u64::from(correct);
            t.3 += u64::from(met);
        }
    }

    fn report(
        mut self,
        config: &LoadgenConfig,
        types: &[ConstraintType],
        sent: u64,
        dropped: u64,
        duration_s: f64,
        cost: Option<f64>,
    ) -> LoadReport {
        let n = self.latencies.len().max(1) as f64;
        LoadReport {
            url: config.url.clone(),
            task: config.task.clone(),
            mix: config.mix.name().to_owned(),
            sent,
            answered: self.answered,
            errors: self.errors,
            first_error: self.first_error,
            dropped,
            duration_s,
            achieved_rate: sent as f64 / duration_s.max(1e-9),
            latency_ms: Percentiles::of(&mut self.latencies),
            slo_violations: self.violations as f64 / n,
            accuracy: self.correct as f64 / n,
            accuracy_met: self.met as f64 / n,
            models_per_request: self.models as f64 / self.answered.max(1) as f64,
            degraded: self.degraded,
            cost,
            feedback_refused: 0,
            retried: self.retried,
            types: types
                .iter()
                .zip(&self.per_type)
                .map(|(t, &(requests, models, correct, met))| {
                    let n = requests.max(1) as f64;
                    TypeResult {
                        name: t.name.clone(),
                        latency_ms: t.constraint.latency_ms,
                        accuracy_target: t.constraint.accuracy,
                        requests,
                        models_per_request: models as f64 / n,
                        accuracy: correct as f64 / n,
                        accuracy_met: met as f64 / n,
                    }
                })
                .collect(),
            times: self.times,
        }
    }
}

/// An answer's wait for its member calls, the `wait_us` its `parameters` report, and
/// the rest of its `latency` (`None` for an error, which has no `wait_us`, and for an
/// answer that names no `models`).
fn times(sent_s: f64, latency: Duration, parameters: &Value) -> Option<AnswerTimes> {
    let wait_ms = parameters["wait_us"].as_f64()? / 1e3;
    let models = parameters["models"]
        .as_array()?
        .iter()
        .map(|m| m.as_str().map(str::to_owned))
        .collect::<Option<Vec<String>>>()?;
    Some(AnswerTimes {
        sent_s,
        wait_ms,
        outside_ms: (latency.as_secs_f64() * 1e3 - wait_ms).max(0.0),
        models,
    })
}

/// The report as a markdown table.
pub fn markdown(r: &LoadReport) -> String {
    let mut out = format!(
        "| sent | answered | dropped | errors | rate req/s | p50 ms | p90 ms | p99 ms | max ms | SLO violations | accuracy | accuracy met | models/request | degraded | cost $ |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} % | {:.2} % | {:.1} % | {:.2} | {} | {} |\n\n",
        r.sent,
        r.answered,
        r.dropped,
        r.errors.values().sum::<u64>(),
        r.achieved_rate,
        r.latency_ms.p50,
        r.latency_ms.p90,
        r.latency_ms.p99,
        r.latency_ms.max,
        r.slo_violations * 100.0,
        r.accuracy * 100.0,
        r.accuracy_met * 100.0,
        r.models_per_request,
        r.degraded,
        r.cost.map_or_else(|| "-".to_owned(), |c| format!("{c:.4}")),
    );
    out.push_str("| constraint | latency ms | target accuracy | requests | models/request | accuracy | accuracy met |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for t in &r.types {
        out.push_str(&format!(
            "| {} | {:.4} | {:.4} | {} | {:.2} | {:.2} % | {:.1} % |\n",
            t.name,
            t.latency_ms,
            t.accuracy_target,
            t.requests,
            t.models_per_request,
            t.accuracy * 100.0,
            t.accuracy_met * 100.0
        ));
    }
    if r.retried > 0 {
        out.push_str(&format!(
            "\n{} refusals (`Retry-After`) sent again; a request's latency counts its retries.\n",
            r.retried
        ));
    }
    out
}

impl LoadgenConfig {
    /// `seconds` at a steady `rate` of `task`'s requests in `mix`, judged against the
    /// latency targets themselves (the soak benchmark and the fault tests).
    pub fn steady(url: &str, task: &str, rate: f64, seconds: usize, mix: Mix, seed: u64) -> Self {
        Self {
            url: url.to_owned(),
            task: task.to_owned(),
            rates: vec![rate; seconds],
            mix,
            seed,
            grace_ms: 0.0,
            max_in_flight: 256,
            timeout: Duration::from_secs(10),
            admin_token: auth::admin_token_for_tools(),
            api_key: None,
            drift: None,
            retry_refused: false,
        }
    }
}

/// [`run`] with the simulator's constraint types ([`types_for`]: the profile plus its
/// 0.5 ms hop) and the zoo's test items for the config's task: the fault tests compare
/// runs on the same requests. (On loopback with a debug build the hop is 1-2 ms, so these
/// Strict targets cannot be met: every answer comes late, and selection chooses on
/// inference times alone; `cocktail loadgen` uses [`types_from_master`].)
pub async fn run_zoo(zoo: &Zoo, config: &LoadgenConfig) -> anyhow::Result<LoadReport> {
    let types = types_for(zoo, &config.task, 1.0)?;
    let (inputs, labels) = inputs(zoo, &config.task)?;
    run(config, &types, Arc::new(inputs), Arc::new(labels), None).await
}

/// The constraint types of the config's task on the hop of the system it loads: the
/// simulator's types ([`types_for`]: five models along the profile's frontier, each with
/// its profiled latency), with the hop measured instead of [`workload::HOP_MS`]: the
/// median over real requests (test items, each once, a generous target, at the run's mean
/// rate, after as many to warm up) of their latency at this client less the profiled
/// inference of the model that served them. So each type is feasible for its model on
/// this system for the median request while its calls do not queue, and about half its
/// answers are late.
/// (The master's predicted response times are dominated by the hop on loopback and
/// differ by a few µs between models, so a frontier drawn on them is degenerate.)
pub async fn types_from_master(
    zoo: &Zoo,
    config: &LoadgenConfig,
    latency_scale: f64,
) -> anyhow::Result<Vec<ConstraintType>> {
    let tables = cocktail_master::serving::tasks::from_zoo(
        zoo,
        1.0,
        latency_scale,
        cocktail_policy::estimate::Rule::Majority,
    );
    let table = tables
        .get(&config.task)
        .with_context(|| format!("the zoo has no task `{}`", config.task))?;
    let client = reqwest::Client::builder().timeout(config.timeout).build()?;
    let (inputs, _) = inputs(zoo, &config.task)?;
    // Probes at the run's mean rate, as the load will come (a hop measured on an idle
    // master is shorter than under load); the first half warms up (connections, first
    // selections) and is not measured.
    let rate = (config.rates.iter().sum::<f64>() / config.rates.len().max(1) as f64).max(1.0);
    let url = format!("{}/v2/models/{}/infer", config.url, config.task);
    let started = Instant::now();
    let mut probes = Vec::with_capacity(2 * HOP_PROBES);
    for k in 0..2 * HOP_PROBES {
        tokio::time::sleep_until((started + Duration::from_secs_f64(k as f64 / rate)).into()).await;
        let probe = json!({
            "inputs": inputs.get(k % inputs.len().max(1)).context("the test set is empty")?,
            "parameters": { "latency_ms": PROBE_TARGET_MS, "accuracy": PROBE_ACCURACY },
        });
        let mut request = client.post(&url).json(&probe);
        if let Some(key) = &config.api_key {
            request = request.bearer_auth(key.expose());
        }
        probes.push(tokio::spawn(async move {
            let sent = Instant::now();
            let response = request.send().await?;
            let status = response.status();
            let answer: Value = response.json().await?;
            // Timed as the run times its answers: once the body is read.
            let latency_ms = sent.elapsed().as_secs_f64() * 1e3;
            anyhow::ensure!(status.is_success(), "{status}: {answer}");
            Ok((latency_ms, answer))
        }));
    }
    let mut hops = Vec::new();
    for (k, probe) in probes.into_iter().enumerate() {
        let (latency_ms, answer) = probe
            .await?
            .with_context(|| format!("probing {}", config.url))?;
        let inference_ms = answer["parameters"]["models"][0]
            .as_str()
            .and_then(|name| table.models.iter().position(|m| m == name))
            .and_then(|m| table.candidates.get(m))
            .map(|c| c.latency_ms)
            .context("the probe's answer names no model of the task")?;
        if k >= HOP_PROBES {
            hops.push(latency_ms - inference_ms);
        }
    }
    let hop_ms = median(&mut hops).unwrap_or(workload::HOP_MS);
    Ok(workload::constraint_types_with_hop(
        &table.candidates,
        hop_ms,
    ))
}

fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// Requests [`types_from_master`] times for the hop (after as many to warm up).
const HOP_PROBES: usize = 60;

/// The probes' targets: any model meets them.
const PROBE_TARGET_MS: f64 = 1000.0;
const PROBE_ACCURACY: f64 = 0.5;

/// The constraint types for a task of the zoo, as the simulator uses them, for models
/// `latency_scale` times slower than profiled (a master emulating slower types).
pub fn types_for(zoo: &Zoo, task: &str, latency_scale: f64) -> anyhow::Result<Vec<ConstraintType>> {
    let tables = cocktail_master::serving::tasks::from_zoo(
        zoo,
        1.0,
        latency_scale,
        cocktail_policy::estimate::Rule::Majority,
    );
    let table = tables
        .get(task)
        .with_context(|| format!("the zoo has no task `{task}`"))?;
    Ok(workload::constraint_types(&table.candidates))
}
