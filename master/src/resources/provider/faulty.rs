//! Fault injection on demand, for the tests of a controller whose cloud fails: any
//! provider, wrapped, fails the calls named in a file while that file exists
//! (`--provider-fault-file`, a testing flag). The file holds the calls to fail, among
//! `describe`, `launch`, `terminate`, `stop` and `start`, separated by white space;
//! empty, it fails all of them. Everything else passes through to the real provider.

use std::path::PathBuf;
use std::sync::Arc;

use cocktail_common::catalog::InstanceType;
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::{InstanceRecord, Interruption, LaunchSpec, Provider};
use crate::MasterError;

#[derive(Debug)]
pub struct Faulty {
    inner: Arc<dyn Provider>,
    path: PathBuf,
}

impl Faulty {
    pub fn new(inner: Arc<dyn Provider>, path: PathBuf) -> Self {
        Self { inner, path }
    }

    /// The injected error when the file names `call` (or nothing), else `None`.
    fn fault(&self, call: &str) -> Option<MasterError> {
        let named = std::fs::read_to_string(&self.path).ok()?;
        let mut calls = named.split_whitespace().peekable();
        let fails = calls.peek().is_none() || calls.any(|c| c == call);
        fails.then(|| {
            MasterError::Provider(format!(
                "{}: injected fault ({} exists)",
                call,
                self.path.display()
            ))
        })
    }
}

impl Provider for Faulty {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
        match self.fault("launch") {
            Some(e) => async move { Err(e) }.boxed(),
            None => self.inner.launch(spec),
        }
    }

    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        match self.fault("terminate") {
            Some(e) => async move { Err(e) }.boxed(),
            None => self.inner.terminate(id),
        }
    }

    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        match self.fault("stop") {
            Some(e) => async move { Err(e) }.boxed(),
            None => self.inner.stop(id),
        }
    }

    fn start<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        match self.fault("start") {
            Some(e) => async move { Err(e) }.boxed(),
            None => self.inner.start(id),
        }
    }

    fn describe(&self) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
        match self.fault("describe") {
            Some(e) => async move { Err(e) }.boxed(),
            None => self.inner.describe(),
        }
    }

    fn spot_price(&self, ty: &InstanceType) -> f64 {
        self.inner.spot_price(ty)
    }

    fn interruptions(&self) -> Option<mpsc::Receiver<Interruption>> {
        self.inner.interruptions()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[derive(Debug)]
    struct Nothing;

    impl Provider for Nothing {
        fn name(&self) -> &'static str {
            "nothing"
        }
        fn launch(&self, _: LaunchSpec) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
            async { Ok(Vec::new()) }.boxed()
        }
        fn terminate<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
            async { Ok(()) }.boxed()
        }
        fn stop<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
            async { Ok(()) }.boxed()
        }
        fn start<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
            async { Ok(()) }.boxed()
        }
        fn describe(&self) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
            async { Ok(Vec::new()) }.boxed()
        }
        fn spot_price(&self, _: &InstanceType) -> f64 {
            0.0
        }
        fn interruptions(&self) -> Option<mpsc::Receiver<Interruption>> {
            None
        }
    }

    #[tokio::test]
    async fn the_calls_the_file_names_fail_while_it_exists() {
        let path = std::env::temp_dir().join(format!("cocktail-fault-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let faulty = Faulty::new(Arc::new(Nothing), path.clone());
        assert!(faulty.describe().await.is_ok());
        std::fs::write(&path, "describe\n").unwrap();
        let error = faulty.describe().await.unwrap_err().to_string();
        assert!(error.contains("describe: injected fault"), "{error}");
        assert!(faulty.terminate("i-1").await.is_ok(), "only describe fails");
        std::fs::write(&path, "").unwrap();
        assert!(
            faulty.terminate("i-1").await.is_err(),
            "an empty file fails every call"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(
            faulty.describe().await.is_ok(),
            "the fault ends with the file"
        );
    }
}
