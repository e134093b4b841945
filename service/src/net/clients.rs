//! One HTTP client per thread, for a process that calls its cluster from several runtimes.
//!
//! hyper runs each pooled connection as a task on the runtime that opened it. The master
//! serves on one single-threaded runtime per HTTP thread (actix-web), so with one shared
//! client a request on one thread often takes a connection whose task lives on another:
//! the request and its answer then each wake that other thread (an eventfd write and an
//! epoll wake-up; 8 % of the master's CPU under `master-bench`'s 3-model ensemble at 8
//! clients). With a client per thread, each connection is driven by the thread that
//! uses it. Neither reqwest nor hyper-util has such an option, hence this small cache.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{ClusterClient, NetError};

type Build = dyn Fn() -> Result<ClusterClient, NetError> + Send + Sync;

/// Builds the same client once per thread that asks for one ([`ThreadClients::get`]).
#[derive(Clone)]
pub struct ThreadClients {
    /// Tells this set's clients from another's in a thread's cache (tests run several
    /// masters in one process).
    id: u64,
    build: Arc<Build>,
}

impl std::fmt::Debug for ThreadClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadClients")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The clients this thread built, by [`ThreadClients::id`]: a handful per process.
    static CLIENTS: RefCell<Vec<(u64, ClusterClient)>> = const { RefCell::new(Vec::new()) };
}

impl ThreadClients {
    /// Checks `build` once, so that a bad setting fails at start, not at the first call.
    pub fn new(
        build: impl Fn() -> Result<ClusterClient, NetError> + Send + Sync + 'static,
    ) -> Result<Self, NetError> {
        let clients = Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            build: Arc::new(build),
        };
        clients.get()?;
        Ok(clients)
    }

    /// This thread's client.
    pub fn get(&self) -> Result<ClusterClient, NetError> {
        CLIENTS.with(|clients| {
            let mut clients = clients.borrow_mut();
            if let Some((_, client)) = clients.iter().find(|(id, _)| *id == self.id) {
                return Ok(client.clone());
            }
            let client = (self.build)()?;
            clients.push((self.id, client.clone()));
            Ok(client)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_builds_its_client_once_and_another_thread_its_own() {
        let built = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&built);
        let clients = ThreadClients::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            ClusterClient::new(&[], None, 1)
        })
        .unwrap();
        assert_eq!(built.load(Ordering::Relaxed), 1, "checked at construction");
        clients.get().unwrap();
        clients.get().unwrap();
        assert_eq!(built.load(Ordering::Relaxed), 1, "this thread's is reused");
        let other = clients.clone();
        std::thread::spawn(move || other.get().map(drop))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(
            built.load(Ordering::Relaxed),
            2,
            "another thread builds its own"
        );
    }

    #[test]
    fn a_setting_that_cannot_build_fails_at_construction() {
        let failed = ThreadClients::new(|| {
            Err(NetError::Flag {
                flag: "tls-ca",
                message: "holds no certificate".into(),
            })
        });
        assert!(matches!(failed, Err(NetError::Flag { flag: "tls-ca", .. })));
    }
}
