//! `cocktail-master --port P`: serves constraint-aware ensembles over OIP v2; workers
//! register with it (`cocktail-worker --master URL`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use cocktail_common::auth::{
    self, ADMIN_TOKEN_ENV, ADMIN_TOKEN_FILE, CLUSTER_SECRET_FILE, DEFAULT_SECRETS_DIR, Secret,
};
use cocktail_common::redact::UrlWithCredentials;
use cocktail_master::access::ca::{CA_FILE, ClusterCa};
use cocktail_master::access::{Access, ApiKeys, Networks};
use cocktail_master::server::{ClusterListener, Grpc, Listeners};
use cocktail_master::serving::request::MemberWire;
use cocktail_master::{Interval, MasterConfig};
use cocktail_policy::selection::{Rule, SelectionConfig};
use cocktail_policy::tracking::Knobs;
use cocktail_policy::voting::Scheme;
use cocktail_service::config_file::{self, ConfigArgs, ConfigError, Parsed};
use cocktail_service::net::{Net, NetArgs};
use tracing_subscriber::EnvFilter;

mod resource_flags;
use resource_flags::{ProviderKind, ResourceArgs, non_negative, resources};

/// mimalloc instead of glibc's malloc: under `master-bench`'s 3-model ensemble at 8
/// clients perf put glibc's allocator (malloc, free and their consolidation) at about 9 %
/// of the master's CPU, for the many small buffers each HTTP message allocates. With it
/// the master's CPU per request fell 3-16 % (docs/design.md, "What a member call costs"),
/// for about 15 MiB more memory (PSS at 8 clients: 36.5 MiB against 21.5).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Serve ensembles of the zoo's models under latency and accuracy constraints.
#[derive(Debug, Parser)]
#[command(name = "cocktail-master", version)]
struct Args {
    /// Address to bind.
    #[arg(long, env = "COCKTAIL_HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to bind; 0 picks a free one (printed at start).
    #[arg(long, env = "COCKTAIL_PORT", default_value_t = 8080)]
    port: u16,
    /// Port of the OIP gRPC endpoint (default 8001, or a free port with `--port 0`; the
    /// second stdout line says which).
    #[arg(long, env = "COCKTAIL_GRPC_PORT")]
    grpc_port: Option<u16>,
    /// Port of the cluster listener, HTTPS with a certificate from the master's own CA,
    /// where the workers a provider launches reach the master (default: a free port; the
    /// third stdout line says which). Give a fixed one where a firewall must let the
    /// workers through, or where they outlive a restart of the master (EC2). Not opened
    /// without `--provider` or with `--no-cluster-tls`.
    #[arg(long, env = "COCKTAIL_CLUSTER_PORT", default_value_t = 0)]
    cluster_port: u16,
    /// The zoo manifest (default: models/zoo.toml in this folder or a parent).
    #[arg(long, env = "COCKTAIL_ZOO")]
    zoo: Option<PathBuf>,
    /// Redis for the shared model cache, e.g. redis://127.0.0.1:6379; without it the
    /// cache lives in this process.
    #[arg(long, env = "COCKTAIL_REDIS_URL")]
    redis_url: Option<UrlWithCredentials>,
    /// Seconds a cached selection lives without use.
    #[arg(long, env = "COCKTAIL_CACHE_TTL_S", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    cache_ttl_s: u64,
    /// Milliseconds a Redis call may take before it counts as a miss.
    #[arg(long, env = "COCKTAIL_REDIS_TIMEOUT_MS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    redis_timeout_ms: u64,
    /// O2 interval in seconds.
    #[arg(long, env = "COCKTAIL_INTERVAL_S", default_value_t = 30.0)]
    interval_s: f64,
    /// O2 interval in requests per constraint instead of seconds.
    #[arg(long, env = "COCKTAIL_INTERVAL_REQUESTS", value_parser = clap::value_parser!(u64).range(1..))]
    interval_requests: Option<u64>,
    /// How far above the target window accuracy must be before O2 prunes.
    #[arg(long, env = "COCKTAIL_ACCURACY_MARGIN", default_value_t = 0.002)]
    accuracy_margin: f64,
    /// Voting scheme: `majority` is the vote selection estimates; `weighted` is Cocktail's
    /// per-class weighted vote, which loses to it on the zoo (see `cocktail_policy::voting`).
    #[arg(long, env = "COCKTAIL_SCHEME", value_enum, default_value_t = Scheme::Majority)]
    scheme: Scheme,
    /// Milliseconds members may answer after the latency target (default 0: the answer
    /// is due at `latency_ms`, with the members that answered by then). An answer after
    /// the target counts as an SLO violation either way.
    #[arg(long, env = "COCKTAIL_DEADLINE_GRACE_MS", default_value_t = 0)]
    deadline_grace_ms: u64,
    /// Milliseconds a member must be late before it is hedged on another instance of its
    /// pool or with a substitute (at least; four of its pool's typical call times otherwise).
    #[arg(long, env = "COCKTAIL_HEDGE_MIN_MS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    hedge_min_ms: u64,
    /// How inputs and answers travel to and from members: `binary` (Triton's binary
    /// tensor extension) or `json` (OIP JSON, base64 images).
    #[arg(long, env = "COCKTAIL_MEMBER_WIRE", value_enum, default_value_t = MemberWire::Binary)]
    member_wire: MemberWire,
    /// Member calls of a model whose inference (by its profile) takes at most this many
    /// microseconds wait, while another call to the same worker is under way, until it
    /// ends (at most this long), and go out together as one batch call: fewer messages
    /// per request under load; a lone call goes at once. The instances of such a model
    /// count the linger in the calls they take at once (`--overhead-ms`). 0: every call
    /// goes alone.
    #[arg(long, env = "COCKTAIL_JOIN_CALLS_US", default_value_t = cocktail_master::config::LINGER_US)]
    join_calls_us: u64,
    /// Expected worker heartbeat period in milliseconds.
    #[arg(long, env = "COCKTAIL_HEARTBEAT_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    heartbeat_ms: u64,
    /// Every n-th unlabelled request is also answered by every candidate, and each
    /// candidate's per-class weights learn what the others agree on (0: never). O2 decides
    /// on real labels only (`label`, `/v1/feedback`).
    #[arg(long, env = "COCKTAIL_PSEUDO_LABEL_EVERY", default_value_t = 10)]
    pseudo_label_every: u64,
    /// How ensembles are chosen: `cocktail` (the paper's O1 and O2), `measured` (greedy
    /// forward selection on each constraint's labelled answers) or `tracking` (re-selection
    /// on the recent labelled answers, at once when they show a shift; for drifting traffic).
    #[arg(long, env = "COCKTAIL_SELECTION", value_enum, default_value_t = Rule::Cocktail)]
    selection: Rule,
    /// Under `--selection measured` or `tracking`, every n-th request also goes to every
    /// candidate outside the ensemble, to measure them on its label, in the request or
    /// sent later (0: never).
    #[arg(long, env = "COCKTAIL_SHADOW_EVERY", default_value_t = 20)]
    shadow_every: u64,
    /// Under `--selection tracking`, when a cheaper choice falls short of the target and a
    /// dearer one clears it, serve the two in turn, in the shares that meet it at the least
    /// cost, instead of the cheapest single choice that meets it.
    #[arg(long, env = "COCKTAIL_PACE")]
    pace: bool,
    /// Under `--selection tracking`, the standard errors of the window's accuracy by which
    /// a choice must clear the target (0: the target itself; 1.645: a one-sided 95 %
    /// bound). A larger margin meets the target more often at more inference.
    #[arg(long, env = "COCKTAIL_TRACKING_MARGIN", default_value_t = Knobs::default().margin_z)]
    tracking_margin: f64,
    /// Under `--selection tracking`, re-select only at the interval, not at once when the
    /// latest labels fall below the target (the shift check).
    #[arg(long, env = "COCKTAIL_NO_SHIFT_CHECK")]
    no_shift_check: bool,
    /// Under `--selection tracking`, what a millisecond of inference per request is worth
    /// in chance of meeting the target (0 to 1): each re-selection serves the choice with
    /// the most chance of a window meeting the target less this price times its
    /// inference, instead of the cheapest that clears the margin. Unset: the margin rule.
    #[arg(long, env = "COCKTAIL_TRACKING_PRICE")]
    tracking_price: Option<f64>,
    /// HTTP worker threads.
    #[arg(long, env = "COCKTAIL_HTTP_WORKERS", default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    http_workers: usize,
    #[command(flatten)]
    resources: ResourceArgs,
    #[command(flatten)]
    security: SecurityArgs,
    #[command(flatten)]
    net: NetArgs,
    #[command(flatten)]
    config: ConfigArgs,
}

