//! The read of a data-unit range of a sealed stripe, the one way down the read path: the object
//! layer (`erasure`, `packed`) asks here; here the attached read controller plans it with its policy
//! and runs the plan through the execution core, or, without a controller, the robust read does.
//! Below are unit I/O (`stripe_io`) and the nodes; nothing below calls back up.
//!
//! Owns the attachment of the controller, the gateway's read timeout and its read task pool
//! (`admission`: every plan a read runs is admitted by it). Must not do unit I/O itself or decide
//! a plan.

pub mod admission;
pub mod controller;
pub mod executor;
pub mod node_dataflow;
pub mod plan;
pub mod range;
pub mod robust;
pub mod segmented;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use codec::ErasureCode;
use meta::StripeMeta;

use crate::data::DataError;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::read::admission::TaskPool;
use crate::data::read::controller::Controller;
use crate::data::read::range::RangeRead;

/// Data-unit range reads over `io`, planned by the controller once one is attached.
#[derive(Debug)]
pub struct Reads {
    io: Arc<StripeIo>,
    /// The read controller, once attached: reads then follow its policy.
    controller: OnceLock<Arc<Controller>>,
    /// Admission of the reads' plans to the gateway's task slots (`[data.admission]`); `None` when
    /// unbounded, since such a pool admits everything at once (as the simulator skips it too).
    pool: Option<TaskPool>,
}

impl Reads {
    /// Reads over `io`, robust until a controller is attached, admitted as `io`'s config says.
    pub fn new(io: Arc<StripeIo>) -> Reads {
        let settings = io.config().admission;
        let pool = settings.slots.map(|_| TaskPool::new(settings));
        Reads { io, controller: OnceLock::new(), pool }
    }

    /// The gateway's read task pool, when `[data.admission]` bounds it.
    pub fn pool(&self) -> Option<&TaskPool> {
        self.pool.as_ref()
    }

    /// Routes reads through `controller` from now on. Once only: a second controller is refused (it
    /// would split the records and the policy's state).
    pub fn attach_controller(&self, controller: Arc<Controller>) -> Result<(), DataError> {
        self.controller.set(controller).map_err(|_| DataError::Internal("a read controller is already attached".into()))
    }

    /// The attached read controller.
    pub fn controller(&self) -> Option<&Arc<Controller>> {
        self.controller.get()
    }

    /// How long a unit read may take before its recovery set is read beside it: the read policy's
    /// `normal_timeout_ms` (the attached controller's, switched live by `lowtail admin policy set`;
    /// the default policy settings' without a controller). The one read timeout of the gateway.
    pub fn read_timeout(&self) -> Duration {
        match self.controller.get() {
            Some(controller) => controller.read_timeout(),
            None => Duration::from_millis(policy::PolicySettings::default().normal_timeout_ms),
        }
    }

    /// Whether reads of several data units of one stripe row should be asked for together
    /// ([`Reads::read_units`]): the attached controller runs a row-reading policy (FAST CLOUD's).
    pub fn reads_rows(&self) -> bool {
        self.controller.get().is_some_and(|controller| controller.reads_rows())
    }

    /// Bytes `offset .. offset + length` of data unit `unit` of `stripe`, read through this
    /// gateway's pool.
    fn range_read<'a>(
        &'a self,
        nodes: &'a NodeMap,
        stripe: &'a StripeMeta,
        code: &'a dyn ErasureCode,
        unit: usize,
        offset: u64,
        length: u64,
    ) -> RangeRead<'a> {
        RangeRead { io: &self.io, nodes, stripe, code, unit, offset, length, admission: self.pool.as_ref() }
    }

    /// Whether the attached controller's policy wants the same range of `units` of `stripe` read
    /// as one row plan now (`hedged`, around a node it avoids; see [`Controller::read_units`]).
    pub fn wants_row(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        code: &dyn ErasureCode,
        units: std::ops::Range<usize>,
        offset: u64,
        length: u64,
    ) -> bool {
        let range = self.range_read(nodes, stripe, code, units.start, offset, length);
        self.controller.get().is_some_and(|controller| controller.wants_row(&range, &units))
    }

    /// Bytes `offset .. offset + length` of each data unit in `units` of sealed `stripe`: one
    /// plan for the row under a row-reading policy (see [`Controller::read_units`]), else each
    /// unit as [`Reads::read_range`] reads it.
    #[allow(clippy::too_many_arguments)]
    pub async fn read_units(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        code: &dyn ErasureCode,
        units: std::ops::Range<usize>,
        offset: u64,
        length: u64,
    ) -> Result<Vec<Bytes>, DataError> {
        let unit = units.start;
        let range = self.range_read(nodes, stripe, code, unit, offset, length);
        match self.controller.get() {
            Some(controller) => controller.read_units(range, units).await,
            None => {
                let each = units.map(|unit| self.read_range(nodes, stripe, code, unit, offset, length));
                futures_util::future::try_join_all(each).await
            }
        }
    }

    /// Bytes `offset .. offset + length` of data unit `unit` of sealed `stripe`: as the attached
    /// controller plans (see [`Controller::read`]), or by the robust read without one.
    pub async fn read_range(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        code: &dyn ErasureCode,
        unit: usize,
        offset: u64,
        length: u64,
    ) -> Result<Bytes, DataError> {
        let range = self.range_read(nodes, stripe, code, unit, offset, length);
        match self.controller.get() {
            Some(controller) => controller.read(range).await,
            None => robust::read(range, self.read_timeout().as_nanos() as u64).await.map(|(bytes, _rebuilt)| bytes),
        }
    }
}
