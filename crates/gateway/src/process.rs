//! One gateway process: its configuration (TOML, documented defaults), the metadata backend it
//! opens, the erasure-coded data path with membership and repair, the S3 server, and an HTTP
//! endpoint with Prometheus metrics (`GET /metrics`) and the cluster status (`GET /admin/status`,
//! JSON, what `lowtail admin status` prints), with the admin routes beside it (the classes' in
//! `class_admin`).
//!
//! Must not: handle S3 requests or move data itself; it wires the layers that do and stops them in
//! order (S3 first, so no request is cut off mid-write; then background services).

use crate::admin_routes::{
    access_routes, admin_routes, bucket_routes, ingress_routes, locate_routes, mover_routes, reconstruct_routes,
};
use crate::class_admin::ClassAdmin;
use crate::classes::{ClassTable, ClassesConfig, ClassesReport};
use crate::data::cluster::membership::BackgroundTask;
use crate::data::objects::delayed::{DelayedReleases, ReleaseStatus};
use crate::data::objects::erasure::DataClasses;
use crate::data::objects::erasure::{ErasureData, RunningData};
use crate::data::objects::packed::{PackedStatus, Packer};
use crate::data::read::controller::{Controller, ControllerConfig, PolicyState};
use crate::data::services::orphans::{OrphanCollector, OrphanStatus};
use crate::data::services::repair::{RepairService, RepairStatus};
use crate::data::write::pending::{PendingStatus, PendingWrites};
use crate::data::{DataConfig, ObjectData};
use crate::profile_admin::ProfileAdmin;
use crate::profiles::{GatewayTarget, ProfileDirectory};
use crate::s3::abandoned_uploads::UploadExpiry;
use crate::s3::{S3Options, build_service, serve};
use crate::stripe_gc::{StripeCollector, StripeGcStatus};
use meta::{MetaStore, NodeInfo};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// An S3 access key pair.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// Access key id.
    pub access_key: String,
    /// Secret access key.
    pub secret_key: String,
    /// The best latency class (1-based, `[classes]`) the key's requests may run in; absent =
    /// `classes.default_class`. An entry in the metadata store's table (`lowtail admin class key`)
    /// overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<u8>,
}

/// Where the metadata lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "lowercase", deny_unknown_fields)]
pub enum MetaConfig {
    /// The embedded store (redb) in a directory: one gateway, nothing to install.
    Embedded {
        /// Directory of the database file.
        dir: PathBuf,
        /// Most memory the store caches pages in. Default 16 MiB (bounds the gateway's memory
        /// whatever the metadata's size; the OS page cache holds the file besides).
        #[serde(default = "default_cache_bytes")]
        cache_bytes: usize,
    },
    /// etcd, shared by several gateways.
    Etcd {
        /// Client URLs, e.g. `http://127.0.0.1:2379`.
        endpoints: Vec<String>,
        /// Key prefix of this cluster.
        prefix: String,
    },
}

impl Default for MetaConfig {
    fn default() -> Self {
        MetaConfig::Embedded { dir: PathBuf::from("lowtail-meta"), cache_bytes: default_cache_bytes() }
    }
}

fn default_cache_bytes() -> usize {
    meta::DEFAULT_CACHE_BYTES
}

