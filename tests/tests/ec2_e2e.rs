//! The master's EC2 path end to end, against moto: a harness plays EC2. For every
//! instance the master launched (instant CreateFleet, spot) it reads the instance's boot
//! script back from moto, serves the instance's metadata (IMDSv2, with the spot notice
//! and the rebalance recommendation when the test sets them), and starts a real
//! `cocktail-worker` on loopback with what the script gives it: the pool's model, the
//! instance's id, the cluster secret. The worker registers under the instance's id; the
//! master checks it is an instance it launched at the host its tag names (moto's private
//! addresses are never contacted). Under load the test interrupts one spot instance and
//! recommends rebalancing another: each is replaced before it goes, no request fails, the
//! idle leftover is terminated, and the master's shutdown terminates everything.

#![cfg(feature = "ec2")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use aws_sdk_ec2::Client;
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_ec2::types::{Filter, InstanceAttributeName, InstanceStateName, Tag};
use base64::Engine as _;
use cocktail_benches::loadgen::{self, LoadgenConfig};
use cocktail_benches::workload::Mix;
use cocktail_common::Zoo;
use cocktail_common::auth::Secret;
use cocktail_master::resources::provider::ec2::boot;
use cocktail_tests::cluster::{
    ADMIN_TOKEN, Moto, Process, admin_client, decisions, eventually, free_port, serving_workers,
};
use cocktail_tests::zoo_manifest;
use serde_json::{Value, json};

const HOST_TAG: &str = "cocktail:host";
const MODELS: [&str; 2] = ["linear", "lenet"];

/// What one instance's metadata service says beyond its id.
#[derive(Debug, Default)]
struct Metadata {
    spot_action: Option<Value>,
    rebalance: Option<Value>,
}

/// An instance as the harness runs it: its metadata service and its worker.
struct Booted {
    model: String,
    metadata: Arc<Mutex<Metadata>>,
    imds: actix_web::dev::ServerHandle,
    worker: Option<Process>,
    launched: Instant,
    serving: Option<Duration>,
}

/// The instance metadata service of instance `id` on a free loopback port.
fn imds(id: String, metadata: Arc<Mutex<Metadata>>) -> (String, actix_web::dev::ServerHandle) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = HttpServer::new(move || {
        let (id, metadata) = (id.clone(), Arc::clone(&metadata));
        let notice = Arc::clone(&metadata);
        App::new()
            .route(
                "/latest/api/token",
                web::put().to(|| async { HttpResponse::Ok().body("imds-token") }),
            )
            .route(
                "/latest/meta-data/instance-id",
                web::get().to(move || {
                    let id = id.clone();
                    async move { HttpResponse::Ok().body(id) }
                }),
            )
            .route(
                "/latest/meta-data/spot/instance-action",
                web::get().to(move || {
                    let action = notice.lock().unwrap().spot_action.clone();
                    async move {
                        match action {
                            Some(action) => HttpResponse::Ok().json(action),
                            None => HttpResponse::NotFound().finish(),
                        }
                    }
                }),
            )
            .route(
                "/latest/meta-data/events/recommendations/rebalance",
                web::get().to(move || {
                    let rebalance = metadata.lock().unwrap().rebalance.clone();
                    async move {
                        match rebalance {
                            Some(body) => HttpResponse::Ok().json(body),
                            None => HttpResponse::NotFound().finish(),
                        }
                    }
                }),
            )
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    (url, handle)
}

fn ec2(moto: &Moto) -> Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .endpoint_url(&moto.url)
        .build();
    Client::from_conf(config)
}

/// The master's instances in moto: `(id, type, spot, state)`.
async fn instances(client: &Client) -> Vec<(String, String, bool, InstanceStateName)> {
    let out = client
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:cocktail:managed")
                .values("true")
                .build(),
        )
        .send()
        .await
        .unwrap();
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .map(|i| {
            (
                i.instance_id().unwrap().to_owned(),
                i.instance_type().unwrap().as_str().to_owned(),
                i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot"),
                i.state().and_then(|s| s.name()).unwrap().clone(),
            )
        })
        .collect()
}

/// The boot script moto keeps for instance `id`, decoded.
async fn boot_script(client: &Client, id: &str) -> String {
    let attribute = client
        .describe_instance_attribute()
        .instance_id(id)
        .attribute(InstanceAttributeName::UserData)
        .send()
        .await
        .unwrap();
    let encoded = attribute
        .user_data()
        .and_then(|v| v.value())
        .unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    let text = String::from_utf8(decoded).unwrap();
    // A launch template's user data is base64 already; moto may encode it once more.
    match base64::engine::general_purpose::STANDARD.decode(text.trim()) {
        Ok(inner) if inner.starts_with(b"#!") => String::from_utf8(inner).unwrap(),
        _ => text,
    }
}

