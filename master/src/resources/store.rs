//! Where the resource controller keeps its state: instances, spot prices, utilisation
//! samples and every autoscaler decision with its reason (Cocktail §5.1 keeps them in
//! MongoDB). Writes never block or fail the controller: the in-process store keeps the
//! recent documents of each collection; the MongoDB store (`mongo`) queues writes and
//! catches up after an outage.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde_json::Value;

mod records;

pub use records::{
    BlindRecord, ControlStepRecord, DecisionRecord, MixDecisionRecord, Record, SpotPriceRecord,
    UtilisationRecord,
};

/// The collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collection {
    Instances,
    SpotPrices,
    Utilisation,
    Decisions,
    /// A pool's instance mix chosen by Ribbon or Kairos, with its evidence.
    MixDecisions,
    /// Every step of the control loop with its measurements (`--record-control-steps`).
    ControlSteps,
}

impl Collection {
    pub fn name(self) -> &'static str {
        match self {
            Self::Instances => "instances",
            Self::SpotPrices => "spot_prices",
            Self::Utilisation => "utilisation",
            Self::Decisions => "decisions",
            Self::MixDecisions => "mix_decisions",
            Self::ControlSteps => "control_steps",
        }
    }
}

/// Where documents go. Write typed records with `<dyn Store>::save`
/// (`store.save(&DecisionRecord { .. })`); [`Store::record`] is the untyped path under it.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Records a document; never blocks on I/O. Prefer `<dyn Store>::save` with a
    /// [`Record`]: an ad-hoc `json!` document here has no schema.
    fn record(&self, collection: Collection, document: Value);
    /// The most recent documents of a collection, newest last (at most `limit`).
    fn recent(&self, collection: Collection, limit: usize) -> Vec<Value>;
}

impl dyn Store {
    /// Records `record` in its collection; never blocks on I/O.
    pub fn save<R: Record>(&self, record: &R) {
        match serde_json::to_value(record) {
            Ok(document) => self.record(R::COLLECTION, document),
            // Only a map with non-string keys fails, which no record holds.
            Err(e) => {
                tracing::warn!(collection = R::COLLECTION.name(), error = %e, "record not serialisable");
                metrics::counter!("cocktail_master_store_dropped_total").increment(1);
            }
        }
    }

    /// The most recent records of `R`'s collection, newest last (at most `limit`);
    /// documents that are not an `R` are skipped.
    pub fn recent_records<R: Record + DeserializeOwned>(&self, limit: usize) -> Vec<R> {
        self.recent(R::COLLECTION, limit)
            .into_iter()
            .filter_map(|document| serde_json::from_value(document).ok())
            .collect()
    }
}

/// The in-process store: the last `capacity` documents of each collection.
#[derive(Debug)]
pub struct MemoryStore {
    capacity: usize,
    collections: Mutex<HashMap<Collection, VecDeque<Value>>>,
}

impl MemoryStore {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            collections: Mutex::new(HashMap::new()),
        }
    }
}

impl Store for MemoryStore {
    fn record(&self, collection: Collection, document: Value) {
        let mut all = self.collections.lock();
        let docs = all.entry(collection).or_default();
        docs.push_back(document);
        while docs.len() > self.capacity {
            docs.pop_front();
        }
    }

