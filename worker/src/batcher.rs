//! The batch manager (MArk §4.3): one thread owns the backend; requests queue on a
//! channel; a batch is submitted when it holds `max_items` items or its first request has
//! waited `window`. Requests already queued when a batch ends join the next one at once.
//!
//! The handle is a channel sender (the TGI queue pattern); the thread is plain blocking
//! code because ONNX Runtime calls block anyway.
//!
//! A lone call skips the queue: when no other call is under way, the backend is free and
//! the model's last batch took at most [`INLINE_LIMIT`], the call runs on the thread that
//! received it. Handing it to the batch thread and its answer back costs two thread
//! wake-ups, each tens of microseconds on a virtual machine, as much as a small model's
//! inference; batching only pays once calls queue. A slower model keeps the hand-off, so
//! that an HTTP thread is never blocked for long.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use cocktail_common::batching::BatchPolicy;
use cocktail_common::catalog::{GpuModel, InstanceType};
use cocktail_common::latency::BatchLatency;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::preprocess::Preprocessor;
use crate::request::{Prepared, join};
use crate::{Backend, Probabilities, WorkerError, metrics};

/// What the batcher answers one request with: its rows of probabilities.
pub type Reply = Result<Probabilities, WorkerError>;

struct Job {
    prepared: Prepared,
    enqueued: Instant,
    reply: oneshot::Sender<Reply>,
}

/// The longest last batch after which a lone call runs inline (see the module's note).
pub const INLINE_LIMIT: Duration = Duration::from_millis(1);

/// The backend and what running a batch needs, shared by the batch thread and the
/// callers that run inline.
struct Engine {
    backend: Mutex<Box<dyn Backend>>,
    preprocessor: Arc<Preprocessor>,
    /// The last batch's time in nanoseconds (`u64::MAX` before the first): whether a
    /// lone call may run inline.
    last_batch_ns: AtomicU64,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("last_batch_ns", &self.last_batch_ns)
            .finish_non_exhaustive()
    }
}

/// A cheap, cloneable way to submit work to the batch thread.
#[derive(Debug, Clone)]
pub struct BatcherHandle {
    sender: mpsc::Sender<Job>,
    queued: Arc<AtomicUsize>,
    /// Requests under way from their handler's start ([`BatcherHandle::enter`]), whether
    /// reading their body, preparing, queued or in a batch.
    calls: Arc<AtomicUsize>,
    pace: Option<Arc<Pace>>,
    engine: Arc<Engine>,
    /// Whether lone calls may run inline (`--no-inline` turns it off for comparisons).
    inline: bool,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("items", &self.prepared.len())
            .finish()
    }
}

impl BatcherHandle {
    /// Starts the batch thread. It ends when every handle is dropped.
    pub fn spawn(
        backend: Box<dyn Backend>,
        preprocessor: Arc<Preprocessor>,
        policy: BatchPolicy,
        pace: Option<Pace>,
        idle_poll: Duration,
        inline: bool,
    ) -> Result<Self, WorkerError> {
        let (sender, receiver) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let engine = Arc::new(Engine {
            backend: Mutex::new(backend),
            preprocessor,
            last_batch_ns: AtomicU64::new(u64::MAX),
        });
        let (thread_queued, thread_engine) = (Arc::clone(&queued), Arc::clone(&engine));
        std::thread::Builder::new()
            .name("batcher".into())
            .spawn(move || run(&thread_engine, policy, idle_poll, &receiver, &thread_queued))
            .map_err(|e| WorkerError::Ort(format!("cannot start the batch thread: {e}")))?;
        Ok(Self {
            sender,
            queued,
            calls: Arc::new(AtomicUsize::new(0)),
            pace: pace.map(Arc::new),
            engine,
            inline,
        })
    }

    /// Counts a request from its handler's start until the returned [`Call`] is dropped;
    /// [`BatcherHandle::infer`] runs it inline only if no other was under way then.
    pub fn enter(&self) -> Call {
        let others = self.calls.fetch_add(1, Ordering::Relaxed);
        Call {
            calls: Arc::clone(&self.calls),
            others,
        }
    }

    /// Runs `prepared` on this thread if it is alone (`others` calls are under way) and
    /// the backend is free and quick (see the module's note); gives it back otherwise.
    /// Under concurrent requests the hand-off stays: they batch, and no HTTP thread holds
    /// a request behind another's inference (inlining whenever nothing was queued doubled
    /// p99 at 8 clients).
    fn try_inline(&self, prepared: Prepared, others: usize) -> Result<Reply, Prepared> {
        let quick =
            self.engine.last_batch_ns.load(Ordering::Relaxed) <= INLINE_LIMIT.as_nanos() as u64;
        if !self.inline || !quick || others > 0 || self.queued.load(Ordering::Relaxed) > 0 {
            return Err(prepared);
        }
        let Some(mut backend) = self.engine.backend.try_lock() else {
            return Err(prepared);
        };
        let items = prepared.len();
        let reply = self.engine.batch(backend.as_mut(), &[&prepared], items);
        if let Err(error) = &reply {
            tracing::error!(message = %error, items, "batch failed");
        }
        Ok(reply)
    }

