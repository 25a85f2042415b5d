#!/usr/bin/env python3
"""What grew between two moments of one heaptrack recording, by allocation site.

    benches/heaptrack_diff.py HEAPTRACK_FILE T1 T2 [--top 40] [--detail TEXT]

HEAPTRACK_FILE is what `heaptrack -o F <command>` wrote (`F.zst`, read through `zstdcat`, or
already decompressed), finished or still being written (it is read up to T2). T1 and T2 are seconds from the start of the recording. The recording's
allocation and free events are replayed up to each moment; the live bytes of every allocation
site are compared, and the sites are grouped by the first four frames in specperf's own code
(`src/...`). Prints the heap at both moments, then the groups that grew most and shrank most.
`--detail TEXT` also lists, for the groups whose key contains TEXT, their full call stacks
(the first frames, library code included).

heaptrack_print's peak and massif views answer "what was largest", not "what grew": this is for
a soak whose memory rises (benches/README.md, issue 38's soak).
"""
import argparse
import subprocess
import sys


def events(path):
    if path.endswith(".zst"):
        p = subprocess.Popen(["zstdcat", path], stdout=subprocess.PIPE)
        yield from p.stdout
        p.wait()
    else:
        with open(path, "rb") as f:
            yield from f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("t1", type=float)
    ap.add_argument("t2", type=float)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--detail")
    a = ap.parse_args()
    t1, t2 = a.t1 * 1000, a.t2 * 1000  # the recording's clock is in ms

    strings, ips, traces = [None], [None], [None]
    size, trace_of, live = [], [], []
    snaps = []
    now = 0
    for line in events(a.file):
        if not line.endswith(b"\n"):
            break  # a recording still being written (or cut off) ends mid-line
        c = line[:1]
        if c == b"+":
            live[int(line[2:], 16)] += 1
        elif c == b"-":
            live[int(line[2:], 16)] -= 1
        elif c == b"a":  # allocation info: size, trace
            _, s, t = line.split()
            size.append(int(s, 16))
            trace_of.append(int(t, 16))
            live.append(0)
        elif c == b"c":  # timestamp
            now = int(line[2:], 16)
            while len(snaps) < 2 and now >= (t1, t2)[len(snaps)]:
                snaps.append(list(live))
            if len(snaps) == 2:
                break  # nothing later matters; a recording still being written can be read
        elif c == b"s":
            strings.append(line[2:].rstrip(b"\n").split(b" ", 1)[1].decode(errors="replace"))
        elif c == b"i":  # ip, module, then (function, file, line) per inlined frame
            rest = line.split()[3:]
            ips.append([tuple(int(x, 16) for x in rest[k:k + 3]) for k in range(0, len(rest) - 2, 3)]
                       or [(int(rest[0], 16), 0, 0)] if rest else [])
        elif c == b"t":
            _, ip, parent = line.split()
            traces.append((int(ip, 16), int(parent, 16)))
    if len(snaps) < 2:
        sys.exit(f"the recording ends at {now / 1000:.0f} s, before {a.t2:g} s")
    at = lambda snap, i: snap[i] if i < len(snap) else 0
    heap = lambda snap: sum(n * size[i] for i, n in enumerate(snap))
    print(f"heap at {a.t1:g} s: {heap(snaps[0]) / 1e6:.1f} MB; at {a.t2:g} s: {heap(snaps[1]) / 1e6:.1f} MB")

    by_trace = {}
    for i, sz in enumerate(size):
        d = (at(snaps[1], i) - at(snaps[0], i)) * sz
        if d:
            by_trace[trace_of[i]] = by_trace.get(trace_of[i], 0) + d

    def frames(t):
        out = []
        while t:
            ip, t = traces[t]
            for fn, fl, ln in ips[ip]:
                out.append((strings[fn] if fn else "?", strings[fl] if fl else "?", ln))
        return out

    def key(fr):
        ours = [f"{fn[:60]} @ {fl}:{ln}" for fn, fl, ln in fr if fl.startswith("src/")][:4]
        return " <- ".join(ours) or " <- ".join(f"{fn[:40]} @ {fl.rsplit('/', 1)[-1]}:{ln}" for fn, fl, ln in fr[:6])

    groups, stacks = {}, {}
    for t, d in by_trace.items():
        fr = frames(t)
        k = key(fr)
        groups[k] = groups.get(k, 0) + d
        if a.detail and a.detail in k:
            s = " | ".join(f"{fn[:50]} @ {fl.rsplit('/', 1)[-1]}:{ln}" for fn, fl, ln in fr[:14])
            stacks[s] = stacks.get(s, 0) + d
    print(f"grew {sum(groups.values()) / 1e6:.2f} MB in all; most:")
    for k, d in sorted(groups.items(), key=lambda x: -x[1])[:a.top]:
        print(f"{d / 1e6:9.3f} MB  {k}")
    print("shrank most:")
    for k, d in sorted(groups.items(), key=lambda x: x[1])[:8]:
        print(f"{d / 1e6:9.3f} MB  {k}")
    for s, d in sorted(stacks.items(), key=lambda x: -x[1])[:12]:
        print(f"\n{d / 1e6:9.3f} MB  {s}")


if __name__ == "__main__":
    main()
