//! What answered requests teach: the constraint's O2 window and the class weights,
//! from labels given with the request, sent later (`/v1/feedback`) or agreed by the
//! other candidates (pseudo-labels); measured selection's buffer; O2 at interval ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use parking_lot::Mutex;

use super::{Master, Resolved, names};
use crate::error::MasterError;
use crate::serving::dispatch::{Asked, Call, MemberAnswer};
use crate::serving::failover::Slot;
use crate::serving::request::ValidRequest;
use crate::serving::state::{Answered, ConstraintKey, KeyState};
use crate::serving::tasks::TaskTable;
use cocktail_policy::measured::Labelled;
use cocktail_policy::selection::{Adjustment, Rule};
use cocktail_policy::voting::BatchOutcome;

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
        };
        match &request.labels {
            Some(labels) => {
                record.learn(labels);
                self.maybe_measure(&record, request, labels, resolved.deadline);
            }
            None => {
                self.maybe_pseudo_label(&record, request, resolved.deadline);
                self.recent.remember(id.to_owned(), record);
            }
        }
        if self.config.selection.rule == Rule::Tracking {
            let change = {
                let mut s = state.lock();
                let window_accuracy = s.window_accuracy();
                s.served(&self.served(&resolved.task))
                    .map(|change| (change, window_accuracy))
            };
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
        self.revisit(&resolved.task, &resolved.key, state);
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
        let members = names(task, &state.lock().members);
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
        tracing::info!(%key, kind, ?members, "selection changed an ensemble");
        metrics::counter!("cocktail_master_selection_changes_total", "kind" => kind).increment(1);
        self.publish(task, key, state);
    }

    /// Every n-th unlabelled request also goes to the candidates outside the ensemble,
    /// in the background; what the others agree on becomes each candidate's pseudo-label
    /// ([`Answered::learn_pseudo`]).
    fn maybe_pseudo_label(&self, record: &Answered, request: &ValidRequest, deadline: Instant) {
        let every = self.config.pseudo_label_every;
        if every == 0
            || !self
                .unlabelled
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(every)
        {
            return;
        }
        let asking = self.ask_the_others(record, request, deadline);
        let (record, items) = (record.clone(), request.items);
        tokio::spawn(async move {
            let all = asking.await;
            record.learn_pseudo(&all, items);
        });
    }

    /// Under measured selection or tracking, every n-th labelled request also goes to
    /// the candidates outside the ensemble, in the background; the items, with every
    /// candidate's answer (its class and probability vector) and their labels, join the
    /// constraint's buffer or its tracker's window.
    fn maybe_measure(
        &self,
        record: &Answered,
        request: &ValidRequest,
        labels: &[usize],
        deadline: Instant,
    ) {
        let every = self.config.shadow_every;
        if !matches!(self.config.selection.rule, Rule::Measured | Rule::Tracking)
            || every == 0
            || !self
                .labelled
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(every)
        {
            return;
        }
        let asking = self.ask_the_others(record, request, deadline);
        let (state, labels) = (Arc::clone(&record.state), labels.to_vec());
        let (models, classes) = (record.task.models.len(), record.task.labels.len());
        tokio::spawn(async move {
            let all = asking.await;
            let mut state = state.lock();
            for (item, &label) in labels.iter().enumerate() {
                let mut answers = vec![None; models];
                // Each answer's vector for the item, which soft votes are scored on.
                let mut probabilities = vec![None; models];
                for (m, answer) in &all {
                    if let (Some(slot), Some(&class)) =
                        (answers.get_mut(*m), answer.classes.get(item))
                    {
                        *slot = u16::try_from(class).ok();
                    }
                    if let (Some(slot), Some(row)) = (
                        probabilities.get_mut(*m),
                        answer
                            .probabilities
                            .get(item * classes..(item + 1) * classes),
                    ) {
                        *slot = Some(row.to_vec());
                    }
                }
                if let Ok(label) = u16::try_from(label) {
                    state.remember(Labelled {
                        label,
                        answers,
                        probabilities,
                    });
                }
            }
        });
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
        Ok(items)
    }
}
