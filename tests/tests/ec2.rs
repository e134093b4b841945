//! The EC2 provider against the moto EC2 server (`moto[server,ec2]`, installed by
//! scripts/test.sh): tagged spot and on-demand instances launched by instant CreateFleet
//! requests with an allocation strategy, listed and terminated.

#![cfg(feature = "ec2")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use cocktail_common::catalog::Catalog;
use cocktail_master::resources::provider::ec2::{Ec2Config, Ec2Provider};
use cocktail_master::resources::provider::{InstanceStatus, LaunchSpec, Provider};
use cocktail_tests::cluster::Moto;

fn one<T: std::fmt::Debug>(mut launched: Vec<T>) -> T {
    assert_eq!(launched.len(), 1, "{launched:?}");
    launched.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_and_on_demand_instances_are_launched_tagged_listed_and_terminated() {
    let moto = Moto::start().await;
    let catalog = Catalog::embedded().unwrap();
    let provider = Ec2Provider::new(
        Ec2Config::emulated(&moto.url, "ami-12c6146b", "http://10.0.0.1:8080"),
        catalog.clone(),
    )
    .await
    .unwrap();
    provider.refresh_prices().await.unwrap();
    let ty = catalog.get("c5a.xlarge").unwrap().clone();
    assert!(provider.spot_price(&ty) > 0.0);
    let spec = |model: &str, spot: bool| LaunchSpec {
        model: model.into(),
        instance_type: ty.clone(),
        spot,
        price_per_hour: 0.05,
        alternates: Vec::new(),
    };

    let spot = one(provider.launch(spec("cnn_k5", true)).await.unwrap());
    let on_demand = one(provider.launch(spec("mlp_med", false)).await.unwrap());
    let fleet = provider
        .launch_fleet(&spec("dwsep", true), 2)
        .await
        .unwrap();
    assert_eq!(fleet.len(), 2, "{fleet:?}");

    let listed = provider.describe().await.unwrap();
    assert_eq!(listed.len(), 4, "{listed:?}");
    let find = |id: &str| listed.iter().find(|r| r.id == id).unwrap().clone();
    let s = find(&spot.id);
    assert_eq!(
        (s.model.as_str(), s.spot, s.instance_type.as_str()),
        ("cnn_k5", true, "c5a.xlarge")
    );
    assert!((s.price_per_hour - 0.05).abs() < 1e-9, "price tag: {s:?}");
    assert!(s.status != InstanceStatus::Terminated);
    let o = find(&on_demand.id);
    assert_eq!((o.model.as_str(), o.spot), ("mlp_med", false));
    for f in &fleet {
        assert_eq!(find(&f.id).model, "dwsep");
    }

    provider.terminate(&spot.id).await.unwrap();
    let after = provider.describe().await.unwrap();
    let gone = after.iter().find(|r| r.id == spot.id).unwrap();
    assert_eq!(gone.status, InstanceStatus::Terminated);
    assert_eq!(
        after
            .iter()
            .filter(|r| r.status != InstanceStatus::Terminated)
            .count(),
        3
    );

    // A restarted master finds its pools' launch templates made already: it adds a
    // version with its own boot script and launches on.
    let restarted = Ec2Provider::new(
        Ec2Config::emulated(&moto.url, "ami-12c6146b", "http://10.0.0.2:8080"),
        catalog.clone(),
    )
    .await
    .unwrap();
    let again = one(restarted.launch(spec("cnn_k5", true)).await.unwrap());
    assert_eq!(
        restarted
            .describe()
            .await
            .unwrap()
            .iter()
            .find(|r| r.id == again.id)
            .unwrap()
            .model,
        "cnn_k5"
    );
}
