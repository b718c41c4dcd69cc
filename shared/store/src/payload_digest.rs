//! The SHA-1 of a page's payload: the body as received (after HTTP
//! content decoding, up to `--max-body-bytes`), taken by the child at
//! fetch time and stored in the page as `payload_sha1`.
//!
//! Why at fetch time: a revisit can tell unchanged content from the
//! digest alone, without reading (or keeping) the body; `pages stats`
//! counts duplicate bodies across URLs; the WARC export names it as the
//! record's `WARC-Payload-Digest` without hashing again. Why SHA-1: it is
//! what WARC files, CDX indexes and the tools that read them use (written
//! `sha1:` and base32). It is taken of every body, kept or not, so it
//! describes the content even when only its digest is stored.

use bson::spec::BinarySubtype;
use bson::{Binary, Bson};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha1::{Digest, Sha1};

/// A SHA-1, stored as 20 bytes of BSON binary.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PayloadDigest([u8; 20]);

impl PayloadDigest {
    pub fn of(bytes: &[u8]) -> PayloadDigest {
        PayloadDigest(Sha1::digest(bytes).into())
    }

    /// A digest as carried elsewhere (a revisit lease's).
    pub fn from_bytes(bytes: [u8; 20]) -> PayloadDigest {
        PayloadDigest(bytes)
    }

    pub fn bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// As WARC headers and CDX indexes write it: `sha1:` and base32.
    pub fn warc(&self) -> String {
        format!("sha1:{}", data_encoding::BASE32.encode(&self.0))
    }
}

impl std::fmt::Debug for PayloadDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.warc())
    }
}

impl Serialize for PayloadDigest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Binary {
            subtype: BinarySubtype::Generic,
            bytes: self.0.to_vec(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for PayloadDigest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PayloadDigest, D::Error> {
        match Bson::deserialize(d)? {
            Bson::Binary(b) => <[u8; 20]>::try_from(b.bytes.as_slice())
                .map(PayloadDigest)
                .map_err(|_| {
                    serde::de::Error::custom(format!("a SHA-1 has 20 bytes, not {}", b.bytes.len()))
                }),
            other => Err(serde::de::Error::custom(format!(
                "a SHA-1 is stored as binary, not {:?}",
                other.element_type()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warc_form_is_base32_sha1() {
        // RFC 3174's "abc".
        assert_eq!(
            PayloadDigest::of(b"abc").warc(),
            "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5"
        );
        assert_eq!(
            PayloadDigest::of(b"").warc(),
            "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
        );
    }

    #[test]
    fn stored_as_20_bytes_of_binary_and_read_back() {
        let d = PayloadDigest::of(b"a page");
        let stored = bson::to_bson(&d).unwrap();
        match &stored {
            Bson::Binary(b) => assert_eq!(b.bytes.len(), 20),
            other => panic!("stored as {other:?}"),
        }
        assert_eq!(bson::from_bson::<PayloadDigest>(stored).unwrap(), d);
        let short = Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![1, 2, 3],
        });
        assert!(bson::from_bson::<PayloadDigest>(short).is_err());
        assert!(bson::from_bson::<PayloadDigest>(Bson::String("sha1:X".into())).is_err());
    }
}
