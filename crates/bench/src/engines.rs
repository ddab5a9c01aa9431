//! Which GF(2^8) engine a benchmark runs on: the one named on the command
//! line, the one `LOWTAIL_ENGINE` names, or the fastest this CPU supports.
//!
//! Owns: turning an engine name into an engine, with an error (not the
//! codec's panic) for a name that is unknown or unsupported here.
//! Must not: choose differently from `codec::engine::best` when no name is given.

use anyhow::anyhow;
use codec::engine::{self, Engine, EngineKind};

/// The environment variable that overrides the engine choice of the codec.
pub const ENGINE_ENV_VAR: &str = "LOWTAIL_ENGINE";

/// One line of the engine listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineListing {
    /// The engine.
    pub kind: EngineKind,
    /// Whether this CPU and this build can run it.
    pub supported: bool,
    /// Whether `codec::engine::best` picks it in this process.
    pub chosen: bool,
}

/// Parses an engine name, with an error that lists the valid ones.
pub fn engine_kind_by_name(name: &str) -> anyhow::Result<EngineKind> {
    EngineKind::from_name(name.trim())
        .ok_or_else(|| anyhow!("unknown engine {name:?}: expected one of {}", all_names()))
}

fn all_names() -> String {
    EngineKind::ALL.iter().map(|kind| kind.name()).collect::<Vec<_>>().join(", ")
}

/// The engine of `kind`, or an error naming the engines this CPU does support.
pub fn supported_engine(kind: EngineKind) -> anyhow::Result<&'static dyn Engine> {
    engine::by_kind(kind).ok_or_else(|| {
        let names: Vec<&str> = engine::available().iter().map(|e| e.kind().name()).collect();
        anyhow!("engine {kind} is not supported on this CPU or build; supported here: {}", names.join(", "))
    })
}

/// The engine the codec uses by default in this process (`engine::best`),
/// after checking `LOWTAIL_ENGINE` so that a bad value is an error here
/// instead of a panic inside the codec.
pub fn default_engine() -> anyhow::Result<&'static dyn Engine> {
    if let Ok(name) = std::env::var(ENGINE_ENV_VAR)
        && !name.is_empty()
    {
        // Exactly the test `engine::best` applies, so that it cannot panic afterwards.
        let kind = EngineKind::from_name(&name)
            .ok_or_else(|| anyhow!("{ENGINE_ENV_VAR}={name:?}: unknown engine; expected one of {}", all_names()))?;
        supported_engine(kind).map_err(|e| anyhow!("{ENGINE_ENV_VAR}={name:?}: {e}"))?;
    }
    Ok(engine::best())
}

/// The engine named on a command line, or the default one.
pub fn select_engine(name: Option<&str>) -> anyhow::Result<&'static dyn Engine> {
    match name {
        Some(name) => supported_engine(engine_kind_by_name(name)?),
        None => default_engine(),
    }
}

/// Every engine kind, fastest first, with whether it runs here and which one is chosen.
pub fn engine_listing() -> anyhow::Result<Vec<EngineListing>> {
    let chosen = default_engine()?.kind();
    Ok(EngineKind::ALL
        .into_iter()
        .map(|kind| EngineListing { kind, supported: engine::by_kind(kind).is_some(), chosen: kind == chosen })
        .collect())
}

/// The listing as text, one engine a line: `*` marks the chosen engine.
pub fn render_engine_listing(listing: &[EngineListing]) -> String {
    let mut text = String::new();
    for line in listing {
        let mark = if line.chosen { "*" } else { " " };
        let note = match (line.supported, line.chosen) {
            (true, true) => "supported, chosen",
            (true, false) => "supported",
            (false, _) => "not supported on this CPU or build",
        };
        text.push_str(&format!("{mark} {:<12} {note}\n", line.kind.name()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_bad_names_are_errors() {
        assert_eq!(engine_kind_by_name("reference").unwrap(), EngineKind::Reference);
        let error = engine_kind_by_name("avx9").unwrap_err().to_string();
        assert!(error.contains("avx9") && error.contains("portable"), "{error}");
        // The reference and portable engines run everywhere.
        assert_eq!(select_engine(Some("portable")).unwrap().kind(), EngineKind::Portable);
    }

    #[test]
    fn listing_marks_exactly_one_supported_engine_as_chosen() {
        let listing = engine_listing().unwrap();
        assert_eq!(listing.len(), EngineKind::ALL.len());
        let chosen: Vec<_> = listing.iter().filter(|line| line.chosen).collect();
        assert_eq!(chosen.len(), 1);
        assert!(chosen[0].supported);
        let text = render_engine_listing(&listing);
        assert!(text.contains(&format!("* {}", chosen[0].kind.name())), "{text}");
    }
}
