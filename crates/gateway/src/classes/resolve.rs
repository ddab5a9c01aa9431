//! The class a request runs in, from what the S3 layer read: the lowest priority (highest
//! number) of the access key's entitlement and the class of the buckets it touches, lowered
//! further, never raised, by an `x-lowtail-class` header. Pure: no I/O, no clock. Must not read
//! metadata or build S3 errors (the caller maps [`ClassRefusal`]).

use super::ClassNumber;

/// Most characters of a header value quoted back in a refusal.
const MAX_QUOTED_CHARS: usize = 32;

/// What a request's class is resolved from; classes as users number them (1-based).
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassInputs<'a> {
    /// Classes the gateway runs (1 to 8).
    pub count: u8,
    /// The class of an access key with no entitlement of its own.
    pub default_class: u8,
    /// The access key's entitlement in the metadata store's table (wins over the config's).
    pub key_table: Option<u8>,
    /// The access key's entitlement in this gateway's credential entry.
    pub key_config: Option<u8>,
    /// The worst class set on the buckets the request touches (a copy touches two), if any.
    pub bucket: Option<u8>,
    /// The `x-lowtail-class` header's raw value, if sent.
    pub header: Option<&'a [u8]>,
}

/// Why a request gets no class: nothing is read or written for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassRefusal {
    /// The header is not a number (400 InvalidArgument).
    #[error("x-lowtail-class must be a class number, 1 to {count}; {value:?} is not one")]
    Unparsable {
        /// The header as sent (cut short when long).
        value: String,
        /// Classes the gateway runs.
        count: u8,
    },
    /// The header names a class the gateway does not run (400 InvalidArgument).
    #[error("x-lowtail-class names class {asked}; this gateway runs classes 1 to {count}")]
    Unknown {
        /// The class asked for.
        asked: u64,
        /// Classes the gateway runs.
        count: u8,
    },
    /// The header names a better class than the access key is entitled to (403 AccessDenied).
    #[error("x-lowtail-class names class {asked}, but this access key is entitled to class {entitled} at best")]
    AboveEntitlement {
        /// The class asked for.
        asked: u8,
        /// The best class the key may use.
        entitled: u8,
    },
}

/// The class the request runs in. Stored classes beyond the ones the gateway runs (a config that
/// dropped a class) count as its worst class.
pub fn resolve(inputs: &ClassInputs<'_>) -> Result<ClassNumber, ClassRefusal> {
    assert!(inputs.count >= 1, "a gateway runs at least one class");
    let within = |class: u8| class.clamp(1, inputs.count);
    let entitled = within(inputs.key_table.or(inputs.key_config).unwrap_or(inputs.default_class));
    let floor = entitled.max(inputs.bucket.map_or(1, within));
    let class = match inputs.header {
        None => floor,
        Some(raw) => {
            let asked = asked_class(raw, inputs.count)?;
            if asked < entitled {
                return Err(ClassRefusal::AboveEntitlement { asked, entitled });
            }
            asked.max(floor)
        }
    };
    Ok(ClassNumber::new(class).expect("classes are clamped to 1.."))
}

