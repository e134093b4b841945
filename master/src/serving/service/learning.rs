//! What answered requests teach: the constraint's O2 window and the class weights,
//! from labels given with the request, sent later (`/v1/feedback`) or agreed by the
//! other candidates (pseudo-labels); measured selection's buffer and the tracker's
//! window, from shadow calls; O2 at interval ends, the tracker after every request.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::join_all;
use parking_lot::Mutex;

use super::{Master, Resolved, names};
use crate::error::MasterError;
use crate::serving::dispatch::{Asked, Call, MemberAnswer};
use crate::serving::failover::Slot;
use crate::serving::request::ValidRequest;
use crate::serving::state::{Answered, ConstraintKey, KeyState, Shadowed};
use crate::serving::tasks::TaskTable;
use cocktail_policy::ensemble::WAITING_CHECK_S;
use cocktail_policy::selection::{Adjustment, Rule};
use cocktail_policy::voting::BatchOutcome;

/// How often a constraint's models that O1 could not take are checked between intervals.
const WAITING_PERIOD: Duration = Duration::from_secs(WAITING_CHECK_S);

impl Master {
    /// What the request teaches: the window of its constraint and the class weights,
    /// from its labels, or later from feedback or a pseudo-label; then O2 when due.
    pub(super) fn learn(
        &self,
        resolved: &Resolved,
        request: &ValidRequest,
        slots: &[Slot],
        outcome: &BatchOutcome,
        id: &str,
    ) {
        let Some(state) = &resolved.state else {
            return;
        };
        let record = Answered {
            task: Arc::clone(&resolved.task),
            state: Arc::clone(state),
            generation: resolved.generation,
            // A substitute's answer is not its member's: the member's slot learns nothing.
            member_answers: resolved
                .members
                .iter()
                .zip(slots)
                .map(|(&member, slot)| match &slot.answer {
                    Ok((model, a)) if *model == member => Some(a.clone()),
                    _ => None,
                })
                .collect(),
            members: resolved.members.clone(),
            ensemble: outcome.class.clone(),
            winning_votes: outcome.winning_votes.clone(),
            served_at: state.lock().requests_served(),
            shadowed: None,
        };
        match &request.labels {
            Some(labels) => {
                record.learn(labels);
                if self.shadow_due() {
                    let asking = self.ask_the_others(&record, request, resolved.deadline);
                    let labels = labels.clone();
                    tokio::spawn(async move {
                        record.remember_labelled(&asking.await, &labels);
                    });
                }
            }
            None => self.ask_about_unlabelled(record, request, resolved.deadline, id),
        }
        if self.config.selection.rule == Rule::Tracking {
            // The candidates read the registry: not under the key's lock.
            let models = self.tracked(&resolved.task, request.constraint.latency_ms);
            let (change, paced) = {
                let mut s = state.lock();
                let window_accuracy = s.window_accuracy();
                let change = s.served(&models).map(|change| (change, window_accuracy));
                (change, s.mix().is_some())
            };
            if paced {
                metrics::counter!("cocktail_master_paced_requests_total").increment(1);
            }
            if let Some((change, window_accuracy)) = change {
                self.announce(
                    &resolved.task,
                    &resolved.key,
                    state,
                    &change,
                    window_accuracy,
                );
            }
        }
        if self.config.selection.rule == Rule::Cocktail {
            self.take_waiting(&resolved.task, &resolved.key, state);
        }
        self.revisit(&resolved.task, &resolved.key, state);
    }

    /// Between O2's intervals, at most once per [`WAITING_PERIOD`]: a model O1 could not
    /// take is taken as soon as it fits ([`cocktail_policy::ensemble::Ensemble::take_waiting`]).
    fn take_waiting(&self, task: &TaskTable, key: &ConstraintKey, state: &Mutex<KeyState>) {
        if !state.lock().waiting_due(WAITING_PERIOD) {
            return;
        }
        // The candidates read the registry: not under the key's lock.
        let models = self.served(task);
        let (change, window_accuracy) = {
            let mut s = state.lock();
            let window_accuracy = s.window_accuracy();
            (
                s.take_waiting(&models, task.recorded.as_ref()),
                window_accuracy,
            )
        };
        if let Some(change) = change {
            self.announce(task, key, state, &change, window_accuracy);
        }
    }

    /// O2 at the end of the key's interval; a change is published to the shared cache.
    fn revisit(&self, task: &TaskTable, key: &ConstraintKey, state: &Mutex<KeyState>) {
        // The window O2 decides on, before the revisit starts a new one.
        let (change, window_accuracy) = {
            let mut s = state.lock();
            if !s.due(self.config.interval) {
                return;
            }
            let window_accuracy = s.window_accuracy();
            let change = s.revisit(
                &self.served(task),
                self.config.interval,
                &self.config.selection,
                task.recorded.as_ref(),
            );
            (change, window_accuracy)
        };
        if let Some(change) = change {
            self.announce(task, key, state, &change, window_accuracy);
        }
    }