/// Everything a gateway is started with.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// S3 endpoint address. Default `127.0.0.1:9000`.
    pub s3_listen: SocketAddr,
    /// Address of `GET /metrics` and `GET /admin/status`; absent = no endpoint.
    pub http_listen: Option<SocketAddr>,
    /// Where to write the bound addresses as JSON (`{"s3_addr": .., "http_addr": ..}`) once every
    /// listener is bound, so that a gateway told to listen on port 0 can be found without racing
    /// another process for a port picked in advance. Absent = not written.
    pub address_file: Option<PathBuf>,
    /// Accepted S3 key pairs (at least one).
    pub credentials: Vec<Credential>,
    /// Region buckets report. Default `us-east-1`.
    pub region: String,
    /// Largest PutObject body or upload part, bytes. Default 5 GiB, S3's single-PUT limit (bodies
    /// stream into stripes as they arrive, so this costs no gateway memory).
    pub max_object_bytes: u64,
    /// How long a request body (PutObject, UploadPart) may go without a byte before the request
    /// fails with RequestTimeout (400) and nothing of it is kept. Default 20 000 ms.
    pub body_idle_timeout_ms: u64,
    /// Multipart uploads initiated longer ago than this are aborted and their parts deleted, in every
    /// bucket (S3's `AbortIncompleteMultipartUpload` lifecycle rule). Default 604 800 (7 days); 0 = never.
    pub abort_incomplete_uploads_after_s: u64,
    /// How long the first GET carrying `x-lowtail-batch: <id>;n=<N>` waits for the other N − 1 of
    /// its batch before they are read together (docs/s3.md, "Batch reads"): what a hinted batch may
    /// add to its latency at most. Default 2 ms; 1 to 1000.
    pub batch_window_ms: u64,
    /// Whole-object GETs of one access key less than this apart are taken as one request of
    /// several objects, for EC-Store's mover statistics (docs/lab/ecstore.md). Default 20 ms; 0 follows
    /// none.
    pub coaccess_gap_ms: u64,
    /// Metadata backend. Default: embedded in `lowtail-meta`.
    pub meta: MetaConfig,
    /// The data path: code, unit size, timeouts, membership, repair, cluster secret.
    pub data: DataConfig,
    /// The read controller: the policy reads follow, this gateway's frontend number, records.
    pub controller: ControllerConfig,
    /// The latency classes requests run in and how the storage nodes serve them (docs/classes.md).
    /// Default: one class, first come first served (no change).
    pub classes: ClassesConfig,
    /// Copies of the metadata store written to the storage nodes (docs/durability.md). Default:
    /// one every 5 minutes, the newest 2 kept.
    pub meta_snapshots: crate::meta_snapshot::MetaSnapshotConfig,
    /// Named profiles (`[profiles.NAME]`, docs/profiles.md): stored in the metadata store at start,
    /// each replacing a stored one of its name, once checked against this gateway. Buckets name
    /// them with `lowtail admin bucket profile`. Default: none.
    pub profiles: std::collections::BTreeMap<String, policy::Profile>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            s3_listen: SocketAddr::from(([127, 0, 0, 1], 9000)),
            http_listen: None,
            address_file: None,
            credentials: Vec::new(),
            region: "us-east-1".to_string(),
            max_object_bytes: crate::s3::DEFAULT_MAX_OBJECT_BYTES,
            body_idle_timeout_ms: crate::s3::DEFAULT_BODY_IDLE_TIMEOUT_MS,
            abort_incomplete_uploads_after_s: crate::s3::abandoned_uploads::DEFAULT_ABORT_AFTER_S,
            batch_window_ms: crate::s3::DEFAULT_BATCH_WINDOW_MS,
            coaccess_gap_ms: crate::s3::DEFAULT_COACCESS_GAP_MS,
            meta: MetaConfig::default(),
            data: DataConfig::default(),
            controller: ControllerConfig::default(),
            classes: ClassesConfig::default(),
            meta_snapshots: crate::meta_snapshot::MetaSnapshotConfig::default(),
            profiles: std::collections::BTreeMap::new(),
        }
    }
}

