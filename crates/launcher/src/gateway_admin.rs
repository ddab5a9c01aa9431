//! The client of a gateway's admin endpoints, for `lowtail admin policy` and the live
//! experiments: `GET` and `PUT /admin/policy` (show and switch the read policy), `POST
//! /admin/records/take` (the records of the reads since the last take, as JSON lines), `POST
//! /admin/packed/seal` (seal the open packed stripes now), `PUT /admin/access` and `PUT
//! /admin/mover` (EC-Store's batch access policy and mover), `POST /admin/batches/take` and
//! `/admin/moves/take` (their records), and the latency classes (`GET /admin/classes`, `PUT
//! /admin/buckets/NAME/class`, `PUT /admin/access-keys/KEY/class`) and where an object is (`GET
//! /admin/locate/BUCKET/KEY`), with the cluster secret.
//!
//! Owns: the HTTP calls, their time limits and their errors, which name the gateway and say when it
//! lacks the controller (a 404). Must not: retry a call (a failure ends the experiment with its
//! reason) or interpret records (the caller renames and summarises them).

use anyhow::{Context, bail};
use gateway::admin_routes::{DROPPED_HEADER, REFRESH_PROBES_HEADER};
use gateway::admin_secret::SECRET_HEADER;
use gateway::data::read::controller::PolicyState;
use model::{BatchRecord, MoveRecord, Record};
use policy::ecstore::access::AccessSettings;
use policy::{PolicyKind, PolicySettings};
use std::time::Duration;
/// Time limit of one admin call; a take moves up to a run's records.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest records body accepted (about 4 M records).
pub const MAX_RECORDS_BODY_BYTES: u64 = 1 << 30;

/// One gateway's admin endpoint.
#[derive(Clone, Debug)]
pub struct GatewayAdmin {
    /// `http://host:port` of the gateway's HTTP endpoint.
    pub base: String,
    /// The cluster secret.
    pub secret: String,
}

/// What a records take returned.
#[derive(Debug)]
pub struct Taken {
    /// The records, in completion order.
    pub records: Vec<Record>,
    /// Records the gateway dropped because its buffer was full.
    pub dropped: u64,
    /// Probes the gateway's lazy refreshes sent since the last take (in no record).
    pub refresh_probes: u64,
}

/// `text` as URL path segments: '/' kept, everything but unreserved characters escaped.
fn path_escaped(text: &str) -> String {
    const ESCAPED: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'/').remove(b'-').remove(b'_').remove(b'.').remove(b'~');
    percent_encoding::utf8_percent_encode(text, ESCAPED).to_string()
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().timeout_global(Some(ADMIN_TIMEOUT)).http_status_as_error(false).build().into()
}

/// A gateway without `GET /admin/locate` (a lowtail older than it): it answered 404 with no body.
#[derive(Debug)]
pub struct NoLocateEndpoint {
    /// The gateway's admin address.
    pub base: String,
}

impl std::fmt::Display for NoLocateEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: no locate endpoint (404)", self.base)
    }
}

impl std::error::Error for NoLocateEndpoint {}

