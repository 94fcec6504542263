#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module for a bounded time, one
# after the other, and fails on the first crash (go test writes the failing
# input under the package's testdata/fuzz/<Target>/: commit it as a
# regression seed once fixed).
#
# Targets are discovered, never listed: the packages whose _test.go files
# declare a `func Fuzz...` are asked with `go test -list '^Fuzz'`, so a
# target added later is run without touching this script.
#
#   FUZZ_BUDGET  seconds for all targets together (default 120); each gets
#                an equal share, at least FUZZ_MIN seconds (default 3)
#   FUZZTIME     a fixed -fuzztime per target instead (e.g. 8s or 500x)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
budget=${FUZZ_BUDGET:-120}
min=${FUZZ_MIN:-3}

# Packages with a fuzz target in a test file (the module's own, not the
# nested modules'), then their targets as go test lists them.
mapfile -t dirs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Z0-9_]' . |
	grep -vE '^\./(api/lint|bench/peers|deploy/helm/test)/' | xargs -r -n1 dirname | sort -u)
targets=()
for dir in "${dirs[@]}"; do
	while read -r name; do
		[[ $name == Fuzz* ]] && targets+=("$dir $name")
	done < <($GO test -list '^Fuzz' "$dir")
done
if ((${#targets[@]} == 0)); then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi

fuzztime=${FUZZTIME:-}
if [[ -z $fuzztime ]]; then
	each=$((budget / ${#targets[@]}))
	((each < min)) && each=$min
	fuzztime=${each}s
fi
echo "fuzz: ${#targets[@]} targets, -fuzztime $fuzztime each"

start=$SECONDS
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	echo "fuzz: $dir $name"
	# -fuzzminimizetime bounds the minimization of a crashing input, which
	# is 60 s by default.
	$GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 10s "$dir"
done
echo "fuzz: ${#targets[@]} targets passed in $((SECONDS - start)) s"