/// Who may call what (docs/security.md).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Security")]
struct SecurityArgs {
    /// Where the cluster secret and the admin token are kept when not given otherwise:
    /// generated there (mode 0600) at the first start and reused after.
    #[arg(long, env = "COCKTAIL_SECRETS_DIR", default_value = DEFAULT_SECRETS_DIR)]
    secrets_dir: PathBuf,
    /// A file (mode 0600) holding the admin token; COCKTAIL_ADMIN_TOKEN gives it directly.
    #[arg(long, env = "COCKTAIL_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,
    /// Client API keys with their requests-per-second budgets (TOML; see
    /// `cocktail keys new`); without it the inference endpoints need no key.
    #[arg(long, env = "COCKTAIL_API_KEYS")]
    api_keys: Option<PathBuf>,
    /// Networks worker URLs must lie in (CIDRs, comma-separated; default: loopback with
    /// `--provider local`, else loopback and the private ranges).
    #[arg(long, env = "COCKTAIL_WORKER_NETWORKS", value_delimiter = ',')]
    worker_networks: Vec<String>,
    /// Workers a provider launches serve plain HTTP, and reach the master on its main
    /// port: the cluster secret, inputs and answers then cross the cluster's network in
    /// clear text. For benchmarks that measure the hop without TLS; by default the master
    /// is the cluster's CA and every call between it and its launched workers is HTTPS.
    #[arg(long, env = "COCKTAIL_NO_CLUSTER_TLS")]
    no_cluster_tls: bool,
}

