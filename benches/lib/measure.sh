# Measuring one command's process tree, for the bench scripts (sourced, not run).

# rss_tree PID: summed RSS (kB) of PID's descendants.
rss_tree() {
    ps -e -o pid=,ppid=,rss= | awk -v root="$1" '
        { parent[$1] = $2; rss[$1] = $3 }
        END { for (p in parent) { q = parent[p]; while (q > 1 && q != root) q = parent[q]; if (q == root) s += rss[p] } print s + 0 }'
}

# measure OUT CMD...: runs CMD under GNU time while a sampler records the tree's peak RSS every
# 0.05 s; the shell waits on CMD itself, so the end stamp is taken the moment it exits.
# Writes OUT.time, OUT.rss, OUT.launch_ns, OUT.end_ns.
measure() {
    local out=$1
    shift
    date +%s%N >"$out.launch_ns"
    /usr/bin/time -v -o "$out.time" "$@" >"$out.out" 2>"$out.err" &
    local tp=$!
    (
        max=0
        while kill -0 "$tp" 2>/dev/null; do
            cur=$(rss_tree "$tp")
            ((cur > max)) && max=$cur
            sleep 0.05
        done
        echo "$max" >"$out.rss"
    ) &
    local sp=$!
    wait "$tp" || echo "warning: $* exited $?" >&2
    date +%s%N >"$out.end_ns"
    wait "$sp"
}