    fn recent(&self, collection: Collection, limit: usize) -> Vec<Value> {
        let all = self.collections.lock();
        all.get(&collection)
            .map(|docs| {
                docs.iter()
                    .skip(docs.len().saturating_sub(limit))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_documents_per_collection() {
        let store: &dyn Store = &MemoryStore::new(2);
        let price = |at: f64| SpotPriceRecord {
            at,
            instance_type: "m5.large".into(),
            price: 0.03,
            on_demand: 0.096,
        };
        for at in 0..3 {
            store.save(&price(f64::from(at)));
        }
        store.save(&UtilisationRecord {
            at: 0.0,
            rate: 1.0,
            predicted: 2.0,
            requests: 3,
        });
        let recent: Vec<SpotPriceRecord> = store.recent_records(10);
        assert_eq!(recent, vec![price(1.0), price(2.0)]);
        assert_eq!(store.recent(Collection::SpotPrices, 1).len(), 1);
        assert_eq!(
            store.recent(Collection::SpotPrices, 1)[0]["instance_type"],
            "m5.large"
        );
        assert_eq!(store.recent(Collection::Decisions, 5).len(), 0);
    }

    #[test]
    fn a_mix_decision_leaves_out_what_it_does_not_have() {
        let manual = MixDecisionRecord {
            at: 1.0,
            model: "resnet".into(),
            optimiser: "manual".into(),
            types: vec!["c5.large".into()],
            current: None,
            config: vec![2],
            cost_per_hour: None,
            demand: None,
            evidence: None,
        };
        let document = serde_json::to_value(&manual).unwrap();
        assert_eq!(
            document,
            serde_json::json!({"at": 1.0, "model": "resnet", "optimiser": "manual", "types": ["c5.large"], "config": [2]})
        );
        assert_eq!(
            serde_json::from_value::<MixDecisionRecord>(document).unwrap(),
            manual
        );
    }
}

/// Documents waiting for MongoDB beyond which the oldest are dropped (and counted).
const MONGO_BACKLOG: usize = 100_000;

/// MongoDB (or a wire-compatible server): every document goes to its collection in the
/// background. Writes queue while the server is down and catch up when it is back; reads
/// for the API come from the in-process copy of the recent documents.
#[derive(Debug)]
pub struct MongoStore {
    recent: MemoryStore,
    queue: tokio::sync::mpsc::Sender<(Collection, Value)>,
}

impl MongoStore {
    /// Starts the writer; the connection is made lazily, so this works with the server
    /// down. Must run inside Tokio.
    pub async fn start(url: &str, database: &str) -> Result<Self, crate::MasterError> {
        let mut options = mongodb::options::ClientOptions::parse(url)
            .await
            .map_err(|e| crate::MasterError::invalid("mongo_url", e.to_string()))?;
        options.server_selection_timeout = Some(std::time::Duration::from_secs(2));
        options.connect_timeout = Some(std::time::Duration::from_secs(2));
        options.app_name = Some("cocktail-master".into());
        let client = mongodb::Client::with_options(options)
            .map_err(|e| crate::MasterError::invalid("mongo_url", e.to_string()))?;
        let db = client.database(database);
        let (queue, receiver) = tokio::sync::mpsc::channel(MONGO_BACKLOG);
        tokio::spawn(write_behind(db, receiver));
        Ok(Self {
            recent: MemoryStore::new(10_000),
            queue,
        })
    }
}

impl Store for MongoStore {
    fn record(&self, collection: Collection, document: Value) {
        self.recent.record(collection, document.clone());
        if self.queue.try_send((collection, document)).is_err() {
            metrics::counter!("cocktail_master_store_dropped_total").increment(1);
        }
    }

    fn recent(&self, collection: Collection, limit: usize) -> Vec<Value> {
        self.recent.recent(collection, limit)
    }
}

/// Inserts queued documents in batches; on failure keeps them (oldest dropped beyond the
/// backlog) and retries with a growing pause, so an outage delays writes, never loses
/// recent ones. Exactly once: every document gets its `_id` when it is queued, batches
/// are unordered, and a batch whose only failures are per-document is done
/// ([`settled`]): a duplicate key is a document an earlier, partly failed attempt
/// already wrote, any other is a document the server will never take (dropped and
/// counted, so it cannot block the queue).
async fn write_behind(
    db: mongodb::Database,
    mut receiver: tokio::sync::mpsc::Receiver<(Collection, Value)>,
) {
    let mut pending: VecDeque<(Collection, mongodb::bson::Document)> = VecDeque::new();
    let mut pause = std::time::Duration::from_millis(100);
    let mut failing = false;
    loop {
        if pending.is_empty() {
            match receiver.recv().await {
                Some(item) => push(&mut pending, item),
                None => return,
            }
        }
        while let Ok(item) = receiver.try_recv() {
            push(&mut pending, item);
        }
        metrics::gauge!("cocktail_master_store_pending").set(pending.len() as f64);
        let Some(&(collection, _)) = pending.front() else {
            continue;
        };
        // One batch: the leading run of documents for the same collection.
        let batch: Vec<mongodb::bson::Document> = pending
            .iter()
            .take_while(|(c, _)| *c == collection)
            .take(500)
            .map(|(_, d)| d.clone())
            .collect();
        let size = batch.len();
        let result = db
            .collection::<mongodb::bson::Document>(collection.name())
            .insert_many(batch)
            .ordered(false)
            .await;
        match result
            .map(drop)
            .or_else(|e| if settled(&e) { Ok(()) } else { Err(e) })
        {
            Ok(()) => {
                pending.drain(..size);
                pause = std::time::Duration::from_millis(100);
                if failing {
                    tracing::info!("MongoDB is back; queued writes are catching up");
                }
                failing = false;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "MongoDB write failed; queueing and retrying");
                }
                failing = true;
                metrics::counter!("cocktail_master_store_errors_total").increment(1);
                // Keep taking new documents while waiting, so the channel never fills.
                let wait = tokio::time::sleep(pause);
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        () = &mut wait => break,
                        item = receiver.recv() => match item {
                            Some(item) => push(&mut pending, item),
                            None => return,
                        },
                    }
                }
                pause = (pause * 2).min(std::time::Duration::from_secs(5));
            }
        }
    }
}

/// Whether a failed unordered batch is nevertheless done: the server took every document
/// except those it reported one by one. A duplicate `_id` (MongoDB error 11000) is
/// already stored; any other per-document error is final and that document is dropped.
/// Anything else (no server, a write-concern error) leaves the batch to retry.
fn settled(error: &mongodb::error::Error) -> bool {
    const DUPLICATE_KEY: i32 = 11000;
    let mongodb::error::ErrorKind::InsertMany(failure) = error.kind.as_ref() else {
        return false;
    };
    let Some(errors) = failure.write_errors.as_ref() else {
        return false;
    };
    if failure.write_concern_error.is_some() {
        return false;
    }
    for e in errors.iter().filter(|e| e.code != DUPLICATE_KEY) {
        tracing::warn!(code = e.code, message = %e.message, "MongoDB refused a document; dropped");
        metrics::counter!("cocktail_master_store_dropped_total").increment(1);
    }
    true
}

fn push(
    pending: &mut VecDeque<(Collection, mongodb::bson::Document)>,
    (collection, value): (Collection, Value),
) {
    match mongodb::bson::to_document(&value) {
        Ok(mut document) => {
            // Its identity from now on, so a retried insert cannot store it twice.
            if !document.contains_key("_id") {
                document.insert("_id", mongodb::bson::oid::ObjectId::new());
            }
            pending.push_back((collection, document));
        }
        Err(e) => tracing::warn!(error = %e, "document not storable in MongoDB"),
    }
    while pending.len() > MONGO_BACKLOG {
        pending.pop_front();
        metrics::counter!("cocktail_master_store_dropped_total").increment(1);
    }
}
