//! A real Envoy 1.40 enforcing what a scripted quota server assigns, with the model of its
//! quota client (`sluice_test_support::envoy_quota_client`) beside it: the test sends the
//! same actions and requests to both.
//!
//! Envoy has two kinds of bucket: `x-tenant: <v>` makes the bucket `{tenant: <v>}`, with no
//! `expired_assignment_behavior`; `x-fallback: <v>` makes `{fallback: <v>}`, which falls
//! back to DENY_ALL for 2 s when an assignment expires. Both are ALLOW_ALL unassigned.
//!
//! Knowing when Envoy has applied a response: each response also flips the blanket rule of
//! a probe bucket (`{tenant: probe}`), and [`Rig::push`] returns once a request to the probe
//! shows the flip. Envoy applies a response's actions together (one update of its workers'
//! buckets), so the other actions are then in force too.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use super::envoy::Envoy;
use super::scripted_rlqs::{Received, ScriptedRlqs};
use super::upstream::Upstream;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use reqwest::StatusCode;
use sluice_test_support::envoy_quota_client::{Blanket, EnvoyBucket, blanket, bucket_id};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The fallback of `{fallback: <v>}` buckets when an assignment expires, and for how long.
pub const FALLBACK: (Blanket, Duration) = (Blanket::DenyAll, Duration::from_secs(2));

/// A bucket: the request header that selects it, and its value.
#[derive(Clone, Copy, Debug)]
pub struct Bucket {
    header: &'static str,
    key: &'static str,
    value: &'static str,
}

impl Bucket {
    /// `{tenant: value}`: no fallback on expiry.
    pub fn plain(value: &'static str) -> Bucket {
        Bucket { header: "x-tenant", key: "tenant", value }
    }

    /// `{fallback: value}`: [`FALLBACK`] on expiry.
    pub fn with_fallback(value: &'static str) -> Bucket {
        Bucket { header: "x-fallback", key: "fallback", value }
    }

    /// Its id, as Envoy builds it.
    pub fn id(&self) -> BucketId {
        bucket_id(self.key, self.value)
    }

    /// The model of this bucket in a fresh Envoy of the rig's configuration.
    pub fn model(&self) -> EnvoyBucket {
        let expired = (self.header == "x-fallback").then_some(FALLBACK);
        EnvoyBucket::new(Blanket::AllowAll, expired)
    }

    /// The time since its last report, as `report` says (whole seconds).
    pub fn elapsed_in(&self, report: &Received) -> Option<Duration> {
        let id = self.id();
        let usage = report.usages.iter().find(|usage| usage.bucket_id.as_ref() == Some(&id))?;
        let elapsed = usage.time_elapsed?;
        Some(Duration::new(elapsed.seconds.try_into().unwrap(), elapsed.nanos.try_into().unwrap()))
    }

    /// Its usage in `report`, as (allowed, denied).
    pub fn usage_in(&self, report: &Received) -> Option<(u64, u64)> {
        let id = self.id();
        let usage = report.usages.iter().find(|usage| usage.bucket_id.as_ref() == Some(&id))?;
        Some((usage.num_requests_allowed, usage.num_requests_denied))
    }
}

/// Envoy, the scripted server, the application behind Envoy, and the probe.
pub struct Rig {
    pub envoy: Envoy,
    pub server: ScriptedRlqs,
    _app: Upstream,
    origin: Instant,
    client: reqwest::Client,
    probe_denies: bool,
}

/// The probe bucket, held from the rig's start.
pub const PROBE: Bucket = Bucket { header: "x-tenant", key: "tenant", value: "probe" };

impl Rig {
    /// Starts everything, and makes Envoy hold the probe (and open its stream); `None`
    /// (skipped) without an Envoy binary.
    pub async fn start() -> Option<Rig> {
        let binary = super::envoy::binary()?;
        let (app, server) = (Upstream::start(), ScriptedRlqs::start().await);
        let envoy = Envoy::start(&binary, &config(app.address, server.address())).await;
        let client = reqwest::Client::new();
        let rig = Rig { envoy, server, _app: app, origin: Instant::now(), client, probe_denies: false };
        assert!(rig.send(PROBE).await, "an unassigned bucket admits");
        rig.server.report_after(0, |report| PROBE.usage_in(report).is_some()).await;
        Some(rig)
    }

    /// Time since the rig started: the model's clock.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Sends a request to `bucket`: admitted (200) or refused (429)?
    pub async fn send(&self, bucket: Bucket) -> bool {
        let request = self.client.get(self.envoy.url("/")).header(bucket.header, bucket.value);
        match request.send().await.unwrap().status() {
            StatusCode::OK => true,
            StatusCode::TOO_MANY_REQUESTS => false,
            other => panic!("a request through Envoy: {other}"),
        }
    }

    /// Sends `count` requests to `bucket` and as many to its `model`, at the same times:
    /// how many each admitted.
    pub async fn requests(&self, bucket: Bucket, model: &mut EnvoyBucket, count: u32) -> (u32, u32) {
        let (mut envoy, mut modelled) = (0, 0);
        for _ in 0..count {
            modelled += u32::from(model.request(self.now()));
            envoy += u32::from(self.send(bucket).await);
        }
        (envoy, modelled)
    }