fn main() -> ExitCode {
    // Both of rustls' crypto providers are compiled in (reqwest brings aws-lc-rs), so
    // rustls cannot pick one for configurations built without one, as the gRPC
    // endpoint's TLS is: ring, as everywhere else in this process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    // Flags over `COCKTAIL_*` variables over the `--config` file (config_file's header).
    let args = match config_file::parse::<Args>(std::env::args_os(), CONFIG_PAGE_INTRO) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(ConfigError::Clap(error)) => error.exit(),
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    if !(args.interval_s > 0.0 && args.interval_s.is_finite()) {
        anyhow::bail!("`--interval-s` must be a positive number of seconds");
    }
    if args.accuracy_margin.is_nan() || args.accuracy_margin < 0.0 {
        anyhow::bail!("`--accuracy-margin` must not be negative");
    }
    let knobs = tracking_knobs(&args)?;
    if !(args.resources.emulate_scale >= 1.0 && args.resources.emulate_scale.is_finite()) {
        anyhow::bail!("`--emulate-scale` must be a number of at least 1");
    }
    let hop = non_negative(args.resources.overhead_ms, "overhead-ms")? / 1e3;
    let speed_scale = if args.resources.emulate_types {
        args.resources.emulate_scale
    } else {
        1.0
    };
    // The effective configuration. The cluster secret and the admin token come from the
    // environment or files and are not part of it; URLs print without their credentials.
    tracing::info!(config = ?args, "starting");
    let mut net = args.net.load()?;
    let (access, cluster_secret) = access(&args.security, &mut net, args.resources.provider)?;
    let resources = resources(args.resources, args.zoo.clone(), &cluster_secret)?;
    let config = MasterConfig {
        zoo: args.zoo,
        redis_url: args.redis_url.map(UrlWithCredentials::into_exposed),
        cache_ttl: Duration::from_secs(args.cache_ttl_s),
        redis_timeout: Duration::from_millis(args.redis_timeout_ms),
        interval: match args.interval_requests {
            Some(n) => Interval::Requests(n),
            None => Interval::Every(Duration::from_secs_f64(args.interval_s)),
        },
        selection: SelectionConfig {
            accuracy_margin: args.accuracy_margin,
            rule: args.selection,
        },
        scheme: args.scheme,
        deadline_grace: Duration::from_millis(args.deadline_grace_ms),
        heartbeat: Duration::from_millis(args.heartbeat_ms),
        http_workers: args.http_workers,
        pseudo_label_every: args.pseudo_label_every,
        shadow_every: args.shadow_every,
        knobs,
        speed_scale,
        cluster_secret: Some(cluster_secret),
        tls_roots: net.roots.clone(),
        hedge_min: Duration::from_millis(args.hedge_min_ms),
        linger: Duration::from_micros(args.join_calls_us),
        hop: Duration::from_secs_f64(hop),
        member_wire: args.member_wire,
        ..MasterConfig::default()
    };
    let prometheus = cocktail_master::metrics::install()?;
    let listener = listen(&args.host, args.port, "--port")?;
    let address = listener.local_addr()?;
    // The first stdout line tells scripts and tests where the master listens.
    println!("cocktail-master listening on {}://{address}", net.scheme());
    let grpc_port = args
        .grpc_port
        .unwrap_or(if args.port == 0 { 0 } else { DEFAULT_GRPC_PORT });
    // Given a port (`--port` not 0), the master takes gRPC's usual port beside it, as
    // Triton does; a second master on the host needs `--grpc-port` (0: any).
    let grpc_listener = listen(&args.host, grpc_port, "--grpc-port")?;
    println!(
        "cocktail-master grpc listening on {}",
        grpc_listener.local_addr()?
    );
    let grpc = Grpc {
        listener: grpc_listener,
        identity: grpc_identity(&args.net)?,
    };
    let cluster = match &access.ca {
        Some(ca) => {
            let listener = listen(&args.host, args.cluster_port, "--cluster-port")?;
            println!(
                "cocktail-master cluster listening on https://{}",
                listener.local_addr()?
            );
            Some(ClusterListener {
                listener,
                ca: std::sync::Arc::clone(ca),
            })
        }
        None => None,
    };
    if !address.ip().is_loopback() && net.tls.is_none() {
        tracing::warn!(%address, "listening beyond loopback without TLS: secrets and inputs cross the network in clear text (see --tls-cert)");
    }
    let listeners = Listeners {
        http: listener,
        grpc: Some(grpc),
        cluster,
    };
    actix_web::rt::System::new().block_on(cocktail_master::server::serve(
        config,
        listeners,
        Some(prometheus),
        resources,
        access,
        net,
    ))?;
    Ok(())
}

