//! Spot instances revoked or interrupted under load: replaced, or covered by a cold
//! standby, with no failed request.

use std::time::Duration;

use cocktail_tests::cluster::{Cluster, eventually};

use crate::{decisions, launches_for, load, registered};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_spot_instances_are_replaced_with_no_failed_request() {
    // Every spot instance is revoked within a second of running, with a 4 s notice;
    // replacements are on-demand burstable standbys (t3.xlarge), which are never revoked.
    let cluster = Cluster::start(
        &[
            "--provider",
            "local",
            "--models",
            "mlp_med,dwsep,cnn_small",
            "--instance-types",
            "r5n.large,t3.xlarge",
            "--controller-interval-s",
            "1",
            "--reactive-interval-s",
            "60",
            "--revocations-per-hour",
            "36000000",
            "--spot-notice-s",
            "4",
            "--provisioning-delay-ms",
            "200",
            "--max-threads",
            "1",
        ],
        &[],
    )
    .await;
    eventually("first instances", Duration::from_secs(60), || async {
        registered(&cluster).await.len() >= 3
    })
    .await;
    // Load across the revocations and the replacements.
    let results = load(&cluster, 20.0, 8.0).await;
    let failed = results.iter().filter(|(s, _)| *s != 200).count();
    let degraded = results
        .iter()
        .filter(|(_, p)| p["degraded"] == true)
        .count();
    println!(
        "{} requests, {failed} failed, {degraded} degraded",
        results.len()
    );
    assert_eq!(failed, 0);
    let all = decisions(&cluster).await;
    for pool in ["mlp_med", "dwsep", "cnn_small"] {
        let replacement = launches_for(&all, pool, "interruption");
        assert!(!replacement.is_empty(), "{pool}: no replacement in {all:?}");
        let action = &replacement[0]["decision"]["action"];
        assert_eq!(action["spot"], false, "{action}");
        assert_eq!(action["instance_type"], "t3.xlarge");
    }
    eventually(
        "the revoked instances are gone",
        Duration::from_secs(30),
        || async {
            let instances = cluster.get("/v1/instances").await;
            let list = instances["instances"].as_array().unwrap().clone();
            list.iter()
                .filter(|i| i["spot"] == true)
                .all(|i| i["status"] == "terminated")
                && list
                    .iter()
                    .filter(|i| i["spot"] == false && i["status"] == "running")
                    .count()
                    >= 3
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_standby_covers_a_spot_interruption_and_is_stopped_again() {
    // Replayed spot prices: r5n.large rises above the bid (40 % of $0.149) after 12 s.
    let history = std::env::temp_dir().join(format!("cocktail-spot-{}.csv", std::process::id()));
    std::fs::write(
        &history,
        "seconds,instance_type,price\n0,r5n.large,0.04\n12,r5n.large,0.10\n",
    )
    .unwrap();
    let history_arg = history.display().to_string();
    let cluster = Cluster::start(
        &[
            "--provider",
            "local",
            "--models",
            "mlp_med",
            "--instance-types",
            "r5n.large,t3.xlarge",
            "--standbys",
            "1",
            "--spot-history",
            &history_arg,
            "--controller-interval-s",
            "1",
            "--reactive-interval-s",
            "60",
            "--spot-notice-s",
            "4",
            "--provisioning-delay-ms",
            "300",
            "--max-threads",
            "1",
        ],
        &[],
    )
    .await;
    let instances = || async {
        cluster.get("/v1/instances").await["instances"]
            .as_array()
            .unwrap()
            .clone()
    };
    eventually(
        "a stopped standby and a running spot instance",
        Duration::from_secs(20),
        || async {
            let all = instances().await;
            all.iter()
                .any(|i| i["status"] == "stopped" && i["instance_type"] == "t3.xlarge")
                && all
                    .iter()
                    .any(|i| i["status"] == "running" && i["spot"] == true)
        },
    )
    .await;
    // Load across the price rise, the revocation and the standby's resumption.
    let results = load(&cluster, 20.0, 12.0).await;
    let failed = results.iter().filter(|(s, _)| *s != 200).count();
    println!("{} requests, {failed} failed", results.len());
    assert_eq!(failed, 0);
    let all = decisions(&cluster).await;
    let resumed = all
        .iter()
        .find(|d| d["trigger"] == "interruption" && d["decision"]["action"]["kind"] == "resume")
        .unwrap_or_else(|| panic!("no standby resumed in {all:?}"));
    assert!(
        resumed["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("cold standby")
    );
    // Regular capacity comes back (on-demand now: spot is above the bid) and the standby
    // goes cold again.
    eventually(
        "the standby stopped again",
        Duration::from_secs(30),
        || async {
            decisions(&cluster).await.iter().any(|d| {
                d["decision"]["action"]["kind"] == "stop"
                    && d["decision"]["reason"]
                        .as_str()
                        .unwrap()
                        .starts_with("regular capacity")
            })
        },
    )
    .await;
    let _ = std::fs::remove_file(&history);
}
