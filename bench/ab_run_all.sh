#!/usr/bin/env bash
# Every benchmark of bench/run_all.sh for two builds (a refactor's before and after) in one sitting:
# runs run_all.sh on BEFORE_DIR's and AFTER_DIR's benchmark programs alternately, ROUNDS times each,
# then prints, for every CSV row the drivers print (case,impl,threads,metric,value), the median of
# each build and after/before. The peers' rows are the same programs in both builds, so their
# after/before shows the noise of the sitting; xgrad's rows show the change. Both directories must
# hold release builds of the benchmarks (build/release/bench); REPS is passed on to run_all.sh.
# usage: ab_run_all.sh BEFORE_DIR AFTER_DIR ROUNDS
#   e.g. REPS=2 bash bench/ab_run_all.sh /tmp/old/build/release/bench "$PWD/build/release/bench" 2
set -euo pipefail
[[ $# -eq 3 ]] || {
  echo "usage: ab_run_all.sh BEFORE_DIR AFTER_DIR ROUNDS" >&2
  exit 2
}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
before=$(realpath "$1") after=$(realpath "$2") rounds=$3 out=out/ab_run_all
rm -rf "$out"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    dir=$before
    [[ $side == after ]] && dir=$after
    BENCH_DIR=$dir OUT=$out/$side.$r bash bench/run_all.sh >"$out.$side.$r.log" 2>&1 ||
      echo "ab_run_all: run_all.sh failed for $side round $r (see $out.$side.$r.log)" >&2
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import collections, glob, os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
row = re.compile(r'^([^#,]+),([^,]+),([^,]+),([^,]+),([-0-9.e+]+)$')
runs = collections.defaultdict(lambda: {'before': [], 'after': []})
for side in ('before', 'after'):
    for r in range(1, rounds + 1):
        for path in sorted(glob.glob(f'{out}/{side}.{r}/*.txt')):
            driver = os.path.basename(path)[:-4]
            for line in open(path):
                if line.startswith('## ') or line.startswith('# ours'):
                    break  # the drivers' tables follow their raw rows
                m = row.match(line.strip())
                if m and m.group(1) != 'case':
                    runs[(driver,) + m.groups()[:4]][side].append(float(m.group(5)))
print('driver,case,impl,threads,metric,before,after,after/before')
# The summary: wall-time rows only (metrics *_ms, ms, us; not CPU time, counts or sizes), per driver
# and thread count, xgrad's rows beside the peers' (the sitting's drift and noise).
summary = collections.defaultdict(lambda: {'xgrad': [], 'peer': []})
for (driver, case, impl, threads, metric), v in sorted(runs.items()):
    if v['before'] and v['after'] and statistics.median(v['before']) > 0:
        a, b = statistics.median(v['before']), statistics.median(v['after'])
        print(f'{driver},{case},{impl},{threads},{metric},{a:.4g},{b:.4g},{b / a:.3f}')
        if (metric.endswith('_ms') or metric in ('ms', 'us')) and 'cpu' not in metric:
            who = 'xgrad' if impl.startswith('xgrad') else 'peer'
            summary[(driver, threads)][who].append(b / a)
            summary[('all', '1, 2')][who].append(b / a)


def cell(q):
    if not q:
        return '- | - | -'
    q = sorted(q)
    pick = lambda f: q[min(len(q) - 1, int(f * len(q)))]
    return f'{len(q)} | {statistics.median(q):.3f} | {pick(0.1):.2f}-{pick(0.9):.2f}'


print()
print('| driver | threads | xgrad rows | xgrad median after/before | xgrad 10-90% | peer rows | peer median | peer 10-90% |')
print('|---|---|---|---|---|---|---|---|')
for key in sorted(summary, key=lambda k: (k[0] == 'all', k)):
    v = summary[key]
    print(f'| {key[0]} | {key[1]} | {cell(v["xgrad"])} | {cell(v["peer"])} |')
PY