impl GatewayAdmin {
    fn check(&self, what: &str, response: &mut ureq::http::Response<ureq::Body>) -> anyhow::Result<String> {
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_RECORDS_BODY_BYTES)
            .read_to_string()
            .with_context(|| format!("reading the answer of {what} at {}", self.base))?;
        match status {
            200 => Ok(body),
            404 => bail!(
                "the gateway at {} has no {what} endpoint (404): it was built without the read controller",
                self.base
            ),
            _ => bail!("{what} at {} answered {status}: {}", self.base, body.trim()),
        }
    }

    /// The policy the gateway runs now and its settings (`GET /admin/policy`).
    pub fn policy(&self) -> anyhow::Result<PolicyState> {
        let what = "GET /admin/policy";
        let mut response = agent()
            .get(format!("{}/admin/policy", self.base))
            .call()
            .with_context(|| format!("{what} at {}", self.base))?;
        let body = self.check(what, &mut response)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer a policy: {body}", self.base))
    }

    /// Switches the gateway to `policy` with `settings`, or with its current settings when `None`
    /// (`PUT /admin/policy`; the policy's tables start afresh). Returns the gateway's new state.
    pub fn set_policy(&self, policy: PolicyKind, settings: Option<&PolicySettings>) -> anyhow::Result<PolicyState> {
        let what = "PUT /admin/policy";
        let mut change = serde_json::json!({ "policy": policy.name() });
        if let Some(settings) = settings {
            change["settings"] = serde_json::to_value(settings)?;
        }
        let body = self.put_json(what, "/admin/policy", &change)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer a policy: {body}", self.base))
    }

    /// Seals the gateway's open packed stripes now (`POST /admin/packed/seal`), as its shutdown
    /// would: their objects are erasure-coded on return, not replicated.
    pub fn seal_open_stripes(&self) -> anyhow::Result<()> {
        let what = "POST /admin/packed/seal";
        let mut response = self.post_with_secret(what, "/admin/packed/seal")?;
        self.check(what, &mut response).map(|_| ())
    }

    /// Every bucket with its settings (`GET /admin/buckets`).
    pub fn buckets(&self) -> anyhow::Result<Vec<meta::BucketMeta>> {
        let what = "GET /admin/buckets";
        let mut response = agent()
            .get(format!("{}/admin/buckets", self.base))
            .call()
            .with_context(|| format!("{what} at {}", self.base))?;
        let body = self.check(what, &mut response)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer buckets: {body}", self.base))
    }

    /// The storage nodes holding `key`'s data units in `bucket`, in object order, distinct
    /// (`GET /admin/locate/BUCKET/KEY`, with the secret).
    pub fn locate(&self, bucket: &str, key: &str) -> anyhow::Result<Vec<u32>> {
        let what = "GET /admin/locate/BUCKET/KEY";
        let mut response = agent()
            .get(format!("{}/admin/locate/{}/{}", self.base, path_escaped(bucket), path_escaped(key)))
            .header(SECRET_HEADER, &self.secret)
            .call()
            .with_context(|| format!("{what} at {}", self.base))?;
        if response.status().as_u16() == 404 {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            if body.is_empty() {
                return Err(NoLocateEndpoint { base: self.base.clone() }.into());
            }
            bail!("{}: {body}", self.base);
        }
        let body = self.check(what, &mut response)?;
        let located: serde_json::Value =
            serde_json::from_str(&body).with_context(|| format!("{what} at {} answered no JSON: {body}", self.base))?;
        let nodes =
            located["nodes"].as_array().with_context(|| format!("{what} at {} named no nodes: {body}", self.base))?;
        Ok(nodes.iter().filter_map(serde_json::Value::as_u64).map(|node| node as u32).collect())
    }

    /// Sets when writes to `bucket` are acknowledged (`PUT /admin/buckets/NAME/write-ack`);
    /// returns the bucket as stored.
    pub fn set_write_ack(&self, bucket: &str, rule: meta::WriteAck) -> anyhow::Result<meta::BucketMeta> {
        let what = "PUT /admin/buckets/NAME/write-ack";
        let mut response = agent()
            .put(format!("{}/admin/buckets/{bucket}/write-ack", self.base))
            .header(SECRET_HEADER, &self.secret)
            .content_type("text/plain")
            .send(rule.name())
            .with_context(|| format!("{what} at {}", self.base))?;
        if response.status().as_u16() == 404 {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            bail!("{}: {}", self.base, if body.is_empty() { "no bucket endpoint (404)".into() } else { body });
        }
        let body = self.check(what, &mut response)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer a bucket: {body}", self.base))
    }

    /// Sets the latency class (1-based) of requests to `bucket`, or clears it (`None`), through
    /// `PUT /admin/buckets/NAME/class`; returns the bucket as stored.
    pub fn set_bucket_class(&self, bucket: &str, class: Option<u8>) -> anyhow::Result<meta::BucketMeta> {
        let what = "PUT /admin/buckets/NAME/class";
        let body = self.put_class(what, &format!("/admin/buckets/{bucket}/class"), class)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer a bucket: {body}", self.base))
    }

    /// Sets the best latency class (1-based) `access_key`'s requests may run in, or removes its
    /// entry (`None`), through `PUT /admin/access-keys/KEY/class`.
    pub fn set_key_class(&self, access_key: &str, class: Option<u8>) -> anyhow::Result<()> {
        self.put_class("PUT /admin/access-keys/KEY/class", &format!("/admin/access-keys/{access_key}/class"), class)
            .map(|_| ())
    }

    /// The classes, the access keys' entitlements and the per-class counters (`GET /admin/classes`).
    pub fn classes(&self) -> anyhow::Result<gateway::class_admin::ClassesView> {
        let what = "GET /admin/classes";
        let mut response = agent()
            .get(format!("{}/admin/classes", self.base))
            .call()
            .with_context(|| format!("{what} at {}", self.base))?;
        let body = self.check(what, &mut response)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer classes: {body}", self.base))
    }

    /// The cluster's default profile and every stored one with the buckets naming it
    /// (`GET /admin/profiles`).
    pub fn profiles(&self) -> anyhow::Result<gateway::profile_admin::ProfilesView> {
        let what = "GET /admin/profiles";
        let value = self.get_json(what, "/admin/profiles")?;
        serde_json::from_value(value).with_context(|| format!("{what} at {} did not answer profiles", self.base))
    }

    /// Stores profile `name` (`PUT /admin/profiles/NAME`); the gateway refuses one that cannot run,
    /// with the reason. Returns the profile as stored, every layer spelled out.
    pub fn set_profile(&self, name: &str, profile: &policy::Profile) -> anyhow::Result<policy::Profile> {
        let what = "PUT /admin/profiles/NAME";
        let body = serde_json::to_value(profile).expect("a profile serializes");
        let answer = self.put_json(what, &format!("/admin/profiles/{name}"), &body)?;
        serde_json::from_str(&answer)
            .with_context(|| format!("{what} at {} did not answer a profile: {answer}", self.base))
    }

    /// Deletes profile `name` (`DELETE /admin/profiles/NAME`); refused while a bucket names it.
    pub fn delete_profile(&self, name: &str) -> anyhow::Result<()> {
        let what = "DELETE /admin/profiles/NAME";
        let mut response = agent()
            .delete(format!("{}/admin/profiles/{name}", self.base))
            .header(SECRET_HEADER, &self.secret)
            .call()
            .with_context(|| format!("{what} at {}", self.base))?;
        self.check(what, &mut response).map(|_| ())
    }

    /// Names the profile serving `bucket` (or, with `class`, that class's requests to it), or the
    /// fallback (`None`: the cluster's default, or the bucket's for a class), through `PUT
    /// /admin/buckets/NAME/profile` or `PUT /admin/buckets/NAME/classes/N/profile`.
    pub fn set_bucket_profile(
        &self,
        bucket: &str,
        class: Option<u8>,
        profile: Option<&str>,
    ) -> anyhow::Result<meta::BucketMeta> {
        let what = "PUT /admin/buckets/NAME/profile";
        let path = match class {
            Some(class) => format!("/admin/buckets/{bucket}/classes/{class}/profile"),
            None => format!("/admin/buckets/{bucket}/profile"),
        };
        let mut response = agent()
            .put(format!("{}{path}", self.base))
            .header(SECRET_HEADER, &self.secret)
            .content_type("text/plain")
            .send(profile.unwrap_or("none"))
            .with_context(|| format!("{what} at {}", self.base))?;
        if response.status().as_u16() == 404 {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            bail!("{}: {}", self.base, if body.is_empty() { "no profile endpoint (404)".into() } else { body });
        }
        let body = self.check(what, &mut response)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer a bucket: {body}", self.base))
    }

    /// A `PUT` of a class (`N` or `none`) to `path` with the cluster secret; the answer's body. A
    /// 404 is the bucket's absence, not a missing endpoint.
    fn put_class(&self, what: &str, path: &str, class: Option<u8>) -> anyhow::Result<String> {
        let body = class.map_or_else(|| "none".to_string(), |class| class.to_string());
        let mut response = agent()
            .put(format!("{}{path}", self.base))
            .header(SECRET_HEADER, &self.secret)
            .content_type("text/plain")
            .send(body.as_str())
            .with_context(|| format!("{what} at {}", self.base))?;
        if response.status().as_u16() == 404 {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            bail!("{}: {}", self.base, if body.is_empty() { "no class endpoint (404)".into() } else { body });
        }
        self.check(what, &mut response)
    }

    /// A `PUT` of `body` (JSON) to `path` with the cluster secret; the answer's body.
    fn put_json(&self, what: &str, path: &str, body: &serde_json::Value) -> anyhow::Result<String> {
        let mut response = agent()
            .put(format!("{}{path}", self.base))
            .header(SECRET_HEADER, &self.secret)
            .content_type("application/json")
            .send(body.to_string().as_str())
            .with_context(|| format!("{what} at {}", self.base))?;
        self.check(what, &mut response)
    }

    /// A `GET` of `path` as JSON; `what` names the call in errors.
    fn get_json(&self, what: &str, path: &str) -> anyhow::Result<serde_json::Value> {
        let mut response =
            agent().get(format!("{}{path}", self.base)).call().with_context(|| format!("{what} at {}", self.base))?;
        let body = self.check(what, &mut response)?;
        serde_json::from_str(&body).with_context(|| format!("{what} at {} did not answer JSON: {body}", self.base))
    }

    /// The batch reads' access settings and the plan cache's numbers (`GET /admin/access`).
    pub fn access(&self) -> anyhow::Result<serde_json::Value> {
        self.get_json("GET /admin/access", "/admin/access")
    }

    /// What the mover has done (`GET /admin/mover`).
    pub fn mover(&self) -> anyhow::Result<serde_json::Value> {
        self.get_json("GET /admin/mover", "/admin/mover")
    }

    /// Switches the batch reads' access policy (`PUT /admin/access`; its cache starts empty).
    pub fn set_access(&self, settings: &AccessSettings) -> anyhow::Result<()> {
        self.put_json("PUT /admin/access", "/admin/access", &serde_json::to_value(settings)?).map(|_| ())
    }

    /// How units that must be rebuilt are rebuilt (`GET /admin/reconstruct`).
    pub fn reconstruct(&self) -> anyhow::Result<serde_json::Value> {
        self.get_json("GET /admin/reconstruct", "/admin/reconstruct")
    }

    /// Switches how units that must be rebuilt are rebuilt (`PUT /admin/reconstruct`).
    pub fn set_reconstruct(&self, settings: &policy::reconstruct::ReconstructSettings) -> anyhow::Result<()> {
        self.put_json("PUT /admin/reconstruct", "/admin/reconstruct", &serde_json::to_value(settings)?).map(|_| ())
    }

    /// Reshapes the gateway's emulated downlink (`PUT /admin/ingress`).
    pub fn set_ingress(&self, shape: &node::link::LinkShape) -> anyhow::Result<()> {
        self.put_json("PUT /admin/ingress", "/admin/ingress", &serde_json::to_value(shape)?).map(|_| ())
    }

    /// Switches EC-Store's mover on or off (`PUT /admin/mover`).
    pub fn set_mover(&self, enabled: bool) -> anyhow::Result<()> {
        self.put_json("PUT /admin/mover", "/admin/mover", &serde_json::json!({ "enabled": enabled })).map(|_| ())
    }

    /// Takes the batch records the gateway holds (`POST /admin/batches/take`).
    pub fn take_batches(&self) -> anyhow::Result<Vec<BatchRecord>> {
        self.take_lines("POST /admin/batches/take", "/admin/batches/take")
    }

    /// Takes the mover's move records (`POST /admin/moves/take`).
    pub fn take_moves(&self) -> anyhow::Result<Vec<MoveRecord>> {
        self.take_lines("POST /admin/moves/take", "/admin/moves/take")
    }

    fn take_lines<T: serde::de::DeserializeOwned>(&self, what: &str, path: &str) -> anyhow::Result<Vec<T>> {
        let mut response = self.post_with_secret(what, path)?;
        let body = self.check(what, &mut response)?;
        parse_lines(&body).with_context(|| format!("{what} at {}", self.base))
    }

    /// An empty `POST` of `path` with the cluster secret; `what` names the call in errors.
    fn post_with_secret(&self, what: &str, path: &str) -> anyhow::Result<ureq::http::Response<ureq::Body>> {
        agent()
            .post(format!("{}{path}", self.base))
            .header(SECRET_HEADER, &self.secret)
            .send_empty()
            .with_context(|| format!("{what} at {}", self.base))
    }

    /// Takes the records the gateway holds (`POST /admin/records/take`), emptying its buffer.
    pub fn take_records(&self) -> anyhow::Result<Taken> {
        let what = "POST /admin/records/take";
        let mut response = self.post_with_secret(what, "/admin/records/take")?;
        let count = |name: &str| -> anyhow::Result<u64> {
            match response.headers().get(name) {
                Some(value) => value
                    .to_str()
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .with_context(|| format!("{what} at {}: a malformed {name} header", self.base)),
                None => Ok(0),
            }
        };
        let (dropped, refresh_probes) = (count(DROPPED_HEADER)?, count(REFRESH_PROBES_HEADER)?);
        let body = self.check(what, &mut response)?;
        let records = parse_records(&body).with_context(|| format!("{what} at {}", self.base))?;
        Ok(Taken { records, dropped, refresh_probes })
    }
}

