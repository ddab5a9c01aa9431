//! What the store said of a write's redundancy when it acknowledged it: the gateway's
//! `x-lowtail-redundancy` (`full`, `pending` or `degraded`) and `x-lowtail-failures-tolerated`
//! headers, read off the raw answer by an interceptor on the requests of one write (the SDK's typed
//! outputs do not carry headers they do not know). A multipart upload's are its UploadParts'
//! answers (CompleteMultipartUpload names none): the object is as redundant as its least part.
//!
//! Owns turning those headers into the model's [`Ack`]. Must not judge anything: the model does.

use std::sync::{Arc, Mutex};

use aws_sdk_s3::config::interceptors::BeforeDeserializationInterceptorContextRef;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::error::BoxError;

use gateway::s3::{FAILURES_TOLERATED_HEADER, REDUNDANCY_HEADER};

use crate::model::Ack;

/// Catches the redundancy headers of the answers to the requests it is attached to
/// (`.customize().interceptor(capture.clone())`), keeping the least redundant.
#[derive(Debug, Clone, Default)]
pub struct RedundancyCapture {
    /// The least redundant answer so far.
    seen: Arc<Mutex<Option<Answer>>>,
}

/// What one answer's headers said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    state: String,
    failures_tolerated: Option<usize>,
}

impl Answer {
    fn new(state: &str, failures_tolerated: Option<usize>) -> Self {
        Self { state: state.to_string(), failures_tolerated }
    }

    /// Whether it says its bytes survive fewer failures than `other` (unnumbered as 0).
    fn less_redundant_than(&self, other: &Answer) -> bool {
        let rank = |a: &Answer| (a.state == "full", a.failures_tolerated.unwrap_or(0));
        rank(self) < rank(other)
    }
}

impl RedundancyCapture {
    /// The state the answer named (`full`, `pending`, `degraded`), or `None` when none came.
    pub fn state(&self) -> Option<String> {
        self.seen.lock().expect("capture lock").as_ref().map(|answer| answer.state.clone())
    }

    /// How the write ended for the model: `Uncertain` unless `ok`; `Below` when the answer said
    /// its redundancy was not full (an answer without the headers counts as full: the model then
    /// excuses nothing of it).
    pub fn ack(&self, ok: bool) -> Ack {
        if !ok {
            return Ack::Uncertain;
        }
        match self.seen.lock().expect("capture lock").clone() {
            Some(Answer { state, failures_tolerated: Some(failures_tolerated) }) if state != "full" => {
                Ack::Below { failures_tolerated }
            }
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
            let answer = Answer::new(state.trim(), tolerated);
            let mut seen = self.seen.lock().expect("capture lock");
            if seen.as_ref().is_none_or(|least| answer.less_redundant_than(least)) {
                *seen = Some(answer);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(state: &str, tolerated: Option<usize>) -> RedundancyCapture {
        let capture = RedundancyCapture::default();
        *capture.seen.lock().unwrap() = Some(Answer::new(state, tolerated));
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

    #[test]
    fn the_least_redundant_answer_is_kept() {
        let answers = [("full", Some(3)), ("pending", Some(1)), ("full", Some(3)), ("degraded", Some(2))];
        let mut least: Option<Answer> = None;
        for (state, tolerated) in answers {
            let answer = Answer::new(state, tolerated);
            if least.as_ref().is_none_or(|l| answer.less_redundant_than(l)) {
                least = Some(answer);
            }
        }
        assert_eq!(least, Some(Answer::new("pending", Some(1))));
        assert!(Answer::new("pending", None).less_redundant_than(&Answer::new("degraded", Some(1))), "unnumbered: 0");
        assert!(!Answer::new("full", Some(3)).less_redundant_than(&Answer::new("pending", Some(2))));
    }
}
