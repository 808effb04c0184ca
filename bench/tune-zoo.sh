#!/usr/bin/env bash
# bench/tune-zoo.sh: whole-process wall time and peak memory (max RSS) of
# `fsdpc plan -tune` for every zoo model, medians of COUNT runs. With two
# binaries the runs alternate (same load for both) and a ratio column
# says before/after.
#
#   go build -o /tmp/fsdpc.before ./cmd/fsdpc    # at the old commit
#   go build -o /tmp/fsdpc.after ./cmd/fsdpc
#   COUNT=5 bench/tune-zoo.sh /tmp/fsdpc.before /tmp/fsdpc.after
set -euo pipefail
count=${COUNT:-5}
bins=("$@")
[ ${#bins[@]} -ge 1 ] || { echo "usage: bench/tune-zoo.sh fsdpc [fsdpc.after]" >&2; exit 2; }
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
models=$(ls plans/*.toml | xargs -n1 basename | sed 's/\.toml$//')
for m in $models; do
	for ((r = 0; r < count; r++)); do
		for i in "${!bins[@]}"; do
			/usr/bin/time -f "%e %M" -o "$tmp/t" "${bins[$i]}" plan -tune -o "$tmp/p.bin" "$m" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
			cat "$tmp/t" >>"$tmp/$m.$i"
		done
	done
done
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
printf "plan -tune, medians of %d runs (wall ms, max RSS MiB)\n" "$count"
for m in $models; do
	line=$(printf "%-16s" "$m")
	for i in "${!bins[@]}"; do
		ms=$(awk '{print $1*1000}' "$tmp/$m.$i" | median)
		mib=$(awk '{print $2/1024}' "$tmp/$m.$i" | median)
		line+=$(printf " %8.0f ms %6.0f MiB" "$ms" "$mib")
		eval "ms$i=$ms mib$i=$mib"
	done
	if [ ${#bins[@]} -eq 2 ]; then
		line+=$(awk -v a="$ms0" -v b="$ms1" -v c="$mib0" -v d="$mib1" 'BEGIN {printf "   time %.2fx  memory %.2fx", a/b, c/d}')
	fi
	echo "$line"
done
