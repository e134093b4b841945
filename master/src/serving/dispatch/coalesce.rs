//! Member calls of concurrent requests to one instance, sent as one call.
//!
//! Most of a quick member call's CPU is its two HTTP messages and the thread wake-ups
//! around them, not inference (docs/design.md, "What a member call costs"). So while a
//! call to an instance is under way, the calls that follow it wait for it to end, for at
//! most the linger, and go out together: one call whose batch is their items in turn,
//! from which each gets its own rows back. The worker runs them as one batch either way
//! (it batches concurrent calls itself); what is saved is messages. A lone call, the
//! common case at low load, goes at once, as before. Only models whose inference takes
//! at most the linger join calls ([`super::Call`]): for slower ones the messages are a
//! small part of a call, and waiting for the call under way would cost more than it
//! saves.
//!
//! Each call keeps its own slot ([`Lease`]): the instance serves no more at once than
//! its packing factor allows, joined or not. The joined call carries its parts' sizes
//! (`parameters.parts`), so that a worker emulating an instance type answers in the time
//! the longest part would take alone, as the simulator models an instance's slots.
//!
//! Hand-written: the HTTP clients batch nothing across requests, and the Nagle-like rule
//! (send now when idle, else join the next call) is a few lines over a mutex.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use cocktail_common::oip::RequestInput;
use cocktail_common::oip::binary;
use cocktail_common::oip::limits::MAX_ITEMS;
use cocktail_service::net::{CallError, ClusterClient};
use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue};
use parking_lot::Mutex;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::{MemberAnswer, MemberError, read};
use crate::serving::registry::{Instance, Lease};
use crate::serving::request::{MemberBody, MemberWire, member_request};

/// How a call's answer comes back: its slot, and the member's answer or why none.
pub type Done = (Lease, Result<MemberAnswer, MemberError>);

/// How calls go out: the sending thread's client, the task's class count and the linger.
#[derive(Debug, Clone)]
pub struct Out {
    pub client: ClusterClient,
    pub classes: usize,
    pub linger: Duration,
}

/// One request's call to the instance its slot is on.
#[derive(Debug)]
pub struct Waiting {
    pub lease: Lease,
    pub body: MemberBody,
    pub items: usize,
    /// How long the call may go unanswered.
    pub timeout: Duration,
}

/// An instance's calls: how many sends are under way and the calls waiting to join the
/// next one.
#[derive(Debug, Default)]
pub struct Line(Mutex<LineState>);

#[derive(Debug, Default)]
struct LineState {
    sending: usize,
    waiting: Vec<(Waiting, oneshot::Sender<Done>)>,
    /// Whether a timer will send the waiting calls at the end of the linger.
    timer: bool,
}

/// Sends `call` now when nothing is under way to its instance (or it cannot be joined),
/// else queues it to go with the calls that join it.
pub fn submit(out: Out, call: Waiting) -> oneshot::Receiver<Done> {
    let (reply, done) = oneshot::channel();
    let instance = Arc::clone(&call.lease.instance);
    if out.linger.is_zero() || call.body.inputs.is_none() {
        tokio::spawn(async move { send_alone(&out, call, reply).await });
        return done;
    }
    let mut line = instance.line.0.lock();
    if line.sending == 0 {
        line.sending += 1;
        drop(line);
        tokio::spawn(run(out, instance, vec![(call, reply)]));
    } else {
        line.waiting.push((call, reply));
        if !line.timer {
            line.timer = true;
            drop(line);
            tokio::spawn(linger(out, instance));
        }
    }
    done
}

/// Sends `batch`, then whatever joined while it was under way, until nothing waits.
async fn run(out: Out, instance: Arc<Instance>, mut batch: Vec<(Waiting, oneshot::Sender<Done>)>) {
    loop {
        send(&out, batch).await;
        let mut line = instance.line.0.lock();
        batch = next_batch(&mut line.waiting);
        if batch.is_empty() {
            line.sending -= 1;
            return;
        }
    }
}

