//! Compiles `proto/node.proto` into the tonic client and server. protoc comes from the
//! `protoc-bin-vendored` crate, so the build needs neither network nor a system protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: `set_var` is unsafe because another thread could read the environment at the same
    // time; this build script has no other thread.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto/node.proto");
    tonic_prost_build::configure().bytes(".lowtail.node.v1").compile_protos(&["proto/node.proto"], &["proto"])?;
    Ok(())
}