/// The head of docs/configuration.md (`--print-config-reference`); the rest is made from
/// the flags' definitions.
const CONFIG_PAGE_INTRO: &str = include_str!("config_page_intro.md");

/// The OIP gRPC endpoint's port unless `--grpc-port` says otherwise, as Triton's.
const DEFAULT_GRPC_PORT: u16 = 8001;

/// Binds `host:port`, or says which flag set the address it could not take.
fn listen(host: &str, port: u16, flag: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind((host, port))
        .with_context(|| format!("cannot listen on {host}:{port} (`{flag}`)"))
}

/// The gRPC endpoint's TLS identity: the same certificate and key as HTTP's.
fn grpc_identity(net: &NetArgs) -> anyhow::Result<Option<tonic::transport::Identity>> {
    let (Some(cert), Some(key)) = (&net.tls_cert, &net.tls_key) else {
        return Ok(None);
    };
    let read = |path: &std::path::Path| {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    };
    Ok(Some(tonic::transport::Identity::from_pem(
        read(cert)?,
        read(key)?,
    )))
}

/// The secrets and admission rules: the cluster secret and the admin token from the
/// environment or their files, else the ones in the secrets folder (made there at the
/// first start). The cluster secret is also what `net` presents to workers.
fn access(
    args: &SecurityArgs,
    net: &mut Net,
    provider: Option<ProviderKind>,
) -> anyhow::Result<(Access, Secret)> {
    let dir = &args.secrets_dir;
    let mut from_dir = Vec::new();
    let cluster = match net.cluster_secret.take() {
        Some(secret) => secret,
        None => {
            from_dir.push(CLUSTER_SECRET_FILE);
            Secret::read_or_create(dir, CLUSTER_SECRET_FILE)?
        }
    };
    let admin = match auth::from_env_or_file(ADMIN_TOKEN_ENV, args.admin_token_file.as_deref())? {
        Some(secret) => secret,
        None => {
            from_dir.push(ADMIN_TOKEN_FILE);
            Secret::read_or_create(dir, ADMIN_TOKEN_FILE)?
        }
    };
    if !from_dir.is_empty() {
        tracing::info!(dir = %dir.display(), files = ?from_dir, "secrets kept in the secrets folder (mode 0600)");
    }
    net.cluster_secret = Some(cluster.clone());
    let keys = args
        .api_keys
        .as_deref()
        .map(ApiKeys::load)
        .transpose()?
        .map(std::sync::Arc::new);
    if let Some(keys) = &keys {
        tracing::info!(keys = keys.len(), "the inference endpoints need an API key");
    }
    let networks = match (args.worker_networks.is_empty(), provider) {
        (false, _) => Networks::parse(&args.worker_networks)?,
        (true, Some(ProviderKind::Local)) => Networks::loopback(),
        (true, _) => Networks::private(),
    };
    // The master is the CA of the workers a provider launches, unless told otherwise.
    let ca = match provider {
        Some(_) if !args.no_cluster_tls => {
            let ca = ClusterCa::read_or_create(dir)?;
            net.roots.extend(cocktail_service::net::parse_certificates(
                ca.cert_pem().as_bytes(),
                CA_FILE,
            )?);
            Some(std::sync::Arc::new(ca))
        }
        _ => None,
    };
    let access = Access {
        cluster: Some(cluster.clone()),
        admin: Some(admin),
        keys,
        networks,
        ca,
    };
    Ok((access, cluster))
}

