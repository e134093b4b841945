//! The live system as a [`ConfigEvaluator`]: a measurement window on a running master
//! that manages its instances (the local provider, with `--emulate-types` so that each
//! worker takes as long as its type would). A measurement sets the pool's mix
//! (`PUT /v1/pools/{model}/mix`), waits until exactly those workers serve, then sends
//! batched queries as a Poisson process through the master's own dispatch and counts the
//! answers back within the latency target.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use cocktail_policy::mix::{ConfigEvaluator, Measurement};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::{BatchSizes, Workload};
use crate::traces::Arrivals;

/// A running master and the one pool to measure.
#[derive(Debug, Clone)]
pub struct LiveEvaluator {
    pub handle: tokio::runtime::Handle,
    pub client: reqwest::Client,
    /// The master's base URL.
    pub master: String,
    pub task: String,
    pub model: String,
    pub types: Vec<String>,
    /// Request parameters that make the master serve `model` alone.
    pub parameters: Value,
    /// An answer later than this misses the target.
    pub qos_ms: f64,
    pub window: Duration,
    pub sizes: BatchSizes,
    /// One test item per entry: the `data` of a one-item OIP input.
    pub items: Vec<Value>,
    /// The OIP input name and datatype (`image`/`text`, `BYTES`).
    pub input_name: String,
    pub seed: u64,
    /// How long to wait for a mix to be up.
    pub ready_timeout: Duration,
}

impl LiveEvaluator {
    async fn set_mix(&self, config: &[u32]) -> anyhow::Result<()> {
        let response = self
            .client
            .put(format!("{}/v1/pools/{}/mix", self.master, self.model))
            .json(&json!({ "instances": self
                .types
                .iter()
                .zip(config)
                .map(|(t, c)| json!({ "type": t, "count": c }))
                .collect::<Vec<_>>() }))
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            anyhow::bail!(
                "setting the mix answered {status}: {}",
                response.text().await.unwrap_or_default()
            );
        }
        let started = Instant::now();
        loop {
            let workers: Value = self
                .client
                .get(format!("{}/v1/workers", self.master))
                .send()
                .await?
                .json()
                .await?;
            let serving: Vec<&Value> = workers["workers"]
                .as_array()
                .map(|w| {
                    w.iter()
                        .filter(|w| w["model"] == self.model.as_str())
                        .filter(|w| w["draining"] == false && w["down"] == false)
                        .collect()
                })
                .unwrap_or_default();
            let counts: Vec<u32> = self
                .types
                .iter()
                .map(|t| {
                    serving
                        .iter()
                        .filter(|w| w["instance_type"] == t.as_str())
                        .count() as u32
                })
                .collect();
            if counts == config && serving.len() == config.iter().sum::<u32>() as usize {
                return Ok(());
            }
            if started.elapsed() > self.ready_timeout {
                anyhow::bail!("the pool did not reach {config:?} (serving {counts:?})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn window(&self, rate_qps: f64) -> anyhow::Result<Measurement> {
        let seconds = self.window.as_secs_f64().ceil().max(1.0) as usize;
        let rates = vec![rate_qps; seconds];
        let sizes = Workload::new(
            (rate_qps * seconds as f64 * 2.0) as usize + 16,
            self.sizes,
            self.seed,
        )
        .batches;
        let url = format!("{}/v2/models/{}/infer", self.master, self.task);
        let met = Arc::new(Mutex::new(0usize));
        let mut rng = SmallRng::seed_from_u64(self.seed);
        let mut tasks = Vec::new();
        let started = Instant::now();
        for (k, at) in Arrivals::new(&rates, self.seed).enumerate() {
            tokio::time::sleep_until((started + Duration::from_secs_f64(at)).into()).await;
            let n = sizes.get(k).copied().unwrap_or(1).max(1);
            let data: Vec<Value> = (0..n)
                .map(|_| self.items[rng.random_range(0..self.items.len())].clone())
                .collect();
            let body = json!({
                "inputs": [{ "name": self.input_name, "shape": [n], "datatype": "BYTES", "data": data }],
                "parameters": self.parameters,
            });
            let (client, url, met, qos) = (
                self.client.clone(),
                url.clone(),
                Arc::clone(&met),
                self.qos_ms,
            );
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                let Ok(response) = client.post(&url).json(&body).send().await else {
                    return;
                };
                let ok = response.status().is_success();
                let answer: Value = response.json().await.unwrap_or(Value::Null);
                let in_time = start.elapsed().as_secs_f64() * 1e3 <= qos;
                if ok && in_time && answer["parameters"]["degraded"] != true {
                    *met.lock().await += 1;
                }
            }));
        }
        let queries = tasks.len();
        for task in tasks {
            task.await.context("a query task failed")?;
        }
        let met = *met.lock().await;
        Ok(Measurement {
            satisfaction: if queries == 0 {
                0.0
            } else {
                met as f64 / queries as f64
            },
            queries,
        })
    }
}

impl ConfigEvaluator for LiveEvaluator {
    type Error = anyhow::Error;

    /// Blocks on the evaluator's runtime: call it from outside that runtime.
    fn measure(&mut self, config: &[u32], rate_qps: f64) -> anyhow::Result<Measurement> {
        let this = self.clone();
        let config = config.to_vec();
        self.handle.block_on(async move {
            if config.iter().all(|&c| c == 0) {
                return Ok(Measurement {
                    satisfaction: 0.0,
                    queries: 0,
                });
            }
            this.set_mix(&config).await?;
            this.window(rate_qps).await
        })
    }
}
