#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module for a bounded time, one
# after the other, and fails on the first crash (the failing input is
# written under the package's testdata/fuzz/<Target>/: commit it as a
# regression seed once fixed).
#
# Targets are discovered, never listed: the packages whose _test.go files
# declare a `func Fuzz...` are asked with `go test -list '^Fuzz'`, so a
# target added later is run without touching this script. Each package's
# instrumented test binary is built once (go test -c -fuzz) and run for
# each of its targets, as go test -fuzz would run it.
#
#   FUZZ_BUDGET  seconds for all of it, builds included (default 120); each
#                target gets an equal share of what is left, at least
#                FUZZ_MIN seconds (default 2)
#   FUZZTIME     a fixed -fuzztime per target instead (e.g. 8s or 500x)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
budget=${FUZZ_BUDGET:-120}
min=${FUZZ_MIN:-2}
start=$SECONDS

bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
fuzz_cache=$($GO env GOCACHE)/fuzz

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
echo "fuzz: ${#targets[@]} targets in ${budget} s${FUZZTIME:+ (-fuzztime $FUZZTIME each)}"

out=$bin_dir/out
# fuzz_one runs target name of package dir with binary bin for $1, its
# output also in $out. In the package's directory, for its testdata; the
# cache is go test's own. -test.fuzzminimizetime bounds the minimization of
# a crashing input (60 s by default).
fuzz_one() {
	(cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$1" \
		-test.fuzzminimizetime=10s -test.fuzzcachedir="$fuzz_cache/$import_path" -test.timeout=10m -test.paniconexit0) 2>&1 | tee "$out"
}

left=${#targets[@]}
built=""
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	bin=$bin_dir/$(echo "${dir#./}" | tr '/.' '__').test
	if [[ $built != "$dir" ]]; then
		$GO test -c -fuzz=. -o "$bin" "$dir"
		import_path=$($GO list "$dir")
		built=$dir
	fi
	fuzztime=${FUZZTIME:-}
	if [[ -z $fuzztime ]]; then
		each=$(((budget - (SECONDS - start)) / left))
		((each < min)) && each=$min
		fuzztime=${each}s
	fi
	echo "fuzz: $dir $name for $fuzztime"
	if ! fuzz_one "$fuzztime"; then
		# A -fuzztime that ends while the fuzzer still gathers the baseline
		# coverage of the corpus fails with "context deadline exceeded"
		# (a busy machine): that is no crash; once more with longer.
		if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input' "$out"; then
			echo "fuzz: $name: the baseline coverage took longer than $fuzztime; again for 15s"
			fuzz_one 15s
		else
			exit 1
		fi
	fi
	left=$((left - 1))
done
echo "fuzz: ${#targets[@]} targets passed in $((SECONDS - start)) s"
