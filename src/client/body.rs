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
    /// The buffers the slices are cut from: the request's own bytes, the shared corpus.
    sources: Arc<[Bytes]>,
    /// The slices in order, none empty (a `Buf` must not hand out an empty chunk while bytes
    /// remain): 12 bytes each where a `Bytes` per slice is 32, for the ~1,000 slices of a
    /// 100k-token AgentX body in flight on each of 1,536 lanes.
    pieces: Arc<[Piece]>,
    len: usize,
}

/// `sources[src][start..end]`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Piece {
    src: u32,
    start: u32,
    end: u32,
}

impl Body {
    /// The body made of `parts`, in order.
    pub(crate) fn from_parts(parts: impl IntoIterator<Item = Bytes>) -> Body {
        let mut b = BodyBuilder::default();
        parts.into_iter().for_each(|p| b.push(p));
        b.finish()
    }

    /// A body built slice by slice, with slices of known buffers kept as offsets.
    pub(crate) fn builder() -> BodyBuilder {
        BodyBuilder::default()
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// How many slices it is sent as.
    #[cfg(test)]
    pub(crate) fn parts_count(&self) -> usize {
        self.pieces.len()
    }

    fn piece(&self, i: usize) -> &[u8] {
        let p = self.pieces[i];
        &self.sources[p.src as usize][p.start as usize..p.end as usize]
    }

    /// Its bytes in one buffer (a copy unless it is one slice): for checks and tests, never on
    /// the request path.
    pub(crate) fn to_bytes(&self) -> Bytes {
        match &*self.pieces {
            [] => Bytes::new(),
            [p] => self.sources[p.src as usize].slice(p.start as usize..p.end as usize),
            many => {
                let mut out = Vec::with_capacity(self.len);
                (0..many.len()).for_each(|i| out.extend_from_slice(self.piece(i)));
                Bytes::from(out)
            }
        }
    }

    /// The hyper body that sends it (one frame).
    pub(crate) fn sending(&self) -> Sending {
        Sending(Some(self.slices()))
    }

    /// All of it, as a [`Buf`] with one chunk per slice (a `writev` takes many at once).
    pub(crate) fn slices(&self) -> Slices {
        Slices {
            body: self.clone(),
            at: 0,
            offset: 0,
            remaining: self.len,
        }
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Body {
        Body::from_parts([b])
    }
}

/// A request's body as the client is handed it: made already, or made when its connection is
/// ready (and made again for a resend). Either way the client holds the body only while it
/// writes it: a run that releases 16,384 requests at once held 16,384 bodies of 8k-token
/// prompts while the connections opened.
#[derive(Clone)]
pub(crate) enum Payload {
    Ready(Body),
    Deferred(Arc<dyn Fn() -> Body + Send + Sync>),
}

impl Payload {
    /// The body to write now.
    pub(crate) fn body(&self) -> Body {
        match self {
            Payload::Ready(b) => b.clone(),
            Payload::Deferred(make) => make(),
        }
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Ready(Body::default())
    }
}

impl From<Body> for Payload {
    fn from(b: Body) -> Payload {
        Payload::Ready(b)
    }
}

impl From<Bytes> for Payload {
    fn from(b: Bytes) -> Payload {
        Payload::Ready(b.into())
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Payload::Ready(b) => f.debug_tuple("Ready").field(b).finish(),
            Payload::Deferred(_) => f.write_str("Deferred"),
        }
    }
}

/// Builds a [`Body`]: each slice pushed that lies inside a base ([`Self::base`]) is kept as an
/// offset into it, and joins the slice before it when the two are adjacent there; any other
/// slice becomes a source of its own, never searched again (a body of many own slices stays
/// linear to build).
#[derive(Default)]
pub(crate) struct BodyBuilder {
    /// The bases first (`..bases`), then the slices that lay in none.
    sources: Vec<Bytes>,
    bases: usize,
    pieces: Vec<Piece>,
    len: usize,
    /// The base the last slice was found in (slices mostly come from one buffer in a row).
    last: usize,
}

/// Where `inner` starts in `outer`, when it lies wholly inside it.
fn offset_in(outer: &[u8], inner: &[u8]) -> Option<usize> {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    (i >= o && i + inner.len() <= o + outer.len()).then(|| i - o)
}

impl BodyBuilder {
    /// Makes slices of `b` cost an offset (a shared corpus, the request's own bytes). Before
    /// any [`Self::push`]. Returns the index [`Self::push_range`] takes for it, or `None` when
    /// it cannot be a base (over 4 GiB, or slices were pushed already).
    pub(crate) fn base(&mut self, b: &Bytes) -> Option<u32> {
        debug_assert!(self.pieces.is_empty(), "bases come before the slices");
        let known = self.sources[..self.bases]
            .iter()
            .position(|s| s.as_ptr() == b.as_ptr() && s.len() == b.len());
        if let Some(i) = known {
            return Some(i as u32);
        }
        if b.len() <= u32::MAX as usize && self.sources.len() == self.bases {
            self.sources.push(b.clone());
            self.bases += 1;
            return Some(self.bases as u32 - 1);
        }
        None
    }

