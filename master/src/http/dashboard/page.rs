//! The dashboard's HTML: the sign-in form, the page, and its five views (traffic,
//! selection, resources, cost, workers), drawn from the history's samples and the live
//! state. Pure functions of [`Inputs`]: no I/O, no actix-web.

use std::collections::BTreeMap;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::charts::{self, Range, Series, Target, colour, short};
use crate::history::{self, Sample};
use crate::resources::store::DecisionRecord;
use crate::serving::registry::InstanceView;
use crate::serving::traffic::SelectionDecision;

/// Constraint keys drawn in a chart, the busiest first.
const KEYS_DRAWN: usize = 6;
/// Rows of a decision table.
const DECISIONS_SHOWN: usize = 8;

/// Everything the views are drawn from.
#[derive(Debug)]
pub struct Inputs {
    pub now_s: f64,
    pub samples: Vec<Sample>,
    pub workers: Vec<InstanceView>,
    pub selection: Vec<SelectionDecision>,
    /// The autoscaler's recent decisions, newest first; `None` without a controller.
    pub scaling: Option<Vec<DecisionRecord>>,
    pub heartbeat_ms: u64,
    /// Heartbeats a worker may miss before it is dropped.
    pub missed_heartbeats: u32,
}

/// The view names, in page order.
pub const VIEWS: [&str; 5] = ["traffic", "selection", "resources", "cost", "workers"];

/// Each view's HTML, in [`VIEWS`] order.
pub fn views(inputs: &Inputs) -> [Markup; 5] {
    [
        traffic(inputs),
        selection(inputs),
        resources(inputs),
        cost(inputs),
        workers(inputs),
    ]
}

