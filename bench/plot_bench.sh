#!/usr/bin/env bash
# Plots of the two flagship benchmarks for docs/ (gnuplot, PNG), from the CSV rows
# `case,impl,threads,metric,value` that run_resample_conv.sh and run_block_sparse.sh write:
#   OUT/resample_conv_scaling.png  forward time vs B, vs support points and vs A (1 and 2 threads)
#   OUT/block_sparse_rate.png      share of OpenBLAS's dense FLOP rate vs density, per block size
#   OUT/block_sparse_time.png      forward+backward time vs density against dense sgemm (crossover)
# usage: plot_bench.sh RESAMPLE_CSV BLOCK_SPARSE_CSV OUT_DIR   (either CSV may be "-" to skip it)
set -euo pipefail
rc=${1:?usage: plot_bench.sh RESAMPLE_CSV BLOCK_SPARSE_CSV OUT_DIR}
bs=${2:?usage: plot_bench.sh RESAMPLE_CSV BLOCK_SPARSE_CSV OUT_DIR}
out=${3:?usage: plot_bench.sh RESAMPLE_CSV BLOCK_SPARSE_CSV OUT_DIR}
command -v gnuplot >/dev/null || { echo "plot_bench.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$rc" != - ]; then
  # scale_<X><value>,xgrad,<threads>,fwd_ms,<ms>  ->  tmp/rc_<X>_<threads>.dat: value ms
  awk -F, -v dir="$tmp" '$2 == "xgrad" && $4 == "fwd_ms" && $1 ~ /^scale_[BSA][0-9]+$/ {
      x = substr($1, 7, 1); v = substr($1, 8); print v, $5 > (dir "/rc_" x "_" $3 ".dat") }' "$rc"
  for f in "$tmp"/rc_*.dat; do sort -n -o "$f" "$f"; done
  gnuplot <<GP
set terminal pngcairo size 1500,450 font ",11" noenhanced
set output "$out/resample_conv_scaling.png"
set multiplot layout 1,3 title "resample_conv forward, float32, N = 20 (medians; 2-vCPU EPYC VM)"
set grid
set key top left
set ylabel "forward time (ms)"
set yrange [0:*]
set xlabel "fine samples B (support fixed at 1500 points, A = 500)"
plot "$tmp/rc_B_1.dat" w lp pt 7 t "1 thread", "$tmp/rc_B_2.dat" w lp pt 5 t "2 threads"
set xlabel "support points w/dx (A = 500)"
plot "$tmp/rc_S_1.dat" w lp pt 7 t "1 thread", "$tmp/rc_S_2.dat" w lp pt 5 t "2 threads"
set xlabel "coarse points per row A (support 1500 points)"
plot "$tmp/rc_A_1.dat" w lp pt 7 t "1 thread", "$tmp/rc_A_2.dat" w lp pt 5 t "2 threads"
unset multiplot
GP
  echo "wrote $out/resample_conv_scaling.png"
fi

if [ "$bs" != - ]; then
  # rand_b<size>_d<inverse density>: time and share of the dense rate (density x dense time / time).
  awk -F, -v dir="$tmp" '
    $1 == "dense" && $2 == "openblas_sgemm" { dense[$3, $4] = $5 }
    $2 == "xgrad" && $1 ~ /^rand_b[0-9]+_d[0-9]+$/ && ($4 == "fwd_ms" || $4 == "fwdbwd_ms") { t[$1, $3, $4] = $5; cases[$1] = 1; th[$3] = 1 }
    END {
      for (c in cases) for (h in th) {
        split(substr(c, 7), p, "_d"); b = p[1]; d = 1.0 / p[2]
        f = t[c, h, "fwd_ms"]; fb = t[c, h, "fwdbwd_ms"]
        if (f == "" || fb == "" || dense[h, "fwd_ms"] == "") continue
        print d, 100 * d * dense[h, "fwd_ms"] / f, 100 * d * dense[h, "fwdbwd_ms"] / fb, f, fb > (dir "/bs_" b "_" h ".dat")
      }
      for (h in th) if (dense[h, "fwd_ms"] != "") print dense[h, "fwd_ms"], dense[h, "fwdbwd_ms"] > (dir "/dense_" h ".dat")
    }' "$bs"
  for f in "$tmp"/bs_*.dat; do sort -g -o "$f" "$f"; done
  plots_rate="" plots_time=""
  for b in 8 32 64 128; do
    for h in 1 2; do
      f="$tmp/bs_${b}_${h}.dat"
      [ -s "$f" ] || continue
      dash=$([ "$h" = 1 ] && echo 1 || echo 2)
      plots_rate+="\"$f\" u 1:3 w lp dt $dash lw 2 t \"${b}x${b}, $h thr\", "
      plots_time+="\"$f\" u 1:5 w lp dt $dash lw 2 t \"${b}x${b}, $h thr\", "
    done
  done
  dense1=$(cut -d' ' -f2 "$tmp/dense_1.dat" 2>/dev/null || echo 0)
  dense2=$(cut -d' ' -f2 "$tmp/dense_2.dat" 2>/dev/null || echo 0)
  gnuplot <<GP
set terminal pngcairo size 900,560 font ",11" noenhanced
set output "$out/block_sparse_rate.png"
set title "block_sparse_linear forward+backward: share of OpenBLAS's dense FLOP rate\n(4096 x 4096, batch 256, float32; FLOPs counted on the stored blocks)"
set logscale x 2
set xlabel "density (stored blocks / all blocks)"
set ylabel "% of dense sgemm rate"
set yrange [0:*]
set grid
set key outside right
plot ${plots_rate} 70 w l lc rgb "gray30" lw 1.5 dt 3 t "70% target (blocks >= 32)", 30 w l lc rgb "gray30" lw 1.5 dt 4 t "30% target (8x8)"
set output "$out/block_sparse_time.png"
set title "block_sparse_linear forward+backward time vs density: below the dense line, sparse wins\n(4096 x 4096, batch 256, float32)"
set logscale y
set ylabel "forward+backward (ms)"
set yrange [*:*]
plot ${plots_time} $dense1 w l lw 2 lc rgb "black" t "dense sgemm, 1 thr", $dense2 w l lw 2 dt 2 lc rgb "black" t "dense sgemm, 2 thr"
GP
  echo "wrote $out/block_sparse_rate.png and $out/block_sparse_time.png"
fi
