//! Resource management: the controller that predicts load and provisions each pool, the
//! providers that launch instances, the learned predictor and the state store.

pub mod controller;
pub mod learned;
pub mod provider;
pub mod store;