    /// Appends `range` of the base numbered `base` by [`Self::base`] (an empty range is
    /// nothing): no reference count touched.
    pub(crate) fn push_range(&mut self, base: u32, range: std::ops::Range<usize>) {
        assert!(
            (base as usize) < self.bases && range.end <= self.sources[base as usize].len(),
            "a range of a known base"
        );
        if !range.is_empty() {
            self.add(base as usize, range.start, range.len());
        }
    }

    /// Appends `part` (an empty one is nothing).
    pub(crate) fn push(&mut self, part: Bytes) {
        if part.is_empty() {
            return;
        }
        let found = std::iter::once(self.last)
            .chain(0..self.bases)
            .filter(|&i| i < self.bases)
            .find_map(|i| Some((i, offset_in(&self.sources[i], &part)?)));
        let Some((src, at)) = found else {
            // Its own source, in pieces a u32 can address.
            for chunk in (0..part.len()).step_by(u32::MAX as usize) {
                let piece = part.slice(chunk..part.len().min(chunk + u32::MAX as usize));
                self.sources.push(piece);
                let own = self.sources.len() - 1;
                self.add(own, 0, self.sources[own].len());
            }
            return;
        };
        self.last = src;
        self.add(src, at, part.len());
    }

    fn add(&mut self, src: usize, at: usize, n: usize) {
        self.len += n;
        let (src, start, end) = (src as u32, at as u32, (at + n) as u32);
        match self.pieces.last_mut() {
            Some(p) if p.src == src && p.end == start => p.end = end,
            _ => self.pieces.push(Piece { src, start, end }),
        }
    }

    pub(crate) fn finish(self) -> Body {
        Body {
            sources: self.sources.into(),
            pieces: self.pieces.into(),
            len: self.len,
        }
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
    body: Body,
    at: usize,
    offset: usize,
    remaining: usize,
}

impl Buf for Slices {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        if self.at < self.body.pieces.len() {
            &self.body.piece(self.at)[self.offset..]
        } else {
            &[]
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut offset = self.offset;
        for (slot, i) in dst.iter_mut().zip(self.at..self.body.pieces.len()) {
            *slot = IoSlice::new(&self.body.piece(i)[offset..]);
            offset = 0;
            n += 1;
        }
        n
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advanced past the body's end");
        self.remaining -= cnt;
        while cnt > 0 {
            let left = self.body.piece(self.at).len() - self.offset;
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
        assert_eq!(b.parts_count(), 4);
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

    /// Slices of a known buffer are offsets into it, adjacent ones join, and the bytes sent are
    /// the same whichever way the slices were given.
    #[test]
    fn slices_of_a_base_are_offsets_and_adjacent_ones_join() {
        let pool = Bytes::from_static(b" alpha beta gamma delta");
        let own = Bytes::from_static(b"{\"x\":\"");
        let mut b = Body::builder();
        b.base(&pool);
        b.base(&pool);
        b.push(own.clone());
        b.push(pool.slice(0..6)); // " alpha"
        b.push(pool.slice(6..11)); // " beta": adjacent, joins
        b.push(pool.slice(17..23)); // " delta"
        b.push(Bytes::new());
        b.push(pool.slice(11..17)); // " gamma": not adjacent to the slice before
        let body = b.finish();
        assert_eq!(&body.to_bytes()[..], b"{\"x\":\" alpha beta delta gamma");
        assert_eq!(body.len(), 29);
        assert_eq!(body.parts_count(), 4);
        assert_eq!(
            body.sources.len(),
            2,
            "the pool once, the unknown slice as its own"
        );
        let same = Body::from_parts(
            [&b"{\"x\":\""[..], b" alpha beta", b" delta", b" gamma"].map(Bytes::copy_from_slice),
        );
        assert_eq!(same.to_bytes(), body.to_bytes());
        // Sent across slices, byte for byte.
        let mut s = body.sending().0.unwrap();
        let mut io = [IoSlice::new(&[]); 8];
        assert_eq!(s.chunks_vectored(&mut io), 4);
        assert_eq!(&*io[1], b" alpha beta");
        s.advance(14);
        assert_eq!(s.chunk(), b"eta");
        let mut rest = Vec::new();
        while s.has_remaining() {
            let c = s.chunk().to_vec();
            rest.extend_from_slice(&c);
            s.advance(c.len());
        }
        assert_eq!(rest, b"eta delta gamma");
    }

    /// Only the bases are searched: a slice of an earlier slice that lay in none is a source of
    /// its own (so a body of n own slices is built in n steps, not n²), and the bytes still join
    /// in order.
    #[test]
    fn slices_outside_the_bases_are_their_own_sources_never_searched() {
        let pool = Bytes::from_static(b"abcdef");
        let own = Bytes::from_static(b"0123456789");
        let mut b = Body::builder();
        b.base(&pool);
        b.push(own.slice(0..4));
        b.push(own.slice(4..8)); // inside no base: its own source, not joined to the one before
        b.push(pool.slice(0..2));
        b.push(pool.slice(2..3));
        let body = b.finish();
        assert_eq!(&body.to_bytes()[..], b"01234567abc");
        assert_eq!(body.sources.len(), 3);
        assert_eq!(body.parts_count(), 3);
    }
}
