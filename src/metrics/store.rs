//! The aggregator's exact per-request values with bounded memory.
//!
//! Percentiles as numpy computes them need every value, and means summed in arrival order need
//! them in that order. An hour at a few hundred requests a second is a million requests, two
//! dozen values each: held in memory they grow a long run by a few hundred MB. So each column (one
//! metric's values, or the requests' spans) keeps its newest values in memory and, once the
//! columns together hold [`HELD_BYTES`], writes them to one unnamed temporary file (removed by
//! the OS when the process ends, however it ends), noting where each column's run of values went.
//! Reading a column back gives its values in arrival order, bit for bit.
//!
//! A temporary file that cannot be created or written costs nothing measured: the values stay in
//! memory from then on, and the summary says why ([`Store::warning`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

use super::key::MetricKey;
use super::time_weighted::{Done, Span};

/// Bytes of values held in memory before the columns are written out (about 2 MiB of spans
/// and 14 of metric values at a typical mix).
const HELD_BYTES: usize = 16 << 20;

/// A value of fixed encoded size.
pub(crate) trait Fixed: Copy {
    const SIZE: usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

impl Fixed for f64 {
    const SIZE: usize = 8;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        f64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Fixed for Span {
    /// sent, end, a flags byte (done, first token, isl), first token, isl, osl.
    const SIZE: usize = 8 + 8 + 1 + 8 + 8 + 8;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.sent_ns.to_le_bytes());
        out.extend_from_slice(&self.end_ns.to_le_bytes());
        let d = self.done;
        let first = d.and_then(|d| d.first_token_ns);
        let isl = d.and_then(|d| d.isl);
        out.push(
            u8::from(d.is_some()) | u8::from(first.is_some()) << 1 | u8::from(isl.is_some()) << 2,
        );
        for v in [first.unwrap_or(0), isl.unwrap_or(0), d.map_or(0, |d| d.osl)] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    fn get(b: &[u8]) -> Self {
        let flags = b[16];
        Span {
            sent_ns: u64_at(b, 0),
            end_ns: u64_at(b, 8),
            done: (flags & 1 != 0).then(|| Done {
                first_token_ns: (flags & 2 != 0).then(|| u64_at(b, 17)),
                isl: (flags & 4 != 0).then(|| u64_at(b, 25)),
                osl: u64_at(b, 33),
            }),
        }
    }
}

/// One column: where its older values went (file offset, count), then the newest in memory.
#[derive(Debug)]
struct Column<T> {
    written: Vec<(u64, usize)>,
    mem: Vec<T>,
}

impl<T> Default for Column<T> {
    fn default() -> Self {
        Column {
            written: Vec::new(),
            mem: Vec::new(),
        }
    }
}

impl<T: Fixed> Column<T> {
    fn len(&self) -> usize {
        self.written.iter().map(|w| w.1).sum::<usize>() + self.mem.len()
    }

    /// Appends the values in memory to `file` at `end` (advanced); they are then dropped.
    fn write_out(&mut self, file: &File, end: &mut u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
        if self.mem.is_empty() {
            return Ok(());
        }
        buf.clear();
        for v in &self.mem {
            v.put(buf);
        }
        file.write_all_at(buf, *end)?;
        self.written.push((*end, self.mem.len()));
        *end += buf.len() as u64;
        // The capacity goes too: a column that was large once must not hold its peak forever.
        self.mem = Vec::new();
        Ok(())
    }

    /// Every value in arrival order.
    fn read(&self, file: Option<&File>) -> std::io::Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.len());
        let mut buf = Vec::new();
        for &(at, n) in &self.written {
            let file = file.ok_or_else(|| std::io::Error::other("values written to no file"))?;
            buf.resize(n * T::SIZE, 0);
            file.read_exact_at(&mut buf, at)?;
            out.extend(buf.chunks_exact(T::SIZE).map(T::get));
        }
        out.extend_from_slice(&self.mem);
        Ok(out)
    }
}

/// The per-request values of one aggregator: a column per metric, and the spans.
#[derive(Debug, Default)]
pub(crate) struct Store {
    values: BTreeMap<MetricKey, Column<f64>>,
    spans: Column<Span>,
    /// Bytes held in memory by the columns.
    held: usize,
    file: Option<File>,
    end: u64,
    /// Why values are no longer written out (then every new value stays in memory).
    failed: Option<String>,
}

impl Store {
    pub(crate) fn push(&mut self, key: MetricKey, v: f64) {
        self.values.entry(key).or_default().mem.push(v);
        self.held_more(f64::SIZE);
    }

    pub(crate) fn push_span(&mut self, s: Span) {
        self.spans.mem.push(s);
        self.held_more(Span::SIZE);
    }

    fn held_more(&mut self, bytes: usize) {
        self.held += bytes;
        if self.held >= HELD_BYTES && self.failed.is_none() {
            if let Err(e) = self.write_out() {
                self.failed = Some(e.to_string());
            }
            self.held = 0;
            // The columns' buffers just freed (and the request path's freed since the last
            // write) go back to the OS: glibc would keep them resident for the rest of the run,
            // and an hour's run is judged by its size (issue 38's soak).
            crate::heap::trim();
        }
    }

