//! Objects over stripes: the erasure-coded `ObjectData` (`erasure`), small objects packed into
//! shared stripes (`packed`), batch reads of whole objects (`batch`), read holds and delayed
//! releases of overwritten stripes (`holds`, `delayed`), and the in-memory `ObjectData` for tests
//! of the S3 layer (`memory`). The top of the data path: it starts the services and calls every
//! folder below; nothing below calls it.

pub mod batch;
pub mod delayed;
pub mod erasure;
pub mod holds;
pub mod memory;
pub mod packed;