/// How each constraint's tracker is set under `--selection tracking`.
fn tracking_knobs(args: &Args) -> anyhow::Result<Knobs> {
    Ok(
        Knobs::new(args.tracking_margin, !args.no_shift_check, args.pace)?
            .priced(args.tracking_price)?,
    )
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use cocktail_master::resources::controller::{Optimiser, Policy};
    use cocktail_master::serving::usage::RECENT_OUTCOMES;
    use cocktail_policy::predict::PredictorKind;
    use cocktail_service::config_file::TESTING;

    use super::*;
    use crate::resource_flags::{positive_share, share};

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("cocktail-master").chain(flags.iter().copied()))
    }

    #[test]
    fn the_tracking_flags_set_the_trackers_knobs() {
        let knobs = |flags: &[&str]| tracking_knobs(&parse(flags).unwrap());
        assert_eq!(knobs(&[]).unwrap(), Knobs::default());
        let set = knobs(&["--tracking-margin", "0.5", "--no-shift-check", "--pace"]).unwrap();
        assert_eq!(
            set,
            Knobs {
                margin_z: 0.5,
                shift_check: false,
                pace: true,
                price: None,
            }
        );
        let priced = knobs(&["--tracking-price", "0.035"]).unwrap();
        assert_eq!(priced.price, Some(0.035));
        let refused = knobs(&["--tracking-price", "2"]).unwrap_err().to_string();
        assert!(
            refused.contains("`--tracking-price` must be 0 to 1"),
            "{refused}"
        );
        let config = MasterConfig {
            knobs: set,
            selection: SelectionConfig {
                rule: Rule::Tracking,
                ..SelectionConfig::default()
            },
            ..MasterConfig::default()
        };
        let tracking = config.tracking().unwrap();
        assert_eq!(
            (tracking.margin_z, tracking.recent, tracking.pace),
            (0.5, 0, true)
        );
        for bad in ["-0.1", "10.5", "NaN", "inf"] {
            let error = knobs(&[&format!("--tracking-margin={bad}")]).unwrap_err();
            assert!(error.to_string().contains("`--tracking-margin`"), "{error}");
        }
    }

    #[test]
    fn the_flags_are_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn docs_configuration_md_is_generated_from_these_flags() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        let current = config_file::reference(&Args::command(), CONFIG_PAGE_INTRO);
        assert!(
            committed == current,
            "docs/configuration.md is stale: run `cargo run -p cocktail-master -- --print-config-reference > docs/configuration.md`"
        );
    }

    #[test]
    fn the_testing_flags_keep_their_names_and_go_in_their_own_table() {
        let args = parse(&[
            "--seed",
            "7",
            "--provisioning-delay-ms",
            "0",
            "--emulate-types",
        ])
        .unwrap();
        assert_eq!(args.resources.seed, 7);
        let command = Args::command();
        let testing: Vec<&str> = command
            .get_arguments()
            .filter(|a| a.get_help_heading() == Some(TESTING))
            .filter_map(|a| a.get_long())
            .collect();
        assert_eq!(
            testing,
            [
                "provisioning-delay-ms",
                "emulate-types",
                "emulate-scale",
                "revocations-per-hour",
                "spot-notice-s",
                "record-control-steps",
                "provider-fault-file",
                "spot-history",
                "seed",
                "ec2-host-tag",
            ]
        );
    }

    #[test]
    fn the_logged_configuration_has_no_credentials() {
        let args = parse(&[
            "--redis-url",
            "redis://:hunter2@cache:6379/0",
            "--mongo-url",
            "mongodb://dbuser:s3cret@h1:27017,h2:27017/?replicaSet=rs",
        ])
        .unwrap();
        let logged = format!("{args:?}");
        for secret in ["hunter2", "s3cret", "dbuser"] {
            assert!(!logged.contains(secret), "{secret} in {logged}");
        }
        assert!(
            logged.contains("redis://<redacted>@cache:6379/0"),
            "{logged}"
        );
        assert!(
            logged.contains("mongodb://<redacted>@h1:27017,h2:27017/?replicaSet=rs"),
            "{logged}"
        );
        // The clients still get the URLs as given.
        assert_eq!(
            args.redis_url
                .map(UrlWithCredentials::into_exposed)
                .as_deref(),
            Some("redis://:hunter2@cache:6379/0")
        );
    }

    #[test]
    fn choice_flags_take_their_wire_names_and_list_them_on_a_mistake() {
        let args = parse(&[
            "--scheme",
            "average",
            "--policy",
            "mark",
            "--predictor",
            "holt-winters",
            "--pool-mix",
            "kairos",
        ])
        .unwrap();
        assert_eq!(args.scheme, Scheme::Average);
        assert_eq!(args.resources.policy, Policy::Mark);
        assert_eq!(args.resources.predictor, PredictorKind::HoltWinters);
        assert_eq!(args.resources.pool_mix, Some(Optimiser::Kairos));
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults.scheme, Scheme::Majority);
        assert_eq!(defaults.resources.policy, Policy::Cocktail);
        assert_eq!(defaults.resources.predictor, PredictorKind::Auto);
        assert_eq!(defaults.resources.pool_mix, None);
        let error = parse(&["--predictor", "nope"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue);
        let text = error.to_string();
        for name in ["mwa", "ewma", "linear", "holt-winters", "auto", "learned"] {
            assert!(text.contains(name), "{text}");
        }
        for (flag, value) in [
            ("--scheme", "clipper"),
            ("--policy", "greedy"),
            ("--pool-mix", "exhaustive"),
        ] {
            let error = parse(&[flag, value]).unwrap_err();
            assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue, "{flag}");
        }
    }

    #[test]
    fn out_of_range_values_are_errors_not_clamped() {
        let limit = RECENT_OUTCOMES.to_string();
        let above = (RECENT_OUTCOMES + 1).to_string();
        assert_eq!(
            parse(&["--slo-last-requests", &limit])
                .unwrap()
                .resources
                .slo_last_requests,
            Some(RECENT_OUTCOMES)
        );
        for flags in [
            ["--slo-last-requests", above.as_str()],
            ["--slo-last-requests", "0"],
            ["--cache-ttl-s", "0"],
            ["--redis-timeout-ms", "0"],
            ["--interval-requests", "0"],
            ["--heartbeat-ms", "9"],
            ["--hedge-min-ms", "0"],
            ["--http-workers", "0"],
            ["--max-threads", "0"],
            ["--mix-max-per-type", "13"],
        ] {
            let error = parse(&flags).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{flags:?}"
            );
            assert!(error.to_string().contains(flags[0]), "{error}");
        }
        let errors = [
            non_negative(-1.0, "overhead-ms"),
            non_negative(f64::INFINITY, "revocations-per-hour"),
            share(1.5, "slo-threshold"),
            share(f64::NAN, "slo-threshold"),
            positive_share(0.0, "target-utilisation"),
            positive_share(1.01, "spot-type-share"),
        ];
        for (error, flag) in errors.into_iter().zip([
            "overhead-ms",
            "revocations-per-hour",
            "slo-threshold",
            "slo-threshold",
            "target-utilisation",
            "spot-type-share",
        ]) {
            let error = error.unwrap_err().to_string();
            assert!(error.contains(&format!("`--{flag}`")), "{error}");
        }
        assert_eq!(share(0.05, "slo-threshold").unwrap(), 0.05);
        assert_eq!(non_negative(0.0, "idle-timeout-s").unwrap(), 0.0);
    }
}