/// The class a header value names: a decimal number from 1 to `count`.
fn asked_class(raw: &[u8], count: u8) -> Result<u8, ClassRefusal> {
    let text = std::str::from_utf8(raw).map(str::trim).unwrap_or_default();
    let unparsable = || ClassRefusal::Unparsable {
        value: String::from_utf8_lossy(raw).chars().take(MAX_QUOTED_CHARS).collect(),
        count,
    };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unparsable());
    }
    // Only digits: a failure to parse is an overflow, a number far beyond any class.
    let asked: u64 = text.parse().unwrap_or(u64::MAX);
    match u8::try_from(asked) {
        Ok(class) if (1..=count).contains(&class) => Ok(class),
        _ => Err(ClassRefusal::Unknown { asked, count }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gateway of three classes, default class 1.
    fn inputs<'a>() -> ClassInputs<'a> {
        ClassInputs { count: 3, default_class: 1, ..ClassInputs::default() }
    }

    fn class(inputs: ClassInputs<'_>) -> u8 {
        resolve(&inputs).expect("a class").get()
    }

    #[test]
    fn the_entitlement_is_the_table_then_the_config_then_the_default() {
        assert_eq!(class(inputs()), 1);
        assert_eq!(class(ClassInputs { default_class: 2, ..inputs() }), 2);
        assert_eq!(class(ClassInputs { key_config: Some(3), ..inputs() }), 3);
        assert_eq!(class(ClassInputs { key_table: Some(2), key_config: Some(3), ..inputs() }), 2, "the table wins");
        assert_eq!(class(ClassInputs { key_table: Some(1), key_config: Some(3), ..inputs() }), 1);
        assert_eq!(class(ClassInputs { key_table: Some(3), default_class: 1, ..inputs() }), 3);
    }

    #[test]
    fn the_bucket_lowers_the_class_and_never_raises_it() {
        for key in 1..=3 {
            for bucket in [None, Some(1), Some(2), Some(3)] {
                let got = class(ClassInputs { key_table: Some(key), bucket, ..inputs() });
                assert_eq!(got, key.max(bucket.unwrap_or(1)), "key {key}, bucket {bucket:?}");
            }
        }
    }

    #[test]
    fn stored_classes_beyond_the_gateways_count_as_its_worst() {
        assert_eq!(class(ClassInputs { key_table: Some(8), ..inputs() }), 3);
        assert_eq!(class(ClassInputs { bucket: Some(7), ..inputs() }), 3);
        assert_eq!(class(ClassInputs { key_config: Some(0), ..inputs() }), 1, "0 is read as the best");
    }

    #[test]
    fn the_header_lowers_the_class_but_never_raises_it() {
        // Every combination of entitlement, bucket class and header on three classes.
        for key in 1..=3u8 {
            for bucket in [None, Some(1), Some(2), Some(3)] {
                for asked in 1..=3u8 {
                    let text = asked.to_string();
                    let got = resolve(&ClassInputs {
                        key_table: Some(key),
                        bucket,
                        header: Some(text.as_bytes()),
                        ..inputs()
                    });
                    let expected = if asked < key {
                        Err(ClassRefusal::AboveEntitlement { asked, entitled: key })
                    } else {
                        Ok(asked.max(bucket.unwrap_or(1)))
                    };
                    assert_eq!(got.map(ClassNumber::get), expected, "key {key}, bucket {bucket:?}, header {asked}");
                }
            }
        }
    }

    #[test]
    fn the_header_is_checked_against_the_entitlement_not_the_bucket() {
        // A class-1 key in a class-3 bucket may name class 1: it runs in 3 all the same.
        let header = Some(b"1".as_slice());
        assert_eq!(class(ClassInputs { key_table: Some(1), bucket: Some(3), header, ..inputs() }), 3);
    }

    #[test]
    fn unknown_and_unparsable_headers_are_refused() {
        let refusal = |value: &[u8]| resolve(&ClassInputs { header: Some(value), ..inputs() }).unwrap_err();
        assert_eq!(refusal(b"9"), ClassRefusal::Unknown { asked: 9, count: 3 });
        assert_eq!(refusal(b"0"), ClassRefusal::Unknown { asked: 0, count: 3 });
        assert_eq!(refusal(b"256"), ClassRefusal::Unknown { asked: 256, count: 3 });
        assert_eq!(refusal(b"99999999999999999999999"), ClassRefusal::Unknown { asked: u64::MAX, count: 3 });
        for bad in [b"".as_slice(), b" ", b"gold", b"-1", b"+1", b"1.0", b"0x1", b"\xff"] {
            assert!(matches!(refusal(bad), ClassRefusal::Unparsable { count: 3, .. }), "{bad:?}");
        }
        assert_eq!(class(ClassInputs { header: Some(b" 2 "), ..inputs() }), 2, "surrounding spaces are fine");
        let long = refusal(&[b'x'; 100]).to_string();
        assert!(long.len() < 120, "a long header is quoted short: {long}");
    }

    #[test]
    fn refusals_say_what_is_allowed() {
        let denied = ClassRefusal::AboveEntitlement { asked: 1, entitled: 2 }.to_string();
        assert!(denied.contains("entitled to class 2"), "{denied}");
        assert!(ClassRefusal::Unknown { asked: 9, count: 2 }.to_string().contains("classes 1 to 2"));
    }
}