impl GatewayConfig {
    /// Reads a TOML file; missing fields take their defaults, unknown ones are refused.
    pub fn from_toml_file(path: &std::path::Path) -> anyhow::Result<GatewayConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read gateway config {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("gateway config {}: {e}", path.display()))
    }

    /// Checks what can be checked before anything starts.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.credentials.is_empty(), "gateway config: at least one S3 credential is needed");
        for credential in &self.credentials {
            anyhow::ensure!(
                !credential.access_key.is_empty() && credential.secret_key.len() >= 8,
                "gateway config: access keys must be non-empty and secret keys at least 8 characters"
            );
        }
        anyhow::ensure!(self.max_object_bytes > 0, "gateway config: max_object_bytes must be positive");
        anyhow::ensure!(self.body_idle_timeout_ms > 0, "gateway config: body_idle_timeout_ms must be positive");
        anyhow::ensure!(
            (1..=1000).contains(&self.batch_window_ms),
            "gateway config: batch_window_ms must be 1 to 1000"
        );
        anyhow::ensure!(!self.data.cluster_secret.is_empty(), "gateway config: data.cluster_secret must be set");
        self.meta_snapshots.validate().map_err(|why| anyhow::anyhow!("gateway config: {why}"))?;
        // Two gateways with one name would seal each other's open packing stripes.
        anyhow::ensure!(
            !matches!(self.meta, MetaConfig::Etcd { .. }) || self.data.gateway_id.is_some(),
            "gateway config: data.gateway_id must be set (unique per gateway) when gateways share etcd"
        );
        self.validate_classes()
    }

    /// The `[classes]` section, and every credential's class against it.
    fn validate_classes(&self) -> anyhow::Result<()> {
        self.classes.validate().map_err(|why| anyhow::anyhow!("gateway config: {why}"))?;
        for credential in &self.credentials {
            if let Some(class) = credential.class {
                anyhow::ensure!(
                    self.classes.runs(class),
                    "gateway config: credential {} has class {class}; the gateway runs classes 1 to {}",
                    credential.access_key,
                    self.classes.count()
                );
            }
        }
        Ok(())
    }

    /// What this gateway checks a profile against: its code, admission slots, nodes and classes.
    pub fn profile_target(&self) -> anyhow::Result<GatewayTarget> {
        let code = self.data.code_spec().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(GatewayTarget {
            layout: model::CodeLayout::new(code).map_err(|e| anyhow::anyhow!("gateway config: code: {e}"))?,
            slots: self.data.admission.slots.map(|slots| u32::try_from(slots).unwrap_or(u32::MAX)),
            has_nodes: self.data.backend.is_none(),
            classes: self.classes.count(),
        })
    }

    /// The cluster's default profile: the `[controller] policy` preset with `[data.reconstruct]`'s
    /// kind.
    pub fn default_profile(&self) -> policy::Profile {
        policy::Profile {
            reconstruction: self.data.reconstruct.kind,
            ..policy::Profile::preset(self.controller.policy)
        }
    }

    /// The run-time table of the configured classes, with the credentials' entitlements.
    pub fn class_table(&self) -> ClassTable {
        let configured = self
            .credentials
            .iter()
            .filter_map(|credential| credential.class.map(|class| (credential.access_key.clone(), class)));
        ClassTable::new(self.classes.clone(), configured)
    }
}

/// Opens the configured metadata backend.
pub async fn open_meta(config: &MetaConfig) -> anyhow::Result<Arc<dyn MetaStore>> {
    Ok(match config {
        MetaConfig::Embedded { dir, cache_bytes } => {
            let store = Arc::new(
                meta::RedbStore::open_with_cache(dir, *cache_bytes)
                    .map_err(|e| anyhow::anyhow!("cannot open the metadata store in {}: {e}", dir.display()))?,
            );
            let damage = store.damage();
            if damage.damaged_records > 0 {
                tracing::error!(
                    damaged = damage.damaged_records,
                    keys = ?damage.keys,
                    doubtful = ?damage.doubtful,
                    "the metadata store has damaged records: reads of them, and lookups they might hide, answer \
                     500 until it is rebuilt (`lowtail admin meta rebuild`, docs/durability.md)"
                );
            }
            publish_meta_cache_bytes(Arc::downgrade(&store));
            store
        }
        MetaConfig::Etcd { endpoints, prefix } => Arc::new(
            meta::EtcdStore::connect(endpoints, prefix)
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to etcd at {endpoints:?}: {e}"))?,
        ),
    })
}

