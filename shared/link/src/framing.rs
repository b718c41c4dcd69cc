//! Length-prefixed frames over a byte stream (the supervisor ⇄ child pipes).
//!
//! A frame is a little-endian `u32` length followed by that many bytes of a
//! [`crate::protocol`] message.

use serde::{de::DeserializeOwned, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::protocol::{self, MAX_MESSAGE_BYTES};

/// Writes one message as a frame (not flushed: callers batch, then flush).
/// A message over [`MAX_MESSAGE_BYTES`] is an error, not a frame the other
/// side would refuse (and it could not say so).
pub async fn write_frame<W, T>(w: &mut W, msg: &T) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let bytes = protocol::encode(msg);
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|len| u64::from(*len) <= MAX_MESSAGE_BYTES)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("message of {} bytes exceeds the frame limit", bytes.len()),
            )
        })?;
    w.write_all(&len.to_le_bytes()).await?;
    w.write_all(&bytes).await
}

/// Reads one frame; `Ok(None)` on a clean end of stream.
pub async fn read_frame<R, T>(r: &mut R) -> std::io::Result<Option<T>>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as u64;
    if len > MAX_MESSAGE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds the limit"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf).await?;
    protocol::decode(&buf)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToChild;

    #[tokio::test]
    async fn frames_round_trip_and_end_cleanly() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        write_frame(&mut a, &ToChild::Stop).await.unwrap();
        drop(a);
        assert_eq!(
            read_frame::<_, ToChild>(&mut b).await.unwrap(),
            Some(ToChild::Stop)
        );
        assert_eq!(read_frame::<_, ToChild>(&mut b).await.unwrap(), None);
    }

    #[tokio::test]
    async fn oversized_length_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        a.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
        assert!(read_frame::<_, ToChild>(&mut b).await.is_err());
    }
}
