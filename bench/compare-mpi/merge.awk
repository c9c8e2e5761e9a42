# merge.awk -- median time per (library, size, in-place) over repeated perf JSON runs; prints,
# per size, each library's better mode (time, bus bandwidth) and the ratio mpi time / tutti
# time. Input: the JSON rows of tutti-perf / mpi-perf -J, one object per line.

/"library"/ {
    lib = $0; sub(/.*"library": "/, "", lib); sub(/".*/, "", lib)
    size = $0; sub(/.*"size": /, "", size); sub(/,.*/, "", size)
    t = $0; sub(/.*"time_us": /, "", t); sub(/,.*/, "", t)
    bw = $0; sub(/.*"busbw": /, "", bw); sub(/,.*/, "", bw)
    ip = ($0 ~ /"inplace": true/)
    w = $0; sub(/.*"wrong": /, "", w); sub(/}.*/, "", w)
    if (w + 0 > 0) bad = 1
    if (size + 0 == 0) next   # nothing moves: not a measurement
    key = lib SUBSEP size SUBSEP ip
    cnt[key]++; tv[key, cnt[key]] = t; bv[key, cnt[key]] = bw
    sizes[size] = 1
}
function median(key, arr,   k, m, i, j, x) {
    m = cnt[key]
    for (i = 1; i <= m; i++) x[i] = arr[key, i] + 0
    for (i = 2; i <= m; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { k = x[j]; x[j] = x[j - 1]; x[j - 1] = k }
    return m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
}
# Per library: the mode (out-of-place / in-place) with the lower median time.
function best(lib, size,   t0, t1, k0, k1) {
    k0 = lib SUBSEP size SUBSEP 0; k1 = lib SUBSEP size SUBSEP 1
    t0 = cnt[k0] ? median(k0, tv) : -1; t1 = cnt[k1] ? median(k1, tv) : -1
    if (t1 >= 0 && (t0 < 0 || t1 < t0)) { bt = t1; bb = median(k1, bv) } else { bt = t0; bb = median(k0, bv) }
}
END {
    n = 0; for (s in sizes) list[++n] = s + 0
    for (i = 2; i <= n; i++) for (j = i; j > 1 && list[j - 1] > list[j]; j--) { k = list[j]; list[j] = list[j - 1]; list[j - 1] = k }
    for (i = 1; i <= n; i++) {
        s = list[i]
        best("tutti", s); tt = bt; tb = bb
        best("mpi", s); mt = bt; mb = bb
        if (tt < 0 || mt < 0) continue
        printf "  %11d %12.2f %12.2f %10.3f %10.3f %8.2f\n", s, tt, mt, tb, mb, (tt > 0 ? mt / tt : 0)
    }
    if (bad) print "# WRONG RESULTS were reported: see the logs"
}