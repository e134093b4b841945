//! Sending one request to one ensemble member: a slot from the member's pool
//! ([`crate::registry`]), the worker call within the deadline, and a retry on another
//! instance of the same pool while time remains.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cocktail_common::oip::ErrorBody;
use serde::Deserialize;
use serde_json::Value;

use crate::registry::{Instance, NoSlot, Registry};

/// One member's answer for every item.
#[derive(Debug, Clone)]
pub struct MemberAnswer {
    pub classes: Vec<usize>,
    /// Row-major `[items, classes]`.
    pub probabilities: Vec<f32>,
}

/// Why a member gave no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum MemberError {
    NoInstance,
    /// The deadline passed while queued or waiting for the worker.
    Deadline,
    /// The worker refused the input as the client's mistake (a 4xx other than 404/429).
    Rejected {
        status: u16,
        error_type: String,
        message: String,
    },
    /// The worker failed or answered something unusable.
    Failed(String),
}

impl MemberError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoInstance => "no_instance",
            Self::Deadline => "deadline",
            Self::Rejected { .. } => "rejected",
            Self::Failed(_) => "failed",
        }
    }
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoInstance => f.write_str("no worker instance is available"),
            Self::Deadline => f.write_str("missed the deadline"),
            Self::Rejected {
                status, message, ..
            } => write!(f, "rejected the input ({status}): {message}"),
            Self::Failed(message) => f.write_str(message),
        }
    }
}

/// Calls `model`'s pool with `body` until an answer, a client error or the deadline.
pub async fn call_member(
    client: &reqwest::Client,
    registry: &Registry,
    model: &str,
    body: Bytes,
    deadline: Instant,
    items: usize,
    classes: usize,
) -> Result<MemberAnswer, MemberError> {
    let pool = registry.pool(model).ok_or(MemberError::NoInstance)?;
    pool.record_batch(items);
    let mut tried: Vec<Arc<Instance>> = Vec::new();
    let mut last_error = MemberError::NoInstance;
    loop {
        let mut lease = match pool.acquire(deadline, &tried, items).await {
            Ok(lease) => lease,
            Err(NoSlot::Timeout) => return Err(MemberError::Deadline),
            Err(NoSlot::NoInstance) => return Err(last_error),
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(MemberError::Deadline);
        }
        lease.sent();
        let sent = client
            .post(&lease.instance.infer_url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .timeout(remaining)
            .send()
            .await;
        let outcome = match sent {
            Ok(response) => {
                lease.answered();
                read(response, items, classes).await
            }
            Err(e) if e.is_timeout() => return Err(MemberError::Deadline),
            Err(e) => {
                if e.is_connect() {
                    lease.refused();
                }
                Err(MemberError::Failed(format!(
                    "{}: {}",
                    lease.instance.id,
                    error_chain(&e)
                )))
            }
        };
        match outcome {
            Ok(answer) => return Ok(answer),
            Err(rejected @ MemberError::Rejected { .. }) => return Err(rejected),
            Err(MemberError::Deadline) => return Err(MemberError::Deadline),
            Err(other) => {
                metrics::counter!("cocktail_master_member_retries_total", "model" => model.to_owned())
                    .increment(1);
                tried.push(Arc::clone(&lease.instance));
                last_error = other;
            }
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

#[derive(Deserialize)]
struct WorkerResponse {
    outputs: Vec<WorkerOutput>,
}

#[derive(Deserialize)]
struct WorkerOutput {
    name: String,
    data: Value,
}

async fn read(
    response: reqwest::Response,
    items: usize,
    classes: usize,
) -> Result<MemberAnswer, MemberError> {
    let status = response.status();
    let bytes = response.bytes().await.map_err(|e| {
        if e.is_timeout() {
            MemberError::Deadline
        } else {
            MemberError::Failed(format!("reading the answer: {e}"))
        }
    })?;
    if !status.is_success() {
        let body: Option<ErrorBody> = serde_json::from_slice(&bytes).ok();
        let (error_type, message) = body.map_or_else(
            || {
                (
                    "worker".to_owned(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                )
            },
            |b| (b.error_type, b.error),
        );
        // 404 (wrong model on that instance), 429 (full) and 503 (draining) are the
        // instance's problem, not the client's: another instance may do.
        let clients_fault = status.is_client_error() && !matches!(status.as_u16(), 404 | 408 | 429);
        return Err(if clients_fault {
            MemberError::Rejected {
                status: status.as_u16(),
                error_type,
                message,
            }
        } else {
            MemberError::Failed(format!("worker answered {status}: {message}"))
        });
    }
    let response: WorkerResponse = serde_json::from_slice(&bytes)
        .map_err(|e| MemberError::Failed(format!("unreadable worker answer: {e}")))?;
    let output = |name: &str| {
        response
            .outputs
            .iter()
            .find(|o| o.name == name)
            .and_then(|o| o.data.as_array())
            .ok_or_else(|| MemberError::Failed(format!("worker answer lacks `{name}`")))
    };
    let class_values = output("class")?;
    let probability_values = output("probabilities")?;
    let class_list: Vec<usize> = class_values
        .iter()
        .filter_map(|v| v.as_u64().map(|c| c as usize))
        .filter(|&c| c < classes)
        .collect();
    let probabilities: Vec<f32> = probability_values
        .iter()
        .filter_map(|v| v.as_f64().map(|p| p as f32))
        .collect();
    if class_list.len() != items || probabilities.len() != items * classes {
        return Err(MemberError::Failed(format!(
            "worker answered {} classes and {} probabilities for {items} items of {classes} classes",
            class_list.len(),
            probabilities.len()
        )));
    }
    Ok(MemberAnswer {
        classes: class_list,
        probabilities,
    })
}