    /// Makes Envoy hold each bucket with one request (admitted as unassigned, in Envoy and
    /// in its model), and checks the report each creation sends at once.
    pub async fn create(&self, buckets: &mut [(Bucket, &mut EnvoyBucket)]) {
        let skip = self.server.reports().len();
        for (bucket, model) in buckets.iter_mut() {
            assert!(model.request(self.now()) && self.send(*bucket).await, "an unassigned bucket admits");
        }
        for (bucket, model) in buckets.iter_mut() {
            let report = self.server.report_after(skip, |report| bucket.usage_in(report).is_some()).await;
            let usage = model.take_creation_report().unwrap();
            assert_eq!(bucket.usage_in(&report), Some((usage.allowed, usage.denied)), "{bucket:?} created");
        }
    }

    /// Sends a response of `actions` (and the probe's flip) on the current stream, and
    /// waits until Envoy applies it: returns when it was sent and when seen applied.
    pub async fn push(&mut self, mut actions: Vec<BucketAction>) -> (Duration, Duration) {
        self.probe_denies = !self.probe_denies;
        let rule = if self.probe_denies { Blanket::DenyAll } else { Blanket::AllowAll };
        actions.push(blanket(&PROBE.id(), rule, Duration::from_secs(3_600)));
        let sent = self.now();
        self.server.push(actions);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.send(PROBE).await == self.probe_denies {
            assert!(Instant::now() < deadline, "Envoy did not apply a response within 10 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (sent, self.now())
    }

    /// Waits for Envoy's next periodic report (it holds the probe, so each one names it)
    /// among the reports from the `skip`-th on.
    pub async fn periodic_report(&self, skip: usize) -> Received {
        self.server.report_after(skip.max(1), |report| PROBE.usage_in(report).is_some()).await
    }

    /// `received`, as a time on the model's clock.
    pub fn at(&self, received: &Received) -> Duration {
        received.at.duration_since(self.origin)
    }

    /// The value of Envoy's statistic `name`, 0 when it has none.
    pub async fn stat(&self, name: &str) -> u64 {
        let url = format!("http://{}/stats?filter=^{name}$", self.envoy.admin);
        let text = reqwest::get(url).await.unwrap().text().await.unwrap();
        let value = text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(": "));
        value.map_or(0, |value| value.trim().parse().unwrap())
    }
}

/// One matcher of the filter (as an item of `matchers`, indented to fit [`config`]):
/// requests with `header` go to the bucket `{key: <value>}`.
fn matcher(header: &str, key: &str, expired: &str) -> String {
    let input = format!(
        r#"{{name: {key}, typed_config: {{"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: {header}}}}}"#
    );
    let lines = [
        format!(r#"- predicate: {{single_predicate: {{input: {input}, value_match: {{safe_regex: {{google_re2: {{}}, regex: ".+"}}}}}}}}"#),
        "  on_match:".to_owned(),
        "    action:".to_owned(),
        "      name: rate_limit_quota".to_owned(),
        "      typed_config:".to_owned(),
        r#"        "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings"#.to_owned(),
        format!("        bucket_id_builder: {{bucket_id_builder: {{{key}: {{custom_value: {input}}}}}}}"),
        "        reporting_interval: 5s".to_owned(),
        "        no_assignment_behavior: {fallback_rate_limit: {blanket_rule: ALLOW_ALL}}".to_owned(),
        expired.to_owned(),
    ];
    lines.iter().filter(|line| !line.is_empty()).map(|line| format!("\n{:28}{line}", "")).collect()
}

/// Envoy on loopback ports the kernel picks, in front of `app`, asking `quota`.
fn config(app: SocketAddr, quota: SocketAddr) -> String {
    let expired = "        expired_assignment_behavior: \
                   {fallback_rate_limit: {blanket_rule: DENY_ALL}, expired_assignment_behavior_timeout: 2s}";
    let matchers = matcher("x-tenant", "tenant", "") + &matcher("x-fallback", "fallback", expired);
    let endpoint = |address: SocketAddr| {
        let socket = format!("{{socket_address: {{address: 127.0.0.1, port_value: {}}}}}", address.port());
        format!("endpoints: [{{lb_endpoints: [{{endpoint: {{address: {socket}}}}}]}}]")
    };
    let (app, quota) = (endpoint(app), endpoint(quota));
    format!(
        r#"
admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}}}
static_resources:
  listeners:
    - name: ingress
      address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: ingress
                route_config: {{virtual_hosts: [{{name: app, domains: ["*"], routes: [{{match: {{prefix: "/"}}, route: {{cluster: app}}}}]}}]}}
                http_filters:
                  - name: envoy.filters.http.rate_limit_quota
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig
                      domain: quota
                      rlqs_server: {{envoy_grpc: {{cluster_name: quota}}}}
                      bucket_matchers:
                        matcher_list:
                          matchers:{matchers}
                  - name: envoy.filters.http.router
                    typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
    - {{name: app, type: STATIC, connect_timeout: 1s, load_assignment: {{cluster_name: app, {app}}}}}
    - name: quota
      type: STATIC
      connect_timeout: 1s
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config: {{http2_protocol_options: {{}}}}
      load_assignment: {{cluster_name: quota, {quota}}}
"#
    )
}
