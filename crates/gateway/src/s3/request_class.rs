//! The latency class of an S3 request that moves object bytes (docs/classes.md): what it is
//! resolved from (the access key, the buckets it touches, its `x-lowtail-class` header), read
//! before the operation starts, and the S3 errors of a refusal (403 AccessDenied for a class better
//! than the key's entitlement, 400 InvalidArgument for a class the gateway does not run). Owns those
//! reads and that mapping; must not decide the class (`classes::resolve` does) or let an operation
//! start before its class is known, so a refused request reads and writes nothing.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::try_join_all;
use hyper::HeaderMap;
use hyper::header::HeaderValue;
use meta::{MetaError, MetaStore};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::errors::{from_meta, s3};
use crate::classes::{self, CLASS_HEADER, ClassInputs, ClassNumber, ClassRefusal, ClassTable};
use crate::profiles::{ActiveProfile, ProfileDirectory};

/// The access key a detour route verified, carried to the unauthenticated service it calls in
/// the request's extensions (which no client can set): the request arrives there unsigned.
#[derive(Clone, Debug)]
pub struct RoutedAccessKey(pub String);

/// What a request's class is resolved from, taken from the request before its operation runs.
#[derive(Clone, Debug, Default)]
pub struct ClassRequest {
    access_key: Option<String>,
    header: Option<HeaderValue>,
    buckets: Vec<String>,
}

impl ClassRequest {
    /// The class inputs of `req`, which touches `buckets`.
    pub fn of<T>(req: &S3Request<T>, buckets: &[&str]) -> ClassRequest {
        let signed = req.credentials.as_ref().map(|credentials| credentials.access_key.clone());
        let routed = req.extensions.get::<RoutedAccessKey>().map(|key| key.0.clone());
        ClassRequest::new(signed.or(routed), &req.headers, buckets)
    }

    /// The class inputs of a request signed with `access_key`, with `headers`, touching `buckets`.
    pub fn new(access_key: Option<String>, headers: &HeaderMap, buckets: &[&str]) -> ClassRequest {
        let header = headers.get(CLASS_HEADER).cloned();
        ClassRequest { access_key, header, buckets: buckets.iter().map(|bucket| bucket.to_string()).collect() }
    }
}

/// Resolves classes against one gateway's table and the metadata store, and the profile a request
/// runs under (its first bucket's: a copy's destination's).
#[derive(Clone)]
pub struct ClassResolver {
    /// Where the key's and the buckets' classes are read.
    pub meta: Arc<dyn MetaStore>,
    /// The classes this gateway runs.
    pub table: Arc<ClassTable>,
    /// Which profile serves which bucket; `None`: every bucket the cluster's default.
    pub profiles: Option<Arc<ProfileDirectory>>,
}

impl ClassResolver {
    /// The class `request` runs in, or the S3 error refusing it. With one class nothing is read:
    /// every entitlement and bucket class comes to class 1.
    pub async fn resolve(&self, request: &ClassRequest) -> S3Result<ClassNumber> {
        let config = self.table.config();
        let header = request.header.as_ref().map(HeaderValue::as_bytes);
        let mut inputs =
            ClassInputs { count: config.count(), default_class: config.default_class, header, ..Default::default() };
        if inputs.count > 1 {
            let key = request.access_key.as_deref();
            let (key_table, bucket) = tokio::try_join!(self.key_class(key), self.bucket_class(&request.buckets))?;
            inputs.key_table = key_table;
            inputs.key_config = key.and_then(|key| self.table.configured(key));
            inputs.bucket = bucket;
        }
        classes::resolve(&inputs).map_err(|refusal| self.refused(refusal))
    }

    /// Runs `work` in the class `request` resolves to, counting it there with the object bytes
    /// `moved` finds in its answer (or refusing it, and then `work` never starts).
    pub async fn run<T>(
        &self,
        request: &ClassRequest,
        moved: impl FnOnce(&S3Response<T>) -> u64,
        work: impl Future<Output = S3Result<S3Response<T>>>,
    ) -> S3Result<S3Response<T>> {
        let class = self.resolve(request).await?;
        let profile = self.profile(request, class);
        let started = Instant::now();
        let result = classes::scope(class.id(), crate::profiles::scope(profile, work)).await;
        let bytes = result.as_ref().map_or(0, moved);
        self.table.record(class, bytes, started.elapsed());
        result
    }

    /// The class the metadata store's table gives `access_key`.
    async fn key_class(&self, access_key: Option<&str>) -> S3Result<Option<u8>> {
        let Some(access_key) = access_key else { return Ok(None) };
        match self.meta.get_access_key_class(access_key).await {
            Ok(class) => Ok(class),
            // A key the table could not hold (a config may name any key) has no entry there.
            Err(MetaError::InvalidArgument(_)) => Ok(None),
            Err(error) => Err(from_meta(error)),
        }
    }

    /// The profile `request` runs under in `class`: its first bucket's for that class, `None` for
    /// the cluster's default.
    fn profile(&self, request: &ClassRequest, class: ClassNumber) -> Option<Arc<ActiveProfile>> {
        self.profiles.as_ref()?.for_request(request.buckets.first()?, class.get())
    }

    /// The worst class set on `buckets` (NoSuchBucket for a missing one): a bucket's own class, else
    /// its profile's.
    async fn bucket_class(&self, buckets: &[String]) -> S3Result<Option<u8>> {
        let read = try_join_all(buckets.iter().map(|bucket| self.meta.get_bucket(bucket))).await.map_err(from_meta)?;
        let profile_class = |bucket: &str| self.profiles.as_ref()?.for_bucket(bucket)?.profile.class;
        Ok(read.into_iter().filter_map(|bucket| bucket.class.or_else(|| profile_class(&bucket.name))).max())
    }

