#!/bin/sh
# SPDX-License-Identifier: MIT
# thp-verdicts.sh LIBPPIPE PPIPE-BENCH [PROCESSES] [ROUNDS]
#
# What PPIPE_THP=auto decides on this kernel, and whether it is right:
# runs PROCESSES (50) short ppipe-bench processes with default options
# and counts their huge-page verdicts, then runs 1 MiB and 64 KiB writes
# through a 1 MiB pipe with huge-page rings forced on and off, ROUNDS (3)
# alternating rounds, and prints the median on/off throughput ratios.
# The verdict is right when it is "on" where the ratio is above 1.
# POSIX sh and awk only, so that it also runs in a minimal guest
# (busybox) to check another kernel.
set -eu
lib=$1
bench=$2
procs=${3:-50}
rounds=${4:-3}

verdict() {
	PPIPE_STATS=1 LD_PRELOAD=$lib "$bench" -s 1M -p 1M -d "$1" 2>&1 >/dev/null |
		sed -n 's/.*"thp":"\([a-z]*\)[,:].*/\1/p' | head -n 1
}

mbps() {
	PPIPE_THP=$1 LD_PRELOAD=$lib "$bench" -s "$2" -p 1M -d 1 |
		sed -n 's/^throughput_MBps: //p'
}

echo "kernel $(uname -r), THP mode: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
on=0 off=0 other=0
i=0
while [ "$i" -lt "$procs" ]; do
	case $(verdict 0.5) in
	on) on=$((on + 1)) ;;
	off) off=$((off + 1)) ;;
	*) other=$((other + 1)) ;;
	esac
	i=$((i + 1))
done
echo "verdicts over $procs processes: on $on, off $off, undecided $other"

for size in 1M 64K; do
	ratios=
	r=0
	while [ "$r" -lt "$rounds" ]; do
		a=$(mbps on "$size")
		b=$(mbps off "$size")
		ratios="$ratios $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')"
		r=$((r + 1))
	done
	echo "$ratios" | awk -v s="$size" '{
		n = split($0, v, " ")
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		printf "forced huge-page rings / 4 KiB-page rings, %s writes: median %.2fx of%s\n", s, m, $0
	}'
done