/// At the end of the linger, sends what waits without waiting for the call under way.
async fn linger(out: Out, instance: Arc<Instance>) {
    tokio::time::sleep(out.linger).await;
    let mut line = instance.line.0.lock();
    line.timer = false;
    loop {
        let batch = next_batch(&mut line.waiting);
        if batch.is_empty() {
            return;
        }
        line.sending += 1;
        tokio::spawn(run(out.clone(), Arc::clone(&instance), batch));
    }
}

/// The first waiting calls that fit one call's items, those whose requests stopped
/// waiting left out (their slots are given back unused).
fn next_batch(
    waiting: &mut Vec<(Waiting, oneshot::Sender<Done>)>,
) -> Vec<(Waiting, oneshot::Sender<Done>)> {
    waiting.retain(|(_, reply)| !reply.is_closed());
    let mut items = 0;
    let fit = waiting
        .iter()
        .take_while(|(call, _)| {
            items += call.items;
            items <= MAX_ITEMS
        })
        .count()
        .max(waiting.len().min(1));
    waiting.drain(..fit).collect()
}

async fn send(out: &Out, batch: Vec<(Waiting, oneshot::Sender<Done>)>) {
    // A lone call goes as it is; inputs of different shapes or types cannot share a batch.
    let body = if batch.len() > 1 {
        joined(&batch)
    } else {
        None
    };
    let Some((body, header)) = body else {
        for (call, reply) in batch {
            send_alone(out, call, reply).await;
        }
        return;
    };
    let items: usize = batch.iter().map(|(call, _)| call.items).sum();
    let timeout = batch
        .iter()
        .map(|(call, _)| call.timeout)
        .max()
        .unwrap_or_default();
    let mut batch = batch;
    for (call, _) in &mut batch {
        call.lease.sent();
    }
    let instance = Arc::clone(&batch[0].0.lease.instance);
    let (reached, outcome) = post(out, &instance, body, header, items, timeout).await;
    metrics::counter!("cocktail_master_member_calls_joined_total",
        "model" => instance.model.clone())
    .increment(batch.len() as u64);
    match outcome {
        // One request's input (an undecodable image, say) spoils the batch for all: each
        // goes again alone, so that only its own request gets the refusal.
        Err(MemberError::Rejected { .. }) => {
            metrics::counter!("cocktail_master_joined_calls_refused_total",
                "model" => instance.model.clone())
            .increment(1);
            for (mut call, reply) in batch {
                reached.mark(&mut call.lease, false);
                send_alone(out, call, reply).await;
            }
        }
        Err(error) => {
            for (mut call, reply) in batch {
                reached.mark(&mut call.lease, false);
                // The request may have stopped waiting: its slot is given back either way.
                let _ = reply.send((call.lease, Err(error.clone())));
            }
        }
        Ok(answer) => {
            let mut offset = 0;
            for (mut call, reply) in batch {
                let part = answer.rows(offset, call.items, out.classes);
                offset += call.items;
                reached.mark(&mut call.lease, part.is_ok());
                let _ = reply.send((call.lease, part));
            }
        }
    }
}

async fn send_alone(out: &Out, mut call: Waiting, reply: oneshot::Sender<Done>) {
    call.lease.sent();
    let instance = Arc::clone(&call.lease.instance);
    let (reached, outcome) = post(
        out,
        &instance,
        call.body.body.clone(),
        call.body.header,
        call.items,
        call.timeout,
    )
    .await;
    reached.mark(&mut call.lease, outcome.is_ok());
    // The request may have stopped waiting: its slot is given back either way.
    let _ = reply.send((call.lease, outcome));
}

/// How far a call got: what it tells of the instance.
#[derive(Debug, Clone, Copy)]
enum Reached {
    /// The worker answered (any status).
    Answered,
    /// The connection was refused.
    Refused,
    /// No answer in time, or another failure on the way.
    Unanswered,
}

