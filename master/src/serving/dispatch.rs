//! Sending one request to one ensemble member: a slot from the member's pool
//! ([`crate::serving::registry`]), the worker call within the deadline, and a retry on another
//! instance of the same pool while time remains.

mod coalesce;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cocktail_common::oip::tensor::{self, WireError};
use cocktail_common::oip::{ErrorBody, binary};
use cocktail_service::net::{ClusterClient, Reply};

use parking_lot::Mutex;

use crate::serving::registry::{Instance, NoSlot, Pool, Registry};
use crate::serving::request::MemberBody;
use crate::serving::tasks::TaskTable;

pub use coalesce::Line;

/// The instances one slot's calls went to (sent, failed or in flight), shared by the
/// slot's retries and its hedge so that each goes to an instance not asked yet: a hedge
/// of a member on a hung instance goes to another instance of the same pool. Also
/// whether any of them had to wait for a free slot.
#[derive(Debug, Default)]
pub struct Asked {
    instances: Mutex<Vec<Arc<Instance>>>,
    queued: AtomicBool,
}

impl Asked {
    fn snapshot(&self) -> Vec<Arc<Instance>> {
        self.instances.lock().clone()
    }

    fn add(&self, instance: &Arc<Instance>) {
        self.instances.lock().push(Arc::clone(instance));
    }

    /// The instances asked, less `instance`.
    fn without(&self, instance: &Arc<Instance>) -> Vec<Arc<Instance>> {
        let mut asked = self.snapshot();
        asked.retain(|i| !Arc::ptr_eq(i, instance));
        asked
    }

    /// Whether a call of the slot waited for a free slot on its pool (all busy), or gave
    /// up waiting: the pool lacked capacity for it at that moment.
    pub fn queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed)
    }

    fn waited(&self) {
        self.queued.store(true, Ordering::Relaxed);
    }

    /// Whether a call of the slot went to one of `model`'s instances and another of them
    /// has a free slot now: a hedge there need not queue (a call still queued for a slot
    /// is not hedged on its own pool, which would only queue twice).
    pub fn elsewhere(&self, registry: &Registry, model: &str) -> bool {
        let asked = self.instances.lock();
        asked.iter().any(|i| i.model == model)
            && registry.pool(model).is_some_and(|p| p.free_besides(&asked))
    }
}

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
    /// The connection closed or reset after the call went out, before an answer came
    /// (`CallError::Dropped`): a new connection to the same instance may well answer.
    Dropped(String),
}

impl MemberError {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoInstance => "no_instance",
            Self::Deadline => "deadline",
            Self::Rejected { .. } => "rejected",
            Self::Failed(_) => "failed",
            Self::Dropped(_) => "dropped",
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
            Self::Failed(message) | Self::Dropped(message) => f.write_str(message),
        }
    }
}

/// How long a member call may go unanswered before it counts as unanswered (a hung
/// worker): a call late for its request goes on in the background until then.
const HUNG_AFTER: Duration = Duration::from_secs(1);

/// One request's member calls: what each sends, to which task's models, and until when.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub client: &'a ClusterClient,
    pub registry: &'a Registry,
    pub task: &'a TaskTable,
    pub body: &'a MemberBody,
    /// When every call of the request ends, answered or not.
    pub deadline: Instant,
    /// When the request is due, for measuring its answers
    /// ([`crate::serving::registry::Lease::answered`]): its due time, or `deadline` when
    /// it waits for every member because none was predicted in time.
    pub measured_until: Instant,
    pub items: usize,
    /// A call of a model whose inference takes at most this long waits, while another
    /// call to the same instance is under way, for that call to end (at most this long),
    /// and goes out joined with the calls waiting beside it; zero: each goes alone.
    /// See [`coalesce`].
    pub linger: Duration,
}

