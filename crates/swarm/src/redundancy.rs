//! What the store said of a write's redundancy when it acknowledged it: the gateway's
//! `x-lowtail-redundancy` (`full`, `pending` or `degraded`) and `x-lowtail-failures-tolerated`
//! headers, read off the raw answer by an interceptor on the one request (the SDK's typed outputs
//! do not carry headers they do not know).
//!
//! Owns turning those headers into the model's [`Ack`]. Must not judge anything: the model does.

use std::sync::{Arc, Mutex};

use aws_sdk_s3::config::interceptors::BeforeDeserializationInterceptorContextRef;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::error::BoxError;

use crate::model::Ack;

/// The gateway's header naming the state of an acknowledged write's redundancy.
const REDUNDANCY_HEADER: &str = "x-lowtail-redundancy";
/// The gateway's header saying how many node failures an acknowledged write survives now.
const FAILURES_TOLERATED_HEADER: &str = "x-lowtail-failures-tolerated";

/// Catches the redundancy headers of the answer to the request it is attached to
/// (`.customize().interceptor(capture.clone())`).
#[derive(Debug, Clone, Default)]
pub struct RedundancyCapture {
    /// The headers' values, once an answer came: the state and the failures tolerated.
    seen: Arc<Mutex<Option<(String, Option<usize>)>>>,
}

impl RedundancyCapture {
    /// The state the answer named (`full`, `pending`, `degraded`), or `None` when none came.
    pub fn state(&self) -> Option<String> {
        self.seen.lock().expect("capture lock").as_ref().map(|(state, _)| state.clone())
    }

    /// How the write ended for the model: `Uncertain` unless `ok`; `Below` when the answer said
    /// its redundancy was not full (an answer without the headers counts as full: the model then
    /// excuses nothing of it).
    pub fn ack(&self, ok: bool) -> Ack {
        if !ok {
            return Ack::Uncertain;
        }
        match self.seen.lock().expect("capture lock").clone() {
            Some((state, Some(failures_tolerated))) if state != "full" => Ack::Below { failures_tolerated },
            _ => Ack::Acknowledged,
        }
    }
}

impl Intercept for RedundancyCapture {
    fn name(&self) -> &'static str {
        "lowtail-redundancy-capture"
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let headers = context.response().headers();
        if let Some(state) = headers.get(REDUNDANCY_HEADER) {
            let tolerated = headers.get(FAILURES_TOLERATED_HEADER).and_then(|value| value.trim().parse().ok());
            *self.seen.lock().expect("capture lock") = Some((state.trim().to_string(), tolerated));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(state: &str, tolerated: Option<usize>) -> RedundancyCapture {
        let capture = RedundancyCapture::default();
        *capture.seen.lock().unwrap() = Some((state.into(), tolerated));
        capture
    }

    #[test]
    fn only_an_acknowledged_answer_below_full_is_below() {
        assert_eq!(seen("pending", Some(0)).ack(true), Ack::Below { failures_tolerated: 0 });
        assert_eq!(seen("degraded", Some(2)).ack(true), Ack::Below { failures_tolerated: 2 });
        assert_eq!(seen("pending", Some(0)).ack(false), Ack::Uncertain);
        assert_eq!(seen("full", Some(3)).ack(true), Ack::Acknowledged);
        assert_eq!(seen("pending", None).ack(true), Ack::Acknowledged, "no number: nothing to excuse");
        assert_eq!(RedundancyCapture::default().ack(true), Ack::Acknowledged);
    }
}
