#!/usr/bin/env bash
# ensure-packages.sh makes the programs that tests and benchmarks run
# available, from the distribution's packages, without starting their
# services. Each argument is COMMAND:PACKAGE, e.g.
#
#   scripts/ensure-packages.sh promtool:prometheus chromium:chromium
#
# or py/MODULE:PACKAGE for a Python module that must import in $PYTHON
# (default /usr/bin/python3, the distribution's), e.g. py/celery:python3-celery.
#
#   1. Every COMMAND is on PATH (every MODULE imports): nothing to do.
#   2. Root on Debian/Ubuntu: install the missing PACKAGEs without their
#      recommends, and without letting the packages start their system
#      services: the tests and the benchmark start their own, on loopback
#      ports and in temporary directories, and a prometheus on :9090 or an
#      etcd on :2379 is nothing a test machine should keep.
#   3. Otherwise print one line saying what to install and exit 1.
#
# It is idempotent and prints nothing when nothing had to be done. `make run`
# and `make build` never need it.
set -euo pipefail

readonly policy=/usr/sbin/policy-rc.d

say() { echo "ensure-packages: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

readonly python=${PYTHON:-/usr/bin/python3}

# present COMMAND: COMMAND is on PATH, or for py/MODULE, MODULE imports.
present() {
	if [[ $1 == py/* ]]; then
		[[ -x $python ]] && "$python" -c "import ${1#py/}" >/dev/null 2>&1
	else
		have "$1"
	fi
}

# forbid_service_starts makes invoke-rc.d refuse to start services while the
# packages install (exit 101 is "action forbidden" in Debian's policy
# interface), unless a policy is in place already (container images keep
# one); a policy we wrote is removed on exit.
forbid_service_starts() {
	[[ -e $policy ]] && return 0
	printf '#!/bin/sh\n# leaseapi scripts/ensure-packages.sh: no service starts during the install\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
}

# stop_services stops and disables the systemd units a package ships if a
# systemd started them regardless (it does not consult policy-rc.d for units
# started through deb-systemd-invoke on every release).
stop_services() {
	have systemctl || return 0
	local pkg unit
	for pkg in "$@"; do
		while read -r unit; do
			if systemctl is-active --quiet "$unit" 2>/dev/null; then
				say "stopping and disabling $unit (the tests start their own)"
				systemctl disable --now "$unit" >/dev/null 2>&1 || true
			fi
		done < <(dpkg -L "$pkg" 2>/dev/null | sed -n 's|^/lib/systemd/system/\([^/]*\.service\)$|\1|p')
	done
}

main() {
	local arg cmd pkg missing=() packages=()
	for arg in "$@"; do
		cmd=${arg%%:*} pkg=${arg#*:}
		if [[ -z $cmd || -z $pkg || $arg != *:* ]]; then
			say "want COMMAND:PACKAGE arguments, got '$arg'"
			return 2
		fi
		present "$cmd" && continue
		missing+=("$cmd")
		[[ " ${packages[*]} " == *" $pkg "* ]] || packages+=("$pkg")
	done
	((${#missing[@]} == 0)) && return 0

	if ! have apt-get || [[ $(id -u) -ne 0 ]]; then
		say "${missing[*]} not on PATH: install the packages ${packages[*]} (or run scripts/ensure-packages.sh $* as root on Debian/Ubuntu)"
		return 1
	fi

	say "installing ${packages[*]} from the distribution packages (apt-get) for ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	forbid_service_starts
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
	stop_services "${packages[@]}"
	for cmd in "${missing[@]}"; do
		if ! present "$cmd"; then
			say "apt-get installed ${packages[*]} but $cmd is not on PATH (or does not import in $python)"
			return 1
		fi
	done
}

main "$@"
