//! The data path started: `ErasureData::start` builds it with its services (membership, repair,
//! the orphan collector, the packer's timer, pending writes, delayed releases, the mover) and
//! `RunningData` holds them, attaches the read controller and shuts everything down in order
//! (open packed stripes sealed first). Must not serve a request itself.

use super::{ErasureData, PACKER_TICK, SHUTDOWN_SEAL_TIMEOUT};
use crate::classes::{ClassId, ClassScheduling};
use crate::data::DataError;
use crate::data::cluster::class_shares::SharesPublisher;
use crate::data::cluster::membership::{BackgroundTask, Membership};
use crate::data::config::DataConfig;
use crate::data::objects::packed::Packer;
use crate::data::read::controller::{Controller, ControllerConfig};
use crate::data::services::mover::MoverService;
use crate::data::services::orphans::OrphanCollector;
use crate::data::services::repair::{RepairService, RepairStatus};
use meta::MetaStore;
use std::sync::Arc;

/// The packer's timer: seals its open stripe when old enough, retries failed seals.
pub(super) fn packer_ticks(packer: Arc<Packer>) -> BackgroundTask {
    BackgroundTask::spawn("packer", move |mut stop| async move {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(PACKER_TICK) => packer.tick().await,
            }
        }
    })
}

/// The data path with membership and repair running beside it (what `lowtail gateway` holds).
#[derive(Debug)]
pub struct RunningData {
    /// The data path (hand clones to the S3 layer).
    pub data: ErasureData,
    /// The failure detector.
    pub membership: Arc<Membership>,
    /// The repair service.
    pub repair: Arc<RepairService>,
    /// The orphan collector.
    pub orphans: Arc<OrphanCollector>,
    /// EC-Store's mover, once a controller is attached (over storage nodes).
    pub mover: Option<Arc<MoverService>>,
    tasks: Vec<BackgroundTask>,
}

impl RunningData {
    /// Attaches a read controller built from `config` (every data-unit read of a sealed stripe then
    /// follows its policy) and starts its lazy-refresh task. Once per data path.
    pub fn start_controller(&mut self, config: &ControllerConfig) -> Result<Arc<Controller>, DataError> {
        let admission = self.data.io.config().admission;
        let controller = Arc::new(Controller::with_admission(config, &self.data.code_name, admission)?);
        if self.data.io.backend().is_some() {
            controller.forbid_probing()?;
        }
        self.data.reads.attach_controller(Arc::clone(&controller))?;
        let (refresher, io) = (Arc::clone(&controller), Arc::clone(&self.data.io));
        // Over an S3 backend there are no nodes to tell class shares to.
        let shares = self
            .data
            .io
            .backend()
            .is_none()
            .then(|| Arc::new(SharesPublisher::new(self.data.io.config().gateway_id())));
        self.tasks
            .push(BackgroundTask::spawn("controller-refresh", move |stop| refresher.run_refresh(io, shares, stop)));
        if self.data.io.backend().is_none() {
            let (access, io) = (Arc::clone(&controller), Arc::clone(&self.data.io));
            self.tasks.push(BackgroundTask::spawn("controller-access", move |stop| access.run_access(io, stop)));
            let mover = Arc::new(MoverService::new(
                Arc::clone(&self.data.io),
                Arc::clone(&controller),
                Arc::clone(&self.repair),
                config.mover.clone(),
            ));
            self.tasks.push(Arc::clone(&mover).spawn());
            self.mover = Some(mover);
        }
        Ok(controller)
    }

    /// Repair progress, for `lowtail admin status`.
    pub fn repair_status(&self) -> RepairStatus {
        self.repair.status()
    }

    /// Stops membership, repair and the packer's timer, then seals the open stripes and waits for
    /// the units of early-acknowledged writes to land (both bounded: an open stripe left behind is
    /// sealed from its replicas by the next start, a pending unit is rebuilt by repair after its
    /// deadline).
    pub async fn shutdown(self) {
        for task in self.tasks {
            task.shutdown().await;
        }
        if let Err(error) = self.data.packer.flush(SHUTDOWN_SEAL_TIMEOUT).await {
            tracing::warn!(%error, "open stripes left to be sealed at the next start");
        }
        if !self.data.pending.drain(SHUTDOWN_SEAL_TIMEOUT).await {
            let left = self.data.pending.status().stripes_in_flight;
            tracing::warn!(
                stripes = left,
                "early-acknowledged stripes still landing: repair finishes them after their deadline"
            );
        }
    }
}

/// What the data path needs to know of the latency classes (`crate::classes`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataClasses {
    /// The class of node calls made outside any request: the worst class.
    pub background: ClassId,
    /// What membership tells every node to do with the classes.
    pub scheduling: ClassScheduling,
}

impl ErasureData {
    /// [`ErasureData::new`] plus the membership and repair background tasks, with one latency
    /// class served first come first served (the nodes' behaviour without classes).
    pub async fn start(config: DataConfig, meta: Arc<dyn MetaStore>) -> Result<RunningData, DataError> {
        Self::start_classed(config, meta, DataClasses::default()).await
    }

    /// [`ErasureData::start`] with `classes`: background work in their background class, and the
    /// nodes told their scheduling as membership finds them.
    pub async fn start_classed(
        config: DataConfig,
        meta: Arc<dyn MetaStore>,
        classes: DataClasses,
    ) -> Result<RunningData, DataError> {
        let membership_config = config.membership.clone();
        let repair_config = config.repair.clone();
        let orphan_config = config.orphans.clone();
        let data = Self::new(config, meta).await?;
        // Before any background work starts, so none of it runs in a better class.
        data.io.cluster().set_background_class(classes.background);
        match data.packer.recover().await {
            Ok(0) => {}
            Ok(stripes) => tracing::info!(stripes, "sealing open stripes left by the previous run"),
            Err(error) => tracing::warn!(%error, "open stripes of the previous run not recovered yet"),
        }
        let membership = Arc::new(Membership::new(Arc::clone(data.io.cluster()), membership_config));
        membership.set_class_scheduling(classes.scheduling);
        let repair = Arc::new(RepairService::new(Arc::clone(&data.io), repair_config));
        let orphans = Arc::new(OrphanCollector::new(Arc::clone(&data.io), orphan_config));
        let mut tasks = vec![Arc::clone(&repair).spawn()];
        // Over an S3 backend there are no nodes to probe, and nothing is packed: repair (of units
        // whose write or read failed) and the orphan collector (of keys no stripe records) run.
        if data.io.backend().is_none() {
            tasks.push(Arc::clone(&membership).spawn());
            tasks.push(packer_ticks(Arc::clone(&data.packer)));
        }
        tasks.extend(Arc::clone(&orphans).spawn());
        if !data.delayed.delay().is_zero() {
            let deleter = data.clone();
            tasks.push(BackgroundTask::spawn("release-delay", move |stop| deleter.delete_released(stop)));
        }
        Ok(RunningData { data, membership, repair, orphans, mover: None, tasks })
    }
}