    fn write_out(&mut self) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(tempfile::tempfile()?);
        }
        let file = self.file.as_ref().expect("created above");
        let mut buf = Vec::new();
        for c in self.values.values_mut() {
            c.write_out(file, &mut self.end, &mut buf)?;
        }
        self.spans.write_out(file, &mut self.end, &mut buf)?;
        (&*file).flush()
    }

    /// Whether `key` has any value.
    pub(crate) fn contains_key(&self, key: MetricKey) -> bool {
        self.values.contains_key(&key)
    }

    /// The metrics that have values.
    pub(crate) fn keys(&self) -> impl Iterator<Item = MetricKey> + '_ {
        self.values.keys().copied()
    }

    /// `key`'s values in arrival order (`None`: it has none). A value written out that cannot
    /// be read back is a broken temporary file: the summary must not quietly leave it out.
    pub(crate) fn get(&self, key: MetricKey) -> Option<Vec<f64>> {
        let c = self.values.get(&key)?;
        Some(c.read(self.file.as_ref()).unwrap_or_else(|e| {
            panic!(
                "cannot read back {} values of {} from the aggregator's temporary file: {e}",
                c.len(),
                key.as_str()
            )
        }))
    }

    /// The spans in arrival order.
    pub(crate) fn spans(&self) -> Vec<Span> {
        self.spans.read(self.file.as_ref()).unwrap_or_else(|e| {
            panic!("cannot read back the request spans from the aggregator's temporary file: {e}")
        })
    }

    /// Why values stopped going to the temporary file, for the summary's warnings.
    pub(crate) fn warning(&self) -> Option<String> {
        self.failed.as_ref().map(|e| {
            format!(
                "per-request values could not be written to a temporary file ({e}; $TMPDIR): \
                 they were kept in memory instead, so this run's memory grew with its requests"
            )
        })
    }

    /// Writes everything held to the file now, whatever is held (tests).
    #[cfg(test)]
    pub(crate) fn write_all_out(&mut self) {
        self.write_out().expect("temporary file");
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(i: u64) -> Span {
        Span {
            sent_ns: i,
            end_ns: i * 3 + 1,
            done: match i % 3 {
                0 => None,
                1 => Some(Done {
                    first_token_ns: Some(i + 7),
                    isl: None,
                    osl: i * 2,
                }),
                _ => Some(Done {
                    first_token_ns: None,
                    isl: Some(u64::MAX - i),
                    osl: 0,
                }),
            },
        }
    }

    #[test]
    fn values_come_back_in_arrival_order_bit_for_bit_across_writes() {
        let mut s = Store::default();
        let mut want: BTreeMap<MetricKey, Vec<f64>> = BTreeMap::new();
        let keys = [MetricKey::TimeToFirstToken, MetricKey::RequestLatency];
        let mut x = 0.1f64;
        for i in 0..10_000u64 {
            // Odd values: a -0.0, NaN's bits, subnormals, big and small.
            x = (x * 1.000_37 + 1e-300).sin() * 1e6;
            let v = match i % 997 {
                0 => -0.0,
                1 => f64::from_bits(0x7ff8_0000_0000_0123),
                2 => f64::MIN_POSITIVE / 3.0,
                _ => x,
            };
            let k = keys[(i % 3 == 0) as usize];
            s.push(k, v);
            want.entry(k).or_default().push(v);
            s.push_span(span(i));
            if i % 2_500 == 1_234 {
                s.write_all_out();
            }
        }
        assert!(s.file.is_some() && s.warning().is_none());
        for k in keys {
            let got = s.get(k).unwrap();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want[&k]), "{}", k.as_str());
        }
        assert!(s.get(MetricKey::InterTokenLatency).is_none());
        let spans = s.spans();
        assert_eq!(spans.len(), 10_000);
        for (i, got) in spans.iter().enumerate() {
            let w = span(i as u64);
            assert_eq!(
                (got.sent_ns, got.end_ns, format!("{:?}", got.done)),
                (w.sent_ns, w.end_ns, format!("{:?}", w.done))
            );
        }
    }

    #[test]
    fn memory_held_stays_under_the_bound_however_many_values_come() {
        let mut s = Store::default();
        let n = 3 * HELD_BYTES / 8;
        for i in 0..n {
            s.push(MetricKey::TimeToFirstToken, i as f64);
        }
        let in_mem: usize = s.values.values().map(|c| c.mem.capacity() * 8).sum();
        assert!(in_mem <= HELD_BYTES, "{in_mem} bytes held");
        let back = s.get(MetricKey::TimeToFirstToken).unwrap();
        assert_eq!(back.len(), n);
        assert!(back.iter().enumerate().all(|(i, v)| *v == i as f64));
    }
}
