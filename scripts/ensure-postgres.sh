#!/usr/bin/env bash
# ensure-postgres.sh makes a PostgreSQL available for `make test`, in the
# order the test harness (repo/repotest) looks for one:
#
#   1. LEASEAPI_TEST_DATABASE_URL is set: the tests use it; nothing to do.
#   2. A server answers on 127.0.0.1:5432: the tests use it; nothing to do.
#   3. A local cluster (Debian's postgresql-common) on port 5432 is down:
#      start it.
#   4. A Docker daemon answers: the harness starts Postgres with dockertest.
#   5. Root on Debian/Ubuntu: install PostgreSQL from the distribution
#      packages, trust TCP connections of user postgres from the loopback
#      address, and start it.
#   6. Otherwise print one line saying what to do and exit 1.
#
# It is idempotent and prints nothing when nothing had to be done.
set -euo pipefail

readonly host=127.0.0.1 port=5432
# Where Debian keeps cluster configuration (overridable for testing the script).
readonly pg_etc=${ENSURE_POSTGRES_ETC:-/etc/postgresql}
readonly marker="# leaseapi scripts/ensure-postgres.sh: trust the test user over loopback"

say() { echo "ensure-postgres: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

ready() {
	if have pg_isready; then
		pg_isready -q -h "$host" -p "$port" -t 2
	else
		# Without the client tools, an open port is the best we can tell.
		(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
	fi
}

wait_ready() {
	local i
	for ((i = 0; i < 60; i++)); do
		ready && return 0
		sleep 0.5
	done
	say "PostgreSQL on $host:$port did not become ready within 30 s"
	return 1
}

# cluster_on_port prints "version name status" of the local cluster that
# listens on $port, if there is one.
cluster_on_port() {
	have pg_lsclusters || return 0
	pg_lsclusters --no-header 2>/dev/null | awk -v p="$port" '$3 == p { print $1, $2, $4; exit }'
}

start_cluster() {
	local version=$1 name=$2
	say "starting PostgreSQL cluster $version/$name"
	pg_ctlcluster --skip-systemctl-redirect "$version" "$name" start
	wait_ready
}

# trust_loopback lets user postgres connect over TCP from the loopback
# address without a password, as the tests do. pg_hba.conf is read top down,
# so the lines go first; the marker makes a second run a no-op.
trust_loopback() {
	local version=$1 name=$2
	local hba="$pg_etc/$version/$name/pg_hba.conf"
	grep -qF "$marker" "$hba" && return 0
	say "trusting user postgres on $host and ::1 in $hba"
	local tmp
	tmp=$(mktemp)
	{
		echo "$marker"
		echo "host all postgres 127.0.0.1/32 trust"
		echo "host all postgres ::1/128 trust"
		cat "$hba"
	} >"$tmp"
	cat "$tmp" >"$hba" # keeps the file's owner and mode
	rm -f "$tmp"
}

install_postgres() {
	say "installing PostgreSQL from the distribution packages (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq postgresql >/dev/null
	local version name status
	read -r version name status < <(cluster_on_port) || true
	if [[ -z ${version:-} ]]; then
		say "apt-get installed PostgreSQL but no cluster listens on port $port (see pg_lsclusters)"
		exit 1
	fi
	trust_loopback "$version" "$name"
	if [[ $status == online ]]; then
		pg_ctlcluster --skip-systemctl-redirect "$version" "$name" reload
		wait_ready
	else
		start_cluster "$version" "$name"
	fi
}

main() {
	[[ -n ${LEASEAPI_TEST_DATABASE_URL:-} ]] && return 0
	ready && return 0

	local version name status
	if read -r version name status < <(cluster_on_port) && [[ -n ${version:-} ]]; then
		if [[ $status == online ]]; then
			say "cluster $version/$name is running but does not answer on $host:$port (check listen_addresses and pg_hba.conf)"
			return 1
		fi
		start_cluster "$version" "$name"
		return 0
	fi

	if have docker && docker info >/dev/null 2>&1; then
		return 0 # repotest starts Postgres with dockertest
	fi

	if have apt-get && [[ $(id -u) -eq 0 ]]; then
		install_postgres
		return 0
	fi

	say "no PostgreSQL for the tests: set LEASEAPI_TEST_DATABASE_URL, start one on $host:$port, start Docker, or run scripts/ensure-postgres.sh as root on Debian/Ubuntu to install one"
	return 1
}

main "$@"
