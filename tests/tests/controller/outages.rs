//! The state store and the provider failing under load: decisions kept and caught up,
//! nothing launched blindly, no request failed.

use std::time::Duration;

use cocktail_tests::cluster::{Cluster, eventually};
use serde_json::Value;

use crate::{count, decisions, load, registered};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_holds_the_decisions_and_catches_up_after_an_outage() {
    use cocktail_tests::cluster::{Mongo, free_port};
    // MongoDB is down when the master starts: the controller works on regardless.
    let port = free_port();
    let url = format!("mongodb://127.0.0.1:{port}");
    let cluster = Cluster::start(
        &[
            "--provider",
            "local",
            "--models",
            "linear",
            "--controller-interval-s",
            "1",
            "--provisioning-delay-ms",
            "100",
            "--max-threads",
            "1",
            "--mongo-url",
            &url,
        ],
        &[],
    )
    .await;
    eventually(
        "a decision while MongoDB is down",
        Duration::from_secs(30),
        || async { !decisions(&cluster).await.is_empty() },
    )
    .await;
    eventually(
        "the worker it launched",
        Duration::from_secs(30),
        || async { count(&cluster, "linear").await == 1 },
    )
    .await;

    // Long enough for the writer to fail (2 s server selection) and start queueing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // MongoDB comes up: the queued writes land.
    let _mongo = Mongo::start(port).await;
    let client = mongodb::Client::with_uri_str(&url).await.unwrap();
    let db = client.database("cocktail");
    eventually(
        "decisions, instances, utilisation and prices in MongoDB",
        Duration::from_secs(30),
        || {
            let db = db.clone();
            async move {
                let mut all = true;
                for collection in ["decisions", "instances", "utilisation", "spot_prices"] {
                    let n = db
                        .collection::<mongodb::bson::Document>(collection)
                        .count_documents(mongodb::bson::doc! {})
                        .await
                        .unwrap_or(0);
                    all &= n > 0;
                }
                all
            }
        },
    )
    .await;
    let decision = db
        .collection::<mongodb::bson::Document>("decisions")
        .find_one(mongodb::bson::doc! { "trigger": "predictive" })
        .await
        .unwrap()
        .expect("a predictive decision");
    let reason = decision
        .get_document("decision")
        .unwrap()
        .get_str("reason")
        .unwrap();
    assert!(reason.contains("minimum"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_cannot_list_its_instances_launches_nothing_and_fails_no_request() {
    // The local provider fails `describe` while this file exists (a testing flag).
    let fault = std::env::temp_dir().join(format!("cocktail-describe-{}", std::process::id()));
    let _ = std::fs::remove_file(&fault);
    let cluster = Cluster::start(
        &[
            "--provider",
            "local",
            "--models",
            "mlp_med,dwsep,cnn_small",
            "--instance-types",
            "r5n.large",
            "--controller-interval-s",
            "1",
            "--reactive-interval-s",
            "1",
            "--provisioning-delay-ms",
            "200",
            "--max-threads",
            "1",
            "--provider-fault-file",
            fault.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    eventually("first instances", Duration::from_secs(60), || async {
        registered(&cluster).await.len() >= 3
    })
    .await;
    let before = registered(&cluster).await.len();
    let launches = |all: &[Value]| {
        all.iter()
            .filter(|d| d["decision"]["action"]["kind"] == "launch")
            .count()
    };
    let launched_before = launches(&decisions(&cluster).await);

    // 30 s blind, under load: the controller must not act as if the cluster were empty.
    // Meanwhile one worker is dropped, as a worker that missed its heartbeats is: it
    // registers again and gets back in, though the provider cannot list it; a
    // registration the master never admitted does not.
    std::fs::write(&fault, "describe\n").unwrap();
    let dropped = registered(&cluster).await[0].clone();
    let rejoin = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let id = &dropped["id"];
        let (status, body) = cluster
            .post("/v1/workers/deregister", &serde_json::json!({ "id": id }))
            .await;
        assert_eq!(status, 200, "{body}");
        eventually(
            "the dropped worker is back",
            Duration::from_secs(15),
            || async { registered(&cluster).await.iter().any(|w| w["id"] == *id) },
        )
        .await;
        let stranger = serde_json::json!({
            "id": "never-launched",
            "model": dropped["model"],
            "url": dropped["url"],
            "packing_factor": 1,
            "queue_items": 1,
            "threads": 1,
        });
        let (status, body) = cluster.post("/v1/workers/register", &stranger).await;
        assert_eq!(
            status, 502,
            "a registration never admitted waits for a listing: {body}"
        );
    };
    let (results, ()) = tokio::join!(load(&cluster, 10.0, 30.0), rejoin);
    let all = decisions(&cluster).await;
    let blind = all.iter().filter(|d| d["trigger"] == "blind").count();
    let failed: Vec<&(u16, Value)> = results.iter().filter(|(s, _)| *s != 200).collect();
    println!(
        "{} requests, {} failed; {blind} blind steps; {} launches before, {} after",
        results.len(),
        failed.len(),
        launched_before,
        launches(&all)
    );
    assert!(
        failed.is_empty(),
        "no request fails while the controller is blind: {} failed, the first {:?}",
        failed.len(),
        failed.first()
    );
    assert!(blind >= 10, "every blind step is recorded: {blind}");
    assert_eq!(
        launches(&all),
        launched_before,
        "no launch while the provider cannot list the instances: {all:?}"
    );
    assert_eq!(
        registered(&cluster).await.len(),
        before,
        "nothing replaced blindly"
    );
    // The cost is an error, not $0.
    let response = cluster
        .client
        .get(cluster.url("/v1/cost"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 502, "the cost cannot be known");

    // Once the fault ends the controller sees its instances again and converges: the
    // instances it lists are the workers that serve.
    std::fs::remove_file(&fault).unwrap();
    eventually("the cluster converges", Duration::from_secs(30), || async {
        let instances = cluster.get("/v1/instances").await;
        let running = instances["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["status"] == "running")
            .count();
        running >= 3 && running == registered(&cluster).await.len()
    })
    .await;
    let cost = cluster.get("/v1/cost").await;
    assert!(cost["total"].as_f64().unwrap() > 0.0, "{cost}");
}