impl Call<'_> {
    /// How a call to `instance` of `pool` goes out: joined with others only when its
    /// model's inference takes at most the linger (where messages cost as much as
    /// inference, and the call under way is soon back), and when the instance's packing
    /// factor lets at least two calls wait beside the one under way (one waiting alone
    /// would only go later, in a call of its own).
    fn out(&self, pool: &Pool, instance: &Instance, classes: usize) -> coalesce::Out {
        let joins = instance.packing_factor >= 3 && pool.quick(instance, self.linger);
        coalesce::Out {
            client: self.client.clone(),
            classes,
            linger: if joins { self.linger } else { Duration::ZERO },
        }
    }

    /// Calls the pool of the task's `model` until an answer, a client error or the
    /// deadline, on instances not in `asked` (and adds each one it sends to). A call
    /// whose connection dropped ([`MemberError::Dropped`]) goes once more to the same
    /// instance, on a new connection, when no other instance can take it: the worker
    /// restarted, or closed the connection as the call went out, and a request whose
    /// only member it was on a pool of one instance would fail for it. Inference may run
    /// twice; the member's answer is the same. Only when no other instance can take it:
    /// the call moves on to another instance as before, rather than wait on a new
    /// connection to one that may be gone.
    pub async fn ask(self, model: usize, asked: &Asked) -> Result<MemberAnswer, MemberError> {
        let Self {
            registry,
            task,
            body,
            deadline,
            measured_until,
            items,
            ..
        } = self;
        let model = task.models[model].as_str();
        let classes = task.labels.len();
        let began = Instant::now();
        let pool = registry.pool(model).ok_or(MemberError::NoInstance)?;
        pool.record_batch(items);
        let mut last_error = MemberError::NoInstance;
        // The instance whose connection dropped under the last call, until it is asked
        // again (once per member).
        let mut resend: Option<Arc<Instance>> = None;
        let mut resent = false;
        loop {
            let lease = match pool.acquire(deadline, &asked.snapshot(), items).await {
                Err(NoSlot::NoInstance) => match resend.take() {
                    Some(dropped) => {
                        metrics::counter!("cocktail_master_member_resends_total", "model" => model.to_owned())
                            .increment(1);
                        pool.acquire(deadline, &asked.without(&dropped), items)
                            .await
                    }
                    None => Err(NoSlot::NoInstance),
                },
                other => other,
            };
            let mut lease = match lease {
                Ok(lease) => lease,
                Err(NoSlot::Timeout) => {
                    asked.waited();
                    return Err(MemberError::Deadline);
                }
                Err(NoSlot::NoInstance) => return Err(last_error),
            };
            lease.measure(began, items, measured_until);
            asked.add(&lease.instance);
            if lease.queued {
                asked.waited();
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(MemberError::Deadline);
            }
            // The call may outlive the request: a worker that answers after the deadline is
            // slow, not hung, and its slot stays busy until it does. So the call runs in its
            // own task, holding the slot, for up to `HUNG_AFTER` (or the request's own time,
            // if longer); the request stops waiting at its deadline. Only a call that gets no
            // answer in that time counts against the instance ([`crate::serving::registry::Lease`]);
            // an answer, in time or not, is measured there.
            let out = self.out(&pool, &lease.instance, classes);
            let call = coalesce::Waiting {
                lease,
                body: body.clone(),
                items,
                timeout: remaining.max(HUNG_AFTER),
            };
            let done = coalesce::submit(out, call);
            let (lease, outcome) = match tokio::time::timeout(remaining, done).await {
                Ok(Ok(done)) => done,
                Ok(Err(_)) => {
                    return Err(MemberError::Failed("the member call was dropped".into()));
                }
                Err(_) => return Err(MemberError::Deadline),
            };
            match outcome {
                Ok(answer) => return Ok(answer),
                Err(rejected @ MemberError::Rejected { .. }) => return Err(rejected),
                Err(MemberError::Deadline) => return Err(MemberError::Deadline),
                Err(other) => {
                    if matches!(other, MemberError::Dropped(_)) && !resent {
                        resent = true;
                        resend = Some(Arc::clone(&lease.instance));
                    }
                    metrics::counter!("cocktail_master_member_retries_total", "model" => model.to_owned())
                        .increment(1);
                    last_error = other;
                }
            }
        }
    }
}

/// The member's answer in a worker's reply, or why there is none.
fn read(reply: Reply, items: usize, classes: usize) -> Result<MemberAnswer, MemberError> {
    let Reply {
        status,
        headers,
        body: bytes,
    } = reply;
    let header = headers
        .get(binary::HEADER_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
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
    let answer = binary::decode_response(bytes, header)
        .map_err(|e| MemberError::Failed(format!("unreadable worker answer: {e}")))?;
    let output = |name: &str| {
        answer
            .outputs
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| MemberError::Failed(format!("worker answer lacks `{name}`")))
    };
    let unusable = |e: WireError| MemberError::Failed(format!("unusable worker answer: {e}"));
    let class_list: Vec<usize> = tensor::i64s(output("class")?, items)
        .map_err(unusable)?
        .into_iter()
        .filter_map(|c| usize::try_from(c).ok().filter(|&c| c < classes))
        .collect();
    let probabilities =
        tensor::f32s(output("probabilities")?, items * classes).map_err(unusable)?;
    if class_list.len() != items {
        return Err(MemberError::Failed(format!(
            "worker answered {} valid classes for {items} items of {classes} classes",
            class_list.len(),
        )));
    }
    Ok(MemberAnswer {
        classes: class_list,
        probabilities,
    })
}