    /// A change of the key's members (by O2, measured selection or tracking): on the
    /// traffic page, in the log and metrics, and published to the shared cache.
    fn announce(
        &self,
        task: &TaskTable,
        key: &ConstraintKey,
        state: &Mutex<KeyState>,
        change: &Adjustment,
        window_accuracy: Option<f64>,
    ) {
        let (kind, _) = crate::serving::traffic::describe(change);
        let (members, measured_items) = {
            let s = state.lock();
            (names(task, &s.members), s.remembered())
        };
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.traffic.decided(
            key.as_str(),
            change,
            members.clone(),
            window_accuracy,
            now_s,
        );
        tracing::info!(%key, kind, ?members, measured_items, "selection changed an ensemble");
        metrics::counter!("cocktail_master_selection_changes_total", "kind" => kind).increment(1);
        self.publish(task, key, state);
    }

    /// An unlabelled request, remembered for `/v1/feedback`. Every n-th also goes to
    /// the candidates outside the ensemble, in the background, for a pseudo-label (what
    /// the others agree on becomes each candidate's, [`Answered::learn_pseudo`]) and,
    /// under measured selection or tracking, for the label feedback may bring later.
    fn ask_about_unlabelled(
        &self,
        mut record: Answered,
        request: &ValidRequest,
        deadline: Instant,
        id: &str,
    ) {
        let every = self.config.pseudo_label_every;
        let pseudo = every != 0
            && self
                .unlabelled
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(every);
        let shadow = self.shadow_due();
        if pseudo || shadow {
            let asking = self.ask_the_others(&record, request, deadline);
            let (learner, items) = (record.clone(), request.items);
            let all = tokio::spawn(async move {
                let all = asking.await;
                if pseudo {
                    learner.learn_pseudo(&all, items);
                }
                Arc::new(all)
            });
            if shadow {
                record.shadowed = Some(Shadowed(all.map(Result::ok).boxed().shared()));
            }
        }
        self.recent.remember(id.to_owned(), record);
    }

    /// Whether this request is one of the every n-th that measured selection and
    /// tracking also send to every candidate (`--shadow-every`).
    fn shadow_due(&self) -> bool {
        let every = self.config.shadow_every;
        matches!(self.config.selection.rule, Rule::Measured | Rule::Tracking)
            && every != 0
            && self
                .shadow_turn
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(every)
    }

    /// The answers of every candidate of the request's constraint: the members' own
    /// (from `record`) and, called now within the request's latency target, the others'.
    fn ask_the_others(
        &self,
        record: &Answered,
        request: &ValidRequest,
        deadline: Instant,
    ) -> impl std::future::Future<Output = Vec<(usize, MemberAnswer)>> + Send + 'static {
        let others: Vec<usize> = {
            let s = record.state.lock();
            s.pool
                .iter()
                .copied()
                .filter(|m| !record.members.contains(m))
                .collect()
        };
        let known: Vec<(usize, MemberAnswer)> = record
            .members
            .iter()
            .zip(&record.member_answers)
            .filter_map(|(&m, answer)| answer.clone().map(|a| (m, a)))
            .collect();
        let task = Arc::clone(&record.task);
        let (clients, registry_pool) = (self.clients.clone(), Arc::clone(&self.registry));
        let (body, items, linger) = (request.member.clone(), request.items, self.config.linger);
        // The shadow calls get the request's own latency target: a candidate slower than
        // that could not have served it anyway.
        let budget = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs_f64(request.constraint.latency_ms / 1e3));
        async move {
            let deadline = Instant::now() + budget;
            // The client of the thread that runs the calls (`ThreadClients`).
            let client = match clients.get() {
                Ok(client) => client,
                Err(error) => {
                    tracing::warn!(%error, "no shadow calls: no HTTP client");
                    return known;
                }
            };
            let call = Call {
                client: &client,
                registry: &registry_pool,
                task: &task,
                body: &body,
                deadline,
                measured_until: deadline,
                items,
                linger,
            };
            let shadow = join_all(
                others
                    .iter()
                    .map(|&m| async move { call.ask(m, &Asked::default()).await }),
            )
            .await;
            let mut all = known;
            for (&m, r) in others.iter().zip(shadow) {
                if let Ok(answer) = r {
                    all.push((m, answer));
                }
            }
            all
        }
    }

    /// Applies a label sent after the answer (`/v1/feedback`).
    pub fn feedback(
        &self,
        id: &str,
        label: Option<&serde_json::Value>,
    ) -> Result<usize, MasterError> {
        let answered = self
            .recent
            .take(id)
            .ok_or_else(|| MasterError::UnknownRequest { id: id.to_owned() })?;
        let items = answered.ensemble.len();
        let labels = match crate::serving::request::labels(&answered.task, label, items) {
            Ok(Some(labels)) => labels,
            Ok(None) => {
                self.recent.remember(id.to_owned(), answered);
                return Err(MasterError::invalid("label", "is required"));
            }
            Err(e) => {
                self.recent.remember(id.to_owned(), answered);
                return Err(e);
            }
        };
        answered.learn(&labels);
        let key = ConstraintKey::new(&answered.task.name, &answered.state.lock().constraint);
        self.revisit(&answered.task, &key, &answered.state);
        // Shadowed: the label scores every candidate's answer too, once they are back.
        if let Some(Shadowed(all)) = answered.shadowed.clone() {
            tokio::spawn(async move {
                if let Some(all) = all.await {
                    answered.remember_labelled(&all, &labels);
                }
            });
        }
        Ok(items)
    }
}
