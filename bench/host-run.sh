#!/usr/bin/env bash
# bench/host-run.sh: a whole `fsdpc run --backend host` of one zoo model
# (gpt2-124m by default), medians of COUNT runs: wall and system time of
# the process and the step it reports (step (median)). Each binary plans
# the model itself first, so binaries that write different plan.bin
# versions compare on their own plans. With two binaries the runs
# alternate (same load for both) and a ratio column says before/after.
#
#   go build -o /tmp/fsdpc.before ./cmd/fsdpc    # at the old commit
#   go build -o /tmp/fsdpc.after ./cmd/fsdpc
#   COUNT=9 bench/host-run.sh /tmp/fsdpc.before /tmp/fsdpc.after
#
# MODEL (a plans/*.toml name) and SCALE (--scale, 32) choose the run.
set -euo pipefail
count=${COUNT:-5}
model=${MODEL:-gpt2-124m}
scale=${SCALE:-32}
bins=("$@")
[ ${#bins[@]} -ge 1 ] || { echo "usage: bench/host-run.sh fsdpc [fsdpc.after]" >&2; exit 2; }
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in "${!bins[@]}"; do
	"${bins[$i]}" plan "plans/$model.toml" -o "$tmp/p$i.bin" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
done
# ms converts a Go duration (850µs, 151.4ms, 1.2s) to milliseconds.
ms() { awk '{v=$1; if (v ~ /µs$/) print v/1000; else if (v ~ /ms$/) print v+0; else if (v ~ /s$/) print v*1000; else print v}'; }
for ((r = 0; r < count; r++)); do
	for i in "${!bins[@]}"; do
		/usr/bin/time -f "%e %S" -o "$tmp/t" "${bins[$i]}" run --backend host --scale "$scale" --steps 1 "$tmp/p$i.bin" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
		step=$(awk '/step \(median\)/ {print $3}' "$tmp/out" | ms)
		read -r wall sys <"$tmp/t"
		echo "$wall $sys $step" >>"$tmp/r$i"
	done
done
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
printf "fsdpc run --backend host --scale %s --steps 1 %s, medians of %d runs\n" "$scale" "$model" "$count"
for col in 1 2 3; do
	name=$(echo "wall system step" | cut -d' ' -f$col)
	line=$(printf "%-8s" "$name")
	for i in "${!bins[@]}"; do
		v=$(awk -v c=$col '{print $c*(c<3?1000:1)}' "$tmp/r$i" | median)
		line+=$(printf " %10.1f ms" "$v")
		eval "v$i=$v"
	done
	if [ ${#bins[@]} -eq 2 ]; then
		line+=$(awk -v a="$v0" -v b="$v1" 'BEGIN {printf "   %.2fx", a/b}')
	fi
	echo "$line"
done
