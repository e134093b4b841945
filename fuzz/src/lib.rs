//! What the fuzz targets share: the committed zoo and what the master and the workers
//! build from it, each built once per process, exactly as the servers build them.
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use cocktail_common::Zoo;
use cocktail_master::serving::tasks::{self, TaskTable};
use cocktail_master::{Master, MasterConfig};
use cocktail_worker::Preprocessor;
use cocktail_worker::preprocess::{ImagePreprocessor, TextPreprocessor};

/// The repository's `models/zoo.toml`, wherever the target runs from.
pub fn zoo_path() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/zoo.toml"))
}

pub static ZOO: LazyLock<Zoo> = LazyLock::new(|| {
    let path = Zoo::locate(Some(&zoo_path())).expect("the zoo manifest");
    Zoo::load(path).expect("the committed zoo loads")
});

/// The master's task tables, as `Master::new` builds them.
pub static TASKS: LazyLock<BTreeMap<String, Arc<TaskTable>>> = LazyLock::new(|| {
    tasks::from_zoo(
        &ZOO,
        MasterConfig::default().weight_prior,
        1.0,
        MasterConfig::default().scheme.rule(),
    )
    .into_iter()
    .map(|(name, table)| (name, Arc::new(table)))
    .collect()
});

/// A current-thread runtime for the async parsing steps.
pub static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime")
});

/// A master on the committed zoo, without Redis, workers or a controller.
pub static MASTER: LazyLock<Master> = LazyLock::new(|| {
    let config = MasterConfig {
        zoo: Some(zoo_path()),
        ..MasterConfig::default()
    };
    RUNTIME.block_on(async { Master::new(config).expect("the master starts") })
});

/// The preprocessing of the task's first model, as a worker serving it builds it.
pub fn preprocessor(task: &str) -> Preprocessor {
    let model = ZOO
        .models_for(task)
        .next()
        .unwrap_or_else(|| panic!("the zoo has a `{task}` model"));
    Preprocessor::for_model(&ZOO, model).expect("the model's preprocessing loads")
}

pub static IMAGE: LazyLock<Preprocessor> = LazyLock::new(|| preprocessor("fashion"));
pub static TEXT: LazyLock<Preprocessor> = LazyLock::new(|| preprocessor("sentiment"));

pub fn image_preprocessor() -> &'static ImagePreprocessor {
    match &*IMAGE {
        Preprocessor::Image(image) => image,
        Preprocessor::Text(_) | Preprocessor::Tensor(_) => panic!("`fashion` takes images"),
    }
}

pub fn text_preprocessor() -> &'static TextPreprocessor {
    match &*TEXT {
        Preprocessor::Text(text) => text,
        Preprocessor::Image(_) | Preprocessor::Tensor(_) => panic!("`sentiment` takes text"),
    }
}

/// A fuzz input as an OIP body, twice: as JSON alone, and (when its first two bytes, a
/// little-endian length, fit in the rest) as a JSON header of that length followed by
/// binary tensors, as with `Inference-Header-Content-Length`.
pub fn bodies(data: &[u8]) -> Vec<(bytes::Bytes, Option<usize>)> {
    let mut bodies = vec![(bytes::Bytes::copy_from_slice(data), None)];
    if let Some((length, rest)) = data.split_first_chunk::<2>() {
        let length = usize::from(u16::from_le_bytes(*length));
        if length <= rest.len() {
            bodies.push((bytes::Bytes::copy_from_slice(rest), Some(length)));
        }
    }
    bodies
}