/// Records as JSON lines (blank lines skipped); an error names the line.
pub fn parse_records(text: &str) -> anyhow::Result<Vec<Record>> {
    parse_lines(text)
}

/// Values as JSON lines (blank lines skipped); an error names the line.
fn parse_lines<T: serde::de::DeserializeOwned>(text: &str) -> anyhow::Result<Vec<T>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| serde_json::from_str(line).with_context(|| format!("record line {}", number + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_parse_and_a_bad_line_is_named() {
        use model::{
            FrontendId, NodeId, ObjectId, Outcome, PartitionId, RequestId, RequestRecord, TaskRecord, TaskRole,
        };
        let record = Record {
            request: RequestRecord {
                request: RequestId(3),
                frontend: FrontendId(1),
                object: ObjectId(9),
                partition: PartitionId(4),
                bytes: 100,
                arrival_ns: 1,
                decision_start_ns: 2,
                decision_end_ns: 3,
                completion_ns: 9,
                probes: 2,
                probe_wait_ns: 1,
                decision_cpu_ns: 1,
                degraded: false,
                timed_out: false,
                outcome: Outcome::Ok,
                class: 0,
                latency_class: 0,
            },
            tasks: vec![TaskRecord {
                node: NodeId(2),
                unit: 1,
                role: TaskRole::Normal,
                cancelled: false,
                cancel_ns: model::NEVER,
                failed: false,
                bytes: 100,
                enqueue_ns: 4,
                start_ns: 5,
                finish_ns: 8,
            }],
            layers: None,
        };
        let line = serde_json::to_string(&record).unwrap();
        let records = parse_records(&format!("{line}\n\n{line}\n")).unwrap();
        assert_eq!(records, vec![record.clone(), record]);
        let error = format!("{:#}", parse_records(&format!("{line}\nnot json\n")).unwrap_err());
        assert!(error.contains("record line 2"), "{error}");
    }

    #[test]
    fn an_unreachable_gateway_is_an_error_naming_it() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let admin = GatewayAdmin { base: format!("http://{closed}"), secret: "s".into() };
        let error = format!("{:#}", admin.policy().unwrap_err());
        assert!(error.contains(&closed.to_string()), "{error}");
    }

    /// Answers each of `answers` (status line and body) to one request, in turn.
    fn serve(answers: Vec<(&'static str, &'static str)>) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for (status, body) in answers {
                let (mut stream, _) = listener.accept().unwrap();
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes())).unwrap();
            }
        });
        format!("http://{address}")
    }

    #[test]
    fn a_gateway_without_the_locate_endpoint_is_told_apart_from_a_missing_object() {
        let base = serve(vec![("404 Not Found", ""), ("404 Not Found", "no such key k in bucket b")]);
        let admin = GatewayAdmin { base, secret: "s".into() };
        let old = admin.locate("b", "k").unwrap_err();
        assert!(old.downcast_ref::<NoLocateEndpoint>().is_some(), "{old:#}");
        let missing = admin.locate("b", "k").unwrap_err();
        assert!(missing.downcast_ref::<NoLocateEndpoint>().is_none(), "{missing:#}");
        assert!(format!("{missing:#}").contains("no such key"), "{missing:#}");
    }
}