    /// Queues a request's items and waits for its probabilities (with a [`Pace`], for at
    /// least as long as the emulated type takes for `paced` items: the largest of the
    /// calls a master joined into this one, [`crate::request::largest_part`]).
    pub async fn infer(&self, prepared: Prepared, call: &Call, paced: usize) -> Reply {
        let enqueued = Instant::now();
        let prepared = match self.try_inline(prepared, call.others) {
            Ok(reply) => {
                metrics::inline_call();
                if let Some(pace) = &self.pace {
                    tokio::time::sleep_until((enqueued + pace.takes(paced)).into()).await;
                }
                return reply;
            }
            Err(prepared) => prepared,
        };
        let (reply, answer) = oneshot::channel();
        let job = Job {
            prepared,
            enqueued,
            reply,
        };
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.sender.send(job).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(WorkerError::Ort("the batch thread has stopped".into()));
        }
        metrics::queue_depth(self.queued.load(Ordering::Relaxed));
        let reply = answer.await.unwrap_or_else(|_| {
            Err(WorkerError::Ort(
                "the batch thread dropped a request".into(),
            ))
        });
        if let Some(pace) = &self.pace {
            tokio::time::sleep_until((enqueued + pace.takes(paced)).into()).await;
        }
        reply
    }
}

/// A request under way ([`BatcherHandle::enter`]), counted until it is dropped.
#[derive(Debug)]
pub struct Call {
    calls: Arc<AtomicUsize>,
    /// The requests under way when this one started.
    others: usize,
}

impl Drop for Call {
    fn drop(&mut self) {
        self.calls.fetch_sub(1, Ordering::Relaxed);
    }
}

fn run(
    engine: &Engine,
    policy: BatchPolicy,
    idle_poll: Duration,
    receiver: &mpsc::Receiver<Job>,
    queued: &AtomicUsize,
) {
    let mut carried: Option<Job> = None;
    loop {
        let first = match carried.take() {
            Some(job) => job,
            None => match next_job(receiver, idle_poll) {
                Some(job) => job,
                None => return,
            },
        };
        let deadline = first.enqueued + policy.window;
        let mut items = first.prepared.len();
        let mut jobs = vec![first];
        while items < policy.max_items {
            let next = match receiver.try_recv() {
                Ok(job) => job,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    let wait = deadline.saturating_duration_since(Instant::now());
                    if wait.is_zero() {
                        break;
                    }
                    match receiver.recv_timeout(wait) {
                        Ok(job) => job,
                        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
            if items + next.prepared.len() > policy.max_items {
                carried = Some(next);
                break;
            }
            items += next.prepared.len();
            jobs.push(next);
        }
        queued.fetch_sub(jobs.len(), Ordering::Relaxed);
        metrics::queue_depth(queued.load(Ordering::Relaxed));
        engine.run_jobs(jobs, items);
    }
}

/// An emulated instance type (the local provider's heterogeneous pools): each request is
/// answered no sooner than the type's modelled latency for its items ([`BatchLatency`])
/// after it arrived, so a pool of local workers behaves like the types it stands for.
///
/// The real inference runs first, on the batch thread as always; the request's own task
/// then holds the answer for the rest of the time. The batch thread is not held: an
/// instance serves as many calls at once as the master sends it (its packing factor), each
/// in its type's time, as the simulator models an instance's slots. Holding the thread
/// instead made concurrent calls queue behind each other's emulated time, so a live pool
/// answered up to Pf times slower than the one the simulator and the autoscaler plan
/// for (measured: 9-49 ms of overhead on 18-116 ms models, against a 1.5-5 ms hop).
#[derive(Debug, Clone)]
pub struct Pace {
    pub latency: BatchLatency,
    pub instance_type: InstanceType,
    pub gpu: GpuModel,
}

impl Pace {
    /// How long `items` take on the emulated type.
    fn takes(&self, items: usize) -> Duration {
        Duration::try_from_secs_f64(self.latency.on(&self.instance_type, &self.gpu, items) / 1e6)
            .unwrap_or_default()
    }
}

/// The next request, or `None` when every handle is gone. Spins for `idle_poll` first:
/// waking a sleeping thread costs tens of microseconds on a virtual machine, as much as a
/// small model's inference, but the spin takes a core from everything else.
fn next_job(receiver: &mpsc::Receiver<Job>, idle_poll: Duration) -> Option<Job> {
    let polling = Instant::now();
    while polling.elapsed() < idle_poll {
        match receiver.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    receiver.recv().ok()
}

/// The CPU time of the calling thread so far (zero if the clock cannot be read, which
/// Linux always can).
fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(Duration::ZERO, Duration::from)
}

impl Engine {
    /// Joins `parts` into one batch and runs it, timing it.
    fn batch(
        &self,
        backend: &mut dyn Backend,
        parts: &[&Prepared],
        items: usize,
    ) -> Result<Probabilities, WorkerError> {
        let started = Instant::now();
        let cpu_started = thread_cpu();
        let result = join(parts, &self.preprocessor).and_then(|batch| backend.infer(&batch));
        let took = started.elapsed();
        metrics::batch(items, took, thread_cpu().saturating_sub(cpu_started));
        self.last_batch_ns.store(
            u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        result
    }

    /// Runs queued jobs as one batch and answers each with its rows.
    fn run_jobs(&self, jobs: Vec<Job>, items: usize) {
        let parts: Vec<&Prepared> = jobs.iter().map(|j| &j.prepared).collect();
        let result = {
            let mut backend = self.backend.lock();
            self.batch(backend.as_mut(), &parts, items)
        };
        match result {
            Ok(Probabilities(all)) => {
                let mut row = 0;
                for job in jobs {
                    let n = job.prepared.len();
                    let rows = all
                        .slice_axis(ndarray::Axis(0), ndarray::Slice::from(row..row + n))
                        .to_owned();
                    row += n;
                    // The requester may have gone (client disconnected); nothing to do then.
                    let _ = job.reply.send(Ok(Probabilities(rows)));
                }
            }
            Err(error) => {
                let message = error.to_string();
                tracing::error!(%message, items, "batch failed");
                for job in jobs {
                    let _ = job.reply.send(Err(WorkerError::Ort(message.clone())));
                }
            }
        }
    }
}
