//! lowtail storage node.
/// Generated protobuf / tonic code.
#[allow(missing_docs)]
pub mod proto {
    tonic::include_proto!("lowtail.node.v1");
}
pub mod error;
pub mod model;
pub mod queue;
pub mod scheduler;
pub mod store;