impl Reached {
    /// Tells `lease` how its call went; `served`: the answer is the member's.
    fn mark(self, lease: &mut Lease, served: bool) {
        match self {
            Self::Answered => lease.answered(served),
            Self::Refused => lease.refused(),
            Self::Unanswered => {}
        }
    }
}

async fn post(
    out: &Out,
    instance: &Instance,
    body: bytes::Bytes,
    header: Option<usize>,
    items: usize,
    timeout: Duration,
) -> (Reached, Result<MemberAnswer, MemberError>) {
    let content_type = match header {
        Some(_) => "application/octet-stream",
        None => "application/json",
    };
    let headers = std::iter::once((CONTENT_TYPE, HeaderValue::from_static(content_type))).chain(
        header.map(|length| {
            (
                HeaderName::from_static(binary::HEADER_LENGTH),
                HeaderValue::from(length),
            )
        }),
    );
    match out
        .client
        .post(&instance.infer_url, headers, body, timeout)
        .await
    {
        Ok(reply) => (Reached::Answered, read(reply, items, out.classes)),
        Err(CallError::Timeout(_)) => (Reached::Unanswered, Err(MemberError::Deadline)),
        Err(e) => {
            let reached = if matches!(e, CallError::Connect(_)) {
                Reached::Refused
            } else {
                Reached::Unanswered
            };
            let error = format!("{}: {e}", instance.id);
            let error = match e {
                CallError::Dropped(_) => MemberError::Dropped(error),
                _ => MemberError::Failed(error),
            };
            (reached, Err(error))
        }
    }
}

/// One call's body for the batch's inputs: each input's rows of every call in turn,
/// with `parameters.parts` giving each call's item count; `None` when the calls' inputs
/// differ in name, type or row shape (or, logged, when the body cannot be encoded).
fn joined(batch: &[(Waiting, oneshot::Sender<Done>)]) -> Option<(bytes::Bytes, Option<usize>)> {
    let lists: Vec<&[RequestInput]> = batch
        .iter()
        .map(|(call, _)| call.body.inputs.as_deref())
        .collect::<Option<_>>()?;
    let first = lists.first()?;
    let mut inputs = Vec::with_capacity(first.len());
    for (i, template) in first.iter().enumerate() {
        let mut raw = BytesMut::new();
        let mut rows = 0_i64;
        for list in &lists {
            let input = list.get(i)?;
            let same = input.name == template.name
                && input.datatype == template.datatype
                && input.shape.get(1..) == template.shape.get(1..);
            if !same || list.len() != first.len() {
                return None;
            }
            raw.extend_from_slice(input.raw.as_ref()?);
            rows += input.shape.first()?;
        }
        let mut shape = template.shape.clone();
        *shape.first_mut()? = rows;
        inputs.push(RequestInput {
            name: template.name.clone(),
            shape,
            datatype: template.datatype.clone(),
            data: Value::Null,
            parameters: template.parameters.clone(),
            raw: Some(raw.freeze()),
        });
    }
    let parts: Vec<Value> = batch.iter().map(|(call, _)| call.items.into()).collect();
    let parameters = Map::from_iter([("parts".to_owned(), Value::Array(parts))]);
    let request = member_request(inputs, MemberWire::Binary, Some(parameters));
    binary::encode_request(request)
        .inspect_err(|error| {
            tracing::warn!(%error, "a joined member call could not be encoded: its calls go alone");
        })
        .ok()
}

impl MemberAnswer {
    /// The answer's rows `offset..offset + items` (of `classes` probabilities each).
    fn rows(&self, offset: usize, items: usize, classes: usize) -> Result<Self, MemberError> {
        let short = || MemberError::Failed("the joined call's answer has too few rows".into());
        Ok(Self {
            classes: self
                .classes
                .get(offset..offset + items)
                .ok_or_else(short)?
                .to_vec(),
            probabilities: self
                .probabilities
                .get(offset * classes..(offset + items) * classes)
                .ok_or_else(short)?
                .to_vec(),
        })
    }
}
