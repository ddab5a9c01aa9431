//! `LowtailS3`: the S3 service's state (object metadata in a [`meta::MetaStore`], object bytes
//! in an [`ObjectData`], options, hint windows, GET sessions, latency classes), which every
//! operation family (`bucket`, `get`, `put`, `copy`, `delete`, `list`, `multipart`) takes; the
//! dispatch of `s3s::S3` onto those families is `dispatch`. Must not hold an operation's logic.

use std::sync::Arc;

use meta::MetaStore;

use super::S3Options;
use super::request_class::ClassResolver;
use crate::data::ObjectData;

/// The S3 service: S3 semantics over a metadata store and an object data store.
pub struct LowtailS3 {
    pub(super) meta: Arc<dyn MetaStore>,
    pub(super) data: Arc<dyn ObjectData>,
    pub(super) options: S3Options,
    /// The open windows of hinted GETs.
    pub(super) hints: Arc<super::batch_hint::HintWindows>,
    /// Plain GETs' sessions, for the mover's co-access statistics (`None`: not followed).
    pub(super) sessions: Option<Arc<super::coaccess::Sessions>>,
    /// The latency classes operations that move object bytes run in.
    pub(super) classes: ClassResolver,
}

impl std::fmt::Debug for LowtailS3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LowtailS3").field("options", &self.options).finish_non_exhaustive()
    }
}

impl LowtailS3 {
    /// A service storing metadata in `meta` and object bytes in `data`.
    pub fn new(meta: Arc<dyn MetaStore>, data: Arc<dyn ObjectData>, options: S3Options) -> Self {
        let hints = Arc::new(super::batch_hint::HintWindows::new(options.batch_window));
        let sessions = options.coaccess_gap.map(|gap| Arc::new(super::coaccess::Sessions::new(gap)));
        let classes = ClassResolver {
            meta: Arc::clone(&meta),
            table: Arc::clone(&options.classes),
            profiles: options.profiles.clone(),
        };
        LowtailS3 { meta, data, options, hints, sessions, classes }
    }
}