/// How often the metadata cache's size is published.
const META_CACHE_GAUGE_INTERVAL: Duration = Duration::from_secs(5);

/// Sets `lowtail_gateway_meta_cache_bytes` to the embedded store's page-cache size every
/// [`META_CACHE_GAUGE_INTERVAL`] while the store lives: the largest bounded part of a gateway's
/// memory, so an operator can tell it from growth.
fn publish_meta_cache_bytes(store: std::sync::Weak<meta::RedbStore>) {
    tokio::spawn(async move {
        while let Some(store) = store.upgrade() {
            // Looked up each time: the store opens before the metrics recorder is installed, and a
            // handle taken then would feed no recorder.
            metrics::gauge!("lowtail_gateway_meta_cache_bytes").set(store.cache_used_bytes() as f64);
            drop(store);
            tokio::time::sleep(META_CACHE_GAUGE_INTERVAL).await;
        }
    });
}

/// The cluster as `GET /admin/status` reports it.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterStatus {
    /// Every registered node with its state.
    pub nodes: Vec<NodeInfo>,
    /// Repair progress.
    pub repair: RepairStatus,
    /// Orphan collection so far.
    pub orphans: OrphanStatus,
    /// Unreferenced-stripe collection so far.
    pub stripe_gc: StripeGcStatus,
    /// Released stripes waiting out `orphans.release_delay_ms`, and those deleted after it.
    pub releases: ReleaseStatus,
    /// The packer's open stripe and pending seals.
    pub packed: PackedStatus,
    /// The read policy the controller runs.
    pub policy: PolicyState,
    /// This gateway's early-acknowledged writes still landing, and their totals.
    pub pending: PendingStatus,
    /// The latency classes and what this gateway served in each.
    pub classes: ClassesReport,
    /// The nodes' data directories: checks under way, refusals, the last check of each node.
    pub directories: crate::data::cluster::membership::DirectoryStatus,
    /// Damaged metadata records found (on open and by reads since).
    pub meta_damage: meta::integrity::DamageReport,
    /// The metadata snapshots on the nodes, oldest first (`meta_snapshot`).
    pub meta_snapshots: Vec<crate::meta_snapshot::SnapshotRecord>,
}

/// Everything [`ClusterStatus`] is read from; one copy serves `RunningGateway::status` and the
/// `GET /admin/status` route.
#[derive(Clone)]
struct StatusSources {
    meta: Arc<dyn MetaStore>,
    repair: Arc<RepairService>,
    orphans: Arc<OrphanCollector>,
    stripe_gc: Arc<StripeCollector>,
    releases: Arc<DelayedReleases>,
    packer: Arc<Packer>,
    controller: Arc<Controller>,
    pending: Arc<PendingWrites>,
    classes: Arc<ClassTable>,
    membership: Arc<crate::data::cluster::membership::Membership>,
}

impl StatusSources {
    async fn status(&self) -> Result<ClusterStatus, meta::MetaError> {
        Ok(ClusterStatus {
            nodes: self.meta.list_nodes().await?,
            repair: self.repair.status(),
            orphans: self.orphans.status(),
            stripe_gc: self.stripe_gc.status(),
            releases: self.releases.status(),
            packed: self.packer.status().await,
            policy: self.controller.policy(),
            pending: self.pending.status(),
            classes: self.classes.report(),
            directories: self.membership.directory_status(),
            meta_damage: self.meta.damage(),
            meta_snapshots: crate::meta_snapshot::recorded(self.meta.as_ref()).await?,
        })
    }
}

