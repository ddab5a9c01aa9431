//! `lowtail admin profile …` and `lowtail admin bucket profile`: the profiles a bucket composes
//! its request path from (docs/profiles.md). Owns the commands' arguments and what they print;
//! must not check a profile (the gateway does, against its own code, slots and classes, and says
//! why it refuses one).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use launcher::gateway_admin::GatewayAdmin;

use crate::{AdminPolicyTarget, policy_gateways, target_secret};

#[derive(Debug, Subcommand)]
pub(crate) enum AdminProfileCommand {
    /// Print the cluster's default profile and every stored profile with the buckets naming it.
    Show(AdminPolicyTarget),
    /// Store profile NAME (replacing one of that name): one policy per layer, each left out at its
    /// default. Refused, with the reason, when the cluster cannot run it.
    Set(AdminProfileSetArgs),
    /// Delete profile NAME (refused while a bucket names it).
    Delete(AdminProfileNameArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AdminProfileSetArgs {
    /// The profile's name (lowercase letters, digits, '-' and '_').
    #[arg(value_name = "NAME")]
    name: String,
    /// A TOML file with the profile's layers (the fields of a `[profiles.NAME]` table); the flags
    /// below override it.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Selection: normal, llf, lmlf, llf-pw2, lmlf-pw2, lmlf-lazy, opt-lazy, hedged.
    #[arg(long, value_name = "POLICY")]
    selection: Option<String>,
    /// Redundancy: k, fixed, greedy or bafec (FAST CLOUD's n; bafec needs admission slots).
    #[arg(long, value_name = "POLICY")]
    redundancy: Option<String>,
    /// Reconstruction: gateway, segmented, apls or auto.
    #[arg(long, value_name = "KIND")]
    reconstruction: Option<String>,
    /// Access: per-range, or ecstore (a GET's whole stripes planned together by EC-Store's
    /// access planner).
    #[arg(long, value_name = "KIND")]
    access: Option<String>,
    /// The latency class of the bucket's requests, 1 the best.
    #[arg(long, value_name = "N")]
    class: Option<u8>,
    /// When writes are acknowledged: all, k+1 or k.
    #[arg(long, value_name = "RULE")]
    write_ack: Option<String>,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

#[derive(Debug, Args)]
pub(crate) struct AdminProfileNameArgs {
    /// The profile's name.
    #[arg(value_name = "NAME")]
    name: String,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

#[derive(Debug, Args)]
pub(crate) struct AdminBucketProfileArgs {
    /// The bucket.
    #[arg(value_name = "BUCKET")]
    bucket: String,
    /// The profile's name, or none for the cluster's default.
    #[arg(value_name = "NAME|none")]
    profile: String,
    /// Name it for this latency class's requests to the bucket only (1-based); `none` then falls
    /// back to the bucket's profile for that class.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..))]
    class: Option<u8>,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

/// Runs a profile command.
pub(crate) fn run(command: AdminProfileCommand) -> anyhow::Result<()> {
    match command {
        AdminProfileCommand::Show(target) => {
            // Every gateway reads the one metadata store: the first answers for all.
            let base = policy_gateways(&target)?.remove(0);
            let view = GatewayAdmin { base, secret: String::new() }.profiles()?;
            println!("default: {}", view.default);
            for entry in view.profiles {
                let layers = entry.profile.map_or_else(|| "unreadable".to_string(), |p| p.to_string());
                let classes = entry.classes.iter().map(|used| format!("{} class {}", used.bucket, used.class));
                let named: Vec<String> = entry.buckets.iter().cloned().chain(classes).collect();
                let buckets = if named.is_empty() { "no bucket".into() } else { named.join(", ") };
                println!("{}: {layers}  (buckets: {buckets})", entry.name);
                if let Some(why) = entry.refusal {
                    println!("  cannot run here: {why}");
                }
            }
        }
        AdminProfileCommand::Set(args) => {
            let profile = profile_of(&args)?;
            let admin =
                GatewayAdmin { base: policy_gateways(&args.target)?.remove(0), secret: target_secret(&args.target)? };
            let stored = admin.set_profile(&args.name, &profile)?;
            println!("{}: {stored}", args.name);
        }
        AdminProfileCommand::Delete(args) => {
            let admin =
                GatewayAdmin { base: policy_gateways(&args.target)?.remove(0), secret: target_secret(&args.target)? };
            admin.delete_profile(&args.name)?;
            println!("{}: deleted", args.name);
        }
    }
    Ok(())
}

/// Runs `lowtail admin bucket profile`.
pub(crate) fn set_bucket(args: AdminBucketProfileArgs) -> anyhow::Result<()> {
    let profile = (!args.profile.eq_ignore_ascii_case("none")).then_some(args.profile.as_str());
    let admin = GatewayAdmin { base: policy_gateways(&args.target)?.remove(0), secret: target_secret(&args.target)? };
    let bucket = admin.set_bucket_profile(&args.bucket, args.class, profile)?;
    let serving = match args.class {
        Some(class) => (format!(" class {class}"), bucket.profile_for(class)),
        None => (String::new(), bucket.profile.as_deref()),
    };
    println!("{}{}: profile now {}", bucket.name, serving.0, serving.1.unwrap_or("the cluster's default"));
    Ok(())
}

/// The profile the arguments describe: the file's layers, then each flag given over them. Names
/// are checked as the gateway's config reads them, so a typo is an error here.
fn profile_of(args: &AdminProfileSetArgs) -> anyhow::Result<policy::Profile> {
    let mut layers = match &args.file {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            toml::from_str::<toml::Table>(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        None => toml::Table::new(),
    };
    let flags = [
        ("selection", &args.selection),
        ("redundancy", &args.redundancy),
        ("reconstruction", &args.reconstruction),
        ("access", &args.access),
        ("write_ack", &args.write_ack),
    ];
    for (field, value) in flags {
        if let Some(value) = value {
            layers.insert(field.into(), toml::Value::String(value.clone()));
        }
    }
    if let Some(class) = args.class {
        layers.insert("class".into(), toml::Value::Integer(i64::from(class)));
    }
    toml::Value::Table(layers).try_into().map_err(|e| anyhow::anyhow!("profile {}: {e}", args.name))
}
