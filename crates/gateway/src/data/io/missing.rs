//! Recording units missing: a unit a node lost, never got or holds damaged becomes an entry of its
//! stripe's `missing_units` (and so of the under-redundant index, in the same transaction), by
//! compare-and-swap, where the stripe still places it on that node. Shared by repair (corrupt units
//! the nodes report) and by the admission of a returning node (units its directory lacks). Must
//! not rebuild anything (repair does) nor trust a node's say that a unit is fine.

use meta::{MetaError, MetaStore, NodeId, StripeId, StripeState};

use crate::data::{DataError, meta_error};

/// A unit of a stripe and the node a copy of it is (or should be) on.
pub type UnitOn = (u16, NodeId);

/// Compare-and-swap attempts before the stripe is left for the next caller.
const CAS_ATTEMPTS: usize = 3;

/// Marks `units` of stripe `id` missing where the sealed stripe still places them on that node,
/// dating the degradation `now_ms` if it is new: how many were newly marked, and the units no
/// stripe references there (garbage, for whoever asked to delete). A stripe that is gone
/// references nothing.
pub async fn mark_missing(
    meta: &dyn MetaStore,
    id: StripeId,
    units: &[UnitOn],
    now_ms: u64,
) -> Result<(usize, Vec<UnitOn>), DataError> {
    for _attempt in 0..CAS_ATTEMPTS {
        let mut stripe = match meta.get_stripe(id).await {
            Ok(stripe) => stripe,
            Err(MetaError::NoSuchStripe(_)) => return Ok((0, units.to_vec())),
            Err(error) => return Err(meta_error(error)),
        };
        let referenced = |&(unit, node): &UnitOn| {
            stripe.state == StripeState::Sealed && stripe.placement.get(usize::from(unit)) == Some(&node)
        };
        let (placed, unreferenced): (Vec<UnitOn>, Vec<UnitOn>) = units.iter().copied().partition(referenced);
        let newly: Vec<u16> =
            placed.iter().map(|&(unit, _)| unit).filter(|&unit| !stripe.is_missing(usize::from(unit))).collect();
        if newly.is_empty() {
            return Ok((0, unreferenced));
        }
        let version = stripe.version;
        stripe.mark_missing(newly.iter().copied(), now_ms);
        match meta.update_stripe(id, version, stripe).await {
            Ok(_) => return Ok((newly.len(), unreferenced)),
            Err(MetaError::Conflict(_)) => continue,
            Err(error) => return Err(meta_error(error)),
        }
    }
    Err(DataError::Meta(format!("stripe {id}: kept changing while units were recorded missing")))
}