/// A gateway that is serving.
pub struct RunningGateway {
    s3_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    data: RunningData,
    controller: Arc<Controller>,
    status: StatusSources,
    stripe_gc_task: Option<BackgroundTask>,
    /// Checks what references the stripes repair finds unreadable.
    unreadable_task: BackgroundTask,
    snapshot_task: Option<BackgroundTask>,
    /// Rereads the profiles and the buckets' choices.
    profile_task: BackgroundTask,
    upload_expiry_task: Option<BackgroundTask>,
    stop_s3: oneshot::Sender<()>,
    s3_server: JoinHandle<()>,
    stop_http: Option<oneshot::Sender<()>>,
    http_server: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningGateway {
    /// The S3 endpoint's bound address.
    pub fn s3_addr(&self) -> SocketAddr {
        self.s3_addr
    }

    /// The metrics / admin endpoint's bound address, when configured.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The read controller.
    pub fn controller(&self) -> &Arc<Controller> {
        &self.controller
    }

    /// The cluster's state now.
    pub async fn status(&self) -> anyhow::Result<ClusterStatus> {
        self.status.status().await.map_err(|e| anyhow::anyhow!("listing nodes: {e}"))
    }

    /// Stops the S3 server (letting in-flight requests finish), then membership and repair.
    pub async fn shutdown(self) {
        let _ = self.stop_s3.send(());
        if let Err(error) = self.s3_server.await {
            tracing::warn!(%error, "S3 server task failed");
        }
        if let Some(stop) = self.stop_http {
            let _ = stop.send(());
        }
        if let Some(server) = self.http_server {
            let _ = server.await;
        }
        let tasks = [
            self.stripe_gc_task,
            self.upload_expiry_task,
            self.snapshot_task,
            Some(self.unreadable_task),
            Some(self.profile_task),
        ];
        for task in tasks.into_iter().flatten() {
            task.shutdown().await;
        }
        self.data.shutdown().await;
    }
}

/// The profile directory of a gateway starting with `config`: its `[profiles.NAME]` checked and
/// stored, then everything stored read once, so the first request is served by its bucket's profile.
async fn start_profiles(config: &GatewayConfig, meta: &Arc<dyn MetaStore>) -> anyhow::Result<Arc<ProfileDirectory>> {
    let directory =
        Arc::new(ProfileDirectory::new(Arc::clone(meta), config.profile_target()?, config.default_profile()));
    for (name, profile) in &config.profiles {
        directory.check(profile).map_err(|why| anyhow::anyhow!("gateway config: [profiles.{name}]: {why}"))?;
        let layers = serde_json::to_string(profile).expect("a profile serializes");
        meta.put_profile(meta::StoredProfile { name: name.clone(), layers })
            .await
            .map_err(|e| anyhow::anyhow!("gateway config: [profiles.{name}]: {e}"))?;
    }
    directory.refresh().await.map_err(|e| anyhow::anyhow!("cannot read the profiles: {e}"))?;
    Ok(directory)
}

/// Starts a gateway over an open metadata store: data path (with membership and repair), S3
/// server, and the HTTP endpoint. Returns once every listener is bound.
pub async fn start(config: GatewayConfig, meta: Arc<dyn MetaStore>) -> anyhow::Result<RunningGateway> {
    config.validate()?;
    let classes = Arc::new(config.class_table());
    let mut data = ErasureData::start_classed(config.data.clone(), Arc::clone(&meta), data_classes(&classes))
        .await
        .map_err(|e| anyhow::anyhow!("cannot start the data path: {e}"))?;
    let controller =
        data.start_controller(&config.controller).map_err(|e| anyhow::anyhow!("cannot start the controller: {e}"))?;
    let stripe_gc = Arc::new(StripeCollector::new(Arc::clone(&meta), data.data.clone(), config.data.orphans.clone()));
    let stripe_gc_task = Arc::clone(&stripe_gc).spawn();
    let unreadable_task = Arc::clone(&stripe_gc).spawn_unreadable_check(Arc::clone(&data.repair));
    let sole_gateway = matches!(config.meta, MetaConfig::Embedded { .. });
    let snapshots = crate::meta_snapshot::MetaSnapshots::new(
        Arc::clone(&meta),
        data.data.clone(),
        config.meta_snapshots.clone(),
        sole_gateway,
    );
    // Backend mode has no nodes to hold snapshots (its backend keeps the units).
    let snapshot_task = if data.data.io().backend().is_none() { Arc::new(snapshots).spawn() } else { None };
    let status = StatusSources {
        meta: Arc::clone(&meta),
        repair: Arc::clone(&data.repair),
        orphans: Arc::clone(&data.orphans),
        stripe_gc,
        releases: Arc::clone(data.data.delayed_releases()),
        packer: Arc::clone(data.data.packer()),
        controller: Arc::clone(&controller),
        pending: Arc::clone(data.data.pending()),
        classes: Arc::clone(&classes),
        membership: Arc::clone(&data.membership),
    };
    let profiles = start_profiles(&config, &meta).await?;
    let profile_task = {
        let directory = Arc::clone(&profiles);
        BackgroundTask::spawn("profiles", move |stop| directory.run_refresh(stop))
    };
    let object_data: Arc<dyn ObjectData> = Arc::new(data.data.clone());
    let credentials = config.credentials.iter().map(|c| (c.access_key.clone(), c.secret_key.clone())).collect();
    let class_admin = ClassAdmin {
        meta: Arc::clone(&meta),
        table: Arc::clone(&classes),
        membership: Arc::clone(&data.membership),
        secret: config.data.cluster_secret.clone(),
    };
    let options = S3Options {
        max_object_bytes: config.max_object_bytes,
        region: config.region.clone(),
        body_idle_timeout: std::time::Duration::from_millis(config.body_idle_timeout_ms),
        batch_window: std::time::Duration::from_millis(config.batch_window_ms),
        coaccess_gap: (config.coaccess_gap_ms > 0).then(|| std::time::Duration::from_millis(config.coaccess_gap_ms)),
        classes,
        profiles: Some(Arc::clone(&profiles)),
        ..S3Options::default()
    };
    let upload_expiry_task =
        UploadExpiry::new(Arc::clone(&meta), Arc::clone(&object_data), config.abort_incomplete_uploads_after_s)
            .map(UploadExpiry::spawn);
    let service = build_service(Arc::clone(&meta), object_data, credentials, options)?;
    let s3_listener = TcpListener::bind(config.s3_listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for S3 on {}: {e}", config.s3_listen))?;
    let s3_addr = s3_listener.local_addr()?;
    let (stop_s3, stopped_s3) = oneshot::channel::<()>();
    let s3_server = tokio::spawn(serve(s3_listener, service, async {
        let _ = stopped_s3.await;
    }));

    let (mut stop_http, mut http_server, mut http_addr) = (None, None, None);
    if let Some(listen) = config.http_listen {
        let listener =
            TcpListener::bind(listen).await.map_err(|e| anyhow::anyhow!("cannot listen for HTTP on {listen}: {e}"))?;
        http_addr = Some(listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let status_sources = status.clone();
        let metrics = node::metrics::handle();
        let app = axum::Router::new()
            .route("/metrics", axum::routing::get(move || std::future::ready(metrics.render())))
            .route(
                "/admin/status",
                axum::routing::get(move || {
                    let sources = status_sources.clone();
                    async move {
                        sources
                            .status()
                            .await
                            .map(axum::Json)
                            .map_err(|error| (axum::http::StatusCode::SERVICE_UNAVAILABLE, error.to_string()))
                    }
                }),
            );
        let app = app
            .merge(admin_routes(
                Arc::clone(&controller),
                Arc::clone(data.data.packer()),
                config.data.cluster_secret.clone(),
            ))
            .merge(access_routes(Arc::clone(&controller), config.data.cluster_secret.clone()))
            .merge(reconstruct_routes(Arc::clone(data.data.io()), config.data.cluster_secret.clone()))
            .merge(ingress_routes(Arc::clone(data.data.io()), config.data.cluster_secret.clone()))
            .merge(mover_routes(data.mover.clone(), Arc::clone(&controller), config.data.cluster_secret.clone()))
            .merge(bucket_routes(Arc::clone(&meta), config.data.cluster_secret.clone()))
            .merge(locate_routes(Arc::clone(&meta), config.data.cluster_secret.clone()))
            .merge(class_admin.routes())
            .merge(
                ProfileAdmin {
                    meta: Arc::clone(&meta),
                    directory: Arc::clone(&profiles),
                    secret: config.data.cluster_secret.clone(),
                }
                .routes(),
            );
        http_server = Some(tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        }));
        stop_http = Some(stop);
    }
    if let Some(path) = &config.address_file {
        write_address_file(path, s3_addr, http_addr)?;
    }
    tracing::info!(%s3_addr, ?http_addr, code = %config.data.code, policy = %config.controller.policy, "gateway serving");
    Ok(RunningGateway {
        s3_addr,
        http_addr,
        data,
        controller,
        status,
        stripe_gc_task,
        unreadable_task,
        snapshot_task,
        profile_task,
        upload_expiry_task,
        stop_s3,
        s3_server,
        stop_http,
        http_server,
    })
}

/// What the data path needs of the classes: the background work's class and the nodes' scheduling.
fn data_classes(table: &ClassTable) -> DataClasses {
    DataClasses { background: table.background(), scheduling: table.node_scheduling() }
}

/// Writes the bound addresses atomically (temp file + rename), so a reader never sees half a file.
fn write_address_file(
    path: &std::path::Path,
    s3_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
) -> anyhow::Result<()> {
    let body = serde_json::json!({ "s3_addr": s3_addr, "http_addr": http_addr });
    let temp = path.with_extension("tmp");
    std::fs::write(&temp, format!("{body}\n")).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", temp.display()))?;
    std::fs::rename(&temp, path).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// Opens the metadata store, starts the gateway, serves until `shutdown` completes, then stops it.
pub async fn run(config: GatewayConfig, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let meta = open_meta(&config.meta).await?;
    let gateway = start(config, meta).await?;
    shutdown.await;
    gateway.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> GatewayConfig {
        let base = "[data]\ncluster_secret = \"s\"\n[[credentials]]\naccess_key = \"a\"\nsecret_key = \"secret-a1\"\n";
        toml::from_str(&format!("{base}{text}")).unwrap()
    }

    #[test]
    fn a_config_without_classes_runs_one_fcfs_class() {
        let config = parsed("");
        config.validate().unwrap();
        assert_eq!(config.classes, ClassesConfig::default());
        assert_eq!(config.class_table().config().count(), 1);
    }

    #[test]
    fn credentials_may_carry_a_class_the_gateway_runs() {
        let two = "[classes]\nclasses = [{ name = \"gold\", weight = 1.0, share = 0.7 }, \
                   { name = \"silver\", weight = 0.4, share = 0.3 }]\nscheduling = \"reserved\"\n";
        let classed = "[[credentials]]\naccess_key = \"b\"\nsecret_key = \"secret-b1\"\nclass = 2\n";
        let config = parsed(&format!("{classed}{two}"));
        config.validate().unwrap();
        let table = config.class_table();
        assert_eq!((table.configured("b"), table.configured("a")), (Some(2), None));
        assert_eq!(table.background(), node::ClassId(1));
        let beyond = parsed(&format!("{}{two}", classed.replace("class = 2", "class = 3")));
        let error = beyond.validate().unwrap_err().to_string();
        assert!(error.contains("credential b has class 3; the gateway runs classes 1 to 2"), "{error}");
        let bad = parsed("[classes]\nclasses = [{ name = \"x\", weight = 0.0 }]\n");
        assert!(bad.validate().unwrap_err().to_string().contains("gateway config: classes: class 1 (x) has weight"));
    }
}
