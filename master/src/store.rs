//! Where the resource controller keeps its state: instances, spot prices, utilisation
//! samples and every autoscaler decision with its reason (Cocktail §5.1 keeps them in
//! MongoDB). Writes never block or fail the controller: the in-process store keeps the
//! recent documents of each collection; the MongoDB store (`mongo`) queues writes and
//! catches up after an outage.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value;

/// The collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collection {
    Instances,
    SpotPrices,
    Utilisation,
    Decisions,
}

impl Collection {
    pub fn name(self) -> &'static str {
        match self {
            Self::Instances => "instances",
            Self::SpotPrices => "spot_prices",
            Self::Utilisation => "utilisation",
            Self::Decisions => "decisions",
        }
    }
}

pub trait Store: Send + Sync + std::fmt::Debug {
    /// Records a document; never blocks on I/O.
    fn record(&self, collection: Collection, document: Value);
    /// The most recent documents of a collection, newest last (at most `limit`).
    fn recent(&self, collection: Collection, limit: usize) -> Vec<Value>;
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
        let mut all = self.collections.lock().unwrap_or_else(|p| p.into_inner());
        let docs = all.entry(collection).or_default();
        docs.push_back(document);
        while docs.len() > self.capacity {
            docs.pop_front();
        }
    }

    fn recent(&self, collection: Collection, limit: usize) -> Vec<Value> {
        let all = self.collections.lock().unwrap_or_else(|p| p.into_inner());
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
        let store = MemoryStore::new(2);
        for i in 0..3 {
            store.record(Collection::Decisions, serde_json::json!({ "i": i }));
        }
        store.record(Collection::Instances, serde_json::json!({ "id": "x" }));
        let recent = store.recent(Collection::Decisions, 10);
        assert_eq!(
            recent,
            vec![serde_json::json!({ "i": 1 }), serde_json::json!({ "i": 2 })]
        );
        assert_eq!(store.recent(Collection::Decisions, 1).len(), 1);
        assert_eq!(store.recent(Collection::Utilisation, 5).len(), 0);
    }
}
