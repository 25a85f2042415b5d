//! A request body as shared slices sent in order, never joined into one buffer: an AgentX body
//! is a few hundred slices of the prompt corpus (held once for the whole run) between a few
//! hundred bytes of its own, so a request costs references, not a ~550 KB copy.
//!
//! ```text
//! Body { parts: [head, corpus[a..b], glue, corpus[c..d], ..., tail] }
//!   └─► one data frame whose Buf hands hyper every slice (writev), Content-Length exact
//! ```

use std::convert::Infallible;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};

/// The bytes of a request body, as slices of shared buffers. Cloning shares them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Body {
    /// No empty slice (a `Buf` must not hand out an empty chunk while bytes remain).
    parts: Arc<[Bytes]>,
    len: usize,
}

impl Body {
    /// The body made of `parts`, in order.
    pub(crate) fn from_parts(parts: impl IntoIterator<Item = Bytes>) -> Body {
        let parts: Arc<[Bytes]> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        let len = parts.iter().map(Bytes::len).sum();
        Body { parts, len }
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// How many slices it is sent as.
    #[cfg(test)]
    pub(crate) fn parts_count(&self) -> usize {
        self.parts.len()
    }

    /// Its bytes in one buffer (a copy unless it is one slice): for checks and tests, never on
    /// the request path.
    pub(crate) fn to_bytes(&self) -> Bytes {
        match &*self.parts {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => Bytes::from(many.concat()),
        }
    }

    /// The hyper body that sends it (one frame).
    pub(crate) fn sending(&self) -> Sending {
        Sending(Some(Slices {
            parts: self.parts.clone(),
            at: 0,
            offset: 0,
            remaining: self.len,
        }))
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Body {
        Body::from_parts([b])
    }
}

/// A [`Body`] on its way out: yields its one data frame, then ends.
#[derive(Debug)]
pub(crate) struct Sending(Option<Slices>);

impl http_body::Body for Sending {
    type Data = Slices;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Slices>, Infallible>>> {
        let next = self.get_mut().0.take().filter(|s| s.remaining > 0);
        Poll::Ready(next.map(|s| Ok(Frame::data(s))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(|s| s.remaining == 0)
    }

    fn size_hint(&self) -> SizeHint {
        // Exact: hyper sends Content-Length, as for a single buffer.
        SizeHint::with_exact(self.0.as_ref().map_or(0, |s| s.remaining) as u64)
    }
}

/// The unsent rest of a body's slices, as one [`Buf`] with one chunk per slice.
#[derive(Debug)]
pub(crate) struct Slices {
    parts: Arc<[Bytes]>,
    at: usize,
    offset: usize,
    remaining: usize,
}

impl Buf for Slices {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.get(self.at).map_or(&[], |p| &p[self.offset..])
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut offset = self.offset;
        for (slot, part) in dst.iter_mut().zip(self.parts.iter().skip(self.at)) {
            *slot = IoSlice::new(&part[offset..]);
            offset = 0;
            n += 1;
        }
        n
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advanced past the body's end");
        self.remaining -= cnt;
        while cnt > 0 {
            let left = self.parts[self.at].len() - self.offset;
            if cnt < left {
                self.offset += cnt;
                return;
            }
            cnt -= left;
            self.at += 1;
            self.offset = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn body() -> Body {
        Body::from_parts(
            ["{\"a\":\"", "", "xy", "z", "\"}"].map(|s| Bytes::from_static(s.as_bytes())),
        )
    }

    #[test]
    fn a_body_is_its_parts_in_order_without_the_empty_ones() {
        let b = body();
        assert_eq!(b.len(), 11);
        assert_eq!(b.parts.len(), 4);
        assert_eq!(&b.to_bytes()[..], b"{\"a\":\"xyz\"}");
        assert_eq!(Body::default().to_bytes(), Bytes::new());
    }

    #[test]
    fn the_buf_hands_out_every_slice_and_advances_across_them() {
        let mut s = body().sending().0.unwrap();
        let mut io = [IoSlice::new(&[]); 8];
        assert_eq!(s.chunks_vectored(&mut io), 4);
        s.advance(7); // `{"a":"` and `x`
        assert_eq!(s.chunk(), b"y");
        let mut io = [IoSlice::new(&[]); 2];
        assert_eq!(s.chunks_vectored(&mut io), 2, "bounded by the slots given");
        assert_eq!(&*io[0], b"y");
        assert_eq!(&*io[1], b"z");
        let mut rest = Vec::new();
        while s.has_remaining() {
            let c = s.chunk().to_vec();
            rest.extend_from_slice(&c);
            s.advance(c.len());
        }
        assert_eq!(rest, b"yz\"}");
        assert_eq!(s.chunk(), b"");
    }

    #[tokio::test]
    async fn the_hyper_body_is_one_frame_of_exact_size() {
        let sending = body().sending();
        assert_eq!(http_body::Body::size_hint(&sending).exact(), Some(11));
        let collected = sending.collect().await.unwrap().to_bytes();
        assert_eq!(&collected[..], b"{\"a\":\"xyz\"}");
        let empty = Body::default().sending();
        assert!(http_body::Body::is_end_stream(&empty));
        assert!(empty.collect().await.unwrap().to_bytes().is_empty());
    }
}
