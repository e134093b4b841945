//! Per-constraint state: the ensemble chosen for each constraint key, the window of
//! labelled outcomes O2 looks at, and the answered requests remembered for feedback.
//!
//! The table of keys is the in-process model cache; [`crate::serving::cache`] shares it between
//! masters through Redis.

use std::collections::{BTreeMap, HashMap, VecDeque};
// The ensembles' `KeyState` and the tasks' weights are still `std` locks, recovered from
// poisoning by hand, until `Master::infer` (service.rs) takes `parking_lot` ones too.
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::{BoxFuture, Shared};

use crate::config::Interval;
use crate::serving::dispatch::MemberAnswer;
use crate::serving::tasks::TaskTable;
use cocktail_policy::ensemble::Ensemble;
use cocktail_policy::estimate::Recorded;
use cocktail_policy::measured::Labelled;
use cocktail_policy::selection::{self, Adjustment, Candidate, Constraint, SelectionConfig};
use cocktail_policy::voting;

/// The constraint key: requests with the same task and constraints share an ensemble
/// (in this master's table and, under the same name, in the shared cache).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConstraintKey(String);

impl ConstraintKey {
    pub fn new(task: &str, c: &Constraint) -> Self {
        let objective = match c.objective {
            selection::Objective::Accuracy => "accuracy",
            selection::Objective::Latency => "latency",
        };
        Self(format!(
            "{task}|{}|{}|{objective}",
            c.latency_ms, c.accuracy
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The task the key belongs to.
    pub fn task(&self) -> &str {
        self.0.split('|').next().unwrap_or_default()
    }
}

impl std::fmt::Display for ConstraintKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One constraint key's ensemble ([`Ensemble`], the pure part O2 works on) and the
/// clocks that say when its interval is over and when it was last used.
#[derive(Debug)]
pub struct KeyState {
    ensemble: Ensemble,
    started: Instant,
    requests: u64,
    last_used: Instant,
    /// When the selection was last compared with the shared cache.
    pub synced: Instant,
    /// When models O1 could not take were last checked
    /// ([`cocktail_policy::ensemble::Ensemble::take_waiting`]).
    waiting_checked: Instant,
}

impl std::ops::Deref for KeyState {
    type Target = Ensemble;
    fn deref(&self) -> &Ensemble {
        &self.ensemble
    }
}

impl std::ops::DerefMut for KeyState {
    fn deref_mut(&mut self) -> &mut Ensemble {
        &mut self.ensemble
    }
}

impl KeyState {
    /// `models` are the task's candidates as [`crate::serving::service::Master::served`] sees them.
    pub fn new(
        models: &[Candidate],
        constraint: Constraint,
        members: Vec<usize>,
        generation: u64,
    ) -> Self {
        let now = Instant::now();
        Self {
            ensemble: Ensemble::new(models, constraint, members, generation),
            started: now,
            requests: 0,
            last_used: now,
            synced: now,
            waiting_checked: now,
        }
    }

    /// Whether models O1 could not take are due a check: some wait, and the last check
    /// is at least `period` old (it reads the registry, so not at every request).
    pub fn waiting_due(&mut self, period: Duration) -> bool {
        if !self.ensemble.waits() || self.waiting_checked.elapsed() < period {
            return false;
        }
        self.waiting_checked = Instant::now();
        true
    }

    /// A request is being served: returns the members and the generation it uses.
    pub fn begin(&mut self) -> (Vec<usize>, u64) {
        self.requests += 1;
        self.last_used = Instant::now();
        (self.ensemble.members.clone(), self.ensemble.generation)
    }

    pub fn due(&self, interval: Interval) -> bool {
        match interval {
            Interval::Every(period) => self.started.elapsed() >= period,
            Interval::Requests(n) => self.requests >= n.max(1),
        }
    }

    /// O2 at the end of an interval ([`Ensemble::revisit`]); `None` when not due.
    pub fn revisit(
        &mut self,
        models: &[Candidate],
        interval: Interval,
        config: &SelectionConfig,
        recorded: Option<&Recorded>,
    ) -> Option<Adjustment> {
        if !self.due(interval) {
            return None;
        }
        self.started = Instant::now();
        self.requests = 0;
        self.ensemble.revisit(models, config, recorded)
    }
}

/// Every constraint key's state, each with the task table its member indices point
/// into: after a zoo reload changes a task's models, a key made with the old table is
/// a miss for requests of the new one, so an index never names another model.
#[derive(Debug, Default)]
pub struct Ensembles {
    keys: parking_lot::RwLock<HashMap<ConstraintKey, Keyed>>,
}

/// A key's state and the table it was selected from.
#[derive(Debug, Clone)]
pub struct Keyed {
    pub task: Arc<TaskTable>,
    pub state: Arc<Mutex<KeyState>>,
}

impl Ensembles {
    /// The key's state when it was selected from `task` (this very table).
    pub fn get(&self, key: &ConstraintKey, task: &Arc<TaskTable>) -> Option<Arc<Mutex<KeyState>>> {
        self.keys
            .read()
            .get(key)
            .filter(|k| Arc::ptr_eq(&k.task, task))
            .map(|k| Arc::clone(&k.state))
    }

    /// Inserts unless another request of the same table got there first (a state of
    /// another table is replaced); returns the state in the table.
    pub fn insert(
        &self,
        key: ConstraintKey,
        task: &Arc<TaskTable>,
        state: KeyState,
    ) -> Arc<Mutex<KeyState>> {
        let mut keys = self.keys.write();
        match keys.get(&key) {
            Some(k) if Arc::ptr_eq(&k.task, task) => Arc::clone(&k.state),
            _ => {
                let state = Arc::new(Mutex::new(state));
                let keyed = Keyed {
                    task: Arc::clone(task),
                    state: Arc::clone(&state),
                };
                keys.insert(key, keyed);
                state
            }
        }
    }

    /// Forgets keys unused for `ttl` (the in-process cache's expiry).
    pub fn expire(&self, ttl: Duration) {
        self.keys
            .write()
            .retain(|_, k| k.state.lock().last_used.elapsed() < ttl);
    }

    /// Forgets every key whose table is no longer its task's `current` one (after a zoo
    /// reload): its next request selects again from the new table. Returns how many.
    pub fn forget_stale(&self, current: &BTreeMap<String, Arc<TaskTable>>) -> usize {
        let mut keys = self.keys.write();
        let before = keys.len();
        keys.retain(|key, k| {
            current
                .get(key.task())
                .is_some_and(|t| Arc::ptr_eq(t, &k.task))
        });
        before - keys.len()
    }

    pub fn snapshot(&self) -> Vec<(ConstraintKey, Keyed)> {
        let keys = self.keys.read();
        let mut all: Vec<_> = keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// An answered request, kept so that a label sent later to `/v1/feedback` can be used.
#[derive(Debug, Clone)]
pub struct Answered {
    pub task: Arc<TaskTable>,
    pub state: Arc<Mutex<KeyState>>,
    pub generation: u64,
    pub members: Vec<usize>,
    /// `[slot]`: each member's answer for every item, `None` when it gave none.
    pub member_answers: Vec<Option<MemberAnswer>>,
    pub ensemble: Vec<usize>,
    pub winning_votes: Vec<usize>,
    /// The key's count of requests served when this one was ([`Ensemble::requests_served`]).
    pub served_at: u64,
    /// When this unlabelled request was shadowed (measured selection, tracking): every
    /// candidate's answer, on which its label is scored if one comes.
    pub shadowed: Option<Shadowed>,
}

/// Every candidate's answer to a request, asked in the background (`None`: the task
/// asking them failed); shared, so that a label coming before they are all back waits.
#[derive(Clone)]
pub struct Shadowed(pub Shared<BoxFuture<'static, Option<Arc<AllAnswers>>>>);

/// Each candidate's answer to a request: `(model, answer)`.
pub type AllAnswers = Vec<(usize, MemberAnswer)>;

impl std::fmt::Debug for Shadowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shadowed")
    }
}

impl Answered {
    /// Teaches the weights and the O2 window the real labels of every item (from the
    /// request or `/v1/feedback`).
    pub fn learn(&self, labels: &[usize]) {
        {
            let mut weights = self.task.weights.write();
            for (slot, &model) in self.members.iter().enumerate() {
                if let Some(Some(answer)) = self.member_answers.get(slot) {
                    for (&label, &class) in labels.iter().zip(&answer.classes) {
                        weights.record(model, label, class);
                    }
                }
            }
        }
        let mut state = self.state.lock();
        for (item, &label) in labels.iter().enumerate() {
            let per_member: Vec<Option<usize>> = self
                .member_answers
                .iter()
                .map(|a| a.as_ref().and_then(|a| a.classes.get(item).copied()))
                .collect();
            if let (Some(&ensemble), Some(&votes)) =
                (self.ensemble.get(item), self.winning_votes.get(item))
            {
                state.record(self.generation, &per_member, ensemble, votes, label);
            }
        }
        metrics::counter!("cocktail_master_labels_total", "kind" => "real")
            .increment(labels.len() as u64);
    }

    /// Keeps the labelled items with every candidate's answer (`all`: its classes and
    /// probability vector per item) for measured selection or the tracker.
    pub fn remember_labelled(&self, all: &AllAnswers, labels: &[usize]) {
        let (models, classes) = (self.task.models.len(), self.task.labels.len());
        let mut state = self.state.lock();
        for (item, &label) in labels.iter().enumerate() {
            let mut answers = vec![None; models];
            // Each answer's vector for the item, which soft votes are scored on.
            let mut probabilities = vec![None; models];
            for (m, answer) in all {
                if let (Some(slot), Some(&class)) = (answers.get_mut(*m), answer.classes.get(item))
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
                state.remember_served(
                    self.served_at,
                    Labelled {
                        label,
                        answers,
                        probabilities,
                    },
                );
            }
        }
    }

    /// Teaches the weights what the candidates agree on: `votes` holds every voter's
    /// classes per item (the members and the shadow-called candidates). Each voter learns,
    /// per item, the class enough of the *others* gave ([`voting::pseudo_labels`]), never
    /// its own vote. Pseudo-labels do not reach O2's window: its decisions rest on real
    /// labels only.
    pub fn learn_pseudo(&self, votes: &[(usize, MemberAnswer)], items: usize) {
        let mut learned = 0_u64;
        let mut weights = self.task.weights.write();
        for item in 0..items {
            let Some(classes) = votes
                .iter()
                .map(|(_, a)| a.classes.get(item).copied())
                .collect::<Option<Vec<usize>>>()
            else {
                continue;
            };
            let labels = voting::pseudo_labels(&classes);
            for (((model, _), label), &class) in votes.iter().zip(labels).zip(&classes) {
                if let Some(label) = label {
                    weights.record(*model, label, class);
                    learned += 1;
                }
            }
        }
        metrics::counter!("cocktail_master_labels_total", "kind" => "pseudo").increment(learned);
    }
}

/// Answered requests awaiting feedback, oldest dropped first beyond `capacity`.
#[derive(Debug)]
pub struct Recent {
    inner: parking_lot::Mutex<RecentInner>,
    capacity: usize,
}

/// Each entry carries a sequence number so that the eviction queue never has to be
/// searched: a queued id whose number no longer matches was taken or replaced.
#[derive(Debug, Default)]
struct RecentInner {
    map: HashMap<String, (u64, Answered)>,
    order: VecDeque<(u64, String)>,
    next: u64,
}

impl Recent {
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: parking_lot::Mutex::new(RecentInner::default()),
            capacity,
        }
    }

    pub fn remember(&self, id: String, answered: Answered) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.inner.lock();
        let seq = inner.next;
        inner.next += 1;
        inner.map.insert(id.clone(), (seq, answered));
        inner.order.push_back((seq, id));
        while inner.map.len() > self.capacity || inner.order.len() > 2 * self.capacity {
            let Some((seq, old)) = inner.order.pop_front() else {
                break;
            };
            if inner.map.get(&old).is_some_and(|(s, _)| *s == seq) {
                inner.map.remove(&old);
            }
        }
    }

    /// Takes the request out: a request is labelled at most once.
    pub fn take(&self, id: &str) -> Option<Answered> {
        let mut inner = self.inner.lock();
        inner.map.remove(id).map(|(_, answered)| answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cocktail_policy::selection::Objective;

    /// An answer of `classes`, one per item, without probability vectors.
    fn classes(classes: Vec<usize>) -> MemberAnswer {
        MemberAnswer {
            classes,
            probabilities: Vec::new(),
        }
    }

    fn constraint() -> Constraint {
        Constraint {
            latency_ms: 10.0,
            accuracy: 0.9,
            objective: Objective::Accuracy,
        }
    }

    fn models() -> Vec<Candidate> {
        [0.80, 0.85, 0.88, 0.90]
            .iter()
            .map(|&accuracy| Candidate {
                latency_ms: 1.0,
                accuracy,
                packing_factor: 1,
            })
            .collect()
    }

    #[test]
    fn outcomes_of_an_older_ensemble_are_ignored_and_o2_runs_per_interval() {
        let config = SelectionConfig::default();
        // Generation 1: past O1's first interval, at whose end O1 would choose again.
        let mut state = KeyState::new(&models(), constraint(), vec![3, 2, 1], 1);
        state.begin();
        // Every member right and unanimous: prune to a bare majority.
        state.record(1, &[Some(1), Some(1), Some(1)], 1, 3, 1);
        state.record(7, &[Some(0), Some(0), Some(0)], 0, 3, 1); // another generation
        assert_eq!(state.window_labelled(), 1);
        assert!(
            state
                .revisit(&models(), Interval::Requests(2), &config, None)
                .is_none(),
            "not due"
        );
        state.begin();
        let change = state.revisit(&models(), Interval::Requests(2), &config, None);
        assert_eq!(change, Some(Adjustment::Prune(vec![3, 2])));
        assert_eq!((state.members.clone(), state.generation), (vec![3, 2], 2));
        assert_eq!(
            state.window_labelled(),
            0,
            "a new ensemble starts a new window"
        );
        // All wrong: add the best unused candidate.
        state.begin();
        state.begin();
        state.record(2, &[Some(0), Some(0)], 0, 2, 1);
        assert_eq!(
            state.revisit(&models(), Interval::Requests(2), &config, None),
            Some(Adjustment::Add(vec![1]))
        );
        assert_eq!(state.members, vec![3, 2, 1]);
    }

    /// A text task of the first `n` of [`models`] and two classes.
    fn task(n: usize) -> Arc<TaskTable> {
        let candidates = models()[..n].to_vec();
        let accuracy: Vec<f64> = candidates.iter().map(|c| c.accuracy).collect();
        let class_accuracy: Vec<Vec<f64>> = accuracy.iter().map(|&a| vec![a, a]).collect();
        Arc::new(TaskTable {
            name: "t".into(),
            kind: crate::serving::tasks::InputKind::Text,
            preprocess: cocktail_common::Preprocess::Text {
                tokenizer: "t.json".into(),
                max_tokens: 8,
            },
            inputs: Vec::new(),
            labels: vec!["a".into(), "b".into()],
            models: (0..n).map(|m| format!("m{m}")).collect(),
            candidates,
            accuracy,
            recorded: None,
            weights: parking_lot::RwLock::new(voting::ClassWeights::seeded(&class_accuracy, 10.0)),
        })
    }

    #[test]
    fn pseudo_labels_teach_each_voter_what_the_others_agree_on_and_not_o2() {
        let state = Arc::new(Mutex::new(KeyState::new(
            &models(),
            constraint(),
            vec![0, 1],
            0,
        )));
        let answered = Answered {
            task: task(4),
            state,
            generation: 0,
            members: vec![0, 1],
            member_answers: vec![Some(classes(vec![1])), Some(classes(vec![0]))],
            ensemble: vec![1],
            winning_votes: vec![1],
            served_at: 0,
            shadowed: None,
        };
        // Members 0 and 1 and shadow candidates 2 and 3: three say 1, model 1 says 0.
        let votes = [1, 0, 1, 1].map(|class| classes(vec![class]));
        let votes: Vec<(usize, MemberAnswer)> = votes.into_iter().enumerate().collect();
        answered.learn_pseudo(&votes, 1);
        let weights = answered.task.weights.read();
        // Model 1 learns it was wrong about 1 (all three others agree)...
        assert!(weights.weight(1, 1) < 0.85, "{}", weights.weight(1, 1));
        // ...and the three who said 1 learn nothing: two of three others is not enough.
        assert_eq!(weights.weight(0, 1), 0.80);
        drop(weights);
        assert_eq!(
            answered.state.lock().window_labelled(),
            0,
            "O2 sees real labels only"
        );
    }

    #[test]
    fn a_key_selected_from_another_table_is_a_miss_and_forgotten_once_stale() {
        let ensembles = Ensembles::default();
        let (old, new) = (task(4), task(3));
        let key = ConstraintKey::new("t", &constraint());
        let kept = ensembles.insert(
            key.clone(),
            &old,
            KeyState::new(&models(), constraint(), vec![3], 0),
        );
        assert!(ensembles.get(&key, &old).is_some());
        assert!(
            ensembles.get(&key, &new).is_none(),
            "member 3 of the old table is no model of the new one"
        );
        let current = BTreeMap::from([("t".to_owned(), Arc::clone(&new))]);
        assert_eq!(ensembles.forget_stale(&current), 1);
        assert!(ensembles.snapshot().is_empty());
        assert_eq!(
            kept.lock().members,
            vec![3],
            "a request under way keeps its state"
        );
        let fresh = KeyState::new(&models()[..3], constraint(), vec![2], 0);
        let state = ensembles.insert(key.clone(), &new, fresh);
        // A request that started on the old table replaces it, with its own table.
        let late = KeyState::new(&models(), constraint(), vec![3], 0);
        ensembles.insert(key.clone(), &old, late);
        assert!(ensembles.get(&key, &new).is_none());
        assert_eq!(ensembles.forget_stale(&current), 1);
        assert_eq!(state.lock().members, vec![2]);
    }

    #[test]
    fn recent_requests_are_bounded_and_taken_once() {
        let task = task(1);
        let state = Arc::new(Mutex::new(KeyState::new(
            &models(),
            constraint(),
            vec![0],
            0,
        )));
        let answered = Answered {
            task,
            state,
            generation: 0,
            members: vec![0],
            member_answers: vec![Some(classes(vec![1]))],
            ensemble: vec![1],
            winning_votes: vec![1],
            served_at: 0,
            shadowed: None,
        };
        let recent = Recent::new(2);
        for id in ["a", "b", "c"] {
            recent.remember(id.into(), answered.clone());
        }
        assert!(recent.take("a").is_none(), "evicted, oldest first");
        assert!(recent.take("b").is_some());
        assert!(recent.take("b").is_none(), "taken once");
        answered.learn(&[1]);
        assert_eq!(answered.state.lock().window_labelled(), 1);
        assert!(answered.task.weights.read().weight(0, 1) > 0.8);
    }
}
