//! lowtail's measurement harness: what `lowtail bench ...` runs.
//!
//! Owns: the run protocol (calibrate, warm up, time several runs on the
//! thread CPU clock, report the median), aligned buffers, the codec
//! benchmark matrix with its memory ceiling and baseline, the S3 load
//! benchmark against lowtail and any S3 store (with the server CPU time per
//! operation), and the rendering of results as tables and JSON.
//!
//! Must not: print (the CLI decides where output goes), or report a figure
//! for output it has not verified.

pub mod aligned;
pub mod backend_bench;
pub mod byte_size;
pub mod ceiling;
pub mod codec_bench;
pub mod cpu_time;
pub mod engines;
pub mod host_cpu;
pub mod measure;
pub mod relaunch;
pub mod report;
pub mod s3_adversity;
pub mod s3_batch;
pub mod s3_bench;
pub mod s3_client;
pub mod s3_compare;
pub mod s3_phase;
pub mod s3_row;
pub mod s3_scenarios;
pub mod s3_target;
pub mod stats;

pub use aligned::AlignedBuf;
pub use byte_size::{format_byte_size, parse_byte_size};
pub use codec_bench::{CodecBenchConfig, CodecBenchReport, CodecRow, Op, run_codec_bench};
pub use measure::{Measurement, Timing, measure};
pub use s3_bench::{S3BenchConfig, S3BenchReport, S3Op, S3Row, run_s3_bench};
pub use s3_target::{TargetSource, TargetSpec};