const STYLE: &str = r#"
body{font-family:"DejaVu Sans",system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330;font-size:14px}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;align-items:baseline;gap:18px}
header h1{font-size:18px;margin:0}header nav a{color:#cfd6e4;margin-right:12px;text-decoration:none}
header .live{margin-left:auto;color:#9fb3c8;font-size:12px}header form{margin:0}
header button{background:none;border:1px solid #6b7a90;color:#cfd6e4;border-radius:4px;cursor:pointer}
main{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px;padding:14px}
section{background:#fff;border-radius:8px;padding:10px 14px;box-shadow:0 1px 2px #0002}
section h2{font-size:18px;margin:2px 0 8px;text-transform:capitalize}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:8px 14px}
figure.wide{grid-column:1/-1}
figure.chart{margin:0;min-width:0}.band{fill:#c0392b;fill-opacity:.12;stroke:none}figcaption{font-weight:600;font-size:14px}
.unit{font-weight:400;color:#667}svg{width:100%;height:auto;display:block}
.grid{stroke:#e3e6eb;stroke-width:1}.tick{font-size:12px;fill:#556}
.target{stroke:#c0392b;stroke-dasharray:5 3;stroke-width:1.2;fill:#c0392b;font-size:11px}
text.target{stroke:none}.value{font-size:12px;fill:#333}.empty{fill:#99a;font-size:14px}
.legend{list-style:none;padding:0;margin:2px 0 6px;display:flex;flex-wrap:wrap;gap:4px 12px;font-size:13px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}
th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #eceef2;vertical-align:top}
td.n{white-space:nowrap}
th{color:#556;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.figures{display:flex;gap:18px;margin:4px 0 8px}.figures div{font-size:11px;color:#667}
.figures b{display:block;font-size:18px;color:#1d2330}
.bad{color:#c0392b;font-weight:600}.ok{color:#1e8449}.muted{color:#889}
.signin{max-width:380px;margin:80px auto;background:#fff;padding:24px;border-radius:8px;box-shadow:0 1px 3px #0003}
.signin input{width:100%;box-sizing:border-box;padding:6px;margin:8px 0;font-family:monospace}
.signin .error{color:#c0392b}
"#;

fn document(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    }
}

/// The sign-in form; `error` says why the last attempt failed.
pub fn sign_in(error: Option<&str>) -> Markup {
    document(
        "Cocktail-rs dashboard: sign in",
        html! {
            form.signin method="post" action="/dashboard/sign-in" {
                h1 { "Cocktail-rs dashboard" }
                @if let Some(e) = error { p.error { (e) } }
                label for="token" { "Admin token" }
                input #token type="password" name="token" autocomplete="current-password" required autofocus;
                p.muted { "The master's admin token: COCKTAIL_ADMIN_TOKEN, --admin-token-file, or .cocktail/admin-token. Signing in sets a session cookie for this page only." }
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// The dashboard page with `views` drawn in; `/dashboard/app.js` refreshes them.
pub fn page(views: &[Markup; 5], signed_in: bool) -> Markup {
    document(
        "Cocktail-rs dashboard",
        html! {
            header {
                h1 { "Cocktail-rs" }
                nav { @for v in VIEWS { a href={ "#" (v) } { (v) } } }
                span.live #updated { "live, every " (history::SAMPLE_PERIOD.as_secs()) " s" }
                @if signed_in {
                    form method="post" action="/dashboard/sign-out" { button type="submit" { "Sign out" } }
                }
            }
            main {
                @for (name, view) in VIEWS.iter().zip(views) {
                    section #(name) data-view=(name) { h2 { (name) } div.body { (view) } }
                }
            }
            script src="/dashboard/app.js" {}
        },
    )
}

/// `task|latency|accuracy|objective` as `task ≤ 50 ms, ≥ 0.9`.
fn key_label(key: &str) -> String {
    let parts: Vec<&str> = key.split('|').collect();
    match parts.as_slice() {
        [task, latency, accuracy, objective] => {
            let by = if *objective == "latency" {
                " (fastest)"
            } else {
                ""
            };
            let number = |v: &str| {
                let rounded = v.parse().map_or_else(|_| v.to_owned(), short);
                if rounded.contains('.') {
                    rounded
                        .trim_end_matches('0')
                        .trim_end_matches('.')
                        .to_owned()
                } else {
                    rounded
                }
            };
            format!(
                "{task} ≤ {} ms, ≥ {}{by}",
                number(latency),
                number(accuracy)
            )
        }
        _ => key.to_owned(),
    }
}

/// The keys of the newest sample, busiest first, at most [`KEYS_DRAWN`].
fn busiest(samples: &[Sample]) -> Vec<String> {
    let Some(last) = samples.last() else {
        return Vec::new();
    };
    let mut keys: Vec<_> = last.keys.iter().collect();
    keys.sort_by_key(|k| std::cmp::Reverse(k.requests));
    keys.into_iter()
        .take(KEYS_DRAWN)
        .map(|k| k.key.clone())
        .collect()
}

/// Per-second rates of a summed count over every key.
fn total_rate(samples: &[Sample], count: impl Fn(&history::KeySample) -> u64) -> Vec<(f64, f64)> {
    history::rates(samples, |s| Some(s.keys.iter().map(&count).sum()))
}

fn traffic(inputs: &Inputs) -> Markup {
    let samples = &inputs.samples;
    let keys = busiest(samples);
    let rps: Vec<Series> = keys
        .iter()
        .map(|key| Series {
            name: key_label(key),
            points: history::rates(samples, |s| s.key(key).map(|k| k.requests)),
        })
        .collect();
    let p95: Vec<Series> = keys
        .iter()
        .map(|key| Series {
            name: key_label(key),
            points: samples
                .iter()
                .filter_map(|s| Some((s.at_s, s.key(key)?.p95_ms?)))
                .collect(),
        })
        .collect();
    let mut targets: Vec<f64> = samples
        .last()
        .map(|s| {
            s.keys
                .iter()
                .filter(|k| keys.contains(&k.key))
                .map(|k| k.target_ms)
                .collect()
        })
        .unwrap_or_default();
    targets.sort_by(f64::total_cmp);
    targets.dedup();
    let targets: Vec<Target> = targets
        .into_iter()
        .map(|value| Target {
            value,
            label: "target",
        })
        .collect();
    let problems = [
        ("SLO violations", total_rate(samples, |k| k.slo_violations)),
        ("failed", total_rate(samples, |k| k.failed)),
        ("degraded", total_rate(samples, |k| k.degraded)),
        ("substituted", total_rate(samples, |k| k.substituted)),
    ]
    .into_iter()
    .map(|(name, points)| Series {
        name: name.into(),
        points,
    })
    .collect::<Vec<_>>();
    let last = samples.last();
    html! {
        div.charts {
            (charts::lines("Requests per second by constraint", "req/s", &rps, &[], Range::default(), inputs.now_s))
            (charts::lines("Latency p95 against its target", "ms", &p95, &targets, Range::default(), inputs.now_s))
            (charts::lines("SLO violations, failed, degraded and substituted answers", "per s", &problems, &[], Range::default(), inputs.now_s))
        }
        table {
            tr { th { "constraint" } th { "requests" } th { "p50" } th { "p95" } th { "p99" } th { "target" } th { "late" } th { "failed" } th { "degraded" } th { "substituted" } }
            @for k in last.map(|s| s.keys.as_slice()).unwrap_or_default() {
                tr {
                    td { (key_label(&k.key)) }
                    td.n { (k.requests) }
                    td.n { (ms(k.p50_ms)) } td.n { (ms(k.p95_ms)) }
                    td.n class=(if k.p99_ms.is_some_and(|p| p > k.target_ms) { "n bad" } else { "n" }) { (ms(k.p99_ms)) }
                    td.n { (short(k.target_ms)) " ms" }
                    td.n { (percent(k.slo_violations, k.requests)) }
                    td.n { (k.failed) } td.n { (k.degraded) } td.n { (k.substituted) }
                }
            }
        }
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{} ms", short(v)))
}

fn percent(part: u64, of: u64) -> String {
    if of == 0 {
        return "–".into();
    }
    format!("{:.1} %", part as f64 / of as f64 * 100.0)
}

fn selection(inputs: &Inputs) -> Markup {
    let samples = &inputs.samples;
    let keys = busiest(samples);
    let accuracy: Vec<Series> = keys
        .iter()
        .map(|key| Series {
            name: key_label(key),
            points: samples
                .iter()
                .filter_map(|s| Some((s.at_s, s.key(key)?.window_accuracy?)))
                .collect(),
        })
        .collect();
    let mut goals: Vec<f64> = samples
        .last()
        .map(|s| {
            s.keys
                .iter()
                .filter(|k| keys.contains(&k.key))
                .map(|k| k.target_accuracy)
                .collect()
        })
        .unwrap_or_default();
    goals.sort_by(f64::total_cmp);
    goals.dedup();
    let floor = accuracy
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(goals.iter().copied())
        .fold(1.0, f64::min);
    let floor = ((floor - 0.05) * 10.0).floor() / 10.0;
    let goals: Vec<Target> = goals
        .into_iter()
        .map(|value| Target {
            value,
            label: "target",
        })
        .collect();
    let models: Vec<Series> = keys
        .iter()
        .map(|key| Series {
            name: key_label(key),
            points: samples
                .windows(2)
                .filter_map(|w| {
                    let (a, b) = (w[0].key(key), w[1].key(key)?);
                    let requests = b.requests - a.map_or(0, |a| a.requests);
                    let asked = b.members_asked - a.map_or(0, |a| a.members_asked);
                    (requests > 0).then(|| (w[1].at_s, asked as f64 / requests as f64))
                })
                .collect(),
        })
        .collect();
    html! {
        div.charts {
            (charts::lines("Window accuracy against its target", "fraction correct", &accuracy, &goals, Range { floor: Some(floor.max(0.0)), cap: Some(1.0) }, inputs.now_s))
            (charts::lines("Models per request", "members", &models, &[], Range::default(), inputs.now_s))
            (ensembles_over_time(samples, &keys, inputs.now_s))
        }
        h3 { "O2 and measured selection: recent decisions" }
        table {
            tr { th { "when" } th { "constraint" } th { "decision" } th { "members after" } th { "window" } th { "why" } }
            @for d in inputs.selection.iter().take(DECISIONS_SHOWN) {
                tr {
                    td { (ago(inputs.now_s - d.at_s)) }
                    td { (key_label(&d.key)) }
                    td { b { (d.kind) } }
                    td { (d.members.join(", ")) }
                    td.n { (d.window_accuracy.map_or_else(|| "–".into(), |a| format!("{a:.3}"))) }
                    td { (d.reason) }
                }
            }
            @if inputs.selection.is_empty() { tr { td colspan="6" .muted { "no ensemble has changed yet" } } }
        }
    }
}

/// Each key's ensemble as coloured spans over time, one row per key.
fn ensembles_over_time(samples: &[Sample], keys: &[String], now_s: f64) -> Markup {
    let (width, row, left) = (800.0, 26.0, 170.0);
    let height = 8.0 + row * keys.len().max(1) as f64 + 18.0;
    let start = samples.first().map_or(now_s, |s| s.at_s);
    let span = (now_s - start).max(60.0);
    let x = |t: f64| left + (t - (now_s - span)) / span * (width - left - 10.0);
    // Spans: (key row, from, to, members).
    let mut spans: Vec<(usize, f64, f64, String)> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        for s in samples {
            let Some(k) = s.key(key) else { continue };
            let members = k.members.join("+");
            match spans.last_mut() {
                Some(last) if last.0 == i && last.3 == members => last.2 = s.at_s,
                _ => spans.push((i, s.at_s, s.at_s, members)),
            }
        }
    }
    let mut palette: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &spans {
        let next = palette.len();
        palette.entry(s.3.as_str()).or_insert(next);
    }
    html! {
        figure.chart.wide {
            figcaption { "Ensemble over time" span.unit { " (members per constraint)" } }
            svg viewBox={ "0 0 " (width) " " (height) } role="img" aria-label="Ensemble over time"
                data-points=(spans.len()) data-chart="Ensemble over time" {
                @for (i, key) in keys.iter().enumerate() {
                    text.tick x=(left - 6.0) y=(8.0 + row * i as f64 + 17.0) text-anchor="end" { (key_label(key)) }
                }
                @for (i, from, to, members) in &spans {
                    @let (x0, x1) = (x(*from), x(to + 5.0).min(width - 10.0));
                    @let y = 8.0 + row * *i as f64;
                    rect x=(format!("{x0:.1}")) y=(y + 3.0) width=(format!("{:.1}", (x1 - x0).max(2.0))) height="18" rx="3"
                        fill=(colour(palette.get(members.as_str()).copied().unwrap_or(0))) fill-opacity="0.8" {
                        title { (members) }
                    }
                    @if x1 - x0 > 7.5 * members.len() as f64 {
                        text x=(format!("{:.1}", x0 + 4.0)) y=(y + 16.0) font-size="12" fill="#fff" { (members) }
                    }
                }
                text.tick x=(left) y=(height - 4.0) { (ago(span)) }
                text.tick x=(width - 10.0) y=(height - 4.0) text-anchor="end" { "now" }
                @if spans.is_empty() {
                    text.empty x=(width / 2.0) y=(height / 2.0) text-anchor="middle" { "no data yet" }
                }
            }
            ul.legend {
                @for (members, i) in &palette { li { span.swatch style={ "background:" (colour(*i)) } {} (members) } }
            }
        }
    }
}

fn ago(seconds: f64) -> String {
    if seconds < 90.0 {
        format!("{seconds:.0} s ago")
    } else if seconds < 5400.0 {
        format!("{:.0} min ago", seconds / 60.0)
    } else {
        format!("{:.1} h ago", seconds / 3600.0)
    }
}

fn no_controller() -> Markup {
    html! { p.muted { "This master runs without a resource controller (start it with --provider)." } }
}

fn resources(inputs: &Inputs) -> Markup {
    let samples = &inputs.samples;
    let Some(last) = samples.last().and_then(|s| s.resources.as_ref()) else {
        return no_controller();
    };
    let pools: Vec<&str> = last.pools.iter().map(|p| p.model.as_str()).collect();
    let instances: Vec<Series> = pools
        .iter()
        .map(|pool| Series {
            name: (*pool).to_owned(),
            points: samples
                .iter()
                .filter_map(|s| {
                    let p = s
                        .resources
                        .as_ref()?
                        .pools
                        .iter()
                        .find(|p| p.model == *pool)?;
                    Some((s.at_s, p.instances.values().sum::<usize>() as f64))
                })
                .collect(),
        })
        .collect();
    let forecast = vec![
        Series {
            name: "forecast (predicted req/s)".into(),
            points: samples
                .iter()
                .filter_map(|s| Some((s.at_s, s.resources.as_ref()?.predicted_rps)))
                .collect(),
        },
        Series {
            name: "load (measured req/s)".into(),
            points: total_rate(samples, |k| k.requests),
        },
    ];
    // The controller's own measure: the load a pool must serve over what its instances
    // serve with every slot (Pf) busy.
    let utilisation: Vec<(String, f64)> = last
        .pools
        .iter()
        .filter(|p| p.capacity_rps > 0.0)
        .map(|p| (p.model.clone(), p.demand_rps / p.capacity_rps))
        .collect();
    html! {
        div.figures {
            div { b { (last.pools.iter().map(|p| p.instances.values().sum::<usize>()).sum::<usize>()) } "instances" }
            div { b { (last.pools.iter().map(|p| p.boots).sum::<usize>()) } "boots" }
            div { b { (last.pools.iter().map(|p| p.revocations).sum::<usize>()) } "revocations" }
            div { b { (last.health_replacements) } "health replacements" }
            div { b { (short(last.predicted_rps)) } "forecast req/s" }
        }
        div.charts {
            (charts::lines("Instances by pool", "instances", &instances, &[], Range::default(), inputs.now_s))
            (charts::lines("Forecast against the load", "req/s", &forecast, &[], Range::default(), inputs.now_s))
            (charts::bars("Utilisation: demand over capacity", "1 = every slot (Pf) busy", &utilisation,
                Some(Target { value: 1.0, label: "capacity at Pf" })))
        }
        table {
            tr { th { "pool" } th { "instances by type and market" } th { "in flight / Pf" } th { "demand / capacity req/s" } th { "boots" } th { "revocations" } }
            @for p in &last.pools {
                tr {
                    td { (p.model) }
                    td { @for ((kind, spot), n) in &p.instances { (n) "× " (kind) " " (if *spot { "spot" } else { "on-demand" }) br; } }
                    td.n { (p.in_flight) " / " (p.slots) }
                    td.n { (short(p.demand_rps)) " / " (short(p.capacity_rps)) }
                    td.n { (p.boots) } td.n { (p.revocations) }
                }
            }
        }
        @if let Some(scaling) = &inputs.scaling {
            h3 { "Autoscaler: recent decisions" }
            table {
                tr { th { "when" } th { "trigger" } th { "pool" } th { "action" } th { "why" } }
                @for d in scaling.iter().take(DECISIONS_SHOWN) {
                    tr {
                        td { (ago(inputs.now_s - d.at)) } td { (d.trigger) } td { (d.decision.pool) }
                        td { (action(&d.decision.action)) } td { (d.decision.reason) }
                    }
                }
                @if scaling.is_empty() { tr { td colspan="5" .muted { "no decision yet" } } }
            }
        }
    }
}

fn action(action: &cocktail_policy::autoscale::Action) -> String {
    use cocktail_policy::autoscale::Action;
    match action {
        Action::Launch {
            instance_type,
            count,
            spot,
            ..
        } => format!(
            "launch {count}× {instance_type} {}",
            if *spot { "spot" } else { "on-demand" }
        ),
        Action::Terminate { id } => format!("terminate {id}"),
        Action::Resume { id } => format!("resume {id}"),
        Action::Stop { id } => format!("stop {id}"),
    }
}

fn cost(inputs: &Inputs) -> Markup {
    let samples = &inputs.samples;
    let Some(last) = samples.last().and_then(|s| s.resources.as_ref()) else {
        return no_controller();
    };
    let spent = vec![Series {
        name: "spent so far".into(),
        points: samples
            .iter()
            .filter_map(|s| Some((s.at_s, s.resources.as_ref()?.cost_usd)))
            .collect(),
    }];
    let rate = |pick: fn(&history::PoolSample) -> f64| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| Some((s.at_s, s.resources.as_ref()?.pools.iter().map(pick).sum())))
            .collect()
    };
    let rates = vec![
        Series {
            name: "spot".into(),
            points: rate(|p| p.spot_per_hour),
        },
        Series {
            name: "on-demand".into(),
            points: rate(|p| p.on_demand_per_hour),
        },
    ];
    let spot: f64 = last.pools.iter().map(|p| p.spot_per_hour).sum();
    let on_demand: f64 = last.pools.iter().map(|p| p.on_demand_per_hour).sum();
    html! {
        div.figures {
            div { b { "$" (format!("{:.2}", spot + on_demand)) } "per hour now" }
            div { b { "$" (format!("{:.4}", last.cost_usd)) } "spent so far" }
            div { b { (last.per_1000_requests.map_or_else(|| "–".into(), |c| format!("${c:.5}"))) } "per 1,000 requests" }
            div { b { (if spot + on_demand > 0.0 { format!("{:.0} %", spot / (spot + on_demand) * 100.0) } else { "–".into() }) } "of the rate on spot" }
        }
        div.charts {
            (charts::lines("Spend rate: spot against on-demand", "USD/h", &rates, &[], Range::default(), inputs.now_s))
            (charts::lines("Cost so far", "USD", &spent, &[], Range::default(), inputs.now_s))
        }
        table {
            tr { th { "pool" } th { "spent (USD)" } th { "spot USD/h" } th { "on-demand USD/h" } }
            @for p in &last.pools {
                tr { td { (p.model) } td.n { (format!("{:.4}", p.cost_usd)) } td.n { (format!("{:.3}", p.spot_per_hour)) } td.n { (format!("{:.3}", p.on_demand_per_hour)) } }
            }
        }
    }
}

fn workers(inputs: &Inputs) -> Markup {
    let limit_s = inputs.heartbeat_ms as f64 * f64::from(inputs.missed_heartbeats) / 1e3;
    let heartbeats: Vec<(String, f64)> = inputs
        .workers
        .iter()
        .map(|w| (w.id.clone(), w.last_seen_ms as f64 / 1e3))
        .collect();
    html! {
        div.charts {
            (charts::bars("Last heartbeat", "seconds ago", &heartbeats, Some(Target { value: limit_s, label: "dropped after" })))
        }
        table {
            tr { th { "worker" } th { "model" } th { "type" } th { "health" } th { "last heartbeat" } th { "in flight / Pf" } th { "calls unanswered" } }
            @for w in &inputs.workers {
                tr {
                    td { (w.id) br; span.muted { (w.url) } }
                    td { (w.model) }
                    td { (w.instance_type.as_deref().unwrap_or("–")) }
                    td {
                        @if w.down { span.bad { "down" } }
                        @else if w.draining { span.muted { "draining" } }
                        @else { span.ok { "up" } }
                    }
                    td.n { (format!("{:.1} s ago", w.last_seen_ms as f64 / 1e3)) }
                    td.n { (w.in_flight) " / " (w.packing_factor) }
                    td.n class=(if w.unanswered > 0 { "n bad" } else { "n" }) { (w.unanswered) }
                }
            }
            @if inputs.workers.is_empty() { tr { td colspan="7" .muted { "no worker registered" } } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_as_constraints() {
        assert_eq!(
            key_label("fashion|5.535|0.92|accuracy"),
            "fashion ≤ 5.54 ms, ≥ 0.92"
        );
        assert_eq!(
            key_label("fashion|50|0.9|accuracy"),
            "fashion ≤ 50 ms, ≥ 0.9"
        );
        assert_eq!(
            key_label("sentiment|20|0.8|latency"),
            "sentiment ≤ 20 ms, ≥ 0.8 (fastest)"
        );
    }

    #[test]
    fn the_sign_in_form_posts_the_token_in_its_body() {
        let form = sign_in(Some("wrong token")).into_string();
        assert!(form.contains(r#"method="post""#) && form.contains(r#"type="password""#));
        assert!(form.contains("wrong token"));
    }
}