/// One pass of the harness: boots the instances moto runs that it has not booted yet,
/// and stops the workers of instances that are gone.
async fn play_ec2(client: &Client, booted: &mut HashMap<String, Booted>) {
    for (id, _, _, state) in instances(client).await {
        let running = matches!(
            state,
            InstanceStateName::Pending | InstanceStateName::Running
        );
        if running && !booted.contains_key(&id) {
            let script = boot_script(client, &id).await;
            let boot = boot::parse(&script);
            let model = boot
                .model
                .unwrap_or_else(|| panic!("no model in the boot script:\n{script}"));
            let secret = boot
                .secret
                .expect("the boot script carries the cluster secret");
            // The master and its CA as the script gives them: the worker serves HTTPS
            // with a certificate the master signs, as on EC2.
            let master = boot
                .master
                .unwrap_or_else(|| panic!("no master in the boot script:\n{script}"));
            let ca = boot
                .ca
                .unwrap_or_else(|| panic!("no cluster CA in the boot script:\n{script}"));
            client
                .create_tags()
                .resources(&id)
                .tags(Tag::builder().key(HOST_TAG).value("127.0.0.1").build())
                .send()
                .await
                .unwrap();
            let metadata = Arc::new(Mutex::new(Metadata::default()));
            let (imds_url, imds) = imds(id.clone(), Arc::clone(&metadata));
            let args: Vec<String> = [
                "--model",
                &model,
                "--id",
                &id,
                "--master",
                &master,
                "--cluster-tls",
                "--port",
                "0",
                "--heartbeat-ms",
                "200",
                "--imds-url",
                &imds_url,
                "--imds-poll-ms",
                "200",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
            let worker = Process::start_env(
                "cocktail-worker",
                &args,
                &[
                    ("COCKTAIL_CLUSTER_SECRET", Some(&secret)),
                    ("COCKTAIL_CLUSTER_CA", Some(&ca)),
                ],
            )
            .await;
            booted.insert(
                id,
                Booted {
                    model,
                    metadata,
                    imds,
                    worker: Some(worker),
                    launched: Instant::now(),
                    serving: None,
                },
            );
        } else if !running
            && let Some(instance) = booted.get_mut(&id)
            && let Some(mut worker) = instance.worker.take()
        {
            // EC2 stops a terminated instance's processes: SIGTERM, a short grace.
            worker.terminate().await;
            instance.imds.stop(false).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_master_serves_from_spot_fleets_replaces_interrupted_instances_and_cleans_up() {
    let moto = Moto::start().await;
    let client = ec2(&moto);
    let port = free_port();
    let master_url = format!("http://127.0.0.1:{port}");
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        // gRPC on any port: on a fixed `--port` the master takes 8001 beside it.
        "--grpc-port",
        "0",
        "--heartbeat-ms",
        "200",
        "--provider",
        "ec2",
        "--ec2-endpoint",
        &moto.url,
        "--ec2-image-id",
        "ami-12c6146b",
        "--public-url",
        &master_url,
        "--ec2-host-tag",
        HOST_TAG,
        "--models",
        &MODELS.join(","),
        "--min-instances",
        "1",
        "--controller-interval-s",
        "2",
        "--reactive-interval-s",
        "2",
        "--idle-timeout-s",
        "6",
        "--register-timeout-s",
        "60",
        "--pseudo-label-every",
        "0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut master = Process::start_env(
        "cocktail-master",
        &args,
        &[
            ("AWS_ACCESS_KEY_ID", Some("testing")),
            ("AWS_SECRET_ACCESS_KEY", Some("testing")),
        ],
    )
    .await;
    assert_eq!(master.url, master_url);

    // The harness runs in the background; `booted` is what it booted.
    let booted: Arc<tokio::sync::Mutex<HashMap<String, Booted>>> = Arc::default();
    let harness = tokio::spawn({
        let (client, booted) = (client.clone(), Arc::clone(&booted));
        async move {
            loop {
                play_ec2(&client, &mut *booted.lock().await).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let admin = admin_client();
    let serving_since = |booted: &mut HashMap<String, Booted>, serving: &[(String, String)]| {
        for (id, instance) in booted.iter_mut() {
            if instance.serving.is_none() && serving.iter().any(|(s, _)| s == id) {
                instance.serving = Some(instance.launched.elapsed());
            }
        }
    };
    eventually(
        "a worker serves every pool",
        Duration::from_secs(90),
        || async {
            let serving = serving_workers(&admin, &master_url).await;
            serving_since(&mut *booted.lock().await, &serving);
            MODELS
                .iter()
                .all(|m| serving.iter().any(|(_, model)| model == m))
        },
    )
    .await;

    // Load for 30 s; a third of the way in, one spot instance is told it goes in 2 s and
    // another that it should be rebalanced.
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let config = LoadgenConfig {
        admin_token: Some(Secret::new(ADMIN_TOKEN, "admin").unwrap()),
        grace_ms: 2000.0,
        ..LoadgenConfig::steady(&master_url, "fashion", 8.0, 30, Mix::Relaxed, 7)
    };
    let load = tokio::spawn(async move { loadgen::run_zoo(&zoo, &config).await.unwrap() });
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (doomed, rebalanced) = {
        let booted = booted.lock().await;
        let of = |model: &str| {
            booted
                .iter()
                .find(|(_, b)| b.model == model && b.worker.is_some())
                .map(|(id, b)| (id.clone(), Arc::clone(&b.metadata)))
                .unwrap()
        };
        (of("linear"), of("lenet"))
    };
    let goes_at = Instant::now() + Duration::from_secs(2);
    doomed.1.lock().unwrap().spot_action =
        Some(json!({ "action": "terminate", "time": "2026-11-23T00:00:00Z" }));
    rebalanced.1.lock().unwrap().rebalance = Some(json!({ "noticeTime": "2026-11-23T00:00:00Z" }));
    // Each is replaced: another worker of its pool serves before it goes.
    for (id, model) in [(&doomed.0, "linear"), (&rebalanced.0, "lenet")] {
        eventually("a replacement serves", Duration::from_secs(30), || async {
            let serving = serving_workers(&admin, &master_url).await;
            serving_since(&mut *booted.lock().await, &serving);
            serving.iter().any(|(other, m)| other != id && m == model)
        })
        .await;
    }
    let replaced_in = Instant::now().saturating_duration_since(goes_at - Duration::from_secs(2));
    // EC2 reclaims the interrupted instance when its notice runs out.
    tokio::time::sleep(goes_at.saturating_duration_since(Instant::now())).await;
    client
        .terminate_instances()
        .instance_ids(&doomed.0)
        .send()
        .await
        .unwrap();
    let report = load.await.unwrap();
    let failed: u64 = report.errors.values().sum();
    assert_eq!(
        failed, 0,
        "requests failed across the interruption: {report:?}"
    );
    assert_eq!(report.dropped, 0);

    // The rebalanced instance, drained, idles past the timeout and is terminated.
    eventually(
        "the idle leftover is terminated",
        Duration::from_secs(60),
        || async {
            instances(&client).await.iter().any(|(id, _, _, state)| {
                id == &rebalanced.0 && *state == InstanceStateName::Terminated
            })
        },
    )
    .await;
    let decisions = decisions(&master_url).await;
    let reasons: Vec<&str> = decisions
        .iter()
        .filter_map(|d| d["decision"]["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("capacity-rebalance recommendation")),
        "{reasons:#?}"
    );

    // The figures of the run, before the master's shutdown.
    let all = instances(&client).await;
    let mut by_kind: BTreeMap<(String, &str), usize> = BTreeMap::new();
    for (_, ty, spot, _) in &all {
        *by_kind
            .entry((ty.clone(), if *spot { "spot" } else { "on-demand" }))
            .or_default() += 1;
    }
    let to_serving: Vec<f64> = booted
        .lock()
        .await
        .values()
        .filter_map(|b| b.serving.map(|d| d.as_secs_f64()))
        .collect();
    assert!(
        by_kind.keys().any(|(_, market)| *market == "spot"),
        "{by_kind:?}"
    );
    // Every launch was a fleet request over several types (the chosen one and its
    // alternates by packing factor).
    let fleets = client.describe_fleets().send().await.unwrap();
    let types_per_fleet: Vec<usize> = fleets
        .fleets()
        .iter()
        .map(|f| {
            let mut types: Vec<String> = f
                .launch_template_configs()
                .iter()
                .flat_map(|c| c.overrides())
                .filter_map(|o| o.instance_type().map(|t| t.as_str().to_owned()))
                .collect();
            types.sort();
            types.dedup();
            types.len()
        })
        .collect();
    assert!(!types_per_fleet.is_empty());
    assert!(
        types_per_fleet.iter().any(|&n| n >= 2),
        "{types_per_fleet:?}"
    );
    eprintln!(
        "ec2 end to end: instances launched by type and market {by_kind:?}; harness boot to serving {to_serving:.2?} s; \
         types per fleet request {types_per_fleet:?}; replacements serving {:.1} s after the notices; {} requests, {failed} failed",
        replaced_in.as_secs_f64(),
        report.sent,
    );

    // The master's shutdown terminates everything it launched.
    master.terminate().await;
    let left: Vec<_> = instances(&client)
        .await
        .into_iter()
        .filter(|(_, _, _, state)| {
            !matches!(
                state,
                InstanceStateName::Terminated | InstanceStateName::ShuttingDown
            )
        })
        .collect();
    assert_eq!(
        left,
        Vec::new(),
        "instances left running after the master stopped"
    );
    harness.abort();
    let mut booted = booted.lock().await;
    for instance in booted.values_mut() {
        if let Some(mut worker) = instance.worker.take() {
            worker.terminate().await;
        }
    }
}