    /// The S3 error of `refusal`, counted.
    fn refused(&self, refusal: ClassRefusal) -> s3s::S3Error {
        self.table.refused(&refusal);
        let code = match refusal {
            ClassRefusal::AboveEntitlement { .. } => S3ErrorCode::AccessDenied,
            ClassRefusal::Unknown { .. } | ClassRefusal::Unparsable { .. } => S3ErrorCode::InvalidArgument,
        };
        s3(code, refusal.to_string())
    }
}

/// The bytes of an answer's `Content-Length` (0 when absent).
pub fn content_length(length: Option<i64>) -> u64 {
    length.and_then(|length| u64::try_from(length).ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::{ClassSpec, ClassesConfig};

    async fn resolver(dir: &std::path::Path) -> ClassResolver {
        let meta: Arc<dyn MetaStore> = Arc::new(meta::RedbStore::open(dir).unwrap());
        let bucket = |name: &str, class| meta::BucketMeta {
            versioning: Default::default(),
            tags: Default::default(),
            name: name.into(),
            created_ms: 0,
            region: None,
            owner: None,
            write_ack: meta::WriteAck::All,
            class,
            profile: None,
            class_profiles: Default::default(),
        };
        meta.create_bucket(bucket("plain", None)).await.unwrap();
        meta.create_bucket(bucket("slow", Some(2))).await.unwrap();
        meta.set_access_key_class("TABLED", Some(2)).await.unwrap();
        let class = |name: &str| ClassSpec { name: name.into(), weight: 1.0, share: None };
        let config = ClassesConfig { classes: vec![class("gold"), class("silver")], ..ClassesConfig::default() };
        let table = Arc::new(ClassTable::new(config, [("CONFIGURED".to_string(), 2)]));
        ClassResolver { meta, table, profiles: None }
    }

    fn request(key: &str, header: Option<&str>, buckets: &[&str]) -> ClassRequest {
        let mut headers = HeaderMap::new();
        if let Some(header) = header {
            headers.insert(CLASS_HEADER, header.parse().unwrap());
        }
        ClassRequest::new(Some(key.to_string()), &headers, buckets)
    }

    #[tokio::test]
    async fn classes_come_from_the_table_the_config_and_the_buckets() {
        let dir = tempfile::tempdir().unwrap();
        let resolver = resolver(dir.path()).await;
        let class = |key, header, buckets| {
            let resolver = resolver.clone();
            let request = request(key, header, buckets);
            async move { resolver.resolve(&request).await.map(ClassNumber::get).map_err(|e| e.code().clone()) }
        };
        assert_eq!(class("ANYONE", None, &["plain"]).await, Ok(1));
        assert_eq!(class("ANYONE", None, &["plain", "slow"]).await, Ok(2), "a copy takes the worse bucket");
        assert_eq!(class("TABLED", None, &["plain"]).await, Ok(2));
        assert_eq!(class("CONFIGURED", None, &["plain"]).await, Ok(2));
        assert_eq!(class("ANYONE", Some("2"), &["plain"]).await, Ok(2));
        assert_eq!(class("TABLED", Some("1"), &["plain"]).await, Err(S3ErrorCode::AccessDenied));
        assert_eq!(class("ANYONE", Some("9"), &["plain"]).await, Err(S3ErrorCode::InvalidArgument));
        assert_eq!(class("ANYONE", None, &["missing"]).await, Err(S3ErrorCode::NoSuchBucket));
        let report = resolver.table.report();
        assert_eq!((report.refused_denied, report.refused_invalid), (1, 1));
    }

    #[tokio::test]
    async fn a_refused_request_never_starts() {
        let dir = tempfile::tempdir().unwrap();
        let resolver = resolver(dir.path()).await;
        let started = std::sync::atomic::AtomicBool::new(false);
        let work = async {
            started.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(S3Response::new(7u64))
        };
        let refused = resolver.run(&request("TABLED", Some("1"), &["plain"]), |_| 0, work).await;
        assert!(refused.is_err());
        assert!(!started.load(std::sync::atomic::Ordering::SeqCst));
        let slow = request("ANYONE", None, &["slow"]);
        let answer = resolver.run(&slow, |_| 0, async { Ok(S3Response::new(classes::current())) }).await.unwrap();
        assert_eq!(answer.output, Some(crate::classes::ClassId(1)), "the work ran in the bucket's class");
    }

    #[tokio::test]
    async fn the_profile_is_chosen_for_the_class_the_request_resolves_to() {
        let dir = tempfile::tempdir().unwrap();
        let mut resolver = resolver(dir.path()).await;
        let layers = serde_json::to_string(&policy::Profile::default()).unwrap();
        resolver.meta.put_profile(meta::StoredProfile { name: "silver".into(), layers }).await.unwrap();
        resolver.meta.set_bucket_profile("plain", Some(2), Some("silver")).await.unwrap();
        let layout = model::CodeLayout::new("rs-6-3".parse().unwrap()).unwrap();
        let target = crate::profiles::GatewayTarget { layout, slots: None, has_nodes: true, classes: 2 };
        let directory = ProfileDirectory::new(Arc::clone(&resolver.meta), target, policy::Profile::default());
        directory.refresh().await.unwrap();
        resolver.profiles = Some(Arc::new(directory));
        let served = |header| {
            let (resolver, request) = (resolver.clone(), request("ANYONE", header, &["plain"]));
            let work = async { Ok(S3Response::new(crate::profiles::active().map(|active| active.name.clone()))) };
            async move { resolver.run(&request, |_| 0, work).await.unwrap().output }
        };
        assert_eq!(served(Some("2")).await, Some("silver".into()), "class 2 runs under its own profile");
        assert_eq!(served(None).await, None, "class 1 keeps the cluster's default");
    }
}
