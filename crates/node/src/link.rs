//! Link emulation: a node's uplink and downlink on loopback behave like NICs of a set rate, so the
//! reconstruction methods (APLS, ECPipe, the gateway decode) differ live as they do in the
//! simulator's network model, where each site's link serves bytes at its rate plus a cost per packet.
//!
//! A [`Link`] is one FCFS server: a transmission of `b` bytes starts when the link is free and
//! holds it for `b / rate + per_packet`; the caller waits until it would have left. Owns that
//! reservation only. Must not move bytes, decide anything, or shape when the model is off.
//!
//! A transmission whose waiter is dropped keeps its slot (the bytes were "on the wire"): later ones
//! queue behind it, as they would behind a frame already sent.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::lock;
use crate::service_model::{MAX_SERVICE_TIME, ServiceModel};

/// The timer's resolution (tokio's): how late a sleeping sender may wake.
pub const TIMER_TICK: Duration = Duration::from_millis(1);

/// One emulated link (a direction of a node's NIC, or the gateway's downlink).
#[derive(Debug)]
pub struct Link {
    state: Mutex<LinkState>,
}

#[derive(Debug)]
struct LinkState {
    shape: LinkShape,
    /// When the last reserved transmission leaves.
    free_at: Instant,
}

/// A link's rate and per-packet cost; all zero (the default) leaves it unshaped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkShape {
    /// Bytes per second; 0 = not shaped.
    pub bytes_per_s: f64,
    /// Cost of each packet, microseconds (only on a shaped link).
    pub per_packet_us: u64,
}

impl LinkShape {
    /// Checks the shape; says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !self.bytes_per_s.is_finite() || self.bytes_per_s < 0.0 {
            return Err(format!("bytes_per_s must be finite and >= 0, got {}", self.bytes_per_s));
        }
        if Duration::from_micros(self.per_packet_us) > MAX_SERVICE_TIME {
            return Err(format!("per_packet_us must be at most {} s", MAX_SERVICE_TIME.as_secs()));
        }
        Ok(())
    }

    /// The shape `model` gives a node's link in `direction` (unshaped when the model is off).
    pub fn of(model: &ServiceModel, direction: Direction) -> LinkShape {
        let rate = match direction {
            Direction::Egress => model.egress_bytes_per_s,
            Direction::Ingress => model.ingress_bytes_per_s,
        };
        LinkShape { bytes_per_s: if model.enabled { rate } else { 0.0 }, per_packet_us: model.link_per_packet_us }
    }
}

/// Which direction of a node's NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// What the node sends.
    Egress,
    /// What the node receives.
    Ingress,
}

impl Link {
    /// A link shaped as `model` says for `direction` (unshaped when the model is off).
    pub fn new(model: &ServiceModel, direction: Direction) -> Link {
        Link::with_shape(LinkShape::of(model, direction))
    }

    /// A link of `shape` (assumed valid).
    pub fn with_shape(shape: LinkShape) -> Link {
        // Idle for longer than a tick: the first packet starts when it is offered.
        let free_at = Instant::now().checked_sub(TIMER_TICK * 2).unwrap_or_else(Instant::now);
        Link { state: Mutex::new(LinkState { shape, free_at }) }
    }

    /// Takes the rate and per-packet cost of `model` for `direction`; transmissions already
    /// reserved keep their slots.
    pub fn set(&self, model: &ServiceModel, direction: Direction) {
        self.set_shape(LinkShape::of(model, direction));
    }

    /// Takes `shape` (assumed valid); transmissions already reserved keep their slots.
    pub fn set_shape(&self, shape: LinkShape) {
        lock(&self.state).shape = shape;
    }

    /// The shape in force.
    pub fn shape(&self) -> LinkShape {
        lock(&self.state).shape
    }

    /// Whether the link is shaped at all.
    pub fn is_shaped(&self) -> bool {
        lock(&self.state).shape.bytes_per_s > 0.0
    }

    /// Reserves the link for one packet of `bytes` and waits until it has left; returns at once on
    /// an unshaped link.
    pub async fn transmit(&self, bytes: u64) {
        if let Some(leaves) = self.reserve(bytes, Instant::now()) {
            tokio::time::sleep_until(leaves).await;
        }
    }

    /// Reserves the link for one packet of `bytes` offered now, without waiting: the instant it
    /// will have left (`None` on an unshaped link). For a receiver that takes packets as they come
    /// and needs only the last one's time: waiting for each would offer the next one late.
    pub fn reserve_now(&self, bytes: u64) -> Option<Instant> {
        self.reserve(bytes, Instant::now())
    }

    /// The instant a packet of `bytes` offered at `now` leaves, the link held for it until then;
    /// `None` when the link is not shaped.
    fn reserve(&self, bytes: u64, now: Instant) -> Option<Instant> {
        let mut state = lock(&self.state);
        let LinkShape { bytes_per_s, per_packet_us } = state.shape;
        if bytes_per_s <= 0.0 {
            return None;
        }
        let busy = Duration::from_secs_f64(bytes as f64 / bytes_per_s) + Duration::from_micros(per_packet_us);
        // The timer wakes a waiter up to a tick late; a sender that offers its next packet within a
        // tick of the last one leaving kept the link busy, so that packet starts when the last left
        // (else every packet would lose up to a tick and a sequential sender see a slower link).
        let start = if now.saturating_duration_since(state.free_at) < TIMER_TICK { state.free_at } else { now };
        // Bounded: a reservation never reaches further than the longest service time ahead.
        state.free_at = start + busy.min(MAX_SERVICE_TIME);
        Some(state.free_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(rate: f64, per_packet_us: u64) -> ServiceModel {
        ServiceModel {
            enabled: true,
            egress_bytes_per_s: rate,
            link_per_packet_us: per_packet_us,
            ..Default::default()
        }
    }

    #[test]
    fn an_unshaped_link_never_holds_a_packet() {
        let link = Link::new(&ServiceModel { egress_bytes_per_s: 1e6, ..Default::default() }, Direction::Egress);
        assert!(!link.is_shaped(), "a model that is off shapes nothing");
        assert_eq!(link.reserve(1 << 20, Instant::now()), None);
        let ingress = Link::new(&shaped(1e6, 0), Direction::Ingress);
        assert!(!ingress.is_shaped(), "the egress rate does not shape the downlink");
    }

    #[test]
    fn packets_queue_behind_each_other_at_the_rate_plus_the_per_packet_cost() {
        let link = Link::new(&shaped(1e6, 100), Direction::Egress);
        let now = Instant::now();
        let first = link.reserve(1000, now).unwrap();
        assert_eq!(first - now, Duration::from_micros(1100));
        let second = link.reserve(2000, now).unwrap();
        assert_eq!(second - now, Duration::from_micros(1100 + 2100), "FCFS: the second waits for the first");
        let later = now + Duration::from_secs(1);
        assert_eq!(link.reserve(0, later).unwrap() - later, Duration::from_micros(100), "an idle link starts at once");
        let free = later + Duration::from_micros(100);
        let late = free + Duration::from_micros(600);
        assert_eq!(
            link.reserve(1000, late).unwrap(),
            free + Duration::from_micros(1100),
            "a wake within a tick kept it busy"
        );
    }

    #[tokio::test]
    async fn transmit_waits_until_the_packet_has_left() {
        let link = Link::new(&shaped(1e6, 0), Direction::Egress);
        let began = Instant::now();
        link.transmit(50_000).await;
        link.transmit(50_000).await;
        assert!(began.elapsed() >= Duration::from_millis(100), "two 50 ms packets took {:?}", began.elapsed());
    }
}
