#!/usr/bin/env bash
# ensure-promtool.sh makes promtool and prometheus available for `make test`:
# the tests of deploy/monitoring run `promtool check rules` and `promtool
# test rules` on the alerting rules, and cmd/leaseapi runs `promtool check
# metrics` on a live /metrics and lets a prometheus of its own (on a loopback
# port, with a temporary config) scrape a leaseapi.
#
#   1. promtool and prometheus are on PATH: nothing to do.
#   2. Root on Debian/Ubuntu: install the distribution's prometheus package
#      (it ships both) without its recommends, and without letting the
#      package start the prometheus system service: the tests start their
#      own, and a service on :9090 is nothing a test machine should keep.
#   3. Otherwise print one line saying what to do and exit 1.
#
# It is idempotent and prints nothing when nothing had to be done. Only the
# tests need it: `make run` and `make build` never do.
set -euo pipefail

readonly policy=/usr/sbin/policy-rc.d

say() { echo "ensure-promtool: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

# forbid_service_starts makes invoke-rc.d refuse to start services while the
# package installs (exit 101 is "action forbidden" in Debian's policy
# interface), unless a policy is in place already (container images keep
# one); a policy we wrote is removed on exit.
forbid_service_starts() {
	[[ -e $policy ]] && return 0
	printf '#!/bin/sh\n# leaseapi scripts/ensure-promtool.sh: no service starts during the install\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
}

# stop_service stops and disables a prometheus service that a systemd
# started regardless (systemd does not consult policy-rc.d for units it
# starts through deb-systemd-invoke on every release).
stop_service() {
	if have systemctl && systemctl is-active --quiet prometheus 2>/dev/null; then
		say "stopping and disabling the prometheus system service (the tests start their own)"
		systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
}

install_prometheus() {
	say "installing promtool and prometheus from the distribution packages (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	forbid_service_starts
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	stop_service
	if ! have promtool || ! have prometheus; then
		say "apt-get installed prometheus but promtool or prometheus is not on PATH"
		exit 1
	fi
}

main() {
	have promtool && have prometheus && return 0

	if have apt-get && [[ $(id -u) -eq 0 ]]; then
		install_prometheus
		return 0
	fi

	say "no promtool for the tests: install Prometheus (promtool and prometheus on PATH), or run scripts/ensure-promtool.sh as root on Debian/Ubuntu to install the distribution's package"
	return 1
}

main "$@"
