//! Compiles `proto/node.proto` into the tonic client and server. protoc comes from the
//! `protoc-bin-vendored` crate, so the build needs neither network nor a system protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY (not unsafe in edition 2021 terms, but `set_var` is unsafe in edition 2024): build
    // scripts are single-threaded at this point, so no other thread reads the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto/node.proto");
    tonic_prost_build::configure().bytes(".lowtail.node.v1").compile_protos(&["proto/node.proto"], &["proto"])?;
    Ok(())
}
